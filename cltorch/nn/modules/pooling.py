"""Pooling layers (PyTorch's signatures): MaxPool1d/2d, AvgPool1d/2d, AdaptiveAvgPool1d/2d, AdaptiveMaxPool2d."""
from .. import functional as F
from .module import Module

__all__ = ["MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d",
           "AdaptiveMaxPool2d"]


class _MaxPoolNd(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if (stride is not None) else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def extra_repr(self):
        return ("kernel_size={kernel_size}, stride={stride}, padding={padding}, dilation={dilation}, "
                "ceil_mode={ceil_mode}".format(**self.__dict__))


class MaxPool1d(_MaxPoolNd):
    """Max over windows of (N, C, L) or (C, L); stride defaults to kernel_size."""

    def forward(self, input):  # noqa: A002
        return F.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class MaxPool2d(_MaxPoolNd):
    """Max over windows of (N, C, H, W) or (C, H, W); stride defaults to kernel_size; padding acts as -inf;
    ``ceil_mode`` keeps a partial last window (never one starting in the right padding)."""

    def forward(self, input):  # noqa: A002
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class AvgPool1d(Module):
    """Mean over windows of (N, C, L) or (C, L)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if (stride is not None) else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def forward(self, input):  # noqa: A002
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)


class AvgPool2d(Module):
    """Mean over windows of (N, C, H, W) or (C, H, W); ``count_include_pad`` counts padded zeros in the
    divisor; ``divisor_override`` replaces the divisor."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if (stride is not None) else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def forward(self, input):  # noqa: A002
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class _AdaptivePool(Module):
    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptivePool):
    def __init__(self, output_size):
        super().__init__(output_size)

    def forward(self, input):  # noqa: A002
        return F.adaptive_avg_pool1d(input, self.output_size)


class AdaptiveAvgPool2d(_AdaptivePool):
    """Average pooling of (N, C, H, W) or (C, H, W) to ``output_size`` (int, pair, None entries keep a dim)."""

    def __init__(self, output_size):
        super().__init__(output_size)

    def forward(self, input):  # noqa: A002
        return F.adaptive_avg_pool2d(input, self.output_size)


class AdaptiveMaxPool2d(_AdaptivePool):
    def forward(self, input):  # noqa: A002
        return F.adaptive_max_pool2d(input, self.output_size, self.return_indices)


class MaxPool3d(_MaxPoolNd):
    """Max over windows of (N, C, D, H, W) or (C, D, H, W); see ``nn.functional.max_pool3d``."""

    def forward(self, input):  # noqa: A002
        return F.max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class AvgPool3d(AvgPool2d):
    """Mean over windows of (N, C, D, H, W) or (C, D, H, W); arguments as AvgPool2d."""

    def forward(self, input):  # noqa: A002
        return F.avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class AdaptiveAvgPool3d(_AdaptivePool):
    """Average pooling of (N, C, D, H, W) or (C, D, H, W) to ``output_size``."""

    def __init__(self, output_size):
        super().__init__(output_size)

    def forward(self, input):  # noqa: A002
        return F.adaptive_avg_pool3d(input, self.output_size)


class AdaptiveMaxPool1d(_AdaptivePool):
    def forward(self, input):  # noqa: A002
        return F.adaptive_max_pool1d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool3d(_AdaptivePool):
    def forward(self, input):  # noqa: A002
        return F.adaptive_max_pool3d(input, self.output_size, self.return_indices)


class _MaxUnpoolNd(Module):
    _nd = 2

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        n = self._nd

        def tup(v):
            return tuple(v) if isinstance(v, (list, tuple)) else (v,) * n
        self.kernel_size = tup(kernel_size)
        self.stride = tup(stride if stride is not None else kernel_size)
        self.padding = tup(padding)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def forward(self, input, indices, output_size=None):  # noqa: A002
        fn = getattr(F, f"max_unpool{self._nd}d")
        return fn(input, indices, self.kernel_size, self.stride, self.padding, output_size)


class MaxUnpool1d(_MaxUnpoolNd):
    """Partial inverse of MaxPool1d: ``forward(input, indices, output_size=None)``."""
    _nd = 1


class MaxUnpool2d(_MaxUnpoolNd):
    """Partial inverse of MaxPool2d: ``forward(input, indices, output_size=None)``."""
    _nd = 2


class MaxUnpool3d(_MaxUnpoolNd):
    """Partial inverse of MaxPool3d: ``forward(input, indices, output_size=None)``."""
    _nd = 3


class _FractionalMaxPoolNd(Module):
    _nd = 2

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                 _random_samples=None):
        super().__init__()
        n = self._nd

        def tup(v):
            return None if v is None else (tuple(v) if isinstance(v, (list, tuple)) else (v,) * n)
        self.kernel_size = tup(kernel_size)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = tup(output_size)
        self.output_ratio = tup(output_ratio)
        if output_size is None and output_ratio is None:
            raise ValueError(f"FractionalMaxPool{n}d requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input):  # noqa: A002
        fn = getattr(F, f"fractional_max_pool{self._nd}d")
        return fn(input, self.kernel_size, self.output_size, self.output_ratio, self.return_indices,
                  _random_samples=self._random_samples)


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """Fractional max pooling (Graham 2014) of (N, C, H, W) or (C, H, W); see F.fractional_max_pool2d."""
    _nd = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """Fractional max pooling of (N, C, D, H, W) or (C, D, H, W); see F.fractional_max_pool3d."""
    _nd = 3


__all__ += ["MaxPool3d", "AvgPool3d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool3d", "MaxUnpool1d",
            "MaxUnpool2d", "MaxUnpool3d", "FractionalMaxPool2d", "FractionalMaxPool3d"]

# PyTorch also exports these from this path; they are defined in more_layers.py, which imports this module.
from ._factory import forward_names as _forward_names  # noqa: E402
__all__ += ["LPPool1d", "LPPool2d", "LPPool3d"]
__getattr__ = _forward_names(__name__, dict.fromkeys(__all__[-3:], ".more_layers"))
