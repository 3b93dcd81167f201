"""``cltorch.backends.openmp``: cltorch does not run its own OpenMP threads (host parallelism is the OpenCL CPU
device's); ``is_available()`` is False."""
__all__ = ["is_available"]


def is_available():
    return False
