"""torch.linalg's LDL^H factorization (ldl_factor, ldl_factor_ex, ldl_solve)."""
__all__ = ["ldl_factor", "ldl_factor_ex", "ldl_solve"]


def _missing(fname):
    raise NotImplementedError(f"{fname}: the Bunch-Kaufman LDL factorization (LAPACK sytrf) is not provided: numpy "
                              "has no sytrf and scipy is not a dependency")


def ldl_factor_ex(A, *, hermitian=False, check_errors=False, out=None):
    """``torch.linalg.ldl_factor_ex``: NotImplementedError (needs LAPACK sytrf)."""
    _missing("linalg.ldl_factor_ex")


def ldl_factor(A, *, hermitian=False, out=None):
    """``torch.linalg.ldl_factor``: NotImplementedError (needs LAPACK sytrf)."""
    _missing("linalg.ldl_factor")


def ldl_solve(LD, pivots, B, *, hermitian=False, out=None):
    """``torch.linalg.ldl_solve``: NotImplementedError (needs LAPACK sytrs)."""
    _missing("linalg.ldl_solve")
