"""``cltorch.backends.cpu``: the host CPU's SIMD level as PyTorch names it. cltorch's cpu kernels are compiled by
the OpenCL CPU device (PoCL), which picks the instruction set itself; no kernel is chosen by capability here, so
this reports PyTorch's name for that case, ``"DEFAULT"``."""
__all__ = ["get_cpu_capability"]


def get_cpu_capability():
    return "DEFAULT"
