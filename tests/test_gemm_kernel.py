"""The GEMM kernel (cl_kernels/gemm.cl.mako through cltorch/ops/gemm/) against numpy.

Operands live in raw pyopencl buffers laid out with arbitrary offsets and strides (transposed, sliced,
batch-broadcast), so these tests need neither the Tensor class nor any copy. The reference is numpy in
float64. Every code path of the CPU design's template is run: B read in place or packed, A strided or packed,
float32, float64, float16 and bfloat16 storage (the GPU design: tests/test_gemm_gpu.py).
"""
import numpy as np
import pytest

cl = pytest.importorskip("pyopencl")

from cltorch.ops import gemm as _gemm  # noqa: E402
from cltorch.ops.gemm import gemm, GemmError  # noqa: E402
from gemm_harness import buffer as _buf, check, normal  # noqa: E402


def _run(rt, M, N, K, dt=np.float32, la="row", lb="row", lc="row", alpha=1.0, beta=0.0, batch=1, seed=0,
         c_nan=False, pad=8):
    tol = {np.float32: 2e-5, np.float64: 1e-12, np.float16: 2e-3}.get(dt, 2e-2)      # bfloat16: 8-bit mantissa
    return check(rt, M, N, K, dt, la, lb, lc, alpha, beta, batch, np.random.default_rng(seed), pad, normal, tol,
                 scaled=True, c_nan=c_nan)


SHAPES = [(37, 53, 29), (1, 1, 1), (1, 17, 5), (13, 1, 7), (7, 9, 1), (65, 33, 130), (24, 32, 16), (70, 300, 20)]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("M,N,K", SHAPES)
def test_odd_sizes(rt, dt, M, N, K):
    _run(rt, M, N, K, dt)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("la,lb,lc", [("col", "row", "row"), ("row", "col", "row"), ("col", "col", "row"),
                                      ("strided", "strided", "strided"), ("row", "row", "col")])
def test_transposed_and_strided(rt, dt, la, lb, lc):
    _run(rt, 19, 40, 23, dt, la, lb, lc)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_unaligned_offsets(rt, dt):
    _run(rt, 19, 48, 23, dt, pad=3)
    _run(rt, 12, 32, 16, dt, pad=3, beta=1.0)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_batched_and_broadcast(rt, dt):
    _run(rt, 11, 24, 9, dt, batch=4)
    _run(rt, 11, 21, 9, dt, la="col", lb="bcast", batch=3, alpha=2.0, beta=-1.0)
    _run(rt, 6, 16, 8, dt, la="bcast", lb="strided", batch=5)


@pytest.mark.parametrize("M", [1, 3])
def test_small_m_with_transposed_b(rt, M):
    """x @ W.T with a small batch: right on every device; the CPU design (the device's profile chooses it) runs it
    as the transposed product (W read in place instead of packed). The GPU design stages both operands in
    local-memory tiles whatever their layout (the H200 run: its plan is the GPU one), so there it is not swapped."""
    _run(rt, M, 40, 37, np.float32, lb="col", alpha=0.5, beta=1.0)
    _run(rt, M, 24, 16, np.float64, lb="col", lc="strided", batch=2)
    key = [k for k in _gemm._plans if k[2:6] == (M, 24, 16, 2)][-1]
    assert isinstance(_gemm._plans[key], _gemm.cpu.Swapped) == (_gemm.plan.design(rt.profile) == "cpu")


@pytest.mark.parametrize("alpha,beta", [(0.5, 2.0), (0.0, 1.5), (-1.0, 1.0), (3.0, 0.0)])
def test_alpha_beta(rt, alpha, beta):
    _run(rt, 17, 24, 13, np.float32, alpha=alpha, beta=beta)
    _run(rt, 16, 32, 8, np.float64, alpha=alpha, beta=beta)


def test_beta_zero_ignores_nan_in_c(rt):
    _run(rt, 12, 16, 5, np.float32, beta=0.0, c_nan=True)
    _run(rt, 5, 7, 3, np.float32, lc="strided", beta=0.0, c_nan=True)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_host_memory_with_element_alignment_only(rt, dt):
    """Buffers over numpy memory (cpu tensors) may start 16 bytes past a 32-byte boundary; the in-place
    vector paths must not assume more than element alignment."""
    n, isz = 48, np.dtype(dt).itemsize
    raw = np.zeros(3 * n * n + 64, dt)
    st = next(i for i in range(64) if (raw.ctypes.data + i * isz) % 64 == 16)
    flat = raw[st:st + 3 * n * n]
    rng = np.random.default_rng(3)
    flat[:2 * n * n] = rng.standard_normal(2 * n * n)
    A, B, C = flat[:n * n].reshape(n, n), flat[n * n:2 * n * n].reshape(n, n), flat[2 * n * n:].reshape(n, n)
    buf = cl.Buffer(rt.ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.USE_HOST_PTR, hostbuf=flat)
    gemm(rt, n, n, n, (buf, 0, n, 1, 0), (buf, n * n, n, 1, 0), (buf, 2 * n * n, n, 1, 0), 1.0, 0.0, 1, dt)
    cl.enqueue_copy(rt.queue, C, buf, src_offset=2 * n * n * isz)
    rt.queue.finish()
    np.testing.assert_allclose(C, A @ B, rtol=1e-4, atol=1e-4)


def test_empty_dims(rt):
    _run(rt, 9, 10, 0, np.float32, beta=0.5)       # K == 0: C = beta * C
    _run(rt, 9, 16, 0, np.float32, beta=0.0)
    # M == 0 or N == 0: nothing is queued and nothing fails
    buf = cl.Buffer(rt.ctx, cl.mem_flags.READ_WRITE, 64)
    gemm(rt, 0, 5, 3, (buf, 0, 3, 1, 0), (buf, 0, 5, 1, 0), (buf, 0, 5, 1, 0))
    gemm(rt, 4, 0, 3, (buf, 0, 3, 1, 0), (buf, 0, 5, 1, 0), (buf, 0, 5, 1, 0))


def test_float16_accumulates_in_float32(rt):
    _run(rt, 21, 32, 40, np.float16)
    _run(rt, 9, 13, 7, np.float16, la="col", lb="strided", alpha=0.5, beta=1.0)


def test_bfloat16_accumulates_in_float32(rt, gemm_profile):
    """bfloat16 storage (16-bit patterns, widened exactly, rounded to nearest even once at the store): B in place
    and packed, A strided and packed, against numpy in float64 on the bfloat16 inputs."""
    bf16 = pytest.importorskip("ml_dtypes").bfloat16
    _run(rt, 21, 32, 40, bf16)
    _run(rt, 9, 13, 7, bf16, la="col", lb="strided", alpha=0.5, beta=1.0)
    row = {"mr": 4, "nv": 2, "vw": 8, "lx": 2, "ly": 2, "a_mode": "packed", "b_mode": "packed"}
    gemm_profile({"design": "cpu", "sizes": [row]})
    _run(rt, 37, 53, 45, bf16, lb="col", beta=0.5)


def test_bad_arguments(rt):
    buf = cl.Buffer(rt.ctx, cl.mem_flags.READ_WRITE, 64)
    with pytest.raises(GemmError, match="dtype"):
        gemm(rt, 2, 2, 2, (buf, 0, 2, 1, 0), (buf, 0, 2, 1, 0), (buf, 0, 2, 1, 0), dtype=np.int32)
    with pytest.raises(GemmError, match="non-negative"):
        gemm(rt, -1, 2, 2, (buf, 0, 2, 1, 0), (buf, 0, 2, 1, 0), (buf, 0, 2, 1, 0))
    with pytest.raises(GemmError, match="operand B"):
        gemm(rt, 2, 2, 2, (buf, 0, 2, 1, 0), (buf, 0, 2, 1), (buf, 0, 2, 1, 0))


@pytest.fixture
def gemm_profile(rt):
    """Run a test under a replaced [gemm] profile table, then restore it."""
    saved = rt.profile.get("gemm")

    def use(table):
        rt.profile["gemm"] = table
        _gemm.clear_cache()
    yield use
    if saved is None:
        rt.profile.pop("gemm", None)
    else:
        rt.profile["gemm"] = saved
    _gemm.clear_cache()


@pytest.mark.parametrize("row", [
    {"mr": 4, "nv": 1, "vw": 8, "lx": 4, "ly": 2, "a_mode": "packed", "b_mode": "packed"},
    {"mr": 6, "nv": 2, "vw": 8, "lx": 8, "ly": 8, "a_mode": "strided", "b_mode": "direct"},
    {"mr": 3, "nv": 2, "vw": 4, "lx": 2, "ly": 3, "a_mode": "packed", "b_mode": "auto", "ku": 2},
    {"mr": 2, "nv": 3, "vw": 1, "lx": 1, "ly": 1, "a_mode": "strided", "b_mode": "packed"},
    # K blocking (kc) with tm tiles per work-item: blocks and tile stacks that do not divide M and K
    {"mr": 4, "nv": 1, "vw": 8, "lx": 2, "ly": 2, "a_mode": "packed", "b_mode": "packed", "kc": 8, "tm": 3},
    {"mr": 3, "nv": 2, "vw": 8, "lx": 3, "ly": 1, "a_mode": "strided", "b_mode": "auto", "kc": 7, "tm": 2},
])
def test_register_paths(rt, gemm_profile, row):
    gemm_profile({"design": "cpu", "sizes": [row], "sizes_f64": [row]})
    _run(rt, 29, 48, 31, np.float32)
    _run(rt, 29, 48, 31, np.float32, la="col", lb="col", alpha=0.5, beta=2.0, batch=2)
    _run(rt, 13, 21, 10, np.float32, la="strided", lb="row", batch=2)
    # more panels than a pack work-group: the launch grid is padded past the last panel
    _run(rt, 130, 150, 20, np.float32, la="col", lb="row")


def test_register_paths_float64(rt, gemm_profile):
    row = {"mr": 4, "nv": 2, "vw": 4, "lx": 4, "ly": 2, "a_mode": "packed", "b_mode": "auto", "kc": 8, "tm": 2}
    gemm_profile({"design": "cpu", "sizes": [row], "sizes_f64": [row]})
    _run(rt, 29, 48, 31, np.float64, la="col", lb="col", alpha=0.5, beta=2.0, batch=2)
    _run(rt, 13, 24, 10, np.float64, la="strided", lb="row", batch=2)


def test_size_table_lookup(rt):
    prof = {"gemm": {"design": "cpu", "sizes": [{"upto": 100, "mr": 4}, {"upto": 1000, "mr": 6}, {"mr": 8}]}}
    assert _gemm.choose_config(prof, np.float32, 64, 64, 64)["mr"] == 4
    assert _gemm.choose_config(prof, np.float32, 512, 512, 512)["mr"] == 6
    assert _gemm.choose_config(prof, np.float32, 2048, 2048, 2048)["mr"] == 8
    # float64 without its own table halves the vector width of the fp32 row
    assert _gemm.choose_config(prof, np.float64, 64, 64, 64)["vw"] == _gemm.plan.DEFAULT_REG["vw"] // 2


def test_plan_is_cached(rt):
    from cltorch.backend import stats
    rng = np.random.default_rng(1)
    A = rng.standard_normal((8, 8)).astype(np.float32)
    bA = _buf(rt, A)
    bC = cl.Buffer(rt.ctx, cl.mem_flags.READ_WRITE, A.nbytes)
    d = (bA, 0, 8, 1, 0)
    gemm(rt, 8, 8, 8, d, d, (bC, 0, 8, 1, 0))
    n_plans, builds = len(_gemm._plans), stats()["builds"]
    for _ in range(3):
        gemm(rt, 8, 8, 8, d, d, (bC, 0, 8, 1, 0), 2.0, 0.0)
    assert len(_gemm._plans) == n_plans and stats()["builds"] == builds
    out = np.empty_like(A)
    cl.enqueue_copy(rt.queue, out, bC)
    rt.queue.finish()
    np.testing.assert_allclose(out, 2.0 * A @ A, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("row", [
    {"mr": 4, "nv": 2, "vw": 8, "lx": 2, "ly": 2, "a_mode": "strided"},
    {"mr": 3, "nv": 2, "vw": 8, "lx": 3, "ly": 1, "a_mode": "packed", "kc": 7, "tm": 2},
])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_last_panel_in_place_gives_the_packed_bits(rt, gemm_profile, row, dt):
    """B read in place with N % nr != 0: the last column panel is computed at columns N-nr.., stores only the
    columns the panel before left, and gives the bits of the packed (zero-padded) panel; with beta != 0 no
    element of C is read after another work-item stored it, and C outside its view is untouched (_run)."""
    outs = {}
    for b_mode in ("auto", "packed"):
        gemm_profile({"design": "cpu", "sizes": [dict(row, b_mode=b_mode)], "sizes_f64": [dict(row, b_mode=b_mode)]})
        outs[b_mode] = [_run(rt, 29, 40, 70, dt, alpha=0.5, beta=2.0, batch=2),       # nr 16: 40 = 2*16 + 8
                        _run(rt, 13, 17, 9, dt, la="col", lc="strided", beta=1.0),     # one column past a panel
                        _run(rt, 7, 31, 130, dt, la="strided", batch=3)]
        packed = [p.pack_b is not None for k, p in _gemm._plans.items() if k[2:5] in ((29, 40, 70), (7, 31, 130))]
        assert packed == [b_mode == "packed"] * 2
    for a, b in zip(outs["auto"], outs["packed"]):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16])
def test_k_contiguous_pack_transposes_in_registers(rt, gemm_profile, dt):
    """B stored transposed (x @ W.T) and A row-major are packed from k-contiguous sources: lanes in groups
    of 8 through an 8x8 register transpose (nr, mr multiples of 8), edge panels and k steps by the element
    copy (checked against numpy in float64 by _run)."""
    row = {"mr": 8, "nv": 2, "vw": 8, "lx": 2, "ly": 2, "a_mode": "packed", "b_mode": "packed"}
    gemm_profile({"design": "cpu", "sizes": [row], "sizes_f64": [row]})
    _run(rt, 37, 53, 45, dt, lb="col", beta=0.5)           # 45 = 5*8 + 5 k steps, 53 = 3*16 + 5 lanes
    _run(rt, 40, 48, 64, dt, lb="col", batch=2)            # whole groups only
    _run(rt, 21, 19, 30, dt, lb="strided", la="strided")   # neither direction contiguous: the general copy
