"""The GPU designs of softmax / log_softmax, the norms and cross_entropy: row teams (cltorch/ops/softmax/team.py,
ops/norms/team.py, ops/softmax/cross_entropy.py; cl_kernels/row_team.cl.mako, softmax_team.cl.mako,
norm_team.cl.mako).

Plan tests (pure Python, a fake NVIDIA H200: 132 compute units) state the parallelism the GPU needs: softmax over
8192 x 4096 puts all 8192 rows in flight, each row's team reading 128 contiguous bytes per load and holding the row in
registers (one read, one write); LayerNorm 32768 x 1024 runs one kernel forward and one backward with the row in
registers, and its weight and bias gradients launch at least 2 work-groups per compute unit with neighbouring
work-items on neighbouring columns; BatchNorm of the CNN benchmark's shape runs at least 2 groups per unit.

Value tests run the designs on the 'cpu' device (PoCL, or Intel's runtime) under the NVIDIA configuration (the
profile swapped in-process, with the vendor's launch limits) against torch at stress shapes (rows of 1, 7, 33,
1000, 4096 and 10000 elements, more than 65,535 rows, strided and transposed rows, a dim other than the last), and
check that the GPU designs give the CPU designs' bits: forward and backward, cached rows and streamed ones (a profile
with a small register cache), and in deterministic mode. tests/test_kernel_configs.py runs them under every GPU
configuration and under Oclgrind with data-race checks. Where clang-15 and CUDA's ptxas are installed, the largest
team kernels, with the PTX lane exchange, assemble for sm_90 without spilling registers.
"""
import contextlib
import os
import sys
import types
import zlib

import numpy as np
import pytest
import torch

import cltorch as ct
from cltorch.backend.devices import device_info_from_props
from cltorch.backend.profile import Profile, load_profile

H200 = dict(name="NVIDIA H200", vendor="NVIDIA Corporation", vendor_id=0x10DE, is_cpu=False, platform="NVIDIA CUDA",
            max_compute_units=132, local_mem_size=49152, max_work_group_size=1024,
            max_work_item_sizes=(1024, 1024, 64), global_mem_size=141 << 30, extensions="cl_khr_fp64")
F, TF = ct.nn.functional, torch.nn.functional


def _shipped_profile(props, **tables):
    """The profile a device of ``props`` merges from the shipped files, with ``tables`` merged over it."""
    saved = {k: os.environ.pop(k) for k in ("CLTORCH_PROFILE", "CLTORCH_PROFILE_ONLY") if k in os.environ}
    try:
        prof = load_profile(device_info_from_props(0, props))
    finally:
        os.environ.update(saved)
    if not tables:
        return prof
    data = {k: dict(v) if isinstance(v, dict) else v for k, v in prof.items()}
    for t, vals in tables.items():
        data[t] = dict(data.get(t, {}), **vals)
    return Profile(data, list(prof.sources) + ["test"], list(getattr(prof, "reasons", [])) + ["test"])


def _clear_plans(rt):
    from cltorch import _deterministic
    for mod, names in _deterministic._PLAN_CACHES.items():
        m = sys.modules.get(mod)
        for n in names if m is not None else ():
            c = getattr(m, n, None)
            if isinstance(c, dict):
                c.clear()
    from cltorch.ops.reduction import exchange
    exchange._modes.clear()
    rt._limits = None
    if hasattr(rt, "_geometry_memo"):
        rt._geometry_memo = {}


@contextlib.contextmanager
def _configuration(prof):
    """The 'cpu' device's runtime under profile ``prof`` (tables and [limits]), plan caches cleared around it."""
    from cltorch import backend
    rt = backend.runtime(backend.cpu_index())
    saved = rt.profile, rt.native_profile, getattr(rt, "_limits", None)
    ct.cl.synchronize()
    _clear_plans(rt)
    rt.profile = rt.native_profile = prof
    try:
        yield rt
    finally:
        ct.cl.synchronize()
        rt.profile, rt.native_profile = saved[0], saved[1]
        _clear_plans(rt)
        rt._limits = saved[2]


# ------------------------------------------------------------------------------------------------ plans
def _fake_rt(props):
    info = device_info_from_props(0, props)
    prof = _shipped_profile(props)
    return types.SimpleNamespace(info=info, profile=prof, native_profile=prof, index=0)


def test_h200_softmax_rows_in_registers_and_in_flight():
    from cltorch.ops.softmax import team
    rt = _fake_rt(H200)
    prof = rt.native_profile
    assert prof.get_value("softmax", "design") == "gpu"
    tpr, k, cached = team.layout(prof, "softmax", 4096, 1)
    # a warp-sized team per row, each lane holding its 128 elements: the row is read once and written once
    assert (tpr, k, cached) == (32, 128, True)
    ls = int(prof.get_value("softmax", "local_size"))
    assert ls % 32 == 0 and ls <= 1024
    t = team.Team(tpr, ls, k, cached, "ptx", None)
    teams = t.work_items(8192) // tpr
    assert teams >= 8192 and t.work_items(8192) // ls >= 2 * 132
    # each load instruction of a team reads one group of 32 consecutive floats (128 contiguous bytes: coalesced);
    # short rows give a lane S = 32 / lanes adjacent elements (one vector load)
    assert team.layout(prof, "softmax", 64, 1)[0] == 8          # float4 per lane
    assert team.layout(prof, "softmax", 16, 1)[0] == 4          # float8 per lane
    # the backward holds two arrays: rows up to 2048 stay in registers, 4096 streams in blocks of 64 groups
    assert team.layout(prof, "softmax", 2048, 2) == (32, 64, True)
    assert team.layout(prof, "softmax", 4096, 2) == (32, 64, False)


def test_h200_layer_norm_one_kernel_each_way_and_coalesced_weight_gradients():
    from cltorch.ops.norms.launch import _chunks, wgrad_shape
    from cltorch.ops.softmax import team
    rt = _fake_rt(H200)
    prof = rt.native_profile
    assert prof.get_value("norm", "design") == "gpu"
    CH, nch = _chunks(rt, 1024)
    assert (CH, nch) == (1024, 1)                 # a row is one chunk: no partial-sums kernel, no second read
    assert team.layout(prof, "norm", CH, 1) == (32, 32, True)
    assert team.layout(prof, "norm", CH, 2) == (32, 32, True)   # backward: g and x in registers
    ls = int(prof.get_value("norm", "local_size"))
    assert team.Team(32, ls, 32, True, "", None).work_items(32768) // ls >= 2 * 132
    # weight and bias gradients: one work-item per 8 columns and wgrad_rows rows, column index fastest
    CHw, nchw, n = wgrad_shape(prof, 32768, 1024)
    assert n == 128 * nchw and n // ls >= 2 * 132, (CHw, nchw, n)
    # then the column sums of the (nchw, 1024) partials: the reductions' column design
    from cltorch.ops.reduction import gpu_plan as G
    cfg = G.settings(prof)
    assert G.choose_design((1024,), (1,), (nchw,), (1024,)) == "cols"
    ps = G.cols_pass(rt, cfg, 1024, nchw, cfg.load_width)
    assert ps.local[0] >= 32 and ps.groups >= 132, ps


def test_h200_batch_norm_and_cross_entropy_fill_the_device():
    from cltorch.ops.norms.launch import _chunks
    from cltorch.ops.softmax import team
    rt = _fake_rt(H200)
    prof = rt.native_profile
    # the CNN benchmark's BatchNorm2d(64) of 128 x 64 x 32 x 32: 64 chunks per channel, one team each, streaming
    # (a batch_norm chunk spans samples) 8 groups per lane at a time
    from cltorch.ops.norms.team import STREAM_GROUPS
    CH, nch = _chunks(rt, 128 * 32 * 32)
    assert nch == 64 and team.layout(prof, "norm", CH, 2, kcap=STREAM_GROUPS)[1] == 8
    ls = int(prof.get_value("norm", "local_size"))
    assert team.Team(32, ls, 8, False, "", None).work_items(64 * nch) // ls >= 2 * 132
    # cross_entropy over a 50,257-word vocabulary: a team per row, streamed in blocks of 128 groups
    assert prof.get_value("loss", "design") == "gpu"
    assert team.layout(prof, "softmax", 50257, 1) == (32, 128, False)


def test_cpu_profiles_keep_the_cpu_designs():
    for kind in (dict(name="pthread-x86-64", vendor="GenuineIntel", vendor_id=0x8086, is_cpu=True,
                      platform="Portable Computing Language"),
                 dict(name="Intel(R) Xeon(R) Processor", vendor="Intel(R) Corporation", vendor_id=0x8086,
                      is_cpu=True, platform="Intel(R) OpenCL")):
        prof = _shipped_profile(kind)
        for table in ("softmax", "norm", "loss"):
            assert prof.get_value(table, "design", "cpu") == "cpu", (kind["platform"], table)
    from cltorch.backend.deterministic import profile
    assert all(profile().get_value(t, "design", "cpu") == "cpu" for t in ("softmax", "norm", "loss"))


def test_lanes_rows_are_checked():
    from cltorch.ops.softmax import team
    prof = _shipped_profile(H200, softmax={"lanes": [{"lanes": 1}]})
    with pytest.raises(ValueError, match="power of two from 2 to 32"):
        team.layout(prof, "softmax", 100, 1)


# ------------------------------------------------------------------------------------------------ values
def _rng(seed=0):
    return np.random.default_rng(seed)


def _softmax_cases(rng):
    out = []
    for rows, cols in ((5, 1), (7, 7), (6, 33), (4, 1000), (3, 4096), (2, 10000), (70001, 3)):
        out.append((f"{rows} x {cols}", (rng.standard_normal((rows, cols)) * 4).astype(np.float32), -1, None))
    a = (rng.standard_normal((40, 70)) * 4).astype(np.float32)
    out.append(("transposed rows (element stride 40)", a, -1, lambda t: t.t()))
    out.append(("every other row, from column 3", a, -1, lambda t: t[::2, 3:]))
    out.append(("dim 0", a, 0, None))
    out.append(("float64", (rng.standard_normal((9, 300)) * 4), -1, None))
    return out


def _run_softmax(rng, dev="cpu", only=None):
    """Every softmax case against torch (softmax and log_softmax in turn; both for 4096 columns); returns the outputs'
    and gradients' bytes ({case name: bytes}; ``only``: the names to run)."""
    res = {}
    for i, (name, a, dim, view) in enumerate(_softmax_cases(rng)):
        if only is not None and name not in only:
            continue
        for log in ((False, True) if "4096" in name else (bool(i % 2),)):
            tx = torch.from_numpy(a)
            cx = ct.from_numpy(a.copy()).to(dev)
            if view is not None:
                tx, cx = view(tx), view(cx)
            tx = tx.detach().requires_grad_()
            cx = cx.detach().requires_grad_()
            f_t, f_c = (torch.log_softmax, ct.log_softmax) if log else (torch.softmax, ct.softmax)
            ty, cy = f_t(tx, dim), f_c(cx, dim)
            g = _rng(zlib.crc32(name.encode())).standard_normal(tuple(ty.shape)).astype(a.dtype)
            ty.backward(torch.from_numpy(g))
            cy.backward(ct.from_numpy(g.copy()).to(dev))
            tol = dict(rtol=1e-5, atol=1e-6) if a.dtype == np.float32 else dict(rtol=1e-12, atol=1e-14)
            gtol = dict(rtol=1e-4, atol=1e-5) if a.dtype == np.float32 else tol
            np.testing.assert_allclose(cy.detach().cpu().numpy(), ty.detach().numpy(), err_msg=name, **tol)
            np.testing.assert_allclose(cx.grad.cpu().numpy(), tx.grad.numpy(), err_msg=name + " grad", **gtol)
            res[(name, log)] = cy.detach().cpu().numpy().tobytes() + cx.grad.cpu().numpy().tobytes()
    return res


def _norm_cases(rng):
    def f32(*s, off=0.0):
        return (off + rng.standard_normal(s)).astype(np.float32)
    out = []
    for L in (1, 33, 1000, 1100, 4096):
        out.append((f"layer_norm {L}", lambda M, x, w, b, L=L: M.nn.functional.layer_norm(x, (L,), w, b),
                    [f32(3, L, off=2.0), f32(L), f32(L)]))
    out.append(("rms_norm 1000", lambda M, x, w: M.nn.functional.rms_norm(x, (1000,), w, 1e-6),
                [f32(4, 1000), f32(1000)]))
    out.append(("layer_norm, 70,001 rows of 3", lambda M, x: M.nn.functional.layer_norm(x, (3,)), [f32(70001, 3)]))
    out.append(("layer_norm, strided input", lambda M, x, w: M.nn.functional.layer_norm(x.t(), (6,), w),
                [f32(6, 9), f32(6)]))
    out.append(("group_norm 2 x 6 x 700, 3 groups", lambda M, x, w, b: M.nn.functional.group_norm(x, 3, w, b),
                [f32(2, 6, 700, off=1.0), f32(6), f32(6)]))
    out.append(("batch_norm 16 x 4 x 32 x 32", lambda M, x, w, b: M.nn.functional.batch_norm(
        x, None, None, w, b, training=True), [f32(16, 4, 32, 32, off=3.0), f32(4), f32(4)]))
    out.append(("batch_norm 5 x 3 x 7 x 7 (H*W odd)", lambda M, x, w, b: M.nn.functional.batch_norm(
        x, None, None, w, b, training=True), [f32(5, 3, 7, 7, off=1.0), f32(3), f32(3)]))
    out.append(("batch_norm 300 x 6 (1-d)", lambda M, x: M.nn.functional.batch_norm(x, None, None, training=True),
                [f32(300, 6)]))
    return out


def _run_norms(rng, dev="cpu", only=None):
    res = {}
    for name, fn, arrays in _norm_cases(rng):
        if only is not None and name not in only:
            continue
        ts = [torch.from_numpy(a).requires_grad_() for a in arrays]
        cs = [ct.from_numpy(a.copy()).to(dev).requires_grad_() for a in arrays]
        ty, cy = fn(torch, *ts), fn(ct, *cs)
        g = _rng(zlib.crc32(name.encode())).standard_normal(tuple(ty.shape)).astype(np.float32)
        ty.backward(torch.from_numpy(g))
        cy.backward(ct.from_numpy(g.copy()).to(dev))
        np.testing.assert_allclose(cy.detach().cpu().numpy(), ty.detach().numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=name)
        out = [cy.detach().cpu().numpy()]
        for i, (t, c) in enumerate(zip(ts, cs)):
            # (a 1-element layer_norm's input gradient is 0 but for torch's rounding, times rstd = 1 / sqrt(eps))
            scale = max(float(np.abs(t.grad.numpy()).max()), 1.0) * (10 if name == "layer_norm 1" else 1)
            np.testing.assert_allclose(c.grad.cpu().numpy(), t.grad.numpy(), rtol=1e-3, atol=1e-4 * scale,
                                       err_msg=f"{name} grad {i}")
            out.append(c.grad.cpu().numpy())
        res[name] = b"".join(o.tobytes() for o in out)
    return res


def _ce_cases(rng):
    out = []
    for n, c in ((5, 1), (9, 33), (6, 1000), (2, 10000)):
        out.append((f"{n} x {c}", (rng.standard_normal((n, c)) * 3).astype(np.float32), rng.integers(0, c, n), {}))
    a = (rng.standard_normal((40, 70)) * 3).astype(np.float32)
    t = rng.integers(0, 70, 40)
    t[::5] = -100
    out.append(("weights, smoothing, ignored rows", a, t, dict(weight=rng.uniform(0.5, 2, 70).astype(np.float32),
                                                               label_smoothing=0.1)))
    out.append(("smoothing, sum", a, rng.integers(0, 70, 40), dict(label_smoothing=0.2, reduction="sum")))
    out.append(("none, transposed logits", a.T.copy().T, rng.integers(0, 70, 40), dict(reduction="none")))
    out.append(("(N, C, d): rows along dim 1", (rng.standard_normal((4, 7, 5)) * 3).astype(np.float32),
                rng.integers(0, 7, (4, 5)), {}))
    return out


def _run_ce(rng, dev="cpu"):
    res = []
    for name, a, tgt, kw in _ce_cases(rng):
        w = kw.get("weight")
        tkw = dict(kw, weight=torch.from_numpy(w)) if w is not None else kw
        ckw = dict(kw, weight=ct.from_numpy(w).to(dev)) if w is not None else kw
        tx = torch.from_numpy(a).requires_grad_()
        cx = ct.from_numpy(a.copy()).to(dev).requires_grad_()
        ty = TF.cross_entropy(tx, torch.from_numpy(tgt), **tkw)
        cy = F.cross_entropy(cx, ct.from_numpy(tgt).to(dev), **ckw)
        g = rng.standard_normal(tuple(ty.shape)).astype(np.float32)
        ty.backward(torch.from_numpy(g))
        cy.backward(ct.from_numpy(g).to(dev))
        np.testing.assert_allclose(cy.detach().cpu().numpy(), ty.detach().numpy(), rtol=2e-5, atol=1e-6,
                                   err_msg=name)
        np.testing.assert_allclose(cx.grad.cpu().numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-6,
                                   err_msg=name + " grad")
        res.append(cy.detach().cpu().numpy().tobytes() + cx.grad.cpu().numpy().tobytes())
    return res


_GPU_RUN = {}


def _gpu_run():
    """Every case under the NVIDIA configuration (values checked against torch); the bytes, computed once."""
    if not _GPU_RUN:
        with _configuration(_shipped_profile(H200)) as rt:
            assert rt.native_profile.get_value("softmax", "design") == "gpu"
            _GPU_RUN["softmax"], _GPU_RUN["norms"] = _run_softmax(_rng(1)), _run_norms(_rng(2))
            _run_ce(_rng(3))
            from cltorch.ops.softmax import team
            _GPU_RUN["tables"] = {key[1] for key in team._plans}
    return _GPU_RUN


def test_values_under_the_nvidia_configuration():
    run = _gpu_run()
    assert run["tables"] == {"softmax", "norm"}, run["tables"]     # the team designs ran (cross_entropy: softmax's)


def test_same_bits_as_the_cpu_designs_cached_and_streamed():
    """The GPU designs add in the CPU designs' order: every output and gradient of the NVIDIA run has the bits of the
    CPU designs under the CPU tables (PoCL's shipped profile; the same norm chunks, and the NVIDIA tables' weight
    gradient rows and reductions), and so do the long rows with the register cache cut to 4 values per lane (every
    row streams)."""
    from cltorch import backend
    if "Intel" in backend.runtime(backend.cpu_index()).info.platform:
        pytest.skip("Intel's CPU compiler reassociates the CPU design's sums outside deterministic mode (DESIGN, "
                    "session 5); test_deterministic_mode_gives_the_cpu_bits_on_the_gpu_design covers it there")
    gpu = _gpu_run()
    h200 = _shipped_profile(H200)
    cpu_prof = _shipped_profile(dict(name="pthread-x86-64", vendor="GenuineIntel", vendor_id=0x8086, is_cpu=True,
                                     platform="Portable Computing Language"), norm={"wgrad_rows": 32},
                                reduction=h200["reduction"])      # group_norm's weight gradient is a reduction
    assert all(cpu_prof.get_value("norm", k) == h200.get_value("norm", k) for k in ("chunk", "max_chunks"))
    assert not backend.runtime(backend.cpu_index()).info.is_gpu
    with _configuration(cpu_prof):
        ref_s, ref_n = _run_softmax(_rng(1)), _run_norms(_rng(2))
    long_s = {"4 x 1000", "3 x 4096", "2 x 10000"}
    long_n = {"layer_norm 1000", "layer_norm 1100", "layer_norm 4096", "batch_norm 16 x 4 x 32 x 32"}
    with _configuration(_shipped_profile(H200, softmax={"cache": 4}, norm={"cache": 4})):
        streamed = {**_run_softmax(_rng(1), only=long_s), **_run_norms(_rng(2), only=long_n)}
    ref = {**ref_s, **ref_n}
    assert set(ref) == set(gpu["softmax"]) | set(gpu["norms"])
    for key, val in {**gpu["softmax"], **gpu["norms"]}.items():
        assert val == ref[key], f"{key}: the GPU design's bits differ from the CPU design's"
    assert len(streamed) == 8
    for key, val in streamed.items():
        assert val == ref[key], f"{key}, streamed: the GPU design's bits differ from the CPU design's"


def test_cross_entropy_is_log_softmax_and_nll_to_the_bit():
    rng = _rng(7)
    a = (rng.standard_normal((64, 1000)) * 3).astype(np.float32)
    t = rng.integers(0, 1000, 64)
    with _configuration(_shipped_profile(H200)):
        x = ct.from_numpy(a)
        tg = ct.from_numpy(t)
        ce = F.cross_entropy(x, tg, reduction="none").numpy()
        nll = F.nll_loss(ct.log_softmax(x, 1), tg, reduction="none").numpy()
        assert ce.tobytes() == nll.tobytes()
        with pytest.raises(IndexError, match="Target 1000 is out of bounds"):
            F.cross_entropy(x, ct.from_numpy(np.full(64, 1000))).item()


def test_deterministic_mode_gives_the_cpu_bits_on_the_gpu_design():
    """In deterministic mode the device's own profile still chooses the design (the order is the deterministic
    profile's): the GPU design under the NVIDIA tables gives the bits the CPU design gives under the CPU tables,
    chunked norm rows included."""
    rng = _rng(8)
    xs = [(3.0 + rng.standard_normal((4, 3, 30, 30))).astype(np.float32),        # 3,600-term rows: 4 chunks
          (1.0 + rng.standard_normal((6, 3000))).astype(np.float32),
          (rng.standard_normal((5, 2500)) * 4).astype(np.float32)]

    def run():
        out = []
        for k, xn in enumerate(xs):
            x = ct.from_numpy(xn.copy()).requires_grad_()
            if k == 0:
                y = F.batch_norm(x, None, None, training=True)
            elif k == 1:
                y = F.layer_norm(x, (3000,))
            else:
                y = ct.log_softmax(x, 1)
            y.backward(ct.ones_like(y))
            out += [y.detach().numpy().tobytes(), x.grad.numpy().tobytes()]
        return out
    ct.use_deterministic_algorithms(True)
    try:
        ref = run()
        with _configuration(_shipped_profile(H200)) as rt:
            from cltorch.backend.deterministic import profile
            rt.profile = profile()          # deterministic mode: the order's profile; the design stays the GPU's
            assert rt.native_profile.get_value("norm", "design") == "gpu"
            got = run()
            from cltorch.ops.softmax import team
            assert {key[1] for key in team._plans} == {"softmax", "norm"}
    finally:
        ct.use_deterministic_algorithms(False)
    assert got == ref


# ------------------------------------------------------------------------------------------ NVIDIA's assembler
_STUB = r"""
typedef unsigned int uint; typedef unsigned long size_t;
size_t __attribute__((overloadable)) get_local_id(uint d) { return __nvvm_read_ptx_sreg_tid_x(); }
size_t __attribute__((overloadable)) get_group_id(uint d) { return __nvvm_read_ptx_sreg_ctaid_x(); }
long __attribute__((overloadable)) min(long a, long b) { return a < b ? a : b; }
float __attribute__((overloadable)) select(float a, float b, int c) { return c ? b : a; }
float __attribute__((overloadable)) log(float x) { return __nvvm_lg2_approx_f(x) * 0.6931471805599453f; }
float __attribute__((overloadable)) rsqrt(float x) { return __nvvm_rsqrt_approx_f(x); }
"""


def test_team_kernels_assemble_for_sm90_without_spills(tmp_path):
    """clang-15 compiles the largest team kernels with the PTX lane exchange (shfl.sync) to PTX and CUDA's ptxas
    assembles them for sm_90 (the H200) without spilling: the softmax forward holding 128 values per lane, the
    LayerNorm 1024 backward holding g and x, a batch_norm backward streaming. (NVIDIA's own OpenCL compiler may
    allocate differently; this checks the inline PTX's syntax and that the register budget is not absurd.)"""
    import shutil
    import subprocess
    from cltorch.backend.program import render
    missing = [t for t in ("clang-15", "llvm-link-15", "llc-15", "ptxas") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (the vendor compile check)")
    common = dict(T="float", CT="float", TPR=32, LS=128, xchg="ptx", types=("float",))
    norm = dict(common, center=True, has_b=True, vec=True)
    kernels = {
        "softmax_team_fwd": ("softmax_team.cl.mako", dict(common, log=False, safe=False, K=128, cached=True,
                                                          contig=True, which="fwd")),
        "norm_team_bwd": ("norm_team.cl.mako", dict(norm, affine="col", has_w=True, save_var=False, K=32,
                                                    cached=True, flat=True, which="bwd")),
        "norm_team_fwd": ("norm_team.cl.mako", dict(norm, affine="row", has_w=True, save_var=True, K=8,
                                                    cached=False, flat=False, which="fwd")),
    }
    cc = ["clang-15", "-target", "nvptx64-nvidia-nvcl", "-x", "cl", "-cl-std=CL1.2", "-O2", "-c", "-emit-llvm",
          "-Xclang", "-target-cpu", "-Xclang", "sm_80"]
    (tmp_path / "stub.cl").write_text(_STUB)
    subprocess.run(cc + ["-cl-no-stdinc", str(tmp_path / "stub.cl"), "-o", str(tmp_path / "stub.bc")], check=True,
                   capture_output=True)
    for name, (template, params) in kernels.items():
        base = tmp_path / name
        # clang's OpenCL mode takes GNU asm as __asm__ (NVIDIA's compiler takes asm)
        base.with_suffix(".cl").write_text(render(template, **params).replace("asm volatile(", "__asm__ volatile("))
        r = subprocess.run(cc + [str(base.with_suffix(".cl")), "-o", str(base.with_suffix(".bc"))],
                           capture_output=True, text=True)
        assert r.returncode == 0, (name, r.stderr[-2000:])
        subprocess.run(["llvm-link-15", str(base.with_suffix(".bc")), str(tmp_path / "stub.bc"), "-o",
                        str(base.with_suffix(".all.bc"))], check=True, capture_output=True)
        subprocess.run(["llc-15", "-O2", "-mcpu=sm_80", str(base.with_suffix(".all.bc")), "-o",
                        str(base.with_suffix(".ptx"))], check=True, capture_output=True)
        assert "shfl.sync.bfly.b32" in base.with_suffix(".ptx").read_text()
        r = subprocess.run(["ptxas", "-arch=sm_90", "-v", str(base.with_suffix(".ptx")), "-o",
                            str(base.with_suffix(".cubin"))], capture_output=True, text=True)
        assert r.returncode == 0, (name, r.stderr[-2000:])
        info = r.stderr[r.stderr.index(f"Compiling entry function '{name}'"):]
        assert "0 bytes spill stores, 0 bytes spill loads" in info.split("Compiling entry")[1], (name, info[:500])
