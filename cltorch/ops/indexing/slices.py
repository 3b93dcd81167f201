"""Whole slices along one dim at a 1-D index: ``index_select``, ``index_add``, ``index_copy``, ``index_fill`` and
their in-place forms, each registered with its derivative."""
import numpy as np

from ... import _dtype as D
from ..._dispatch import call, is_grad_enabled, register
from ..._tensor import Tensor
from .._util import method
from .common import (_check_int_index, _host, _host_check, _inplace, _is_host, _long_on, _same_device,
                     _tensor_from_host, _wrap_dim)
from .launch import _accumulate_put_dims, _dim_geometry, _launch_idx


def _index_select_fwd(ctx, x, dim, index):
    if ctx is not None:
        ctx.save_for_backward(index)
        ctx.shape, ctx.dim = x._shape, dim
    idx = index.reshape(-1) if index.dim() == 0 else index
    n = idx._shape[0]
    xs = x if x.dim() else x.reshape(1)
    shape = list(xs._shape)
    shape[dim] = n
    if _is_host(x, index):
        a = _host(idx)
        _host_check(a, xs._shape[dim], dim, False)
        r = np.take(_host(xs), a, axis=dim)
        out = _tensor_from_host(r, x.device)
    else:
        idx = _long_on(idx, x.device)
        out = Tensor._empty(shape, x.dtype, x.device)
        x_st, idxs = _dim_geometry(xs, dim, idx, shape, False)
        _launch_idx("gather", xs, shape, x_st, idxs, direct=out, direct_st=out._stride)
    if x.dim() == 0:                # a scalar's one entry: 0-d, whatever the index's rank (PyTorch)
        out = out.reshape(())
    return out


def _index_select_bwd(ctx, g):
    (index,) = ctx.saved_tensors
    from ..creation import zeros
    z = zeros(ctx.shape, dtype=g.dtype, device=g.device)
    if not ctx.shape:
        return call(_index_add_op, z.reshape(1), 0, index.reshape(-1), g.reshape(-1), 1).reshape(()), None, None
    return call(_index_add_op, z, ctx.dim, index, g, 1), None, None


_index_select_op = register("index_select", _index_select_fwd, _index_select_bwd)


def index_select(input, dim, index, *, out=None):  # noqa: A002
    """Entries of input along ``dim`` at the positions in ``index`` (a 0-D or 1-D int64/int32 tensor).
    Result shape: input's with ``dim`` of size ``len(index)``. Negative or too large indices raise IndexError."""
    _check_int_index(index, "index_select")
    if index.dim() > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    _same_device(input, index)
    if input.dim() == 0 and index.numel() != 1:
        raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got {index.numel()} value(s)")
    dim = _wrap_dim(input, dim)
    r = call(_index_select_op, input, dim, index)
    return r if out is None else out.copy_(r)


method("index_select", lambda self, dim, index: index_select(self, dim, index))


def _check_index_src(x, dim, index, source, fname):
    if index.dim() > 1:
        raise IndexError(f"{fname}(): Index is supposed to be a vector")
    n = index.numel()
    if isinstance(source, Tensor):
        xs = list(x._shape) if x.dim() else [1]
        ss = list(source._shape) if source.dim() else [1]
        want = list(xs)
        want[dim] = n
        if ss != want and not (source.dim() == 0 and n == 1 and x.dim() <= 1):
            raise RuntimeError(f"{fname}(): source tensor shape must match self tensor shape, excluding the "
                               f"specified dimension. Got self.shape = {list(x._shape)} source.shape = "
                               f"{list(source._shape)} and index of size {n}")


def _dim_put(out, dim, index, source, op):
    """In place on ``out``: out along dim at index[i] op= source's slice i (or a scalar)."""
    if index.numel() == 0:
        return out
    xs = out if out.dim() else out.reshape(1)
    idx = _long_on(index.reshape(-1) if index.dim() == 0 else index, out.device)
    shape = list(xs._shape)
    shape[dim] = idx._shape[0]
    x_st, idxs = _dim_geometry(xs, dim, idx, shape, False)
    if isinstance(source, Tensor) and source._shape != tuple(shape):
        source = source.reshape(shape)
    _accumulate_put_dims(xs, shape, x_st, idxs, source, op)
    return out


def _index_add_fwd(ctx, x, dim, index, source, alpha):
    if ctx is not None:
        ctx.save_for_backward(index)
        ctx.dim, ctx.alpha, ctx.sshape = dim, alpha, source._shape
    from ..views import _materialize
    out = _materialize(x)
    src = source * alpha if alpha != 1 else source
    return _dim_put(out, dim, index, src, "add")


def _index_add_bwd(ctx, g):
    (index,) = ctx.saved_tensors
    gs = call(_index_select_op, g, ctx.dim, index) if g.dim() else g.reshape(1)
    if ctx.alpha != 1:
        gs = gs * ctx.alpha
    if gs._shape != ctx.sshape:
        gs = gs.reshape(ctx.sshape)
    return g, None, None, gs, None


_index_add_op = register("index_add", _index_add_fwd, _index_add_bwd)


def _index_args(x, dim, index, source, fname):
    _check_int_index(index, fname)
    _same_device(x, index)
    dim = _wrap_dim(x, dim)
    if isinstance(source, Tensor):
        _same_device(x, source)
    _check_index_src(x, dim, index, source, fname)
    return dim


def index_add(input, dim, index, source, *, alpha=1):  # noqa: A002
    """Out-of-place ``index_add``: ``copy.select(dim, index[i]) += alpha * source.select(dim, i)``; duplicate
    indices all add up (atomically on the device)."""
    dim = _index_args(input, dim, index, source, "index_add")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"index_add(): self ({input.dtype.name.capitalize()}) and source "
                           f"({source.dtype.name.capitalize()}) must have the same scalar type")
    return call(_index_add_op, input, dim, index, source, alpha)


def index_add_(self, dim, index, source, *, alpha=1):
    dim = _index_args(self, dim, index, source, "index_add_")
    if source.dtype is not self.dtype:
        raise RuntimeError(f"index_add_(): self ({self.dtype.name.capitalize()}) and source "
                           f"({source.dtype.name.capitalize()}) must have the same scalar type")
    r = _inplace(self, "index_add_", lambda s, sr: call(_index_add_op, s, dim, index, sr, alpha), source)
    if r is not None:
        return r
    _dim_put(self, dim, index, source * alpha if alpha != 1 else source, "add")
    self._storage.version += 1
    return self


def _index_copy_fwd(ctx, x, dim, index, source):
    if ctx is not None:
        ctx.save_for_backward(index)
        ctx.dim, ctx.sshape = dim, source._shape
    from ..views import _materialize
    return _dim_put(_materialize(x), dim, index, source, "assign")


def _index_copy_bwd(ctx, g):
    (index,) = ctx.saved_tensors
    gx = call(_index_fill_op, g, ctx.dim, index, 0.0)
    gs = call(_index_select_op, g, ctx.dim, index) if g.dim() else g.reshape(1)
    return gx, None, None, gs.reshape(ctx.sshape) if gs._shape != ctx.sshape else gs


_index_copy_op = register("index_copy", _index_copy_fwd, _index_copy_bwd)


def index_copy(input, dim, index, source):  # noqa: A002
    """Out-of-place ``index_copy``: ``copy.select(dim, index[i]) = source.select(dim, i)``."""
    dim = _index_args(input, dim, index, source, "index_copy")
    if source.dtype is not input.dtype:
        raise RuntimeError("index_copy_(): self and source expected to have the same dtype, but got (self) "
                           f"{input.dtype.name.capitalize()} and (source) {source.dtype.name.capitalize()}")
    return call(_index_copy_op, input, dim, index, source)


def index_copy_(self, dim, index, source):
    dim = _index_args(self, dim, index, source, "index_copy_")
    r = _inplace(self, "index_copy_", lambda s, sr: call(_index_copy_op, s, dim, index, sr), source)
    if r is not None:
        return r
    _dim_put(self, dim, index, source, "assign")
    self._storage.version += 1
    return self


def _index_fill_fwd(ctx, x, dim, index, value):
    if ctx is not None:
        ctx.save_for_backward(index)
        ctx.dim = dim
    from ..views import _materialize
    return _dim_put(_materialize(x), dim, index, value, "assign")


_index_fill_op = register("index_fill", _index_fill_fwd,
                          lambda ctx, g: (call(_index_fill_op, g, ctx.dim, ctx.saved_tensors[0], 0.0), None, None,
                                          None))


def _fill_value(value):
    if isinstance(value, Tensor):
        if value.dim() != 0:
            raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value.dim()} dimension(s).")
        return value.item()
    return value


def index_fill(input, dim, index, value):  # noqa: A002
    """Out-of-place ``index_fill``: the slices at ``index`` along ``dim`` set to ``value`` (a number or a 0-d
    tensor; a 0-d tensor that requires grad gets the sum of the gradient over the filled slices)."""
    dim = _index_args(input, dim, index, None, "index_fill")
    if isinstance(value, Tensor) and value.requires_grad and is_grad_enabled():
        _fill_value(value)                                   # the 0-d check
        from ..pointwise import where
        mask = call(_index_fill_op, Tensor._empty(input._shape, D.bool, input.device).fill_(False), dim, index,
                    True)
        return where(mask, value.to(input.dtype), input)
    return call(_index_fill_op, input, dim, index, _fill_value(value))


def index_fill_(self, dim, index, value):
    dim = _index_args(self, dim, index, None, "index_fill_")
    if isinstance(value, Tensor) and value.requires_grad and is_grad_enabled():
        return self.copy_(index_fill(self, dim, index, value))      # value's gradient needs the graph
    value = _fill_value(value)
    r = _inplace(self, "index_fill_", lambda s: call(_index_fill_op, s, dim, index, value))
    if r is not None:
        return r
    _dim_put(self, dim, index, value, "assign")
    self._storage.version += 1
    return self


for _n, _f in (("index_add", index_add), ("index_add_", index_add_), ("index_copy", index_copy),
               ("index_copy_", index_copy_), ("index_fill", index_fill), ("index_fill_", index_fill_)):
    method(_n, _f)
