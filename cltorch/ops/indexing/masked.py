"""Stream compactions: ``nonzero``/``argwhere``, ``masked_select`` and ``masked_scatter`` (their output size needs
one small read of the count), each registered with its derivative."""
import numpy as np

from ... import _dtype as D
from ..._dispatch import call, register
from ..._tensor import Tensor
from .._util import method
from ..elementwise import broadcast_shapes
from .common import _host, _inplace, _is_host, _same_device, _tensor_from_host
from .launch import _compact


def _nonzero_raw(x):
    if x.dtype.is_complex:          # non-zero when either part is
        from ..complex import real_view
        x = (real_view(x) != 0).any(-1)
    if _is_host(x):
        a = _host(x)
        if x.dim() == 0:
            return _tensor_from_host(np.zeros((1 if a.item() != 0 else 0, 0), np.int64), x.device)
        return _tensor_from_host(np.argwhere(a != 0).astype(np.int64).reshape(-1, x.dim()), x.device)
    return _compact("coords", x, x._shape)


def _resize_copy(out, r):
    """Write r into ``out``; an ``out`` of another shape takes r's shape (PyTorch resizes outputs)."""
    if out._shape != r._shape:
        if out.numel() != r.numel():
            raise RuntimeError(f"out= tensor of shape {list(out._shape)} cannot hold a result of shape "
                               f"{list(r._shape)}: cltorch does not resize out= tensors")
        out.data = out.reshape(r._shape)
    return out.copy_(r)


def nonzero(input, *, out=None, as_tuple=False):  # noqa: A002
    """Indices of the non-zero elements, in row-major order: a (count, ndim) int64 tensor, or with
    ``as_tuple=True`` one 1-D int64 tensor per dim (a 0-d input gives one tensor, as in PyTorch).
    The count needs one small read from the device."""
    nz = _nonzero_raw(input)
    if as_tuple:
        if input.dim() == 0:
            n = nz._shape[0]
            from ..creation import zeros
            return (zeros((n,), dtype=D.int64, device=input.device),)
        return tuple(nz[:, j] if nz._shape[0] else Tensor._make(nz._storage, (0,), (1,), 0)
                     for j in range(input.dim()))
    return nz if out is None else _resize_copy(out, nz)


def argwhere(input):  # noqa: A002
    """``nonzero(input)``: a (count, ndim) int64 tensor."""
    return nonzero(input)


method("nonzero", lambda self, *, as_tuple=False: nonzero(self, as_tuple=as_tuple))
method("argwhere", argwhere)


def _check_mask(mask, fname):
    if not isinstance(mask, Tensor):
        raise TypeError(f"{fname}(): argument 'mask' must be Tensor, not {type(mask).__name__}")
    if mask.dtype is not D.bool and mask.dtype is not D.uint8:
        raise RuntimeError(f"{fname}: expected BoolTensor for mask")


def _masked_select_fwd(ctx, x, mask):
    shape = broadcast_shapes(x._shape, mask._shape)
    if ctx is not None:
        ctx.save_for_backward(mask)
        ctx.shape = shape
    if _is_host(x, mask):
        a = np.broadcast_to(_host(x), shape)
        m = np.broadcast_to(_host(mask) != 0, shape)
        return _tensor_from_host(a[m], x.device)
    return _compact("values", mask, shape, vals=x)


def _masked_select_bwd(ctx, g):
    (mask,) = ctx.saved_tensors
    from ..creation import zeros
    z = zeros(ctx.shape, dtype=g.dtype, device=g.device)
    return call(_masked_scatter_op, z, mask, g), None


_masked_select_op = register("masked_select", _masked_select_fwd, _masked_select_bwd)


def masked_select(input, mask, *, out=None):  # noqa: A002
    """The elements of input where the bool ``mask`` is True (both broadcast), as a 1-D tensor in row-major
    order. Needs one small read of the count."""
    _check_mask(mask, "masked_select")
    _same_device(input, mask)
    r = call(_masked_select_op, input, mask)
    return r if out is None else _resize_copy(out, r)


def _masked_scatter_raw(x, mask, source):
    shape = x._shape
    src = source if source.is_contiguous() else source.contiguous()
    if src.dtype is not x.dtype:
        src = src.to(x.dtype)
    if _is_host(x, mask, src):
        a = np.array(_host(x), copy=True)
        m = np.broadcast_to(_host(mask) != 0, shape)
        k = int(m.sum())
        if src.numel() < k:
            raise RuntimeError(f"masked_scatter: expected source to have at least as many elements as ones in "
                               f"mask, but got {src.numel()} elements and {k} ones")
        a[m] = _host(src).reshape(-1)[:k]
        return _tensor_from_host(a, x.device)
    return _compact("mscatter", mask, shape, self_=x, src=src)


def _masked_scatter_fwd(ctx, x, mask, source):
    if ctx is not None:
        ctx.save_for_backward(mask)
        ctx.sshape, ctx.snumel = source._shape, source.numel()
    return _masked_scatter_raw(x, mask, source)


def _masked_scatter_bwd(ctx, g):
    (mask,) = ctx.saved_tensors
    gx = g.masked_fill(mask, 0)
    sel = call(_masked_select_op, g, mask)
    k = sel._shape[0]
    if k < ctx.snumel:
        from ..creation import zeros
        from ..joins import cat
        sel = cat([sel, zeros((ctx.snumel - k,), dtype=g.dtype, device=g.device)])
    return gx, None, sel.reshape(ctx.sshape)


_masked_scatter_op = register("masked_scatter", _masked_scatter_fwd, _masked_scatter_bwd)


def masked_scatter(input, mask, source):  # noqa: A002
    """A copy of input whose elements where ``mask`` (bool, broadcast to input's shape) is True are replaced,
    in row-major order, by consecutive elements of ``source``."""
    _check_mask(mask, "masked_scatter")
    _same_device(input, mask, source)
    bs = broadcast_shapes(input._shape, mask._shape)
    if bs != input._shape:
        input = input.expand(*bs)
    return call(_masked_scatter_op, input, mask, source)


def masked_scatter_(self, mask, source):
    _check_mask(mask, "masked_scatter_")
    _same_device(self, mask, source)
    if broadcast_shapes(self._shape, mask._shape) != self._shape:
        raise RuntimeError(f"masked_scatter_: the mask of shape {list(mask._shape)} must be broadcastable to self "
                           f"of shape {list(self._shape)}")
    r = _inplace(self, "masked_scatter_", lambda s, sr: call(_masked_scatter_op, s, mask, sr), source)
    if r is not None:
        return r
    res = _masked_scatter_raw(self, mask, source)
    from ..views import _copy_into
    _copy_into(self, res)
    self._storage.version += 1
    return self


method("masked_select", lambda self, mask: masked_select(self, mask))
method("masked_scatter", masked_scatter)
method("masked_scatter_", masked_scatter_)
