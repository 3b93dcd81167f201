"""Launch helpers for the counter-based random fills (``cl_kernels/philox.cl.mako``).

They know buffers, not Tensors: each writes ``n`` consecutive elements of ``dtype`` into ``buf``
starting at element ``offset_elems``, from the Philox stream of ``seed`` starting at counter
``philox_offset``, and returns the number of counters (Philox blocks) it consumed, which a Generator
adds to its offset (``state = seed + offset``). The values are bit-identical to
:mod:`cltorch.ops._philox_ref` (the numpy reference) on every device, whatever ``local_size``.
The scheme, the transforms and their accuracy are documented in :mod:`cltorch.ops._philox_ref`.

Supported dtypes (numpy dtypes, or cltorch dtypes through their ``.np``):

- ``fill_uniform``, ``fill_normal``, ``fill_exponential``: float32, float64 (float64 needs a device with
  fp64). For float16, fill float32 and cast.
- ``fill_randint``: float32, float64, int64, int32, int16, int8, uint8, bool (values must fit the dtype).
- ``fill_bernoulli``: the same as ``fill_randint``; ``p`` a Python number, or a contiguous float32/float64
  buffer of ``n`` probabilities.
- ``fill_bits``: uint32 (raw Philox words).

Dropout: ``fill_bernoulli`` with ``p = 1 - drop_probability`` gives the keep mask; scale by
``1 / (1 - drop_probability)`` afterwards.

Common keyword arguments: ``stream`` (a 64-bit stream id, counter words 2 and 3; default 0),
``local_size`` (default: the profile's ``[rng] local_size``, else the driver's choice) and
``vector_width`` (Philox blocks per work-item, computed as vector lanes; default: the profile's
``[rng] vector_width``, else 8 on CPU devices and 1 elsewhere). None of them changes the values.

Errors: TypeError for an unsupported dtype, ValueError for empty ranges or bad parameters,
RuntimeError when the device lacks fp64.

Throughput on this machine's PoCL (2 cores, AMD EPYC), 16M float32 normals: about 70 ms of CPU time
(vector width 8), i.e. about 1.9 GB/s of output when both cores are free; the scalar form (vector
width 1, Random123's philox4x32 call) takes 3.4x longer.
"""
import os

import numpy as np

from ..backend import geometry
from . import _philox_ref as ref

__all__ = ["fill_bits", "fill_uniform", "fill_normal", "fill_exponential", "fill_randint", "fill_bernoulli",
           "counters_used", "include_options"]

_TEMPLATE = "philox.cl.mako"
_INT_CL = {np.dtype(np.int64): "long", np.dtype(np.int32): "int", np.dtype(np.int16): "short",
           np.dtype(np.int8): "char", np.dtype(np.uint8): "uchar", np.dtype(np.float32): "float",
           np.dtype(np.float64): "double", np.dtype(np.bool_): "uchar"}
_OPTIONS = None
_KERNELS = {}
_BASE_ARGS = [None, np.int64, np.int64, np.uint32, np.uint32, np.uint64, np.uint32, np.uint32]

counters_used = ref.counters_used


def include_options():
    """Build options that put pyopencl's bundled headers (``pyopencl-random123/philox.cl``) on the path."""
    global _OPTIONS
    if _OPTIONS is None:
        import pyopencl
        path = os.path.join(os.path.dirname(os.path.abspath(pyopencl.__file__)), "cl")
        if " " in path:
            path = '"' + path + '"'
        _OPTIONS = ("-I", path, "-w")   # -w: PoCL warns about the ABI of ulong8 builtins, harmlessly
    return _OPTIONS


def _np(dtype):
    return np.dtype(getattr(dtype, "np", dtype))


def _need_fp64(rt, what):
    if not getattr(rt.info, "fp64", True):
        raise RuntimeError(f"{what} needs float64, which the OpenCL device {rt.info.name} does not support")


def _default_local(rt):
    try:
        v = rt.profile.get_value("rng", "local_size", None)
    except Exception:
        v = None
    return int(v) if v else None


def _vector_width(rt):
    """Blocks per work-item: the profile's ``[rng] vector_width``, else 8 on CPU devices, 1 elsewhere."""
    try:
        v = rt.profile.get_value("rng", "vector_width", None)
    except Exception:
        v = None
    if v:
        return int(v)
    return 8 if getattr(rt.info, "cls", "") == "cpu" else 1


def _launch(rt, dist, buf, offset_elems, n, dtype_cl, to_bool, seed, philox_offset, stream, local_size,
            per_block, extra_dtypes, extra_args, fp=None, p_t=None, vector_width=None):
    n = int(n)
    if n < 0:
        raise ValueError(f"random fill of negative size {n}")
    nblocks = (n + per_block - 1) // per_block
    if n == 0:
        return 0
    vw = int(vector_width) if vector_width else _vector_width(rt)
    if vw not in (1, 2, 4, 8, 16):
        raise ValueError(f"vector_width must be 1, 2, 4, 8 or 16, got {vw}")
    ck = (id(rt), dist, dtype_cl, to_bool, fp["cl"] if fp else None, p_t, vw)
    k = _KERNELS.get(ck)
    if k is None:
        k = rt.kernel(_TEMPLATE, "philox_fill", _BASE_ARGS + list(extra_dtypes), options=include_options(),
                      dist=dist, out_t=dtype_cl, to_bool=to_bool, fp=fp, p_t=p_t, vw=vw)
        _KERNELS[ck] = (k, rt)        # rt kept alive so id(rt) stays unique
    else:
        k = k[0]
    items = (nblocks + vw - 1) // vw
    if local_size is None:
        local_size = _default_local(rt)
    if local_size:
        (items,), lsize = geometry.nd(rt, items, int(local_size), k)
    else:
        lsize = None
    k0, k1 = ref.key_from_seed(seed)
    s = int(stream) & ref.MASK64
    rt.launch(k, (items,), lsize, buf, np.int64(offset_elems), np.int64(n), k0, k1,
              int(philox_offset) & ref.MASK64, s & ref.MASK32, s >> 32, *extra_args)
    return nblocks


def _float_prec(rt, dtype, what):
    d = _np(dtype)
    if d not in (np.float32, np.float64):
        raise TypeError(f"{what} supports float32 and float64 outputs, got {d}"
                        + ("; fill float32 and cast" if d == np.float16 else ""))
    if d == np.float64:
        _need_fp64(rt, what)
    return ref.precision(d)


def fill_bits(rt, buf, offset_elems, n, seed, philox_offset, stream=0, local_size=None, vector_width=None):
    """Raw uint32 Philox words: element i is word ``i % 4`` of block ``i // 4``. Returns counters used."""
    return _launch(rt, "bits", buf, offset_elems, n, "uint", False, seed, philox_offset, stream, local_size,
                   4, [], [], vector_width=vector_width)


def fill_uniform(rt, buf, offset_elems, n, dtype, seed, philox_offset, low=0.0, high=1.0, stream=0,
                 local_size=None, vector_width=None):
    """Uniform draws on ``[low, high)`` (float32: 24 random bits, float64: 53). Returns counters used."""
    P = _float_prec(rt, dtype, "uniform_")
    lo, scale, hi = ref.uniform_params(low, high, P.ftype)
    ft = P.ftype
    return _launch(rt, "uniform", buf, offset_elems, n, P.cl, False, seed, philox_offset, stream, local_size,
                   ref.elements_per_block("uniform", ft), [ft, ft, ft], [lo, scale, hi], fp=_consts(P),
                   vector_width=vector_width)


def fill_normal(rt, buf, offset_elems, n, dtype, seed, philox_offset, mean=0.0, std=1.0, stream=0,
                local_size=None, vector_width=None):
    """Normal draws (Box-Muller), ``z * std + mean``. Returns counters used."""
    P = _float_prec(rt, dtype, "normal_")
    m, sd = ref.normal_params(mean, std, P.ftype)
    ft = P.ftype
    return _launch(rt, "normal", buf, offset_elems, n, P.cl, False, seed, philox_offset, stream, local_size,
                   ref.elements_per_block("normal", ft), [ft, ft], [m, sd], fp=_consts(P),
                   vector_width=vector_width)


def fill_exponential(rt, buf, offset_elems, n, dtype, seed, philox_offset, lambd=1.0, stream=0,
                     local_size=None, vector_width=None):
    """Exponential draws of rate ``lambd`` (> 0). Returns counters used."""
    if not float(lambd) > 0.0:
        raise ValueError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    P = _float_prec(rt, dtype, "exponential_")
    ft = P.ftype
    return _launch(rt, "exponential", buf, offset_elems, n, P.cl, False, seed, philox_offset, stream,
                   local_size, ref.elements_per_block("exponential", ft), [ft],
                   [ref.exponential_params(lambd, ft)], fp=_consts(P), vector_width=vector_width)


def _out_cl(rt, dtype, what):
    d = _np(dtype)
    cl = _INT_CL.get(d)
    if cl is None:
        raise TypeError(f"{what} does not support dtype {d}")
    if d == np.float64:
        _need_fp64(rt, what)
    return cl, d == np.bool_


def fill_randint(rt, buf, offset_elems, n, dtype, seed, philox_offset, low, high, stream=0, local_size=None,
                 vector_width=None):
    """Integers in ``[low, high)`` (64 random bits, multiply-shift), stored as ``dtype``. Returns counters."""
    cl, to_bool = _out_cl(rt, dtype, "random_")
    lo, rng = ref.randint_params(low, high)
    return _launch(rt, "randint", buf, offset_elems, n, cl, to_bool, seed, philox_offset, stream, local_size,
                   2, [np.uint64, np.uint64], [lo, rng], vector_width=vector_width)


def fill_bernoulli(rt, buf, offset_elems, n, dtype, seed, philox_offset, p=0.5, p_buf=None, p_offset=0,
                   p_dtype=None, stream=0, local_size=None, vector_width=None):
    """Bernoulli draws, 1 with probability ``ceil(p * 2**32) / 2**32``. Returns counters used.

    ``p`` is a number, or pass ``p_buf`` (a contiguous buffer of ``n`` float32/float64 probabilities
    starting at element ``p_offset``, of dtype ``p_dtype``). A ``p`` outside [0, 1] gives all 0s (p < 0)
    or all 1s (p > 1); the caller checks the range where PyTorch raises.
    """
    cl, to_bool = _out_cl(rt, dtype, "bernoulli_")
    if p_buf is None:
        thr = int(ref.bernoulli_threshold(float(p)))
        return _launch(rt, "bernoulli", buf, offset_elems, n, cl, to_bool, seed, philox_offset, stream,
                       local_size, 4, [np.uint64], [thr], vector_width=vector_width)
    pd = _np(p_dtype if p_dtype is not None else np.float32)
    if pd not in (np.float32, np.float64):
        raise TypeError(f"bernoulli expects float probabilities, got {pd}")
    if pd == np.float64:
        _need_fp64(rt, "bernoulli_")
    p_t = "float" if pd == np.float32 else "double"
    return _launch(rt, "bernoulli", buf, offset_elems, n, cl, to_bool, seed, philox_offset, stream,
                   local_size, 4, [None, np.int64], [p_buf, np.int64(p_offset)], p_t=p_t,
                   vector_width=vector_width)


_CONSTS = {}


def _consts(P):
    c = _CONSTS.get(P.name)
    if c is None:
        c = _CONSTS[P.name] = P.cl_constants()
    return c
