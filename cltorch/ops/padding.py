"""``pad`` (constant, reflect, replicate, circular) and ``interpolate`` (nearest, nearest-exact, linear,
bilinear, trilinear, area), as ``torch.nn.functional``.

* Constant padding writes the fill value and copies the input into the middle (two launches of the
  existing fill and copy kernels); negative pads crop. Its derivative is constant padding of the gradient
  by the negated pads (a crop), so every order of derivative exists.
* Reflect, replicate and circular padding pad one dim at a time, last dim first (the map is separable),
  with ``pad1d_fwd`` of ``cl_kernels/pool.cl.mako``; the derivative is its adjoint ``pad1d_bwd`` (a gather
  over the at most three outputs, or the edge run for replicate, that read each input element), and the
  adjoint's derivative is the padding again.
* Interpolation resamples one spatial dim at a time, innermost first (``resample_fwd``), which reproduces
  PyTorch's order of operations for bilinear (``out = t0*h0w + t1*h1w`` with ``t = x0*w0w + x1*w1w``);
  source indices and weights follow ``aten/src/ATen/native/UpSample.h`` (``nearest_idx``,
  ``area_pixel_compute_source_index``). The derivative is the adjoint gather ``resample_bwd``.
  ``mode='area'`` is adaptive average pooling, as in PyTorch.
"""
import math

import numpy as np

from .. import _dtype as D
from .._dispatch import call, register
from .._tensor import Tensor
from .pool import (kernel, dtname, idx_type, finish, compute_in_float, adaptive_avg_pool1d, adaptive_avg_pool2d,
                   launch3)

__all__ = ["pad", "constant_pad_nd", "interpolate", "upsample", "upsample_nearest", "upsample_bilinear"]

_MODES = {"reflect": 0, "replicate": 1, "circular": 2}


def _prod(s):
    n = 1
    for v in s:
        n *= v
    return n


# --------------------------------------------------------------------------------------------- constant
def _constant_fwd(ctx, x, pads, value):
    """pads: ((before, after) per dim, innermost last-listed... here in dim order, all dims)."""
    if ctx is not None:
        ctx.pads = pads
    # crop negative pads first
    v = x
    for d, (a, b) in enumerate(pads):
        if a < 0 or b < 0:
            start = -a if a < 0 else 0
            stop = v._shape[d] + (b if b < 0 else 0)
            if stop < start:
                raise RuntimeError(f"The input size {x._shape[d]}, plus negative padding {a} and {b} resulted in a "
                                   f"negative output size, which is invalid. Check dimension {d} of your input.")
            v = v.narrow(d, start, stop - start)
    shape = tuple(s + max(a, 0) + max(b, 0) for s, (a, b) in zip(v._shape, pads))
    out = Tensor._empty(shape, x.dtype, x.device)
    if out.numel() == 0:
        return out
    if any(a > 0 or b > 0 for a, b in pads):
        if x.dtype is D.bool:
            value = bool(value)
        elif not x.dtype.is_floating_point:
            value = int(value)
        out.fill_(value)
    mid = out
    for d, (a, b) in enumerate(pads):
        mid = mid.narrow(d, max(a, 0), v._shape[d])
    if v.numel():
        mid.copy_(v)
    return out


def _constant_bwd(ctx, g):
    return call(_constant_op, g, tuple((-a, -b) for a, b in ctx.pads), 0.0), None, None


_constant_op = register("constant_pad_nd", _constant_fwd, _constant_bwd)


# --------------------------------------------------------------------------------------------- reflect etc.
def _view3(x, dim):
    """x (contiguous) as [outer, L, inner] for dim."""
    return _prod(x._shape[:dim]), x._shape[dim], _prod(x._shape[dim + 1:])


def _run_pad1d(x, dim, a, b, mode):
    x = x.contiguous()
    outer, L, inner = _view3(x, dim)
    shape = list(x._shape)
    shape[dim] = L + a + b
    y = Tensor._empty(tuple(shape), x.dtype, x.device)
    if y.numel() == 0:
        return y
    rt = x._runtime()
    k = kernel(rt, dtname(x), "pad1d_fwd", "bIbiiiii", idx_type(x, y))
    launch3(rt, k, inner, L + a + b, outer, x._storage.cl_buffer(), x._offset, y._storage.cl_buffer(),
             L, inner, a, b, mode)
    finish(rt, x, y)
    return y


def _run_pad1d_t(g, dim, a, b, mode, L):
    g = g.contiguous()
    outer, Lo, inner = _view3(g, dim)
    shape = list(g._shape)
    shape[dim] = L
    y = Tensor._empty(tuple(shape), g.dtype, g.device)
    if y.numel() == 0:
        return y
    rt = g._runtime()
    k = kernel(rt, dtname(g), "pad1d_bwd", "bIbiiiii", idx_type(g, y))
    launch3(rt, k, inner, L, outer, g._storage.cl_buffer(), g._offset, y._storage.cl_buffer(), L, inner, a, b,
             mode)
    finish(rt, g, y)
    return y


def _pad1d_fwd(ctx, x, dim, a, b, mode):
    if ctx is not None:
        ctx.args = (dim, a, b, mode, x._shape[dim])
    return compute_in_float(_run_pad1d, x, dim, a, b, mode)


def _pad1d_bwd(ctx, g):
    return call(_pad1d_t_op, g, *ctx.args), None, None, None, None


def _pad1d_t_fwd(ctx, g, dim, a, b, mode, L):
    if ctx is not None:
        ctx.args = (dim, a, b, mode)
    return compute_in_float(_run_pad1d_t, g, dim, a, b, mode, L)


def _pad1d_t_bwd(ctx, gg):
    return call(_pad1d_op, gg, *ctx.args), None, None, None, None, None


_pad1d_op = register("pad1d", _pad1d_fwd, _pad1d_bwd)
_pad1d_t_op = register("pad1d_backward", _pad1d_t_fwd, _pad1d_t_bwd)


def pad(input, pad, mode="constant", value=None):  # noqa: A002
    """Pad ``input`` as ``torch.nn.functional.pad``.

    pad: ``(left, right)`` for the last dim, then ``(top, bottom)`` for the one before, and so on (last dim
    first). mode: ``'constant'`` (fill with ``value``, default 0; negative pads crop; any number of dims),
    ``'reflect'`` (mirror without repeating the edge; each pad must be smaller than that dim's size),
    ``'replicate'`` (repeat the edge), ``'circular'`` (wrap; pads at most the size). The non-constant modes
    pad the last 1, 2 or 3 dims of a (2|3)-, (3|4)- or (4|5)-d input. Errors as PyTorch: RuntimeError
    for an odd pad length, too many pads, a too-large reflect/circular pad or a value with a non-constant
    mode; NotImplementedError for unsupported ranks. Differentiable to any order.
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"pad(): argument 'input' must be Tensor, not {type(input).__name__}")
    pads = [int(p) for p in pad]
    if len(pads) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    nd = input.dim()
    npd = len(pads) // 2
    if npd > nd:
        raise RuntimeError(f"Padding length should be less than or equal to two times the input dimension but got "
                           f"padding length {len(pads)} and input of dimension {nd}")
    if mode == "constant":
        full = [(0, 0)] * nd
        for i in range(npd):
            full[nd - 1 - i] = (pads[2 * i], pads[2 * i + 1])
        v = 0.0 if value is None else value
        return call(_constant_op, input, tuple(full), v)
    if mode not in _MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if value is not None and value != 0:
        raise RuntimeError(f"Padding mode \"{mode}\" doesn't take in value argument")
    if not ((npd == 1 and nd in (2, 3)) or (npd == 2 and nd in (3, 4)) or (npd == 3 and nd in (4, 5))):
        raise NotImplementedError("Only 2D, 3D, 4D, 5D padding with non-constant padding are supported for now")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"\"{mode}_pad\" not implemented for '{input.dtype.name.capitalize()}'")
    x = input
    for i in range(npd):
        d = nd - 1 - i
        a, b = pads[2 * i], pads[2 * i + 1]
        L = input.shape[d]
        if L + a + b < 0:
            raise RuntimeError(f"input size {L} with padding ({a}, {b}) gives an invalid output size at "
                               f"dimension {d}")
        if mode == "circular":
            # PyTorch's circular padding crops the negative pads first, then wraps within what is left
            if a > L or b > L:
                raise RuntimeError("Padding value causes wrapping around more than once.")
            lc = L - max(-a, 0) - max(-b, 0)
            if lc < 0 or max(a, 0) > lc or max(b, 0) > lc:
                raise RuntimeError(f"unsupported operation: circular padding ({a}, {b}) of dimension {d} (size {L}) "
                                   f"wraps over its own output ({max(lc, 0)} elements remain after the negative pads)")
            if a < 0 or b < 0:
                x = x.narrow(d, max(-a, 0), lc)
                a, b = max(a, 0), max(b, 0)
            if a or b:
                x = call(_pad1d_op, x, d, a, b, _MODES[mode])
            continue
        if mode == "reflect" and (a >= L or b >= L):
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input dimension, "
                               f"but got: padding ({a}, {b}) at dimension {d} of input {list(input.shape)}")
        if mode == "replicate" and L == 0 and (a or b):
            raise RuntimeError(f"Expected a non-empty dimension {d} to pad in replicate mode, got input "
                               f"{list(input.shape)}")
        # reflect and replicate map output o to input pad_src(o - a) of the uncropped dim, negative pads included
        if a == 0 and b == 0:
            continue
        x = call(_pad1d_op, x, d, a, b, _MODES[mode])
    return x if x is not input else call(_constant_op, input, tuple([(0, 0)] * nd), 0.0)


def constant_pad_nd(input, pad, value=0):  # noqa: A002
    """``torch.constant_pad_nd``: ``pad(input, pad, mode='constant', value=value)`` (pads last dim first; negative
    pads crop). Differentiable to any order."""
    return globals()["pad"](input, pad, "constant", value)


# --------------------------------------------------------------------------------------------- resampling
def _run_resample(x, dim, Lo, mode, align, fscale, scale):
    outer = _prod(x._shape[:dim])
    L = x._shape[dim]
    inner = _prod(x._shape[dim + 1:])
    # x as [outer, L, inner] through strides (dims before `dim` and after must each collapse)
    xs = x
    if not _collapsible(x._shape[:dim], x._stride[:dim]) or not _collapsible(x._shape[dim + 1:],
                                                                             x._stride[dim + 1:]):
        xs = x.contiguous()
    so = _last_stride(xs._shape[:dim], xs._stride[:dim])
    si = _last_stride(xs._shape[dim + 1:], xs._stride[dim + 1:])
    shape = list(x._shape)
    shape[dim] = Lo
    y = Tensor._empty(tuple(shape), x.dtype, x.device)
    if y.numel() == 0:
        return y
    rt = x._runtime()
    k = kernel(rt, dtname(x), "resample_fwd", "bIIIIbiiiiifs", idx_type(xs, y))
    launch3(rt, k, inner, Lo, outer, xs._storage.cl_buffer(), xs._offset, so, xs._stride[dim], si,
             y._storage.cl_buffer(), L, Lo, inner, mode, int(align), fscale, scale)
    finish(rt, xs, y)
    return y


def _last_stride(shape, stride):
    """The stride of the innermost dim of size > 1 (0 when there is none)."""
    for sz, st in zip(reversed(shape), reversed(stride)):
        if sz != 1:
            return st
    return 0


def _collapsible(shape, stride):
    """Dims that merge into one strided dim (row-major)."""
    dims = [(s, st) for s, st in zip(shape, stride) if s != 1]
    for (s0, st0), (s1, st1) in zip(dims, dims[1:]):
        if st0 != st1 * s1:
            return False
    return True


def _run_resample_t(g, dim, L, mode, align, fscale, scale):
    g = g.contiguous()
    outer = _prod(g._shape[:dim])
    Lo = g._shape[dim]
    inner = _prod(g._shape[dim + 1:])
    shape = list(g._shape)
    shape[dim] = L
    y = Tensor._empty(tuple(shape), g.dtype, g.device)
    if y.numel() == 0:
        return y
    if Lo == 0:
        y.zero_()
        return y
    rt = g._runtime()
    # outputs per input step, for the candidate range of the gather (a superset; candidates are checked)
    step = float(fscale) if mode < 2 else float(scale)
    inv = 1.0 / step if step > 0 else 0.0
    k = kernel(rt, dtname(g), "resample_bwd", "bIbiiiiifssi", idx_type(g, y))
    launch3(rt, k, inner, L, outer, g._storage.cl_buffer(), g._offset, y._storage.cl_buffer(), L, Lo, inner,
             mode, int(align), fscale, scale, inv, 2)
    finish(rt, g, y)
    return y


def _resample_fwd(ctx, x, dim, Lo, mode, align, fscale, scale):
    if ctx is not None:
        ctx.args = (dim, x._shape[dim], mode, align, fscale, scale)
    return compute_in_float(_run_resample, x, dim, Lo, mode, align, fscale, scale)


def _resample_bwd(ctx, g):
    return (call(_resample_t_op, g, *ctx.args),) + (None,) * 6


def _resample_t_fwd(ctx, g, dim, L, mode, align, fscale, scale):
    if ctx is not None:
        ctx.args = (dim, g._shape[dim], mode, align, fscale, scale)
    return compute_in_float(_run_resample_t, g, dim, L, mode, align, fscale, scale)


def _resample_t_bwd(ctx, gg):
    return (call(_resample_op, gg, *ctx.args),) + (None,) * 6


_resample_op = register("resample1d", _resample_fwd, _resample_bwd)
_resample_t_op = register("resample1d_backward", _resample_t_fwd, _resample_t_bwd)

_INTERP = {"nearest": 0, "nearest-exact": 1, "linear": 2, "bilinear": 2, "trilinear": 2}
_NDIM = {"linear": 1, "bilinear": 2, "trilinear": 3}


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,  # noqa: A002
                recompute_scale_factor=None, antialias=False):
    """Resample ``input`` ``(N, C, d1[, d2[, d3]])`` as ``torch.nn.functional.interpolate``.

    Exactly one of ``size`` (int or tuple) and ``scale_factor`` (float or tuple) is given; with
    scale_factor the output size is ``floor(d * scale_factor)`` and, unless ``recompute_scale_factor``,
    the source index uses ``1/scale_factor`` as PyTorch does. Modes: ``'nearest'``, ``'nearest-exact'``,
    ``'linear'`` (3-d input), ``'bilinear'`` (4-d), ``'trilinear'`` (5-d), ``'area'`` (adaptive average
    pooling, 3-d or 4-d). ``align_corners`` only with the linear modes (ValueError otherwise); ``'bicubic'``
    and ``antialias=True`` raise NotImplementedError. Float dtypes. Differentiable to any order.
    """
    if not isinstance(input, Tensor):
        raise TypeError(f"interpolate(): argument 'input' must be Tensor, not {type(input).__name__}")
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    if antialias:
        raise NotImplementedError("antialias=True is not supported")
    dim = input.dim() - 2
    if dim < 1:
        raise ValueError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.dim()}D) for the "
                         f"modes: nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact "
                         f"(got {mode})")
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input "
                                 f"with spatial dimensions of {list(input.shape[2:])} and output size of "
                                 f"{list(size)}. Please provide input tensor in (N, C, d1, d2, ...,dK) format and "
                                 f"output size in (o1, o2, ...,oK) format.")
            out = [int(s) for s in size]
        else:
            out = [int(size)] * dim
        scales = [None] * dim
    elif scale_factor is not None:
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != dim:
                raise ValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got "
                                 f"input with spatial dimensions of {list(input.shape[2:])} and scale_factor of "
                                 f"shape {list(scale_factor)}. Please provide input tensor in (N, C, d1, d2, ...,dK) "
                                 f"format and scale_factor in (s1, s2, ...,sK) format.")
            sf = [float(s) for s in scale_factor]
        else:
            sf = [float(scale_factor)] * dim
        out = [int(math.floor(float(input.shape[i + 2]) * sf[i])) for i in range(dim)]
        scales = [None] * dim if recompute_scale_factor else sf
    else:
        raise ValueError("either size or scale_factor should be defined")
    if mode == "area":
        if dim == 1:
            return adaptive_avg_pool1d(input, out[0])
        if dim == 2:
            return adaptive_avg_pool2d(input, tuple(out))
        raise NotImplementedError("mode='area' supports 3-d and 4-d inputs")
    if mode not in _INTERP:
        if mode == "bicubic":
            raise NotImplementedError("interpolate: mode='bicubic' is not supported")
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.dim()}D) "
                                  f"for the modes: nearest | linear | bilinear | bicubic | trilinear | area | "
                                  f"nearest-exact (got {mode})")
    if mode in _NDIM and _NDIM[mode] != dim:
        need = _NDIM[mode] + 2
        raise NotImplementedError(f"Got {input.dim()}D input, but {mode} mode needs {need}D input")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"\"upsample_{mode}\" not implemented for '{input.dtype.name.capitalize()}'")
    if any(o <= 0 for o in out):
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input "
                           f"(D: {list(input.shape[2:])}) output ({out})")
    m = _INTERP[mode]
    npt = np.float64 if input.dtype is D.float64 else np.float32
    x = input
    for i in reversed(range(dim)):
        d = i + 2
        L, Lo = input.shape[d], out[i]
        s = scales[i]
        # PyTorch's CPU kernels copy a dim whose size does not change in the linear modes
        # (compute_source_index_and_lambda) and, for 2-d nearest only, also map a doubled dim by o >> 1
        # (nearest_idx); 1-d and 3-d nearest and nearest-exact always use floor(o * scale).
        if L == Lo and (m == 2 or (m == 0 and dim == 2)):
            continue
        if m < 2:
            if m == 0 and dim == 2 and Lo == 2 * L:
                fscale = np.float32(0.5)
            else:
                fscale = np.float32(1.0 / s) if s is not None and s > 0 else np.float32(L) / np.float32(Lo)
            scale = npt(0)
        else:
            fscale = np.float32(0)
            if align_corners:
                scale = npt(L - 1) / npt(Lo - 1) if Lo > 1 else npt(0)
            else:
                scale = npt(1.0 / s) if s is not None and s > 0 else npt(L) / npt(Lo)
        x = call(_resample_op, x, d, Lo, m, bool(align_corners), fscale, scale)
    if x is input:
        x = call(_constant_op, input, tuple([(0, 0)] * input.dim()), 0.0)
    return x


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):  # noqa: A002
    """Deprecated alias of :func:`interpolate` (as in PyTorch)."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):  # noqa: A002
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):  # noqa: A002
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
