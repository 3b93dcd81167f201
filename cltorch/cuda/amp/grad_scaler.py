"""``torch.cuda.amp.grad_scaler``: the module path of the deprecated ``GradScaler`` (see :mod:`cltorch.cuda.amp`)."""
from . import GradScaler

__all__ = ["GradScaler"]
