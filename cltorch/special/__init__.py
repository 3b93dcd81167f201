"""``torch.special``: special functions, exported from the op modules (``cltorch/ops/special_math.py`` and the
pointwise, softmax and reduction ops). Shapes follow the input (pointwise, broadcasting for the binary ones);
integer inputs compute in the default float dtype. See each op's docstring for its method and source."""
from ..ops.pointwise import erf, erfc, sigmoid as expit, exp2, expm1, log1p, round  # noqa: F401,A004
from ..ops.special_math import (erfinv, logit, xlogy, xlog1py, lgamma as gammaln, digamma, psi, polygamma,  # noqa
                                multigammaln, i0, i0e, i1, i1e, ndtr, ndtri, log_ndtr, sinc, entr, erfcx, zeta,
                                spherical_bessel_j0, gammainc, gammaincc)
from ..ops.special_math import (chebyshev_polynomial_t, chebyshev_polynomial_u, chebyshev_polynomial_v,  # noqa
                                chebyshev_polynomial_w, shifted_chebyshev_polynomial_t, shifted_chebyshev_polynomial_u,
                                shifted_chebyshev_polynomial_v, shifted_chebyshev_polynomial_w, hermite_polynomial_h,
                                hermite_polynomial_he, laguerre_polynomial_l, legendre_polynomial_p)
from ..ops.special_math import (bessel_j0, bessel_j1, bessel_y0, bessel_y1, modified_bessel_k0,  # noqa: F401
                                modified_bessel_k1, scaled_modified_bessel_k0, scaled_modified_bessel_k1, airy_ai)
from ..ops.softmax import softmax as _softmax, log_softmax as _log_softmax
from ..ops.reductions import logsumexp  # noqa: F401

modified_bessel_i0 = i0
modified_bessel_i1 = i1

__all__ = ["erf", "erfc", "erfinv", "expit", "logit", "xlogy", "xlog1py", "gammaln", "digamma", "psi", "polygamma",
           "multigammaln", "i0", "i0e", "i1", "i1e", "ndtr", "ndtri", "log_ndtr", "sinc", "entr", "erfcx",
           "log_softmax", "softmax", "logsumexp", "round", "exp2", "expm1", "log1p", "zeta",
           "modified_bessel_i0", "modified_bessel_i1", "spherical_bessel_j0",
           "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
           "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
           "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
           "legendre_polynomial_p", "gammainc", "gammaincc", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1",
           "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
           "airy_ai"]


def softmax(input, dim, *, dtype=None):  # noqa: A002
    """softmax along ``dim`` (``dtype``: cast the input first), as ``torch.special.softmax``."""
    return _softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, *, dtype=None):  # noqa: A002
    """log-softmax along ``dim`` (``dtype``: cast the input first), as ``torch.special.log_softmax``."""
    return _log_softmax(input, dim, dtype=dtype)
