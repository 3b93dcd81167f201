"""``torch.cpu``: the host device's module (``cltorch.cpu.amp.autocast``, ``is_available``, ``synchronize``,
``device_count``, ``current_device``). cpu tensors compute on the host's OpenCL CPU device, synchronously."""
from . import amp  # noqa: F401

__all__ = ["amp", "is_available", "synchronize", "device_count", "current_device"]


def is_available():
    """True: the host is always there."""
    return True


def synchronize(device=None):
    """cpu ops are synchronous (DESIGN amendment 1): nothing to wait for."""
    return None


def device_count():
    return 1


def current_device():
    return "cpu"
