"""PyTorch's ``torch.nn.modules.instancenorm`` path: the instance-norm layers (defined in ``normalization.py``)."""
from .normalization import _InstanceNorm, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d  # noqa: F401

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]
