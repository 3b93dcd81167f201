"""Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d with PyTorch's signatures, checks and initialisation.

Weights are (out, in/groups, *k) (transposed: (in, out/groups, *k)); default init is
``kaiming_uniform_(weight, a=sqrt(5))`` and bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)), as in PyTorch.
``padding_mode`` other than 'zeros' pads explicitly with ``F.pad`` and convolves with no padding.
"""
import math

from .. import functional as F
from .. import init
from ..parameter import Parameter
from ._factory import empty_param, _single, _pair
from .module import Module

__all__ = ["Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d"]


def _reverse_repeat_tuple(t, n):
    return tuple(x for x in reversed(t) for _ in range(n))


class _ConvNd(Module):
    _tuple = staticmethod(_pair)

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, transposed, output_padding,
                 groups, bias, padding_mode, device=None, dtype=None):
        super().__init__()
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        valid_padding_strings = {"same", "valid"}
        if isinstance(padding, str):
            if padding not in valid_padding_strings:
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {valid_padding_strings}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        valid_padding_modes = {"zeros", "reflect", "replicate", "circular"}
        if padding_mode not in valid_padding_modes:
            raise ValueError(f"padding_mode must be one of {valid_padding_modes}, but got padding_mode='{padding_mode}'")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.transposed = transposed
        self.output_padding = output_padding
        self.groups = groups
        self.padding_mode = padding_mode
        if isinstance(self.padding, str):
            rp = [0, 0] * len(kernel_size)
            if padding == "same":
                for d, k, i in zip(dilation, kernel_size, range(len(kernel_size) - 1, -1, -1)):
                    total = d * (k - 1)
                    left = total // 2
                    rp[2 * i] = left
                    rp[2 * i + 1] = total - left
            self._reversed_padding_repeated_twice = rp
        else:
            self._reversed_padding_repeated_twice = _reverse_repeat_tuple(self.padding, 2)
        if transposed:
            shape = (in_channels, out_channels // groups, *kernel_size)
        else:
            shape = (out_channels, in_channels // groups, *kernel_size)
        self.weight = Parameter(empty_param(shape, device, dtype))
        if bias:
            self.bias = Parameter(empty_param((out_channels,), device, dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        s = "{in_channels}, {out_channels}, kernel_size={kernel_size}, stride={stride}"
        if self.padding != (0,) * len(self.padding):
            s += ", padding={padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += ", dilation={dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += ", output_padding={output_padding}"
        if self.groups != 1:
            s += ", groups={groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode={padding_mode}"
        return s.format(**self.__dict__)

    def __setstate__(self, state):
        super().__setstate__(state)
        if not hasattr(self, "padding_mode"):
            self.padding_mode = "zeros"


class Conv1d(_ConvNd):
    """1-D convolution over (N, C_in, L) or (C_in, L)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, _single(kernel_size), _single(stride),
                         padding if isinstance(padding, str) else _single(padding), _single(dilation), False,
                         _single(0), groups, bias, padding_mode, device, dtype)

    def _conv_forward(self, input, weight, bias):  # noqa: A002
        if self.padding_mode != "zeros":
            return F.conv1d(F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode), weight,
                            bias, self.stride, _single(0), self.dilation, self.groups)
        return F.conv1d(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):  # noqa: A002
        return self._conv_forward(input, self.weight, self.bias)


class Conv2d(_ConvNd):
    """2-D convolution over (N, C_in, H, W) or (C_in, H, W); ``padding`` may be 'same' or 'valid'."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, _pair(kernel_size), _pair(stride),
                         padding if isinstance(padding, str) else _pair(padding), _pair(dilation), False, _pair(0),
                         groups, bias, padding_mode, device, dtype)

    def _conv_forward(self, input, weight, bias):  # noqa: A002
        if self.padding_mode != "zeros":
            return F.conv2d(F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode), weight,
                            bias, self.stride, _pair(0), self.dilation, self.groups)
        return F.conv2d(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):  # noqa: A002
        return self._conv_forward(input, self.weight, self.bias)


class _ConvTransposeNd(_ConvNd):
    def __init__(self, *args, **kwargs):
        if kwargs.get("padding_mode", args[10] if len(args) > 10 else "zeros") != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {self.__class__.__name__}')
        super().__init__(*args, **kwargs)

    def _output_padding(self, input, output_size, stride, padding, kernel_size, num_spatial_dims,  # noqa: A002
                        dilation=None):
        if output_size is None:
            return tuple(self.output_padding)
        has_batch_dim = input.dim() == num_spatial_dims + 2
        num_non_spatial = 2 if has_batch_dim else 1
        output_size = list(output_size)
        if len(output_size) == num_non_spatial + num_spatial_dims:
            output_size = output_size[num_non_spatial:]
        if len(output_size) != num_spatial_dims:
            raise ValueError(f"ConvTranspose{num_spatial_dims}D: for {input.dim()}D input, output_size must have "
                             f"{num_spatial_dims} or {num_non_spatial + num_spatial_dims} elements (got "
                             f"{len(output_size)})")
        mins, maxs = [], []
        for d in range(num_spatial_dims):
            size = ((input.shape[d + num_non_spatial] - 1) * stride[d] - 2 * padding[d] +
                    (dilation[d] if dilation is not None else 1) * (kernel_size[d] - 1) + 1)
            mins.append(size)
            maxs.append(size + stride[d] - 1)
        for i in range(len(output_size)):
            if output_size[i] < mins[i] or output_size[i] > maxs[i]:
                raise ValueError(f"requested an output size of {output_size}, but valid sizes range from {mins} to "
                                 f"{maxs} (for an input of {list(input.shape[num_non_spatial:])})")
        return tuple(output_size[d] - mins[d] for d in range(num_spatial_dims))


class ConvTranspose1d(_ConvTransposeNd):
    """Transposed 1-D convolution; ``forward(input, output_size=None)``."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, _single(kernel_size), _single(stride), _single(padding),
                         _single(dilation), True, _single(output_padding), groups, bias, padding_mode, device, dtype)

    def forward(self, input, output_size=None):  # noqa: A002
        op = self._output_padding(input, output_size, self.stride, self.padding, self.kernel_size, 1, self.dilation)
        return F.conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding, op, self.groups,
                                  self.dilation)


class ConvTranspose2d(_ConvTransposeNd):
    """Transposed 2-D convolution; weight (in, out/groups, kH, kW); ``forward(input, output_size=None)``."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, _pair(kernel_size), _pair(stride), _pair(padding),
                         _pair(dilation), True, _pair(output_padding), groups, bias, padding_mode, device, dtype)

    def forward(self, input, output_size=None):  # noqa: A002
        op = self._output_padding(input, output_size, self.stride, self.padding, self.kernel_size, 2, self.dilation)
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding, op, self.groups,
                                  self.dilation)


from ._factory import _triple  # noqa: E402


class Conv3d(_ConvNd):
    """3-D convolution over (N, C_in, D, H, W) or (C_in, D, H, W); weight (out, in/groups, kD, kH, kW);
    ``padding`` may be 'same' or 'valid'; init as Conv2d (kaiming_uniform_ with a = sqrt(5))."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, _triple(kernel_size), _triple(stride),
                         padding if isinstance(padding, str) else _triple(padding), _triple(dilation), False,
                         _triple(0), groups, bias, padding_mode, device, dtype)

    def _conv_forward(self, input, weight, bias):  # noqa: A002
        if self.padding_mode != "zeros":
            return F.conv3d(F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode), weight,
                            bias, self.stride, _triple(0), self.dilation, self.groups)
        return F.conv3d(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):  # noqa: A002
        return self._conv_forward(input, self.weight, self.bias)


class ConvTranspose3d(_ConvTransposeNd):
    """Transposed 3-D convolution; weight (in, out/groups, kD, kH, kW); ``forward(input, output_size=None)``."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, _triple(kernel_size), _triple(stride), _triple(padding),
                         _triple(dilation), True, _triple(output_padding), groups, bias, padding_mode, device, dtype)

    def forward(self, input, output_size=None):  # noqa: A002
        op = self._output_padding(input, output_size, self.stride, self.padding, self.kernel_size, 3, self.dilation)
        return F.conv_transpose3d(input, self.weight, self.bias, self.stride, self.padding, op, self.groups,
                                  self.dilation)


__all__ += ["Conv3d", "ConvTranspose3d"]

# PyTorch also exports these from this path; they are defined in lazy.py, which imports this module.
from ._factory import forward_names as _forward_names  # noqa: E402
__all__ += ["LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d"]
__getattr__ = _forward_names(__name__, dict.fromkeys(__all__[-6:], ".lazy"))
