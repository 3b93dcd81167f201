"""Picklers that move tensor and array payloads through shared memory instead of through a pipe.

Two directions, each with its own owner of the segments (see ``_shm``):

- :func:`dumps_dataset` (main -> workers, once per worker start): large numpy arrays and cpu-tensor
  storages in the dataset, collate_fn and worker_init_fn are copied once into segments that the main
  process owns; every worker maps them copy-on-write. Views that share a base array keep sharing it.
  It is cloudpickle's pickler: classes and functions defined in ``__main__`` (a script's body, a notebook,
  ``python -c``), lambdas and closures travel by value, with the globals they use, so a worker never imports
  or runs the user's script (see ``_start``); whatever lives in an importable module travels by reference.
- :func:`dumps_batch` (worker -> main, once per batch): every cpu tensor (and large numpy array) of the
  batch travels as a segment name plus shape, strides and dtype. Tensors that ``default_collate`` built
  directly in a segment (:func:`batch_array`) are not copied again. The main process maps the segment
  and wraps the mapping with ``cltorch.from_numpy``: the batch's storage is the mapping itself, never
  unpickled element by element. When the last view of a mapping dies, its name is handed back to the
  worker (:func:`take_returns`, :func:`release`), which reuses the segment for a later batch. Classes and
  functions of ``__main__`` (a batch type defined in the script) travel as their name, found in the main
  process's ``__main__``, since the worker's copies were rebuilt from their value.

Everything else is pickled as usual (protocol 5).
"""
import io
import pickle
import sys
import types
import weakref

import cloudpickle
import numpy as np

from . import _shm

__all__ = ["dumps_dataset", "dumps_batch", "loads", "batch_array", "discard_batch_segments", "host_view",
           "find_unpicklable"]

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
    """A segment reference; pickles as a call that maps it, so one pickle maps each segment once.

    ``owner`` is None for a dataset segment (mapped copy-on-write by a worker), else ``(prefix, worker_id)``
    of the worker that will reuse the segment once the main process has dropped every view of it."""

    __slots__ = ("name", "nbytes", "owner")

    def __init__(self, name, nbytes, owner):
        self.name, self.nbytes, self.owner = name, nbytes, owner

    def __reduce__(self):
        if self.owner is None:
            return (_map_private, (self.name, self.nbytes))
        return (_map_batch, (self.name, self.nbytes) + self.owner)


# Worker side: segments each worker maps copy-on-write for the dataset (kept for the worker's life).
_private_maps = {}


def _map_private(name, nbytes):
    mm = _private_maps.get(name)
    if mm is None:
        mm = _private_maps[name] = _shm.attach(name, nbytes, private=True)
    return mm


# Main side: per iterator prefix, per worker, the names of batch segments whose last view has died.
_returned = {}


def register_returns(prefix, num_workers):
    """Starts collecting the segments that the main process hands back to the workers of ``prefix``."""
    _returned[prefix] = [[] for _ in range(num_workers)]


def unregister_returns(prefix):
    _returned.pop(prefix, None)


def take_returns(prefix, worker_id):
    """The names of ``worker_id``'s segments that are free again (to send with its next task)."""
    lists = _returned.get(prefix)
    if not lists:
        return ()
    lst, out = lists[worker_id], []
    while lst:
        out.append(lst.pop())
    return out


def _on_unmapped(prefix, worker_id, name):
    lists = _returned.get(prefix)
    if lists is not None:
        lists[worker_id].append(name)


def _map_batch(name, nbytes, prefix, worker_id):
    mm = _shm.attach(name, nbytes)
    # When the last tensor viewing the mapping dies, the worker may write its next batch there.
    weakref.finalize(mm, _on_unmapped, prefix, worker_id, name)
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


class _DatasetPickler(cloudpickle.Pickler):
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
            return super().reducer_override(obj)    # classes and functions: by value where they must be
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
            entry = self._roots[id(root)] = (root, _Seg(name, root.nbytes, None))
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
    prefix = None        # set by the worker loop; None in the main process
    owner = None         # (iterator prefix, worker id)
    counter = 0
    live = {}            # data address -> (_Seg, capacity, mmap) of the segments of the current batch
    sent = {}            # name -> (capacity, mmap): segments the main process may still be reading
    free = []            # [(name, capacity, mmap)]: handed back by the main process, ready for reuse


_POOL_MAX = 16           # free segments a worker keeps mapped for reuse


def set_batch_prefix(prefix, owner=None):
    _BatchState.prefix = prefix
    _BatchState.owner = owner
    _BatchState.counter = 0
    _BatchState.live, _BatchState.sent, _BatchState.free = {}, {}, []


def batch_array(shape, dtype):
    """A numpy array for a collated batch: inside a worker, in a shared segment (a recycled one when the
    main process has handed one of a fitting size back), else ordinary memory.

    Reuse matters: a fresh segment's pages are zero-filled by the kernel on first touch, which costs as
    much as the copy itself (~0.6 ms for a 400 KB batch here)."""
    dtype = np.dtype(dtype)
    if _BatchState.prefix is None:
        return np.empty(shape, dtype)
    nbytes = max(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize, 1)
    free = _BatchState.free
    best = None
    for k, (_, cap, _) in enumerate(free):
        if nbytes <= cap <= 2 * nbytes + 4096 and (best is None or cap < free[best][1]):
            best = k
    if best is not None:
        name, cap, mm = free.pop(best)
    else:
        name = f"{_BatchState.prefix}{_BatchState.counter}"
        _BatchState.counter += 1
        cap, mm = nbytes, _shm.create(name, nbytes)
    arr = np.ndarray(shape, dtype=dtype, buffer=mm)
    _BatchState.live[_addr(arr)] = (_Seg(name, cap, _BatchState.owner), cap, mm)
    return arr


def release(names):
    """The main process has dropped these segments: keep them for reuse (up to _POOL_MAX), unlink the rest."""
    for name in names:
        entry = _BatchState.sent.pop(name, None)
        if entry is not None:
            _BatchState.free.append((name, entry[0], entry[1]))
    while len(_BatchState.free) > _POOL_MAX:
        name, _, _ = _BatchState.free.pop(0)
        _shm.unlink(name)


def discard_batch_segments():
    """The current batch failed: its segments go back to the free pool."""
    for seg, cap, mm in _BatchState.live.values():
        _BatchState.free.append((seg.name, cap, mm))
    _BatchState.live = {}
    release(())


def unlink_all():
    """Worker exit: removes the names of every segment this worker made (mappings stay valid)."""
    for seg, _, _ in _BatchState.live.values():
        _shm.unlink(seg.name)
    for name in list(_BatchState.sent) + [f[0] for f in _BatchState.free]:
        _shm.unlink(name)
    _BatchState.live, _BatchState.sent, _BatchState.free = {}, {}, []


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
        elif isinstance(obj, (type, types.FunctionType)) and getattr(obj, "__module__", None) == "__main__" \
                and "<locals>" not in obj.__qualname__:
            return (_from_main, (obj.__qualname__,))
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
            for base, (seg, nbytes, _) in live.items():
                if base <= lo and hi <= base + nbytes:
                    return (_rebuild, (seg, lo - base, arr.shape, arr.strides, arr.dtype, kind, rg))
        dst = batch_array(arr.shape, arr.dtype)
        np.copyto(dst, arr)
        seg = live[_addr(dst)][0]
        return (_rebuild, (seg, 0, dst.shape, dst.strides, dst.dtype, kind, rg))


def _from_main(qualname):
    """The object named ``qualname`` in this process's ``__main__`` (a batch's class defined in the script)."""
    obj = sys.modules["__main__"]
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def dumps_batch(obj):
    """Pickles a worker's batch. Its segments stay the worker's, lent to the main process until handed
    back with :func:`release`."""
    f = io.BytesIO()
    try:
        _BatchPickler(f).dump(obj)
    except BaseException:
        discard_batch_segments()
        raise
    for seg, cap, mm in _BatchState.live.values():
        _BatchState.sent[seg.name] = (cap, mm)
    _BatchState.live = {}
    return f.getvalue()


def loads(data):
    return pickle.loads(data)


# ---------------------------------------------------------------------------------------------- diagnosis
class _ProbePickler(cloudpickle.Pickler):
    """cloudpickle into nothing, with arrays and cpu tensors (always picklable) left out: for probing."""

    def reducer_override(self, obj):
        if type(obj) is np.ndarray or isinstance(obj, _tensor_type()):
            return (int, ())
        return super().reducer_override(obj)


class _Sink:
    def write(self, b):
        return len(b)


def _fails(obj):
    try:
        _ProbePickler(_Sink(), protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    except Exception as e:   # noqa: BLE001 - any failure is what is looked for
        return e
    return None


def _parts(obj, path):
    """(path, value) of what pickling ``obj`` pickles inside it, in the order it would."""
    if isinstance(obj, dict):
        return [(f"{path}[{k!r}]", v) for k, v in obj.items()]
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [(f"{path}[{i}]", v) for i, v in enumerate(obj)]
    if isinstance(obj, types.FunctionType):
        code = obj.__code__
        out = [(f"{path} (closure variable {n!r})", c.cell_contents)
               for n, c in zip(code.co_freevars, obj.__closure__ or ()) if c is not None and _has_contents(c)]
        g = obj.__globals__
        out += [(f"{path} (global {n!r})", g[n]) for n in code.co_names if n in g]
        out += [(f"{path} (default {i})", d) for i, d in enumerate(obj.__defaults__ or ())]
        return out
    if isinstance(obj, (types.MethodType, types.BuiltinMethodType)) and getattr(obj, "__self__", None) is not None \
            and not isinstance(obj.__self__, types.ModuleType):
        return [(f"{path}.__self__", obj.__self__)]
    if isinstance(obj, type):
        return [(f"{path}.{k}", v) for k, v in vars(obj).items() if not k.startswith("__")]
    getstate = getattr(type(obj), "__getstate__", None)
    if getstate is not None and getstate is not getattr(object, "__getstate__", None):
        try:
            state = obj.__getstate__()
        except Exception:  # noqa: BLE001
            return []
        return [(f"{path}.__getstate__()", state)]
    out = [(f"type({path})", type(obj))]      # a class defined in __main__ travels by value, with its methods
    d = getattr(obj, "__dict__", None)
    if isinstance(d, dict):
        out += [(f"{path}.{k}", v) for k, v in d.items()]
    for k in getattr(type(obj), "__slots__", ()):
        if isinstance(k, str) and hasattr(obj, k):
            out.append((f"{path}.{k}", getattr(obj, k)))
    return out


def _has_contents(cell):
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def find_unpicklable(named):
    """The innermost part of the objects in ``named`` (a list of (name, object)) that cannot be pickled.

    Returns ``(path, object, exception)`` -- e.g. ``("dataset.conn", <socket>, TypeError(...))`` -- or None when
    everything pickles. The path follows attributes, items, ``__getstate__()`` results, and functions'
    closure variables, globals and defaults, down to the first object none of whose parts fails."""
    seen = set()
    for name, obj in named:
        err = _fails(obj)
        if err is None:
            continue
        path = name
        for _ in range(64):
            seen.add(id(obj))
            for sub_path, sub in _parts(obj, path):
                if id(sub) in seen:
                    continue
                sub_err = _fails(sub)
                if sub_err is not None:
                    path, obj, err = sub_path, sub, sub_err
                    break
            else:
                break
        return path, obj, err
    return None
