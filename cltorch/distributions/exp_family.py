"""ExponentialFamily: base of distributions with density exp(<t(x), θ> - F(θ) + k(x)).

Subclasses give ``_natural_params``, ``_log_normalizer`` (F) and ``_mean_carrier_measure`` (E[k(x)]);
the generic entropy is the Bregman divergence of F (Nielsen & Nock, "Entropies and cross-entropies of
exponential families", 2010), its gradient taken by autograd.
"""
import cltorch

from .distribution import Distribution

__all__ = ["ExponentialFamily"]


class ExponentialFamily(Distribution):
    @property
    def _natural_params(self):
        raise NotImplementedError

    def _log_normalizer(self, *natural_params):
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self):
        raise NotImplementedError

    def entropy(self):
        """-E[k(x)] + F(θ) - <θ, ∇F(θ)>, summed over the event."""
        result = -self._mean_carrier_measure
        nparams = [p.detach().requires_grad_() for p in self._natural_params]
        with cltorch.enable_grad():
            lg_normal = self._log_normalizer(*nparams)
            gradients = cltorch.autograd.grad(lg_normal.sum(), nparams, create_graph=True)
        result = result + lg_normal
        for np_, g in zip(nparams, gradients):
            result = result - (np_ * g).reshape(tuple(self._batch_shape) + (-1,)).sum(-1)
        return result
