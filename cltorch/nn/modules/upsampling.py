"""Upsample (and the nearest/bilinear shorthands) and the padding layers, over F.interpolate / F.pad."""
from .. import functional as F
from ._factory import _ntuple
from .module import Module

__all__ = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d", "ZeroPad1d", "ZeroPad2d", "ConstantPad1d",
           "ConstantPad2d", "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d",
           "CircularPad1d", "CircularPad2d", "ConstantPad3d", "ZeroPad3d", "ReflectionPad3d", "ReplicationPad3d", "CircularPad3d"]


class Upsample(Module):
    """Resize (N, C, *spatial) to ``size`` or by ``scale_factor`` with ``mode`` ('nearest', 'bilinear', ...)."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        self.scale_factor = float(scale_factor) if isinstance(scale_factor, (int, float)) else (
            tuple(float(f) for f in scale_factor) if scale_factor else None)
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):  # noqa: A002
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self):
        if self.scale_factor is not None:
            info = "scale_factor=" + repr(self.scale_factor)
        else:
            info = "size=" + repr(self.size)
        return info + ", mode=" + repr(self.mode)


class UpsamplingNearest2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class _PadNd(Module):
    mode = "constant"
    n = 2

    def __init__(self, padding, value=0.0):
        super().__init__()
        self.padding = _ntuple(2 * self.n)(padding)
        self.value = value

    def forward(self, input):  # noqa: A002
        if self.mode == "constant":
            return F.pad(input, self.padding, "constant", self.value)
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self):
        if self.mode == "constant":
            return f"padding={self.padding}, value={self.value}"
        return f"{self.padding}"       # torch's reflection/replication/circular reprs: the tuple alone


class ConstantPad1d(_PadNd):
    n = 1

    def __init__(self, padding, value):
        super().__init__(padding, value)


class ConstantPad2d(_PadNd):
    def __init__(self, padding, value):
        super().__init__(padding, value)


class ZeroPad1d(_PadNd):
    n = 1

    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad2d(_PadNd):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ReflectionPad1d(_PadNd):
    mode, n = "reflect", 1


class ReflectionPad2d(_PadNd):
    mode = "reflect"


class ReplicationPad1d(_PadNd):
    mode, n = "replicate", 1


class ReplicationPad2d(_PadNd):
    mode = "replicate"


class CircularPad1d(_PadNd):
    mode, n = "circular", 1


class CircularPad2d(_PadNd):
    mode = "circular"


class ConstantPad3d(_PadNd):
    n = 3

    def __init__(self, padding, value):
        super().__init__(padding, value)


class ZeroPad3d(ZeroPad2d):
    n = 3


class ReflectionPad3d(_PadNd):
    mode, n = "reflect", 3


class ReplicationPad3d(_PadNd):
    mode, n = "replicate", 3


class CircularPad3d(_PadNd):
    mode, n = "circular", 3
