"""``torch.linalg``: factorizations and solves (host LAPACK through numpy: ``cltorch/ops/lapack.py`` holds the
mechanism and the table of where each op runs, ``cltorch/ops/lapack_api.py`` the composed ones), and norms and
products (``_products.py``)."""
from ..ops.lapack import (LinAlgError, solve_triangular, det, slogdet, cholesky_ex, lu_factor_ex, qr, svd,  # noqa
                          svdvals, eigh, eigvalsh, pinv)
from ..ops.lapack_api import (solve, solve_ex, inv, inv_ex, cholesky, lu_factor, lu, lu_solve, matrix_rank,  # noqa
                              lstsq, householder_product, matrix_exp, eig, eigvals)
from ..ops.lapack_ldl import ldl_factor, ldl_factor_ex, ldl_solve  # noqa: F401
from ._products import *  # noqa: F401,F403
