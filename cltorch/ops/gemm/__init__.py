"""The GEMM launcher: ``C[b] = alpha * A[b] @ B[b] + beta * C[b] (+ E[b])`` on one OpenCL device.

This package knows buffers, element offsets and strides, not Tensors; the matmul family of ops (``matmul``,
``mm``, ``bmm``, ``addmm``, ``baddbmm``, ``linear``, ...), convolution's GEMM paths, the recurrent layers and
attention lower to :func:`gemm`.

Two designs, chosen by the device profile's ``[gemm] design`` (``plan.py`` reads the profile):

* ``"cpu"`` (``cpu.py``, ``cl_kernels/gemm.cl.mako``): register blocking without local memory, a BLIS-style
  micro-kernel with packed panels;
* ``"gpu"`` (``gpu.py``, ``cl_kernels/gemm_gpu.cl.mako`` with the tile blocks of ``gemm_tiles.cl.mako``):
  work-group tiles in local memory (double buffered), register blocks read with vector loads, split-K for
  products with few tiles and a long K. Under it, float16/bfloat16 products (and float32 ones while TF32 is
  allowed) run on matrix units (``mma.py``, ``cl_kernels/gemm_mma.cl.mako``: NVIDIA tensor cores, AMD MFMA/WMMA,
  Intel DPAS) where the profile or ``CLTORCH_MATRIX_UNITS`` turns them on and their probe passed on the device.

Deterministic mode (``cltorch.use_deterministic_algorithms``) runs one profile on every device
(``backend/deterministic.py``: the CPU tables), so every device runs the CPU design there, whose K loop adds in
blocks of 64 in a fixed order.

Every launch plan is cached: a repeated call with the same shapes and strides costs a dict lookup plus the
enqueues (a few microseconds each). Nothing here waits for the device.
"""
import numpy as np

from . import cpu, gpu, mma, plan  # noqa: F401 - the designs (cpu.CpuPlan, gpu.GpuPlan, mma.MmaPlan), plan.py
from .plan import choose_config, design
from ... import _runtime_settings

_PREC = _runtime_settings._matmul_precision      # float32 plans differ when TF32 is allowed: part of the key

__all__ = ["gemm", "GemmError", "choose_config", "design", "clear_cache", "epilogue_kernel", "launch_info",
           "describe"]

_INT_MAX = 2 ** 31 - 1


def _bf16():
    from ..._dtype import bfloat16
    return np.dtype(bfloat16.np)


# numpy dtype -> (storage type name in the templates, accumulation type)
_DTYPES = {np.dtype(np.float32): ("float", "float"), np.dtype(np.float64): ("double", "double"),
           np.dtype(np.float16): ("half", "float")}
try:
    _DTYPES[_bf16()] = ("bf16", "float")
except Exception:  # noqa: BLE001 - ml_dtypes missing: no bfloat16 anywhere
    pass


class GemmError(ValueError):
    """Bad arguments to :func:`gemm` (negative sizes, unsupported dtype, malformed descriptor), or a profile
    row no kernel can be made from."""


_plans = {}


def clear_cache():
    """Forget every launch plan (kernels stay cached in their Runtime) and the matrix units chosen per device."""
    _plans.clear()
    mma.clear_cache()


def _check_desc(name, d):
    if not isinstance(d, (tuple, list)) or len(d) != 5:
        raise GemmError(f"gemm: operand {name} must be (buffer, offset, row_stride, col_stride, batch_stride), "
                        f"got {d!r}")
    for x in d[1:]:
        try:
            if int(x) != x:
                raise ValueError
        except (TypeError, ValueError):
            raise GemmError(f"gemm: operand {name}'s offset and strides must be integers, got {d!r}") from None


def _extent(off, batch, bs, rows, rs, cols, cs):
    """Largest element index an operand touches (plus one)."""
    return off + max(batch - 1, 0) * bs + max(rows - 1, 0) * rs + max(cols - 1, 0) * cs + 1


def gemm(rt, M, N, K, A, B, C, alpha=1.0, beta=0.0, batch=1, dtype=np.float32, E=None):
    """Enqueue ``C[b] = alpha * A[b] @ B[b] + beta * C[b] (+ E[b])`` for ``b < batch`` on ``rt``'s queue.

    Arguments:
        rt: a ``cltorch.backend.Runtime``.
        M, N, K: A is ``M x K``, B is ``K x N``, C is ``M x N`` (each per batch entry); 0 is allowed.
        A, B, C: descriptors ``(buffer, offset, row_stride, col_stride, batch_stride)``, all in elements
            of ``dtype``; element ``(b, i, j)`` of an operand is ``buffer[offset + b*batch_stride +
            i*row_stride + j*col_stride]``. Strides may be anything non-negative (0 broadcasts), so
            transposed and sliced operands are passed as they are, with no copy by the caller. C must not
            overlap A or B, and C's elements must not overlap each other.
        alpha, beta: scalars. When ``beta == 0`` C is not read (NaN or Inf in C do not propagate), as
            in BLAS and ``torch.addmm``.
        batch: number of independent products.
        dtype: numpy dtype of all three operands: float32, float64 (device needs fp64), float16 (read and written
            with ``vload_half``/``vstore_half_rte``) or bfloat16 (``ml_dtypes.bfloat16``, 16-bit patterns
            widened exactly and rounded to nearest even on store); both 16-bit types accumulate in float32.
        E: optional epilogue operand, a descriptor like A's (``M x N`` per batch entry; strides may be 0, so a
            bias row broadcasts with ``row_stride = 0``), added after the rest is rounded to C's type: the
            stored value equals the GEMM's followed by a separate elementwise ``C + E``. float32 and float64
            only; E may be read-only shared with A or B but must not overlap C.

    Returns nothing and does not wait: the work is queued in order on ``rt.queue``. Temporary buffers (packed
    panels, split-K partial sums) come from ``rt.alloc`` and go back to the pool once queued (safe on the
    in-order queue).

    Raises GemmError on negative sizes, a malformed descriptor, an unsupported dtype (or E with a 16-bit dtype),
    or a device profile row from which no kernel can be made.
    """
    try:
        a_buf, a_off, a_rs, a_cs, a_bs = A
        b_buf, b_off, b_rs, b_cs, b_bs = B
        c_buf, c_off, c_rs, c_cs, c_bs = C
        # offsets are not part of the key, only whether any passes 2^30 and their residue mod 8 (vector alignment)
        o = a_off | b_off | c_off
        key = (rt, dtype, M, N, K, batch, a_rs, a_cs, a_bs, b_rs, b_cs, b_bs, c_rs, c_cs, c_bs, o >> 30, o & 7,
               _PREC[0])
        plan = _plans[key]
    except (KeyError, TypeError, ValueError):
        for name, d in (("A", A), ("B", B), ("C", C)):
            _check_desc(name, d)
        a_buf, a_off, a_rs, a_cs, a_bs = (int(x) if i else x for i, x in enumerate(A))
        b_buf, b_off, b_rs, b_cs, b_bs = (int(x) if i else x for i, x in enumerate(B))
        c_buf, c_off, c_rs, c_cs, c_bs = (int(x) if i else x for i, x in enumerate(C))
        o = a_off | b_off | c_off
        key = (rt, dtype, M, N, K, batch, a_rs, a_cs, a_bs, b_rs, b_cs, b_bs, c_rs, c_cs, c_bs, o >> 30, o & 7,
               _PREC[0])
        plan = _plans.get(key)
        if plan is None:
            plan = _make_plan(rt, np.dtype(dtype), M, N, K, batch, (a_off, a_rs, a_cs, a_bs),
                              (b_off, b_rs, b_cs, b_bs), (c_off, c_rs, c_cs, c_bs), o & 7)
            if not getattr(plan, "provisional", False):
                _plans[key] = plan
    if E is not None:
        _check_desc("E", E)
        if _DTYPES.get(np.dtype(dtype), ("",))[0] in ("half", "bf16"):
            raise GemmError(f"gemm: the epilogue operand E supports float32 and float64, not {np.dtype(dtype)}")
        if min(int(x) for x in E[1:]) < 0:
            raise GemmError(f"gemm: operand E has a negative offset or stride: {tuple(E[1:])}")
        E = (E[0], *(int(x) for x in E[1:]))
    plan.run(a_buf, a_off, b_buf, b_off, c_buf, c_off, alpha, beta, E)


class _Noop:
    """The plan of an empty product (M, N or batch 0): nothing to queue."""
    params = None

    def run(self, *args):
        return None

    def describe(self):
        return {"design": "none"}


def _make_plan(rt, dt, M, N, K, batch, a, b, c, off_mod):
    if dt not in _DTYPES:
        raise GemmError(f"gemm: unsupported dtype {dt}; expected float32, float64, float16 or bfloat16")
    for n, v in (("M", M), ("N", N), ("K", K), ("batch", batch)):
        if int(v) != v or v < 0:
            raise GemmError(f"gemm: {n} must be a non-negative integer, got {v!r}")
    for name, d in (("A", a), ("B", b), ("C", c)):
        if min(d) < 0:
            raise GemmError(f"gemm: operand {name} has a negative offset or stride: {d}")
    if M == 0 or N == 0 or batch == 0:
        return _Noop()
    # plans are shared by calls whose offsets differ (all below 2^30, or the key says otherwise)
    off = 2 ** 30 if max(a[0], b[0], c[0]) < 2 ** 30 else _INT_MAX
    big = max(_extent(off, batch, a[3], M, a[1], K, a[2]), _extent(off, batch, b[3], K, b[1], N, b[2]),
              _extent(off, batch, c[3], M, c[1], N, c[2])) > _INT_MAX
    return DESIGNS[design(rt.profile)](rt, dt, _DTYPES[dt], M, N, K, batch, a, b, c, big, off_mod, GemmError)


# design name (the profile's [gemm] design) -> its plan maker. Under the GPU design, products of a dtype a matrix
# unit takes run on it where the unit is switched on and passed its probe on the device (mma.py), else on gpu.py.
DESIGNS = {"cpu": cpu.make_plan, "gpu": mma.or_else(gpu.make_plan)}


def describe(rt, M, N, K, batch=1, dtype=np.float32):
    """The choices of a plan :func:`gemm` made on ``rt`` for this shape (a dict: the design and its tile, for
    benchmarks and reports), or None when no such plan was made yet."""
    dt = np.dtype(dtype)
    for k, p in _plans.items():
        if k[0] is rt and np.dtype(k[1]) == dt and k[2:6] == (M, N, K, batch):
            return p.describe()
    return None


# ------------------------------------------------------------------------------------- capture's epilogue fusion
# The kernel of each design that stores C, and where its arguments sit: (template, kernel, params test) ->
# (C buffer position, M position, alpha position, A and B buffer positions).
_WRITERS = {
    ("gemm.cl.mako", "gemm_main"): (11, 17, 20, (0, 6)),
    ("gemm_gpu.cl.mako", "gemm_tile"): (10, 16, 20, (0, 5)),
    ("gemm_gpu.cl.mako", "gemm_splitk_sum"): (3, 8, 11, (0,)),
}


def launch_info(k, gsize, args):
    """What a recorded launch of kernel ``k`` over ``gsize`` with ``args`` does, when it is the launch of a GEMM
    that stores C (``cltorch._capture`` fuses it with an add that follows), else None: a dict with ``params``
    (the template values), ``batch``, ``reads`` (the buffers it reads besides C), ``c`` ((buffer, offset, row
    stride, col stride, batch stride)), ``M``, ``N``, ``alpha``, ``beta`` and ``c_pos`` (C's argument index)."""
    src = getattr(k, "_cltorch_src", None)
    if src is None:
        return None
    where = _WRITERS.get((src[0], src[1]))
    p = src[2]
    if where is None or p.get("c_epi") or p.get("split"):
        return None
    ci, mi, ai, reads = where
    if len(args) != ai + 2:
        return None
    M, N = args[mi], args[mi + 1]
    if src[1] == "gemm_main":
        batch = gsize[2] if len(gsize) > 2 else 1
    elif src[1] == "gemm_tile":
        tiles = -(-M // p["bm"]) * -(-N // p["bn"])
        batch = gsize[0] // (p["bm"] // p["tm"] * (p["bn"] // p["tn"])) // tiles
    else:
        batch = args[10] // (M * N)
    c = tuple(args[ci:ci + 5])
    return {"params": p, "batch": batch, "reads": tuple(args[i] for i in reads), "c": c, "M": M, "N": N,
            "alpha": args[ai], "beta": args[ai + 1], "c_pos": ci}


def epilogue_kernel(rt, k):
    """Kernel ``k`` (a GEMM kernel that stores C: see :func:`launch_info`) built with the ``E`` epilogue
    (``c_epi = 1``), taking ``E, e_off, e_rs, e_cs, e_bs`` after its own arguments."""
    template, name, params, arg_types, options = k._cltorch_src
    if params.get("dt") in ("half", "bf16"):
        raise GemmError("gemm: the epilogue operand E supports float32 and float64, not 16-bit types")
    it = np.int64 if params["idx"] == "long" else np.int32
    return rt.kernel(template, name, list(arg_types) + [None, it, it, it, it], options, **dict(params, c_epi=1))
