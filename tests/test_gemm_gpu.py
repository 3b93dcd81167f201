"""The GPU GEMM design (cl_kernels/gemm_gpu.cl.mako, cltorch/ops/gemm/gpu.py and plan.py).

Values: on this machine's OpenCL device (a CPU) with the runtime's [gemm] table replaced by GPU rows, against
numpy in float64: NN/NT/TN/TT, odd sizes, batches with broadcast and strided operands, alpha/beta, the epilogue,
float16/bfloat16/float64 storage, split-K (small rows: each distinct kernel is a compile). Every row of every shipped
GPU vendor table (the 128 x 128 tiles with 8 x 8 blocks among them) runs in tests/test_kernel_configs.py (cpu device
and Oclgrind, with the vendor's emulated limits).

Plans (no kernel run): a fake H200 (132 compute units, NVIDIA's profile and limits) gets 128 x 128 tiles with 8 x 8
register blocks read from local memory as float4 for a 4096^3 product and at least 132 work-groups for 1024^3;
the rendered inner loop reads local memory only as vectors; every shipped row fits its vendor's limits.
"""
import os
import re

import numpy as np
import pytest

cl = pytest.importorskip("pyopencl")

from cltorch.backend import geometry, program  # noqa: E402
from cltorch.backend.devices import device_info_from_props  # noqa: E402
from cltorch.backend.profile import load_profile  # noqa: E402
from cltorch.ops import gemm as _gemm  # noqa: E402
from cltorch.ops.gemm import plan as P  # noqa: E402
from cltorch.ops.gemm.gpu import layout  # noqa: E402
from gemm_harness import buffer as _buf, check, uniform  # noqa: E402

SMALL = {"bm": 32, "bn": 32, "bk": 8, "tm": 4, "tn": 4, "vw": 4}     # 64 work-items
TINY = {"bm": 16, "bn": 16, "bk": 8, "tm": 2, "tn": 2, "vw": 2}      # 64 work-items, vw 2


@pytest.fixture
def gpu(rt):
    """Run under a GPU-design [gemm] table: gpu(rows, **keys); the runtime's own table comes back after."""
    saved = rt.profile.get("gemm")

    def use(rows, **keys):
        rt.profile["gemm"] = dict({"design": "gpu", "groups_per_cu": 1, "split_k": 1}, sizes=rows, **keys)
        _gemm.clear_cache()
    yield use
    rt.profile["gemm"] = saved
    _gemm.clear_cache()


def _run(rt, M, N, K, dt=np.float32, la="row", lb="row", lc="row", alpha=1.0, beta=0.0, batch=1, E=None,
         c_nan=False):
    """C = alpha A @ B + beta C (+ E: "row" a bias row, "col" a per-row column) against numpy in float64; the
    storage around C's view is untouched. Returns the plan's description."""
    tol = {np.dtype(np.float32): 2e-5, np.dtype(np.float64): 1e-12, np.dtype(np.float16): 2e-3}.get(
        np.dtype(dt), 1e-2)
    check(rt, M, N, K, dt, la, lb, lc, alpha, beta, batch, np.random.default_rng(M * 7 + N * 3 + K), 4, uniform, tol,
          scaled=False, c_nan=c_nan, E=E)
    key = [k for k in _gemm._plans if k[0] is rt and k[2:6] == (M, N, K, batch)][-1]
    return _gemm._plans[key].describe()


@pytest.mark.parametrize("la,lb", [("row", "row"), ("row", "col"), ("col", "row"), ("col", "col")])
def test_layouts_nn_nt_tn_tt(rt, gpu, la, lb):
    """Each layout reads A and B through its own fetch pattern (k-contiguous operands along k, the others along
    their lanes), with edge tiles in M, N and K."""
    gpu([SMALL])
    d = _run(rt, 37, 53, 29, la=la, lb=lb)
    assert d["design"] == "gpu" and d["A"][0] == ("k" if la == "row" else "l") and d["B"][0] == (
        "l" if lb == "row" else "k")
    _run(rt, 64, 96, 40, la=la, lb=lb, alpha=0.5, beta=2.0)           # whole tiles only


def test_odd_sizes(rt, gpu):
    gpu([SMALL])
    for M, N, K in ((1, 1, 1), (1, 7, 129), (129, 1, 7), (7, 129, 1), (129, 129, 7), (33, 70, 1000)):
        _run(rt, M, N, K)
    _run(rt, 129, 31, 130, la="col", lb="col")


def test_batched_strided_and_broadcast(rt, gpu):
    gpu([SMALL])
    _run(rt, 11, 24, 9, batch=4)
    _run(rt, 11, 21, 9, la="col", lb="bcast", batch=3, alpha=2.0, beta=-1.0)
    d = _run(rt, 6, 16, 8, la="bcast", lb="strided", lc="strided", batch=5)
    assert d["B"].endswith("x1")                     # neither direction contiguous: element loads


def test_alpha_beta_and_nan_in_c(rt, gpu):
    gpu([SMALL])
    for alpha, beta in ((0.5, 2.0), (0.0, 1.5), (-1.0, 1.0)):
        _run(rt, 17, 24, 13, alpha=alpha, beta=beta)
    _run(rt, 12, 16, 5, beta=0.0, c_nan=True)         # beta == 0: C is not read (NaN does not propagate)
    _run(rt, 9, 10, 0, beta=0.5)                      # K == 0: C = beta C


def test_split_k(rt, gpu):
    """K cut into slices summed in slice order by a second kernel: values, alpha/beta, epilogue, batches; the
    same launch gives the same bits every time."""
    gpu([SMALL], groups_per_cu=64, split_k=8, split_k_min=16)
    d = _run(rt, 40, 36, 300, alpha=0.5, beta=1.5)
    assert d["splits"] > 1 and d["groups"] == 4 * d["splits"]      # 2 x 2 tiles
    assert _run(rt, 21, 18, 100, batch=2)["splits"] > 1
    assert _run(rt, 21, 18, 100, E="row")["splits"] > 1
    a = _run(rt, 33, 17, 257, E="col")
    assert a["splits"] > 1
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((33, 257)).astype(np.float32), rng.standard_normal((257, 33)).astype(np.float32)
    bx, by = _buf(rt, x), _buf(rt, y)
    outs = []
    for _ in range(2):
        c = np.zeros((33, 33), np.float32)
        bc = _buf(rt, c)
        _gemm.gemm(rt, 33, 33, 257, (bx, 0, 257, 1, 0), (by, 0, 33, 1, 0), (bc, 0, 33, 1, 0))
        cl.enqueue_copy(rt.queue, c, bc)
        rt.queue.finish()
        outs.append(c)
    np.testing.assert_array_equal(outs[0], outs[1])


def test_epilogue(rt, gpu):
    """E added after the rest is rounded: the stored value is the plain GEMM's plus E exactly."""
    gpu([SMALL])
    _run(rt, 37, 40, 21, E="row")
    _run(rt, 37, 40, 21, E="col", alpha=0.5, beta=1.0)
    rng = np.random.default_rng(9)
    a, b = rng.standard_normal((19, 23)).astype(np.float32), rng.standard_normal((23, 40)).astype(np.float32)
    e = rng.standard_normal(40).astype(np.float32)
    ba, bb, be = _buf(rt, a), _buf(rt, b), _buf(rt, e)
    c1, c2 = np.zeros((19, 40), np.float32), np.zeros((19, 40), np.float32)
    b1, b2 = _buf(rt, c1), _buf(rt, c2)
    _gemm.gemm(rt, 19, 40, 23, (ba, 0, 23, 1, 0), (bb, 0, 40, 1, 0), (b1, 0, 40, 1, 0), E=(be, 0, 0, 1, 0))
    _gemm.gemm(rt, 19, 40, 23, (ba, 0, 23, 1, 0), (bb, 0, 40, 1, 0), (b2, 0, 40, 1, 0))
    cl.enqueue_copy(rt.queue, c1, b1)
    cl.enqueue_copy(rt.queue, c2, b2)
    rt.queue.finish()
    np.testing.assert_array_equal(c1, c2 + e)


def test_16_bit_and_float64_storage(rt, gpu):
    gpu([SMALL], sizes_f64=[dict(SMALL, vw=2)])
    _run(rt, 21, 32, 40, np.float16)
    _run(rt, 9, 13, 7, np.float16, alpha=0.5, beta=1.0)
    bf16 = pytest.importorskip("ml_dtypes").bfloat16
    _run(rt, 21, 32, 40, bf16)
    _run(rt, 9, 13, 70, bf16, beta=1.0)
    if rt.info.fp64:
        assert _run(rt, 19, 29, 21, np.float64)["vw"] == 2


def test_matmul_ops_under_the_gpu_design(rt, gpu):
    """The ops reach the GPU design: a batched linear layer against torch, and compiled, its bias add run as the
    GEMM's epilogue (one launch fewer, bit-identical to the unfused replay)."""
    torch = pytest.importorskip("torch")
    import cltorch as ct
    gpu([SMALL])
    dev = f"cl:{rt.index}"
    rng = np.random.default_rng(2)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((3, 19, 24), (40, 24), (40,)))
    cx, cw, cb = (ct.from_numpy(v).to(dev) for v in (x, w, b))
    y = ct.nn.functional.linear(cx, cw, cb)
    ref = torch.nn.functional.linear(*(torch.from_numpy(v) for v in (x, w, b)))
    np.testing.assert_allclose(y.cpu().numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)

    def f(v):
        return ct.nn.functional.linear(v, cw, cb)
    cf, cu = ct.compile(f), ct.compile(f, options={"fusion": False})
    with ct.no_grad():
        for _ in range(3):
            got, plain = cf(cx), cu(cx)
    assert cu.graphs()[0].launch_count - cf.graphs()[0].launch_count == 1, cf.graphs()[0].labels()
    np.testing.assert_array_equal(got.cpu().numpy(), plain.cpu().numpy())
    assert any("gemm_tile" in lab for lab in cf.graphs()[0].labels())


# ------------------------------------------------------------------------------------------------------- plans
def _gpu_info(kind="nvidia", cus=132):
    props = {
        "nvidia": dict(name="NVIDIA H200", vendor="NVIDIA Corporation", vendor_id=0x10DE, platform="NVIDIA CUDA",
                       local_mem_size=49152, max_work_group_size=1024, max_work_item_sizes=(1024, 1024, 64)),
        "amd": dict(name="gfx942", vendor="Advanced Micro Devices, Inc.", vendor_id=0x1002,
                    platform="AMD Accelerated Parallel Processing", local_mem_size=65536, max_work_group_size=1024),
        "intel-gpu": dict(name="Intel(R) Arc(TM) A770 Graphics", vendor="Intel(R) Corporation", vendor_id=0x8086,
                          platform="Intel(R) OpenCL Graphics", local_mem_size=65536, max_work_group_size=1024),
        "apple": dict(name="Apple M2", vendor="Apple", vendor_id=0x1027F00, platform="Apple", local_mem_size=32768,
                      max_work_group_size=256),
    }[kind]
    return device_info_from_props(0, dict(props, is_cpu=False, max_compute_units=cus))


@pytest.fixture
def shipped(monkeypatch):
    """The shipped profile (and emulated limits) of a device kind, whatever this process's environment says."""
    monkeypatch.delenv("CLTORCH_PROFILE", raising=False)
    monkeypatch.delenv("CLTORCH_PROFILE_ONLY", raising=False)

    def get(kind, cus=132):
        info = _gpu_info(kind, cus)
        prof = load_profile(info)
        return info, prof, geometry.limits_for(info, prof)
    return get


def _config(info, prof, lim, M, N, K, batch=1, dt=np.float32):
    return P.gpu_config(prof, info.compute_units, dt, M, N, K, batch, lim.max_work_group_size, lim.local_mem_size)


def _render(cfg, a_fast="k", b_fast="l", dt="float", nat=1):
    threads = cfg.threads
    a_fast, a_ga = layout(cfg.bm, cfg.bk, 4096, 1, 0, 0, dt, nat, threads) if a_fast == "k" else \
        layout(cfg.bm, cfg.bk, 1, 4096, 0, 0, dt, nat, threads)
    b_fast, b_ga = layout(cfg.bn, cfg.bk, 1, 4096, 0, 0, dt, nat, threads) if b_fast == "l" else \
        layout(cfg.bn, cfg.bk, 4096, 1, 0, 0, dt, nat, threads)
    return program.render("gemm_gpu.cl.mako", dt=dt, acc="double" if dt == "double" else "float", idx="int", bm=cfg.bm, bn=cfg.bn, bk=cfg.bk,
                          tm=cfg.tm, tn=cfg.tn, vw=cfg.vw, nat=nat, a_fast=a_fast, a_ga=a_ga, b_fast=b_fast,
                          b_ga=b_ga, gm=8, c_vec=1, split=int(cfg.splits > 1), c_epi=0)


def _inner_loop(src):
    body = src.split("/* inner loop */", 1)[1].split("/* end of inner loop */", 1)[0]
    return body


def test_h200_4096_uses_128x128_tiles_with_8x8_blocks_and_float4_local_loads(shipped):
    info, prof, lim = shipped("nvidia")
    assert P.design(prof) == "gpu" and lim.local_mem_size == 49152
    cfg = _config(info, prof, lim, 4096, 4096, 4096)
    assert (cfg.bm, cfg.bn, cfg.tm, cfg.tn, cfg.vw) == (128, 128, 8, 8, 4) and cfg.splits == 1
    assert cfg.threads == 256 and cfg.groups == 1024 and cfg.local_bytes(4) <= lim.local_mem_size
    body = _inner_loop(_render(cfg))
    loads = re.findall(r"const float4 [ab]\d+ = ([AB])s\[cur\]\[kk\]\[", body)
    assert sorted(loads) == ["A", "A", "B", "B"]                 # 4 float4 loads ...
    assert len(re.findall(r"\bfma\(", body)) == 16               # ... for 16 float4 FMAs (64 scalar)
    assert "__local float*" not in body and "__local float4 As[2][8][33]" in _render(cfg)   # padded, 2 buffers


def test_h200_1024_fills_the_132_sms(shipped):
    info, prof, lim = shipped("nvidia")
    cfg = _config(info, prof, lim, 1024, 1024, 1024)
    assert cfg.groups >= 132
    assert cfg.splits == 1 or cfg.kc * (cfg.splits - 1) < 1024 <= cfg.kc * cfg.splits   # every k in one slice
    for M, N, K in ((1024, 10, 4096), (256, 256, 16384), (128, 128, 8192)):   # few tiles, long K: split-K
        c = _config(info, prof, lim, M, N, K)
        assert c.groups >= 132 and c.splits > 1, (M, N, K, c)
    # the MLP benchmark's products (batch 1024, 1024-4096-4096-10) all get >= 132 groups
    for M, N, K in ((1024, 4096, 1024), (1024, 4096, 4096), (1024, 10, 4096), (4096, 1024, 1024),
                    (4096, 4096, 1024), (1024, 4096, 10)):
        assert _config(info, prof, lim, M, N, K).groups >= 132, (M, N, K)


@pytest.mark.parametrize("kind", ["nvidia", "amd", "intel-gpu", "apple"])
def test_every_shipped_row_fits_its_vendors_limits_and_reads_vectors(shipped, kind):
    """Each row of each vendor's tables: work-items and local memory within the emulated [limits], and an inner
    loop that reads local memory only as vectors of the row's vw (float4 / double2)."""
    info, prof, lim = shipped(kind)
    assert P.design(prof) == "gpu"
    for dt in (np.float32, np.float64):
        for row in P.gpu_rows(prof, dt):
            P.check_row(row, np.dtype(dt).itemsize, lim.max_work_group_size, lim.local_mem_size)
            cfg = P.gpu_config(prof, info.compute_units, dt, 512, 512, 512, 1, lim.max_work_group_size,
                               lim.local_mem_size, rows=[row])
            src = _render(cfg, dt="double" if dt == np.float64 else "float")
            body = _inner_loop(src)
            vt = ("double" if dt == np.float64 else "float") + str(row["vw"])
            reads = re.findall(r"const (\w+) [ab]\d+ = [AB]s\[", body)
            assert reads and set(reads) == {vt}, (kind, row, set(reads))
            assert not re.search(r"\(__local (float|double)\*\)", body)


def test_deterministic_mode_runs_the_cpu_design():
    """Deterministic mode's one profile (every device) keeps the CPU design's fixed K order (blocks of 64)."""
    from cltorch.backend import deterministic
    assert P.design(deterministic.profile()) == "cpu"


def test_rows_that_make_no_kernel_are_refused():
    with pytest.raises(P.ProfileRowError, match="vw"):
        P.check_row(dict(SMALL, vw=3))
    with pytest.raises(P.ProfileRowError, match="multiples"):
        P.check_row(dict(bm=32, bn=32, bk=1, tm=1, tn=1, vw=1))
    with pytest.raises(P.ProfileRowError, match="local memory"):
        P.check_row(dict(bm=128, bn=128, bk=32, tm=8, tn=8, vw=4), 4, 1024, 49152)
    prof = {"gemm": {"design": "gpu", "sizes": [dict(bm=64, bn=64, bk=16, tm=2, tn=2, vw=2)]}}   # 1024 items
    with pytest.raises(P.ProfileRowError, match="exceed the limit of 256"):
        P.gpu_config(prof, 8, np.float32, 64, 64, 64, 1, 256, 32768)


def test_tune_writes_a_gpu_profile(rt, monkeypatch, tmp_path):
    """`cltorch probe --tune` under the NVIDIA profile's [gemm] table on this device, with a two-row space and
    tiny sizes: it writes a tuned profile whose rows and split-K threshold come from the search, and that profile's
    table computes correct products."""
    from cltorch.backend.paths import profiles_dir
    from cltorch.backend.profile import _read
    from cltorch.cli import probe
    monkeypatch.setenv("CLTORCH_CONFIG_DIR", str(tmp_path))
    saved = rt.profile.get("gemm")
    nv = _read(profiles_dir() / "nvidia.toml")["gemm"]
    monkeypatch.setitem(rt.profile, "gemm", dict(nv))
    try:
        res = probe._tune(f"cl:{rt.index}", True, budget_s=5,
                          space={"bm": (32,), "bn": (32,), "bk": (8,), "tm": (4,), "tn": (4,), "vw": (4, 2)},
                          sizes=[(48, 40, 24)], split_shapes=[(16, 16, 256)])
    finally:
        rt.profile["gemm"] = saved
        _gemm.clear_cache()
    path = res["profile"]
    assert os.path.dirname(path) == str(tmp_path)
    table = _read(path)["gemm"]
    assert table["design"] == "gpu" and table["split_k_min"] in (128, 256, 512, 1024, 2 ** 30)
    assert len(table["sizes"]) == 1 and table["sizes"][0]["bm"] == 32
    assert res["gemm"][0]["tuned_GFLOPs"] > 0
    monkeypatch.setitem(rt.profile, "gemm", dict(nv, **table))
    _gemm.clear_cache()
    try:
        assert _run(rt, 45, 38, 70)["bm"] == 32
    finally:
        _gemm.clear_cache()


def test_register_cap_only_where_the_compiler_takes_it():
    """A row's `regs` becomes NVIDIA's -cl-nv-maxrregcount where the device lists cl_nv_compiler_options, and
    nothing elsewhere (the option would fail the build); the tuner's space has the capped rows only there."""
    from types import SimpleNamespace
    from cltorch.ops.gemm.gpu import _register_cap
    nv = SimpleNamespace(info=SimpleNamespace(extensions=("cl_khr_fp64", "cl_nv_compiler_options")))
    other = SimpleNamespace(info=SimpleNamespace(extensions=("cl_khr_fp64",)))
    assert _register_cap(nv, 128) == ("-cl-nv-maxrregcount=128",)
    assert _register_cap(nv, 0) == () and _register_cap(other, 128) == ()
    prof = {"gemm": {"design": "gpu", "sizes": [dict(SMALL, regs=96)]}}
    cfg = P.gpu_config(prof, 2, np.float32, 64, 64, 64)
    assert cfg.regs == 96 and cfg.row() == dict(SMALL, regs=96)
