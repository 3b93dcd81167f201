"""The GEMM tests' harness (tests/test_gemm_kernel.py: the CPU design; tests/test_gemm_gpu.py: the GPU design).

Operands live in raw pyopencl buffers laid out with offsets and strides (transposed, sliced, batch-broadcast), so
the tests need neither the Tensor class nor any copy. :func:`check` runs one product through
``cltorch.ops.gemm.gemm``, compares it with numpy in float64 and checks that C's storage outside its view is
untouched.
"""
import numpy as np
import pyopencl as cl

from cltorch.ops.gemm import gemm

# (row stride, column stride, batch stride) of a (rows, cols) operand in each layout
LAYOUTS = {"row": lambda rows, cols: (cols, 1, rows * cols),
           "col": lambda rows, cols: (1, rows, rows * cols),
           "strided": lambda rows, cols: (2 * cols + 1, 2, rows * (2 * cols + 1)),
           "bcast": lambda rows, cols: (cols, 1, 0)}


def normal(rng, n):
    return rng.standard_normal(n)


def uniform(rng, n):
    return rng.uniform(-1, 1, n)


def operand(rng, dt, rows, cols, batch, layout, pad, draw=normal):
    """A flat storage and the descriptor of a (batch, rows, cols) operand laid out as ``layout``: "row"
    (row-major), "col" (column-major = transposed), "strided" (every other column of a wider row-major matrix),
    "bcast" (one matrix shared by every batch entry, batch stride 0). ``pad`` elements precede and follow the
    operand (the element offset): 8 keeps vector alignment, so the in-place vector paths run; 3 does not.
    Returns (flat array, (offset, row stride, column stride, batch stride), the (batch, rows, cols) view)."""
    if layout not in LAYOUTS:
        raise ValueError(layout)
    off = pad
    rs, cs, bs = LAYOUTS[layout](rows, cols)
    n = off + max(batch - 1, 0) * bs + max(rows - 1, 0) * rs + max(cols - 1, 0) * cs + 1 + pad
    flat = draw(rng, n).astype(dt)
    view = np.lib.stride_tricks.as_strided(flat[off:], (batch, rows, cols),
                                           (bs * flat.itemsize, rs * flat.itemsize, cs * flat.itemsize))
    return flat, (off, rs, cs, bs), view


def buffer(rt, flat):
    """A device buffer holding a copy of ``flat``."""
    return cl.Buffer(rt.ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=flat)


def check(rt, M, N, K, dt, la, lb, lc, alpha, beta, batch, rng, pad, draw, tol, scaled, c_nan=False, E=None):
    """C = alpha A @ B + beta C (+ E: "row" a bias row, "col" a per-row column) on ``rt`` against numpy in float64,
    within ``rtol = tol`` and ``atol = tol * sqrt(K)`` (times max(1, max |C|) when ``scaled``); ``c_nan``: C starts
    as NaN (beta = 0 must not read it). The storage around C's view must come back untouched. Returns the whole
    storage of C as read back."""
    fa, da, A = operand(rng, dt, M, K, batch, la, pad, draw)
    fb, db, B = operand(rng, dt, K, N, batch, lb, pad, draw)
    fc, dc, Cv = operand(rng, dt, M, N, batch, lc, pad, draw)
    if c_nan:
        Cv[...] = np.nan
    C0 = Cv.astype(np.float64)
    before = fc.copy()
    bA, bB, bC = buffer(rt, fa), buffer(rt, fb), buffer(rt, fc)
    kw = {}
    ref_e = 0.0
    if E is not None:
        e = draw(rng, N if E == "row" else M).astype(dt)
        kw["E"] = (buffer(rt, e), 0, 0 if E == "row" else 1, 1 if E == "row" else 0, 0)
        ref_e = e.reshape((1, 1, N) if E == "row" else (1, M, 1)).astype(np.float64)
    gemm(rt, M, N, K, (bA,) + da, (bB,) + db, (bC,) + dc, alpha, beta, batch, dt, **kw)
    out = np.empty_like(fc)
    cl.enqueue_copy(rt.queue, out, bC)
    rt.queue.finish()
    got = np.lib.stride_tricks.as_strided(out[dc[0]:], Cv.shape, Cv.strides).astype(np.float64)
    ref = alpha * np.matmul(A.astype(np.float64), B.astype(np.float64))
    if beta != 0:
        ref = ref + beta * C0
    ref = ref + ref_e
    scale = max(1.0, float(np.abs(ref).max()) if ref.size else 1.0) if scaled else 1.0
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * scale * max(K, 1) ** 0.5)
    # elements of C's storage outside the C view are untouched
    mask = np.ones(fc.shape, bool)
    ar = np.arange(fc.size)
    idx = np.lib.stride_tricks.as_strided(ar[dc[0]:], Cv.shape, (dc[3] * ar.itemsize, dc[1] * ar.itemsize,
                                                                dc[2] * ar.itemsize))
    mask[idx.ravel()] = False
    np.testing.assert_array_equal(out[mask], before[mask])
    return out
