"""``cltorch.cl``: the OpenCL counterpart of ``torch.cuda``.

Devices are numbered as ``cl:N`` (see ``cltorch.backend.list_devices``). Memory statistics count the
bytes of live cltorch device storages, in bytes.
"""
from . import backend
from .backend import OutOfMemoryError, AcceleratorError, KernelBuildError, LaunchError

__all__ = ["is_available", "device_count", "get_device_name", "get_device_properties", "current_device",
           "set_device", "synchronize", "memory_allocated", "max_memory_allocated", "reset_peak_memory_stats",
           "empty_cache", "set_per_process_memory_fraction", "OutOfMemoryError", "AcceleratorError", "KernelBuildError", "LaunchError",
           "memory_reserved", "get_device_capability", "CLGraph", "graph", "is_current_stream_capturing"]

_current = [None]


def is_available():
    """True when at least one OpenCL device is installed."""
    return len(backend.list_devices()) > 0


def device_count():
    """Number of OpenCL devices, over every platform."""
    return len(backend.list_devices())


def _idx(device):
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    from ._device import canonical
    d = canonical(device)
    if d.type == "cpu":
        return backend.cpu_index()
    return d.index


def get_device_name(device=None):
    return backend.list_devices()[_idx(device)].name


def get_device_properties(device=None):
    """The DeviceInfo record: name, cls, vendor, driver_version, compute_units, global_mem (bytes), local_mem,
    max_alloc, max_work_group_size, fp16, fp64, ... (``total_memory`` is an alias of global_mem)."""
    info = backend.list_devices()[_idx(device)]
    info.total_memory = info.global_mem
    info.multi_processor_count = info.compute_units
    return info


def get_device_capability(device=None):
    info = get_device_properties(device)
    v = info.opencl_c_version.split()
    try:
        major, minor = v[2].split(".")[:2]
        return int(major), int(minor)
    except (IndexError, ValueError):
        return (1, 2)


def current_device():
    """Index of the default 'cl' device."""
    if _current[0] is None:
        _current[0] = backend.default_index()
    return _current[0]


def set_device(device):
    import os
    i = _idx(device)
    _current[0] = i
    os.environ["CLTORCH_DEVICE"] = f"cl:{i}"
    from . import _device
    _device._canon.clear()


def synchronize(device=None):
    """Wait for every queued kernel (on one device, or on all devices made so far)."""
    if device is None:
        for rt in backend.all_runtimes():
            rt.synchronize()
    else:
        backend.runtime(_idx(device)).synchronize()


def memory_allocated(device=None):
    """Bytes held by live tensors on the device."""
    return backend.runtime(_idx(device)).allocated


def max_memory_allocated(device=None):
    return backend.runtime(_idx(device)).peak


def memory_reserved(device=None):
    """Bytes the memory pool holds from the driver: live tensors' blocks plus freed blocks kept for reuse
    (``empty_cache()`` returns the latter)."""
    rt = backend.runtime(_idx(device))
    return max(rt.allocated, int(rt.pool.managed_bytes))


def reset_peak_memory_stats(device=None):
    rt = backend.runtime(_idx(device))
    rt.peak = rt.allocated


def empty_cache():
    """Returns the memory pool's cached blocks to the driver."""
    for rt in backend.all_runtimes():
        rt.synchronize()
        rt.pool.free_held()


def set_per_process_memory_fraction(fraction, device=None):
    """Limit cltorch's allocations on a device to ``fraction`` of its global memory; past it, allocation raises
    OutOfMemoryError."""
    if not 0 <= fraction <= 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    rt = backend.runtime(_idx(device))
    rt.limit = int(rt.info.global_mem * fraction)


def __getattr__(name):
    # CLGraph and graph live in cltorch._capture (loaded on first use)
    if name in ("CLGraph", "graph"):
        from ._capture import api
        return getattr(api, name)
    raise AttributeError(f"module 'cltorch.cl' has no attribute {name!r}")


def is_current_stream_capturing():
    """True while this thread records a ``cltorch.cl.graph`` block or a ``cltorch.compile`` capture run."""
    from ._capture import is_capturing
    return is_capturing()
