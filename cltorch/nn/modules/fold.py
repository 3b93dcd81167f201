"""PyTorch's ``torch.nn.modules.fold`` path: ``Fold`` (in ``more_layers.py``) and ``Unfold`` (in ``flatten.py``)."""
from .flatten import Unfold  # noqa: F401
from .more_layers import Fold  # noqa: F401

__all__ = ["Fold", "Unfold"]
