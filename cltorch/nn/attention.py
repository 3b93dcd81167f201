"""``cltorch.nn.attention``: choosing the scaled-dot-product-attention backend, as ``torch.nn.attention``.

``SDPBackend`` (FLASH_ATTENTION, MATH, ...) and the context manager ``sdpa_kernel(backends)`` are
defined with the fused attention op in ``cltorch.ops.attention`` and re-exported here on first use.
"""
import importlib

__all__ = ["SDPBackend", "sdpa_kernel"]


def __getattr__(name):
    if name in __all__:
        try:
            mod = importlib.import_module("cltorch.ops.attention")
        except ImportError as exc:
            raise AttributeError(f"cltorch.nn.attention.{name} needs cltorch.ops.attention ({exc})") from None
        value = getattr(mod, name, None)
        if value is None:
            raise AttributeError(f"cltorch.nn.attention.{name} is not defined by cltorch.ops.attention yet")
        globals()[name] = value
        return value
    raise AttributeError(f"module 'cltorch.nn.attention' has no attribute '{name}'")
