"""``cltorch.backends.cudnn``: PyTorch's cuDNN flags. There is no cuDNN here: ``is_available()`` is False and
``version()`` is None.

``benchmark``, ``deterministic``, ``enabled`` and ``allow_tf32`` are accepted and kept (a script reads back what it
set), and they change nothing:

- ``benchmark``: cltorch has one kernel per op and device profile, with no auto-tuning search to turn on.
- ``deterministic``: nothing follows from it. cltorch's kernels have no cuDNN-style nondeterministic algorithms to
  swap out: reductions sum in a fixed order, Embedding's backward sums repeated ids in a fixed order (a GEMM, not
  atomics), and random numbers are Philox counters that depend only on (seed, offset, index). For PyTorch's
  stricter switch that raises on nondeterministic ops, see ``torch.use_deterministic_algorithms``.
- ``allow_tf32``: OpenCL devices here compute float32 in float32.
"""
__all__ = ["is_available", "version", "is_acceptable", "flags", "benchmark", "deterministic", "enabled",
           "allow_tf32", "benchmark_limit"]

import contextlib

benchmark = False
deterministic = False
enabled = True
allow_tf32 = True  # PyTorch's default for cuDNN convolutions
benchmark_limit = 10


def is_available():
    """False: cltorch has no cuDNN (it runs on OpenCL)."""
    return False


def version():
    """None: no cuDNN library is loaded."""
    return None


def is_acceptable(tensor):
    """False for every tensor: no cuDNN kernel runs here."""
    return False


@contextlib.contextmanager
def flags(enabled=False, benchmark=False, benchmark_limit=10, deterministic=False, allow_tf32=True):
    """Context manager that sets the flags inside and restores them after, as ``torch.backends.cudnn.flags``."""
    g = globals()
    names = ("enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32")
    new = (enabled, benchmark, benchmark_limit, deterministic, allow_tf32)
    old = tuple(g[n] for n in names)
    g.update(zip(names, new))
    try:
        yield
    finally:
        g.update(zip(names, old))
