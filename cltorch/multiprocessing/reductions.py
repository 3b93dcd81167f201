"""How cpu tensors and storages travel between processes: as handles to shared memory, never as copies.

Registered with ``multiprocessing.reduction.ForkingPickler`` (:func:`init_reductions`), the pickler that
multiprocessing uses for ``Process`` arguments under spawn/forkserver, ``Queue``, ``SimpleQueue``, ``Pipe``
and ``Pool``. Plain ``pickle`` (and ``cltorch.save``) still copy values.

- A cpu storage is first moved into shared memory in the sending process (``Storage.share_memory_``, as
  PyTorch does: sending a tensor makes it shared), then sent as a handle: under the ``file_descriptor``
  strategy a duplicate of its descriptor (``multiprocessing.reduction.DupFd``: passed with the child's
  start, or served by multiprocessing's resource sharer for queues and pipes), under ``file_system`` its
  name. The receiver maps the same pages (``MAP_SHARED``).
- Each process keeps a cache from segment identity (device and inode of the descriptor, or the name) to
  the live storage mapping it, so a storage received twice, or sent back to its owner, is the same
  Storage object there, and views keep sharing.
- A tensor is sent as (its storage, shape, strides, offset, requires_grad, class, ``__dict__``); a
  Parameter arrives as a Parameter. ``.grad`` is not sent (as in PyTorch).
- A device (``cl:N``) tensor or storage raises RuntimeError: OpenCL has no inter-process memory
  handles (PyTorch's CUDA IPC has no OpenCL counterpart), and a silent copy would lose the receiver's
  writes. A non-leaf tensor that requires grad raises RuntimeError (autograd does not cross processes).
"""
import os
import threading
import weakref
from multiprocessing.reduction import DupFd, ForkingPickler

from .. import _shm
from .._storage import Storage
from .._tensor import Tensor

__all__ = ["init_reductions", "reduce_tensor", "reduce_storage", "rebuild_tensor", "rebuild_storage_fd",
           "rebuild_storage_filename"]

_cache = weakref.WeakValueDictionary()   # segment identity -> Storage mapping it in this process
_cache_lock = threading.Lock()


def _device_error(what, device):
    return RuntimeError(
        f"cannot send {what} on OpenCL device {device} to another process: OpenCL has no inter-process memory "
        "handles, and a copy would lose the other process's writes. Send a cpu tensor (t.cpu().share_memory_()) "
        "and move it to the device in the receiving process.")


def _remember(st):
    with _cache_lock:
        _cache.setdefault(st.shm.identity(), st)


def reduce_storage(st):
    """ForkingPickler reducer of a Storage: moves it into shared memory, then pickles a handle to it."""
    if st.host is None:
        raise _device_error("a storage", st.device)
    st.share_memory_()
    _remember(st)
    seg = st.shm
    if seg.fd is not None:
        return (rebuild_storage_fd, (DupFd(seg.fd), seg.identity(), st.dtype, st.size))
    return (rebuild_storage_filename, (seg.name, st.dtype, st.size))


def _cached(key):
    with _cache_lock:
        return _cache.get(key)


def rebuild_storage_fd(df, key, dtype, size):
    """Maps the storage whose descriptor arrived as ``df`` (or returns the Storage that maps it already).

    ``key`` is the segment's identity: when this process maps it already (a tensor sent back to the process
    that shared it), a sender that has exited since (its descriptor gone with it) is no error."""
    st = _cached(key)
    try:
        fd = df.detach()
    except (OSError, EOFError):
        if st is not None:
            return st
        raise RuntimeError("a shared cpu tensor arrived after the process that sent it had exited, so its memory "
                           "could not be reached: keep the sending process alive until the receiver has taken the "
                           "tensor (e.g. wait on an Event), as with PyTorch's file_descriptor strategy") from None
    if st is not None:
        os.close(fd)
        return st
    st = Storage.from_segment(_shm.Segment.from_fd(fd, size * dtype.itemsize), dtype, size)
    with _cache_lock:
        return _cache.setdefault(key, st)


def rebuild_storage_filename(name, dtype, size):
    """Maps the named segment ``name`` (``file_system`` strategy), or returns the Storage mapping it."""
    st = _cached(("name", name))
    if st is not None:
        return st
    try:
        seg = _shm.Segment.attach_named(name, size * dtype.itemsize)
    except FileNotFoundError:
        raise RuntimeError(f"shared storage {name!r} is gone: under the 'file_system' sharing strategy a segment "
                           "lives while the process that shared it holds it; keep the tensor alive in the sender "
                           "until it has been received") from None
    st = Storage.from_segment(seg, dtype, size)
    with _cache_lock:
        return _cache.setdefault(("name", name), st)


def reduce_tensor(t):
    """ForkingPickler reducer of a Tensor (and its subclasses): its storage as a shared handle plus its view."""
    if t.device.type != "cpu":
        raise _device_error("a tensor", t.device)
    if t.requires_grad and t.grad_fn is not None:
        raise RuntimeError("cannot send a non-leaf tensor that requires grad to another process: autograd does not "
                           "cross process boundaries. To send its values, send t.detach().")
    state = dict(t.__dict__) if t.__dict__ else None
    return (rebuild_tensor, (type(t), t._storage, t._shape, t._stride, t._offset, bool(t.requires_grad), state))


def rebuild_tensor(cls, storage, shape, stride, offset, requires_grad, state):
    """A tensor of class ``cls`` viewing ``storage`` (shared: no copy)."""
    t = cls._make(storage, shape, stride, offset)
    t._requires_grad = requires_grad
    if state:
        t.__dict__.update(state)
    return t


def _tensor_classes():
    """Tensor and every subclass defined so far (ForkingPickler's table is keyed by exact type)."""
    out, todo = [], [Tensor]
    while todo:
        c = todo.pop()
        out.append(c)
        todo.extend(c.__subclasses__())
    return out


def init_reductions():
    """Registers the reducers with ForkingPickler for Storage, Tensor and every Tensor subclass defined so
    far (Parameter, Buffer, ...). Call it again after defining a Tensor subclass that must be shared."""
    ForkingPickler.register(Storage, reduce_storage)
    for cls in _tensor_classes():
        ForkingPickler.register(cls, reduce_tensor)
