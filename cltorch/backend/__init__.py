"""Floor 3: OpenCL platforms and devices, contexts and queues, memory pool, program build and cache.

Knows nothing of tensors. See DESIGN.md.
"""
from . import drivers  # noqa: F401
from .devices import DeviceInfo, classify, list_devices, resolve, available_text, unusable_devices
from .geometry import LaunchError
from .profile import load_profile
from .program import KernelBuildError, render, stats, reset_stats
from .runtime import (Runtime, OutOfMemoryError, AcceleratorError, NoDeviceError, runtime, cpu_runtime,
                      cpu_index,
                      cpu_device_present, default_index, all_runtimes, in_forked_child, FORK_MESSAGE)

__all__ = ["DeviceInfo", "classify", "list_devices", "unusable_devices", "resolve", "available_text", "load_profile",
           "KernelBuildError", "LaunchError", "render", "stats", "reset_stats", "Runtime", "OutOfMemoryError",
           "AcceleratorError", "NoDeviceError",
           "runtime", "cpu_runtime", "cpu_index", "cpu_device_present", "default_index", "all_runtimes"]
