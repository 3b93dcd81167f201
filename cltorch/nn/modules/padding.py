"""PyTorch's ``torch.nn.modules.padding`` path: the padding layers (defined in ``upsampling.py``)."""
from .upsampling import (_PadNd, ConstantPad1d, ConstantPad2d, ZeroPad1d, ZeroPad2d, ReflectionPad1d,  # noqa: F401
                         ReflectionPad2d, ReplicationPad1d, ReplicationPad2d, CircularPad1d, CircularPad2d,
                         ConstantPad3d, ZeroPad3d, ReflectionPad3d, ReplicationPad3d, CircularPad3d)

__all__ = ["ConstantPad1d", "ConstantPad2d", "ZeroPad1d", "ZeroPad2d", "ReflectionPad1d", "ReflectionPad2d",
           "ReplicationPad1d", "ReplicationPad2d", "CircularPad1d", "CircularPad2d",
           "ConstantPad3d", "ZeroPad3d", "ReflectionPad3d", "ReplicationPad3d", "CircularPad3d"]
