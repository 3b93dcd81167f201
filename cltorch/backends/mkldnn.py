"""``cltorch.backends.mkldnn``: oneDNN is not used by cltorch. ``is_available()`` is False; ``enabled`` and
``deterministic`` are accepted, kept and change nothing."""
import contextlib

__all__ = ["is_available", "enabled", "deterministic", "flags"]

enabled = True
deterministic = False
allow_tf32 = False


def is_available():
    """False: cltorch's cpu kernels run on the OpenCL CPU device, not oneDNN."""
    return False


@contextlib.contextmanager
def flags(enabled=False, deterministic=False):
    """Sets ``enabled``/``deterministic`` inside the block and restores them after."""
    g = globals()
    old = (g["enabled"], g["deterministic"])
    g["enabled"], g["deterministic"] = enabled, deterministic
    try:
        yield
    finally:
        g["enabled"], g["deterministic"] = old
