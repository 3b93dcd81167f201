"""Advanced indexing: ``x[adv]`` get and set (integer tensors, lists, bool masks, mixed with slices, None and
Ellipsis; PyTorch's result shapes), ``index_put``/``index_put_`` and ``take``, each registered with its
derivative."""
import numpy as np

from ... import _dtype as D
from ..._dispatch import call, register
from ..._tensor import Tensor
from .._util import method
from ..elementwise import broadcast_shapes, _bstrides
from .common import (_as_tensor_index, _check_index_dtype, _check_int_index, _host, _host_check, _is_host, _long_on,
                     _same_device, _tensor_from_host)
from .launch import _acc_temp_dtype, _launch_idx, _mark_trusted, _put
from .masked import _masked_select_op, _nonzero_raw


def _nonzero_tuple(m):
    """Coordinates of the true elements of a bool tensor, one int64 1-D tensor per dim."""
    if m.dim() == 0:
        m = m.reshape(1)
    nz = _nonzero_raw(m)
    return [_mark_trusted(nz[:, j] if nz._shape[0] else Tensor._make(nz._storage, (0,), (1,), 0))
            for j in range(m.dim())]


def _expand_adv(x, adv):
    """``adv``: (dim in x, index) pairs (integer tensors, or bool/uint8 masks covering dims from dim).
    Returns a list with one entry per dim of x: None, or an int64 tensor on x's device."""
    per = [None] * x.dim()
    for d, t in adv:
        if not isinstance(t, Tensor):
            t = _as_tensor_index(t, x.device)
        if t.device != x.device:
            if t.device.type != "cpu":
                raise RuntimeError(f"indices should be either on cpu or on the same device as the indexed tensor "
                                   f"({x.device})")
            t = t.to(x.device)
        if t.dtype is D.bool or t.dtype is D.uint8:
            m = t if t.dtype is D.bool else (t != 0)
            k = max(m.dim(), 1)
            for j in range(k):
                if x._shape[d + j] != (m._shape[j] if m.dim() else 1):
                    raise IndexError(f"The shape of the mask {list(m._shape)} at index {j} does not match the shape "
                                     f"of the indexed tensor {list(x._shape)} at index {d + j}")
            for j, c in enumerate(_nonzero_tuple(m)):
                per[d + j] = c
        else:
            _check_index_dtype(t, "index")
            per[d] = _long_on(t, x.device)
    return per


def _adv_geometry(x, per):
    """PyTorch's result geometry of ``x[per]``: (out shape, x strides over it, index list for the kernel)."""
    P = [d for d in range(len(per)) if per[d] is not None]
    try:
        bshape = broadcast_shapes(*[per[d]._shape for d in P])
    except RuntimeError:
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together with shapes " +
                         ", ".join(str(list(per[d]._shape)) for d in P)) from None
    nb = len(bshape)
    rest = [d for d in range(x.dim()) if d >= len(per) or per[d] is None]
    adjacent = P == list(range(P[0], P[-1] + 1))
    if adjacent:
        before = [d for d in rest if d < P[0]]
        after = [d for d in rest if d > P[-1]]
        out_shape = [x._shape[d] for d in before] + list(bshape) + [x._shape[d] for d in after]
        x_st = [x._stride[d] for d in before] + [0] * nb + [x._stride[d] for d in after]
        boff = len(before)
    else:
        out_shape = list(bshape) + [x._shape[d] for d in rest]
        x_st = [0] * nb + [x._stride[d] for d in rest]
        boff = 0
    idxs = []
    for d in P:
        t = per[d]
        st = [0] * len(out_shape)
        st[boff:boff + nb] = _bstrides(t, bshape)
        idxs.append((t, st, x._shape[d], x._stride[d], d))
    return tuple(out_shape), x_st, idxs


def _np_tuple(per):
    return tuple(slice(None) if t is None else _host(t) for t in per)


def _index_raw(x, per):
    out_shape, x_st, idxs = _adv_geometry(x, per)
    if _is_host(x, *[t for t in per if t is not None]):
        for (t, _, size, _, d) in idxs:
            _host_check(_host(t), size, d, True)
        r = _host(x)[_np_tuple(per)]
        return _tensor_from_host(np.asarray(r).reshape(out_shape), x.device)
    out = Tensor._empty(out_shape, x.dtype, x.device)
    _launch_idx("gather", x, out_shape, x_st, idxs, direct=out, direct_st=out._stride, neg=True)
    return out


def _index_fwd(ctx, x, per):
    if ctx is not None:
        ctx.shape, ctx.per = x._shape, per
        ctx.dtype, ctx.device = x.dtype, x.device
    return _index_raw(x, per)


def _index_bwd(ctx, g):
    from ..creation import zeros
    z = zeros(ctx.shape, dtype=g.dtype, device=g.device)
    return call(_index_put_op, z, ctx.per, g, True), None


_index_op = register("index", _index_fwd, _index_bwd)


def advanced_getitem(view, adv):
    """``view[adv]`` for ``Tensor.__getitem__``: adv is a list of (dim in view, index tensor or mask)."""
    if len(adv) == 1:
        d, m = adv[0]
        if isinstance(m, Tensor) and m.dtype in (D.bool, D.uint8) and d == 0 and m.dim() == view.dim() \
                and m.dim() > 0 and m._shape == view._shape and (m.device == view.device or m.device.type == "cpu"):
            # a mask over every dim: one stream compaction (masked_select), no coordinates
            m = m if m.dtype is D.bool else (m != 0)
            return call(_masked_select_op, view, m.to(view.device) if m.device != view.device else m)
    per = _expand_adv(view, adv)
    return call(_index_op, view, per)


def _put_raw(x, per, values, accumulate):
    """In place: ``x[per] = values`` (or ``+=`` with accumulate). values: tensor of x's dtype or a scalar."""
    out_shape, x_st, idxs = _adv_geometry(x, per)
    vt = isinstance(values, Tensor)
    if vt:
        try:
            bs = broadcast_shapes(values._shape, out_shape)
        except RuntimeError:
            bs = None
        if bs != tuple(out_shape):
            raise RuntimeError(f"shape mismatch: value tensor of shape {list(values._shape)} cannot be broadcast to "
                               f"indexing result of shape {list(out_shape)}")
    if not accumulate and _is_host(x, values, *[t for t in per if t is not None]):
        for (t, _, size, _, d) in idxs:
            _host_check(_host(t), size, d, True)
        x._storage.host_sync()
        xv = _host(x)
        xv[_np_tuple(per)] = _host(values) if vt else values
        return x
    tdt = _acc_temp_dtype(x.dtype) if accumulate else None
    if tdt is not None:
        # no native atomics for this dtype: accumulate in a 32-bit temporary, then cast back
        from ..views import _materialize, _copy_into
        tmp = _materialize(x, tdt)
        _put_raw(tmp, per, values.to(tdt) if vt else values, True)
        if x.dtype is D.bool:
            from ..pointwise import ne
            tmp = ne(tmp, 0)
        _copy_into(x, tmp)
        return x
    if vt:
        if values.device != x.device:
            values = values.to(x.device)
        if values.dtype is not x.dtype:
            values = values.to(x.dtype)
    _put(x, out_shape, x_st, idxs, values if vt else None, _bstrides(values, out_shape) if vt else None,
         None if vt else values, "add" if accumulate else "assign", neg=True)
    return x


def _index_put_fwd(ctx, x, per, values, accumulate):
    if ctx is not None:
        ctx.per, ctx.accumulate = per, accumulate
        ctx.v_is_t = isinstance(values, Tensor)
    from ..views import _materialize
    out = _materialize(x)
    return _put_raw(out, per, values, accumulate)


def _index_put_bwd(ctx, g):
    gx = g if ctx.accumulate else call(_index_put_op, g, ctx.per, 0.0, False)
    gv = call(_index_op, g, ctx.per) if ctx.v_is_t else None
    return gx, None, gv, None


_index_put_op = register("index_put", _index_put_fwd, _index_put_bwd)


def _prep_values(x, values, cast):
    if isinstance(values, Tensor):
        if values.device != x.device:
            if values.dim() == 0:
                values = values.to(x.device)
            else:
                raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two "
                                   f"devices, {x.device} and {values.device}!")
        if values.dtype is not x.dtype:
            if not cast:
                raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                                   f"{x.dtype.name.capitalize()} for the destination and "
                                   f"{values.dtype.name.capitalize()} for the source.")
            values = values.to(x.dtype)
        return values
    if isinstance(values, (bool, int, float, np.generic)):
        return values.item() if isinstance(values, np.generic) else values
    from ..creation import tensor
    return tensor(values, dtype=x.dtype, device=x.device)


def _index_put_inplace(x, per, values, accumulate):
    from ..pointwise import run_inplace
    r = run_inplace(x, "index_put_", lambda s, v: call(_index_put_op, s, per, v, accumulate), values)
    if r is not None:
        return r
    if x._overlaps():
        raise RuntimeError("unsupported operation: some elements of the input tensor and the written-to tensor "
                           "refer to a single memory location. Please clone() the tensor before performing the "
                           "operation.")
    _put_raw(x, per, values, accumulate)
    x._storage.version += 1
    return x


def advanced_setitem(base, view, adv, value):
    """``base[...] = value`` where the index had advanced parts: ``view`` is base after the basic part,
    ``adv`` the (dim in view, index) pairs. The value is cast to the tensor's dtype, as PyTorch's setitem does."""
    per = _expand_adv(view, adv)
    value = _prep_values(view, value, cast=True)
    _index_put_inplace(view, per, value, False)


def _indices_tuple(x, indices):
    if isinstance(indices, Tensor):
        indices = (indices,)
    adv = []
    for d, t in enumerate(indices):
        if t is None:
            continue
        adv.append((d, t))
    d_used = sum(max(t.dim(), 1) if isinstance(t, Tensor) and t.dtype in (D.bool, D.uint8) else 1
                 for t in indices if t is not None) + sum(1 for t in indices if t is None)
    if d_used > x.dim():
        raise IndexError(f"too many indices for tensor of dimension {x.dim()} (got {d_used})")
    # positions shift past masks that cover several dims
    out, d = [], 0
    for t in indices:
        if t is None:
            d += 1
            continue
        out.append((d, t))
        d += max(t.dim(), 1) if isinstance(t, Tensor) and t.dtype in (D.bool, D.uint8) else 1
    return _expand_adv(x, out)


def index_put(input, indices, values, accumulate=False):  # noqa: A002
    """Out-of-place ``index_put``: a copy of input with ``copy[indices] = values`` (``+=`` when accumulate;
    duplicate indices then all add up). indices: a tuple of integer tensors or bool masks, one per leading dim
    (None skips a dim). values must have input's dtype and broadcast to the indexing result."""
    per = _indices_tuple(input, indices)
    values = _prep_values(input, values, cast=False)
    return call(_index_put_op, input, per, values, bool(accumulate))


def index_put_(self, indices, values, accumulate=False):
    """In-place ``index_put``; returns self."""
    per = _indices_tuple(self, indices)
    values = _prep_values(self, values, cast=False)
    return _index_put_inplace(self, per, values, bool(accumulate))


method("index_put", index_put)
method("index_put_", index_put_)


def take(input, index):  # noqa: A002
    """Elements of input viewed as 1-D (row-major) at ``index`` (negative counts from the end); the result has
    index's shape."""
    _check_int_index(index, "take")
    _same_device(input, index)
    flat = input.reshape(-1)
    return call(_index_op, flat, [_long_on(index, input.device)])


method("take", take)
