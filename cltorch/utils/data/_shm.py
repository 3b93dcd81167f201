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

Python's ``multiprocessing.shared_memory.SharedMemory`` is not used: before Python 3.13 every attach
registers the segment with the resource tracker, which then unlinks or warns about segments it does not
own. ``_posixshmem`` is the C module underneath it.
"""
import mmap
import os
import secrets

try:
    import _posixshmem
except ImportError:  # pragma: no cover - Windows
    _posixshmem = None

__all__ = ["available", "new_prefix", "create", "attach", "unlink", "sweep"]

_SHM_DIR = "/dev/shm"


def available():
    """True when POSIX shared memory can be used on this platform."""
    return _posixshmem is not None


def new_prefix():
    """A fresh name prefix for the segments of one DataLoader iterator in this process."""
    return f"ct{os.getpid():x}_{secrets.token_hex(4)}_"


def _open(name, flags, mode=0o600):
    if _posixshmem is None:  # pragma: no cover
        raise RuntimeError("multi-process data loading needs POSIX shared memory, which this platform lacks; "
                           "use num_workers=0")
    return _posixshmem.shm_open("/" + name, flags, mode=mode)


def create(name, nbytes):
    """Creates segment ``name`` of ``nbytes`` bytes (at least 1) and returns a writable shared mmap of it."""
    size = max(int(nbytes), 1)
    fd = _open(name, os.O_CREAT | os.O_EXCL | os.O_RDWR)
    try:
        os.ftruncate(fd, size)
        return mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    except BaseException:
        unlink(name)
        raise
    finally:
        os.close(fd)


def attach(name, nbytes, private=False):
    """Maps existing segment ``name``. ``private=True`` maps it copy-on-write: writes stay in this process."""
    size = max(int(nbytes), 1)
    fd = _open(name, os.O_RDWR)
    try:
        flags = mmap.MAP_PRIVATE if private else mmap.MAP_SHARED
        return mmap.mmap(fd, size, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)


def unlink(name):
    """Removes the name of a segment (mappings stay valid until unmapped). Missing names are ignored."""
    if _posixshmem is None:  # pragma: no cover
        return
    try:
        _posixshmem.shm_unlink("/" + name)
    except FileNotFoundError:
        pass


def sweep(prefix):
    """Unlinks every segment whose name starts with ``prefix`` (Linux: scans /dev/shm). Returns the count."""
    try:
        names = os.listdir(_SHM_DIR)
    except OSError:  # no /dev/shm (macOS): only segments that were received get unlinked
        return 0
    n = 0
    for name in names:
        if name.startswith(prefix):
            unlink(name)
            n += 1
    return n
