"""``cltorch.accelerator`` (as in torch 2.13): the current accelerator is the default OpenCL device."""
from . import cl as _cl
from ._device import device as _device

__all__ = ["is_available", "current_accelerator", "device_count", "current_device_index", "set_device_index",
           "synchronize"]


def is_available():
    return _cl.is_available()


def current_accelerator(check_available=False):
    """The default OpenCL device as ``device('cl', N)``, or None when there is none."""
    if not _cl.is_available():
        if check_available:
            raise RuntimeError("no OpenCL device is available")
        return None
    return _device("cl", _cl.current_device())


def device_count():
    return _cl.device_count()


def current_device_index():
    return _cl.current_device()


def set_device_index(index):
    _cl.set_device(index)


set_device_idx = set_device_index


def synchronize(device=None):
    _cl.synchronize(device)
