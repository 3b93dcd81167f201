"""The index kernels' launches (``cl_kernels/index.cl.mako``): the one gather/put kernel over an iteration space in
which every operand has its own strides (:func:`_launch_idx`) with its deferred bounds check, puts that accumulate
in a 32-bit temporary where a dtype has no atomics (:func:`_accumulate_put_dims`), and the stream compaction (count
per chunk, scan, write) behind nonzero, masked_select and masked_scatter (:func:`_compact`)."""
import numpy as np

from ... import _dtype as D
from ..._tensor import Tensor
from ...backend import geometry
from ..elementwise import _bstrides, _collapse
from .common import _bounds_msg, _prod


_NP_OF = {"float": np.float32, "double": np.float64, "half": np.float16, "long": np.int64, "int": np.int32,
          "short": np.int16, "char": np.int8, "uchar": np.uint8, "ushort": np.uint16, "uint": np.uint32,
          "ulong": np.uint64}
_MOVE_T = {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong"}


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


def _acc_temp_dtype(dt):
    """The dtype a put accumulates in when ``dt`` has no native atomics (None when it has)."""
    if dt in (D.float32, D.float64, D.int32, D.int64):
        return None
    return D.float32 if dt.is_floating_point else D.int32


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


def _ordered(x, op):
    """Whether a put into x with op must accumulate in a fixed order: deterministic mode, and a float sum or
    product (atomic float updates land in whatever order the device runs them; integer sums and max/min give
    the same result in any order)."""
    from ..._deterministic import are_deterministic_algorithms_enabled
    return op in ("add", "mul") and x.dtype.is_floating_point and are_deterministic_algorithms_enabled()


def _ordered_kernel(rt, dt_cl, op):
    key = ("ordered", rt.index, dt_cl, op)
    k = _kernels.get(key)
    if k is None:
        argd = [None, None, np.int64, None, np.int64, None, np.int64, np.int64]
        k = rt.kernel("index.cl.mako", "ordered", argd, kernel="ordered", dt=dt_cl, op=op,
                      types=tuple(sorted({dt_cl, "long"})), mode="", floating=True, scalar=False, K=0, R=0,
                      mt="", vt="", cmode="")
        _kernels[key] = k
    return k


def _put(x, it, x_st, idxs, values, vst, scalar, op, neg=False):
    """The put of :func:`_launch_idx` (``data[...] op= values``, or ``scalar``); in deterministic mode a float sum or
    product folds in a fixed order instead (:func:`_put_ordered`)."""
    if _ordered(x, op):
        _put_ordered(x, it, x_st, idxs, values, vst, scalar, op, neg)
    else:
        _launch_idx("put", x, it, x_st, idxs, direct=values, direct_st=vst, scalar=scalar, op=op, neg=neg)


def _put_ordered(x, it, x_st, idxs, values, vst, scalar, op, neg=False):
    """``data[...] op= values`` like the put of :func:`_launch_idx`, but each destination element folds its
    source elements in their row-major order over ``it`` (torch's CPU loop order), the same bits on any device:
    a gather of destination offsets (through the same index geometry, so bad indices raise the same IndexError),
    a stable sort of those offsets, then one work-item per run of equal offsets (``index.cl.mako``, "ordered")."""
    from ..creation import arange, full
    from ..sortscan import sort
    n = _prod(it)
    if n == 0:
        return
    reach = x._offset + sum((s - 1) * abs(st) for s, st in zip(x._shape, x._stride)) + 1
    offs = arange(reach, dtype=D.int64, device=x.device).as_strided(x._shape, x._stride, x._offset)
    keys = Tensor._empty(tuple(it), D.int64, x.device)
    _launch_idx("gather", offs, it, x_st, idxs, direct=keys, direct_st=_bstrides(keys, it), neg=neg)
    if values is None:
        vals = full((n,), scalar, dtype=x.dtype, device=x.device)
    else:
        vals = values.as_strided(tuple(it), tuple(vst), values._offset).contiguous().reshape(n)
    skeys, perm = sort(keys.reshape(n))
    rt = x._runtime()
    k = _ordered_kernel(rt, x.dtype.cl, op)
    gs, ls = geometry.nd(rt, n, _local_size(rt), k)
    rt.launch(k, gs, ls, x._storage.cl_buffer(), skeys._storage.cl_buffer(), skeys._offset,
              perm._storage.cl_buffer(), perm._offset, vals._storage.cl_buffer(), vals._offset, n)
    if x._storage.host is not None:
        rt.finish_if_exposed()


def _accumulate_put_dims(x, it, x_st, idxs, src, op):
    """A put whose data strides come from x's own dims (so a temporary can be re-strided); ``src`` is a tensor (cast
    to x's dtype, read through its own strides over ``it``) or a Python scalar. In deterministic mode a float sum
    or product accumulates in source order (:func:`_put`)."""
    values = vst = scalar = None
    if isinstance(src, Tensor):
        values = src if src.dtype is x.dtype else src.to(x.dtype)
        vst = values._stride
    else:
        scalar = src
    tdt = _acc_temp_dtype(x.dtype)
    if op == "assign" or tdt is None:
        _put(x, it, x_st, idxs, values, vst, scalar, op)
        return
    from ..views import _materialize, _copy_into
    tmp = _materialize(x, tdt)
    dim = idxs[0][4]
    t_st = [tmp._stride[d] if d != dim else 0 for d in range(tmp.dim())]
    (t, ist, size, _, _) = idxs[0]
    t_idxs = [(t, ist, size, tmp._stride[dim], dim)]
    if values is not None:
        values = values.to(tdt)
        vst = values._stride
    _put(tmp, it, t_st, t_idxs, values, vst, scalar, op)
    if x.dtype is D.bool:
        from ..pointwise import ne
        tmp = ne(tmp, 0)
    _copy_into(x, tmp)


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
    from ..sortscan import _scan
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
    from ..pointwise import sub_raw
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
