"""PyTorch's ``torch.version``: ``__version__`` and the toolkit versions, None for the toolkits cltorch is not
built with (CUDA, HIP, XPU). ``opencl`` is the OpenCL version of the default device's platform (None without a
device)."""
from . import __version__  # noqa: F401

__all__ = ["__version__", "cuda", "hip", "xpu", "git_version", "debug"]

cuda = None
hip = None
xpu = None
git_version = "unknown"
debug = False


def __getattr__(name):
    if name == "opencl":
        try:
            from . import backend
            return backend.runtime().device.platform.version
        except Exception:   # no OpenCL device: no version to report
            return None
    raise AttributeError(f"module 'cltorch.version' has no attribute {name!r}")
