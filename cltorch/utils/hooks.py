"""``cltorch.utils.hooks``: ``RemovableHandle``, the handle the ``register_*_hook`` methods return."""
from ..nn.modules.module import RemovableHandle  # noqa: F401

__all__ = ["RemovableHandle"]
