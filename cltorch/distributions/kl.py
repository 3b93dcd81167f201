"""KL divergence: ``kl_divergence(p, q)`` and the ``register_kl`` registry, as torch.distributions.kl.

The implementation for (type(p), type(q)) is the registered pair whose classes are most specific in
the two MROs (p's first, then q's); it is cached per type pair. Closed forms: standard results (e.g.
Bishop, PRML 2006; Gil et al., "Rényi divergence measures for commonly used univariate continuous
distributions", 2013).
"""
import math

import cltorch
import cltorch.nn.functional as F

from .bernoulli import Bernoulli
from .categorical import Categorical
from .distribution import Distribution
from .exponential import Exponential
from .independent import Independent
from .laplace import Laplace
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .one_hot_categorical import OneHotCategorical
from .poisson import Poisson
from .transformed_distribution import TransformedDistribution
from .uniform import Uniform
from .utils import _sum_rightmost, batch_mahalanobis, solve_lower

__all__ = ["register_kl", "kl_divergence"]

_KL_REGISTRY = {}
_KL_MEMOIZE = {}


def register_kl(type_p, type_q):
    """Decorator registering ``fn(p, q)`` as KL(p || q) for subclasses of type_p and type_q. TypeError when
    either is not a Distribution subclass."""
    if not isinstance(type_p, type) or not issubclass(type_p, Distribution):
        raise TypeError(f"Expected type_p to be a Distribution subclass but got {type_p}")
    if not isinstance(type_q, type) or not issubclass(type_q, Distribution):
        raise TypeError(f"Expected type_q to be a Distribution subclass but got {type_q}")

    def decorator(fun):
        _KL_REGISTRY[type_p, type_q] = fun
        _KL_MEMOIZE.clear()
        return fun
    return decorator


def _dispatch_kl(type_p, type_q):
    matches = [(sp, sq) for sp, sq in _KL_REGISTRY if issubclass(type_p, sp) and issubclass(type_q, sq)]
    if not matches:
        return NotImplemented
    mro_p, mro_q = type_p.__mro__, type_q.__mro__
    left = min(matches, key=lambda m: (mro_p.index(m[0]), mro_q.index(m[1])))
    right = min(matches, key=lambda m: (mro_q.index(m[1]), mro_p.index(m[0])))
    if _KL_REGISTRY[left] is not _KL_REGISTRY[right]:
        import warnings
        warnings.warn(f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). Please register_kl("
                      f"{left[0].__name__}, {right[1].__name__})", RuntimeWarning)
    return _KL_REGISTRY[left]


def kl_divergence(p, q):
    """KL(p || q) = E_p[log p(x) - log q(x)], shape batch_shape. NotImplementedError when no closed form is
    registered for the pair."""
    try:
        fun = _KL_MEMOIZE[type(p), type(q)]
    except KeyError:
        fun = _dispatch_kl(type(p), type(q))
        _KL_MEMOIZE[type(p), type(q)] = fun
    if fun is NotImplemented:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {p.__class__.__name__} and q type "
                                  f"{q.__class__.__name__}")
    return fun(p, q)


def _infs_like(t):
    return cltorch.full_like(t, math.inf)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (F.softplus(-q.logits) - F.softplus(-p.logits))
    t1 = cltorch.where(q.probs == 0, _infs_like(t1), t1)
    t1 = cltorch.where(p.probs == 0, cltorch.zeros_like(t1), t1)
    t2 = (1 - p.probs) * (F.softplus(q.logits) - F.softplus(p.logits))
    t2 = cltorch.where(q.probs == 1, _infs_like(t2), t2)
    t2 = cltorch.where(p.probs == 1, cltorch.zeros_like(t2), t2)
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = cltorch.where((q.probs == 0).expand_as(t), _infs_like(t), t)
    t = cltorch.where((p.probs == 0).expand_as(t), cltorch.zeros_like(t), t)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return cltorch.where((q.low > p.low) | (q.high < p.high), _infs_like(result), result)


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    common_term = p.high - p.low
    t1 = (math.sqrt(math.pi * 2) * q.scale / common_term).log()
    t2 = common_term.pow(2) / 12
    t3 = ((p.high + p.low - 2 * q.loc) / 2).pow(2)
    return t1 + 0.5 * (t2 + t3) / q.scale.pow(2)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    return -rate_ratio.log() + rate_ratio - 1


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t1 = -scale_ratio.log()
    t2 = loc_abs_diff / q.scale
    t3 = scale_ratio * cltorch.exp(-loc_abs_diff / p.scale)
    return t1 + t2 + t3 - 1


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different event shapes cannot "
                         "be computed")
    half_term1 = q._half_log_det() - p._half_log_det()
    qL, pL = q._unbroadcasted_scale_tril, p._unbroadcasted_scale_tril
    term2 = solve_lower(qL, pL).pow(2).sum((-2, -1))          # tr(Σq^-1 Σp)
    term3 = batch_mahalanobis(qL, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - p.event_shape[0])


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("KL between Independent distributions with different reinterpreted_batch_ndims")
    result = kl_divergence(p.base_dist, q.base_dist)
    return _sum_rightmost(result, p.reinterpreted_batch_ndims)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    if p.transforms != q.transforms:
        raise NotImplementedError("KL between TransformedDistributions with different transforms")
    if p.event_shape != q.event_shape:
        raise NotImplementedError("KL between TransformedDistributions with different event shapes")
    return kl_divergence(p.base_dist, q.base_dist)
