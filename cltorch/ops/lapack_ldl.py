"""torch.linalg's LDL^T factorization of symmetric matrices: ldl_factor, ldl_factor_ex, ldl_solve.

numpy has no sytrf and scipy is not a dependency, so the factorization is numpy code here: Bunch-Kaufman
diagonal pivoting on the lower triangle, the decisions of LAPACK's dsytf2 (Bunch and Kaufman 1977, alpha =
(1 + sqrt(17)) / 8; Anderson et al., LAPACK Users' Guide), in LAPACK's compact format: LD holds L's multipliers
below the diagonal and D's 1x1 and 2x2 blocks on and just below it; pivots (..., n) int32 are 1-based, k > 0 for
a 1x1 block that swapped rows/cols k and pivots[k], negative equal pairs for a 2x2 block. Each rank-1 / rank-2
update is one numpy outer product over the trailing matrix (O(n) Python steps per matrix). Host only; not
differentiable (as in PyTorch). ldl_solve is LAPACK sytrs's two sweeps.
"""
import collections

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor
from .lapack import LinAlgError, check_matrix, flat3, to_device, to_host

__all__ = ["ldl_factor", "ldl_factor_ex", "ldl_solve"]

_ALPHA = (1.0 + np.sqrt(17.0)) / 8.0

LDLFactorExResult = collections.namedtuple("ldl_factor_ex", ["LD", "pivots", "info"])
LDLFactorResult = collections.namedtuple("ldl_factor", ["LD", "pivots"])


def _sytf2_lower(a):
    """Factor one symmetric matrix (its lower triangle) in place; returns (pivots 1-based, info)."""
    n = a.shape[0]
    piv = np.zeros(n, np.int32)
    info = 0
    k = 0
    while k < n:
        kstep = 1
        absakk = abs(a[k, k])
        if k < n - 1:
            imax = k + 1 + int(np.argmax(np.abs(a[k + 1:, k])))
            colmax = abs(a[imax, k])
        else:
            imax, colmax = k, 0.0
        if max(absakk, colmax) == 0 or np.isnan(absakk):
            if info == 0:
                info = k + 1
            kp = k
        else:
            if absakk >= _ALPHA * colmax:
                kp = k
            else:
                rowmax = np.max(np.abs(a[imax, k:imax])) if imax > k else 0.0
                if imax < n - 1:
                    rowmax = max(rowmax, np.max(np.abs(a[imax + 1:, imax])))
                if absakk >= _ALPHA * colmax * (colmax / rowmax):
                    kp = k
                elif abs(a[imax, imax]) >= _ALPHA * rowmax:
                    kp = imax
                else:
                    kp, kstep = imax, 2
            kk = k + kstep - 1
            if kp != kk:      # symmetric interchange of kk and kp within the trailing lower triangle
                if kp < n - 1:
                    t = a[kp + 1:, kk].copy()
                    a[kp + 1:, kk] = a[kp + 1:, kp]
                    a[kp + 1:, kp] = t
                t = a[kk + 1:kp, kk].copy()
                a[kk + 1:kp, kk] = a[kp, kk + 1:kp]
                a[kp, kk + 1:kp] = t
                a[kk, kk], a[kp, kp] = a[kp, kp], a[kk, kk]
                if kstep == 2:
                    a[k + 1, k], a[kp, k] = a[kp, k], a[k + 1, k]
            if kstep == 1:
                if k < n - 1:
                    d11 = 1.0 / a[k, k]
                    x = a[k + 1:, k].copy()
                    a[k + 1:, k + 1:] -= np.tril(d11 * np.outer(x, x))
                    a[k + 1:, k] *= d11
            elif k < n - 2:
                d21 = a[k + 1, k]
                d11 = a[k + 1, k + 1] / d21
                d22 = a[k, k] / d21
                t = 1.0 / (d11 * d22 - 1.0)
                d21 = t / d21
                c0, c1 = a[k + 2:, k].copy(), a[k + 2:, k + 1].copy()
                wk = d21 * (d11 * c0 - c1)
                wkp1 = d21 * (d22 * c1 - c0)
                a[k + 2:, k + 2:] -= np.tril(np.outer(c0, wk) + np.outer(c1, wkp1))
                a[k + 2:, k] = wk
                a[k + 2:, k + 1] = wkp1
        if kstep == 1:
            piv[k] = kp + 1
        else:
            piv[k] = piv[k + 1] = -(kp + 1)
        k += kstep
    return piv, info


def _ldl_host(A):
    f = flat3(A)
    LD = np.array(f, copy=True)
    piv = np.zeros(f.shape[:2], np.int32)
    info = np.zeros(f.shape[0], np.int32)
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in range(f.shape[0]):
            piv[i], info[i] = _sytf2_lower(LD[i])
    LD = np.tril(LD)
    return LD.reshape(A.shape), piv.reshape(A.shape[:-1]), info.reshape(A.shape[:-2])


def ldl_factor_ex(A, *, hermitian=False, check_errors=False, out=None):
    """``torch.linalg.ldl_factor_ex``: (LD, pivots, info) of symmetric A (..., n, n) (its lower triangle is
    read): A = P L D L^T P^T in LAPACK sytrf's compact format (see the module docstring); info (...) is 0 or
    the index (1-based) of an exactly zero D block. ``check_errors``: LinAlgError when info > 0.
    float32/float64; host numpy code; not differentiable."""
    check_matrix(A, "torch.linalg.ldl_factor_ex")
    LD, piv, info = _ldl_host(to_host(A))
    res = LDLFactorExResult(to_device(LD.astype(A.dtype.np), A.device), to_device(piv, A.device, D.int32),
                            to_device(info, A.device, D.int32))
    if check_errors:
        _raise(info, "torch.linalg.ldl_factor_ex")
    if out is not None:
        for o, v in zip(out, res):
            o.copy_(v)
        return out
    return res


def _raise(info, fname):
    bad = np.flatnonzero(info.reshape(-1))
    if bad.size:
        i = int(bad[0])
        pre = f"(Batch element {i}): " if info.ndim else ""
        raise LinAlgError(f"{fname}: {pre}The factorization could not be completed because the block diagonal "
                          f"matrix D has a zero at position {int(info.reshape(-1)[i])} (the input is singular).")


def ldl_factor(A, *, hermitian=False, out=None):
    """``torch.linalg.ldl_factor``: (LD, pivots) as ``ldl_factor_ex``; LinAlgError for a zero D block."""
    LD, piv, info = ldl_factor_ex(A, hermitian=hermitian)
    _raise(to_host(info), "torch.linalg.ldl_factor")
    res = LDLFactorResult(LD, piv)
    if out is not None:
        for o, v in zip(out, res):
            o.copy_(v)
        return out
    return res


def _sytrs_lower(a, piv, b):
    """Solve A X = B in place in ``b`` (n, k) from one matrix's compact LDL^T (LAPACK dsytrs, lower)."""
    n = a.shape[0]
    k = 0
    while k < n:                       # P L D: forward sweep
        if piv[k] > 0:
            kp = piv[k] - 1
            if kp != k:
                b[[k, kp]] = b[[kp, k]]
            b[k + 1:] -= np.outer(a[k + 1:, k], b[k])
            b[k] /= a[k, k]
            k += 1
        else:
            kp = -piv[k] - 1
            if kp != k + 1:
                b[[k + 1, kp]] = b[[kp, k + 1]]
            if k < n - 2:
                b[k + 2:] -= np.outer(a[k + 2:, k], b[k]) + np.outer(a[k + 2:, k + 1], b[k + 1])
            akm1k = a[k + 1, k]
            akm1 = a[k, k] / akm1k
            ak = a[k + 1, k + 1] / akm1k
            denom = akm1 * ak - 1.0
            bkm1, bk = b[k] / akm1k, b[k + 1] / akm1k
            b[k] = (ak * bkm1 - bk) / denom
            b[k + 1] = (akm1 * bk - bkm1) / denom
            k += 2
    k = n - 1
    while k >= 0:                      # L^T P^T: backward sweep
        if piv[k] > 0:
            if k < n - 1:
                b[k] -= a[k + 1:, k] @ b[k + 1:]
            kp = piv[k] - 1
            if kp != k:
                b[[k, kp]] = b[[kp, k]]
            k -= 1
        else:
            if k < n - 1:
                b[k] -= a[k + 1:, k] @ b[k + 1:]
                b[k - 1] -= a[k + 1:, k - 1] @ b[k + 1:]
            kp = -piv[k] - 1
            if kp != k:
                b[[k, kp]] = b[[kp, k]]
            k -= 2
    return b


def ldl_solve(LD, pivots, B, *, hermitian=False, out=None):
    """``torch.linalg.ldl_solve``: X with A X = B from ``ldl_factor``'s (LD, pivots) and B (..., n, k); batch
    dims broadcast. Host numpy code (LAPACK sytrs's sweeps); not differentiable."""
    fname = "torch.linalg.ldl_solve"
    check_matrix(LD, fname, name="LD")
    check_matrix(B, fname, square=False, name="B")
    if not isinstance(pivots, Tensor) or pivots.dtype is not D.int32:
        raise RuntimeError(f"{fname}: Expected pivots to be integers. Got {getattr(pivots, 'dtype', pivots)}")
    if LD.dtype is not B.dtype:
        raise RuntimeError(f"{fname}: Expected LD and B to have the same dtype, but found LD of type "
                           f"{LD.dtype} and B of type {B.dtype} instead")
    n = LD._shape[-1]
    if B._shape[-2] != n:
        raise RuntimeError(f"{fname}: Incompatible shapes of A and B for the equation AX = B ({n}x{n} and "
                           f"{B._shape[-2]}x{B._shape[-1]})")
    a, p, b = to_host(LD), to_host(pivots), to_host(B)
    bs = np.broadcast_shapes(a.shape[:-2], b.shape[:-2], p.shape[:-1])
    a = flat3(np.broadcast_to(a, bs + a.shape[-2:]))
    p = np.broadcast_to(p, bs + p.shape[-1:]).reshape((a.shape[0], n))
    X = np.array(flat3(np.broadcast_to(b, bs + b.shape[-2:])), copy=True)
    with np.errstate(divide="ignore", invalid="ignore"):      # a zero D block gives inf/nan, as LAPACK
        for i in range(X.shape[0]):
            _sytrs_lower(a[i], p[i], X[i])
    r = to_device(X.reshape(bs + b.shape[-2:]), B.device, B.dtype)
    return r if out is None else out.copy_(r)
