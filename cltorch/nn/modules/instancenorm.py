"""PyTorch's ``torch.nn.modules.instancenorm`` path: the instance-norm layers (defined in ``normalization.py``)
and their lazy forms (``lazy.py``)."""
from .normalization import _InstanceNorm, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d  # noqa: F401
from .lazy import LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d  # noqa: F401

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d",
           "LazyInstanceNorm3d"]
