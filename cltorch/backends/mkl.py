"""``cltorch.backends.mkl``: MKL is not used by cltorch; ``is_available()`` is False."""
__all__ = ["is_available"]


def is_available():
    return False
