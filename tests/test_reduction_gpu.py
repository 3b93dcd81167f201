"""The reductions' GPU design (cltorch/ops/reduction/gpu_plan.py, cl_kernels/reduction_gpu.cl.mako).

Plan tests (pure Python, a fake NVIDIA H200: 132 compute units, 48 KiB local memory, work-items (1024, 1024, 64))
state the parallelism the GPU needs: a 2^26 sum launches at least 4 work-groups per compute unit with vector loads
and finishes in one group; the 8192 x 4096 column and row sums launch at least 2 groups per compute unit, with
neighbouring lanes reading neighbouring addresses; the fixed-order (deterministic) plans do not depend on the
device's compute units; every launch fits NVIDIA's limits. The value tests run the design on the 'cpu' device (PoCL,
or Intel's runtime) under the NVIDIA and Apple GPU configurations (the profile swapped in-process, with the
vendor's launch limits) against torch, at shapes that stress it; tests/test_kernel_configs.py runs it under every
GPU configuration and under Oclgrind with data-race checks.
"""
import numpy as np
import pytest

import cltorch as ct
from cltorch.ops.reduction import gpu_plan as G
from conftest import H200, fake_runtime, gpu_configuration

APPLE = dict(name="Apple M2", vendor="Apple", vendor_id=0x1027F00, is_cpu=False, platform="Apple",
             max_compute_units=10, local_mem_size=32768, max_work_group_size=256, max_work_item_sizes=(256, 256, 256))


def _fake_rt(props, profile=None, **over):
    """A stand-in runtime for plan tests: ``props`` (with ``over``), its shipped profile (or ``profile``)."""
    return fake_runtime(dict(props, **over), profile)


def _fits_nvidia(ps):
    groups = [g // l for g, l in zip(ps.global_size, ps.local)]
    lsz = 1
    for v in ps.local:
        lsz *= v
    assert lsz <= 1024 and all(l <= m for l, m in zip(ps.local, (1024, 1024, 64))), ps
    assert all(g <= 65535 for g in groups[1:]), ps


def test_h200_full_sum_fills_the_device_with_vector_loads():
    rt = _fake_rt(H200)
    cfg = G.settings(rt.profile)
    assert rt.profile.get_value("reduction", "design") == "gpu" and cfg.load_width == 4
    ps = G.rows_pass(rt, cfg, 1, 2 ** 26, cfg.load_width)
    assert ps.groups >= 4 * 132 and ps.vw == 4 and ps.nacc >= 2 and ps.team >= 128, ps
    assert ps.local[0] >= 128 and ps.slices == ps.groups * (ps.local[0] // ps.team)
    # each lane's loop stays short (latency), and the second pass over the partials is one group, one pass
    per_lane = 2 ** 26 / (ps.slices * ps.team * ps.vw * ps.nacc)
    assert per_lane <= cfg.max_iters, per_lane
    ps2 = G.rows_pass(rt, cfg, 1, ps.slices, cfg.load_width, slices=1)
    assert ps2.groups == 1 and ps2.slices == 1 and ps2.team >= 32
    _fits_nvidia(ps)
    _fits_nvidia(ps2)


def test_h200_column_sum_is_coalesced_and_fills_the_device():
    rt = _fake_rt(H200)
    cfg = G.settings(rt.profile)
    # m.sum(0) of 8192 x 4096: the outputs are the contiguous dim
    assert G.choose_design((4096,), (1,), (8192,), (4096,)) == "cols"
    ps = G.cols_pass(rt, cfg, 4096, 8192, cfg.load_width)
    assert ps.design == "cols" and ps.groups >= 2 * 132, ps
    # lanes along x read consecutive columns: a warp (32 lanes) covers 32 x 4 consecutive floats of a row
    assert ps.local[0] >= 32 and ps.vw == 4 and ps.team >= 4, ps
    ps2 = G.cols_pass(rt, cfg, 4096, ps.slices, cfg.load_width, slices=1)
    assert ps2.slices == 1 and ps2.local[0] >= 32
    _fits_nvidia(ps)
    _fits_nvidia(ps2)
    # a bias gradient of a large batch: few columns, many rows, split into slabs (dimension 1 stays < 65,536)
    ps = G.cols_pass(rt, cfg, 16, 10 ** 7, 1)
    assert ps.groups >= 2 * 132 and ps.slices <= 65535
    _fits_nvidia(ps)


def test_h200_row_sum_gets_a_warp_per_row():
    rt = _fake_rt(H200)
    cfg = G.settings(rt.profile)
    assert G.choose_design((8192,), (4096,), (4096,), (1,)) == "rows"
    ps = G.rows_pass(rt, cfg, 8192, 4096, cfg.load_width)
    assert ps.team == 32 and ps.slices == 1 and ps.groups >= 2 * 132 and ps.vw == 4, ps
    _fits_nvidia(ps)
    # few long rows: split across groups, then a second pass
    ps = G.rows_pass(rt, cfg, 4, 2 ** 22, cfg.load_width)
    assert ps.groups >= 4 * 132 and ps.slices > 1
    # many short rows: small teams, many rows per group
    ps = G.rows_pass(rt, cfg, 10 ** 6, 3, 1)
    assert ps.team == 1 and ps.local[0] >= 128
    _fits_nvidia(ps)


def test_fixed_order_plans_do_not_depend_on_the_device():
    """Deterministic mode's profile fixes the group count: the order (team, slices, vw, accumulators) is a function
    of the shape alone, on a 132-unit H200, a 10-unit Apple GPU and a 2-core CPU."""
    from cltorch.backend.deterministic import profile
    det = profile()
    if det.get_value("reduction", "design") != "gpu":
        pytest.skip("the deterministic profile keeps the CPU design")
    rts = [_fake_rt(H200, det), _fake_rt(H200, det, max_compute_units=8), _fake_rt(APPLE, det),
           _fake_rt(dict(H200, is_cpu=True, name="cpu", vendor="AMD", vendor_id=0x1022, max_compute_units=2,
                         max_work_group_size=4096, max_work_item_sizes=(4096, 4096, 4096)), det)]
    for M, R in ((1, 2 ** 26), (1, 1000), (8192, 4096), (4, 2 ** 22), (10 ** 6, 3)):
        order = {(p.team, p.slices, p.vw, p.nacc) for p in (G.rows_pass(rt, G.settings(det), M, R, 4) for rt in rts)}
        assert len(order) == 1, (M, R, order)
        order = {(p.team, p.slices, p.vw, p.nacc) for p in (G.cols_pass(rt, G.settings(det), R, M, 4) for rt in rts)}
        assert len(order) == 1, (M, R, order)


def test_design_choice():
    assert G.choose_design((), (), (1 << 20,), (1,)) == "rows"                 # full
    assert G.choose_design((37,), (1,), (300,), (37,)) == "cols"              # sum(0)
    assert G.choose_design((37,), (300,), (300,), (1,)) == "rows"             # sum(1)
    assert G.choose_design((5, 8), (48, 1), (6,), (8,)) == "cols"             # sum(1) of (5, 6, 8)
    assert G.choose_design((8,), (1,), (), ()) == "cols"                      # a size-1 reduced dim
    assert G.choose_design((300,), (600,), (37,), (2,)) == "rows"             # strided both ways: the smaller
    assert G.choose_design((300,), (2,), (37,), (600,)) == "cols"


# ------------------------------------------------------------------------------------------------ values
def _close(got, ref, rtol, atol, what):
    import torch
    g = got.cpu().numpy()
    r = ref.numpy() if isinstance(ref, torch.Tensor) else np.asarray(ref)
    assert g.shape == r.shape, (what, g.shape, r.shape)
    assert g.dtype == r.dtype or (g.dtype == np.float32 and r.dtype == np.float64) or (g.dtype == np.float16), \
        (what, g.dtype, r.dtype)
    if g.dtype.kind in "biu":
        assert np.array_equal(g, r), what
    else:
        np.testing.assert_allclose(g.astype(np.float64), r.astype(np.float64), rtol=rtol, atol=atol,
                                   equal_nan=True, err_msg=what)


def _cases():
    rng = np.random.default_rng(26)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    big = f32(1 << 20)
    m = f32(512, 1024)
    tall = f32(70000, 3)
    lng = f32(3, 100003)
    cube = f32(6, 7, 9)
    ties = rng.integers(0, 3, (257, 129)).astype(np.float32)
    ties[5, 7] = np.nan
    ints = rng.integers(-1000, 1000, (300, 33)).astype(np.int64)
    half = rng.standard_normal((40, 300)).astype(np.float16)
    f64 = rng.standard_normal((1000, 37))
    bools = rng.random((65, 130)) > 0.97
    one, odd = f32(1), f32(7)
    # (name, input, f(module, tensor), rtol, atol): module is cltorch or torch
    return [
        ("sum of 2^20", big, lambda M, t: t.sum(), 1e-5, 1e-3),
        ("mean, amax, argmin of 2^20", big, lambda M, t: M.stack([t.mean(), t.amax(), t.argmin().to(t.dtype)]),
         1e-5, 1e-6),
        ("sum of 1 element", one, lambda M, t: t.sum(), 0, 0),
        ("sum of 7 elements", odd, lambda M, t: t.sum(), 1e-6, 1e-6),
        ("column sums 512 x 1024", m, lambda M, t: t.sum(0), 1e-5, 1e-4),
        ("column argmax 512 x 1024", m, lambda M, t: t.argmax(0), 0, 0),
        ("row sums 512 x 1024, keepdim", m, lambda M, t: t.sum(1, keepdim=True), 1e-5, 1e-4),
        ("70,000 rows: columns", tall, lambda M, t: t.sum(0), 1e-5, 1e-3),
        ("70,000 rows: rows", tall, lambda M, t: t.sum(1), 1e-5, 1e-5),
        ("70,000 rows: argmax of each", tall, lambda M, t: t.argmax(1), 0, 0),
        ("long odd rows", lng, lambda M, t: t.sum(1), 1e-5, 1e-3),
        ("long odd rows: logsumexp", lng, lambda M, t: M.logsumexp(t, 1), 1e-5, 1e-5),
        ("transposed: sum(1)", m, lambda M, t: t.t().sum(1), 1e-5, 1e-4),
        ("transposed: full", m, lambda M, t: t.t()[3:].sum(), 1e-5, 1e-2),
        ("unaligned rows", m, lambda M, t: t[:, 1:].sum(1), 1e-5, 1e-4),
        ("unaligned columns", m, lambda M, t: t[1:, 3:].sum(0), 1e-5, 1e-4),
        ("every other row, columns", m, lambda M, t: t[::2].sum(0), 1e-5, 1e-4),
        ("3-d over (0, 2)", cube, lambda M, t: t.sum((0, 2)), 1e-5, 1e-5),
        ("3-d permuted over (0, 1)", cube, lambda M, t: t.permute(2, 0, 1).sum((1, 2)), 1e-5, 1e-5),
        ("var and std", m, lambda M, t: M.stack([t.var(1), t.std(0)[:512]]), 1e-4, 1e-5),
        ("vector norm", m, lambda M, t: t.norm(dim=0), 1e-5, 1e-5),
        ("prod", m, lambda M, t: (t[:4, :50] * 0.1 + 1).prod(1), 1e-5, 1e-6),
        ("first index on ties, NaN", ties, lambda M, t: M.stack([t.argmax(0), t.argmin(1)[:129]]), 0, 0),
        ("amax with NaN", ties, lambda M, t: t.amax(1), 0, 0),
        ("int64 sum and amin", ints, lambda M, t: M.stack([t.sum(0), t.amin(0)]), 0, 0),
        ("float16 rows", half, lambda M, t: t.sum(1), 2e-3, 2e-2),
        ("float64 columns", f64, lambda M, t: t.sum(0), 1e-12, 1e-12),
        ("bool any/all, count", bools, lambda M, t: M.stack([t.any(1).long(), t.all(1).long(),
                                                          M.count_nonzero(t, 1)]), 0, 0),
    ]


def _run_cases(device, cases):
    import torch
    for name, a, f, rtol, atol in cases:
        ref_in = torch.from_numpy(a.astype(np.float64) if a.dtype == np.float32 else a)
        ref = f(torch, ref_in)
        if a.dtype == np.float32 and ref.dtype == torch.float64:
            ref = ref.float() if rtol == 0 else ref
        got = f(ct, ct.from_numpy(a).to(device))
        _close(got, ref, rtol, atol, name)


def test_values_under_the_nvidia_configuration():
    with gpu_configuration(H200) as rt:
        assert rt.profile.get_value("reduction", "design") == "gpu"
        _run_cases("cpu", _cases())
        from cltorch.ops import reduction as R
        assert R._plans and all(p.design == "gpu" for p in R._plans.values() if p.kind == "launch")


def test_values_under_the_apple_configuration():
    """Apple's limits (256 work-items per group, 32 KiB) and its smaller local size."""
    keep = {"sum of 2^20", "column sums 512 x 1024", "column argmax 512 x 1024", "70,000 rows: columns",
            "long odd rows", "transposed: full", "first index on ties, NaN", "int64 sum and amin"}
    with gpu_configuration(APPLE):
        _run_cases("cpu", [c for c in _cases() if c[0] in keep])


def test_empty_and_errors_under_the_nvidia_configuration():
    import torch
    with gpu_configuration(H200):
        e = np.zeros((0, 3), np.float32)
        _close(ct.from_numpy(e).sum(0), torch.from_numpy(e).sum(0), 0, 0, "empty sum(0)")
        assert np.isnan(ct.from_numpy(e).mean().item())
        _close(ct.from_numpy(e).sum(1), torch.from_numpy(e).sum(1), 0, 0, "no outputs")
        with pytest.raises(IndexError):
            ct.from_numpy(e).argmax(0)


def test_compiled_prologue_and_finish_fuse_into_the_gpu_design():
    """cltorch.compile fuses `a * b + 0.5` into the GPU design's reduction (each pass's kernel reads the operands)
    and sqrt(|sum|) into its finish; the values are torch's."""
    import torch
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((64, 256)).astype(np.float32), rng.standard_normal((64, 256)).astype(np.float32)
    with gpu_configuration(H200) as rt:
        dev = f"cl:{rt.index}"
        for dim in (0, 1, None):
            cf = ct.compile(lambda x, y: (x * y + 0.5).sum(dim))
            with ct.no_grad():
                for _ in range(3):
                    got = cf(ct.from_numpy(a).to(dev), ct.from_numpy(b).to(dev))
            labels = cf.graphs()[0].labels()
            assert all(lab.startswith("reduction_gpu:") for lab in labels), labels
            ref = (torch.from_numpy(a).double() * torch.from_numpy(b).double() + 0.5).sum(dim)
            _close(got, ref, 1e-5, 1e-4, f"prologue dim {dim}")
        cf = ct.compile(lambda x, y: ct.sqrt((x * y).sum().abs()))
        with ct.no_grad():
            for _ in range(3):
                got = cf(ct.from_numpy(a).to(dev), ct.from_numpy(b).to(dev))
        assert all(lab.startswith("reduction_gpu:") for lab in cf.graphs()[0].labels())
        _close(got, torch.sqrt((torch.from_numpy(a).double() * torch.from_numpy(b).double()).sum().abs()), 1e-5,
               1e-6, "finish")
