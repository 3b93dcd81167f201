"""The norm kernels' launches, either design (``[norm] design``: "cpu", ``cl_kernels/norm.cl.mako``, one work-item
per (row, chunk); "gpu", ``team.py``, a team of lanes per (row, chunk)): the chunks, the forward (output, mean as
hi + lo, rstd, var), the backward (input gradient; batch_norm's row sums) and the layer_norm / rms_norm weight and
bias gradients. Both designs take the same arguments and add in the same order."""
import numpy as np

from ... import _dtype as D
from ..._tensor import Tensor
from ..softmax.common import kernel, launch, local_size, is_host, compute_dtype, types_of, design
from .team import team

__all__ = ["_chunks", "wgrad_shape", "_norm_launch", "_norm_bwd_launch", "_wgrad_launch"]

_L = np.int64
_FWD_ARGS = [None, _L, None, _L, None, _L, None, _L, None, None, None, None] + [_L] * 10
_BWD_ARGS = [None, _L, None, _L, None, _L, None, _L, None, None, None, None, None] + [_L] * 10
_PART_ARGS = [None, None, _L] + [_L] * 7
_BWD_PART_ARGS = [None, None, _L, None, _L, None, _L, None, None] + [_L] * 10
_NAMES = {"part": "norm_part", "fwd": "norm_fwd", "bwd_part": "norm_bwd_part", "bwd": "norm_bwd"}


def _kernel(rt, which, args, params, units, CH, flat):
    """(kernel, work-items, work-group size) of kernel ``which`` over ``units`` (row, chunk) pairs in the device
    profile's design (``flat``: A == 1, a row's elements adjacent)."""
    if design(rt, "norm") == "gpu":
        t = team(rt, which, args, params, CH, flat)
        return t.kernel, t.work_items(units), t.ls
    return kernel(rt, "norm.cl.mako", _NAMES[which], args, **params), units, local_size(rt, "norm")


def _chunks(rt, L):
    """(CH, nch): a row of L elements in nch chunks of CH (a multiple of 8; the last one shorter). From L and the profile's
    ``[norm]`` ``chunk`` (the shortest chunk worth its own work-item) and ``max_chunks`` (the most per row: each
    second-pass work-item adds all of its row's chunk sums) alone, so the order of every sum is fixed by the row
    length and the profile, never by the work-group size."""
    chunk = max(1, int(rt.profile.get_value("norm", "chunk", 1024)))
    maxc = max(1, int(rt.profile.get_value("norm", "max_chunks", 64)))
    nch = max(1, min(maxc, -(-L // chunk)))
    CH = 8 * max(1, -(-L // (8 * nch)))       # a multiple of 8: a chunk starts at a vector (see the template)
    return CH, max(1, -(-L // CH))


def _np_scalar(ct):
    return np.float64 if ct is D.float64 else np.float32


def _dummy(t):
    return t._storage.cl_buffer()


def _params(x, w, b, center, affine, save_var, A, Bn):
    """Template parameters of one norm program (forward, backward and weight-gradient kernels share it). ``vec``:
    rows of A segments of Bn elements keep every 8 elements j = 8i .. 8i + 7 side by side (one vector load)."""
    ct = compute_dtype(x.dtype)
    return dict(T=x.dtype.cl, CT=ct.cl, center=bool(center), affine=affine, has_w=w is not None,
                has_b=b is not None, save_var=bool(save_var), types=types_of(x.dtype, ct),
                vec=bool(A == 1 or Bn % 8 == 0))


def _norm_launch(x, w, b, nrows, rs, A, sa, Bn, G, Cg, HW, eps, center, affine, save_var=False):
    """Forward kernels over a contiguous x. Returns (y, mean, rstd, var or None, params); mean is (2 * nrows,):
    each row's mean as hi (mean[:nrows]) plus lo (mean[nrows:]), which the backward kernels subtract in turn."""
    ct = compute_dtype(x.dtype)
    params = _params(x, w, b, center, affine, save_var, A, Bn)
    y = Tensor._empty(x._shape, x.dtype, x.device)
    mean = Tensor._empty((2 * nrows,), ct, x.device)
    rstd = Tensor._empty((nrows,), ct, x.device)
    var = Tensor._empty((nrows,), ct, x.device) if save_var else None
    if nrows == 0:
        return y, mean, rstd, var, params
    rt = y._runtime()
    L = A * Bn
    CH, nch = _chunks(rt, L)
    xb = x._storage.cl_buffer()
    host = is_host(x, y)
    part = Tensor._empty((3 * nrows * nch,), ct, x.device) if nch > 1 else mean
    if nch > 1:
        kp, n, ls = _kernel(rt, "part", _PART_ARGS, params, nrows * nch, CH, A == 1)
        launch(rt, kp, n, ls, part._storage.cl_buffer(), xb, x._offset, nrows, rs, sa, Bn, L, CH, nch)
    k, n, ls = _kernel(rt, "fwd", _FWD_ARGS + [_np_scalar(ct)], params, nrows * nch, CH, A == 1)
    launch(rt, k, n, ls, y._storage.cl_buffer(), y._offset, xb, x._offset,
           w._storage.cl_buffer() if w is not None else xb, w._offset if w is not None else 0,
           b._storage.cl_buffer() if b is not None else xb, b._offset if b is not None else 0,
           mean._storage.cl_buffer(), rstd._storage.cl_buffer(),
           var._storage.cl_buffer() if var is not None else mean._storage.cl_buffer(), part._storage.cl_buffer(),
           nrows, rs, sa, Bn, L, CH, nch, G, Cg, HW, _np_scalar(ct)(eps), host=host)
    return y, mean, rstd, var, params


def _norm_bwd_launch(g, x, w, mean, rstd, nrows, rs, A, sa, Bn, G, Cg, HW, params):
    """Backward kernel (params: the forward's): returns (grad_x, sum_g, sum_g_xh) (the sums only for affine
    == 'row')."""
    affine = params["affine"]
    ct = compute_dtype(x.dtype)
    g = g.to(x.dtype) if g.dtype is not x.dtype else g
    if g._shape != x._shape:
        g = g.expand(x._shape)
    g = g.contiguous()
    gi = Tensor._empty(x._shape, x.dtype, x.device)
    row = affine == "row"
    sg = Tensor._empty((nrows,), ct, x.device) if row else None
    sgx = Tensor._empty((nrows,), ct, x.device) if row else None
    if nrows == 0:
        return gi, sg, sgx
    rt = gi._runtime()
    L = A * Bn
    CH, nch = _chunks(rt, L)
    xb = x._storage.cl_buffer()
    mb = mean._storage.cl_buffer()
    wb, wo = (w._storage.cl_buffer(), w._offset) if w is not None else (xb, 0)
    part = Tensor._empty((2 * nrows * nch,), ct, x.device) if nch > 1 else mean
    if nch > 1:
        kp, n, ls = _kernel(rt, "bwd_part", _BWD_PART_ARGS, params, nrows * nch, CH, A == 1)
        launch(rt, kp, n, ls, part._storage.cl_buffer(), g._storage.cl_buffer(), g._offset, xb, x._offset,
               wb, wo, mb, rstd._storage.cl_buffer(), nrows, rs, sa, Bn, L, CH, nch, G, Cg, HW)
    k, n, ls = _kernel(rt, "bwd", _BWD_ARGS, params, nrows * nch, CH, A == 1)
    launch(rt, k, n, ls, gi._storage.cl_buffer(), gi._offset, g._storage.cl_buffer(),
           g._offset, xb, x._offset, wb, wo, mb, rstd._storage.cl_buffer(),
           sg._storage.cl_buffer() if row else mb, sgx._storage.cl_buffer() if row else mb, part._storage.cl_buffer(),
           nrows, rs, sa, Bn, L, CH, nch, G, Cg, HW, host=is_host(x, gi))
    return gi, sg, sgx


def wgrad_shape(prof, nrows, M):
    """(CH, nch, work-items) of norm_wgrad for ``nrows`` rows of M columns under profile ``prof``: chunks of CH =
    ``[norm] wgrad_rows`` rows, one work-item per 8 columns and chunk (neighbouring work-items read neighbouring
    columns of a row: coalesced)."""
    CH = max(1, min(nrows, int(prof.get_value("norm", "wgrad_rows", 256))))
    nch = (nrows + CH - 1) // CH
    return CH, nch, -(-M // 8) * nch


def _wgrad_launch(g, x, mean, rstd, nrows, M, params):
    """Column sums over rows of g * xh and g (layer_norm / rms_norm weight and bias gradients): one work-item per 8
    columns and ``[norm] wgrad_rows`` rows, each column's rows added in order, then the chunks' sums (the
    reductions' column design on GPUs)."""
    ct = compute_dtype(x.dtype)
    rt = x._runtime()
    CH, nch, n = wgrad_shape(rt.profile, nrows, M)
    pw = Tensor._empty((nch, M), ct, x.device)
    pb = Tensor._empty((nch, M), ct, x.device)
    k = kernel(rt, "norm.cl.mako", "norm_wgrad", [None, None, None, _L, None, _L, None, None] + [_L] * 4, **params)
    launch(rt, k, n, local_size(rt, "norm"), pw._storage.cl_buffer(), pb._storage.cl_buffer(),
           g._storage.cl_buffer(), g._offset, x._storage.cl_buffer(), x._offset, mean._storage.cl_buffer(),
           rstd._storage.cl_buffer(), nrows, M, CH, nch, host=is_host(x, g))
    return pw.sum(0), pb.sum(0)
