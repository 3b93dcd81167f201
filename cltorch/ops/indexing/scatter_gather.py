"""An index tensor with an entry per element, along one dim: ``gather`` (and ``take_along_dim``), ``scatter``,
``scatter_add``, ``scatter_reduce`` (and their in-place forms), and ``_scatter_into_zeros`` (the backward of
max/sort/topk), each registered with its derivative."""
import numpy as np

from ... import _dtype as D
from ..._dispatch import call, register
from ..._tensor import Tensor
from .._util import method
from ..elementwise import broadcast_shapes
from .common import (_check_int_index, _host, _host_check, _index_long, _inplace, _is_host, _same_device,
                     _tensor_from_host, _wrap_dim)
from .launch import _accumulate_put_dims, _dim_geometry, _launch_idx, _mark_trusted, _trusted


def _check_gather(x, dim, index, src=None, fname="gather"):
    if index.numel() == 0:   # an empty index is not checked against the other shapes (PyTorch's rule)
        return
    if index.dim() != x.dim() and not (index.dim() <= 1 and x.dim() <= 1):
        raise RuntimeError(f"Index tensor must have the same number of dimensions as {'input' if fname == 'gather' else 'self'} tensor")
    if src is not None and isinstance(src, Tensor) and src.dim() != index.dim() and not (
            index.dim() <= 1 and src.dim() <= 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    xsh = x._shape if x.dim() else (1,)
    ssh = (src._shape if src.dim() else (1,)) if isinstance(src, Tensor) else None
    for d in range(index.dim()):
        if d != dim and index._shape[d] > xsh[d]:
            raise RuntimeError(f"Size does not match at dimension {d} expected index {list(index._shape)} to be "
                               f"smaller than self {list(x._shape)} apart from dimension {dim}")
        if ssh is not None and index._shape[d] > ssh[d]:
            raise RuntimeError(f"Size does not match at dimension {d} expected index {list(index._shape)} to be "
                               f"smaller than src {list(src._shape)} apart from dimension {dim}")


def _gather_raw(x, dim, index):
    shape = index._shape
    if index.numel() == 0:
        return Tensor._empty(shape, x.dtype, x.device)
    if _is_host(x, index):
        a = _host(index)
        size = x._shape[dim] if x.dim() else 1
        _host_check(a, size, dim, False)
        xs = _host(x).reshape(x._shape if x.dim() else (1,))
        a2 = a.reshape(shape if index.dim() else (1,))
        sl = tuple(slice(0, a2.shape[d]) if d != dim else slice(None) for d in range(xs.ndim))
        r = np.take_along_axis(xs[sl], a2, axis=dim)
        return _tensor_from_host(r.reshape(shape), x.device)
    out = Tensor._empty(shape, x.dtype, x.device)
    xs = x if x.dim() else x.reshape(1)
    it = shape if index.dim() else (1,)
    ix = index if index.dim() else index.reshape(1)
    x_st, idxs = _dim_geometry(xs, dim, ix, it, True)
    _launch_idx("gather", xs, it, x_st, idxs, direct=out, direct_st=out._stride if index.dim() else (1,))
    return out


def _gather_fwd(ctx, x, dim, index):
    if ctx is not None:
        ctx.save_for_backward(index)
        ctx.shape, ctx.dim = x._shape, dim
    return _gather_raw(x, dim, index)


def _gather_bwd(ctx, g):
    (index,) = ctx.saved_tensors
    from ..creation import zeros
    z = zeros(ctx.shape, dtype=g.dtype, device=g.device)
    return call(_scatter_add_op, z, ctx.dim, index, g), None, None


_gather_op = register("gather", _gather_fwd, _gather_bwd)


def gather(input, dim, index, *, sparse_grad=False, out=None):  # noqa: A002
    """``out[i][j][k] = input[i][index[i][j][k]][k]`` (for dim 1): the result has index's shape. index must be
    int64 with input's number of dims and no larger than input in the other dims; out-of-range entries raise
    IndexError."""
    _check_int_index(index, "gather", empty_ok=True)
    _same_device(input, index)
    dim = _wrap_dim(input, dim)
    _check_gather(input, dim, index)
    index = _index_long(index, input.device)
    r = call(_gather_op, input, dim, index)
    return r if out is None else out.copy_(r)


method("gather", lambda self, dim, index, *, sparse_grad=False: gather(self, dim, index))


def take_along_dim(input, indices, dim=None):  # noqa: A002
    """``gather`` after broadcasting input and indices in every dim but ``dim``; with ``dim=None`` both are
    flattened."""
    _check_int_index(indices, "take_along_dim", int32_ok=False)
    if dim is None:     # flattened: negative entries raise, as in PyTorch
        return gather(input.reshape(-1), 0, indices.reshape(-1))
    dim = _wrap_dim(input, dim)
    if indices.numel():   # negative entries count from the end of dim (PyTorch wraps them, gather does not)
        n = input._shape[dim] if input.dim() else 1
        indices = indices + (indices < 0).to(D.int64) * n
    if input.dim() != indices.dim():
        raise RuntimeError(f"torch.take_along_dim(): input and indices should have the same number of dimensions, "
                           f"but got {input.dim()} dimensions for input, and {indices.dim()} dimensions for indices")
    si = list(input._shape)
    sj = list(indices._shape)
    si[dim] = sj[dim] = 1
    b = list(broadcast_shapes(tuple(si), tuple(sj)))
    bi, bj = list(b), list(b)
    bi[dim] = input._shape[dim]
    bj[dim] = indices._shape[dim]
    return gather(input.expand(*bi), dim, indices.expand(*bj))


method("take_along_dim", lambda self, indices, dim=None: take_along_dim(self, indices, dim))


def _scatter_put(out, dim, index, src, op):
    """In place on ``out``: out[..index..] op= src (tensor, read through its strides, or scalar)."""
    if index.numel() == 0:
        return out
    xs = out if out.dim() else out.reshape(1)
    it = index._shape if index.dim() else (1,)
    ix = index if index.dim() else index.reshape(1)
    if ix is not index and _trusted(index):
        _mark_trusted(ix)
    x_st, idxs = _dim_geometry(xs, dim, ix, it, True)
    if isinstance(src, Tensor) and not src.dim():
        src = src.reshape(1)
    _accumulate_put_dims(xs, it, x_st, idxs, src, op)
    return out


def _scatter_fwd(ctx, x, dim, index, src, reduce):
    if ctx is not None:
        ctx.save_for_backward(index)
        ctx.dim, ctx.reduce, ctx.src_is_t = dim, reduce, isinstance(src, Tensor)
    from ..views import _materialize
    out = _materialize(x)
    op = {None: "assign", "add": "add", "multiply": "mul"}[reduce]
    return _scatter_put(out, dim, index, src, op)


def _scatter_bwd(ctx, g):
    (index,) = ctx.saved_tensors
    if ctx.reduce == "multiply":
        raise NotImplementedError("the derivative of scatter with reduce='multiply' is not implemented")
    gx = g if ctx.reduce == "add" else call(_scatter_op, g, ctx.dim, index, 0.0, None)
    gs = call(_gather_op, g, ctx.dim, index) if ctx.src_is_t else None
    return gx, None, None, gs, None


_scatter_op = register("scatter", _scatter_fwd, _scatter_bwd)


def _scatter_args(x, dim, index, src, value, fname):
    if src is None:
        src = value
    if src is None:
        raise TypeError(f"{fname}() missing 1 required argument: 'src' or 'value'")
    _check_int_index(index, fname, empty_ok=True)
    _same_device(x, index)
    dim = _wrap_dim(x, dim)
    if isinstance(src, Tensor):
        _same_device(x, src)
        if src.dtype is not x.dtype:
            raise RuntimeError(f"{fname}(): Expected self.dtype to be equal to src.dtype")
    elif not isinstance(src, (bool, int, float)):
        src = float(src)
    _check_gather(x, dim, index, src, fname)
    return dim, src, _index_long(index, x.device)


def scatter(input, dim, index, src=None, value=None, *, reduce=None):  # noqa: A002
    """Out-of-place ``scatter``: a copy of input with ``copy[i][index[i][j]] = src[i][j]`` (dim 1), src a tensor
    (read over index's shape) or a scalar ``value``; ``reduce='add'|'multiply'`` combines instead. Duplicate
    indices without reduce leave one of the written values (unspecified which, as in PyTorch)."""
    if reduce not in (None, "add", "multiply"):
        raise RuntimeError(f"reduce argument must be either add or multiply, got {reduce}")
    dim, src, index = _scatter_args(input, dim, index, src, value, "scatter")
    return call(_scatter_op, input, dim, index, src, reduce)


def scatter_(self, dim, index, src=None, value=None, *, reduce=None):
    """In-place ``scatter``."""
    if reduce not in (None, "add", "multiply"):
        raise RuntimeError(f"reduce argument must be either add or multiply, got {reduce}")
    dim, src, index = _scatter_args(self, dim, index, src, value, "scatter_")
    r = _inplace(self, "scatter_", lambda s, sr: call(_scatter_op, s, dim, index, sr, reduce), src)
    if r is not None:
        return r
    _scatter_put(self, dim, index, src, {None: "assign", "add": "add", "multiply": "mul"}[reduce])
    self._storage.version += 1
    return self


def _scatter_add_fwd(ctx, x, dim, index, src):
    if ctx is not None:
        ctx.save_for_backward(index)
        ctx.dim = dim
    from ..views import _materialize
    out = _materialize(x)
    return _scatter_put(out, dim, index, src, "add")


def _scatter_add_bwd(ctx, g):
    (index,) = ctx.saved_tensors
    return g, None, None, call(_gather_op, g, ctx.dim, index)


_scatter_add_op = register("scatter_add", _scatter_add_fwd, _scatter_add_bwd)


def scatter_add(input, dim, index, src):  # noqa: A002
    """Out-of-place ``scatter_add``: a copy of input with ``copy[i][index[i][j]] += src[i][j]`` (dim 1); every
    duplicate index adds (atomically on the device)."""
    dim, src, index = _scatter_args(input, dim, index, src, None, "scatter_add")
    if not isinstance(src, Tensor):
        raise TypeError("scatter_add(): argument 'src' must be Tensor")
    return call(_scatter_add_op, input, dim, index, src)


def scatter_add_(self, dim, index, src):
    dim, src, index = _scatter_args(self, dim, index, src, None, "scatter_add_")
    r = _inplace(self, "scatter_add_", lambda s, sr: call(_scatter_add_op, s, dim, index, sr), src)
    if r is not None:
        return r
    _scatter_put(self, dim, index, src, "add")
    self._storage.version += 1
    return self


method("scatter", lambda self, dim, index, src=None, value=None, *, reduce=None:
       scatter(self, dim, index, src, value, reduce=reduce))
method("scatter_", scatter_)
method("scatter_add", lambda self, dim, index, src: scatter_add(self, dim, index, src))
method("scatter_add_", scatter_add_)


_REDUCES = ("sum", "prod", "mean", "amax", "amin")


def _identity(reduce, dt):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dt.is_floating_point:
        return float("-inf") if reduce == "amax" else float("inf")
    if dt is D.bool:
        return 0 if reduce == "amax" else 1
    info = D.iinfo(dt)
    return info.min if reduce == "amax" else info.max


def _scatter_reduce_raw(x, dim, index, src, reduce, include_self):
    from ..views import _materialize
    out = _materialize(x)
    if not include_self:
        _scatter_put(out, dim, index, _identity(reduce, x.dtype), "assign")
    op = {"sum": "add", "mean": "add", "prod": "mul", "amax": "max", "amin": "min"}[reduce]
    _scatter_put(out, dim, index, src, op)
    if reduce == "mean":
        from ..creation import full
        cnt = full(x._shape, 1 if include_self else 0, dtype=x.dtype, device=x.device)
        _scatter_put(cnt, dim, index, 1, "add")
        cnt = cnt.clamp(min=1)
        if x.dtype.is_floating_point:
            out = out / cnt
        else:
            out = out.div(cnt, rounding_mode="floor")
        return out, cnt
    return out, None


def _scatter_reduce_fwd(ctx, x, dim, index, src, reduce, include_self):
    out, cnt = _scatter_reduce_raw(x, dim, index, src, reduce, include_self)
    if ctx is not None:
        ctx.save_for_backward(x, index, src, out)
        ctx.dim, ctx.reduce, ctx.include_self, ctx.cnt = dim, reduce, include_self, cnt
    return out


def _scatter_reduce_bwd(ctx, g):
    x, index, src, out = ctx.saved_tensors
    dim, reduce, inc = ctx.dim, ctx.reduce, ctx.include_self
    from ..pointwise import where
    if reduce in ("sum", "mean"):
        gg = g / ctx.cnt if reduce == "mean" else g
        gx = gg if inc else call(_scatter_op, gg, dim, index, 0.0, None)
        gs = call(_gather_op, gg, dim, index)
        return gx, None, None, gs, None, None
    if reduce == "prod":
        # exact when no input is zero: d out / d v = out / v for every v that entered the product
        gx = g * out / x
        if not inc:
            gx = call(_scatter_op, gx, dim, index, 0.0, None)
        gs = call(_gather_op, g * out, dim, index) / src
        return gx, None, None, gs, None, None
    # amax / amin: the gradient is split evenly among the values equal to the result
    val_at = call(_gather_op, out, dim, index)
    src_is = (src == val_at).to(g.dtype)
    self_is = (x == out).to(g.dtype)
    if not inc:
        self_is = call(_scatter_op, self_is, dim, index, 0.0, None)
    from ..creation import zeros_like
    n = self_is + call(_scatter_add_op, zeros_like(self_is), dim, index, src_is)
    gd = where(n > 0, g / where(n > 0, n, 1.0), 0.0)
    return gd * self_is, None, None, call(_gather_op, gd, dim, index) * src_is, None, None


_scatter_reduce_op = register("scatter_reduce", _scatter_reduce_fwd, _scatter_reduce_bwd)


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):  # noqa: A002
    """Out-of-place ``scatter_reduce``: reduces every src value into ``input[..index..]`` with ``reduce`` in
    'sum', 'prod', 'mean', 'amax', 'amin' (NaN propagates in amax/amin); ``include_self=False`` leaves the
    original values out of the reduction at positions that receive values. Integer 'mean' floors."""
    if reduce not in _REDUCES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    dim, src, index = _scatter_args(input, dim, index, src, None, "scatter_reduce")
    if not isinstance(src, Tensor):
        raise TypeError("scatter_reduce(): argument 'src' must be Tensor")
    return call(_scatter_reduce_op, input, dim, index, src, reduce, bool(include_self))


def scatter_reduce_(self, dim, index, src, reduce, *, include_self=True):
    if reduce not in _REDUCES:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    dim, src, index = _scatter_args(self, dim, index, src, None, "scatter_reduce_")
    r = _inplace(self, "scatter_reduce_",
                 lambda s, sr: call(_scatter_reduce_op, s, dim, index, sr, reduce, bool(include_self)), src)
    if r is not None:
        return r
    out, _ = _scatter_reduce_raw(self, dim, index, src, reduce, include_self)
    from ..views import _copy_into
    _copy_into(self, out)
    self._storage.version += 1
    return self


method("scatter_reduce", lambda self, dim, index, src, reduce, *, include_self=True:
       scatter_reduce(self, dim, index, src, reduce, include_self=include_self))
method("scatter_reduce_", scatter_reduce_)


def _scatter_into_zeros_fwd(ctx, g, shape, dim, index):
    from ..creation import zeros
    out = zeros(shape, dtype=g.dtype, device=g.device)
    if ctx is not None:
        ctx.save_for_backward(index)
        ctx.dim = dim
    return _scatter_put(out, dim, index, g, "assign")


_scatter_into_zeros_op = register(
    "scatter_into_zeros", _scatter_into_zeros_fwd,
    lambda ctx, gg: (call(_gather_op, gg, ctx.dim, ctx.saved_tensors[0]), None, None, None))


def _scatter_into_zeros(x, dim, index, grad):
    """Zeros shaped like ``x`` with ``grad`` written at ``index`` along ``dim`` (distinct positions, as from a
    max/sort/topk); differentiable in grad (its derivative gathers at index)."""
    dim = _wrap_dim(x, dim)
    if grad.dtype is not x.dtype and x.dtype.is_floating_point:
        grad = grad.to(x.dtype)
    # the indices of max/sort/topk are in range (autograd's saved-tensor version check rejects any that were
    # modified since), so the launch needs no bounds read-back and backward stays asynchronous
    _mark_trusted(index)
    return call(_scatter_into_zeros_op, grad, x._shape, dim, index)
