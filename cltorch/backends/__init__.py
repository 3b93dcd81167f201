"""``cltorch.backends``: PyTorch's backend flags, accepted so scripts run; they change nothing here."""
from types import SimpleNamespace

__all__ = ["cudnn", "mps", "cuda", "opencl"]

cudnn = SimpleNamespace(benchmark=False, deterministic=False, enabled=True, allow_tf32=False,
                        is_available=lambda: False)
mps = SimpleNamespace(is_available=lambda: False, is_built=lambda: False)
cuda = SimpleNamespace(matmul=SimpleNamespace(allow_tf32=False), is_built=lambda: False)


def _opencl_available():
    from .. import cl
    return cl.is_available()


opencl = SimpleNamespace(is_available=_opencl_available)
