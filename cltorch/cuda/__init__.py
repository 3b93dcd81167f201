"""``cltorch.cuda``: present so that PyTorch scripts' first lines run. CUDA is never available here; use
``"cl"`` devices (``cltorch.cl``). ``cltorch.cuda.amp`` holds PyTorch's deprecated ``torch.cuda.amp`` names."""

__all__ = ["is_available", "device_count", "manual_seed", "manual_seed_all", "synchronize", "empty_cache", "amp",
           "is_bf16_supported"]


def is_available():
    """Always False: cltorch runs on OpenCL. Use ``cltorch.cl.is_available()`` and the device ``"cl"``."""
    return False


def device_count():
    return 0


def manual_seed(seed):
    """Seeds cltorch's generator (the same Philox stream serves every device)."""
    from ..ops.random import manual_seed as ms
    ms(seed)


manual_seed_all = manual_seed


def synchronize(device=None):
    pass


def empty_cache():
    pass


def is_bf16_supported(including_emulation=True):
    """False: there is no CUDA device (cltorch's bfloat16 is a storage dtype on every "cl" device)."""
    return False


from . import amp  # noqa: E402,F401
