"""torch.linalg's factorization and solve API and the legacy ``torch.*`` / Tensor methods, built on the host
ops of ``lapack.py`` and composed from cltorch ops (so their gradients come from those).

Where each runs (see ``lapack.py`` for the host ops):

==========================================  ==================================================================
op                                          how
==========================================  ==================================================================
linalg.inv(_ex), inverse                    solve(A, I) (host numpy.linalg.solve)
linalg.solve(_ex)                           host numpy.linalg.solve; vector/left=False cases as views
linalg.lu, lu_unpack                        host LU + tril/triu/narrow on the device; P from the pivots (host)
linalg.lu_solve, lu_solve                   composed on the device: P^T, two triangular solves (host trsm)
cholesky_solve                              host op (two triangular solves); PyTorch's backward
cholesky_inverse                            cholesky_solve(I, L)
linalg.matrix_rank                          host numpy.linalg.svd / eigvalsh (a count: not differentiable)
linalg.householder_product, ormqr           composed on the device: k rank-1 reflector updates
geqrf                                       host numpy.linalg.qr(mode='raw') (not differentiable, as PyTorch)
linalg.matrix_exp, matrix_exp               host numpy in float64: degree-18 Taylor + scaling and squaring;
                                            backward: matrix_exp of a 2n x 2n block matrix
svd_lowrank, pca_lowrank                    composed: randomized range finder (Halko et al. 2009, alg. 5.1)
linalg.ldl_factor(_ex), ldl_solve           host numpy code (lapack_ldl.py): Bunch-Kaufman, LAPACK's pivots
linalg.eig, eigvals                         host numpy.linalg.eig (geev); complex64/128 results
==========================================  ==================================================================
"""
import collections

import numpy as np

from .. import _dtype as D
from .._dispatch import call, is_grad_enabled
from .._tensor import Tensor
from ._util import method
from . import lapack as L
from .lapack import (LinAlgError, check_matrix, host_op, to_device, to_host, solve_triangular, slogdet, det,  # noqa
                     cholesky_ex, lu_factor_ex, qr, svd, svdvals, pinv)

# torch.* names are bound in cltorch/__init__.py (svd_legacy as svd, ...); torch.linalg's in cltorch/linalg.
__all__ = ["solve", "solve_ex", "inv", "inv_ex", "inverse", "logdet", "cholesky", "cholesky_legacy",
           "cholesky_solve", "cholesky_inverse", "lu_factor", "lu_unpack", "lu", "lu_solve", "lu_legacy",
           "lu_solve_legacy", "triangular_solve", "qr_legacy", "svd_legacy", "pinverse", "matrix_rank", "lstsq",
           "householder_product", "orgqr", "ormqr", "geqrf", "matrix_exp", "svd_lowrank", "pca_lowrank", "eig",
           "eigvals"]


def _mT(x):
    return x.transpose(-1, -2)


def _eye(n, like, m=None):
    from .creation import eye
    return eye(n, m if m is not None else n, dtype=like.dtype, device=like.device)


def _out(r, out):
    if out is None:
        return r
    if isinstance(r, tuple):
        for o, v in zip(out, r):
            o.copy_(v)
        return out
    return out.copy_(r)


# -------------------------------------------------------------------------------------------- solve / inv
SolveExResult = collections.namedtuple("solve_ex", ["result", "info"])
InvExResult = collections.namedtuple("inv_ex", ["inverse", "info"])


def _is_vector_rhs(A, B):
    return B.dim() == 1 or (A.dim() - 1 == B.dim() and tuple(B._shape) == tuple(A._shape[:-1]))


def solve_ex(A, B, *, left=True, check_errors=False, out=None):
    """``torch.linalg.solve_ex``: (result, info): X with A X = B (``left=False``: X A = B) for square A
    (..., n, n) and B (..., n, k), or B (..., n) a batch of vectors (B.dim() == 1, or B's shape is A's without
    the last dim); batch dims broadcast. info (...) int32: 0, or the first zero pivot of A's LU (then X holds
    nan). ``check_errors``: LinAlgError for a singular A. Host: numpy.linalg.solve. Differentiable in A, B."""
    fname = "torch.linalg.solve"
    check_matrix(A, "linalg.solve")
    check_matrix(B, "linalg.solve", square=False, name="B", min_dim=1)
    L._same(A, B, "linalg.solve")
    vec = _is_vector_rhs(A, B)
    n = A._shape[-1]
    Bm = B.unsqueeze(-1) if vec else (B if left else _mT(B))
    Am = A if left else _mT(A)
    if Bm._shape[-2] != n:
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({A._shape[-2]}x{n} and "
                           f"{'x'.join(str(s) for s in (B._shape[-2:] if not vec else B._shape[-1:] + (1,)))})")
    X, info = L.solve_matrix(Am, Bm)
    X = X.squeeze(-1) if vec else (X if left else _mT(X))
    if check_errors:
        _raise_solve(info, fname)
    return _out(SolveExResult(X, info), out)


def _raise_solve(info, fname):
    ih = to_host(info)
    bad = np.flatnonzero(ih.reshape(-1))
    if bad.size:
        pre = f"(Batch element {int(bad[0])}): " if ih.ndim else ""
        raise LinAlgError(f"{fname}: {pre}The solver failed because the input matrix is singular.")


def solve(A, B, *, left=True, out=None):
    """``torch.linalg.solve``: as ``solve_ex`` but raises LinAlgError (a RuntimeError) for a singular A."""
    return _out(solve_ex(A, B, left=left, check_errors=True).result, out)


def inv_ex(A, *, check_errors=False, out=None, _fname="linalg.inv_ex"):
    """``torch.linalg.inv_ex``: (inverse, info) of square A (..., n, n); info as ``solve_ex``'s. Computed as
    solve(A, I) (host numpy.linalg.solve); gradient -A^-H g A^-H."""
    check_matrix(A, "linalg.inv")
    X, info = L.solve_matrix(A, _eye(A._shape[-1], A))
    if check_errors:
        L._raise_singular(info, _fname, "inversion")
    return _out(InvExResult(X, info), out)


def inv(A, *, out=None):
    """``torch.linalg.inv``: inverse of square A (..., n, n); LinAlgError for a singular matrix."""
    return _out(inv_ex(A, check_errors=True, _fname="linalg.inv").inverse, out)


def inverse(input, *, out=None):  # noqa: A002
    """``torch.inverse``: alias of ``torch.linalg.inv``."""
    return inv(input, out=out)


# -------------------------------------------------------------------------------------------- det family
def logdet(input):  # noqa: A002
    """``torch.logdet``: log(det(A)) of square A (...): nan for a negative determinant, -inf for a singular A.
    From slogdet, so differentiable (A^-H)."""
    s, la = slogdet(input)
    from .pointwise import where
    nan = la.new_full((), float("nan"))
    return where(s < 0, nan, la)


# -------------------------------------------------------------------------------------------- cholesky
def cholesky(A, *, upper=False, out=None):
    """``torch.linalg.cholesky``: L with A = L L^H (``upper``: U with A = U^H U) for symmetric positive-
    definite A (..., n, n); LinAlgError naming the failing leading minor otherwise."""
    return _out(cholesky_ex(A, upper=upper, check_errors=True).L, out)


def cholesky_legacy(input, upper=False, *, out=None):  # noqa: A002
    """``torch.cholesky(input, upper=False)`` (deprecated in PyTorch): as ``torch.linalg.cholesky``."""
    return cholesky(input, upper=upper, out=out)


def _chsolve_host(B, Lf, upper):
    bs = L._bshape(B.shape[:-2], Lf.shape[:-2])
    B = np.broadcast_to(B, bs + B.shape[-2:])
    Lf = np.broadcast_to(Lf, bs + Lf.shape[-2:])
    if upper:      # A = U^H U: U^H Y = B, U X = Y
        Y = L.trsm_np(np.swapaxes(Lf, -1, -2), B, lower=True)
        return L.trsm_np(Lf, Y, lower=False).astype(B.dtype, copy=False)
    Y = L.trsm_np(Lf, B, lower=True)
    return L.trsm_np(np.swapaxes(Lf, -1, -2), Y, lower=False).astype(B.dtype, copy=False)


def _chsolve_bw(ctx, g):
    B, Lf, X = ctx.saved_tensors
    upper = ctx.kw["upper"]
    gB = cholesky_solve(g, Lf, upper)
    gL = None
    if ctx.needs_input_grad[1]:
        c = gB @ _mT(X)
        c = c + _mT(c)
        gL = -(Lf @ c) if upper else -(c @ Lf)
    return gB if ctx.needs_input_grad[0] else None, gL


_chsolve_op = host_op("cholesky_solve", _chsolve_host, _chsolve_bw)


def cholesky_solve(input, input2, upper=False, *, out=None):  # noqa: A002
    """``torch.cholesky_solve(B, L, upper=False)``: X with A X = B where A = L L^H (``upper``: A = U^H U), for
    B (..., n, k) and the Cholesky factor (..., n, n) (only its triangle is read); batch dims broadcast. Host:
    two triangular solves. Gradient: PyTorch's cholesky_solve_backward."""
    check_matrix(input, "cholesky_solve", square=False, name="B")
    check_matrix(input2, "cholesky_solve")
    L._same(input, input2, "cholesky_solve")
    if input._shape[-2] != input2._shape[-1]:
        raise RuntimeError(f"Incompatible matrix sizes for cholesky_solve: each A matrix is {input2._shape[-1]} by "
                           f"{input2._shape[-1]} but each b matrix is {input._shape[-2]} by {input._shape[-1]}")
    return _out(call(_chsolve_op, input, input2, upper=bool(upper)), out)


def cholesky_inverse(input, upper=False, *, out=None):  # noqa: A002
    """``torch.cholesky_inverse(L, upper=False)``: (L L^H)^-1 (``upper``: (U^H U)^-1) from a Cholesky factor
    (..., n, n); cholesky_solve(I, L)."""
    check_matrix(input, "cholesky_inverse")
    return _out(cholesky_solve(_eye(input._shape[-1], input), input, upper), out)


# -------------------------------------------------------------------------------------------- LU
LUFactorResult = collections.namedtuple("lu_factor", ["LU", "pivots"])
LUResult = collections.namedtuple("lu", ["P", "L", "U"])
LUUnpackResult = collections.namedtuple("lu_unpack", ["P", "L", "U"])


def lu_factor(A, *, pivot=True, out=None):
    """``torch.linalg.lu_factor``: (LU, pivots) as ``lu_factor_ex``; LinAlgError for a singular matrix."""
    LU, piv, info = lu_factor_ex(A, pivot=pivot)
    L._raise_singular(info, "torch.linalg.lu_factor")
    return _out(LUFactorResult(LU, piv), out)


def _perm_matrix(pivots, m, like):
    """P (..., m, m) in ``like``'s dtype and device with A = P L U, from LAPACK pivots."""
    perm = L.perm_from_pivots(to_host(pivots), m)
    P = np.zeros(perm.shape[:-1] + (m, m), like.dtype.np)
    np.put_along_axis(P, perm[..., :, None], 1, axis=-1)     # P^T[i, perm[i]] = 1
    return to_device(np.swapaxes(P, -1, -2), like.device)


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, out=None):
    """``torch.lu_unpack``: (P, L, U) from ``lu_factor``'s packed LU (..., m, n) and pivots (..., k): P (m, m),
    L (m, k) unit lower, U (k, n) upper; an unrequested part is an empty tensor. Differentiable in LU_data
    (tril/triu of it); P is built on the host from the pivots."""
    if not isinstance(LU_data, Tensor) or LU_data.dim() < 2:
        raise RuntimeError("torch.lu_unpack: Expected tensor with 2 or more dimensions. Got size: "
                           f"{list(getattr(LU_data, '_shape', ()))} instead")
    if LU_pivots.dtype is not D.int32:
        raise RuntimeError("torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 dtype."
                           f"\nNote: this function is intended to be used with the output produced by "
                           f"torch.linalg.lu_factor")
    m, n = LU_data._shape[-2], LU_data._shape[-1]
    k = min(m, n)
    empty = LU_data.new_empty(0)
    if unpack_data:
        Lm = LU_data[..., :, :k].tril(-1) + _eye(m, LU_data, k)
        Um = LU_data[..., :k, :].triu()
    else:
        Lm = Um = empty
    P = _perm_matrix(LU_pivots, m, LU_data) if unpack_pivots else empty
    return _out(LUUnpackResult(P, Lm, Um), out)


def lu(A, *, pivot=True, out=None):
    """``torch.linalg.lu``: (P, L, U) with A = P L U for A (..., m, n): P (m, m), L (m, k) unit lower, U (k, n)
    upper, k = min(m, n). Host LU (``lu_factor_ex``), unpacked on the device; differentiable (PyTorch's LU
    backward, square/wide/tall). pivot=False raises as PyTorch on the CPU."""
    check_matrix(A, "linalg.lu", square=False)
    LU, piv, _ = lu_factor_ex(A, pivot=pivot)
    return _out(LUResult(*lu_unpack(LU, piv)), out)


def lu_solve(LU, pivots, B, *, left=True, adjoint=False, out=None):
    """``torch.linalg.lu_solve``: X with A X = B (``adjoint``: A^H X = B; ``left=False``: X A = B or X A^H = B)
    where A = P L U is given by ``lu_factor``'s (LU, pivots); B (..., n, k) (left) or (..., k, n); batch dims
    broadcast. Composed on the device from a permutation matmul and two triangular solves, so differentiable
    in LU and B."""
    fname = "linalg.lu_solve"
    check_matrix(LU, fname, name="LU")
    check_matrix(B, fname, square=False, name="B")
    L._same(LU, B, fname)
    n = LU._shape[-1]
    if (B._shape[-2] if left else B._shape[-1]) != n:
        raise RuntimeError(f"{fname}: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({n}x{n} and {B._shape[-2]}x{B._shape[-1]})")
    if pivots.dtype is not D.int32:
        raise RuntimeError(f"{fname}: pivots should be a Tensor of scalar type int32. Got: {pivots.dtype}")
    P, Lm, Um = lu_unpack(LU, pivots)
    if left and not adjoint:        # X = U^-1 L^-1 P^T B
        Y = solve_triangular(Lm, _mT(P) @ B, upper=False, unitriangular=True)
        X = solve_triangular(Um, Y, upper=True)
    elif left:                      # A^H X = B: X = P L^-H U^-H B
        Y = solve_triangular(_mT(Um), B, upper=False)
        X = P @ solve_triangular(_mT(Lm), Y, upper=True, unitriangular=True)
    elif not adjoint:               # X A = B: X = B U^-1 L^-1 P^T
        Y = solve_triangular(Um, B, upper=True, left=False)
        X = solve_triangular(Lm, Y, upper=False, left=False, unitriangular=True) @ _mT(P)
    else:                           # X A^H = B: X = B P L^-H U^-H
        Y = solve_triangular(_mT(Lm), B @ P, upper=True, left=False, unitriangular=True)
        X = solve_triangular(_mT(Um), Y, upper=False, left=False)
    return _out(X, out)


def lu_legacy(A, pivot=True, get_infos=False, out=None):
    """``torch.lu(A, pivot=True, get_infos=False)`` (deprecated in PyTorch): (LU, pivots[, infos]) without
    raising for singular matrices."""
    LU, piv, info = lu_factor_ex(A, pivot=pivot)
    return (LU, piv, info) if get_infos else (LU, piv)


def lu_solve_legacy(b, LU_data, LU_pivots, *, out=None):
    """``torch.lu_solve(b, LU_data, LU_pivots)`` (deprecated in PyTorch): linalg.lu_solve(LU, pivots, b)."""
    return lu_solve(LU_data, LU_pivots, b, out=out)


# -------------------------------------------------------------------------------------------- triangular (legacy)
TriangularSolveResult = collections.namedtuple("triangular_solve", ["solution", "cloned_coefficient"])


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False, *, out=None):
    """``torch.triangular_solve(b, A, upper=True, transpose=False, unitriangular=False)`` (deprecated in
    PyTorch): (solution of op(A) X = b with op(A) = A or A^T, a clone of A); batch dims broadcast."""
    check_matrix(A, "triangular_solve")
    check_matrix(b, "triangular_solve", square=False, name="b")
    At = _mT(A) if transpose else A
    X = solve_triangular(At, b, upper=(upper != bool(transpose)), unitriangular=unitriangular)
    return _out(TriangularSolveResult(X, A.clone()), out)


# -------------------------------------------------------------------------------------------- QR / SVD (legacy)
def qr_legacy(input, some=True, *, out=None):  # noqa: A002
    """``torch.qr(input, some=True)`` (deprecated in PyTorch): linalg.qr with mode 'reduced' (some) or
    'complete'."""
    return _out(qr(input, "reduced" if some else "complete"), out)


SVDLegacyResult = collections.namedtuple("svd", ["U", "S", "V"])


def svd_legacy(input, some=True, compute_uv=True, *, out=None):  # noqa: A002
    """``torch.svd(input, some=True, compute_uv=True)``: (U, S, V) with A = U diag(S) V^H (V, not Vh);
    ``some=False`` gives full U, V. compute_uv=False: U (m, m) and V (n, n) zero-filled, S differentiable."""
    check_matrix(input, "svd", square=False)
    if not compute_uv:
        m, n = input._shape[-2], input._shape[-1]
        from .creation import zeros
        lead = tuple(input._shape[:-2])
        S = svdvals(input)
        return _out(SVDLegacyResult(zeros(lead + (m, m), dtype=input.dtype, device=input.device), S,
                                    zeros(lead + (n, n), dtype=input.dtype, device=input.device)), out)
    U, S, Vh = svd(input, full_matrices=not some)
    return _out(SVDLegacyResult(U, S, _mT(Vh)), out)


def pinverse(input, rcond=1e-15):  # noqa: A002
    """``torch.pinverse(input, rcond=1e-15)``: linalg.pinv with rtol=rcond."""
    return pinv(input, rtol=rcond)


# -------------------------------------------------------------------------------------------- rank / lstsq
def matrix_rank(A, tol=None, hermitian=False, *, atol=None, rtol=None, out=None):
    """``torch.linalg.matrix_rank``: number (...) int64 of singular values (eigenvalue magnitudes when
    ``hermitian``) above max(atol, rtol * max(S)); rtol defaults to eps * max(m, n) when atol is None. ``tol``
    (the deprecated positional form) is atol with rtol 0. Host: numpy.linalg.svd / eigvalsh."""
    check_matrix(A, "linalg.matrix_rank", square=bool(hermitian))
    if tol is not None:
        atol, rtol = tol, 0.0 if rtol is None else rtol
    a = to_host(A)
    S = np.abs(np.linalg.eigvalsh(a)) if hermitian else np.linalg.svd(a, compute_uv=False)
    at = to_host(atol) if isinstance(atol, Tensor) else atol
    rt = to_host(rtol) if isinstance(rtol, Tensor) else rtol
    tolv = L._tol(S, at, rt, A._shape[-2], A._shape[-1], a.dtype)
    r = (S > tolv[..., None]).sum(-1).astype(np.int64)
    return _out(to_device(r, A.device, D.int64), out)


LstsqResult = collections.namedtuple("lstsq", ["solution", "residuals", "rank", "singular_values"])


def lstsq(A, B, rcond=None, *, driver=None):
    """``torch.linalg.lstsq``: least-squares solution of A X = B for A (..., m, n), B (..., m, k) or (..., m);
    returns (solution (..., n, k), residuals (squared, when m > n, every matrix full rank and the driver is
    not 'gelsy'), rank (drivers gelsy/gelsd/gelss), singular_values (gelsd/gelss)), as PyTorch's CPU
    (default driver 'gelsy'). Host: numpy.linalg.lstsq (gelsd) whatever the driver, so rank-deficient
    solutions are the minimum-norm ones. Gradient: PyTorch's linalg_lstsq_backward (through pinv)."""
    fname = "torch.linalg.lstsq"
    check_matrix(A, "linalg.lstsq", square=False)
    check_matrix(B, "linalg.lstsq", square=False, name="B", min_dim=1)
    L._same(A, B, "linalg.lstsq")
    driver = "gelsy" if driver is None else driver
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError(f"{fname}: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    vec = B.dim() == A.dim() - 1
    Bm = B.unsqueeze(-1) if vec else B
    if Bm._shape[-2] != A._shape[-2]:
        raise RuntimeError(f"{fname}: input.size(-2) should match other.size(-2)")
    X, res, rank, sv = L.lstsq_core(A, Bm, rcond=rcond, driver=driver)
    if vec:
        X = X.squeeze(-1)
        if res.numel():
            res = res.squeeze(-1)
    return LstsqResult(X, res, rank, sv)


# -------------------------------------------------------------------------------------------- Householder
def _reflectors(A, k):
    """Unit lower V (..., m, k) of the Householder vectors stored below A's diagonal."""
    m = A._shape[-2]
    return A[..., :, :k].tril(-1) + _eye(m, A, k)


def householder_product(A, tau, *, out=None):
    """``torch.linalg.householder_product``: the first n columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^H,
    from A (..., m, n) holding v_i below its diagonal (as geqrf writes them) and tau (..., k), m >= n >= k.
    Composed on the device (k rank-1 updates of I[:, :n]), so differentiable in A and tau."""
    fname = "torch.linalg.householder_product"
    check_matrix(A, "householder_product", square=False, name="input")
    m, n = A._shape[-2], A._shape[-1]
    k = tau._shape[-1] if tau.dim() else 0
    if m < n:
        raise RuntimeError(f"{fname}: input.shape[-2] must be greater than or equal to input.shape[-1]")
    if k > n:
        raise RuntimeError(f"{fname}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    if tau.dim() != A.dim() - 1:
        raise RuntimeError(f"{fname}: Expected tau to have one dimension less than input, but got tau.ndim equal "
                           f"to {tau.dim()} and input.ndim is equal to {A.dim()}")
    Q = _eye(m, A, n).expand(*A._shape[:-2], m, n)
    if k == 0:     # no reflectors: Q = I, still an output of A and tau (zero gradient), as in PyTorch
        return _out(Q + 0 * A[..., :, :n] + 0 * tau.sum(-1, keepdim=True).unsqueeze(-1), out)
    V = _reflectors(A, k)
    for i in reversed(range(k)):
        v = V[..., :, i:i + 1]
        Q = Q - (tau[..., i:i + 1].unsqueeze(-1) * v) @ (_mT(v) @ Q)
    return _out(Q, out)


def orgqr(input, tau):  # noqa: A002
    """``torch.orgqr``: alias of ``torch.linalg.householder_product``."""
    return householder_product(input, tau)


def ormqr(input, tau, other, left=True, transpose=False, *, out=None):  # noqa: A002
    """``torch.ormqr(input, tau, other, left=True, transpose=False)``: op(Q) @ other (left) or other @ op(Q),
    op = identity or transpose, with Q = H_1 ... H_k from geqrf's (input (..., mn, k'), tau (..., k)).
    Composed on the device from k reflector applications, so differentiable in all three."""
    check_matrix(input, "ormqr", square=False)
    check_matrix(other, "ormqr", square=False, name="other")
    k = tau._shape[-1]
    mn = other._shape[-2] if left else other._shape[-1]
    if input._shape[-2] != mn:
        raise RuntimeError(f"torch.ormqr: other.shape[{-2 if left else -1}] must be equal to input.shape[-2]")
    if k > input._shape[-1] or k > mn:
        raise RuntimeError("torch.ormqr: tau.shape[-1] must be less than or equal to input.shape[-1]")
    V = _reflectors(input, k)
    C = other
    # Q C = H_1 (... (H_k C)); Q^T C = H_k ... H_1 C; C Q = C H_1 ... H_k; C Q^T = C H_k ... H_1
    order = range(k) if (left == bool(transpose)) else reversed(range(k))
    for i in order:
        v = V[..., :, i:i + 1]
        t = tau[..., i:i + 1].unsqueeze(-1)
        C = C - (t * v) @ (_mT(v) @ C) if left else C - ((C @ v) * t) @ _mT(v)
    return _out(C, out)


def _geqrf_host(A):
    m, n = A.shape[-2:]
    flat = L.flat3(A)
    k = min(m, n)
    a = np.array(flat, copy=True)
    tau = np.zeros((flat.shape[0], k), A.dtype)
    for i in range(flat.shape[0] if k else 0):
        h, t = np.linalg.qr(flat[i], mode="raw")
        a[i], tau[i] = h.T, t[:k]
    return a.reshape(A.shape).astype(A.dtype, copy=False), tau.reshape(A.shape[:-2] + (k,))


_geqrf_op = host_op("geqrf", _geqrf_host)
GeqrfResult = collections.namedtuple("geqrf", ["a", "tau"])


def geqrf(input, *, out=None):  # noqa: A002
    """``torch.geqrf``: LAPACK geqrf's (a, tau) for A (..., m, n): R on and above a's diagonal, Householder
    vectors below, tau (..., min(m, n)). Host: numpy.linalg.qr(mode='raw'). Not differentiable (as PyTorch)."""
    check_matrix(input, "geqrf", square=False)
    a, t = call(_geqrf_op, input)
    if input.requires_grad and is_grad_enabled():
        a.grad_fn = t.grad_fn = None
    return _out(GeqrfResult(a, t), out)


# -------------------------------------------------------------------------------------------- matrix_exp
def _expm_host(A):
    """exp of each matrix of A (..., n, n) in float64: A / 2^s with ||A / 2^s||_1 <= 1/2 (s per matrix), a
    degree-18 Taylor polynomial by Horner's rule (truncation below 1e-22), then s squarings."""
    shp = A.shape
    n = shp[-1]
    X = np.array(L.flat3(A), dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        nrm = np.abs(X).sum(-2).max(-1) if n else np.zeros(X.shape[0])
        s = np.where(nrm > 0.5, np.ceil(np.log2(np.where(nrm > 0.5, nrm, 1.0))) + 1, 0)
        s = np.where(np.isfinite(s), s, 0).astype(np.int64)
        X *= (0.5 ** s)[:, None, None]
        Id = np.eye(n)
        P = Id + X / 18.0
        for j in range(17, 0, -1):
            P = Id + (X @ P) / j
        for step in range(int(s.max()) if s.size else 0):
            sel = s > step
            P[sel] = P[sel] @ P[sel]
    return P.reshape(shp).astype(A.dtype)


def _expm_bw(ctx, g):
    """d<G, exp(A)>/dA = the upper-right block of exp([[A^H, G], [0, A^H]]) (Mathias 1996; PyTorch's
    backward_analytic_function_of_a_matrix)."""
    A = ctx.saved_tensors[0]
    n = A._shape[-1]
    from .joins import cat
    At = _mT(A)
    top = cat([At, g], -1)
    bot = cat([g.new_zeros(*g._shape), At], -1)
    return (matrix_exp(cat([top, bot], -2))[..., :n, n:],)


_expm_op = host_op("matrix_exp", _expm_host, _expm_bw)


def matrix_exp(A):
    """``torch.linalg.matrix_exp`` / ``torch.matrix_exp``: exp of square matrices A (..., n, n), float32 or
    float64. Host, in float64: scaling and squaring with a degree-18 Taylor polynomial (s per matrix, from its
    1-norm). Gradient: exp of the 2n x 2n block matrix [[A^H, G], [0, A^H]] (itself differentiable)."""
    check_matrix(A, "linalg.matrix_exp")
    return call(_expm_op, A)


# -------------------------------------------------------------------------------------------- low rank
def _approx_basis(A, q, niter, M):
    from .random import randn
    R = randn(A._shape[-1], q, dtype=A.dtype, device=A.device)
    X = A @ R if M is None else A @ R - M @ R
    Q = qr(X).Q
    for _ in range(niter):
        X = _mT(A) @ Q if M is None else _mT(A) @ Q - _mT(M) @ Q
        Q = qr(X).Q
        X = A @ Q if M is None else A @ Q - M @ Q
        Q = qr(X).Q
    return Q


def svd_lowrank(A, q=6, niter=2, M=None):
    """``torch.svd_lowrank``: (U (..., m, q), S (..., q), V (..., n, q)) approximating the SVD of A - M by the
    randomized range finder with ``niter`` subspace iterations (Halko, Martinsson and Tropp 2009, algorithm
    5.1, as PyTorch's). Composed from randn, qr, svd and matmul: differentiable; random (cltorch's generator)."""
    q = 6 if q is None else q
    niter = 2 if niter is None else niter
    m, n = A._shape[-2], A._shape[-1]
    if M is not None:
        M = M.broadcast_to(A._shape) if hasattr(M, "broadcast_to") else M.expand(*A._shape)
    if m < n or n > q:
        Q = _approx_basis(_mT(A), q, niter, None if M is None else _mT(M))
        Bt = A @ Q if M is None else A @ Q - M @ Q
        U, S, Vh = svd(Bt, full_matrices=False)
        return U, S, Q @ _mT(Vh)
    Q = _approx_basis(A, q, niter, M)
    Bm = _mT(Q) @ A if M is None else _mT(Q) @ A - _mT(Q) @ M
    U, S, Vh = svd(Bm, full_matrices=False)
    return Q @ U, S, _mT(Vh)


def pca_lowrank(A, q=None, center=True, niter=2):
    """``torch.pca_lowrank``: (U, S, V) of a low-rank SVD of A (centered over its rows when ``center``), with q
    defaulting to min(6, m, n); through ``svd_lowrank``."""
    m, n = A._shape[-2], A._shape[-1]
    if q is None:
        q = min(6, m, n)
    elif not (0 <= q <= min(m, n)):
        raise ValueError(f"q(={q}) must be non-negative integer and not greater than min(m, n)={min(m, n)}")
    if niter < 0:
        raise ValueError(f"niter(={niter}) must be non-negative integer")
    if not center:
        return svd_lowrank(A, q, niter=niter)
    return svd_lowrank(A - A.mean(-2, keepdim=True), q, niter=niter)


# -------------------------------------------------------------------------------------------- eig (complex)
def _cdt(dtype):
    return D.complex64 if dtype is D.float32 else D.complex128


def _eig_host(A):
    w, V = np.linalg.eig(A)
    c = np.complex64 if A.dtype == np.float32 else np.complex128
    return w.astype(c), V.astype(c)


def _eig_bw(ctx, gL, gV):
    """PyTorch's linalg_eig_backward, computed on the host: gA = Re(V^-H (diag(gL) + (V^H gV -
    V^H V diag(Re(diag(V^H gV)))) / conj(E)) V^H), E[i, j] = L_j - L_i."""
    A, Lt, Vt = ctx.saved_tensors
    if is_grad_enabled():
        raise NotImplementedError("linalg.eig: the double backward is not provided (the backward runs on the host)")
    Lh, Vh_ = to_host(Lt), to_host(Vt)
    n = Lh.shape[-1]
    VH = np.conj(np.swapaxes(Vh_, -1, -2))
    if gV is not None:
        VhgV = VH @ to_host(gV)
        d = np.real(np.diagonal(VhgV, 0, -2, -1))
        VhgV = VhgV - VH @ (Vh_ * d[..., None, :])
        Lc = np.conj(Lh)
        E = Lc[..., None, :] - Lc[..., :, None]
        idx = np.arange(n)
        E[..., idx, idx] = 1
        ret = VhgV / E
        ret[..., idx, idx] = to_host(gL) if gL is not None else 0
    else:
        ret = np.zeros(Lh.shape + (n,), Lh.dtype)
        idx = np.arange(n)
        ret[..., idx, idx] = to_host(gL)
    gA = np.linalg.solve(VH, ret @ VH)
    return (to_device(np.real(gA).astype(A.dtype.np), A.device),)


_eig_op = host_op("linalg_eig", _eig_host, _eig_bw)
EigResult = collections.namedtuple("eig", ["eigenvalues", "eigenvectors"])


def _complex_ready(fname):
    if not hasattr(D, "complex64"):
        raise NotImplementedError(f"{fname}: needs complex64 tensors (its results are complex)")


def eig(A, *, out=None):
    """``torch.linalg.eig``: (eigenvalues (..., n), eigenvectors (..., n, n) as unit-norm columns) of square
    real A, complex64 for float32 input (complex128 for float64) even when the eigenvalues are real. Host:
    numpy.linalg.eig (LAPACK geev). Gradient: PyTorch's linalg_eig_backward, on the host (defined for a loss
    invariant to each eigenvector's phase, and distinct eigenvalues)."""
    check_matrix(A, "linalg.eig")
    _complex_ready("linalg.eig")
    return _out(EigResult(*call(_eig_op, A)), out)


def eigvals(A, *, out=None):
    """``torch.linalg.eigvals``: eigenvalues (..., n), complex, of square real A. Host: numpy.linalg.eigvals when
    no gradient is needed, else through ``eig`` (gradient V^-H diag(gL) V^H)."""
    check_matrix(A, "linalg.eigvals")
    _complex_ready("linalg.eigvals")
    if A.requires_grad and is_grad_enabled():
        r = eig(A).eigenvalues
    else:
        w = np.linalg.eigvals(to_host(A))
        r = to_device(w.astype(_cdt(A.dtype).np), A.device, _cdt(A.dtype))
    return _out(r, out)


# -------------------------------------------------------------------------------------------- Tensor methods
for _name, _fn in (("svd", svd_legacy), ("qr", qr_legacy), ("det", det), ("logdet", logdet), ("slogdet", slogdet),
                   ("inverse", inverse), ("cholesky", cholesky_legacy), ("cholesky_inverse", cholesky_inverse),
                   ("cholesky_solve", cholesky_solve), ("lu", lu_legacy), ("lu_solve", lu_solve_legacy),
                   ("triangular_solve", triangular_solve), ("pinverse", pinverse), ("geqrf", geqrf),
                   ("ormqr", ormqr), ("orgqr", orgqr), ("matrix_exp", matrix_exp)):
    method(_name, _fn)
