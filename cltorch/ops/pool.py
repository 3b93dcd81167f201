"""Pooling: ``max_pool1d/2d`` (with ``return_indices``), ``avg_pool1d/2d``, ``adaptive_avg_pool1d/2d``,
``adaptive_max_pool1d/2d``, as ``torch.nn.functional``.

Kernels: ``cl_kernels/pool.cl.mako`` (one work-item per output element; every backward is a gather, one
work-item per input element, so no atomics and deterministic sums). Output sizes, ``ceil_mode`` (the
last window may start in the input or the left padding, never in the right padding), padding that acts
as -inf for max pooling, ``count_include_pad`` and ``divisor_override`` follow PyTorch's CPU kernels
(``aten/src/ATen/native/Pool.h``, ``MaxPoolKernel.cpp``, ``AvgPoolKernel.cpp``).

Registered ops and their derivatives (so double backward works):
    max_pool2d_with_indices(x) -> (y, idx);  d/dx = max_pool2d_scatter(g, idx)
    max_pool2d_scatter(g, idx)  (adjoint of)  max_pool2d_gather(x, idx)
    avg_pool2d(x)  (adjoint of)  avg_pool2d_backward(g)
Adaptive pooling uses the same ops with adaptive windows ``[floor(o*L/O), ceil((o+1)*L/O))``. 1-d pooling
runs as 2-d pooling with height 1. A forward pass with one window covering the whole plane (global pooling:
adaptive to 1 x 1, or a window of the plane's size) runs :mod:`cltorch.ops.global_pool`'s kernel instead, a
group of lanes per plane. dtypes: float32 and float64 (float16 through float32).
"""
import numpy as np

from .. import _dtype as D
from .._dispatch import call, register
from .._tensor import Tensor
from ..backend import geometry
from .global_pool import global_pool, is_global

__all__ = ["max_pool1d", "max_pool2d", "max_pool1d_with_indices", "max_pool2d_with_indices", "avg_pool1d",
           "avg_pool2d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d",
           "adaptive_max_pool2d", "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices"]

_TEMPLATE = "pool.cl.mako"
_I32 = np.int32


class PoolGeom(tuple):
    """(H, W, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, adaptive) of one 2-d pooling."""

    __slots__ = ()

    def __new__(cls, *vals):
        return tuple.__new__(cls, tuple(int(v) for v in vals))

    def window(self):
        return self[4:12]


_kcache = {}


def kernel(rt, dt, name, argtypes, idx="int", tile=(0, 0)):
    """A cached kernel of pool.cl.mako (``argtypes`` lists 'b' for buffers, 'I' for index ints, 'i' for
    int32, 'f' float32, 's' for the dtype's scalar; the trailing plane count and origin of every kernel are
    added: see ``launch3``)."""
    key = (rt.index, dt, idx, name, tile)
    k = _kcache.get(key)
    if k is None:
        I = np.int64 if idx == "long" else np.int32
        m = {"b": None, "I": I, "i": np.int32, "f": np.float32, "s": np.float64 if dt == "double" else np.float32}
        k = _kcache[key] = rt.kernel(_TEMPLATE, name, [m[c] for c in argtypes + "iii"], dt=dt, idx=idx,
                                     tkh=tile[0], tkw=tile[1])
    return k


def dtname(t):
    return "double" if t.dtype is D.float64 else "float"


def idx_type(*tensors):
    n = 0
    for t in tensors:
        n = max(n, t._offset + sum((s - 1) * st for s, st in zip(t._shape, t._stride) if s > 0) + 1, t.numel())
    return "long" if n > 2 ** 31 - 1 else "int"


def finish(rt, *tensors):
    """The wait at the end of an op on cpu tensors: only where memory numpy shares is touched
    (``Runtime.finish_if_exposed``; a pending device check is read at the next synchronization)."""
    if any(t is not None and t._storage.host is not None for t in tensors):
        rt.finish_if_exposed()


def launch3(rt, k, X, Y, Z, *args):
    """Launch k on an (X, Y, Z) range; the kernel gets Z and the origin (Y0, Z0) of its part as its last
    arguments. The work-group holds up to ``[pool] local_size`` work-items, x first, then y, then z, fitted to
    the device's and the kernel's limits (``geometry.nd``); a range with more work-groups in a dimension than
    the device allows runs in parts (``geometry.pieces``)."""
    gs, ls = geometry.nd(rt, (X, Y, Z), int(rt.profile.get_value("pool", "local_size", 128)), k)
    for origin, part in geometry.pieces(rt, gs, ls):
        rt.launch(k, part, ls, *args, Z, origin[1], origin[2])


def compute_in_float(fn, x, *rest):
    """float16 inputs are computed in float32 and cast back."""
    if x.dtype is D.float16:
        out = fn(x.float(), *rest)
        if isinstance(out, tuple):
            return (out[0].half(),) + out[1:]
        return out.half()
    return fn(x, *rest)


# --------------------------------------------------------------------------------------------- max pooling
def _tiling(geom):
    """The window size when the windows tile the input (stride == window, no padding or dilation, every
    window inside the input, at most 16 taps), else None."""
    H, W, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, ad = geom
    if ad or (sh, sw) != (KH, KW) or ph or pw or dh != 1 or dw != 1 or KH * KW > 16:
        return None
    if OH * KH > H or OW * KW > W:
        return None
    return (KH, KW)


def _run_max(x, geom):
    if is_global(geom):
        return global_pool(x, "max", idx_type(x))
    N, C = x._shape[0], x._shape[1]
    H, W, OH, OW = geom[:4]
    y = Tensor._empty((N, C, OH, OW), x.dtype, x.device)
    ind = Tensor._empty((N, C, OH, OW), D.int64, x.device)
    if y.numel() == 0:
        return y, ind
    rt = x._runtime()
    dt = dtname(x)
    idx = idx_type(x, y)
    tile = _tiling(geom)
    if tile:
        k = kernel(rt, dt, "maxpool_tile", "bIIIIIbbi" + "i" * 5, idx, tile)
        launch3(rt, k, OW, OH, N * C, x._storage.cl_buffer(), x._offset, *x._stride, y._storage.cl_buffer(),
                 ind._storage.cl_buffer(), 1, C, H, W, OH, OW)
        finish(rt, x, y, ind)
        return y, ind
    k = kernel(rt, dt, "maxpool_fwd_adaptive" if geom[12] else "maxpool_fwd", "bIIIIIbbi" + "i" * 13, idx)
    launch3(rt, k, OW, OH, N * C, x._storage.cl_buffer(), x._offset, *x._stride, y._storage.cl_buffer(),
             ind._storage.cl_buffer(), 1, C, H, W, OH, OW, *geom.window())
    finish(rt, x, y, ind)
    return y, ind


def _run_max_scatter(g, ind, geom, xshape):
    N, C = xshape[0], xshape[1]
    H, W, OH, OW = geom[:4]
    gx = Tensor._empty(xshape, g.dtype, g.device)
    if gx.numel() == 0:
        return gx
    g = g.contiguous()
    ind = ind.contiguous()
    rt = g._runtime()
    dt = dtname(g)
    tile = _tiling(geom)
    if tile:
        if OH * tile[0] != H or OW * tile[1] != W:        # rows/columns no window covers get zero
            rt.fill(gx._storage.cl_buffer(), np.zeros(1, g.dtype.np), gx._offset * gx.dtype.itemsize,
                    gx.numel() * gx.dtype.itemsize)
        k = kernel(rt, dt, "maxpool_tile_bwd", "bIbIb" + "i" * 4, idx_type(g, gx), tile)
        launch3(rt, k, OW, OH, N * C, g._storage.cl_buffer(), g._offset, ind._storage.cl_buffer(), ind._offset,
                 gx._storage.cl_buffer(), H, W, OH, OW)
        finish(rt, g, ind, gx)
        return gx
    k = kernel(rt, dt, "maxpool_scatter_adaptive" if geom[12] else "maxpool_scatter", "bIbIb" + "i" * 12,
               idx_type(g, gx))
    launch3(rt, k, W, H, N * C, g._storage.cl_buffer(), g._offset, ind._storage.cl_buffer(), ind._offset,
             gx._storage.cl_buffer(), H, W, OH, OW, *geom.window())
    finish(rt, g, ind, gx)
    return gx


def _run_max_gather(x, ind, geom):
    N, C = x._shape[0], x._shape[1]
    H, W, OH, OW = geom[:4]
    y = Tensor._empty((N, C, OH, OW), x.dtype, x.device)
    if y.numel() == 0:
        return y
    x = x.contiguous()
    ind = ind.contiguous()
    rt = x._runtime()
    k = kernel(rt, dtname(x), "maxpool_gather", "bIbIbii", idx_type(x, y))
    launch3(rt, k, OH * OW, 1, N * C, x._storage.cl_buffer(), x._offset, ind._storage.cl_buffer(), ind._offset,
             y._storage.cl_buffer(), H * W, OH * OW)
    finish(rt, x, ind, y)
    return y


def _cl_input(x):
    """Whether the 4-d pooling input ``x`` is channels_last (not plainly contiguous): PyTorch's pooling then
    returns its output, indices and input gradient channels_last too (the kernels write NCHW; one copy)."""
    from .._memory_format import channels_last, suggest_format
    return x.dim() == 4 and not x.is_contiguous() and suggest_format(x) is channels_last


def _as_cl(t, cl=True):
    """``t`` with exactly channels_last's strides (size-1 dims included, as PyTorch's outputs) when ``cl``."""
    from .._memory_format import channels_last, format_strides
    if not cl or t is None or t.dim() != 4 or tuple(t._stride) == format_strides(tuple(t._shape), channels_last):
        return t
    return t.clone(memory_format=channels_last)


def _max_fwd(ctx, x, geom):
    y, ind = compute_in_float(_run_max, x, geom)
    if ctx is not None:
        ctx.save_for_backward(ind)
        ctx.geom, ctx.xshape, ctx.cl = geom, x._shape, _cl_input(x)
    return y, ind


def _max_bwd(ctx, g, *_):
    (ind,) = ctx.saved_tensors
    return _as_cl(call(_scatter_op, g, ind, ctx.geom, ctx.xshape), ctx.cl), None


def _scatter_fwd(ctx, g, ind, geom, xshape):
    if ctx is not None:
        ctx.save_for_backward(ind)
        ctx.geom = geom
    return compute_in_float(_run_max_scatter, g, ind, geom, xshape)


def _scatter_bwd(ctx, gg):
    (ind,) = ctx.saved_tensors
    return call(_gather_op, gg, ind, ctx.geom), None, None, None


def _gather_fwd(ctx, x, ind, geom):
    if ctx is not None:
        ctx.save_for_backward(ind)
        ctx.geom, ctx.xshape = geom, x._shape
    return compute_in_float(_run_max_gather, x, ind, geom)


def _gather_bwd(ctx, g):
    (ind,) = ctx.saved_tensors
    return call(_scatter_op, g, ind, ctx.geom, ctx.xshape), None, None


_max_op = register("max_pool2d_with_indices", _max_fwd, _max_bwd, differentiable_outputs=(0,))
_scatter_op = register("max_pool2d_scatter", _scatter_fwd, _scatter_bwd)
_gather_op = register("max_pool2d_gather", _gather_fwd, _gather_bwd)


# --------------------------------------------------------------------------------------------- avg pooling
def _run_avg(x, geom, include_pad, divisor):
    if is_global(geom):
        return global_pool(x, "avg", idx_type(x), divisor)
    N, C = x._shape[0], x._shape[1]
    H, W, OH, OW = geom[:4]
    y = Tensor._empty((N, C, OH, OW), x.dtype, x.device)
    if y.numel() == 0:
        return y
    rt = x._runtime()
    k = kernel(rt, dtname(x), "avgpool_fwd_adaptive" if geom[12] else "avgpool_fwd", "bIIIIIb" + "i" * 13,
               idx_type(x, y))
    launch3(rt, k, OW, OH, N * C, x._storage.cl_buffer(), x._offset, *x._stride, y._storage.cl_buffer(),
             C, H, W, OH, OW, *geom[4:10], int(include_pad), int(divisor or 0))
    finish(rt, x, y)
    return y


def _run_avg_bwd(g, geom, include_pad, divisor, xshape):
    N, C = xshape[0], xshape[1]
    H, W, OH, OW = geom[:4]
    gx = Tensor._empty(xshape, g.dtype, g.device)
    if gx.numel() == 0:
        return gx
    g = g.contiguous()
    rt = g._runtime()
    k = kernel(rt, dtname(g), "avgpool_bwd_adaptive" if geom[12] else "avgpool_bwd", "bIb" + "i" * 12,
               idx_type(g, gx))
    launch3(rt, k, W, H, N * C, g._storage.cl_buffer(), g._offset, gx._storage.cl_buffer(), H, W, OH, OW,
             *geom[4:10], int(include_pad), int(divisor or 0))
    finish(rt, g, gx)
    return gx


def _avg_fwd(ctx, x, geom, include_pad, divisor):
    if ctx is not None:
        ctx.geom, ctx.args, ctx.xshape, ctx.cl = geom, (include_pad, divisor), x._shape, _cl_input(x)
    return compute_in_float(_run_avg, x, geom, include_pad, divisor)


def _avg_bwd(ctx, g):
    return _as_cl(call(_avg_t_op, g, ctx.geom, *ctx.args, ctx.xshape), ctx.cl), None, None, None


def _avg_t_fwd(ctx, g, geom, include_pad, divisor, xshape):
    if ctx is not None:
        ctx.geom, ctx.args = geom, (include_pad, divisor)
    return compute_in_float(_run_avg_bwd, g, geom, include_pad, divisor, xshape)


def _avg_t_bwd(ctx, gg):
    return call(_avg_op, gg, ctx.geom, *ctx.args), None, None, None, None


_avg_op = register("avg_pool2d", _avg_fwd, _avg_bwd)
_avg_t_op = register("avg_pool2d_backward", _avg_t_fwd, _avg_t_bwd)


# --------------------------------------------------------------------------------------------- arguments
def _pair(v, n, name, fn):
    if isinstance(v, Tensor):
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        v = tuple(v)
        if len(v) == 1:
            v = v * n
        if len(v) != n:
            raise RuntimeError(f"{fn}: {name} must either be a single int, or a tuple of {n} ints")
        return tuple(int(a) for a in v)
    return (int(v),) * n


def out_size(L, k, s, p, d, ceil_mode):
    """PyTorch's pooling_output_shape."""
    num = L + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    o = num // s + 1
    if ceil_mode and (o - 1) * s >= L + p:
        o -= 1
    return o


def _prep_input(x, nd, fn):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument 'input' must be Tensor, not {type(x).__name__}")
    if x.dim() not in (nd + 1, nd + 2) or any(s == 0 for s in x.shape[-(nd + 1):]):
        raise RuntimeError(f"{fn}: Expected {nd + 1}D or {nd + 2}D (batch mode) tensor with optional 0 dim batch "
                           f"size for input, but got: {list(x.shape)}")
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"\"{fn}\" not implemented for '{x.dtype.name.capitalize()}'")
    unbatched = x.dim() == nd + 1
    if unbatched:
        x = x.unsqueeze(0)
    if nd == 1:
        x = x.unsqueeze(2)
    return x, unbatched


def _post(y, nd, unbatched):
    if nd == 1:
        y = y.squeeze(2)
    if unbatched:
        y = y.squeeze(0)
    return y


def _window_geom(fn, x, nd, kernel_size, stride, padding, dilation, ceil_mode, dil_in_pad=True):
    k = _pair(kernel_size, nd, "kernel_size", fn)
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else \
        _pair(stride, nd, "stride", fn)
    p = _pair(padding, nd, "padding", fn)
    d = _pair(dilation, nd, "dilation", fn)
    if any(v <= 0 for v in k):
        raise RuntimeError(f"{fn}: kernel size should be greater than zero, but got kernel_size={list(k)}")
    if any(v <= 0 for v in s):
        raise RuntimeError(f"{fn}: stride should be greater than zero, but got stride={list(s)}")
    if any(v <= 0 for v in d):
        raise RuntimeError(f"{fn}: dilation should be greater than zero, but got dilation={list(d)}")
    if any(pv < 0 for pv in p):
        raise RuntimeError(f"{fn}: pad must be non-negative, but got pad: {list(p)}")
    if any(pv > kv // 2 for pv, kv in zip(p, k)):     # PyTorch's pool2d_shape_check (dilation not counted)
        raise RuntimeError(f"pad should be smaller than or equal to half of kernel size, but got padding={list(p)}, "
                           f"kernel_size={list(k)}")
    spatial = tuple(x.shape[-nd:])
    outs = tuple(out_size(L, kv, sv, pv, dv, ceil_mode) for L, kv, sv, pv, dv in zip(spatial, k, s, p, d))
    if any(o < 1 for o in outs):
        C = x.shape[-nd - 1]
        raise RuntimeError(f"Given input size: ({C}x{'x'.join(map(str, spatial))}). Calculated output size: "
                           f"({C}x{'x'.join(map(str, outs))}). Output size is too small")
    if nd == 1:
        return PoolGeom(1, spatial[0], 1, outs[0], 1, k[0], 1, s[0], 0, p[0], 1, d[0], 0)
    return PoolGeom(spatial[0], spatial[1], outs[0], outs[1], k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1], 0)


def _max_pool(fn, nd, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
    geom = _window_geom(fn, input, nd, kernel_size, stride, padding, dilation, ceil_mode)
    x, unb = _prep_input(input, nd, fn)
    y, ind = call(_max_op, x, geom)
    if nd == 2 and _cl_input(x):
        y, ind = _as_cl(y), _as_cl(ind)
    y, ind = _post(y, nd, unb), _post(ind, nd, unb)
    return (y, ind) if return_indices else y


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
               return_indices=False):
    """2-d max pooling as ``torch.nn.functional.max_pool2d``.

    input ``(N, C, H, W)`` or ``(C, H, W)``, float. stride defaults to kernel_size; padding (at most half
    the effective kernel) acts as -inf; ``OH = floor_or_ceil((H + 2p - d(k-1) - 1) / s) + 1`` and with
    ceil_mode a last window starting in the right padding is dropped. NaN propagates. With
    ``return_indices`` also returns int64 plane-local indices ``h*W + w``. Raises RuntimeError on bad
    sizes, as PyTorch does. Differentiable to any order.
    """
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
                            return_indices=True):
    """``max_pool2d`` returning ``(values, indices)``."""
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
               return_indices=False):
    """1-d max pooling as ``torch.nn.functional.max_pool1d``: input ``(N, C, L)`` or ``(C, L)``; indices
    are positions along L. See :func:`max_pool2d`."""
    return _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
                            return_indices=True):
    return _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode, True)


def _avg_pool(fn, nd, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    if divisor_override is not None and int(divisor_override) == 0:
        raise RuntimeError("divisor must be not zero")
    geom = _window_geom(fn, input, nd, kernel_size, stride, padding, 1, ceil_mode)
    x, unb = _prep_input(input, nd, fn)
    y = call(_avg_op, x, geom, bool(count_include_pad), int(divisor_override or 0))
    return _post(_as_cl(y, nd == 2 and _cl_input(x)), nd, unb)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,  # noqa: A002
               divisor_override=None):
    """2-d average pooling as ``torch.nn.functional.avg_pool2d``.

    The divisor is ``divisor_override`` when given (any non-zero int, negative too), else the window size cut at
    the padded border (``count_include_pad=True``) or the number of input elements in the window (False). A
    window holding no input element gives 0. Sizes and errors as :func:`max_pool2d` (no dilation).
    """
    return _avg_pool("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):  # noqa: A002
    """1-d average pooling as ``torch.nn.functional.avg_pool1d``; see :func:`avg_pool2d`."""
    return _avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def _adaptive_geom(fn, x, nd, output_size):
    if isinstance(output_size, Tensor):
        output_size = output_size.tolist()
    if isinstance(output_size, (list, tuple)):
        osz = tuple(output_size)
        if len(osz) == 1:
            osz = osz * nd
        if len(osz) != nd:
            raise ValueError(f"{fn}: output_size must be {nd} elements, got {list(osz)}")
    else:
        osz = (output_size,) * nd
    spatial = tuple(x.shape[-nd:])
    osz = tuple(L if o is None else int(o) for o, L in zip(osz, spatial))
    if any(o < 0 for o in osz):
        raise RuntimeError(f"{fn}: elements of output_size must be greater than or equal to 0 but received "
                           f"{list(osz)}")
    if nd == 1:
        return PoolGeom(1, spatial[0], 1, osz[0], 1, 1, 1, 1, 0, 0, 1, 1, 1)
    return PoolGeom(spatial[0], spatial[1], osz[0], osz[1], 1, 1, 1, 1, 0, 0, 1, 1, 1)


def adaptive_avg_pool2d(input, output_size):  # noqa: A002
    """As ``torch.nn.functional.adaptive_avg_pool2d``: output ``(..., OH, OW)`` (an int, a pair, None
    entries keep the input size); window o covers ``[floor(o*H/OH), ceil((o+1)*H/OH))``."""
    x, unb = _prep_input(input, 2, "adaptive_avg_pool2d")
    geom = _adaptive_geom("adaptive_avg_pool2d", x, 2, output_size)
    return _post(_as_cl(call(_avg_op, x, geom, True, 0), _cl_input(x)), 2, unb)


def adaptive_avg_pool1d(input, output_size):  # noqa: A002
    """As ``torch.nn.functional.adaptive_avg_pool1d``."""
    x, unb = _prep_input(input, 1, "adaptive_avg_pool1d")
    geom = _adaptive_geom("adaptive_avg_pool1d", x, 1, output_size)
    return _post(call(_avg_op, x, geom, True, 0), 1, unb)


def _adaptive_max(fn, nd, input, output_size, return_indices):
    x, unb = _prep_input(input, nd, fn)
    geom = _adaptive_geom(fn, x, nd, output_size)
    y, ind = call(_max_op, x, geom)
    if nd == 2 and _cl_input(x):
        y, ind = _as_cl(y), _as_cl(ind)
    y, ind = _post(y, nd, unb), _post(ind, nd, unb)
    return (y, ind) if return_indices else y


def adaptive_max_pool2d(input, output_size, return_indices=False):  # noqa: A002
    """As ``torch.nn.functional.adaptive_max_pool2d`` (windows as adaptive_avg_pool2d; NaN propagates)."""
    return _adaptive_max("adaptive_max_pool2d", 2, input, output_size, return_indices)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=True):  # noqa: A002
    return _adaptive_max("adaptive_max_pool2d", 2, input, output_size, True)


def adaptive_max_pool1d(input, output_size, return_indices=False):  # noqa: A002
    """As ``torch.nn.functional.adaptive_max_pool1d``."""
    return _adaptive_max("adaptive_max_pool1d", 1, input, output_size, return_indices)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=True):  # noqa: A002
    return _adaptive_max("adaptive_max_pool1d", 1, input, output_size, True)


# --------------------------------------------------------------------------------------------- 3-d pooling
# A 3-d pooling window is a box: the product of an (H, W) window and a D window. Its maximum is the maximum
# over D of the (H, W) maxima; its average is the average over D of the (H, W) averages, and every divisor
# PyTorch uses (the clipped window volume, the count of input elements, an override) is the product of the
# per-dim ones. So 3-d pooling is two passes of the 2-d ops above (the first over (H, W) of every depth
# slice, the second over D with height 1), one path with the 1-d and 2-d poolings, and its derivatives are
# theirs. Ties and NaN follow PyTorch's scan order (d, h, w): the first maximum wins, the last NaN wins.

__all__ += ["max_pool3d", "max_pool3d_with_indices", "avg_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool3d",
            "adaptive_max_pool3d_with_indices"]


def _prep3(x, fn):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument 'input' must be Tensor, not {type(x).__name__}")
    if x.dim() not in (4, 5) or any(s == 0 for s in x.shape[-4:]):
        raise RuntimeError(f"{fn}: Expected 4D or 5D (batch mode) tensor with optional 0 dim batch size for "
                           f"input, but got: {list(x.shape)}")
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"\"{fn}\" not implemented for '{x.dtype.name.capitalize()}'")
    unbatched = x.dim() == 4
    return (x.unsqueeze(0) if unbatched else x), unbatched


def _split(x):
    """(N, C, D, H, W) -> (N, C*D, H, W), the depth slices as planes of the 2-d pass."""
    N, C, D, H, W = x.shape
    return x.reshape(N, C * D, H, W)


def _depth_pass_input(y1, N, C, D):
    """(N, C*D, OH, OW) -> (N, C, OH*OW, D): depth as the last (width) dim of the second 2-d pass (a view)."""
    OH, OW = y1.shape[2], y1.shape[3]
    return y1.reshape(N, C, D, OH * OW).transpose(2, 3)


def _join(y2, OH, OW):
    """(N, C, OH*OW, OD) -> (N, C, OD, OH, OW)."""
    N, C, _, OD = y2.shape
    return y2.transpose(2, 3).reshape(N, C, OD, OH, OW)


def _max3(x, first, second):
    """Two-pass 3-d max with PyTorch's volume-local indices d*H*W + h*W + w. first/second run the 2-d op on
    (planes, H, W) and on (N, C, OH*OW, D) and return (values, indices)."""
    N, C, D, H, W = x.shape
    y1, i1 = first(_split(x))
    OH, OW = y1.shape[2], y1.shape[3]
    y2, i2 = second(_depth_pass_input(y1, N, C, D))
    dsel = i2 % D                                           # i2 = row*D + d within the (OH*OW, D) plane
    hw = _depth_pass_input(i1, N, C, D).gather(3, dsel)
    return _join(y2, OH, OW), _join(dsel * (H * W) + hw, OH, OW)


def _three(v, fn, name):
    return _pair(v, 3, name, fn)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
               return_indices=False):
    """3-d max pooling as ``torch.nn.functional.max_pool3d``.

    input ``(N, C, D, H, W)`` or ``(C, D, H, W)``, float; kernel_size/stride/padding/dilation: int or
    triple (stride defaults to kernel_size). Output sizes, ``ceil_mode``, -inf padding (at most half the
    kernel), NaN propagation and indices (``d*H*W + h*W + w``) as PyTorch. Computed as an (H, W) pass and a D
    pass of the 2-d kernels (see above). Raises RuntimeError on bad ranks or sizes. Differentiable.
    """
    fn = "max_pool3d"
    x, unb = _prep3(input, fn)
    k = _three(kernel_size, fn, "kernel_size")
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else \
        _three(stride, fn, "stride")
    p, d = _three(padding, fn, "padding"), _three(dilation, fn, "dilation")
    _check3(fn, x, k, s, p, d, ceil_mode)
    y, ind = _max3(x, lambda t: max_pool2d(t, k[1:], s[1:], p[1:], d[1:], ceil_mode, True),
                   lambda t: max_pool2d(t, (1, k[0]), (1, s[0]), (0, p[0]), (1, d[0]), ceil_mode, True))
    if unb:
        y, ind = y.squeeze(0), ind.squeeze(0)
    return (y, ind) if return_indices else y


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
                            return_indices=True):
    """``max_pool3d`` returning ``(values, indices)``."""
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def _check3(fn, x, k, s, p, d, ceil_mode):
    """PyTorch's pool3d_shape_check messages, for the whole volume (the 2-d passes would name 2 dims)."""
    if any(v <= 0 for v in k):
        raise RuntimeError(f"{fn}: kernel size should be greater than zero, but got kernel_size={list(k)}")
    if any(v <= 0 for v in s):
        raise RuntimeError(f"{fn}: stride should be greater than zero, but got stride={list(s)}")
    if any(v <= 0 for v in d):
        raise RuntimeError(f"{fn}: dilation should be greater than zero, but got dilation={list(d)}")
    if any(pv < 0 for pv in p) or any(pv > kv // 2 for pv, kv in zip(p, k)):
        raise RuntimeError(f"pad should be smaller than or equal to half of kernel size, but got padding={list(p)}, "
                           f"kernel_size={list(k)}")
    spatial = tuple(x.shape[-3:])
    outs = tuple(out_size(L, kv, sv, pv, dv, ceil_mode) for L, kv, sv, pv, dv in zip(spatial, k, s, p, d))
    if any(o < 1 for o in outs):
        C = x.shape[1]
        raise RuntimeError(f"Given input size: ({C}x{'x'.join(map(str, spatial))}). Calculated output size: "
                           f"({C}x{'x'.join(map(str, outs))}). Output size is too small")


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,  # noqa: A002
               divisor_override=None):
    """3-d average pooling as ``torch.nn.functional.avg_pool3d`` (divisors as avg_pool2d, per volume; a
    divisor_override divides the window sum). Two passes of the 2-d kernel. Differentiable."""
    fn = "avg_pool3d"
    if divisor_override is not None and int(divisor_override) == 0:
        raise RuntimeError("divisor must be not zero")
    x, unb = _prep3(input, fn)
    k = _three(kernel_size, fn, "kernel_size")
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) else \
        _three(stride, fn, "stride")
    p = _three(padding, fn, "padding")
    _check3(fn, x, k, s, p, (1, 1, 1), ceil_mode)
    N, C, D = x.shape[:3]
    div = 1 if divisor_override is not None else None
    y1 = avg_pool2d(_split(x), k[1:], s[1:], p[1:], ceil_mode, count_include_pad, div)
    y2 = avg_pool2d(_depth_pass_input(y1, N, C, D), (1, k[0]), (1, s[0]), (0, p[0]), ceil_mode,
                    count_include_pad, div)
    y = _join(y2, y1.shape[2], y1.shape[3])
    if divisor_override is not None:
        y = y / float(int(divisor_override))
    return y.squeeze(0) if unb else y


def _osize3(fn, x, output_size):
    if isinstance(output_size, Tensor):
        output_size = output_size.tolist()
    osz = tuple(output_size) if isinstance(output_size, (list, tuple)) else (output_size,) * 3
    if len(osz) == 1:
        osz = osz * 3
    if len(osz) != 3:
        raise ValueError(f"{fn}: output_size must be 3 elements, got {list(osz)}")
    osz = tuple(L if o is None else int(o) for o, L in zip(osz, x.shape[-3:]))
    if any(o < 0 for o in osz):
        raise RuntimeError(f"{fn}: elements of output_size must be greater than or equal to 0 but received "
                           f"{list(osz)}")
    return osz


def adaptive_avg_pool3d(input, output_size):  # noqa: A002
    """As ``torch.nn.functional.adaptive_avg_pool3d``: output ``(..., OD, OH, OW)`` (int, triple, None
    keeps a size); windows ``[floor(o*L/O), ceil((o+1)*L/O))`` per dim, two passes of the 2-d kernel."""
    fn = "adaptive_avg_pool3d"
    x, unb = _prep3(input, fn)
    od, oh, ow = _osize3(fn, x, output_size)
    N, C, D = x.shape[:3]
    y1 = adaptive_avg_pool2d(_split(x), (oh, ow))
    y2 = adaptive_avg_pool2d(_depth_pass_input(y1, N, C, D), (oh * ow, od))
    y = _join(y2, oh, ow)
    return y.squeeze(0) if unb else y


def adaptive_max_pool3d(input, output_size, return_indices=False):  # noqa: A002
    """As ``torch.nn.functional.adaptive_max_pool3d`` (windows as adaptive_avg_pool3d, indices
    ``d*H*W + h*W + w``, NaN propagates)."""
    fn = "adaptive_max_pool3d"
    x, unb = _prep3(input, fn)
    od, oh, ow = _osize3(fn, x, output_size)
    y, ind = _max3(x, lambda t: adaptive_max_pool2d(t, (oh, ow), True),
                   lambda t: adaptive_max_pool2d(t, (t.shape[2], od), True))
    if unb:
        y, ind = y.squeeze(0), ind.squeeze(0)
    return (y, ind) if return_indices else y


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=True):  # noqa: A002
    return adaptive_max_pool3d(input, output_size, True)
