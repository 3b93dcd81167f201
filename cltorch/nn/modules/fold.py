"""PyTorch's ``torch.nn.modules.fold`` path: ``Unfold`` (defined in ``flatten.py``). ``Fold`` is not provided yet."""
from .flatten import Unfold  # noqa: F401

__all__ = ["Unfold"]
