"""Identity, Linear and Bilinear with PyTorch's signatures and default initialisation."""
import math

from .. import functional as F
from .. import init
from ..parameter import Parameter
from ._factory import empty_param
from .module import Module

__all__ = ["Identity", "Linear", "Bilinear", "NonDynamicallyQuantizableLinear"]


class Identity(Module):
    """Returns its input; accepts and ignores any constructor arguments."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):  # noqa: A002
        return input


class Linear(Module):
    """``y = x W^T + b``: weight (out_features, in_features), bias (out_features,).

    Default init (PyTorch's): ``kaiming_uniform_(weight, a=sqrt(5))``, i.e. U(-1/sqrt(in), 1/sqrt(in)), and
    bias U(-1/sqrt(in), 1/sqrt(in)). Input (*, in_features) -> (*, out_features).
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(empty_param((out_features, in_features), device, dtype))
        if bias:
            self.bias = Parameter(empty_param((out_features,), device, dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):  # noqa: A002
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class NonDynamicallyQuantizableLinear(Linear):
    """The Linear that MultiheadAttention uses for out_proj (same as Linear; the name keeps PyTorch's repr)."""


class Bilinear(Module):
    """``y = x1^T A x2 + b``: weight (out, in1, in2), bias (out,), both U(-1/sqrt(in1), 1/sqrt(in1))."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(empty_param((out_features, in1_features, in2_features), device, dtype))
        if bias:
            self.bias = Parameter(empty_param((out_features,), device, dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")

# PyTorch also exports these from this path; they are defined in lazy.py, which imports this module.
from ._factory import forward_names as _forward_names  # noqa: E402
__all__ += ["LazyLinear"]
__getattr__ = _forward_names(__name__, dict.fromkeys(__all__[-1:], ".lazy"))
