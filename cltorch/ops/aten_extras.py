"""Less common torch.* functions, composed from the ops below them (issue 15's OpInfo entries).

* ``empty_permuted``, ``Tensor.new_empty_strided``, ``Tensor.resize_`` / ``resize_as_``: allocation and metadata.
* ``gradient``: second-order central differences inside, first- or second-order one-sided ones at the edges,
  uniform or coordinate spacing (the formulas of numpy.gradient, Fornberg's finite-difference weights), composed
  of narrow and elementwise ops, hence differentiable.
* ``histogram`` / ``histogramdd``: host binning (numpy) as PyTorch's CPU kernel: linspace edges in the input's
  dtype, right-most edge inclusive, values outside the range dropped; ``density`` divides by the total and the
  bin volume. They synchronise (their result shapes and values come from the host).
* ``index_reduce`` (prod, mean, amax, amin; ``include_self``): ``scatter_reduce`` with the 1-D index spread over
  the source's shape, so its derivative is scatter_reduce's.
* ``put`` / ``Tensor.put_``: ``index_put`` on the flattened tensor (negative indices count from the end).
* ``nonzero_static``: ``nonzero`` cut or padded with ``fill_value`` to ``size`` rows.
* ``native_batch_norm`` / ``native_layer_norm`` / ``native_group_norm``: the normalised output of the fused
  norm ops plus the saved statistics (mean, 1/sqrt(var + eps)) as aten returns them.
"""
import math

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor
from ._util import method
from .padding import constant_pad_nd

__all__ = ["constant_pad_nd", "as_strided_scatter", "empty_permuted", "gradient", "histogram", "histogramdd", "index_reduce", "put",
           "nonzero_static", "native_batch_norm", "native_layer_norm", "native_group_norm", "resize_as_"]


def _ops():
    import cltorch
    return cltorch


# ------------------------------------------------------------------------------------------ allocation, metadata
def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None, requires_grad=False,
                   pin_memory=False):
    """An uninitialised tensor of shape ``size`` whose memory holds the dims in the order ``physical_layout``
    (a permutation of range(len(size))): ``empty([size[p] for p in layout]).permute(inverse)``.
    Raises RuntimeError when physical_layout is not such a permutation."""
    size, perm = tuple(int(s) for s in size), [int(p) for p in physical_layout]
    if sorted(perm) != list(range(len(size))):
        raise RuntimeError(f"Number of dimensions in size does not match the length of the physical_layout; or "
                           f"physical_layout {perm} is not a permutation of the dims of {list(size)}")
    t = _ops().empty([size[p] for p in perm], dtype=dtype, device=device)
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    t = t.permute(*inv) if perm else t
    return t.requires_grad_(True) if requires_grad else t


def _new_empty_strided(self, size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                       pin_memory=False):
    """``Tensor.new_empty_strided``: an uninitialised tensor of ``size`` with ``stride``, self's dtype and device
    unless given."""
    t = _ops().empty_strided(tuple(size), tuple(stride), dtype=dtype or self.dtype, device=device or self.device)
    return t.requires_grad_(True) if requires_grad else t


method("new_empty_strided", _new_empty_strided)


def _resize_(self, *size, memory_format=None):
    """``Tensor.resize_(size)``: self becomes contiguous with shape ``size``, keeping its elements in row-major
    order; a larger size moves self to a new storage whose extra elements are zero (PyTorch leaves them
    uninitialised). Raises RuntimeError on a tensor that requires grad (as PyTorch)."""
    if len(size) == 1 and isinstance(size[0], (list, tuple)):
        size = size[0]
    size = tuple(int(s) for s in size)
    if any(s < 0 for s in size):
        raise RuntimeError(f"Trying to create tensor with negative dimension: {list(size)}")
    if self.requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    n = math.prod(size)
    stride = []
    acc = 1
    for s in reversed(size):
        stride.append(acc)
        acc *= max(s, 1)
    stride = tuple(reversed(stride))
    if self.is_contiguous() and self._offset + n <= self._storage.size:
        self._shape, self._stride = size, stride
        return self
    new = _ops().zeros(size, dtype=self.dtype, device=self.device)
    k = min(n, self.numel())
    if k:
        new.reshape(-1)[:k].copy_(self.reshape(-1)[:k])
    self._storage, self._shape, self._stride, self._offset = new._storage, size, stride, 0
    return self


def resize_as_(input, the_template, *, memory_format=None):  # noqa: A002
    """``input.resize_(the_template.shape)`` (see ``Tensor.resize_``)."""
    return _resize_(input, tuple(the_template.shape))


method("resize_", _resize_)
method("resize_as_", lambda self, other, *, memory_format=None: resize_as_(self, other))


def as_strided_scatter(input, src, size, stride, storage_offset=None):  # noqa: A002
    """``torch.as_strided_scatter``: a contiguous copy of input whose ``as_strided(size, stride, storage_offset)``
    view (offset in elements of the copy, default 0) holds ``src`` (of shape ``size``). Differentiable in both
    (the registered ``as_strided_scatter`` op that autograd's in-place-on-view rebasing also uses)."""
    from .._dispatch import REGISTRY, call
    size, stride = tuple(int(v) for v in size), tuple(int(v) for v in stride)
    off = 0 if storage_offset is None else int(storage_offset)
    if tuple(src.shape) != size:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(size)}")
    if any(st < 0 for st in stride):
        raise RuntimeError(f"as_strided_scatter: negative strides are not supported, got {list(stride)}")
    if all(size) and off + sum((n - 1) * st for n, st in zip(size, stride)) >= max(input.numel(), 1):
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {off} are out of "
                           f"bounds for a storage of {input.numel()} elements")
    if src.dtype != input.dtype:
        src = src.to(input.dtype)
    return call(REGISTRY["as_strided_scatter"], input, src, size, stride, off)


method("as_strided_scatter", lambda self, src, size, stride, storage_offset=None:
       as_strided_scatter(self, src, size, stride, storage_offset))


# ------------------------------------------------------------------------------------------ gradient
def _dims_and_spacing(input, spacing, dim):
    nd = input.dim()
    if dim is None:
        dims = list(range(nd))
    elif isinstance(dim, int):
        dims = [dim]
    else:
        dims = list(dim)
    dims = [d + nd if d < 0 else d for d in dims]
    if any(d < 0 or d >= nd for d in dims):
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {dim})")
    if len(set(dims)) != len(dims):
        raise RuntimeError("torch.gradient expected each dimension to be listed once")
    if spacing is None:
        sp = [1.0] * len(dims)
    elif isinstance(spacing, (int, float)) or (isinstance(spacing, Tensor) and spacing.dim() == 0):
        sp = [spacing] * len(dims)
    else:
        sp = list(spacing)
        if len(sp) == 1 and len(dims) > 1 and not isinstance(sp[0], Tensor):
            sp = sp * len(dims)
        if len(sp) != len(dims):
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or a list of length "
                               f"equal to 'self.dim() = {len(dims)}', since dim argument was not given, but got a "
                               f"list of length {len(sp)}")
    return dims, sp


def _along(t, d, nd):
    """A 1-D tensor t shaped to broadcast along dim d of an nd-dim tensor."""
    shape = [1] * nd
    shape[d] = -1
    return t.reshape(shape)


def _gradient_dim(f, d, h, edge_order):
    n = f.shape[d]
    nd = f.dim()
    sl = lambda a, b: f.narrow(d, a, b - a)  # noqa: E731
    if isinstance(h, Tensor) and h.dim() == 1:
        if h.shape[0] != n:
            raise RuntimeError(f"torch.gradient expected each tensor to be on the same device and of the size of "
                               f"the dimension {d} of input ({n}), got {h.shape[0]}")
        x = h.to(f.dtype) if h.dtype != f.dtype else h
        dx = x[1:] - x[:-1]
        d1, d2 = dx[:-1], dx[1:]
        a = _along(-d2 / (d1 * (d1 + d2)), d, nd)
        b = _along((d2 - d1) / (d1 * d2), d, nd)
        c = _along(d1 / (d2 * (d1 + d2)), d, nd)
        inner = a * sl(0, n - 2) + b * sl(1, n - 1) + c * sl(2, n)
        if edge_order == 1:
            first = (sl(1, 2) - sl(0, 1)) / dx[0]
            last = (sl(n - 1, n) - sl(n - 2, n - 1)) / dx[-1]
        else:
            e1, e2 = dx[0], dx[1]
            first = (-(2 * e1 + e2) / (e1 * (e1 + e2))) * sl(0, 1) + ((e1 + e2) / (e1 * e2)) * sl(1, 2) + \
                (-e1 / (e2 * (e1 + e2))) * sl(2, 3)
            e1, e2 = dx[-2], dx[-1]
            last = (e2 / (e1 * (e1 + e2))) * sl(n - 3, n - 2) + (-(e1 + e2) / (e1 * e2)) * sl(n - 2, n - 1) + \
                ((2 * e2 + e1) / (e2 * (e1 + e2))) * sl(n - 1, n)
    else:
        h = float(h.item() if isinstance(h, Tensor) else h)
        inner = (sl(2, n) - sl(0, n - 2)) / (2 * h)
        if edge_order == 1:
            first = (sl(1, 2) - sl(0, 1)) / h
            last = (sl(n - 1, n) - sl(n - 2, n - 1)) / h
        else:
            first = (-1.5 * sl(0, 1) + 2 * sl(1, 2) - 0.5 * sl(2, 3)) / h
            last = (0.5 * sl(n - 3, n - 2) - 2 * sl(n - 2, n - 1) + 1.5 * sl(n - 1, n)) / h
    return _ops().cat([first, inner, last], d)


def gradient(input, *, spacing=1, dim=None, edge_order=1):  # noqa: A002
    """``torch.gradient``: a tuple with the estimated derivative of ``input`` along each of ``dim`` (default all).

    spacing: a scalar, one scalar per dim, or one 1-D coordinate tensor per dim (non-uniform grids).
    edge_order 1 or 2: the order of the one-sided differences at the edges (interior: second order central
    differences; weights as numpy.gradient's). Each dim needs at least edge_order + 1 points (RuntimeError).
    Floating input only. Differentiable (composed of narrow and elementwise ops)."""
    if edge_order not in (1, 2):
        raise RuntimeError(f"torch.gradient only supports edge_order=1 and edge_order=2, got {edge_order}")
    if not input.dtype.is_floating_point:
        input = input.to(_ops().get_default_dtype())
    dims, sp = _dims_and_spacing(input, spacing, dim)
    for d in dims:
        if input.shape[d] < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")
    return tuple(_gradient_dim(input, d, h, edge_order) for d, h in zip(dims, sp))


# ------------------------------------------------------------------------------------------ histograms
def _linspace_np(lo, hi, steps, npdt):
    """PyTorch's CPU linspace in dtype npdt: start + i*step for the first half, end - (steps-1-i)*step after."""
    lo, hi = npdt(lo), npdt(hi)
    if steps == 1:
        return np.array([lo], dtype=npdt)
    step = (hi - lo) / npdt(steps - 1)
    i = np.arange(steps)
    half = steps // 2
    return np.where(i < half, lo + step * i.astype(npdt), hi - step * (steps - 1 - i).astype(npdt)).astype(npdt)


def _edges(a, bins, rng, npdt, what):
    """Bin edges (numpy, dtype npdt) for data column a: from an int count (range or the data's min/max) or given."""
    if isinstance(bins, Tensor):
        e = np.asarray(bins.detach().cpu().numpy()).astype(npdt)
        if e.ndim != 1 or e.size < 1:
            raise RuntimeError(f"{what}(): bins tensor should have one dimension and at least 1 element")
        return e
    bins = int(bins)
    if bins <= 0:
        raise RuntimeError(f"{what}(): bins must be > 0, but got {bins}")
    if rng is not None:
        lo, hi = float(rng[0]), float(rng[1])
    elif a.size:
        lo, hi = float(a.min()), float(a.max())
    else:
        lo, hi = 0.0, 0.0
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"{what}(): range of [{lo}, {hi}] is not finite")
    if lo > hi:
        raise RuntimeError(f"{what}(): max must be larger than min")
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return _linspace_np(lo, hi, bins + 1, npdt)


def _bin_index(a, e):
    """Bin of each value (or -1 when outside [e[0], e[-1]]): the last edge is inclusive."""
    pos = np.searchsorted(e, a, side="right") - 1
    pos = np.where(a == e[-1], len(e) - 2, pos)
    ok = (a >= e[0]) & (a <= e[-1]) & ~np.isnan(a)
    return np.where(ok, pos, -1)


def _histdd(data, bins, rng, weight, density, what):
    """data (N, D) numpy; bins: a list of per-dim ints or edge tensors. Returns (hist numpy, [edges numpy])."""
    npdt = data.dtype.type
    ndim = data.shape[1]
    if rng is not None and len(rng) != 2 * ndim:
        raise RuntimeError(f"{what}(): expected {2 * ndim} range values, got {len(rng)}")
    edges = [_edges(data[:, k], bins[k], None if rng is None else rng[2 * k:2 * k + 2], npdt, what)
             for k in range(ndim)]
    nb = [len(e) - 1 for e in edges]
    idx = [_bin_index(data[:, k], e) for k, e in enumerate(edges)]
    keep = np.ones(data.shape[0], dtype=bool)
    for i in idx:
        keep &= i >= 0
    flat = np.ravel_multi_index([i[keep] for i in idx], nb) if ndim else np.zeros(int(keep.sum()), np.int64)
    w = None if weight is None else weight[keep].astype(np.float64)
    hist = np.bincount(flat, weights=w, minlength=int(np.prod(nb))).astype(npdt).reshape(nb)
    if density:
        vol = np.ones(nb, dtype=npdt)
        for k, e in enumerate(edges):
            shape = [1] * ndim
            shape[k] = -1
            vol = vol * np.diff(e).astype(npdt).reshape(shape)
        with np.errstate(divide="ignore", invalid="ignore"):     # an empty histogram's density is NaN (PyTorch)
            hist = (hist / hist.sum() / vol).astype(npdt)
    return hist, edges


def _host_floats(t, what, name="input"):
    if not isinstance(t, Tensor):
        raise TypeError(f"{what}(): argument '{name}' must be Tensor, not {type(t).__name__}")
    if not t.dtype.is_floating_point or t.dtype is D.bfloat16:
        raise RuntimeError(f"\"{what}\" not implemented for '{t.dtype.name}': expected float32 or float64 input")
    return np.asarray(t.detach().cpu().numpy())


def histogram(input, bins=100, *, range=None, weight=None, density=False, out=None):  # noqa: A002
    """``torch.histogram``: (hist, bin_edges) of the flattened input. bins: a count (edges spaced evenly over
    ``range`` or the data's min..max, widened by 0.5 each way when they are equal) or a 1-D tensor of
    non-decreasing edges. weight: input-shaped weights. density: hist / (sum(hist) * bin width).
    float32/float64 only; computed on the host (PyTorch's binning), results on input's device."""
    a = _host_floats(input, "histogram").reshape(-1)
    w = None
    if weight is not None:
        if tuple(weight.shape) != tuple(input.shape):
            raise RuntimeError(f"histogram(): weight should have the same shape as input, got {list(weight.shape)} "
                               f"and {list(input.shape)}")
        w = np.asarray(weight.detach().cpu().numpy()).reshape(-1)
    hist, edges = _histdd(a.reshape(-1, 1), [bins], range, w, density, "histogram")
    c = _ops()
    res = (c.tensor(hist, device=input.device), c.tensor(edges[0], device=input.device))
    if out is not None:
        out[0].resize_(res[0].shape).copy_(res[0])
        out[1].resize_(res[1].shape).copy_(res[1])
        return out
    return _HistResult(res)


class _HistResult(tuple):
    """(hist, bin_edges), with torch.return_types' field names."""

    @property
    def hist(self):
        return self[0]

    @property
    def bin_edges(self):
        return self[1]


def histogramdd(input, bins=10, *, range=None, weight=None, density=False):  # noqa: A002
    """``torch.histogramdd``: input (..., D) holds N points of D coordinates; returns (hist of shape bins,
    list of D edge tensors). bins: one int for every dim, D ints, or D 1-D edge tensors; range: 2*D floats.
    Binning, weight and density as ``histogram``. float32/float64 only; computed on the host."""
    a = _host_floats(input, "histogramdd")
    if a.ndim < 2 and not (a.ndim == 1):
        raise RuntimeError("histogramdd(): input should have at least 2 dimensions")
    ndim = a.shape[-1] if a.ndim else 1
    data = a.reshape(-1, ndim)
    if isinstance(bins, (int, np.integer)):
        bins = [int(bins)] * ndim
    bins = list(bins)
    if len(bins) != ndim:
        raise RuntimeError(f"histogramdd(): expected {ndim} bin specifications, got {len(bins)}")
    w = None
    if weight is not None:
        w = np.asarray(weight.detach().cpu().numpy()).reshape(-1)
        if w.size != data.shape[0]:
            raise RuntimeError(f"histogramdd(): weight should have {data.shape[0]} elements, got {w.size}")
    hist, edges = _histdd(data, bins, range, w, density, "histogramdd")
    c = _ops()
    return _HistResult((c.tensor(hist, device=input.device), [c.tensor(e, device=input.device) for e in edges]))


# ------------------------------------------------------------------------------------------ index_reduce, put
def _index_reduce_full_index(input, dim, index, source):
    if not isinstance(index, Tensor) or index.dtype not in (D.int64, D.int32):
        raise RuntimeError(f"index_reduce_(): Expected dtype int32/int64 for index but got: "
                           f"{getattr(index, 'dtype', type(index).__name__)}")
    if index.dim() > 1:
        raise IndexError("index_reduce_(): Index is supposed to be a vector")
    nd = max(input.dim(), 1)
    d = dim + nd if dim < 0 else dim
    if not 0 <= d < nd:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {dim})")
    src = source if source.dim() else source.reshape(1)
    idx = index.reshape(-1).to(D.int64)
    if idx.shape[0] != (src.shape[d] if src.dim() else 1):
        raise RuntimeError("index_reduce_(): Number of indices should be equal to source.size(dim)")
    n = input.shape[d] if input.dim() else 1
    if idx.numel():
        lo, hi = int(idx.min().item()), int(idx.max().item())
        if lo < -n or hi >= n:
            raise IndexError("index out of range in self")
        idx = idx + (idx < 0).to(D.int64) * n
    shape = [1] * src.dim()
    shape[d] = -1
    return d, idx.reshape(shape).expand(*src.shape), src


def index_reduce(input, dim, index, source, reduce, *, include_self=True):  # noqa: A002
    """``torch.index_reduce``: ``out[..., index[j], ...] = reduce(out[..., index[j], ...], source[..., j, ...])``
    along ``dim`` for reduce in 'prod', 'mean', 'amax', 'amin'; ``include_self=False`` leaves self's values out of
    the reduction wherever an index lands. index: 1-D int32/int64 of length source.size(dim), negative entries
    count from the end. Lowered to scatter_reduce (its derivative included)."""
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    d, full, src = _index_reduce_full_index(input, dim, index, source)
    x = input if input.dim() else input.reshape(1)
    r = x.scatter_reduce(d, full, src, reduce, include_self=include_self)
    return r if input.dim() else r.reshape(())


method("index_reduce", lambda self, dim, index, source, reduce, *, include_self=True:
       index_reduce(self, dim, index, source, reduce, include_self=include_self))
method("index_reduce_", lambda self, dim, index, source, reduce, *, include_self=True:
       self.copy_(index_reduce(self, dim, index, source, reduce, include_self=include_self)))


def put(input, index, source, accumulate=False):  # noqa: A002
    """``torch.put``: a copy of input (viewed as 1-D, row-major) with ``copy[index] = source`` (or ``+=`` with
    accumulate). index: int64, negative entries count from the end; source has as many elements as index.
    Differentiable (index_put)."""
    if not isinstance(index, Tensor) or index.dtype is not D.int64:
        raise RuntimeError(f"put_(): Expected a long tensor for index, but got "
                           f"{getattr(index, 'dtype', type(index).__name__)}")
    if source.numel() != index.numel():
        raise RuntimeError(f"put_(): Expected source and index to have the same number of elements, but got "
                           f"source.numel() = {source.numel()}, index.numel() = {index.numel()}")
    flat = input.reshape(-1)
    if index.numel() == 0:
        return input.clone()
    r = flat.index_put((index.reshape(-1),), source.reshape(-1).to(input.dtype), accumulate)
    return r.reshape(input.shape)


method("put", lambda self, index, source, accumulate=False: put(self, index, source, accumulate))
method("put_", lambda self, index, source, accumulate=False: self.copy_(put(self, index, source, accumulate)))


def nonzero_static(input, *, size, fill_value=-1):  # noqa: A002
    """``torch.nonzero_static``: the (size, input.dim()) int64 coordinates of the first ``size`` non-zero
    elements (row-major); rows beyond the count of non-zeros hold ``fill_value``."""
    size = int(size)
    if size < 0:
        raise RuntimeError(f"nonzero_static: 'size' must be an non-negative integer, got {size}")
    c = _ops()
    nz = c.nonzero(input)
    k = nz.shape[0]
    if k >= size:
        return nz[:size].contiguous()
    pad = c.full((size - k, input.dim()), fill_value, dtype=D.int64, device=input.device)
    return c.cat([nz, pad], 0)


method("nonzero_static", lambda self, *, size, fill_value=-1: nonzero_static(self, size=size, fill_value=fill_value))


# ------------------------------------------------------------------------------------------ native norms
def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):  # noqa: A002
    """``torch.native_batch_norm``: (output, save_mean, save_invstd). Training: the batch mean and
    1/sqrt(biased var + eps) per channel (running stats updated as batch_norm does); eval: two empty tensors."""
    c = _ops()
    out = c.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps) \
        if hasattr(c, "batch_norm") else None
    if not training:
        e = c.empty((0,), dtype=input.dtype, device=input.device)
        return out, e, e.clone()
    dims = [0] + list(range(2, input.dim()))
    with c.no_grad():
        mean = input.mean(dims)
        var = input.var(dims, unbiased=False)
        invstd = (var + eps).rsqrt()
    return out, mean, invstd


def native_layer_norm(input, normalized_shape, weight, bias, eps):  # noqa: A002
    """``torch.native_layer_norm``: (output, mean, rstd); mean and rstd have input's leading dims followed by
    ones for the normalised dims (no gradient flows through them, as in PyTorch)."""
    c = _ops()
    out = c.layer_norm(input, list(normalized_shape), weight, bias, eps)
    k = len(normalized_shape)
    dims = list(range(input.dim() - k, input.dim()))
    with c.no_grad():
        mean = input.mean(dims, keepdim=True) if dims else input.detach().clone()
        var = input.var(dims, unbiased=False, keepdim=True) if dims else c.zeros_like(input)
        rstd = (var + eps).rsqrt()
    return out, mean, rstd


def native_group_norm(input, weight, bias, N, C, HxW, group, eps):  # noqa: A002
    """``torch.native_group_norm`` on input (N, C, *) with HxW elements per channel: (output, mean (N, group),
    rstd (N, group)); mean and rstd are differentiable, as in PyTorch."""
    c = _ops()
    out = c.group_norm(input, group, weight, bias, eps)
    g = input.reshape(N, group, -1)
    mean = g.mean(-1)
    rstd = (g.var(-1, unbiased=False) + eps).rsqrt()
    return out, mean, rstd
