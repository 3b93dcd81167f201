"""Distribution: the base class of every distribution, as torch.distributions.Distribution.

A distribution has a ``batch_shape`` (independent, non-identical parameters) and an ``event_shape`` (the
shape of one draw); ``sample(sample_shape)`` returns ``sample_shape + batch_shape + event_shape``.
With validation on (the default, as PyTorch's under ``__debug__``), parameters are checked against
``arg_constraints`` at construction and values against ``support`` in ``log_prob``, raising ValueError with
PyTorch's messages.
"""
import warnings

import cltorch

from . import constraints
from .utils import lazy_property

__all__ = ["Distribution"]


def _fmt_param(v):
    if isinstance(v, cltorch.Tensor):
        if v.dim() == 0:
            return f"{v.item()}"
        return f"{v}" if v.numel() == 1 else f"{v.size()}"
    return f"{v}"


class Distribution:
    """Abstract base class for probability distributions.

    Args: batch_shape (Size), event_shape (Size), validate_args (bool or None: None uses the class default,
    set by ``Distribution.set_default_validate_args``)."""
    has_rsample = False
    has_enumerate_support = False
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value):
        """Turns argument validation on or off for every distribution built afterwards."""
        if value not in (True, False):
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape=cltorch.Size(), event_shape=cltorch.Size(), validate_args=None):
        self._batch_shape = cltorch.Size(batch_shape)
        self._event_shape = cltorch.Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            try:
                arg_constraints = self.arg_constraints
            except NotImplementedError:
                arg_constraints = {}
                warnings.warn(f"{self.__class__} does not define `arg_constraints`. Please set "
                              "`arg_constraints = {}` or initialize the distribution with `validate_args=False` "
                              "to turn off validation.")
            for param, constraint in arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue
                if param not in self.__dict__ and isinstance(getattr(type(self), param), lazy_property):
                    continue        # the other parametrisation (probs vs logits) was given
                value = getattr(self, param)
                valid = constraint.check(value)
                if not bool(valid.all()):
                    raise ValueError(
                        f"Expected parameter {param} "
                        f"({type(value).__name__} of shape {tuple(value.shape)}) "
                        f"of distribution {repr(self)} "
                        f"to satisfy the constraint {repr(constraint)}, "
                        f"but found invalid values:\n{value}")
        super().__init__()

    def expand(self, batch_shape, _instance=None):
        """A new distribution with parameters expanded (views, no copy) to ``batch_shape``."""
        raise NotImplementedError

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    @property
    def arg_constraints(self):
        """dict from parameter name to the Constraint it must satisfy."""
        raise NotImplementedError

    @property
    def support(self):
        """The Constraint of the distribution's support."""
        raise NotImplementedError

    @property
    def mean(self):
        raise NotImplementedError

    @property
    def mode(self):
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError

    @property
    def stddev(self):
        return self.variance.sqrt()

    def sample(self, sample_shape=cltorch.Size()):
        """A draw of shape ``sample_shape + batch_shape + event_shape``, without gradient."""
        with cltorch.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=cltorch.Size()):
        """A reparameterised draw (gradients flow to the parameters); only where ``has_rsample``."""
        raise NotImplementedError(f"{type(self).__name__} does not support rsample (has_rsample is False)")

    def sample_n(self, n):
        warnings.warn("sample_n will be deprecated. Use .sample((n,)) instead", UserWarning)
        return self.sample(cltorch.Size((n,)))

    def log_prob(self, value):
        """Log of the density/mass at ``value`` (shape broadcast with batch_shape + event_shape, less the
        event dims)."""
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError

    def icdf(self, value):
        raise NotImplementedError

    def enumerate_support(self, expand=True):
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    def perplexity(self):
        return cltorch.exp(self.entropy())

    def _extended_shape(self, sample_shape=cltorch.Size()):
        if not isinstance(sample_shape, cltorch.Size):
            sample_shape = cltorch.Size(sample_shape)
        return cltorch.Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value):
        if not isinstance(value, cltorch.Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim_start = len(value.size()) - len(self._event_shape)
        if tuple(value.size()[event_dim_start:]) != tuple(self._event_shape):
            raise ValueError(f"The right-most size of value must match event_shape: {value.size()} vs "
                             f"{self._event_shape}.")
        actual_shape = value.size()
        expected_shape = cltorch.Size(tuple(self._batch_shape) + tuple(self._event_shape))
        for i, j in zip(reversed(actual_shape), reversed(expected_shape)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {actual_shape} vs "
                                 f"{expected_shape}.")
        try:
            support = self.support
        except NotImplementedError:
            warnings.warn(f"{self.__class__} does not define `support` to enable sample validation. Please "
                          "initialize the distribution with `validate_args=False` to turn off validation.")
            return
        assert support is not None
        valid = support.check(value)
        if not bool(valid.all()):
            raise ValueError("Expected value argument "
                             f"({type(value).__name__} of shape {tuple(value.shape)}) "
                             f"to be within the support ({repr(support)}) "
                             f"of the distribution {repr(self)}, "
                             f"but found invalid values:\n{value}")

    def _expand_params(self, cls, batch_shape, _instance, names):
        """``expand`` for a distribution whose state is the tensors ``names``, each of the batch shape: a new
        instance of ``cls`` (or ``_instance``) with each expanded to ``batch_shape`` (views, no copies)."""
        new = self._get_checked_instance(cls, _instance)
        batch_shape = cltorch.Size(batch_shape)
        for name in names:
            setattr(new, name, getattr(self, name).expand(batch_shape))
        super(cls, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _get_checked_instance(self, cls, _instance=None):
        if _instance is None and type(self).__init__ != cls.__init__:
            raise NotImplementedError(f"Subclass {self.__class__.__name__} of {cls.__name__} that defines a "
                                      "custom __init__ method must also define a custom .expand() method.")
        return self.__new__(type(self)) if _instance is None else _instance

    def __repr__(self):
        param_names = [k for k, _ in self.arg_constraints.items() if k in self.__dict__]
        args_string = ", ".join(f"{p}: {_fmt_param(self.__dict__[p])}" for p in param_names)
        return self.__class__.__name__ + "(" + args_string + ")"
