"""The activation functions of ``cltorch.nn.functional`` (re-exported there; PyTorch's names and signatures).

Floor 7: each function calls an op. The piecewise activations are single-kernel ops of
``cltorch.ops.activations`` with PyTorch's derivative formulas; with ``inplace=True`` (and the ``*_`` forms)
they write the input and keep for the backward what PyTorch keeps: the result for relu, leaky_relu, elu, celu,
selu and rrelu (whose in-place backward with a negative slope raises RuntimeError, as PyTorch's); a copy of the
input for hardtanh, relu6, threshold, hardsigmoid, hardswish, silu and mish. In-place on a leaf that requires
grad raises RuntimeError. The rest are composed from pointwise ops.
"""
import cltorch as torch
from ..ops import activations as _act

__all__ = ["threshold", "threshold_", "relu", "relu_", "hardtanh", "hardtanh_", "relu6", "elu", "elu_", "selu",
           "selu_", "celu", "celu_", "leaky_relu", "leaky_relu_", "prelu", "rrelu", "rrelu_", "glu", "gelu",
           "logsigmoid", "hardshrink", "softshrink", "tanhshrink", "softsign", "softplus", "tanh", "sigmoid",
           "hardsigmoid", "silu", "mish", "hardswish"]

_SELU_ALPHA, _SELU_SCALE = _act.SELU_ALPHA, _act.SELU_SCALE


def threshold(input, threshold, value, inplace=False):  # noqa: A002
    """``x if x > threshold else value``; gradient 1 where x > threshold, else 0."""
    return (_act.threshold_ if inplace else _act.threshold)(input, threshold, value)


def threshold_(input, threshold, value):  # noqa: A002
    return _act.threshold_(input, threshold, value)


def relu(input, inplace=False):  # noqa: A002
    """max(x, 0); gradient 0 at x = 0, as PyTorch."""
    return _act.relu_(input) if inplace else torch.relu(input)


def relu_(input):  # noqa: A002
    return _act.relu_(input)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):  # noqa: A002
    """Clamp to [min_val, max_val]; the gradient is 1 strictly inside and 0 at and beyond the limits
    (PyTorch's hardtanh_backward). min_val > max_val raises ValueError."""
    return (_act.hardtanh_ if inplace else _act.hardtanh)(input, min_val, max_val)


def hardtanh_(input, min_val=-1.0, max_val=1.0):  # noqa: A002
    return _act.hardtanh_(input, min_val, max_val)


def relu6(input, inplace=False):  # noqa: A002
    """min(max(x, 0), 6) = hardtanh(x, 0, 6)."""
    return hardtanh(input, 0.0, 6.0, inplace)


def elu(input, alpha=1.0, inplace=False):  # noqa: A002
    """``x if x > 0 else alpha * (exp(x) - 1)``."""
    return (_act.elu_ if inplace else _act.elu)(input, alpha)


def elu_(input, alpha=1.0):  # noqa: A002
    return _act.elu_(input, alpha)


def selu(input, inplace=False):  # noqa: A002
    """``scale * elu(x, alpha)`` with Klambauer et al.'s constants."""
    return (_act.selu_ if inplace else _act.selu)(input)


def selu_(input):  # noqa: A002
    return _act.selu_(input)


def celu(input, alpha=1.0, inplace=False):  # noqa: A002
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``; alpha = 0 raises RuntimeError."""
    return (_act.celu_ if inplace else _act.celu)(input, alpha)


def celu_(input, alpha=1.0):  # noqa: A002
    return _act.celu_(input, alpha)


def leaky_relu(input, negative_slope=0.01, inplace=False):  # noqa: A002
    """``x if x > 0 else negative_slope * x``."""
    return (_act.leaky_relu_ if inplace else _act.leaky_relu)(input, negative_slope)


def leaky_relu_(input, negative_slope=0.01):  # noqa: A002
    return _act.leaky_relu_(input, negative_slope)


def prelu(input, weight):  # noqa: A002
    """``x if x > 0 else weight * x``; weight has 1 or C (= input.shape[1]) entries (``cltorch.prelu``)."""
    return torch.prelu(input, weight)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):  # noqa: A002
    """Randomized leaky ReLU: slope ~ U(lower, upper) per negative element in training, (lower+upper)/2 in eval."""
    return (_act.rrelu_ if inplace else _act.rrelu)(input, lower, upper, training)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):  # noqa: A002
    return _act.rrelu_(input, lower, upper, training)


def glu(input, dim=-1):  # noqa: A002
    """``a * sigmoid(b)`` where a, b are the halves of ``input`` along ``dim``."""
    if input.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    if input.shape[dim] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim % input.dim()} is size "
                           f"{input.shape[dim]}")
    a, b = input.chunk(2, dim)
    return a * torch.sigmoid(b)


def gelu(input, approximate="none"):  # noqa: A002
    """``x * Phi(x)`` (exact, erf) or the tanh approximation (``approximate='tanh'``)."""
    return torch.gelu(input, approximate=approximate)


def logsigmoid(input):  # noqa: A002
    """``log(sigmoid(x)) = -softplus(-x)``, stable for large |x|."""
    return -torch.softplus(-input)


def hardshrink(input, lambd=0.5):  # noqa: A002
    """``x`` where ``|x| > lambd``, else 0 (``cltorch.hardshrink``)."""
    return torch.hardshrink(input, lambd)


def softshrink(input, lambd=0.5):  # noqa: A002
    """``x - lambd`` above lambd, ``x + lambd`` below -lambd, else 0."""
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    return torch.where(input > lambd, input - lambd, torch.where(input < -lambd, input + lambd, 0.0))


def tanhshrink(input):  # noqa: A002
    return input - torch.tanh(input)


def softsign(input):  # noqa: A002
    return input / (input.abs() + 1)


def softplus(input, beta=1.0, threshold=20.0):  # noqa: A002
    """``log(1 + exp(beta * x)) / beta``, linear where ``beta * x > threshold``."""
    return torch.softplus(input, beta, threshold)


def tanh(input):  # noqa: A002
    return torch.tanh(input)


def sigmoid(input):  # noqa: A002
    return torch.sigmoid(input)


def hardsigmoid(input, inplace=False):  # noqa: A002
    """``relu6(x + 3) / 6``; gradient 1/6 strictly inside (-3, 3), else 0."""
    return (_act.hardsigmoid_ if inplace else _act.hardsigmoid)(input)


def silu(input, inplace=False):  # noqa: A002
    """``x * sigmoid(x)``."""
    return input.silu_() if inplace else torch.silu(input)


def mish(input, inplace=False):  # noqa: A002
    """``x * tanh(softplus(x))``."""
    return input.mish_() if inplace else torch.mish(input)


def hardswish(input, inplace=False):  # noqa: A002
    """``x * relu6(x + 3) / 6``; gradient 0 up to -3, ``x/3 + 1/2`` strictly inside (-3, 3), 1 from 3 on
    (PyTorch 2.13's hardswish_backward)."""
    return (_act.hardswish_ if inplace else _act.hardswish)(input)
