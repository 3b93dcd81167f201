"""POSIX shared-memory segments that carry tensors between DataLoader workers and the main process.

Who creates, maps and unlinks what:

- worker -> main (batches): a worker writes each collated tensor into a segment and sends only the
  name, shape, strides and dtype. The main process maps the segment (``MAP_SHARED``), and a finalizer on
  the mapping notes when the last tensor viewing it has died; the name then goes back to the worker
  with its next task, and the worker writes a later batch into the same, already-mapped pages (fresh
  tmpfs pages cost a zero-fill as large as the copy). A segment the main process still holds is never
  reused. The worker keeps at most 16 spare segments and unlinks the rest; at exit it unlinks all of
  its names, and the main process sweeps the iterator's prefix at shutdown, so a dead worker or a dead
  main process leaves nothing behind as long as the other side survives.
- main -> worker (the dataset): large arrays and cpu-tensor storages of the dataset are copied once
  into segments owned by the main process; workers map them copy-on-write (``MAP_PRIVATE``), which
  gives them the private-copy semantics of pickling (or of ``fork``) without copying. The main process
  unlinks them once every worker has mapped them, and again (idempotently) at shutdown.

Names carry a prefix that identifies the main process and the loader iterator
(``ct<pid>_<token>_``), so the main process can sweep up every segment of an iterator (see :func:`sweep`).

The primitives themselves live in ``cltorch._shm`` (shared with ``cltorch.multiprocessing``).
"""
from ..._shm import available, new_prefix, create, attach, unlink, sweep  # noqa: F401

__all__ = ["available", "new_prefix", "create", "attach", "unlink", "sweep"]
