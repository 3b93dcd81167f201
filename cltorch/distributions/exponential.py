"""Exponential(rate): density rate * exp(-rate * x) on x >= 0, reparameterised."""
from numbers import Number

import cltorch

from . import constraints
from .exp_family import ExponentialFamily
from .utils import broadcast_all

__all__ = ["Exponential"]


class Exponential(ExponentialFamily):
    """``rate`` > 0. rsample = E / rate with E ~ Exp(1) from the Philox generator (``Tensor.exponential_``)."""
    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return cltorch.zeros_like(self.rate)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        batch_shape = cltorch.Size() if isinstance(rate, Number) else self.rate.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Exponential, batch_shape, _instance, ("rate",))

    def rsample(self, sample_shape=cltorch.Size()):
        shape = tuple(self._extended_shape(sample_shape))
        e = cltorch.empty(shape, dtype=self.rate.dtype, device=self.rate.device).exponential_()
        return e / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - cltorch.exp(-self.rate * value)

    def icdf(self, value):
        return -cltorch.log1p(-value) / self.rate

    def entropy(self):
        return 1.0 - cltorch.log(self.rate)

    @property
    def _natural_params(self):
        return (-self.rate,)

    def _log_normalizer(self, x):
        return -cltorch.log(-x)
