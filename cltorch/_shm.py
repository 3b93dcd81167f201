"""POSIX shared memory: named segments and anonymous (file-descriptor) segments, mapped with ``mmap``.

Knows nothing of tensors. Two kinds of segment:

- **named** (:func:`create`, :func:`attach`, :func:`unlink`, :func:`sweep`): a ``/dev/shm`` name that
  another process opens. The DataLoader's workers and ``cltorch.multiprocessing``'s ``file_system``
  sharing strategy use them; whoever creates a name unlinks it.
- **anonymous** (:class:`Segment`): memory behind a file descriptor that has no name (``memfd_create``,
  or a shm name unlinked at once where memfd is missing). Another process gets it by receiving a
  duplicate of the descriptor (``multiprocessing.reduction.DupFd``); the memory is freed when the last
  mapping and descriptor are gone, so nothing can leak, even when a process is killed. The
  ``file_descriptor`` sharing strategy (the default) uses them.

Every mapping is ``MAP_SHARED`` (``attach(private=True)`` gives copy-on-write) and starts on a page
boundary, so a zero-copy OpenCL buffer over it needs no realignment (DESIGN amendment 7).

Python's ``multiprocessing.shared_memory.SharedMemory`` is not used: before Python 3.13 every attach
registers the segment with the resource tracker, which then unlinks or warns about segments it does not
own. ``_posixshmem`` is the C module underneath it.
"""
import mmap
import os
import secrets
import weakref

try:
    import _posixshmem
except ImportError:  # pragma: no cover - Windows
    _posixshmem = None

__all__ = ["available", "new_prefix", "create", "attach", "unlink", "sweep", "Segment", "new_shared_segment",
           "sharing_strategy", "set_sharing_strategy", "STRATEGIES"]

_SHM_DIR = "/dev/shm"


def available():
    """True when POSIX shared memory can be used on this platform."""
    return _posixshmem is not None


def new_prefix():
    """A fresh name prefix (``ct<pid>_<token>_``) for the named segments of one owner in this process."""
    return f"ct{os.getpid():x}_{secrets.token_hex(4)}_"


def _open(name, flags, mode=0o600):
    if _posixshmem is None:  # pragma: no cover
        raise RuntimeError("sharing memory between processes needs POSIX shared memory, which this platform lacks")
    return _posixshmem.shm_open("/" + name, flags, mode=mode)


def _map(fd, size, private=False):
    flags = mmap.MAP_PRIVATE if private else mmap.MAP_SHARED
    return mmap.mmap(fd, size, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE)


def create(name, nbytes):
    """Creates segment ``name`` of ``nbytes`` bytes (at least 1) and returns a writable shared mmap of it."""
    size = max(int(nbytes), 1)
    fd = _open(name, os.O_CREAT | os.O_EXCL | os.O_RDWR)
    try:
        os.ftruncate(fd, size)
        return _map(fd, size)
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
        return _map(fd, size, private)
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


def _anonymous_fd(size):
    """A descriptor of ``size`` fresh zeroed bytes of shared memory that no name reaches."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("cltorch_shared", os.MFD_CLOEXEC)
    else:  # pragma: no cover - macOS, BSDs: a name unlinked as soon as it is opened
        name = new_prefix() + "anon"
        fd = _open(name, os.O_CREAT | os.O_EXCL | os.O_RDWR)
        unlink(name)
    try:
        os.ftruncate(fd, size)
    except BaseException:
        os.close(fd)
        raise
    return fd


class Segment:
    """A shared mapping and what other processes reach it by.

    ``Segment.new(nbytes)`` makes an anonymous segment (``fd`` set, ``name`` None); ``Segment.from_fd``
    maps one received from another process (it takes ownership of the descriptor). ``Segment.named``
    makes a named one that this process owns and unlinks when the Segment dies; ``Segment.attach_named``
    maps another process's. ``mm`` is the mmap (at least one byte; ``nbytes`` is the requested size).
    The descriptor is closed when the Segment is collected; the mapping lives on while numpy arrays
    view it.
    """

    __slots__ = ("fd", "name", "nbytes", "mm", "__weakref__")

    def __init__(self, fd, name, nbytes, mm, owner):
        self.fd, self.name, self.nbytes, self.mm = fd, name, nbytes, mm
        if fd is not None:
            weakref.finalize(self, os.close, fd)
        if owner and name is not None:
            weakref.finalize(self, unlink, name)

    @classmethod
    def new(cls, nbytes):
        size = max(int(nbytes), 1)
        fd = _anonymous_fd(size)
        try:
            mm = _map(fd, size)
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, None, int(nbytes), mm, False)

    @classmethod
    def from_fd(cls, fd, nbytes):
        try:
            mm = _map(fd, max(int(nbytes), 1))
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, None, int(nbytes), mm, False)

    @classmethod
    def named(cls, name, nbytes):
        return cls(None, name, int(nbytes), create(name, nbytes), True)

    @classmethod
    def attach_named(cls, name, nbytes):
        return cls(None, name, int(nbytes), attach(name, nbytes), False)

    def identity(self):
        """A key equal in every process that maps this segment: (device, inode) of its descriptor, or its name."""
        if self.fd is not None:
            return fd_identity(self.fd)
        return ("name", self.name)


def fd_identity(fd):
    """(st_dev, st_ino) of a descriptor: the same for every process's descriptor of one segment."""
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino)


# ------------------------------------------------------------------ the sharing strategy of shared storages
STRATEGIES = ("file_descriptor", "file_system")
_strategy = ["file_descriptor"]
_named = {"pid": None, "prefix": None, "count": 0}


def sharing_strategy():
    """The strategy new shared storages use: ``"file_descriptor"`` (default) or ``"file_system"``."""
    return _strategy[0]


def set_sharing_strategy(name):
    """Sets the strategy of storages shared from now on. Raises ValueError for an unknown name."""
    if name not in STRATEGIES:
        raise ValueError(f"invalid sharing strategy {name!r}: expected one of {', '.join(STRATEGIES)}")
    _strategy[0] = name


def new_shared_segment(nbytes):
    """A fresh zeroed shared segment of ``nbytes`` under the current strategy.

    ``file_descriptor``: anonymous, reached by passing its descriptor; freed with its last user.
    ``file_system``: named ``ct<pid>_<token>_s<n>`` in /dev/shm, unlinked when this process's Segment is
    collected (or at exit); a process that receives it after that gets FileNotFoundError. It needs no
    descriptor per storage, which matters only when thousands of storages are shared at once."""
    if _strategy[0] == "file_descriptor":
        return Segment.new(nbytes)
    if _named["pid"] != os.getpid():
        _named.update(pid=os.getpid(), prefix=new_prefix(), count=0)
    _named["count"] += 1
    return Segment.named(f"{_named['prefix']}s{_named['count']}", nbytes)
