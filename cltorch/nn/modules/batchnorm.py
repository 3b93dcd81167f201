"""PyTorch's ``torch.nn.modules.batchnorm`` path: the batch-norm layers (defined in ``normalization.py``)."""
from .normalization import _NormBase, _BatchNorm, BatchNorm1d, BatchNorm2d, BatchNorm3d  # noqa: F401

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d"]
