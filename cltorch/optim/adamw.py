"""``torch.optim.adamw``: the module path of ``AdamW`` (the class lives beside ``Adam`` in :mod:`.adam`)."""
from .adam import AdamW

__all__ = ["AdamW"]
