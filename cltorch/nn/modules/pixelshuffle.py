"""PyTorch's ``torch.nn.modules.pixelshuffle`` path (the layers are defined in ``flatten.py``)."""
from .flatten import PixelShuffle, PixelUnshuffle  # noqa: F401

__all__ = ["PixelShuffle", "PixelUnshuffle"]
