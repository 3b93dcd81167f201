"""``torch.cpu.amp``: ``autocast`` for cpu tensors (bfloat16 by default) and ``GradScaler``."""
from ...amp import GradScaler as _GradScaler
from ...amp import autocast as _autocast
from ... import _dtype as D

__all__ = ["autocast", "GradScaler"]


class autocast(_autocast):
    """PyTorch's ``torch.cpu.amp.autocast(enabled=True, dtype=torch.bfloat16, cache_enabled=True)``: the same as
    ``cltorch.autocast("cpu", ...)``."""

    def __init__(self, enabled=True, dtype=D.bfloat16, cache_enabled=True):
        super().__init__("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_GradScaler):
    """PyTorch's ``torch.cpu.amp.GradScaler``: ``cltorch.amp.GradScaler("cpu", ...)``."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True):
        super().__init__("cpu", init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff_factor,
                         growth_interval=growth_interval, enabled=enabled)
