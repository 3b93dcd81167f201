"""``torch.multiprocessing.pool``: ``Pool``, a ``multiprocessing.Pool`` of this package's default context
(forkserver), so tensors sent to its workers travel through cltorch's shared-memory reductions."""
from . import Pool

__all__ = ["Pool"]
