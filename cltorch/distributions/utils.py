"""Helpers shared by the distributions: broadcasting parameters, probs/logits conversion, lazy properties,
and the triangular solve of the Gaussian laws (through ``cltorch.linalg.solve_triangular``)."""
from numbers import Number

import cltorch
import cltorch.nn.functional as F

__all__ = ["broadcast_all", "logits_to_probs", "probs_to_logits", "clamp_probs", "lazy_property", "euler_constant"]

euler_constant = 0.57721566490153286060


def broadcast_all(*values):
    """Broadcasts tensors and Python numbers to one shape. Numbers become tensors of the first tensor's
    dtype and device (the default dtype when there is none). Raises ValueError for any other type."""
    if not all(isinstance(v, (cltorch.Tensor, Number)) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number, cltorch.Tensor or objects "
                         "implementing __torch_function__.")
    if not all(isinstance(v, cltorch.Tensor) for v in values):
        ref = next((v for v in values if isinstance(v, cltorch.Tensor)), None)
        kw = dict(dtype=ref.dtype, device=ref.device) if ref is not None else dict(dtype=cltorch.get_default_dtype())
        values = [v if isinstance(v, cltorch.Tensor) else cltorch.tensor(float(v), **kw) for v in values]
    return cltorch.broadcast_tensors(*values)


def _standard_normal(shape, dtype, device):
    return cltorch.randn(tuple(shape), dtype=dtype, device=device)


def _sum_rightmost(value, dim):
    """Sums the rightmost ``dim`` dims of ``value`` (dim 0: unchanged)."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[:value.dim() - dim]) + (-1,)).sum(-1)


def clamp_probs(probs):
    """Clamps probabilities to [eps, 1 - eps] of their dtype."""
    eps = cltorch.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits, is_binary=False):
    """sigmoid(logits) when binary, else softmax over the last dim."""
    return cltorch.sigmoid(logits) if is_binary else F.softmax(logits, dim=-1)


def probs_to_logits(probs, is_binary=False):
    """log(p) - log1p(-p) when binary, else log(p), with p clamped to [eps, 1 - eps]."""
    p = clamp_probs(probs)
    return (cltorch.log(p) - cltorch.log1p(-p)) if is_binary else cltorch.log(p)


class lazy_property:
    """A property computed on first access and then stored in the instance's ``__dict__`` (so it is also
    what ``Distribution.__repr__`` and argument validation see as "given")."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        with cltorch.enable_grad():
            value = self.wrapped(instance)
        instance.__dict__[self.wrapped.__name__] = value
        return value


# --- triangular linear algebra: cltorch.linalg (host LAPACK, registered derivatives) ---------------------------

def solve_lower(L, B):
    """X with L X = B for lower-triangular L (..., n, n) and B (..., n, m), batch dims broadcast:
    ``cltorch.linalg.solve_triangular(L, B, upper=False)`` (differentiable in L and B)."""
    return cltorch.linalg.solve_triangular(L, B, upper=False)


def batch_mahalanobis(L, x):
    """x^T (L L^T)^-1 x for lower-triangular L (..., n, n) and x (..., n), batch dims broadcast."""
    y = solve_lower(L, x.unsqueeze(-1)).squeeze(-1)
    return (y * y).sum(-1)
