"""PyTorch's ``torch.nn.modules.batchnorm`` path: the batch-norm layers (defined in ``normalization.py``), their
lazy forms (``lazy.py``) and ``SyncBatchNorm`` (``sync_batchnorm.py``)."""
from .normalization import _NormBase, _BatchNorm, BatchNorm1d, BatchNorm2d, BatchNorm3d  # noqa: F401
from .lazy import _LazyNormBase, LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d  # noqa: F401
from .sync_batchnorm import SyncBatchNorm  # noqa: F401

__all__ = ["BatchNorm1d", "LazyBatchNorm1d", "BatchNorm2d", "LazyBatchNorm2d", "BatchNorm3d", "LazyBatchNorm3d",
           "SyncBatchNorm"]
