"""Advanced indexing, gather/scatter and the other index ops, each registered once with its derivative.

Ops: ``x[adv]`` get and set (integer tensors, lists, bool masks, mixed with slices, None and Ellipsis),
``index_select``, ``gather``, ``scatter`` (tensor or value, ``reduce='add'|'multiply'``), ``scatter_add``,
``scatter_reduce`` (sum, prod, mean, amax, amin; ``include_self``), ``index_add``, ``index_copy``,
``index_fill``, ``index_put``/``index_put_`` (``accumulate``), ``masked_select``, ``masked_scatter``,
``nonzero``/``argwhere`` (``as_tuple``), ``take``, ``take_along_dim``, and ``embedding`` (its weight
gradient skips ``padding_idx``).

Result shapes follow PyTorch (and numpy): the index tensors broadcast together to shape B; when all
advanced dims are adjacent, B replaces them in place, otherwise B comes first. A bool mask over k dims is
replaced by its k ``nonzero`` coordinate vectors.

Kernels (``cl_kernels/index.cl.mako``): one gather/put kernel over an iteration space in which every
operand (output or values, the indexed tensor, each index tensor) has its own strides, so every op above
is a launch of it with different strides; accumulating puts use atomics (int32/int64 atomics, a
compare-and-swap loop for floats, max/min and products; 8- and 16-bit dtypes accumulate in a 32-bit
temporary). ``nonzero``, ``masked_select`` and ``masked_scatter`` are stream compactions: count per chunk,
scan the counts (``sortscan``), write. Their output size needs one small read, as in PyTorch.

Bounds: an out-of-range index raises IndexError naming the index, the dim and the size. On a device the
kernel never reads or writes out of bounds: the first work-item to meet a bad index records it in a
16-byte flag buffer, read once after the launch (one small synchronous read per launch).

cpu tensors: pure data movement (indexing get, assignment puts, index_select, gather, masked_select,
nonzero, take) runs in numpy with no OpenCL, so DataLoader workers can use it (DESIGN.md, decision 3);
accumulating ops run the kernels on the host's OpenCL device.
"""
import numpy as np

from .. import _dtype as D
from .._dispatch import call, register, is_grad_enabled
from .._storage import Storage
from .._tensor import Tensor
from ..backend import geometry
from ._util import method
from .elementwise import broadcast_shapes, _collapse, _bstrides

__all__ = ["index_select", "gather", "scatter", "scatter_add", "scatter_reduce", "index_add", "index_copy",
           "index_fill", "index_put", "masked_select", "masked_scatter", "nonzero", "argwhere", "take",
           "take_along_dim"]

_NP_OF = {"float": np.float32, "double": np.float64, "half": np.float16, "long": np.int64, "int": np.int32,
          "short": np.int16, "char": np.int8, "uchar": np.uint8, "ushort": np.uint16, "uint": np.uint32,
          "ulong": np.uint64}
_MOVE_T = {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong"}


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _is_host(*ts):
    return all(t._storage.host is not None for t in ts if isinstance(t, Tensor))


def _tensor_from_host(arr, device):
    """A new tensor owning a contiguous copy of a numpy array (no OpenCL for cpu)."""
    arr = np.asarray(arr)
    flat = np.array(arr.reshape(-1), copy=True)       # (np.ascontiguousarray would turn 0-d into 1-d)
    return Tensor._make(Storage.from_host(flat, device), arr.shape)


def _host(t):
    """numpy view of a cpu tensor's values (bool as np.bool_)."""
    return t._host_view()


def _wrap_dim(x, dim):
    n = x.dim()
    lo, hi = (-1, 0) if n == 0 else (-n, n - 1)
    if not isinstance(dim, int):
        dim = int(dim)
    if dim < lo or dim > hi:
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but got {dim})")
    return dim % n if n else 0


def _bounds_msg(v, dim, size):
    return f"index {v} is out of bounds for dimension {dim} with size {size}"


def _host_check(a, size, dim, neg):
    """Raise IndexError for the first out-of-range value of the numpy int array ``a``."""
    if a.size == 0:
        return
    lo = -size if neg else 0
    bad = (a < lo) | (a >= size)
    if bad.any():
        v = int(a.reshape(-1)[np.argmax(bad.reshape(-1))])
        raise IndexError(_bounds_msg(v, dim, size))


# ================================================================================================ kernels
_kernels = {}


def _local_size(rt):
    return rt.profile.get_value("index", "local_size", 64 if rt.info.is_gpu else 16)


def _bucket(r):
    """Ranks are padded up to 1, 2, 4 or 8 so that few programs serve every shape."""
    for b in (1, 2, 4, 8):
        if r <= b:
            return b
    return r


def _pad_rank(cshape, cstr):
    """Pad a collapsed (shape, strides list) with leading size-1 dims up to the rank bucket (at least 1)."""
    R = _bucket(max(len(cshape), 1))
    p = R - len(cshape)
    return (1,) * p + tuple(cshape), [(0,) * p + tuple(s) for s in cstr]


def _idx_kernel(rt, mode, dt_cl, floating, op, scalar, K, R):
    key = ("idx", rt.index, mode, dt_cl, floating, op, scalar, K, R)
    k = _kernels.get(key)
    if k is None:
        has_a = not (mode == "put" and scalar)
        argd = [None, np.int64] + ([None, np.int64] if has_a else [_NP_OF[dt_cl]])
        argd += [None, np.int64, np.int64, np.int64] * K
        argd += [np.int64] * (4 + R + R * ((1 if has_a else 0) + 1 + K))
        argd += [None]
        types = tuple(sorted({dt_cl, "long"}))
        k = rt.kernel("index.cl.mako", "idx", argd, kernel="idx", mode=mode, dt=dt_cl, floating=floating,
                      op=op, scalar=scalar, K=K, R=R, types=types, mt="", vt="", cmode="")
        _kernels[key] = k
    return k


def _err_buffer(device):
    e = Tensor._empty((4,), D.int32, device)
    st = e._storage
    if st.host is not None:
        st.host[:] = 0
    else:
        st._rt.fill(st.buf, np.int32(0), 0, 16)
    return e


def _check_err(err, bounds):
    """The deferred bounds check of one gather/put launch (see Runtime.defer_check). bounds: (size, dim) of each
    index tensor, for the message."""
    st = err._storage
    vals = st.host.copy() if st.host is not None else st.read(0, 4)
    if vals[0]:
        k = int(vals[1])
        v = int(np.array([vals[2], vals[3]], dtype=np.int32).view(np.int64)[0])
        size, dim = bounds[k]
        raise IndexError(_bounds_msg(v, dim, size))


def _trusted(t):
    """True for index tensors made by our own kernels (nonzero coordinates, sort/max indices), and not written
    since (the storage version is unchanged): their values are in range, so no bounds read-back is needed."""
    v = t.__dict__.get("_in_range")
    return v is not None and v == t._storage.version


def _mark_trusted(t):
    t.__dict__["_in_range"] = t._storage.version
    return t


_unchecked_err = {}


def _launch_idx(mode, data, it_shape, data_st, idxs, direct=None, direct_st=None, scalar=None, op="assign",
                neg=False, check=None):
    """Launch the gather/put kernel over ``it_shape``.

    mode "gather": ``direct[it] = data[data_st . it + sum_k idx_k[it] * dstride_k]``;
    mode "put": ``data[...] op= direct[it]`` (or the Python scalar ``scalar`` when direct is None).
    idxs: list of (int64 index tensor, its strides over it_shape, size of the indexed dim, stride of data
    along it, dim number for messages). Raises IndexError after the launch when an index is out of range.
    check: read the bounds flag back (one small synchronous read); by default unless every index tensor is
    trusted (made in range by our own kernels), so e.g. max/sort backward stays asynchronous.
    """
    if check is None:
        check = not all(_trusted(t) for (t, _, _, _, _) in idxs)
    n = _prod(it_shape)
    if n == 0:
        return
    rt = data._runtime()
    has_a = direct is not None
    strides = ([tuple(direct_st)] if has_a else []) + [tuple(data_st)] + [tuple(s) for (_, s, _, _, _) in idxs]
    cshape, cstr = _pad_rank(*_collapse(tuple(it_shape), strides))
    R = len(cshape)
    if mode == "gather" or op == "assign":
        dt_cl, floating = _MOVE_T[data.dtype.itemsize], False
    else:
        dt_cl, floating = data.dtype.cl, data.dtype.is_floating_point
    W = rt.profile.get_value("index", "inner", 1 if rt.info.is_gpu else 32)
    nl = cshape[-1]
    if nl < W:
        W = nl
    nitems = (n // nl) * ((nl + W - 1) // W)
    inner_ix = any(s[-1] != 0 for s in cstr[(2 if has_a else 1):])
    k = _idx_kernel(rt, mode, dt_cl, floating, op, not has_a, len(idxs), R)
    if check:
        err = _err_buffer(data.device)
    else:
        # never read; shared per device (a bounds hit would need a kernel bug)
        err = _unchecked_err.get(data.device)
        if err is None:
            err = _unchecked_err[data.device] = _err_buffer(data.device)
    args = [data._storage.cl_buffer(), data._offset]
    if has_a:
        args += [direct._storage.cl_buffer(), direct._offset]
    else:
        if op == "assign":
            v = np.array(scalar, dtype=data.dtype.np).view(_NP_OF[dt_cl])[()]
        else:
            v = _NP_OF[dt_cl](scalar)
        args.append(v)
    for (t, _, size, dstr, _) in idxs:
        args += [t._storage.cl_buffer(), t._offset, size, dstr]
    args += [nitems, W, int(neg), int(inner_ix)]
    args += list(cshape)
    for d in range(R):
        for s in cstr:
            args.append(s[d])
    args.append(err._storage.cl_buffer())
    gs, ls = geometry.nd(rt, nitems, _local_size(rt), k)
    rt.launch(k, gs, ls, *args)
    if check:
        bounds = [(size, dim) for (_, _, size, _, dim) in idxs]
        rt.defer_check(lambda: _check_err(err, bounds))
    if data._storage.host is not None or (direct is not None and direct._storage.host is not None):
        rt.finish_if_exposed()   # the bounds check stays deferred: it raises at the next synchronization


def _compact_kernel(rt, kernel, cmode, mt, vt, R):
    key = ("compact", rt.index, kernel, cmode, mt, vt, R)
    k = _kernels.get(key)
    if k is None:
        nops = 1 + (1 if cmode == "values" else 0) + (2 if cmode == "mscatter" else 0) if kernel == "compact" else 1
        argd = [None, np.int64]
        if kernel == "compact":
            argd += [None]
            if cmode == "coords":
                argd += [None, np.int64, np.int64]
            elif cmode == "values":
                argd += [None, np.int64, None]
            else:
                argd += [None, np.int64, None, np.int64, None, np.int64]
        else:
            argd += [None]
        argd += [np.int64, np.int64] + [np.int64] * (R + R * nops)
        types = tuple(sorted({mt, vt or mt, "long"}))
        k = rt.kernel("index.cl.mako", kernel, argd, kernel=kernel, cmode=cmode, mt=mt, vt=vt, R=R, types=types,
                      mode="", dt="", floating=False, op="", scalar=False, K=0)
        _kernels[key] = k
    return k


def _compact(cmode, mask, shape, vals=None, self_=None, src=None):
    """Stream compaction over the elements of ``mask`` (broadcast to ``shape``), in row-major order.

    cmode "coords": (count, ndim) int64 coordinates of the non-zero elements (nonzero);
    "values": the values of ``vals`` (broadcast to shape) where mask is non-zero (masked_select);
    "mscatter": a new tensor of ``shape``: mask ? next element of ``src`` : ``self_`` (masked_scatter).
    Reads the count back once (a small synchronous read).
    """
    from .sortscan import _scan
    dev = mask.device
    n = _prod(shape)
    rt = mask._runtime()
    gpu = rt.info.is_gpu
    L = rt.profile.get_value("index", "compact_chunk", 16 if gpu else 2048)
    nch = max(1, (n + L - 1) // L)
    mstr = _bstrides(mask, shape)
    if cmode == "coords":
        cshape, cstr = _pad_rank(tuple(shape), [tuple(mstr)])
        pad = len(cshape) - len(shape)
    else:
        ops = [tuple(mstr)]
        if cmode == "values":
            ops.append(tuple(_bstrides(vals, shape)))
        elif cmode == "mscatter":
            out = Tensor._empty(shape, self_.dtype, dev)
            ops += [tuple(_bstrides(self_, shape)), tuple(out._stride)]
        cshape, cstr = _pad_rank(*_collapse(tuple(shape), ops))
    R = len(cshape)
    mt = mask.dtype.cl
    counts = Tensor._empty((nch,), D.int64, dev)
    if n == 0:
        total = 0
    else:
        kc = _compact_kernel(rt, "cnt", "", mt, "", R)
        args = [mask._storage.cl_buffer(), mask._offset, counts._storage.cl_buffer(), n, L] + list(cshape)
        for d in range(R):
            args.append(cstr[0][d])
        rt.launch(kc, *geometry.nd(rt, nch, _local_size(rt), kc), *args)
        incl = _scan(counts, 0, "sum", D.int64, D.int64)
        total = int(incl._storage.read(nch - 1, 1)[0]) if incl._storage.host is None else \
            (rt.synchronize(), int(incl._storage.host[nch - 1]))[1]
    if cmode == "coords":
        res = Tensor._empty((total, len(shape)), D.int64, dev)
    elif cmode == "values":
        res = Tensor._empty((total,), vals.dtype, dev)
    else:
        if src.numel() < total:
            raise RuntimeError(f"masked_scatter: expected source to have at least as many elements as ones in "
                               f"mask, but got {src.numel()} elements and {total} ones")
        res = out
    if n == 0 or (total == 0 and cmode != "mscatter"):
        return res
    vt = "" if cmode == "coords" else _MOVE_T[res.dtype.itemsize]
    kk = _compact_kernel(rt, "compact", cmode, mt, vt, R)
    # exclusive prefix of the chunk counts: where each chunk starts writing
    from .pointwise import sub_raw
    excl = sub_raw(incl, counts)
    args = [mask._storage.cl_buffer(), mask._offset, excl._storage.cl_buffer()]
    if cmode == "coords":
        args += [res._storage.cl_buffer(), len(shape), pad]
    elif cmode == "values":
        args += [vals._storage.cl_buffer(), vals._offset, res._storage.cl_buffer()]
    else:
        args += [self_._storage.cl_buffer(), self_._offset, src._storage.cl_buffer(), src._offset,
                 res._storage.cl_buffer(), res._offset]
    args += [n, L] + list(cshape)
    for d in range(R):
        for s in cstr:
            args.append(s[d])
    rt.launch(kk, *geometry.nd(rt, nch, _local_size(rt), kk), *args)
    if res._storage.host is not None:
        rt.finish_if_exposed()
    return res


# ================================================================================================ helpers
def _check_index_dtype(t, what):
    if t.dtype.is_floating_point or t.dtype is D.bool:
        raise IndexError(f"{what}: tensors used as indices must be long, int, byte or bool tensors, got "
                         f"{t.dtype.name}")


def _long_on(t, device):
    """An int64 copy (or t itself) on ``device``."""
    if t.dtype is not D.int64:
        t = t.to(D.int64)
    if t.device != device:
        t = t.to(device)
    return t


def _as_tensor_index(i, device):
    if isinstance(i, Tensor):
        return i
    from .creation import tensor
    if isinstance(i, (list, tuple)) and len(i) == 0:
        return tensor([], dtype=D.int64)
    return tensor(i) if not isinstance(i, np.ndarray) else tensor(i)


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


# ================================================================================================ index (get)
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
    from .creation import zeros
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


# ================================================================================================ index_put
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
        from .views import _materialize, _copy_into
        tmp = _materialize(x, tdt)
        _put_raw(tmp, per, values.to(tdt) if vt else values, True)
        if x.dtype is D.bool:
            from .pointwise import ne
            tmp = ne(tmp, 0)
        _copy_into(x, tmp)
        return x
    if vt:
        if values.device != x.device:
            values = values.to(x.device)
        if values.dtype is not x.dtype:
            values = values.to(x.dtype)
    _launch_idx("put", x, out_shape, x_st, idxs, direct=values if vt else None,
                direct_st=_bstrides(values, out_shape) if vt else None, scalar=None if vt else values,
                op="add" if accumulate else "assign", neg=True)
    return x


def _acc_temp_dtype(dt):
    """The dtype a put accumulates in when ``dt`` has no native atomics (None when it has)."""
    if dt in (D.float32, D.float64, D.int32, D.int64):
        return None
    return D.float32 if dt.is_floating_point else D.int32


def _index_put_fwd(ctx, x, per, values, accumulate):
    if ctx is not None:
        ctx.per, ctx.accumulate = per, accumulate
        ctx.v_is_t = isinstance(values, Tensor)
    from .views import _materialize
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
    from .creation import tensor
    return tensor(values, dtype=x.dtype, device=x.device)


def _index_put_inplace(x, per, values, accumulate):
    from .pointwise import run_inplace
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


# ================================================================================================ dim-wise ops
def _dim_geometry(x, dim, index, it_shape, index_full):
    """x strides over ``it_shape`` (0 along dim) and the single index entry.

    index_full: the index tensor has one entry per element of it_shape (gather/scatter: its own strides);
    otherwise it is a 1-D vector along dim (index_select/index_add)."""
    nd = len(it_shape)
    x_st = [x._stride[d] if d != dim else 0 for d in range(x.dim())] if x.dim() else [0] * nd
    if index_full:
        ist = list(index._stride) if index.dim() else [0] * nd
    else:
        ist = [0] * nd
        if nd:
            ist[dim] = index._stride[0] if index.dim() else 0
    size = x._shape[dim] if x.dim() else 1
    dstr = x._stride[dim] if x.dim() else 0
    return x_st, [(index, ist, size, dstr, dim)]


def _check_int_index(index, fname, int32_ok=True, empty_ok=False):
    """index must be an int64 (or, with int32_ok, int32) tensor; with empty_ok an empty index of any dtype passes
    (gather/scatter's rule in PyTorch)."""
    if not isinstance(index, Tensor):
        raise TypeError(f"{fname}(): argument 'index' must be Tensor, not {type(index).__name__}")
    if empty_ok and index.numel() == 0:
        return
    if index.dtype is not D.int64 and not (int32_ok and index.dtype is D.int32):
        raise RuntimeError(f"{fname}(): Expected dtype int{'32/int' if int32_ok else ''}64 for index")


def _index_long(index, device):
    """index as int64 on ``device`` (gather/scatter accept int32 and empty indices of any dtype)."""
    if index.dtype is D.int64:
        return index
    if index.numel() == 0:
        return Tensor._empty(index._shape, D.int64, device)
    return _long_on(index, device)


def _same_device(x, *others):
    for o in others:
        if isinstance(o, Tensor) and o.device != x.device:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"{x.device} and {o.device}!")


# ------------------------------------------------------------------------------------------ index_select
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
    from .creation import zeros
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


# ------------------------------------------------------------------------------------------ gather
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
    from .creation import zeros
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


# ------------------------------------------------------------------------------------------ scatter family
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
    if isinstance(src, Tensor):
        s = src if src.dim() else src.reshape(1)
        if s.dtype is not out.dtype:
            s = s.to(out.dtype)
        _accumulate_put_dims(xs, it, x_st, idxs, s, s._stride, None, op)
    else:
        _accumulate_put_dims(xs, it, x_st, idxs, None, None, src, op)
    return out


def _accumulate_put_dims(x, it, x_st, idxs, values, vst, scalar, op):
    """A put whose data strides come from x's own dims (so a temporary can be re-strided)."""
    tdt = _acc_temp_dtype(x.dtype)
    if op == "assign" or tdt is None:
        if values is not None and values.dtype is not x.dtype:
            values = values.to(x.dtype)
        _launch_idx("put", x, it, x_st, idxs, direct=values, direct_st=vst, scalar=scalar, op=op)
        return
    from .views import _materialize, _copy_into
    tmp = _materialize(x, tdt)
    dim = idxs[0][4]
    t_st = [tmp._stride[d] if d != dim else 0 for d in range(tmp.dim())]
    (t, ist, size, _, _) = idxs[0]
    t_idxs = [(t, ist, size, tmp._stride[dim], dim)]
    if values is not None:
        values = values.to(tdt)
        vst = values._stride
    _launch_idx("put", tmp, it, t_st, t_idxs, direct=values, direct_st=vst, scalar=scalar, op=op)
    if x.dtype is D.bool:
        from .pointwise import ne
        tmp = ne(tmp, 0)
    _copy_into(x, tmp)


def _scatter_fwd(ctx, x, dim, index, src, reduce):
    if ctx is not None:
        ctx.save_for_backward(index)
        ctx.dim, ctx.reduce, ctx.src_is_t = dim, reduce, isinstance(src, Tensor)
    from .views import _materialize
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


def _inplace(self, fname, fn, *args):
    from .pointwise import run_inplace
    r = run_inplace(self, fname, lambda s, *a: fn(s, *a), *args)
    if r is not None:
        return r
    if self._overlaps():
        raise RuntimeError("unsupported operation: some elements of the input tensor and the written-to tensor "
                           "refer to a single memory location. Please clone() the tensor before performing the "
                           "operation.")
    return None


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
    from .views import _materialize
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


# ------------------------------------------------------------------------------------------ scatter_reduce
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
    from .views import _materialize
    out = _materialize(x)
    if not include_self:
        _scatter_put(out, dim, index, _identity(reduce, x.dtype), "assign")
    op = {"sum": "add", "mean": "add", "prod": "mul", "amax": "max", "amin": "min"}[reduce]
    _scatter_put(out, dim, index, src, op)
    if reduce == "mean":
        from .creation import full
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
    from .pointwise import where
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
    from .creation import zeros_like
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
    from .views import _copy_into
    _copy_into(self, out)
    self._storage.version += 1
    return self


method("scatter_reduce", lambda self, dim, index, src, reduce, *, include_self=True:
       scatter_reduce(self, dim, index, src, reduce, include_self=include_self))
method("scatter_reduce_", scatter_reduce_)


def _scatter_into_zeros_fwd(ctx, g, shape, dim, index):
    from .creation import zeros
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


# ------------------------------------------------------------------------------------------ index_add / copy / fill
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
    if isinstance(source, Tensor):
        s = source.reshape(shape) if source._shape != tuple(shape) else source
        if s.dtype is not out.dtype:
            s = s.to(out.dtype)
        _accumulate_put_dims(xs, shape, x_st, idxs, s, s._stride, None, op)
    else:
        _accumulate_put_dims(xs, shape, x_st, idxs, None, None, source, op)
    return out


def _index_add_fwd(ctx, x, dim, index, source, alpha):
    if ctx is not None:
        ctx.save_for_backward(index)
        ctx.dim, ctx.alpha, ctx.sshape = dim, alpha, source._shape
    from .views import _materialize
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
    from .views import _materialize
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
    from .views import _materialize
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
        from .pointwise import where
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


# ================================================================================================ masks
def _nonzero_raw(x):
    if x.dtype.is_complex:          # non-zero when either part is
        from .complex import real_view
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
            from .creation import zeros
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
    from .creation import zeros
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
        from .creation import zeros
        from .joins import cat
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
    from .views import _copy_into
    _copy_into(self, res)
    self._storage.version += 1
    return self


method("masked_select", lambda self, mask: masked_select(self, mask))
method("masked_scatter", masked_scatter)
method("masked_scatter_", masked_scatter_)


# ================================================================================================ take, embedding
def take(input, index):  # noqa: A002
    """Elements of input viewed as 1-D (row-major) at ``index`` (negative counts from the end); the result has
    index's shape."""
    _check_int_index(index, "take")
    _same_device(input, index)
    flat = input.reshape(-1)
    return call(_index_op, flat, [_long_on(index, input.device)])


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


method("take", take)
method("take_along_dim", lambda self, indices, dim=None: take_along_dim(self, indices, dim))


def _embedding_fwd(ctx, input, weight, padding_idx):
    flat = input.reshape(-1)
    out = _index_select_fwd(None, weight, 0, flat)
    if ctx is not None:
        ctx.save_for_backward(input)
        ctx.num, ctx.padding_idx = weight._shape[0], padding_idx
    return out.reshape(tuple(input._shape) + (weight._shape[1],))


def _embedding_bwd(ctx, g):
    (input,) = ctx.saved_tensors
    flat = input.reshape(-1)
    g2 = g.reshape(-1, g._shape[-1])
    if ctx.padding_idx is not None:
        g2 = g2.masked_fill((flat == ctx.padding_idx).unsqueeze(-1), 0)
    if ctx.num * flat._shape[0] <= _ONE_HOT_MAX:
        # a GEMM with the one-hot matrix sums each row's occurrences in a fixed order, so the gradient is the same
        # on every run; index_add's float atomics add repeated ids in whatever order the device runs them, and
        # AdamW turns those last-bit differences into visible ones in rarely-updated rows
        from .creation import arange
        from .linalg import matmul_nd
        onehot = (flat.unsqueeze(0) == arange(ctx.num, device=g.device).unsqueeze(1)).to(g.dtype)
        return None, matmul_nd(onehot, g2), None
    from .creation import zeros
    z = zeros((ctx.num, g._shape[-1]), dtype=g.dtype, device=g.device)
    return None, call(_index_add_op, z, 0, flat, g2, 1), None


_ONE_HOT_MAX = 1 << 22   # elements of the (num_embeddings, tokens) one-hot matrix above which index_add is used


_embedding_op = register("embedding", _embedding_fwd, _embedding_bwd)


def embedding(input, weight, padding_idx=None):  # noqa: A002
    """Rows of the 2-D ``weight`` at the integer ``input``: shape ``input.shape + (embedding_dim,)``. The weight
    gradient accumulates every occurrence (index_add) and skips rows equal to ``padding_idx`` (negative counts
    from the end). Out-of-range indices raise IndexError."""
    if not isinstance(input, Tensor) or input.dtype not in (D.int64, D.int32):
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           f"Long, Int; but got {getattr(input, 'dtype', type(input))} instead (while checking "
                           "arguments for embedding)")
    if weight.dim() != 2:
        raise RuntimeError(f"'weight' must be 2-D, got {weight.dim()}-D")
    _same_device(weight, input)
    if padding_idx is not None:
        n = weight._shape[0]
        if padding_idx < -n or padding_idx >= n:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx %= n
    return call(_embedding_op, input, weight, padding_idx)
