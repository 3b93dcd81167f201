"""``torch.cuda.amp.common``: ``amp_definitely_not_available()``, True here as in torch without CUDA (cltorch has
no CUDA devices)."""

__all__ = ["amp_definitely_not_available"]


def amp_definitely_not_available():
    """True: CUDA autocast cannot run (there is no CUDA device); see :mod:`cltorch.amp` for OpenCL devices."""
    return True
