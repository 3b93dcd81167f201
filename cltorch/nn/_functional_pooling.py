"""``torch.nn.functional``'s 3-d convolution and pooling, max-unpooling and fractional max pooling.

Floor 7: written against cltorch's public API and the ops of ``cltorch.ops.conv`` / ``cltorch.ops.pool``
(found at call time). conv3d and the 3-d poolings are those ops (one N-d path with the 1-d and 2-d ones);
``max_unpool{1,2,3}d`` scatter the values into zeros (their gradient is the gather); fractional max pooling
(Graham, "Fractional Max-Pooling", 2014) builds its pseudo-random windows on the host exactly as PyTorch's
``generate_intervals`` does and takes the window maxima with a gather and ``max``. Exported by
``cltorch.nn.functional``.
"""
import importlib

import numpy as np

import cltorch as torch

__all__ = ["conv3d", "conv_transpose3d", "max_pool3d", "max_pool3d_with_indices", "avg_pool3d",
           "adaptive_avg_pool3d", "adaptive_max_pool3d", "adaptive_max_pool3d_with_indices", "adaptive_max_pool1d",
           "adaptive_max_pool1d_with_indices", "max_unpool1d", "max_unpool2d", "max_unpool3d",
           "fractional_max_pool2d", "fractional_max_pool3d", "fractional_max_pool2d_with_indices",
           "fractional_max_pool3d_with_indices"]


def _ops(name):
    return importlib.import_module(f"cltorch.ops.{name}")


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """3-D convolution: input (N, C_in, D, H, W) or (C_in, D, H, W), weight (C_out, C_in/groups, kD, kH, kW);
    padding int, triple, 'valid' or 'same'. See ``cltorch.ops.conv.conv3d``."""
    return _ops("conv").conv3d(input, weight, bias, stride, padding, dilation, groups)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,  # noqa: A002
                     dilation=1):
    """Transposed 3-D convolution; weight (C_in, C_out/groups, kD, kH, kW). See ``cltorch.ops.conv``."""
    return _ops("conv").conv_transpose3d(input, weight, bias, stride, padding, output_padding, groups, dilation)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
               return_indices=False):
    """3-d max pooling over (N, C, D, H, W) or (C, D, H, W); see ``cltorch.ops.pool.max_pool3d``."""
    return _ops("pool").max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
                            return_indices=True):
    return _ops("pool").max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,  # noqa: A002
               divisor_override=None):
    """3-d average pooling; see ``cltorch.ops.pool.avg_pool3d``."""
    return _ops("pool").avg_pool3d(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                   divisor_override)


def adaptive_avg_pool3d(input, output_size):  # noqa: A002
    return _ops("pool").adaptive_avg_pool3d(input, output_size)


def adaptive_max_pool3d(input, output_size, return_indices=False):  # noqa: A002
    return _ops("pool").adaptive_max_pool3d(input, output_size, return_indices)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=True):  # noqa: A002
    return _ops("pool").adaptive_max_pool3d(input, output_size, True)


def adaptive_max_pool1d(input, output_size, return_indices=False):  # noqa: A002
    """As ``torch.nn.functional.adaptive_max_pool1d`` over (N, C, L) or (C, L)."""
    return _ops("pool").adaptive_max_pool1d(input, output_size, return_indices)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=True):  # noqa: A002
    return _ops("pool").adaptive_max_pool1d(input, output_size, True)


# ------------------------------------------------------------------------------------------------ unpooling
def _ntuple(v, n):
    if isinstance(v, (list, tuple)):
        v = tuple(v)
        return v * n if len(v) == 1 else v
    return (v,) * n


def _unpool_output_size(input, kernel_size, stride, padding, output_size):  # noqa: A002
    """PyTorch's ``_unpool_output_size``: the default ``(L - 1)*s + k - 2p`` or a checked ``output_size``."""
    n = len(kernel_size)
    insz = tuple(input.shape[-n:])
    default = [(insz[d] - 1) * stride[d] + kernel_size[d] - 2 * padding[d] for d in range(n)]
    if output_size is None:
        return default
    output_size = [int(s) for s in output_size]
    if len(output_size) == n + 2:
        output_size = output_size[2:]
    if len(output_size) != n:
        raise ValueError(f"output_size should be a sequence containing {n} or {n + 2} elements, but it has a "
                         f"length of '{len(output_size)}'")
    for d in range(n):
        lo, hi = default[d] - stride[d], default[d] + stride[d]
        if not lo < output_size[d] < hi:
            raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between {lo} and {hi})')
    return output_size


def _max_unpool(nd, input, indices, kernel_size, stride, padding, output_size):  # noqa: A002
    fn = f"max_unpool{nd}d"
    k = _ntuple(kernel_size, nd)
    s = k if stride is None else _ntuple(stride, nd)
    p = _ntuple(padding, nd)
    if input.dim() not in (nd + 1, nd + 2):
        raise RuntimeError(f"{fn}: Expected {nd + 1}D or {nd + 2}D (batch mode) tensor for input, but got: "
                           f"{list(input.shape)}")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor "
                           f"({list(input.shape)}) but got indices tensor with shape: {list(indices.shape)}")
    if indices.dtype is not torch.int64:
        raise RuntimeError(f"{fn}(): Expected indices to have type Long but got {indices.dtype}")
    out = _unpool_output_size(input, k, s, p, output_size)
    unbatched = input.dim() == nd + 1
    x = input.unsqueeze(0) if unbatched else input
    ind = indices.unsqueeze(0) if unbatched else indices
    N, C = x.shape[0], x.shape[1]
    vol = int(np.prod(out))
    flat_i = ind.reshape(N, C, -1)
    if flat_i.numel():
        lo, hi = int(flat_i.min().item()), int(flat_i.max().item())
        if lo < 0 or hi >= vol:
            bad = lo if lo < 0 else hi
            raise RuntimeError(f"Found an invalid max index: {bad} (output volumes are of size "
                               f"{'x'.join(map(str, out))}")
    y = torch.zeros((N, C, vol), dtype=x.dtype, device=x.device).scatter(2, flat_i, x.reshape(N, C, -1))
    y = y.reshape(N, C, *out)
    return y.squeeze(0) if unbatched else y


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):  # noqa: A002
    """The partial inverse of max_pool1d: ``input`` (N, C, L) or (C, L) placed at ``indices`` (from
    ``max_pool1d(..., return_indices=True)``) in zeros of length ``(L - 1)*stride + kernel - 2*padding`` or
    ``output_size``. ValueError for a bad output_size, RuntimeError for mismatched shapes or an index out of
    range. Differentiable in input."""
    return _max_unpool(1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):  # noqa: A002
    """The partial inverse of max_pool2d over (N, C, H, W) or (C, H, W); see :func:`max_unpool1d`."""
    return _max_unpool(2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):  # noqa: A002
    """The partial inverse of max_pool3d over (N, C, D, H, W) or (C, D, H, W); see :func:`max_unpool1d`."""
    return _max_unpool(3, input, indices, kernel_size, stride, padding, output_size)


# ------------------------------------------------------------------------------------------------ fractional
def _intervals(sample, L, O, k, npdt):
    """PyTorch's generate_intervals: window starts for one plane and one dim, computed in the input's dtype."""
    seq = np.empty(O, np.int64)
    if O > 1:
        alpha = npdt(L - k) / npdt(O - 1)
        i = np.arange(O - 1, dtype=npdt)
        seq[:-1] = ((i + npdt(sample)) * alpha).astype(np.int64) - np.int64(npdt(sample) * alpha)
    if O > 0:
        seq[-1] = L - k
    return seq


def _fractional(nd, input, kernel_size, output_size, output_ratio, return_indices,  # noqa: A002
                _random_samples):
    fn = f"fractional_max_pool{nd}d"
    if output_size is None and output_ratio is None:
        raise ValueError(f"{fn} requires specifying either an output_size or an output_ratio")
    k = _ntuple(kernel_size, nd)
    if input.dim() not in (nd + 1, nd + 2):
        raise RuntimeError(f"{fn}(): Expected {nd + 1}D or {nd + 2}D tensor, but got: {list(input.shape)}")
    unbatched = input.dim() == nd + 1
    x = input.unsqueeze(0) if unbatched else input
    spatial = tuple(x.shape[2:])
    if output_size is None:
        ratio = _ntuple(output_ratio, nd)
        out = tuple(int(L * float(r)) for L, r in zip(spatial, ratio))
    else:
        out = tuple(int(o) for o in _ntuple(output_size, nd))
    names = ("time", "height", "width")[3 - nd:] if nd == 3 else ("height", "width")
    for name, L, o, kk in zip(names, spatial, out, k):
        if o + kk - 1 > L:
            raise RuntimeError(f"{fn}(): pool {name} {kk} too large relative to input {name} {L} for output "
                               f"{name} {o}")
    N, C = x.shape[0], x.shape[1]
    if _random_samples is None:
        samples = torch.rand((N, C, nd), dtype=x.dtype, device=x.device)
    else:
        samples = _random_samples
        if tuple(samples.shape) != (N, C, nd):
            raise RuntimeError(f"{fn}(): expected _random_samples of shape {[N, C, nd]}, got "
                               f"{list(samples.shape)}")
    npdt = np.float64 if x.dtype is torch.float64 else np.float32
    smp = samples.detach().cpu().numpy().astype(npdt)
    # PyTorch's order of the samples: 2-d (width, height); 3-d (time, height, width)
    order = (1, 0) if nd == 2 else (0, 1, 2)
    strides = [int(np.prod(spatial[d + 1:])) for d in range(nd)]
    win = np.indices(k).reshape(nd, -1)                               # taps of one window, (h, w) order
    tap = sum(win[d] * strides[d] for d in range(nd))                 # (K,)
    idx = np.empty((N, C, int(np.prod(out)), tap.size), np.int64)
    for n in range(N):
        for c in range(C):
            starts = [_intervals(smp[n, c, order[d]], spatial[d], out[d], k[d], npdt) for d in range(nd)]
            grid = np.meshgrid(*starts, indexing="ij")
            base = sum(g.reshape(-1) * strides[d] for d, g in enumerate(grid))
            idx[n, c] = base[:, None] + tap[None, :]
    it = torch.from_numpy(idx).to(x.device)
    vals = x.reshape(N, C, -1).gather(2, it.reshape(N, C, -1)).reshape(idx.shape)
    y, arg = vals.max(dim=3)
    ind = it.gather(3, arg.unsqueeze(3)).squeeze(3)
    y, ind = y.reshape(N, C, *out), ind.reshape(N, C, *out)
    if unbatched:
        y, ind = y.squeeze(0), ind.squeeze(0)
    return (y, ind) if return_indices else y


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,  # noqa: A002
                          _random_samples=None):
    """Fractional max pooling (Graham 2014) over (N, C, H, W) or (C, H, W): ``output_size`` (or
    ``int(input * output_ratio)``) windows of ``kernel_size`` whose starts follow PyTorch's pseudo-random
    intervals from ``_random_samples`` (N, C, 2) in [0, 1) (drawn with ``cltorch.rand`` when None; element 0
    drives the width, 1 the height, as in PyTorch). Indices are plane-local ``h*W + w``. Raises ValueError
    without a size or ratio, RuntimeError when a window does not fit. Differentiable in input."""
    return _fractional(2, input, kernel_size, output_size, output_ratio, return_indices, _random_samples)


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None,  # noqa: A002
                                       return_indices=True, _random_samples=None):
    return _fractional(2, input, kernel_size, output_size, output_ratio, True, _random_samples)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,  # noqa: A002
                          _random_samples=None):
    """Fractional max pooling over (N, C, D, H, W) or (C, D, H, W); samples (N, C, 3) drive (time, height,
    width). See :func:`fractional_max_pool2d`."""
    return _fractional(3, input, kernel_size, output_size, output_ratio, return_indices, _random_samples)


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None,  # noqa: A002
                                       return_indices=True, _random_samples=None):
    return _fractional(3, input, kernel_size, output_size, output_ratio, True, _random_samples)
