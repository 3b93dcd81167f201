"""Picklers that move tensor and array payloads through shared memory instead of through a pipe.

Two directions, each with its own owner of the segments (see ``_shm``):

- :func:`dumps_dataset` (main -> workers, once per worker start): large numpy arrays and cpu-tensor
  storages in the dataset, collate_fn and worker_init_fn are copied once into segments that the main
  process owns; every worker maps them copy-on-write. Views that share a base array keep sharing it.
- :func:`dumps_batch` (worker -> main, once per batch): every cpu tensor (and large numpy array) of the
  batch travels as a segment name plus shape, strides and dtype. Tensors that ``default_collate`` built
  directly in a segment (:func:`batch_array`) are not copied again. The main process maps the segment,
  unlinks it at once, and wraps the mapping with ``cltorch.from_numpy``: the batch's storage is the
  mapping itself, never unpickled element by element.

Everything else is pickled as usual (protocol 5).
"""
import io
import pickle

import numpy as np

from . import _shm

__all__ = ["dumps_dataset", "dumps_batch", "loads", "batch_array", "discard_batch_segments", "host_view"]

# Arrays smaller than this travel inline in the pickle; the segment's create/map/unlink costs ~30 us.
_INLINE_BYTES = 1 << 16


def _tensor_type():
    import cltorch
    return cltorch.Tensor


def host_view(t):
    """A numpy view (no copy) of cpu tensor ``t``'s elements, with its strides (waits for its queue).

    Built with ``np.ndarray(buffer=...)`` over the storage's host array: ~1 us, where
    ``as_strided`` costs ~10 us, which matters once per sample in collation."""
    st = t._storage
    host = st.host
    if host is None or not host.flags.c_contiguous:
        return t._host_view()
    rt = st._rt
    if rt is not None and rt.pending:
        st.host_sync()
    isz = host.itemsize
    return np.ndarray(t._shape, host.dtype, buffer=host, offset=t._offset * isz,
                      strides=[s * isz for s in t._stride])


def _addr(a):
    return a.__array_interface__["data"][0]


def _extent(a):
    """(first byte address, one past the last byte) of a non-empty array with non-negative strides."""
    lo = _addr(a)
    hi = lo + a.itemsize + sum((n - 1) * s for n, s in zip(a.shape, a.strides))
    return lo, hi


class _Seg:
    """A segment reference; pickles as a call that maps it, so one pickle maps each segment once."""

    __slots__ = ("name", "nbytes", "private")

    def __init__(self, name, nbytes, private):
        self.name, self.nbytes, self.private = name, nbytes, private

    def __reduce__(self):
        return (_map_private if self.private else _map_and_unlink, (self.name, self.nbytes))


# Worker side: segments each worker maps copy-on-write for the dataset (kept for the worker's life).
_private_maps = {}


def _map_private(name, nbytes):
    mm = _private_maps.get(name)
    if mm is None:
        mm = _private_maps[name] = _shm.attach(name, nbytes, private=True)
    return mm


def _map_and_unlink(name, nbytes):
    try:
        mm = _shm.attach(name, nbytes)
    finally:
        _shm.unlink(name)
    return mm


def _rebuild(mm, offset, shape, strides, dtype, kind, requires_grad):
    arr = np.ndarray(shape, dtype=dtype, buffer=mm, offset=offset, strides=strides)
    if kind == "ndarray":
        return arr
    import cltorch
    t = cltorch.from_numpy(arr)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _shareable(arr):
    return not arr.dtype.hasobject and arr.size > 0 and all(s >= 0 for s in arr.strides)


class _DatasetPickler(pickle.Pickler):
    def __init__(self, file, prefix, owned):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._prefix = prefix
        self._owned = owned          # names created here; the caller unlinks them
        self._roots = {}             # id(root array) -> (root, _Seg)
        self._tensor = _tensor_type()

    def reducer_override(self, obj):
        if isinstance(obj, self._tensor):
            if obj.device.type != "cpu":
                return NotImplemented
            arr, kind, rg = host_view(obj), "tensor", obj.requires_grad
        elif type(obj) is np.ndarray:
            arr, kind, rg = obj, "ndarray", False
        else:
            return NotImplemented
        if arr.nbytes < _INLINE_BYTES or not _shareable(arr):
            return NotImplemented
        root = arr
        while isinstance(root.base, np.ndarray):
            root = root.base
        if isinstance(root, np.memmap) or not (root.flags.c_contiguous or root.flags.f_contiguous) \
                or root.nbytes > 4 * arr.nbytes:
            root = arr if (arr.flags.c_contiguous or arr.flags.f_contiguous) else np.ascontiguousarray(arr)
            if root is not arr:
                arr = root
        entry = self._roots.get(id(root))
        if entry is None:
            name = f"{self._prefix}d{len(self._owned)}"
            mm = _shm.create(name, root.nbytes)
            self._owned.append(name)
            dst = np.ndarray(root.nbytes, dtype=np.uint8, buffer=mm)
            src = root.reshape(-1, order="A").view(np.uint8) if root.size else root
            np.copyto(dst, src)
            del dst
            mm.close()
            entry = self._roots[id(root)] = (root, _Seg(name, root.nbytes, True))
        lo = _addr(root)
        return (_rebuild, (entry[1], _addr(arr) - lo, arr.shape, arr.strides, arr.dtype, kind, rg))


def dumps_dataset(obj, prefix):
    """Pickles ``obj`` for workers. Returns (bytes, names of the segments created, which the caller unlinks)."""
    owned = []
    f = io.BytesIO()
    try:
        _DatasetPickler(f, prefix, owned).dump(obj)
    except BaseException:
        for name in owned:
            _shm.unlink(name)
        raise
    return f.getvalue(), owned


# ---------------------------------------------------------------------------------------------- worker side
class _BatchState:
    prefix = None        # set by the worker loop
    counter = 0
    live = {}            # data address -> (_Seg, nbytes) of segments made for the current batch


def set_batch_prefix(prefix):
    _BatchState.prefix = prefix
    _BatchState.counter = 0
    _BatchState.live = {}


def batch_array(shape, dtype):
    """A numpy array for a collated batch: in a new shared segment inside a worker, else ordinary memory."""
    dtype = np.dtype(dtype)
    if _BatchState.prefix is None:
        return np.empty(shape, dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    name = f"{_BatchState.prefix}{_BatchState.counter}"
    _BatchState.counter += 1
    mm = _shm.create(name, nbytes)
    arr = np.ndarray(shape, dtype=dtype, buffer=mm)
    _BatchState.live[_addr(arr)] = (_Seg(name, max(nbytes, 1), False), max(nbytes, 1))
    return arr


def discard_batch_segments():
    """Unlinks segments of the current batch that were not sent (the batch failed)."""
    for seg, _ in _BatchState.live.values():
        _shm.unlink(seg.name)
    _BatchState.live = {}


class _BatchPickler(pickle.Pickler):
    def __init__(self, file):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._tensor = _tensor_type()

    def reducer_override(self, obj):
        if isinstance(obj, self._tensor):
            if obj.device.type != "cpu":
                return NotImplemented
            arr, kind, rg = host_view(obj), "tensor", obj.requires_grad
        elif type(obj) is np.ndarray and obj.nbytes >= _INLINE_BYTES:
            arr, kind, rg = obj, "ndarray", False
        else:
            return NotImplemented
        if arr.dtype.hasobject:
            return NotImplemented
        live = _BatchState.live
        if arr.size and all(s >= 0 for s in arr.strides):
            lo, hi = _extent(arr)
            hit = live.get(lo)
            if hit is not None and hi - lo <= hit[1]:
                return (_rebuild, (hit[0], 0, arr.shape, arr.strides, arr.dtype, kind, rg))
            for base, (seg, nbytes) in live.items():
                if base <= lo and hi <= base + nbytes:
                    return (_rebuild, (seg, lo - base, arr.shape, arr.strides, arr.dtype, kind, rg))
        dst = batch_array(arr.shape, arr.dtype)
        np.copyto(dst, arr)
        seg = live[_addr(dst)][0]
        return (_rebuild, (seg, 0, dst.shape, dst.strides, dst.dtype, kind, rg))


def dumps_batch(obj):
    """Pickles a worker's batch; segments of the batch now belong to whoever receives the bytes."""
    f = io.BytesIO()
    try:
        _BatchPickler(f).dump(obj)
    except BaseException:
        discard_batch_segments()
        raise
    _BatchState.live = {}
    return f.getvalue()


def loads(data):
    return pickle.loads(data)
