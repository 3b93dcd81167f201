"""Host-LAPACK linear algebra: the one mechanism (``host_op``) and the factorizations and solves built on it.

Every op here computes on the host: its tensor inputs are read into numpy (a view for cpu tensors, one copy
back from a device), a numpy function computes the result (numpy.linalg's LAPACK, or the numpy code below where
numpy.linalg has no routine), and the results are copied onto the first input's device. Each op is registered
with its derivative; the backward formulas are composed from cltorch ops on the tensors' device (matmul,
triangular solves, tril/triu), so they run where the data lives.

Where each op runs (numpy.linalg = numpy's bundled LAPACK; "numpy code" = written here on numpy arrays):

============================  =======================================================================
op                            forward
============================  =======================================================================
linalg.solve(_ex), inv(_ex)   numpy.linalg.solve (LAPACK gesv); info of failures from the numpy LU below
linalg.solve_triangular       numpy code: blocked forward/back substitution (BLAS-3 updates via matmul)
linalg.det, slogdet, logdet   numpy.linalg.slogdet (getrf)
linalg.cholesky(_ex)          numpy.linalg.cholesky (potrf); info by bisection on leading minors
linalg.lu_factor(_ex), lu     numpy code: Crout LU with partial pivoting (getrf's pivots)
linalg.qr                     numpy.linalg.qr (geqrf + orgqr)
linalg.svd, svdvals           numpy.linalg.svd (gesdd)
linalg.eigh, eigvalsh         numpy.linalg.eigh (syevd)
linalg.pinv                   numpy.linalg.svd / eigh (hermitian=True), PyTorch's atol/rtol cut-off
linalg.lstsq                  numpy.linalg.lstsq (gelsd) per matrix; reports per the requested driver
============================  =======================================================================

Backward formulas follow PyTorch's ``FunctionsManual.cpp`` (real case): solve, solve_triangular, det/slogdet
(through A^-H), cholesky (Murray 2016, arXiv:1602.07527), lu (square, wide and tall), qr (m >= n, and the wide
case through its square part), svd and eigh (Ionescu et al. 2015; the gauge-invariant forms), pinv (Golub and
Pereyra 1973), lstsq (through pinv). Since every backward is built from differentiable ops (the host ops
included), ``create_graph=True`` gives second derivatives (checked by gradgradcheck in tests/test_linalg_decomp.py);
eig's backward (computed on the host) and det's at a singular matrix raise NotImplementedError under it.
"""
import collections

import numpy as np

from .. import _dtype as D
from .._dispatch import call, register
from .._storage import Storage, aligned_empty
from .._tensor import Tensor

__all__ = ["LinAlgError", "host_op", "check_matrix", "solve_matrix", "solve_triangular", "slogdet", "det",
           "cholesky_ex", "lu_factor_ex", "qr", "svd", "svdvals", "eigh", "eigvalsh", "pinv", "lstsq_core",
           "lu_np", "perm_from_pivots"]


class LinAlgError(RuntimeError):
    """``torch.linalg.LinAlgError``: a factorization or solve failed (singular or not positive-definite input).
    A subclass of RuntimeError, as in PyTorch."""


# -------------------------------------------------------------------------------------------- mechanism
def to_host(t):
    """The values of tensor ``t`` as a numpy array (a view for cpu tensors, a copy from a device)."""
    return t._host_view()


def to_device(arr, device, dtype=None):
    """A new contiguous tensor on ``device`` holding numpy array ``arr`` (cast to ``dtype``'s numpy type)."""
    arr = np.asarray(arr)
    dt = dtype if dtype is not None else D.from_numpy_dtype(arr.dtype)
    flat = aligned_empty(arr.size, dt.np)
    flat[...] = arr.reshape(-1)
    return Tensor._make(Storage.from_host(flat, device), arr.shape)


def host_op(name, host_fn, backward=None, differentiable_outputs=None, save_outputs=True, dtypes=None):
    """Register op ``name`` computed on the host and return it (call it with ``cltorch._dispatch.call``).

    ``host_fn(*args, **kw)`` receives each Tensor argument as a numpy array (other arguments as given) and
    returns an array or a tuple of arrays; those come back as tensors on the first tensor argument's device,
    each in the dtype listed in ``dtypes`` (a tuple of cltorch dtypes or None per output; None: the first
    tensor's dtype for floating results, the array's own dtype otherwise). ``backward(ctx, *grads)`` sees
    ``ctx.saved_tensors`` = (tensor inputs..., outputs...) when ``save_outputs``, ``ctx.n_in`` and ``ctx.kw``,
    and gets None (not zeros) for outputs that received no gradient."""
    def forward(ctx, *args, **kw):
        tens = [a for a in args if isinstance(a, Tensor)]
        dev, fdt = tens[0].device, tens[0].dtype
        res = host_fn(*[to_host(a) if isinstance(a, Tensor) else a for a in args], **kw)
        single = not isinstance(res, tuple)
        res = (res,) if single else res
        outs = []
        for i, r in enumerate(res):
            want = dtypes[i] if dtypes is not None else None
            if want is None:
                r = np.asarray(r)
                want = fdt if r.dtype.kind == "f" else D.from_numpy_dtype(r.dtype)
            outs.append(to_device(r, dev, want))
        if ctx is not None:
            ctx.n_in = len(tens)
            ctx.kw = kw
            ctx.materialize_grads = False
            ctx.save_for_backward(*tens, *(outs if save_outputs else ()))
        return outs[0] if single else tuple(outs)
    def backward_or_empty(ctx, *grads):
        tens = ctx.saved_tensors[:ctx.n_in]
        if any(t.numel() == 0 for t in tens):      # an empty input: every gradient is zero (or empty)
            from .creation import zeros_like
            it = iter(tens)
            res = []
            for is_t, need in zip(ctx.arg_is_tensor, ctx.needs_input_grad):
                t = next(it) if is_t else None
                res.append(zeros_like(t) if is_t and need else None)
            return tuple(res)
        return backward(ctx, *grads)

    def forward_kinds(ctx, *args, **kw):
        if ctx is not None:
            ctx.arg_is_tensor = tuple(isinstance(a, Tensor) for a in args)
        return forward(ctx, *args, **kw)
    if backward is None:
        return register(name, forward, None, differentiable_outputs=differentiable_outputs)
    return register(name, forward_kinds, backward_or_empty, differentiable_outputs=differentiable_outputs)


_DT_NAMES = {"float16": "Half", "bfloat16": "BFloat16", "float32": "Float", "float64": "Double", "int64": "Long",
             "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def check_matrix(A, fname, square=True, name="A", min_dim=2):
    """PyTorch's argument checks: a Tensor of float32/float64, at least 2-D, square when ``square``."""
    if not isinstance(A, Tensor):
        raise TypeError(f"{fname}(): argument '{name}' (position 1) must be Tensor, not {type(A).__name__}")
    dn = _DT_NAMES.get(A.dtype.name, A.dtype.name)
    if A.dtype in (D.float16, D.bfloat16):
        raise RuntimeError(f"{fname}: Low precision dtypes not supported. Got {dn}")
    if A.dtype.is_complex:
        raise NotImplementedError(f"{A.dtype.name} inputs are not supported by cltorch.{fname} yet")
    if not A.dtype.is_floating_point:
        raise RuntimeError(f"{fname}: Expected a floating point or complex tensor as input. Got {dn}")
    if A.dim() < min_dim:
        raise RuntimeError(f"{fname}: The input tensor {name} must have at least {min_dim} dimensions.")
    if square and A._shape[-1] != A._shape[-2]:
        raise RuntimeError(f"{fname}: {name} must be batches of square matrices, but they are "
                           f"{A._shape[-2]} by {A._shape[-1]} matrices")


def _same(A, B, fname):
    if A.dtype is not B.dtype:
        raise RuntimeError(f"{fname}: Expected A and B to have the same dtype, but found A of type "
                           f"{_DT_NAMES.get(A.dtype.name)} and B of type {_DT_NAMES.get(B.dtype.name)} instead")
    if A.device != B.device:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"{A.device} and {B.device}!")


def _batch_prefix(shape, flat_idx):
    """PyTorch's '(Batch element i): ' prefix for a batched error, '' for a single matrix."""
    return f"(Batch element {flat_idx}): " if len(shape) > 2 else ""


def _mT(x):
    return x.transpose(-1, -2)


def _out(r, out):
    """Copy result(s) ``r`` into ``out`` (a tensor or a tuple of them) and return ``out``; ``r`` when None."""
    if out is None:
        return r
    if isinstance(r, tuple):
        for o, v in zip(out, r):
            o.copy_(v)
        return out
    return out.copy_(r)


def flat3(a):
    """A (..., m, n) numpy array as (batch, m, n) (also when some dim is 0, where reshape(-1, m, n) fails)."""
    return a.reshape((int(np.prod(a.shape[:-2], dtype=np.int64)),) + a.shape[-2:])


def _bshape(a, b):
    """The broadcast batch shape; RuntimeError naming both when they do not broadcast."""
    try:
        return np.broadcast_shapes(a, b)
    except ValueError:
        raise RuntimeError(f"The batch dimensions of the inputs do not broadcast: {list(a)} and {list(b)}") from None


# -------------------------------------------------------------------------------------------- numpy kernels
def lu_np(a):
    """Partial-pivoting LU of a (..., m, n) array, as LAPACK getrf: returns (LU packed, pivots 1-based int32
    (..., k), info int32 (...)) with k = min(m, n).

    Crout's column ordering (Golub & Van Loan, Matrix Computations, 4th ed., sec. 3.4), each step one numpy
    call per piece over the whole batch at once: column j of L is brought up to date by one matrix-vector
    product with the finished columns (a[j:, j] -= L[j:, :j] U[:j, j]), its largest magnitude picks the
    pivot row (ties to the first row, as idamax), the two rows swap across the full width, the column is
    divided by the pivot, and row j of U is finished by one vector-matrix product (a[j, j+1:] -= L[j, :j]
    U[:j, j+1:]). So k Python steps of about a dozen numpy calls, with no trailing-matrix temporaries; the
    arithmetic is getrf's, in another summation order. Matrices wider than ``_LU_ONE_PANEL`` columns are
    factored in panels of ``_LU_PANEL`` columns (the same steps restricted to the panel), each followed by one
    unit-lower triangular solve for its block row of U and one GEMM for the trailing matrix (getrf's blocking).
    A zero pivot (its column below is then all zero) sets info (the first one, 1-based) and skips the division."""
    shp = a.shape
    m, n = shp[-2], shp[-1]
    a = np.array(flat3(a), dtype=a.dtype, copy=True)
    B = a.shape[0]
    k = min(m, n)
    piv = np.empty((B, k), np.int64)
    bi = np.arange(B)
    nb = max(k, 1) if n <= _LU_ONE_PANEL else _LU_PANEL
    for j0 in range(0, k, nb):
        j1 = min(j0 + nb, k)
        w = n if j1 == k else j1               # the last panel finishes U's rows to the right edge itself
        for j in range(j0, j1):
            if j > j0:
                a[:, j:, j] -= (a[:, j:, j0:j] @ a[:, j0:j, j, None])[:, :, 0]
            p = np.abs(a[:, j:, j]).argmax(1)
            p += j
            piv[:, j] = p
            row = a[:, j].copy()
            a[:, j] = a[bi, p]
            a[bi, p] = row
            if j + 1 < m:
                d = a[:, j, j]
                a[:, j + 1:, j] /= (d if d.all() else np.where(d == 0, 1, d))[:, None]
            if j > j0 and j + 1 < w:
                a[:, j, j + 1:w] -= (a[:, j, None, j0:j] @ a[:, j0:j, j + 1:w])[:, 0]
        if w < n:
            a[:, j0:j1, j1:] = trsm_np(a[:, j0:j1, j0:j1], a[:, j0:j1, j1:], lower=True, unit=True)
            if j1 < m:
                a[:, j1:, j1:] -= a[:, j1:, j0:j1] @ a[:, j0:j1, j1:]
    info = np.zeros(B, np.int32)
    if k:
        zero = a[:, np.arange(k), np.arange(k)] == 0
        info = np.where(zero.any(1), zero.argmax(1) + 1, 0).astype(np.int32)
    return a.reshape(shp), (piv + 1).astype(np.int32).reshape(shp[:-2] + (k,)), info.reshape(shp[:-2])


_LU_ONE_PANEL = 512     # lu_np: up to this many columns, one panel (no trailing GEMM); measured in bench_linalg
_LU_PANEL = 256


def perm_from_pivots(piv, m):
    """Row permutation ``perm`` (..., m) of LAPACK's sequential swaps ``piv`` (1-based): (P^T A)[i] = A[perm[i]],
    so P[perm[i], i] = 1."""
    piv = np.asarray(piv)
    lead = piv.shape[:-1]
    flat = piv.reshape(-1, piv.shape[-1]).astype(np.int64) - 1
    perm = np.tile(np.arange(m), (flat.shape[0], 1))
    bi = np.arange(flat.shape[0])
    for i in range(flat.shape[1]):
        p = flat[:, i]
        a, b = perm[bi, i].copy(), perm[bi, p].copy()
        perm[bi, i], perm[bi, p] = b, a
    return perm.reshape(lead + (m,))


def trsm_np(T, B, lower, unit=False):
    """Solve T X = B for triangular T (..., n, n) and B (..., n, k) (batch dims already equal) by blocked
    substitution: 64-row blocks solved row by row, the rest updated with one matmul per block. Only T's
    ``lower``/upper triangle is read; ``unit`` takes its diagonal as ones. Division by a zero diagonal gives
    inf/nan, as LAPACK's trsm does."""
    if not lower:   # reverse the order: J T J is lower triangular, and (J T J)(J X) = J B
        return trsm_np(T[..., ::-1, ::-1], B[..., ::-1, :], True, unit)[..., ::-1, :]
    n = T.shape[-1]
    X = np.array(B, dtype=np.result_type(T.dtype, B.dtype), copy=True)
    nb = 64
    with np.errstate(divide="ignore", invalid="ignore"):
        for i0 in range(0, n, nb):
            i1 = min(i0 + nb, n)
            for i in range(i0, i1):
                if i > i0:
                    X[..., i, :] -= np.einsum("...j,...jk->...k", T[..., i, i0:i], X[..., i0:i, :])
                if not unit:
                    X[..., i, :] /= T[..., i, i, None]
            if i1 < n:
                X[..., i1:, :] -= T[..., i1:, i0:i1] @ X[..., i0:i1, :]
    return X


# -------------------------------------------------------------------------------------------- solve
def _solve_host(A, B):
    bs = _bshape(A.shape[:-2], B.shape[:-2])
    A = np.broadcast_to(A, bs + A.shape[-2:])
    B = np.broadcast_to(B, bs + B.shape[-2:])
    try:
        X = np.linalg.solve(A, B)
        info = np.zeros(bs, np.int32)
    except np.linalg.LinAlgError:
        _, _, info = lu_np(A)
        X = np.full(bs + B.shape[-2:], np.nan, dtype=A.dtype)
        ok = info == 0
        if ok.any():
            X[ok] = np.linalg.solve(A[ok], B[ok])
    return X.astype(A.dtype, copy=False), info


def _solve_bw(ctx, g, ginfo=None):
    A, B, X, _ = ctx.saved_tensors
    gB = solve_matrix(_mT(A), g)[0]
    gA = -(gB @ _mT(X)) if ctx.needs_input_grad[0] else None
    return gA, gB if ctx.needs_input_grad[1] else None


_solve_op = host_op("linalg_solve_matrix", _solve_host, _solve_bw, differentiable_outputs=(0,),
                    dtypes=(None, D.int32))


def solve_matrix(A, B):
    """X (..., n, k) with A X = B for A (..., n, n) and B (..., n, k), batch dims broadcast; returns (X, info)
    with info the index (1-based) of the first zero pivot of A's LU per matrix (0: solved). Differentiable in
    A and B. Host: numpy.linalg.solve."""
    return call(_solve_op, A, B)


# -------------------------------------------------------------------------------------------- triangular
def _tri_host(A, B, upper, left, unitriangular):
    bs = _bshape(A.shape[:-2], B.shape[:-2])
    A = np.broadcast_to(A, bs + A.shape[-2:])
    B = np.broadcast_to(B, bs + B.shape[-2:])
    if left:
        X = trsm_np(A, B, lower=not upper, unit=unitriangular)
    else:   # X A = B  <=>  A^T X^T = B^T
        X = np.swapaxes(trsm_np(np.swapaxes(A, -1, -2), np.swapaxes(B, -1, -2), lower=upper,
                                unit=unitriangular), -1, -2)
    return X.astype(A.dtype, copy=False)


def _tri_bw(ctx, g):
    A, B, X = ctx.saved_tensors
    kw = ctx.kw
    upper, left, unit = kw["upper"], kw["left"], kw["unitriangular"]
    gB = solve_triangular(_mT(A), g, upper=not upper, left=left, unitriangular=unit)
    gA = None
    if ctx.needs_input_grad[0]:
        gA = -(gB @ _mT(X)) if left else -(_mT(X) @ gB)
        gA = (gA.triu(1) if unit else gA.triu()) if upper else (gA.tril(-1) if unit else gA.tril())
    return gA, gB if ctx.needs_input_grad[1] else None


_tri_op = host_op("linalg_solve_triangular", _tri_host, _tri_bw)


def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    """``torch.linalg.solve_triangular``: X with A X = B (left) or X A = B (left=False) for triangular A
    (..., n, n) (only its ``upper`` or lower triangle is read; ``unitriangular`` takes the diagonal as ones)
    and B (..., n, k) (left) or (..., k, n); batch dims broadcast. float32/float64. A zero diagonal gives
    inf/nan, as LAPACK does (no error). Raises RuntimeError for wrong dims, dtypes or shapes. Host: numpy
    blocked substitution. Differentiable in A (within its triangle) and B."""
    fname = "linalg.solve_triangular"
    check_matrix(A, fname)
    check_matrix(B, fname, square=False, name="B")
    _same(A, B, fname)
    n = A._shape[-1]
    if (B._shape[-2] if left else B._shape[-1]) != n:
        raise RuntimeError(f"{fname}: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({A._shape[-2]}x{n} and "
                           f"{B._shape[-2]}x{B._shape[-1]})")
    r = call(_tri_op, A, B, upper=bool(upper), left=bool(left), unitriangular=bool(unitriangular))
    return r if out is None else out.copy_(r)


# -------------------------------------------------------------------------------------------- det / slogdet
SlogdetResult = collections.namedtuple("slogdet", ["sign", "logabsdet"])


def _slogdet_host(A):
    s, l = np.linalg.slogdet(A)
    return s.astype(A.dtype), l.astype(A.dtype)


def _inv_h(A):
    """A^-H composed (differentiable): solve(A^H, I)."""
    from .creation import eye
    n = A._shape[-1]
    return solve_matrix(_mT(A), eye(n, dtype=A.dtype, device=A.device))[0]


def _slogdet_bw(ctx, gsign, glog):
    A, sign, logabs = ctx.saved_tensors
    if glog is None:
        return (None,)
    return (glog.unsqueeze(-1).unsqueeze(-1) * _inv_h(A),)


_slogdet_op = host_op("linalg_slogdet", _slogdet_host, _slogdet_bw)     # sign: zero gradient, as PyTorch


def slogdet(A, *, out=None):
    """``torch.linalg.slogdet``: (sign, logabsdet) of square matrices A (..., n, n), each of shape (...);
    sign is 0 and logabsdet -inf for a singular matrix. Gradient of logabsdet: A^-H (infinite for singular A).
    Host: numpy.linalg.slogdet (LU). Raises RuntimeError for non-square or non-floating input."""
    check_matrix(A, "linalg.slogdet")
    return _out(SlogdetResult(*call(_slogdet_op, A)), out)


def _det_host(A):
    return np.linalg.det(A).astype(A.dtype)


def _det_bw(ctx, g):
    A, d = ctx.saved_tensors
    dh = to_host(d)
    if np.all(dh != 0):
        return ((g * d).unsqueeze(-1).unsqueeze(-1) * _inv_h(A),)
    # singular somewhere: d det / dA = adj(A)^T = det(U) det(V) U diag(prod_{j != i} s_j) V^T (PyTorch's SVD path)
    from .._dispatch import is_grad_enabled
    if is_grad_enabled():
        raise NotImplementedError("linalg.det: the double backward at a singular matrix is not provided (its "
                                  "adjugate is computed on the host)")
    U, S, Vh = svd(A, full_matrices=False)
    Sh = to_host(S)
    n = Sh.shape[-1]
    prods = np.stack([np.prod(np.delete(Sh, i, axis=-1), axis=-1) for i in range(n)], -1) if n else Sh
    sgn = np.linalg.det(to_host(U)) * np.linalg.det(to_host(Vh))
    P = to_device((prods * sgn[..., None]).astype(Sh.dtype), A.device)
    return ((g.unsqueeze(-1).unsqueeze(-1) * ((U * P.unsqueeze(-2)) @ Vh)),)


_det_op = host_op("linalg_det", _det_host, _det_bw)


def det(A, *, out=None):
    """``torch.linalg.det``: determinants (...) of square matrices A (..., n, n). float32/float64. Gradient:
    det * A^-H, or the adjugate through the SVD where a matrix is singular. Host: numpy.linalg.det (LU)."""
    check_matrix(A, "linalg.det")
    r = call(_det_op, A)
    return r if out is None else out.copy_(r)


# -------------------------------------------------------------------------------------------- cholesky
def _chol_info(a):
    """Order (1-based) of the first leading minor of the symmetric matrix (lower triangle) that is not positive
    definite, by bisection (leading minors of a positive-definite matrix are positive-definite)."""
    lo, hi = 1, a.shape[-1]
    while lo < hi:
        mid = (lo + hi) // 2
        try:
            np.linalg.cholesky(a[:mid, :mid])
            lo = mid + 1
        except np.linalg.LinAlgError:
            hi = mid
    return lo


def _chol_host(A, upper):
    a = np.swapaxes(A, -1, -2) if upper else A      # upper: the upper triangle of A is the lower one of A^T
    info = np.zeros(a.shape[:-2], np.int32)
    try:
        L = np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        flat = flat3(a)
        Ls = np.zeros_like(flat)
        fi = info.reshape(-1)
        for i in range(flat.shape[0]):
            try:
                Ls[i] = np.linalg.cholesky(flat[i])
            except np.linalg.LinAlgError:
                fi[i] = _chol_info(flat[i])
        L = Ls.reshape(a.shape)
    L = L.astype(A.dtype, copy=False)
    return (np.swapaxes(L, -1, -2) if upper else L), info


def _chol_bw(ctx, gL, ginfo=None):
    A, L, _ = ctx.saved_tensors
    upper = ctx.kw["upper"]
    if upper:
        L, gL = _mT(L), _mT(gL)
    phi = (_mT(L) @ gL).tril()
    phi = phi - 0.5 * phi.diagonal(0, -2, -1).diag_embed()
    gA = solve_triangular(L, phi, upper=False, left=False)           # phi L^-1
    gA = solve_triangular(_mT(L), gA, upper=True, left=True)         # L^-H phi L^-1
    return (0.5 * (gA + _mT(gA)),)


_chol_op = host_op("linalg_cholesky_ex", _chol_host, _chol_bw, differentiable_outputs=(0,), dtypes=(None, D.int32))


def cholesky_ex(A, *, upper=False, check_errors=False, out=None):
    """``torch.linalg.cholesky_ex``: (L, info) with A = L L^H (``upper``: A = U^H U) for symmetric positive-
    definite A (..., n, n), reading only its lower (upper) triangle; info (...) int32 is 0, or the order of the
    first leading minor that is not positive-definite. ``check_errors`` raises LinAlgError then. Host:
    numpy.linalg.cholesky. Gradient: PyTorch's cholesky_backward (Murray 2016)."""
    check_matrix(A, "linalg.cholesky")
    L, info = call(_chol_op, A, upper=bool(upper))
    if check_errors:
        _raise_chol(info, "linalg.cholesky")
    return _out(CholeskyExResult(L, info), out)


CholeskyExResult = collections.namedtuple("cholesky_ex", ["L", "info"])


def _raise_chol(info, fname):
    ih = to_host(info)
    bad = np.flatnonzero(ih.reshape(-1))
    if bad.size:
        i = int(bad[0])
        pre = f"(Batch element {i}): " if ih.ndim else ""
        raise LinAlgError(f"{fname}: {pre}The factorization could not be completed because the input is not "
                          f"positive-definite (the leading minor of order {int(ih.reshape(-1)[i])} is not "
                          "positive-definite).")


# -------------------------------------------------------------------------------------------- LU
def _lu_host(A):
    LU, piv, info = lu_np(A)
    return LU, piv, info


def _lu_bw(ctx, gLU, gpiv=None, ginfo=None):
    A, LU, piv, _ = ctx.saved_tensors
    if gLU is None:
        return (None,)
    m, n = LU._shape[-2], LU._shape[-1]
    k = min(m, n)
    from .creation import eye
    L = LU[..., :, :k].tril(-1) + eye(m, k, dtype=LU.dtype, device=LU.device)
    U = LU[..., :k, :].triu()
    gL = gLU[..., :, :k].tril(-1)
    gU = gLU[..., :k, :].triu()
    from .joins import cat
    if m <= n:
        # A1_grad = P L^-H [tril(-1)(L^H gL - gU U^H) U1^-H + triu(gU1)], A2_grad = P L^-H gU2
        U1, gU1 = U[..., :, :k], gU[..., :, :k]
        X = (_mT(L) @ gL - gU @ _mT(U)).tril(-1)
        X = solve_triangular(_mT(U1), X, upper=False, left=False)
        X = cat([X + gU1, gU[..., :, k:]], -1) if n > k else X + gU1
        gA = solve_triangular(_mT(L), X, upper=True, left=True, unitriangular=True)
    else:
        # A1_grad = P [L1_grad + L1^-H triu(gU U^H - L^H gL)] U^-H, A2_grad = P L2_grad U^-H
        L1, gL1 = L[..., :k, :], gL[..., :k, :]
        X = (gU @ _mT(U) - _mT(L) @ gL).triu()
        X = solve_triangular(_mT(L1), X, upper=True, left=True, unitriangular=True)
        X = cat([X + gL1, gL[..., k:, :]], -2)
        gA = solve_triangular(_mT(U), X, upper=False, left=False)
    inv = np.argsort(perm_from_pivots(to_host(piv), m), axis=-1)      # (P Y)[r] = Y[perm^-1[r]]
    inv = to_device(inv.astype(np.int64), LU.device)
    return (gA.gather(-2, inv.unsqueeze(-1).expand(*gA._shape)),)


_lu_op = host_op("linalg_lu_factor_ex", _lu_host, _lu_bw, differentiable_outputs=(0,),
                 dtypes=(None, D.int32, D.int32))

LUFactorExResult = collections.namedtuple("lu_factor_ex", ["LU", "pivots", "info"])


def lu_factor_ex(A, *, pivot=True, check_errors=False, out=None):
    """``torch.linalg.lu_factor_ex``: (LU, pivots, info) of A (..., m, n) with partial pivoting: LU packs the
    unit lower L (below the diagonal) and U, pivots (..., min(m, n)) int32 are LAPACK's 1-based row swaps, info
    the first zero pivot (1-based) or 0. pivot=False raises, as PyTorch on the CPU does. Host: numpy Crout
    LU (``lu_np``). Gradient: PyTorch's lu_factor_ex_backward (square, wide and tall)."""
    fname = "torch.linalg.lu_factor_ex"
    check_matrix(A, "linalg.lu_factor_ex", square=False)
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    LU, piv, info = call(_lu_op, A)
    if check_errors:
        _raise_singular(info, fname)
    return _out(LUFactorExResult(LU, piv, info), out)


def _raise_singular(info, fname, what="factorization"):
    ih = to_host(info)
    bad = np.flatnonzero(ih.reshape(-1))
    if bad.size:
        i = int(bad[0])
        pre = f"(Batch element {i}): " if ih.ndim else ""
        if what == "factorization":
            msg = (f"{fname}: {pre}U[{int(ih.reshape(-1)[i])},{int(ih.reshape(-1)[i])}] is zero and using it on "
                   "lu_solve would result in a division by zero. If you still want to perform the factorization, "
                   "consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")
        else:
            msg = (f"{fname}: {pre}The diagonal element {int(ih.reshape(-1)[i])} is zero, the {what} could not "
                   "be completed because the input matrix is singular.")
        raise (RuntimeError if what == "factorization" else LinAlgError)(msg)     # PyTorch's types


# -------------------------------------------------------------------------------------------- QR
def _qr_host(A, mode):
    if mode == "r":
        R = np.linalg.qr(A, mode="r")
        return np.empty((0,), A.dtype), R.astype(A.dtype, copy=False)
    Q, R = np.linalg.qr(A, mode=mode)
    return Q.astype(A.dtype, copy=False), R.astype(A.dtype, copy=False)


def _qr_sq(Q, R, gQ, gR):
    """m >= n (reduced): gA = [gQ + Q copyltu(M)] R^-H with M = R gR^H - gQ^H Q, copyltu(M) = tril(M) +
    tril(M, -1)^H."""
    M = None
    if gR is not None:
        M = R @ _mT(gR)
    if gQ is not None:
        t = _mT(gQ) @ Q
        M = -t if M is None else M - t
    Mt = M.tril(-1)
    b = Q @ (M.tril() + _mT(Mt))
    if gQ is not None:
        b = b + gQ
    return solve_triangular(_mT(R), b, upper=False, left=False)        # b R^-H


def _qr_bw(ctx, gQ, gR):
    A, Q, R = ctx.saved_tensors
    mode = ctx.kw["mode"]
    m, n = A._shape[-2], A._shape[-1]
    if mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
                           "Please use linalg.qr(A, mode='reduced') if you are going to differentiate through "
                           "linalg.qr.")
    if mode == "complete" and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
    if m >= n:
        return (_qr_sq(Q, R, gQ, gR),)
    # wide: A = Q [X | Y]; X = R[:, :m] is the square QR's R, Y = Q^H A2
    X, Y = R[..., :, :m], R[..., :, m:]
    gX = gY = None
    if gR is not None:
        gX, gY = gR[..., :, :m], gR[..., :, m:]
    gQ2 = gQ
    if gY is not None:
        t = A[..., :, m:] @ _mT(gY)
        gQ2 = t if gQ2 is None else gQ2 + t
    gA1 = _qr_sq(Q, X, gQ2, gX)
    gA2 = Q @ gY if gY is not None else gA1.new_zeros(*A._shape[:-1], n - m)
    from .joins import cat
    return (cat([gA1, gA2], -1),)


_qr_op = host_op("linalg_qr", _qr_host, _qr_bw)
QRResult = collections.namedtuple("qr", ["Q", "R"])


def qr(A, mode="reduced", *, out=None):
    """``torch.linalg.qr``: (Q, R) of A (..., m, n), k = min(m, n). mode 'reduced': Q (m, k), R (k, n);
    'complete': Q (m, m), R (m, n); 'r': R only (Q empty). Host: numpy.linalg.qr (geqrf + orgqr). Gradient:
    PyTorch's linalg_qr_backward (not for mode 'r', nor 'complete' with m > n: RuntimeError)."""
    check_matrix(A, "linalg.qr", square=False)
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', "
                           "or 'complete'")
    return _out(QRResult(*call(_qr_op, A, mode=mode)), out)


# -------------------------------------------------------------------------------------------- SVD
def _svd_host(A, full_matrices):
    U, S, Vh = np.linalg.svd(A, full_matrices=full_matrices)
    return U.astype(A.dtype, copy=False), S.astype(A.dtype, copy=False), Vh.astype(A.dtype, copy=False)


def svd_backward(U, S, Vh, gU, gS, gVh, m, n):
    """PyTorch's linalg_svd_backward (real case) with U (..., m, k), S (..., k), Vh (..., k, n)."""
    if gU is None and gVh is None:
        return (U * gS.unsqueeze(-2)) @ Vh
    skew = (lambda X: X - _mT(X))
    S2 = S * S
    from .creation import eye
    k = S._shape[-1]
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1) + eye(k, dtype=S.dtype, device=S.device)
    if gU is not None:
        UhgU = skew(_mT(U) @ gU)
    if gVh is not None:
        VhgV = skew(Vh @ _mT(gVh))
    if gU is not None and gVh is not None:
        ret = (UhgU * S.unsqueeze(-2) + S.unsqueeze(-1) * VhgV) / E
    elif gU is not None:
        ret = (UhgU / E) * S.unsqueeze(-2)
    else:
        ret = S.unsqueeze(-1) * (VhgV / E)
    if gS is not None:
        ret = ret + gS.diag_embed()
    if m > n and gU is not None:
        gA = U @ ret
        gUSinv = gU / S.unsqueeze(-2)
        gA = gA + gUSinv - U @ (_mT(U) @ gUSinv)
        return gA @ Vh
    if m < n and gVh is not None:
        gA = ret @ Vh
        SinvgVh = gVh / S.unsqueeze(-1)
        gA = gA + SinvgVh - (SinvgVh @ _mT(Vh)) @ Vh
        return U @ gA
    return U @ (ret @ Vh) if m >= n else (U @ ret) @ Vh


def _svd_bw(ctx, gU, gS, gVh):
    A, U, S, Vh = ctx.saved_tensors
    m, n = A._shape[-2], A._shape[-1]
    k = min(m, n)
    if ctx.kw["full_matrices"] and m != n:
        U, Vh = U[..., :, :k], Vh[..., :k, :]
        gU = gU[..., :, :k] if gU is not None else None
        gVh = gVh[..., :k, :] if gVh is not None else None
    if gU is None and gS is None and gVh is None:
        return (None,)
    return (svd_backward(U, S, Vh, gU, gS if gS is not None else S.new_zeros(*S._shape), gVh, m, n),)


_svd_op = host_op("linalg_svd", _svd_host, _svd_bw)
SVDResult = collections.namedtuple("svd", ["U", "S", "Vh"])


def svd(A, full_matrices=True, *, driver=None, out=None):
    """``torch.linalg.svd``: (U, S, Vh) with A = U diag(S) Vh for A (..., m, n), S (..., k) descending,
    k = min(m, n); full_matrices: U (m, m) and Vh (n, n), else (m, k) and (k, n). ``driver`` (CUDA-only in
    PyTorch) must be None. Host: numpy.linalg.svd (gesdd). Gradient: PyTorch's linalg_svd_backward; with
    full_matrices and m != n the extra columns of U / rows of Vh get no gradient, as in PyTorch."""
    check_matrix(A, "linalg.svd", square=False)
    if driver is not None:
        raise RuntimeError("torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with "
                           "cuSOLVER backend.")
    return _out(SVDResult(*call(_svd_op, A, full_matrices=bool(full_matrices))), out)


def svdvals(A, *, driver=None, out=None):
    """``torch.linalg.svdvals``: singular values (..., k), descending. Host: numpy.linalg.svd without U, V when
    no gradient is needed; with one, through ``svd`` (gradient U diag(gS) Vh)."""
    check_matrix(A, "linalg.svdvals", square=False)
    from .._dispatch import is_grad_enabled
    if A.requires_grad and is_grad_enabled():
        r = svd(A, full_matrices=False).S
    else:
        r = to_device(np.linalg.svd(to_host(A), compute_uv=False).astype(A.dtype.np), A.device)
    return r if out is None else out.copy_(r)


# -------------------------------------------------------------------------------------------- eigh
def _eigh_host(A, UPLO):
    w, V = np.linalg.eigh(A, UPLO=UPLO)
    return w.astype(A.dtype, copy=False), V.astype(A.dtype, copy=False)


def _eigh_bw(ctx, gL, gV):
    A, L, V = ctx.saved_tensors
    if gV is None:
        return ((V * gL.unsqueeze(-2)) @ _mT(V),)
    from .creation import eye
    n = L._shape[-1]
    E = L.unsqueeze(-2) - L.unsqueeze(-1)            # E[i, j] = L_j - L_i
    I = eye(n, dtype=L.dtype, device=L.device)
    ret = (_mT(V) @ gV) / (E + I) * (1 - I)
    if gL is not None:
        ret = ret + gL.diag_embed()
    gA = (V @ ret) @ _mT(V)
    return (0.5 * (gA + _mT(gA)),)     # PyTorch's gradient is the symmetric one


_eigh_op = host_op("linalg_eigh", _eigh_host, _eigh_bw)
EighResult = collections.namedtuple("eigh", ["eigenvalues", "eigenvectors"])


def eigh(A, UPLO="L", *, out=None):
    """``torch.linalg.eigh``: (eigenvalues ascending (..., n), eigenvectors (..., n, n) as columns) of the
    symmetric matrices A, reading the ``UPLO`` ('L' or 'U') triangle. Host: numpy.linalg.eigh (syevd).
    Gradient: PyTorch's linalg_eig_backward, hermitian case (well defined for distinct eigenvalues)."""
    check_matrix(A, "linalg.eigh")
    if UPLO not in ("L", "U", "l", "u"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return _out(EighResult(*call(_eigh_op, A, UPLO=UPLO.upper())), out)


def eigvalsh(A, UPLO="L", *, out=None):
    """``torch.linalg.eigvalsh``: eigenvalues ascending (..., n) of symmetric A. Host: numpy.linalg.eigvalsh;
    through ``eigh`` when a gradient is needed (V diag(gL) V^H)."""
    check_matrix(A, "linalg.eigvalsh")
    if UPLO not in ("L", "U", "l", "u"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    from .._dispatch import is_grad_enabled
    if A.requires_grad and is_grad_enabled():
        r = eigh(A, UPLO).eigenvalues
    else:
        r = to_device(np.linalg.eigvalsh(to_host(A), UPLO=UPLO.upper()).astype(A.dtype.np), A.device)
    return r if out is None else out.copy_(r)


# -------------------------------------------------------------------------------------------- pinv / lstsq
def _tol(S, atol, rtol, m, n, dtype):
    """PyTorch's cut-off: max(atol, rtol * max(S)); rtol defaults to eps * max(m, n) when atol is not given
    (and to 0 when it is)."""
    smax = S.max(axis=-1, initial=0.0) if S.shape[-1] else np.zeros(S.shape[:-1], S.dtype)
    atol = np.zeros(()) if atol is None else np.asarray(atol)
    if rtol is None:
        rtol = np.finfo(dtype).eps * max(m, n) if not np.any(atol > 0) else 0.0
    return np.maximum(atol, np.asarray(rtol) * smax)


def _pinv_host(A, atol, rtol, hermitian):
    m, n = A.shape[-2], A.shape[-1]
    if hermitian:
        w, V = np.linalg.eigh(A)
        S = np.abs(w)
        tol = _tol(S, atol, rtol, m, n, A.dtype)
        with np.errstate(divide="ignore"):
            inv = np.where(S > tol[..., None], 1.0 / np.where(S == 0, 1, w), 0)
        return ((V * inv[..., None, :]) @ np.swapaxes(V, -1, -2)).astype(A.dtype)
    U, S, Vh = np.linalg.svd(A, full_matrices=False)
    tol = _tol(S, atol, rtol, m, n, A.dtype)
    inv = np.where(S > tol[..., None], 1.0 / np.where(S == 0, 1, S), 0)
    return (np.swapaxes(Vh, -1, -2) * inv[..., None, :]) @ np.swapaxes(U, -1, -2)


def pinv_backward(g, P, A):
    """PyTorch's pinv_backward (real): gradient of A given that of P = pinv(A)."""
    m, n = A._shape[-2], A._shape[-1]
    Ph, gh = _mT(P), _mT(g)
    if m <= n:
        K = gh @ P
        KPh = K @ Ph
        return -_mT(P @ K) + KPh - (A @ P) @ KPh + (Ph @ P) @ (gh - K @ A)
    K = P @ gh
    PhK = Ph @ K
    return -_mT(K @ P) + ((gh - A @ K) @ P) @ Ph + PhK - (PhK @ P) @ A


def _pinv_bw(ctx, g):
    A, P = ctx.saved_tensors
    return (pinv_backward(g, P, A),)


_pinv_op = host_op("linalg_pinv", _pinv_host, _pinv_bw)


def pinv(A, *, atol=None, rtol=None, hermitian=False, rcond=None, out=None):
    """``torch.linalg.pinv``: Moore-Penrose pseudo-inverse (..., n, m) of A (..., m, n): singular values at
    most max(atol, rtol * max(S)) are treated as zero (rtol defaults to eps * max(m, n) when atol is None;
    ``rcond`` is the deprecated name of rtol). ``hermitian``: A is symmetric, through eigh. atol/rtol may be
    floats or tensors broadcasting against the batch. Host: numpy.linalg.svd / eigh. Gradient: PyTorch's
    pinv_backward."""
    check_matrix(A, "linalg.pinv", square=False)
    if rcond is not None:
        rtol = rcond
    if isinstance(atol, Tensor):
        atol = to_host(atol)
    if isinstance(rtol, Tensor):
        rtol = to_host(rtol)
    r = call(_pinv_op, A, atol=atol, rtol=rtol, hermitian=bool(hermitian))
    return r if out is None else out.copy_(r)


def _lstsq_host(A, B, rcond, driver):
    bs = _bshape(A.shape[:-2], B.shape[:-2])
    A = np.broadcast_to(A, bs + A.shape[-2:])
    B = np.broadcast_to(B, bs + B.shape[-2:])
    m, n = A.shape[-2:]
    k = B.shape[-1]
    fa, fb = flat3(A), flat3(B)
    X = np.zeros((fa.shape[0], n, k), A.dtype)
    ranks = np.zeros(fa.shape[0], np.int64)
    svs = np.zeros((fa.shape[0], min(m, n)), A.dtype)
    res = np.zeros((fa.shape[0], k), A.dtype)
    rc = rcond if rcond is not None else np.finfo(A.dtype).eps * max(m, n)
    for i in range(fa.shape[0]):
        x, r, rk, sv = np.linalg.lstsq(fa[i], fb[i], rcond=rc)
        X[i], ranks[i], svs[i] = x, rk, sv
        if r.size:
            res[i] = r
    X = X.reshape(bs + (n, k))
    full = m > n and bool(np.all(ranks == n))
    residuals = res.reshape(bs + (k,)) if (full and driver != "gelsy") else np.zeros((0,), A.dtype)
    rank = ranks.reshape(bs) if driver != "gels" else np.zeros((0,), np.int64)
    sv = svs.reshape(bs + (min(m, n),)) if driver in ("gelsd", "gelss") else np.zeros((0,), A.dtype)
    return X, residuals, rank, sv


def _lstsq_bw(ctx, gX, gres=None, grank=None, gsv=None):
    A, B, X = ctx.saved_tensors[:3]
    gA = gB = None
    if gX is not None:
        P = pinv(A)                       # differentiable, so create_graph gives second derivatives
        gA = pinv_backward(gX @ _mT(B), P, A) if ctx.needs_input_grad[0] else None
        gB = _mT(P) @ gX if ctx.needs_input_grad[1] else None
    if gres is not None and gres.numel():
        # residuals r_j = ||A x_j - b_j||^2 at the least-squares x_j (where d r_j / d x_j = 0)
        Rw = (A @ X - B) * (2 * gres.unsqueeze(-2))
        if ctx.needs_input_grad[0]:
            gA = Rw @ _mT(X) if gA is None else gA + Rw @ _mT(X)
        if ctx.needs_input_grad[1]:
            gB = -Rw if gB is None else gB - Rw
    return gA, gB


_lstsq_op = host_op("linalg_lstsq", _lstsq_host, _lstsq_bw, differentiable_outputs=(0, 1),
                    dtypes=(None, None, D.int64, None))


def lstsq_core(A, B, rcond, driver):
    """(solution, residuals, rank, singular_values) for A (..., m, n), B (..., m, k) (batch dims broadcast)."""
    return call(_lstsq_op, A, B, rcond=rcond, driver=driver)
