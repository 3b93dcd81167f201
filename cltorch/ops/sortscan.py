"""Sort and scan ops, each registered once with its derivative.

Sort (``cl_kernels/sort.cl.mako``): a stable merge sort along any dim, any length. Each work-item
insertion-sorts a short chunk in private memory, then log2(n / chunk) merge passes follow, in which each
work-item finds its place on the merge path by binary search and merges a short tile sequentially. No
barriers or local memory: on PoCL per-work-item sequential code is what runs fast (POCL-NOTES.md), and on
GPUs every pass is still fully parallel. Being stable, it serves ``sort(stable=True)``, ``argsort``,
``topk`` (ties keep distinct indices, lower index first), ``kthvalue``, ``median``/``nanmedian``, ``msort``
and ``unique``. NaN sorts as the largest value, as in PyTorch.

Scan (``cl_kernels/scan.cl.mako``): inclusive scans along any dim. When there are enough rows, each
work-item scans a whole row; otherwise rows split into chunks: reduce each chunk, scan the chunk totals
(recursively), rescan each chunk from its carry. ``cumsum``/``cumprod`` of bool and integer tensors give
int64 (float16 accumulates in float32); ``cummax``/``cummin`` return (values, indices) with PyTorch's rule
that ties and NaNs take the latest index. A reversed scan (cumsum's backward) is a scan of a view with a
negative stride, never a flip copy.

Chunk and tile sizes come from the device profile (``[sort]`` chunk, tile, local_size; ``[scan]`` chunk,
parallel, local_size), with defaults by device class.
"""
import collections

import numpy as np

from .. import _dtype as D
from .._dispatch import call, register
from .._tensor import Tensor, contiguous_strides
from ..backend import geometry
from ._util import method
from .elementwise import _collapse

__all__ = ["sort", "argsort", "msort", "topk", "kthvalue", "median", "nanmedian", "cumsum", "cumprod", "cummax",
           "cummin", "unique", "unique_consecutive"]

return_types_sort = collections.namedtuple("sort", ["values", "indices"])
return_types_topk = collections.namedtuple("topk", ["values", "indices"])
return_types_kthvalue = collections.namedtuple("kthvalue", ["values", "indices"])
return_types_median = collections.namedtuple("median", ["values", "indices"])
return_types_nanmedian = collections.namedtuple("nanmedian", ["values", "indices"])
return_types_cummax = collections.namedtuple("cummax", ["values", "indices"])
return_types_cummin = collections.namedtuple("cummin", ["values", "indices"])


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _no_complex(x, op):
    """NotImplementedError for a complex ``x``: the sort and scan kernels order or multiply real elements only
    (and complex numbers have no order)."""
    if x.dtype.is_complex:
        raise NotImplementedError(f"{op}: {x.dtype.name} is not supported")


def _wrap(x, dim):
    n = x.dim()
    lo, hi = (-1, 0) if n == 0 else (-n, n - 1)
    dim = int(dim)
    if dim < lo or dim > hi:
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but got {dim})")
    return dim % n if n else 0


def _reversed_view(t, dim):
    """A view of t walking ``dim`` backwards (a negative stride; internal use by kernels only)."""
    st = list(t._stride)
    off = t._offset + (t._shape[dim] - 1) * st[dim] if t._shape[dim] else t._offset
    st[dim] = -st[dim]
    return Tensor._make(t._storage, t._shape, tuple(st), off)


_kernels = {}


# ================================================================================================ scan
def _scan_kernel(rt, in_t, acc_t, out_t, op, arg, arg_in, RK, floating):
    key = ("scan", rt.index, in_t, acc_t, out_t, op, arg, arg_in, RK, floating)
    k = _kernels.get(key)
    if k is None:
        argd = [None, np.int64] + ([None, np.int64] if arg_in else []) + [None, np.int64] + \
            ([None, np.int64] if arg else []) + [None] + ([None] if arg else [])
        argd += [np.int64] * (8 + (1 if arg else 0) + (1 if arg_in else 0))
        argd += [np.int64] * ((3 + (1 if arg else 0) + (1 if arg_in else 0)) * RK)
        types = tuple(sorted({in_t, acc_t, out_t, "long"}))
        k = rt.kernel("scan.cl.mako", "scan", argd, in_t=in_t, acc_t=acc_t, out_t=out_t, op=op, arg=arg,
                      arg_in=arg_in, RK=RK, floating=floating, types=types)
        _kernels[key] = k
    return k


def _scan_params(rt):
    gpu = rt.info.is_gpu
    p = rt.profile
    return (p.get_value("scan", "local_size", 64 if gpu else 8),
            p.get_value("scan", "chunk", 256 if gpu else 4096),
            p.get_value("scan", "parallel", 16384 if gpu else 64 * rt.info.compute_units))


def _scan(x, dim, op, acc_dtype, out_dtype, arg=False, iin=None, out=None, iout=None):
    """Inclusive scan of ``x`` along ``dim`` (x may have any strides, negative too).

    op: "sum" | "prod" | "max" | "min" (the last two with arg=True give indices, PyTorch's cummax rule).
    iin: with arg, the indices of x's elements (else their positions). out/iout: tensors to write (any
    strides); new contiguous ones by default. Returns out, or (out, iout) with arg.
    """
    _no_complex(x, f"cum{op}")
    from .indexing.launch import _pad_rank
    shape = x._shape
    dev = x.device
    if out is None:
        out = Tensor._empty(shape, out_dtype, dev)
    if arg and iout is None:
        iout = Tensor._empty(shape, D.int64, dev)
    numel = _prod(shape)
    if numel == 0:
        return (out, iout) if arg else out
    res = (out, iout) if arg else out
    if not shape:
        x, out = x.reshape(1), out._view((1,), (1,), out._offset)
        if arg:
            iout = iout._view((1,), (1,), iout._offset)
            iin = iin.reshape(1) if iin is not None else None
        dim = 0
        shape = (1,)
    n = shape[dim]
    rows = numel // n
    kept = [d for d in range(len(shape)) if d != dim]
    kshape = tuple(shape[d] for d in kept)
    rt = x._runtime()
    ls, chunk, par = _scan_params(rt)
    floating = x.dtype.is_floating_point
    in_t, acc_t, out_t = x.dtype.cl, acc_dtype.cl, out_dtype.cl
    arg_in = iin is not None

    def kst(t):
        return tuple(t._stride[d] for d in kept)

    if rows >= par or n < 2 * chunk:
        L, nch = n, 1
    else:
        nch = min((par + rows - 1) // rows, (n + chunk - 1) // chunk)
        L = (n + nch - 1) // nch
        nch = (n + L - 1) // L
    ops = [kst(x), kst(out)] + ([kst(iout)] if arg else []) + ([kst(iin)] if arg_in else [])
    ck, cs = _pad_rank(*_collapse(kshape, ops))
    RK = len(ck)
    k = _scan_kernel(rt, in_t, acc_t, out_t, op, arg, arg_in, RK, floating)

    def launch(phase, part, ipart):
        args = [x._storage.cl_buffer(), x._offset]
        if arg_in:
            args += [iin._storage.cl_buffer(), iin._offset]
        args += [out._storage.cl_buffer(), out._offset]
        if arg:
            args += [iout._storage.cl_buffer(), iout._offset]
        args += [part._storage.cl_buffer()] + ([ipart._storage.cl_buffer()] if arg else [])
        args += [phase, int(nch > 1), rows, n, L, nch, x._stride[dim], out._stride[dim]]
        if arg:
            args.append(iout._stride[dim])
        if arg_in:
            args.append(iin._stride[dim])
        for d in range(RK):
            args += [ck[d], cs[0][d], cs[1][d]]
            j = 2
            if arg:
                args.append(cs[j][d])
                j += 1
            if arg_in:
                args.append(cs[j][d])
        rt.launch(k, *geometry.nd(rt, rows * nch, ls, k), *args)

    if nch > 1:
        # chunk totals, their inclusive scan (recursively), then every chunk from its carry
        part = Tensor._empty((rows, nch), acc_dtype, dev)
        ipart = Tensor._empty((rows, nch), D.int64, dev) if arg else None
        launch(0, part, ipart)
        if arg:
            part, ipart = _scan(part, 1, op, acc_dtype, acc_dtype, arg=True, iin=ipart)
        else:
            part = _scan(part, 1, op, acc_dtype, acc_dtype)
        launch(1, part, ipart)
    else:
        # one pass; the partials buffer is not touched (any buffer will do)
        launch(1, out if acc_dtype is out_dtype else x, iout if arg else None)
    if x._storage.host is not None or out._storage.host is not None:
        rt.finish_if_exposed()
    return res


def _cum_dtypes(x, dtype):
    if dtype is not None:
        odt = D.to_dtype(dtype)
    elif not x.dtype.is_floating_point:
        odt = D.int64
    else:
        odt = x.dtype
    acc = D.float32 if odt is D.float16 else odt
    return odt, acc


# ------------------------------------------------------------------------------------------------ cumsum
def _cumsum_fwd(ctx, x, dim, dtype, reverse):
    odt, acc = _cum_dtypes(x, dtype)
    if ctx is not None:
        ctx.dim, ctx.reverse, ctx.xdtype = dim, reverse, x.dtype
    src = x if dtype is None or x.dtype is odt else x.to(odt)
    if x.dim() == 0:
        return _scan(src, 0, "sum", acc, odt)
    if not reverse:
        return _scan(src, dim, "sum", acc, odt)
    out = Tensor._empty(x._shape, odt, x.device)
    _scan(_reversed_view(src, dim), dim, "sum", acc, odt, out=_reversed_view(out, dim))
    return out


def _cumsum_bwd(ctx, g):
    return call(_cumsum_op, g, ctx.dim, None, not ctx.reverse), None, None, None


_cumsum_op = register("cumsum", _cumsum_fwd, _cumsum_bwd)


def cumsum(input, dim, *, dtype=None, out=None):  # noqa: A002
    """Inclusive cumulative sum along ``dim``. bool and integer inputs give int64 (exact); ``dtype`` casts the
    input first. float16 accumulates in float32. Complex input: the cumulative sum of each part (on the
    ``view_as_real`` view)."""
    dim = _wrap(input, dim)
    if (input.dtype if dtype is None else D.to_dtype(dtype)).is_complex:
        r = _complex_cumsum(input if dtype is None else input.to(D.to_dtype(dtype)), dim)
        return r if out is None else out.copy_(r)
    r = call(_cumsum_op, input, dim, dtype, False)
    return r if out is None else out.copy_(r)


def _complex_cumsum(x, dim):
    from .complex import view_as_real, view_as_complex
    if x.dim() == 0:
        return x.clone()
    return view_as_complex(cumsum(view_as_real(x), dim))


def _cumsum_(self, dim, *, dtype=None):
    from .pointwise import run_inplace
    r = run_inplace(self, "cumsum_", lambda s: cumsum(s, dim, dtype=dtype))
    if r is not None:
        return r
    return self.copy_(cumsum(self, dim, dtype=dtype))


method("cumsum", lambda self, dim, *, dtype=None: cumsum(self, dim, dtype=dtype))
method("cumsum_", _cumsum_)


# ------------------------------------------------------------------------------------------------ cumprod
def _cumprod_fwd(ctx, x, dim, dtype):
    odt, acc = _cum_dtypes(x, dtype)
    src = x if dtype is None or x.dtype is odt else x.to(odt)
    out = _scan(src, dim if x.dim() else 0, "prod", acc, odt)
    if ctx is not None:
        ctx.save_for_backward(src if src.dtype is odt else src.to(odt), out)
        ctx.dim = dim
    return out


def _rev_cumsum(t, dim):
    return call(_cumsum_op, t, dim, None, True)


def _cumprod_bwd(ctx, g):
    x, out = ctx.saved_tensors
    dim = ctx.dim
    if x.dim() == 0:
        return g, None, None
    zero = x == 0
    if not zero.any().item():
        return _rev_cumsum(g * out, dim) / x, None, None
    # with zeros (PyTorch's cumprod_backward): before the first zero of a row, sum_{j>=i} g_j out_j / x_i;
    # at the first zero z, prod(x[<z]) * sum_{j>=z} g_j prod(x(z..j]); after it, 0
    from .pointwise import where
    zc = call(_cumsum_op, zero, dim, None, False)
    before = zc == 0
    first = zero & (zc == 1)
    safe = where(before, x, 1.0)
    g_before = where(before, _rev_cumsum(g * out, dim) / safe, 0.0)
    prefix = safe.prod(dim, keepdim=True)
    after = (zc >= 1) & ~first
    c = call(_cumprod_op, where(after, x, 1.0), dim, None)
    s = (g * c * (zc >= 1)).sum(dim, keepdim=True)
    return g_before + where(first, prefix * s, 0.0), None, None


_cumprod_op = register("cumprod", _cumprod_fwd, _cumprod_bwd)


def cumprod(input, dim, *, dtype=None, out=None):  # noqa: A002
    """Inclusive cumulative product along ``dim``; bool and integer inputs give int64. The gradient is exact
    with zeros in the input (PyTorch's formula)."""
    _no_complex(input, "cumprod")
    dim = _wrap(input, dim)
    r = call(_cumprod_op, input, dim, dtype)
    return r if out is None else out.copy_(r)


method("cumprod", lambda self, dim, *, dtype=None: cumprod(self, dim, dtype=dtype))
method("cumprod_", lambda self, dim, *, dtype=None: self.copy_(cumprod(self, dim, dtype=dtype)))


# ------------------------------------------------------------------------------------------------ cummax / cummin
def _cummaxmin_fwd(is_max):
    def fwd(ctx, x, dim):
        ct = D.float32 if x.dtype is D.float16 else (D.uint8 if x.dtype is D.bool else x.dtype)
        v, i = _scan(x, dim, "max" if is_max else "min", ct, x.dtype, arg=True)
        from .indexing.launch import _mark_trusted
        _mark_trusted(i)
        if ctx is not None:
            ctx.save_for_backward(i)
            ctx.dim, ctx.shape = dim, x._shape
        return v, i
    return fwd


def _cummaxmin_bwd(ctx, g, gi=None):
    (i,) = ctx.saved_tensors
    from .creation import zeros
    from .indexing.scatter_gather import _scatter_add_op
    if not ctx.shape:
        return g, None
    return call(_scatter_add_op, zeros(ctx.shape, dtype=g.dtype, device=g.device), ctx.dim, i, g), None


_cummax_op = register("cummax", _cummaxmin_fwd(True), _cummaxmin_bwd, differentiable_outputs=(0,))
_cummin_op = register("cummin", _cummaxmin_fwd(False), _cummaxmin_bwd, differentiable_outputs=(0,))


def cummax(input, dim):  # noqa: A002
    """(values, indices): the running maximum along ``dim`` and where it was reached; ties and NaNs take the
    latest index (PyTorch's rule); NaN propagates."""
    _no_complex(input, "cummax")
    dim = _wrap(input, dim)
    return return_types_cummax(*call(_cummax_op, input, dim))


def cummin(input, dim):  # noqa: A002
    """(values, indices): the running minimum along ``dim``; ties and NaNs take the latest index."""
    _no_complex(input, "cummin")
    dim = _wrap(input, dim)
    return return_types_cummin(*call(_cummin_op, input, dim))


method("cummax", cummax)
method("cummin", cummin)


# ================================================================================================ sort
def _sort_params(rt):
    gpu = rt.info.is_gpu
    p = rt.profile
    ch = p.get_value("sort", "chunk", 8 if gpu else 32)
    tile = p.get_value("sort", "tile", 8 if gpu else 64)
    ls = p.get_value("sort", "local_size", 64 if gpu else 8)
    tile = min(tile, 2 * ch)
    return ch, tile, ls


def _sort_kernel(rt, kernel, kt, floating, RK, CH, T):
    key = ("sort", rt.index, kernel, kt, floating, RK, CH, T)
    k = _kernels.get(key)
    if k is None:
        argd = [None, np.int64, np.int64] if kernel == "init" else [None, None]
        argd += [None, np.int64, None, np.int64, np.int64, np.int64]
        argd += [np.int64] * (5 if kernel == "init" else 6)
        argd += [np.int64] * ((4 if kernel == "init" else 3) * RK)
        types = tuple(sorted({kt, "long"}))
        k = rt.kernel("sort.cl.mako", "sort_init" if kernel == "init" else "sort_merge", argd, kernel=kernel,
                      kt=kt, floating=floating, RK=RK, CH=CH, T=T, types=types)
        _kernels[key] = k
    return k


def _sort_raw(x, dim, descending, k=None):
    """Stable sort of x along dim. Returns (values, indices), contiguous, with ``dim`` cut to the first k."""
    _no_complex(x, "sort")
    from .indexing.launch import _pad_rank
    shape = x._shape
    if not shape:
        from .creation import zeros
        from .views import _materialize
        return _materialize(x), zeros((), dtype=D.int64, device=x.device)
    n = shape[dim]
    k = n if k is None else k
    oshape = list(shape)
    oshape[dim] = k
    oshape = tuple(oshape)
    dev = x.device
    values = Tensor._empty(oshape, x.dtype, dev)
    indices = Tensor._empty(oshape, D.int64, dev)
    numel = _prod(shape)
    if numel == 0 or k == 0:
        return values, indices
    rows = numel // n
    kept = [d for d in range(len(shape)) if d != dim]
    kshape = tuple(shape[d] for d in kept)
    rt = x._runtime()
    CH, T, ls = _sort_params(rt)
    kt = x.dtype.cl
    floating = x.dtype.is_floating_point
    desc = int(bool(descending))
    passes = 0
    w = CH
    while w < n:
        passes += 1
        w *= 2
    nch = (n + CH - 1) // CH

    def kst(t):
        return tuple(t._stride[d] for d in kept)

    scratch_rows = tuple(s * n for s in contiguous_strides(kshape))
    if passes == 0:
        dst = (values, indices, values._stride[dim], indices._stride[dim], kst(values), kst(indices), k)
    else:
        ka = Tensor._empty((rows * n,), x.dtype, dev)
        ia = Tensor._empty((rows * n,), D.int64, dev)
        kb = Tensor._empty((rows * n,), x.dtype, dev)
        ib = Tensor._empty((rows * n,), D.int64, dev)
        dst = (ka, ia, 1, 1, scratch_rows, scratch_rows, n)
    # chunks of CH, insertion-sorted in private memory
    dk, di, sdk, sdi, rk, ri, kk = dst
    ck, cs = _pad_rank(*_collapse(kshape, [kst(x), rk, ri]))
    kern = _sort_kernel(rt, "init", kt, floating, len(ck), CH, T)
    args = [x._storage.cl_buffer(), x._offset, x._stride[dim], dk._storage.cl_buffer(), dk._offset,
            di._storage.cl_buffer(), di._offset, sdk, sdi, rows, n, nch, kk, desc]
    for d in range(len(ck)):
        args += [ck[d], cs[0][d], cs[1][d], cs[2][d]]
    rt.launch(kern, *geometry.nd(rt, rows * nch, ls, kern), *args)
    # merge passes: scratch -> scratch, the last one into the outputs
    ntile = (n + T - 1) // T
    w = CH
    for p in range(passes):
        last = p == passes - 1
        if last:
            dk, di, sdk, sdi, rk, ri, kk = values, indices, values._stride[dim], indices._stride[dim], \
                kst(values), kst(indices), k
        else:
            dk, di, sdk, sdi, rk, ri, kk = kb, ib, 1, 1, scratch_rows, scratch_rows, n
        ck, cs = _pad_rank(*_collapse(kshape, [rk, ri]))
        kern = _sort_kernel(rt, "merge", kt, floating, len(ck), CH, T)
        args = [ka._storage.cl_buffer(), ia._storage.cl_buffer(), dk._storage.cl_buffer(), dk._offset,
                di._storage.cl_buffer(), di._offset, sdk, sdi, rows, n, ntile, w, kk, desc]
        for d in range(len(ck)):
            args += [ck[d], cs[0][d], cs[1][d]]
        rt.launch(kern, *geometry.nd(rt, rows * ntile, ls, kern), *args)
        if not last:
            ka, kb, ia, ib = kb, ka, ib, ia
        w *= 2
    if x._storage.host is not None:
        rt.finish_if_exposed()
    from .indexing.launch import _mark_trusted
    return values, _mark_trusted(indices)


def _sort_fwd(ctx, x, dim, descending, k):
    v, i = _sort_raw(x, dim, descending, k)
    if ctx is not None:
        ctx.save_for_backward(i)
        ctx.dim, ctx.x_shape, ctx.x_dtype, ctx.x_device = dim, x._shape, x.dtype, x.device
    return v, i


class _Like:
    """Shape/dtype/device stand-in for _scatter_into_zeros (so the input itself need not be kept)."""

    def __init__(self, shape, dtype, device):
        self._shape, self.dtype, self.device = shape, dtype, device

    def dim(self):
        return len(self._shape)


def _sort_bwd(ctx, g, gi=None):
    (i,) = ctx.saved_tensors
    from .indexing.scatter_gather import _scatter_into_zeros
    like = _Like(ctx.x_shape, ctx.x_dtype, ctx.x_device)
    if not ctx.x_shape:
        return g, None, None, None
    return _scatter_into_zeros(like, ctx.dim, i, g), None, None, None


_sort_op = register("sort", _sort_fwd, _sort_bwd, differentiable_outputs=(0,))


def sort(input, dim=-1, descending=False, stable=False, *, out=None):  # noqa: A002
    """(values, indices) sorted along ``dim``. Always stable (equal values keep their order, also descending),
    so ``stable=True`` holds. NaN sorts as the largest value. Any dim, any length."""
    _no_complex(input, "sort")
    if isinstance(dim, bool):
        raise TypeError("sort(): argument 'dim' must be int, not bool")
    dim = _wrap(input, dim)
    v, i = call(_sort_op, input, dim, bool(descending), None)
    if out is not None:
        out[0].copy_(v)
        out[1].copy_(i)
        return return_types_sort(out[0], out[1])
    return return_types_sort(v, i)


def argsort(input, dim=-1, descending=False, stable=False):  # noqa: A002
    """The indices that sort input along ``dim`` (stable)."""
    _no_complex(input, "argsort")
    return sort(input, dim, descending, stable).indices


def msort(input):  # noqa: A002
    """``sort(input, dim=0).values``."""
    _no_complex(input, "msort")
    return sort(input, 0).values


method("sort", lambda self, dim=-1, descending=False, stable=False: sort(self, dim, descending, stable))
method("argsort", lambda self, dim=-1, descending=False, stable=False: argsort(self, dim, descending, stable))
method("msort", msort)


def topk(input, k, dim=-1, largest=True, sorted=True, *, out=None):  # noqa: A002
    """(values, indices) of the k largest (or smallest) entries along ``dim``, in sorted order (also when
    ``sorted=False``). Ties keep distinct indices, the lower index first."""
    _no_complex(input, "topk")
    dim = _wrap(input, dim)
    n = input._shape[dim] if input.dim() else 1
    k = int(k)
    if k < 0 or k > n:
        raise RuntimeError(f"selected index k out of range: k = {k}, size of dim {dim} = {n}")
    v, i = call(_sort_op, input, dim, bool(largest), k)
    if out is not None:
        out[0].copy_(v)
        out[1].copy_(i)
        return return_types_topk(out[0], out[1])
    return return_types_topk(v, i)


method("topk", lambda self, k, dim=-1, largest=True, sorted=True: topk(self, k, dim, largest, sorted))


def kthvalue(input, k, dim=-1, keepdim=False):  # noqa: A002
    """(values, indices) of the k-th smallest entry (1-based) along ``dim``."""
    _no_complex(input, "kthvalue")
    dim = _wrap(input, dim)
    n = input._shape[dim] if input.dim() else 1
    if k < 1 or k > n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {dim}: k = {k}, size {n}")
    if input.dim() == 0:
        v, i = call(_sort_op, input, 0, False, None)
        return return_types_kthvalue(v, i)
    v, i = call(_sort_op, input, dim, False, k)
    v, i = v.narrow(dim, k - 1, 1), i.narrow(dim, k - 1, 1)
    if not keepdim:
        v, i = v.squeeze(dim), i.squeeze(dim)
    return return_types_kthvalue(v, i)


method("kthvalue", lambda self, k, dim=-1, keepdim=False: kthvalue(self, k, dim, keepdim))


def _median(input, dim, keepdim, ignore_nan, rtype):
    if dim is None:
        x = input.reshape(-1)
        if x.numel() == 0:
            from .creation import full
            return full((), float("nan"), dtype=input.dtype, device=input.device)
        r = _median(x, 0, False, ignore_nan, rtype)
        return r.values
    dim = _wrap(input, dim)
    if input.dim() == 0:
        v, i = call(_sort_op, input, 0, False, None)
        return rtype(v, i)
    n = input._shape[dim]
    if n == 0:
        raise IndexError(f"median(): Expected reduction dim {dim} to have non-zero size.")
    v, i = call(_sort_op, input, dim, False, None)
    if input.dtype.is_floating_point:
        nn = input.isnan().sum(dim, keepdim=True)
        if ignore_nan:
            pos = ((n - nn - 1).clamp(min=0)) // 2
        else:
            from .pointwise import where
            pos = where(nn > 0, n - nn, (n - 1) // 2)
        from .indexing import gather
        vv, ii = gather(v, dim, pos), gather(i, dim, pos)
    else:
        vv, ii = v.narrow(dim, (n - 1) // 2, 1), i.narrow(dim, (n - 1) // 2, 1)
    if not keepdim:
        vv, ii = vv.squeeze(dim), ii.squeeze(dim)
    return rtype(vv, ii)


def median(input, dim=None, keepdim=False):  # noqa: A002
    """The lower median ((n-1)//2-th smallest); NaN when the row has a NaN. With ``dim``: (values, indices)."""
    _no_complex(input, "median")
    return _median(input, dim, keepdim, False, return_types_median)


def nanmedian(input, dim=None, keepdim=False):  # noqa: A002
    """``median`` ignoring NaNs (NaN only when a row is all NaN)."""
    _no_complex(input, "nanmedian")
    return _median(input, dim, keepdim, True, return_types_nanmedian)


method("median", median)
method("nanmedian", nanmedian)


# ================================================================================================ unique
def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """The sorted distinct values of the flattened input, with optionally the inverse indices (input's shape)
    and the counts. Built from the stable sort, a compare, a scan and a compaction (one small read for the
    count). ``dim`` is not supported."""
    _no_complex(input, "unique")
    if dim is not None:
        raise NotImplementedError("unique(dim=...) is not supported; use unique on the flattened tensor")
    flat = input.reshape(-1)
    from .creation import ones
    n = flat.numel()
    v, perm = _sort_raw(flat, 0, False)
    if n:
        from .joins import cat
        from .pointwise import ne
        mask = cat([ones((1,), dtype=D.bool, device=input.device), ne(v[1:], v[:-1])])
    else:
        mask = ones((0,), dtype=D.bool, device=input.device)
    from .indexing import masked_select, nonzero
    u = masked_select(v, mask)
    res = [u]
    if return_inverse:
        pos = _scan(mask, 0, "sum", D.int64, D.int64) - 1
        inv = Tensor._empty((n,), D.int64, input.device)
        from .indexing.scatter_gather import _scatter_put
        _scatter_put(inv, 0, perm, pos, "assign")
        res.append(inv.reshape(input._shape))
    if return_counts:
        starts = nonzero(mask).reshape(-1)
        from .joins import cat
        from .creation import tensor
        ends = cat([starts[1:], tensor([n], dtype=D.int64, device=input.device)])
        res.append(ends - starts)
    return res[0] if len(res) == 1 else tuple(res)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """Collapses runs of equal consecutive values of the flattened input (no sort)."""
    if dim is not None:
        raise NotImplementedError("unique_consecutive(dim=...) is not supported")
    flat = input.reshape(-1)
    n = flat.numel()
    from .creation import ones, tensor
    from .joins import cat
    from .pointwise import ne
    from .indexing import masked_select, nonzero
    mask = cat([ones((1,), dtype=D.bool, device=input.device), ne(flat[1:], flat[:-1])]) if n else \
        ones((0,), dtype=D.bool, device=input.device)
    res = [masked_select(flat, mask)]
    if return_inverse:
        res.append((_scan(mask, 0, "sum", D.int64, D.int64) - 1).reshape(input._shape))
    if return_counts:
        starts = nonzero(mask).reshape(-1)
        res.append(cat([starts[1:], tensor([n], dtype=D.int64, device=input.device)]) - starts)
    return res[0] if len(res) == 1 else tuple(res)


method("unique", lambda self, sorted=True, return_inverse=False, return_counts=False, dim=None:
       unique(self, sorted, return_inverse, return_counts, dim))
method("unique_consecutive", unique_consecutive)

