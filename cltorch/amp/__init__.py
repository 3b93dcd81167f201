"""``cltorch.amp``: PyTorch's ``torch.amp`` (``autocast``, ``GradScaler``, ``custom_fwd``, ``custom_bwd``).

GradScaler is real on every cltorch device; autocast is a pass-through when disabled and, on "cl"/"cpu", not
implemented yet when enabled (see ``autocast_mode``)."""
from .autocast_mode import autocast, custom_fwd, custom_bwd, is_autocast_available  # noqa: F401
from .grad_scaler import GradScaler  # noqa: F401

__all__ = ["autocast", "custom_fwd", "custom_bwd", "is_autocast_available", "GradScaler"]
