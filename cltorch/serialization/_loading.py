"""``load``: reads torch's zip checkpoint format (files torch.save or cltorch.save wrote) into cltorch
objects: the archive's records, storages onto their target devices, tensors rebuilt with every argument
checked, the default allowlist of ``weights_only=True``, and the full unpickler of ``weights_only=False``
with torch's names mapped to cltorch's."""
import codecs
import collections
import io
import json
import os
import pickle
import struct
import warnings
import zlib

import numpy as np

from .. import _dtype as D
from . import _names
from ._format import _LEGACY_MAGIC, _STORAGE_NAME, _TORCH_DTYPES, _UNSUPPORTED_STORAGES, \
    _parameter_class
from ._safe_unpickler import _PARAM_CLS, _TENSOR_CLS, _Callable, _SafeUnpickler, _StorageType, _hashable


class _Pending:
    """A storage record named by a persistent id: its bytes are read once, then made into a typed
    storage on its target device on first use (per dtype)."""

    __slots__ = ("loader", "key", "dtype", "numel", "location", "typed")

    def __init__(self, loader, key, dtype, numel, location):
        self.loader, self.key, self.dtype, self.numel, self.location = loader, key, dtype, numel, location
        self.typed = {}

    def storage(self, dtype=None):
        dtype = dtype or self.dtype
        st = self.typed.get(dtype)
        if st is None:
            st = self.typed[dtype] = self.loader.make_storage(self, dtype)
        return st



class _Loader:
    """One load: reads records from the archive and rebuilds tensors onto their target devices."""

    def __init__(self, zf, stream, prefix, map_location, use_mmap, path, name):
        self.zf, self.stream, self.prefix, self.map_location = zf, stream, prefix, map_location
        self.use_mmap, self.path, self.name = use_mmap, path, name
        self.pending = {}
        self._raw = {}
        from .._tensor import Tensor, Size
        from .._storage import Storage
        from .._device import device, canonical, CPU
        self.Tensor, self.Size, self.Storage, self.device, self.canonical, self.CPU = \
            Tensor, Size, Storage, device, canonical, CPU
        self.Parameter = _parameter_class()
        self.infos = {i.filename: i for i in zf.infolist()}
        self.swap = False
        self.devices = {}
        if prefix + "byteorder" in self.names():
            bo = self.record("byteorder")
            if bo not in (b"little", b"big"):
                raise RuntimeError(f"{name}: unknown byteorder record {bo!r:.40}")
            self.swap = bo.decode() != "little"
        if prefix + ".data/cltorch.json" in self.names():
            try:
                meta = json.loads(self.record(".data/cltorch.json"))
                self.devices = {str(k): str(v) for k, v in dict(meta.get("devices", {})).items()}
            except (ValueError, TypeError, AttributeError) as e:
                raise RuntimeError(f"{name}: malformed .data/cltorch.json record: {e}") from None

    def names(self):
        return self.infos

    def record(self, rel):
        """A whole record's bytes (zipfile checks its CRC); errors become RuntimeError."""
        try:
            return self.zf.read(self.prefix + rel)
        except Exception as e:  # BadZipFile (CRC, truncation), NotImplementedError (compression), OSError
            raise RuntimeError(f"{self.name}: the record '{rel}' cannot be read, the file is truncated or "
                               f"corrupted ({type(e).__name__}: {e})") from None

    # -- records
    def read_record(self, key, nbytes):
        rname = f"{self.prefix}data/{key}"
        info = self.infos.get(rname)
        if info is None:
            raise RuntimeError(f"{self.name}: the checkpoint has no record 'data/{key}' for storage {key} "
                               "(truncated or corrupted file)")
        if info.file_size != nbytes:
            raise RuntimeError(f"{self.name}: storage {key} should hold {nbytes} bytes but its record "
                               f"'data/{key}' holds {info.file_size} bytes (corrupted checkpoint)")
        if info.compress_type != 0:
            return np.frombuffer(bytearray(self.record(f"data/{key}")), np.uint8)
        f = self.stream
        f.seek(info.header_offset)
        head = f.read(30)
        if len(head) != 30 or head[:4] != b"PK\x03\x04":
            raise RuntimeError(f"{self.name}: bad local header for record 'data/{key}' (corrupted checkpoint)")
        n, m = struct.unpack("<HH", head[26:30])
        start = info.header_offset + 30 + n + m
        if self.use_mmap and nbytes:
            if start + nbytes > os.path.getsize(self.path):
                raise RuntimeError(f"{self.name}: record 'data/{key}' is truncated: expected {nbytes} bytes at "
                                   f"offset {start}, the file has {os.path.getsize(self.path)}")
            return np.memmap(self.path, dtype=np.uint8, mode="c", offset=start, shape=(nbytes,))
        buf = np.empty(nbytes, np.uint8)
        f.seek(start)
        got, mv = 0, memoryview(buf)
        while got < nbytes:
            r = f.readinto(mv[got:])
            if not r:
                break
            got += r
        if got != nbytes:
            raise RuntimeError(f"{self.name}: record 'data/{key}' is truncated: expected {nbytes} bytes, "
                               f"read {got}")
        if zlib.crc32(buf) != info.CRC:
            raise RuntimeError(f"{self.name}: CRC-32 mismatch in record 'data/{key}' (corrupted checkpoint)")
        return buf

    # -- persistent ids
    def persistent_load(self, pid):
        if len(pid) != 5:
            raise pickle.UnpicklingError(f"pickle: a storage persistent id has 5 fields, got {len(pid)}")
        _, stype, key, location, numel = pid
        key = key.decode("ascii") if isinstance(key, bytes) else key
        location = location.decode("ascii") if isinstance(location, bytes) else location
        if not isinstance(stype, _StorageType) or type(key) is not str or type(location) is not str or \
                type(numel) is not int or numel < 0:
            raise pickle.UnpicklingError(f"pickle: malformed storage persistent id {pid!r:.200}")
        if stype.dtype is None:
            raise RuntimeError(f"{self.name}: the checkpoint holds a torch.{stype.name} "
                               f"({_UNSUPPORTED_STORAGES.get(stype.name, 'unknown dtype')}), which cltorch does "
                               "not support; convert it in torch first (e.g. tensor.float())")
        p = self.pending.get(key)
        if p is None:
            p = self.pending[key] = _Pending(self, key, stype.dtype, numel, location)
        elif p.dtype != stype.dtype or p.numel != numel:
            raise RuntimeError(f"{self.name}: storage {key} is referenced as {p.numel} x {p.dtype} and as "
                               f"{numel} x {stype.dtype}")
        return p

    def target_device(self, location):
        """The device for a storage saved at ``location`` under a non-callable ``map_location``."""
        ml = self.map_location
        if isinstance(ml, dict):
            if location not in ml:
                return self.default_device(location)
            ml = ml[location]
        if ml is None:
            return self.default_device(location)
        return self.canonical(ml if isinstance(ml, self.device) else self.device(ml))

    def default_device(self, loc):
        if loc == "cpu":
            return self.CPU
        if loc.startswith("cl"):
            try:
                return self.canonical(self.device(loc))
            except RuntimeError:
                warnings.warn(f"cltorch.load: {self.name} holds tensors saved on {loc}, which does not exist "
                              "here; loading them onto cpu", stacklevel=4)
                return self.CPU
        return self.CPU   # cuda, mps, ...: cpu unless map_location says otherwise

    def make_storage(self, p, dtype):
        """A typed Storage of ``p``'s bytes on the device ``map_location`` picks."""
        cdt = D.to_dtype(dtype)
        base = self.pending_raw(p)
        if base.nbytes % cdt.itemsize:
            raise RuntimeError(f"{self.name}: storage {p.key} of {base.nbytes} bytes cannot hold {cdt} elements")
        arr = base.view(cdt.np.newbyteorder(">") if self.swap else cdt.np)
        if self.swap:
            arr = arr.astype(cdt.np)
        if cdt is D.bool:
            if base.view(np.uint8).max(initial=0) > 1:
                arr = base.view(np.uint8) != 0
        location = self.devices.get(p.key, p.location)
        ml = self.map_location
        if ml is not None and callable(ml) and not isinstance(ml, (str, dict, self.device)):
            cpu_flat = self.Tensor._make(self.Storage.from_host(arr, self.CPU), (arr.size,))
            try:
                res = ml(cpu_flat, location)
                if res is not None and not isinstance(res, self.Tensor):
                    raise TypeError(f"cltorch.load: map_location must return a Tensor or None, got "
                                    f"{type(res).__name__}")
            except Exception as e:
                e._cltorch_passthrough = True
                raise
            if res is None:
                dev = self.default_device(location)
            else:
                if res.dtype is not cdt or res.numel() != arr.size:
                    raise RuntimeError(f"cltorch.load: map_location returned a {res.dtype} tensor of "
                                       f"{res.numel()} elements for storage {p.key} ({arr.size} x {cdt})")
                if res.dim() == 1 and res.stride() == (1,) and res.storage_offset() == 0 and \
                        res._storage.size == arr.size:
                    return res._storage
                dev = res.device
                arr = np.ascontiguousarray(res._host_view()).reshape(-1)
        else:
            dev = self.target_device(location)
        if dev.type == "cpu" and not arr.flags.writeable and not isinstance(arr, np.memmap):
            arr = arr.copy()
        return self.Storage.from_host(arr, dev)

    def pending_raw(self, p):
        """The storage record's bytes (read once per key)."""
        b = self._raw.get(p.key)
        if b is None:
            b = self._raw[p.key] = self.read_record(p.key, p.numel * D.to_dtype(p.dtype).itemsize)
        return b

    # -- rebuild functions (called from the pickle with its arguments; every argument is checked)
    def rebuild_tensor(self, storage, offset, size, stride, requires_grad=False, hooks=None, metadata=None,
                       dtype=None):
        if not isinstance(storage, _Pending):
            raise pickle.UnpicklingError(f"pickle: tensor rebuild needs a storage, got {type(storage).__name__}")
        if dtype is not None and not isinstance(dtype, D.dtype):
            raise pickle.UnpicklingError(f"pickle: tensor rebuild needs a dtype, got {type(dtype).__name__}")
        if type(offset) is not int or not isinstance(size, tuple) or not isinstance(stride, tuple) or \
                not all(type(s) is int for s in size) or not all(type(s) is int for s in stride) or \
                len(size) != len(stride) or type(requires_grad) is not bool:
            raise pickle.UnpicklingError(f"pickle: malformed tensor metadata: offset={offset!r:.50}, "
                                         f"size={size!r:.100}, stride={stride!r:.100}")
        st = storage.storage(dtype.name if dtype is not None else None)
        if offset < 0 or any(s < 0 for s in size) or any(s < 0 for s in stride):
            raise RuntimeError(f"{self.name}: invalid tensor: size {list(size)}, stride {list(stride)}, "
                               f"storage offset {offset}")
        numel = 1
        for s in size:
            numel *= s
        need = offset + 1 + sum((n - 1) * s for n, s in zip(size, stride)) if numel else offset
        if need > st.size:
            raise RuntimeError(f"{self.name}: storage {storage.key} of {st.size} elements is too small for a "
                               f"tensor of size {list(size)}, stride {list(stride)}, storage offset {offset} "
                               f"(needs {need} elements)")
        if requires_grad and not st.dtype.is_floating_point:
            raise RuntimeError(f"{self.name}: only tensors of floating point dtype can require gradients, got "
                               f"{st.dtype}")
        return self.Tensor._make(st, size, stride, offset, requires_grad=requires_grad)

    def rebuild_parameter(self, data, requires_grad, hooks=None, state=None):
        if not isinstance(data, self.Tensor) or type(requires_grad) is not bool:
            raise pickle.UnpicklingError("pickle: malformed Parameter")
        if self.Parameter is None:          # cltorch.nn not there: a leaf tensor with the flag
            data.requires_grad = requires_grad
            return data
        p = self.Parameter(data, requires_grad)
        if state:
            self._set_state(p, state)
        return p

    def _set_state(self, obj, state):
        slots = None
        if isinstance(state, tuple) and len(state) == 2:
            state, slots = state
        for d in (state, slots):
            if not d:
                continue
            if type(d) is not dict or not all(type(k) is str for k in d):
                raise pickle.UnpicklingError("pickle: malformed tensor state")
            for k, v in d.items():
                if hasattr(type(obj), k) or k.startswith("__"):
                    continue            # never overwrite Tensor's own attributes
                obj.__dict__[k] = v

    def rebuild_from_type_v2(self, func, new_type, args, state):
        if func not in (self._rb_v2, self._rb_v1, self._rb_v3, self._rb_param, self._rb_param_state) or \
                type(args) is not tuple or new_type not in (_TENSOR_CLS, _PARAM_CLS):
            raise pickle.UnpicklingError(f"pickle: _rebuild_from_type_v2 of {func!r}, {new_type!r} is not allowed")
        t = func(*args)
        if new_type is _PARAM_CLS and self.Parameter is not None and not isinstance(t, self.Parameter):
            t = self.Parameter(t, t.requires_grad)
        if state:
            self._set_state(t, state)
        return t

    def allowed(self):
        """The allowlist: (module, name) -> object, built for this load."""
        def v2(storage, offset, size, stride, requires_grad, hooks, metadata=None):
            return self.rebuild_tensor(storage, offset, size, stride, requires_grad, hooks, metadata)

        def v1(storage, offset, size, stride):
            return self.rebuild_tensor(storage, offset, size, stride)

        def v3(storage, offset, size, stride, requires_grad, hooks, dtype, metadata=None):
            return self.rebuild_tensor(storage, offset, size, stride, requires_grad, hooks, metadata, dtype)

        def size(*a):
            if len(a) > 1 or (a and not all(type(s) is int for s in a[0])):
                raise pickle.UnpicklingError("pickle: malformed torch.Size")
            return self.Size(a[0] if a else ())

        def device(*a):
            if not 1 <= len(a) <= 2 or type(a[0]) is not str:
                raise pickle.UnpicklingError("pickle: malformed torch.device")
            return self.device(*a)

        def encode(s, enc="utf-8"):
            if type(s) is not str or enc not in ("latin1", "latin-1", "utf-8", "utf8", "ascii"):
                raise pickle.UnpicklingError("pickle: _codecs.encode is allowed only for bytes")
            return codecs.encode(s, enc)

        def typed(name, fn, types):
            def f(*a):
                if not all(isinstance(x, types) for x in a):
                    raise pickle.UnpicklingError(f"pickle: malformed {name}")
                return fn(*a)
            return _Callable(name, f, newobj=True)

        self._rb_v2 = _Callable("torch._utils._rebuild_tensor_v2", v2)
        self._rb_v1 = _Callable("torch._utils._rebuild_tensor", v1)
        self._rb_v3 = _Callable("torch._utils._rebuild_tensor_v3", v3)
        self._rb_param = _Callable("torch._utils._rebuild_parameter", self.rebuild_parameter)
        self._rb_param_state = _Callable("torch._utils._rebuild_parameter_with_state", self.rebuild_parameter)
        container = (list, tuple, dict, set, frozenset, collections.OrderedDict)
        table = {
            ("torch._utils", "_rebuild_tensor_v2"): self._rb_v2,
            ("torch._utils", "_rebuild_tensor"): self._rb_v1,
            ("torch._utils", "_rebuild_tensor_v3"): self._rb_v3,
            ("torch._utils", "_rebuild_parameter"): self._rb_param,
            ("torch._utils", "_rebuild_parameter_with_state"): self._rb_param_state,
            ("torch._tensor", "_rebuild_from_type_v2"): _Callable("torch._tensor._rebuild_from_type_v2",
                                                                  self.rebuild_from_type_v2),
            ("torch", "Tensor"): _TENSOR_CLS,
            ("torch._tensor", "Tensor"): _TENSOR_CLS,
            ("torch.nn.parameter", "Parameter"): _PARAM_CLS,
            ("torch", "Size"): _Callable("torch.Size", size),
            ("torch", "device"): _Callable("torch.device", device),
            ("collections", "OrderedDict"): typed("collections.OrderedDict", collections.OrderedDict, container),
            ("collections", "Counter"): typed("collections.Counter", collections.Counter, container),
            ("builtins", "set"): typed("set", lambda *a: set(_hashable(a[0]) if a else ()), container),
            ("builtins", "frozenset"): typed("frozenset", lambda *a: frozenset(_hashable(a[0]) if a else ()),
                                             container),
            ("builtins", "complex"): typed("complex", complex, (int, float)),
            ("builtins", "bytearray"): typed("bytearray", bytearray, (bytes, int, str)),
            ("_codecs", "encode"): _Callable("_codecs.encode", encode),
        }
        for n in list(_STORAGE_NAME.values()) + list(_UNSUPPORTED_STORAGES) + ["UntypedStorage"]:
            table[("torch", n)] = _StorageType(n)
        for n, c in _TORCH_DTYPES.items():
            table[("torch", n)] = getattr(D, c)

        def lookup(module, name):
            obj = table.get((module, name))
            if obj is None and module == "torch" and name in ("bfloat16", "complex64", "complex128", "uint16",
                                                              "uint32", "uint64", "cfloat", "cdouble"):
                raise pickle.UnpicklingError(f"the checkpoint holds the dtype torch.{name}, which cltorch does "
                                             "not support")
            return obj
        self.table = table
        return lookup


def _open_archive(f, name):
    """(ZipFile, stream, prefix, path) for a path or a file object; clear errors for non-checkpoints."""
    path = None
    if isinstance(f, (str, bytes, os.PathLike)):
        path = os.fsdecode(f)
        stream = open(path, "rb")
    else:
        if not hasattr(f, "read"):
            raise TypeError(f"cltorch.load: f must be a path or a readable binary file object, got "
                            f"{type(f).__name__}")
        stream = f
        if not (hasattr(f, "seekable") and f.seekable()):
            stream = io.BytesIO(f.read())
    try:
        start = stream.tell()
        head = stream.read(len(_LEGACY_MAGIC))
        stream.seek(start)
        if isinstance(head, str):
            raise TypeError("cltorch.load: the file object must be opened in binary mode ('rb')")
        if not head:
            raise RuntimeError(f"{name} is empty (0 bytes): not a checkpoint")
        if head.startswith(_LEGACY_MAGIC):
            raise RuntimeError(f"{name} was written in torch.save's legacy (pre-1.6) format, which cltorch does "
                               "not read; re-save it with torch >= 1.6 (torch.save(torch.load(f), f2))")
        if not head.startswith(b"PK\x03\x04"):
            raise RuntimeError(f"{name} is not a PyTorch checkpoint: invalid magic number {head[:4]!r} "
                               "(expected the zip magic b'PK\\x03\\x04' that torch.save writes)")
        import zipfile
        try:
            zf = zipfile.ZipFile(stream)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, struct.error) as e:
            raise RuntimeError(f"{name} is truncated or corrupted: the zip archive cannot be read ({e})") from None
        pkl = [n for n in zf.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
        if not pkl:
            if any(n.endswith("/constants.pkl") for n in zf.namelist()):
                raise RuntimeError(f"{name} is a TorchScript archive (torch.jit.save), not a torch.save "
                                   "checkpoint")
            raise RuntimeError(f"{name} is a zip archive without a data.pkl record: not a torch.save checkpoint")
        return zf, stream, pkl[0][:-len("data.pkl")], path
    except BaseException:
        if path is not None:
            stream.close()
        raise


def _resolve_weights_only(weights_only, pickle_module):
    """torch's rule: None means True unless a pickle_module is given; TORCH_FORCE_WEIGHTS_ONLY_LOAD and
    TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD (1/y/yes/true) override it, the first winning."""
    yes = ("1", "y", "yes", "true")
    if os.getenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "0").lower() in yes:
        return True
    if os.getenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "0").lower() in yes:
        if weights_only:
            warnings.warn("cltorch.load: TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD is set, so weights_only=True is "
                          "ignored", stacklevel=3)
        return False
    return pickle_module is None if weights_only is None else bool(weights_only)


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **pickle_load_args):
    """Loads an object saved by :func:`save` or by ``torch.save`` (zip format, torch >= 1.6).

    torch need not be installed. Tensors come back as cltorch tensors (``torch.nn.Parameter`` as
    ``cltorch.nn.Parameter``), torch dtypes as cltorch dtypes, ``torch.Size`` as ``cltorch.Size``.

    Args:
        f: a path or a readable binary file object.
        map_location: where each storage goes.

            - ``None``: the device it was saved on: cpu stays cpu; a cltorch ``cl:N`` tensor goes back to
              ``cl:N`` (to cpu, with a warning, if this machine has no ``cl:N``); tensors torch saved on
              ``cuda``, ``mps`` or another non-OpenCL device load onto **cpu**.
            - a device string or ``cltorch.device`` (``"cpu"``, ``"cl"``, ``"cl:1"``): every storage goes there.
            - a dict from saved location to device (``{"cuda:0": "cl:0"}``); locations not in it as for None.
            - a callable ``fn(storage, location)``: ``storage`` is a 1-D cpu tensor of the storage's
              elements, ``location`` the saved location string; it returns a 1-D tensor of the same dtype
              and size on the wanted device (e.g. ``lambda s, loc: s.to("cl")``), or None for the default.
        weights_only: True (the default, as in torch: None means True unless ``pickle_module`` is given)
            restricts unpickling to an allowlist (tensors, Parameters, dtypes, devices, ``torch.Size``,
            containers, ``collections.OrderedDict``/``Counter``, ``set``, ``complex``, bytes) plus what
            :func:`add_safe_globals` / :class:`safe_globals` allow, and raises ``pickle.UnpicklingError``
            naming any other global (a whole Module's class, a numpy array's
            ``numpy.core.multiarray._reconstruct``, ``os.system``). False uses Python's full unpickler,
            with torch's names mapped to cltorch's (``torch.nn.modules.linear.Linear`` is
            ``cltorch.nn.Linear``): it can run arbitrary code, so only for trusted files.
        mmap: map the storages of a file given by path (copy-on-write) instead of reading them; only for
            storages that end up on cpu. The CRC-32 of mapped records is not checked.
        pickle_module, pickle_load_args: as torch's, only with ``weights_only=False``.

    Views: tensors that shared a storage when saved share one storage again.

    Raises:
        RuntimeError: the file is empty, truncated or corrupted, has the wrong magic number (not a zip; the
            legacy pre-1.6 format is named as such), lacks a record, a record's size or CRC is wrong, or a
            tensor's size/stride/offset does not fit its storage; also for dtypes cltorch lacks (bfloat16,
            complex). Nothing is returned in these cases (no partial load).
        pickle.UnpicklingError: a disallowed global or opcode, or malformed pickle data.
    """
    weights_only = _resolve_weights_only(weights_only, pickle_module)
    if weights_only and (pickle_module is not None or pickle_load_args):
        raise RuntimeError("cltorch.load: pickle_module and pickle load arguments can only be used with "
                           "weights_only=False")
    name = f"cltorch.load: '{os.fsdecode(f)}'" if isinstance(f, (str, bytes, os.PathLike)) else \
        "cltorch.load: the checkpoint"
    zf, stream, prefix, path = _open_archive(f, name)
    loader = None
    try:
        if mmap and path is None:
            raise ValueError("cltorch.load: mmap=True needs f to be a path")
        loader = _Loader(zf, stream, prefix, map_location, bool(mmap), path, name)
        data = loader.record("data.pkl")
        lookup = loader.allowed()
        if weights_only:
            result = _SafeUnpickler(data, loader.persistent_load, lookup, _user_torch_global).load()
        else:
            result = _full_unpickle(data, loader, lookup, pickle_module or pickle, pickle_load_args)
        if isinstance(result, _Pending):
            result = result.storage()
        return result
    finally:
        if loader is not None:
            # the loader and its _Pending records refer to each other: break the cycle, so the storages that the
            # caller drops (a state dict copied into a model) free their device memory now, not at the next gc
            loader.pending.clear()
            loader._raw.clear()
        if path is not None:
            stream.close()


def _full_unpickle(data, loader, lookup, pickle_module, kwargs):
    """``weights_only=False``: Python's unpickler; torch's names map to ours, other globals import freely."""
    class U(pickle_module.Unpickler):
        def find_class(self, module, name):
            obj = lookup(module, name)
            if obj is not None:
                return obj
            if module == "torch" or module.startswith("torch."):
                obj = _names.cltorch_global(module, name)
                if obj is None:
                    raise pickle.UnpicklingError(f"cltorch.load: the checkpoint needs {module}.{name}, which has "
                                                 "no cltorch counterpart")
                return obj
            return super().find_class(module, name)

        def persistent_load(self, pid):
            if type(pid) is not tuple or not pid or pid[0] not in ("storage", b"storage"):
                raise pickle.UnpicklingError(f"unsupported persistent id {pid!r:.100}")
            return loader.persistent_load(pid)

    kwargs = dict(kwargs)
    kwargs.setdefault("encoding", "utf-8")
    return U(io.BytesIO(data), **kwargs).load()




def _user_torch_global(module, name):
    """A torch name (``torch.nn.modules.linear.Linear``) of a cltorch object the user allowed."""
    from . import _allowlist
    obj = _names.cltorch_global(module, name)
    return obj if obj is not None and _allowlist.is_user_allowed(obj) else None


def get_unsafe_globals_in_checkpoint(f):
    """The globals in a checkpoint that ``load(f, weights_only=True)`` would refuse, as
    ``"module.name"`` strings: those neither allowed by default nor by :func:`add_safe_globals`.

    The pickle is read, not run (the globals an object pushes while it is being unpickled are not seen).

    Args:
        f: a path or a readable binary file object of a torch.save / cltorch.save checkpoint.

    Raises:
        RuntimeError: as :func:`load` for a file that is not a checkpoint.
    """
    import _compat_pickle
    import pickletools
    from . import _allowlist
    name = f"cltorch.serialization: '{os.fsdecode(f)}'" if isinstance(f, (str, bytes, os.PathLike)) else \
        "cltorch.serialization: the checkpoint"
    zf, stream, prefix, path = _open_archive(f, name)
    try:
        loader = _Loader(zf, stream, prefix, None, False, path, name)
        data = loader.record("data.pkl")
        loader.allowed()
        allowed = {f"{m}.{n}" for m, n in loader.table}
        user = _allowlist.user_allowed()
    finally:
        if path is not None:
            stream.close()
    found, strings = [], []
    try:
        for op, arg, _ in pickletools.genops(data):
            if op.name == "GLOBAL":
                module, gname = arg.split(" ", 1)
            elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
                module, gname = strings[-2], strings[-1]
            else:
                if isinstance(arg, str):
                    strings.append(arg)
                continue
            if (module, gname) in _compat_pickle.NAME_MAPPING:
                module, gname = _compat_pickle.NAME_MAPPING[(module, gname)]
            elif module in _compat_pickle.IMPORT_MAPPING:
                module = _compat_pickle.IMPORT_MAPPING[module]
            full = f"{module}.{gname}"
            if full not in allowed and full not in user and _user_torch_global(module, gname) is None and \
                    full not in found:
                found.append(full)
    except ValueError as e:
        raise pickle.UnpicklingError(f"{name}: malformed pickle data ({e})") from None
    return found
