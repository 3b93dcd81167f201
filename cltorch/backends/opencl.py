"""``cltorch.backends.opencl``: whether cltorch's OpenCL runtime found a device (``cltorch.cl.is_available()``)."""
__all__ = ["is_available"]


def is_available():
    """True when at least one OpenCL device is usable."""
    from .. import cl
    return cl.is_available()
