"""``torch.multiprocessing.queue``: ``Queue`` and ``SimpleQueue`` of this package's default context (forkserver),
whose shared cpu tensors travel as handles to the same memory."""
from . import Queue, SimpleQueue

__all__ = ["Queue", "SimpleQueue"]
