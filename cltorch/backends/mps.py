"""``cltorch.backends.mps``: Apple's Metal backend is not built into cltorch (Apple GPUs are reached through
OpenCL as ``"cl:apple"``). ``is_available()`` and ``is_built()`` are False."""
__all__ = ["is_available", "is_built", "is_macos_or_newer"]


def is_available():
    """False: no MPS device here; use ``cltorch.backends.opencl.is_available()``."""
    return False


def is_built():
    return False


def is_macos_or_newer(major, minor):
    return False
