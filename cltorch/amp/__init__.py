"""``cltorch.amp``: PyTorch's ``torch.amp`` (``autocast``, ``GradScaler``, ``custom_fwd``, ``custom_bwd``).

autocast casts per PyTorch's op lists on "cpu" and "cl" (see ``autocast_mode``); GradScaler is real on every
cltorch device."""
from .autocast_mode import (autocast, custom_fwd, custom_bwd, is_autocast_available, is_autocast_enabled,  # noqa
                            get_autocast_dtype, set_autocast_dtype, set_autocast_enabled, clear_autocast_cache,
                            is_autocast_cache_enabled, set_autocast_cache_enabled, autocast_increment_nesting,
                            autocast_decrement_nesting, is_autocast_cpu_enabled, get_autocast_cpu_dtype,
                            get_autocast_gpu_dtype)
from .grad_scaler import GradScaler  # noqa: F401


def _install_nn():
    import sys
    from ..ops._autocast import install
    from .. import nn  # noqa: F401
    from .. import linalg
    from ..linalg import _products
    from ..ops import top_level
    mods = [m for k, m in list(sys.modules.items()) if k.startswith("cltorch.nn.") and "functional" in k]
    return install(mods + [_products, top_level], aliases=[sys.modules["cltorch"], linalg])


_install_nn()

__all__ = ["autocast", "custom_fwd", "custom_bwd", "is_autocast_available", "GradScaler"]
