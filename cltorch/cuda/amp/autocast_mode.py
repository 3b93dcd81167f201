"""``torch.cuda.amp.autocast_mode``: the module path of the deprecated ``autocast``, ``custom_fwd``, ``custom_bwd``
(defined in :mod:`cltorch.cuda.amp`)."""
from . import autocast, custom_bwd, custom_fwd

__all__ = ["autocast", "custom_fwd", "custom_bwd"]
