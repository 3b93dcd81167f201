"""MultivariateNormal(loc, covariance_matrix | precision_matrix | scale_tril), reparameterised.

The Cholesky factor and the triangular solves are ``cltorch.linalg.cholesky`` and
``cltorch.linalg.solve_triangular`` (the host-LAPACK ops of ``cltorch/ops/lapack.py``), so gradients flow
through their registered derivatives as for every other linear-algebra call. The precision-matrix route is
PyTorch's: the Cholesky factor of the flipped precision matrix, flipped back and inverted by one triangular
solve (no explicit inverse of P).
"""
import math

import cltorch

from . import constraints
from .distribution import Distribution
from .utils import _standard_normal, batch_mahalanobis, lazy_property

__all__ = ["MultivariateNormal"]


def _precision_to_scale_tril(P):
    """Lower Cholesky factor of P^-1 (PyTorch's construction): with J the reversal matrix, J P J = Lf Lf^T
    gives P = U U^T for the upper triangular U = J Lf J, so P^-1 = U^-T U^-1 with U^-T lower triangular, and
    U^-T = solve_triangular(U^T, I)."""
    Lf = cltorch.linalg.cholesky(cltorch.flip(P, (-2, -1)))
    L_inv = cltorch.flip(Lf, (-2, -1)).transpose(-2, -1)
    eye = cltorch.eye(P.shape[-1], dtype=P.dtype, device=P.device)
    return cltorch.linalg.solve_triangular(L_inv, eye, upper=False)


class MultivariateNormal(Distribution):
    """``loc`` (..., k); exactly one of ``covariance_matrix``/``precision_matrix`` (symmetric positive definite
    (..., k, k)) or ``scale_tril`` (lower triangular with positive diagonal); batch dims broadcast.
    ValueError as PyTorch for a 0-d loc, a matrix of rank < 2, or not exactly one matrix."""
    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        if scale_tril is not None:
            if scale_tril.dim() < 2:
                raise ValueError("scale_tril matrix must be at least two-dimensional, with optional leading "
                                 "batch dimensions")
            batch_shape = cltorch.broadcast_shapes(scale_tril.shape[:-2], loc.shape[:-1])
            self.scale_tril = scale_tril.expand(tuple(batch_shape) + (-1, -1))
        elif covariance_matrix is not None:
            if covariance_matrix.dim() < 2:
                raise ValueError("covariance_matrix must be at least two-dimensional, with optional leading "
                                 "batch dimensions")
            batch_shape = cltorch.broadcast_shapes(covariance_matrix.shape[:-2], loc.shape[:-1])
            self.covariance_matrix = covariance_matrix.expand(tuple(batch_shape) + (-1, -1))
        else:
            if precision_matrix.dim() < 2:
                raise ValueError("precision_matrix must be at least two-dimensional, with optional leading "
                                 "batch dimensions")
            batch_shape = cltorch.broadcast_shapes(precision_matrix.shape[:-2], loc.shape[:-1])
            self.precision_matrix = precision_matrix.expand(tuple(batch_shape) + (-1, -1))
        self.loc = loc.expand(tuple(batch_shape) + (-1,))
        event_shape = self.loc.shape[-1:]
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = cltorch.linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = cltorch.Size(batch_shape)
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        cov_shape = loc_shape + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(cov_shape))
        super(MultivariateNormal, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.transpose(-2, -1)).expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @lazy_property
    def precision_matrix(self):
        L = self._unbroadcasted_scale_tril
        eye = cltorch.eye(L.shape[-1], dtype=L.dtype, device=L.device)
        Linv = cltorch.linalg.solve_triangular(L, eye, upper=False)
        return (Linv.transpose(-2, -1) @ Linv).expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(tuple(self._batch_shape)
                                                                    + tuple(self._event_shape))

    def rsample(self, sample_shape=cltorch.Size()):
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        M = batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        k = self._event_shape[0]
        return -0.5 * (k * math.log(2 * math.pi) + M) - self._half_log_det()

    def entropy(self):
        k = self._event_shape[0]
        H = 0.5 * k * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return H.expand(tuple(self._batch_shape)) if len(self._batch_shape) else H
