"""Poisson(rate): counts k >= 0 with probability rate^k e^-rate / k!."""
import math
from numbers import Number

import cltorch

from . import constraints
from .exp_family import ExponentialFamily
from .utils import broadcast_all

__all__ = ["Poisson"]

_MAX_SAMPLE_RATE = 1000.0


class Poisson(ExponentialFamily):
    """``rate`` >= 0. ``sample`` inverts the CDF of
    uniform draws from cltorch's generator, summing the pmf in float64 up to rate + 12 sqrt(rate) + 20
    (so it costs O(max rate) elementwise steps); rates above 1000 raise NotImplementedError."""
    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        batch_shape = cltorch.Size() if isinstance(rate, Number) else self.rate.size()
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(Poisson, batch_shape, _instance, ("rate",))

    def sample(self, sample_shape=cltorch.Size()):
        shape = tuple(self._extended_shape(sample_shape))
        with cltorch.no_grad():
            rate = self.rate.expand(shape).to(cltorch.float64)
            rmax = float(rate.max()) if rate.numel() else 0.0
            if rmax > _MAX_SAMPLE_RATE:
                raise NotImplementedError(f"Poisson.sample: rates above {_MAX_SAMPLE_RATE:g} are not supported "
                                          f"(got {rmax:g}); cltorch has no Poisson sampler kernel")
            u = cltorch.rand(shape, dtype=cltorch.float64, device=self.rate.device)
            kmax = int(math.ceil(rmax + 12 * math.sqrt(rmax) + 20))
            log_rate = cltorch.log(rate.clamp(min=1e-300))
            count = cltorch.zeros(shape, dtype=cltorch.float64, device=self.rate.device)
            cdf = cltorch.zeros_like(count)
            for k in range(kmax):
                log_pmf = k * log_rate - rate - math.lgamma(k + 1)
                if k == 0:
                    log_pmf = -rate
                cdf = cdf + cltorch.exp(log_pmf)
                count = count + (u > cdf).to(cltorch.float64)
            return count.to(self.rate.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        value = value.to(rate.dtype)
        return cltorch.xlogy(value, rate) - rate - cltorch.lgamma(value + 1)

    @property
    def _natural_params(self):
        return (cltorch.log(self.rate),)

    def _log_normalizer(self, x):
        return cltorch.exp(x)
