"""PyTorch's ``torch.nn.modules.channelshuffle`` path (the layer is defined in ``flatten.py``)."""
from .flatten import ChannelShuffle  # noqa: F401

__all__ = ["ChannelShuffle"]
