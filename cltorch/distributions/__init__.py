"""cltorch.distributions: torch.distributions' probability distributions, written on cltorch's public
tensor API (their math composes existing ops, so autograd works; draws come from cltorch's Philox
generator, so they do not equal torch's numbers for the same seed).

Provided: Bernoulli, Categorical, OneHotCategorical(StraightThrough), Normal, LogNormal, Uniform,
Exponential, Laplace, Poisson, MultivariateNormal, Independent, TransformedDistribution, the transforms in
``transforms``, ``constraints``, ``kl_divergence``/``register_kl``. Not provided: Gamma, Beta, Dirichlet,
Chi2, StudentT and the others that need a gamma sampler (cltorch has no ``_standard_gamma``).
"""
from . import constraints, transforms  # noqa: F401
from .bernoulli import Bernoulli
from .categorical import Categorical
from .distribution import Distribution
from .exp_family import ExponentialFamily
from .exponential import Exponential
from .independent import Independent
from .kl import kl_divergence, register_kl
from .laplace import Laplace
from .log_normal import LogNormal
from .multivariate_normal import MultivariateNormal
from .normal import Normal
from .one_hot_categorical import OneHotCategorical, OneHotCategoricalStraightThrough
from .poisson import Poisson
from .transformed_distribution import TransformedDistribution
from .transforms import (AbsTransform, AffineTransform, ComposeTransform, ExpTransform,  # noqa: F401
                         PowerTransform, SigmoidTransform, TanhTransform, Transform)
from .uniform import Uniform

__all__ = ["AbsTransform", "AffineTransform", "Bernoulli", "Categorical", "ComposeTransform", "Distribution",
           "ExpTransform", "Exponential", "ExponentialFamily", "Independent", "Laplace", "LogNormal",
           "MultivariateNormal", "Normal", "OneHotCategorical", "OneHotCategoricalStraightThrough", "Poisson",
           "PowerTransform", "SigmoidTransform", "TanhTransform", "Transform", "TransformedDistribution",
           "Uniform", "constraints", "kl_divergence", "register_kl", "transforms"]
