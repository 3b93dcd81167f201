"""``cltorch.save`` and ``cltorch.load``: PyTorch's zip checkpoint format, without torch.

Format (what ``torch.save`` writes since torch 1.6, read from the torch sources and checked against files
that torch 2.13 writes; the code here is our own):

- a zip archive of *stored* (uncompressed) records, all under one folder (``archive/`` when we write;
  torch names it after the file's stem, and we accept any name);
- ``data.pkl``: a pickle (protocol 2) of the object. A tensor is the call
  ``torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
  OrderedDict())``; a ``Parameter`` wraps that in ``torch._utils._rebuild_parameter(tensor,
  requires_grad, OrderedDict())``. A storage is a *persistent id*
  ``("storage", torch.<Type>Storage, key, location, numel)`` (``location`` is ``"cpu"`` or ``"cuda:0"``);
- ``data/<key>``: the storage's raw bytes, little-endian, each record's data aligned to 64 bytes;
- ``byteorder`` (``little``), ``version`` (``3``), ``.data/serialization_id``.

cltorch also writes ``.data/cltorch.json``, which records the cltorch device (``cl:N``) of each storage.
torch ignores it; in the pickle every storage's location is ``"cpu"``, so that ``torch.load(f,
weights_only=True)`` reads our files with no ``map_location``.

Loading is restricted to an allowlist, like torch's ``weights_only`` unpickler: only the pickle opcodes
and the globals that tensors, state dicts and optimizer state dicts need (tensor and parameter rebuild
functions, storage types, dtypes, ``torch.device``, ``torch.Size``, ``collections.OrderedDict``, ``set``,
``complex``, bytes). Anything else, such as an ``os.system`` global, raises ``pickle.UnpicklingError``
before anything is called. ``weights_only=False`` uses Python's full unpickler and can run arbitrary code:
use it only for files you trust.
"""
import codecs
import collections
import io
import json
import os
import pickle
import random
import struct
import sys
import tempfile
import warnings
import zlib

import numpy as np

from . import _dtype as D

__all__ = ["save", "load"]

# --------------------------------------------------------------------------------------------- dtypes
_STORAGE_NAME = {  # cltorch dtype name -> torch legacy storage class name
    "float32": "FloatStorage", "float64": "DoubleStorage", "float16": "HalfStorage", "int64": "LongStorage",
    "int32": "IntStorage", "int16": "ShortStorage", "int8": "CharStorage", "uint8": "ByteStorage",
    "bool": "BoolStorage",
}
_STORAGE_DTYPE = {v: k for k, v in _STORAGE_NAME.items()}
# torch storage types that exist but have no cltorch dtype: loading them gives a clear error
_UNSUPPORTED_STORAGES = {
    "BFloat16Storage": "bfloat16", "ComplexFloatStorage": "complex64", "ComplexDoubleStorage": "complex128",
    "QInt8Storage": "qint8", "QUInt8Storage": "quint8", "QInt32Storage": "qint32", "QUInt4x2Storage": "quint4x2",
    "QUInt2x4Storage": "quint2x4",
}
# torch dtype globals (``torch.float32`` etc.) -> cltorch dtype name
_TORCH_DTYPES = {
    "float32": "float32", "float": "float32", "float64": "float64", "double": "float64", "float16": "float16",
    "half": "float16", "int64": "int64", "long": "int64", "int32": "int32", "int": "int32", "int16": "int16",
    "short": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool",
}
_ALIGN = 64          # data alignment of records (torch's default ``.storage_alignment``)
_FORCE_ZIP64 = False  # tests set this to exercise the zip64 structures on small files
_LEGACY_MAGIC = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19"  # pickled torch MAGIC_NUMBER


# ========================================================================================== zip writer
class _ZipWriter:
    """Writes a zip archive of stored records to a binary stream, sequentially (no seeks).

    Each record's data starts at a multiple of 64 bytes (padding goes into an extra field of the local
    header, as torch's writer does). Zip64 structures are used where sizes or offsets need them.
    """

    _DOS_DATE = (0 << 9) | (1 << 5) | 1  # 1980-01-01, so that equal objects give equal files

    def __init__(self, stream):
        self.f = stream
        self.pos = 0
        self.entries = []

    def _write(self, b):
        self.f.write(b)
        self.pos += len(b)

    def write_record(self, name, data):
        """``data``: bytes or a C-contiguous numpy array (written without a copy)."""
        if isinstance(data, np.ndarray):
            mv = memoryview(np.ascontiguousarray(data).reshape(-1).view(np.uint8))
        else:
            mv = memoryview(data).cast("B")
        size = mv.nbytes
        crc = zlib.crc32(mv)
        fname = name.encode("utf-8")
        offset = self.pos
        zip64 = _FORCE_ZIP64 or size >= 0xFFFFFFFF or offset >= 0xFFFFFFFF
        extra = struct.pack("<HHQQ", 1, 16, size, size) if zip64 else b""
        pad = (-(offset + 30 + len(fname) + len(extra))) % _ALIGN
        if pad:
            if pad < 4:
                pad += _ALIGN
            extra += b"FB" + struct.pack("<H", pad - 4) + b"Z" * (pad - 4)
        small = 0xFFFFFFFF if zip64 else size
        self._write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 45 if zip64 else 20, 0, 0, 0, self._DOS_DATE, crc,
                                small, small, len(fname), len(extra)) + fname + extra)
        self.f.write(mv)
        self.pos += size
        self.entries.append((fname, crc, size, offset))

    def finish(self):
        cd_start = self.pos
        for fname, crc, size, offset in self.entries:
            big = []
            if _FORCE_ZIP64 or size >= 0xFFFFFFFF:
                big += [size, size]
            if _FORCE_ZIP64 or offset >= 0xFFFFFFFF:
                big.append(offset)
            extra = struct.pack("<HH", 1, 8 * len(big)) + struct.pack(f"<{len(big)}Q", *big) if big else b""
            s32 = 0xFFFFFFFF if big and len(big) != 1 else size
            o32 = 0xFFFFFFFF if len(big) in (1, 3) else offset
            ver = 45 if big else 20
            self._write(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, ver, ver, 0, 0, 0, self._DOS_DATE, crc, s32,
                                    s32, len(fname), len(extra), 0, 0, 0, 0, o32) + fname + extra)
        cd_size = self.pos - cd_start
        n = len(self.entries)
        if _FORCE_ZIP64 or n >= 0xFFFF or cd_size >= 0xFFFFFFFF or cd_start >= 0xFFFFFFFF:
            eocd64 = self.pos
            self._write(struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, cd_size, cd_start))
            self._write(struct.pack("<IIQI", 0x07064B50, 0, eocd64, 1))
            self._write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0))
        else:
            self._write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, n, n, cd_size, cd_start, 0))


# ====================================================================================== pickle writer
class _Encoder:
    """A pickle (protocol 2) writer for the objects a checkpoint holds, emitting only the opcodes and
    globals that torch's ``weights_only`` unpickler accepts.

    Lists, dicts and tensors are memoized, so an object referenced twice (a tensor in two places, a
    shared list) comes back as one object. Storages become persistent ids; their bytes go to
    ``data/<key>`` records.
    """

    def __init__(self):
        self.out = bytearray()
        self.memo = {}        # id(obj) -> (memo index, obj)   (obj kept alive so ids stay unique)
        self.gmemo = {}       # (module, name) -> memo index
        self.storages = {}    # id(storage) -> (key, storage)
        self.nmemo = 0
        from ._tensor import Tensor
        from ._device import device
        self._Tensor, self._device, self._Parameter = Tensor, device, _parameter_class()

    # -- low level
    def _put(self):
        i = self.nmemo
        self.nmemo += 1
        self.out += b"q" + bytes([i]) if i < 256 else b"r" + struct.pack("<I", i)
        return i

    def _get(self, i):
        self.out += b"h" + bytes([i]) if i < 256 else b"j" + struct.pack("<I", i)

    def _global(self, module, name):
        i = self.gmemo.get((module, name))
        if i is not None:
            return self._get(i)
        self.out += b"c" + module.encode() + b"\n" + name.encode() + b"\n"
        self.gmemo[(module, name)] = self._put()

    def _memoize(self, obj):
        self.memo[id(obj)] = (self._put(), obj)

    def _int(self, v):
        if 0 <= v < 256:
            self.out += b"K" + bytes([v])
        elif 0 <= v < 65536:
            self.out += b"M" + struct.pack("<H", v)
        elif -2 ** 31 <= v < 2 ** 31:
            self.out += b"J" + struct.pack("<i", v)
        else:
            b = v.to_bytes((v.bit_length() >> 3) + 1, "little", signed=True)
            if len(b) > 255:
                raise OverflowError(f"cltorch.save: integer {v} is too large to save")
            self.out += b"\x8a" + bytes([len(b)]) + b

    def _str(self, s):
        b = s.encode("utf-8", "surrogatepass")
        self.out += b"X" + struct.pack("<I", len(b)) + b

    def _items(self, items, op):
        items = list(items)
        for i in range(0, len(items), 1000):
            self.out += b"("
            for it in items[i:i + 1000]:
                if op == b"u":
                    self.save(it[0])
                    self.save(it[1])
                else:
                    self.save(it)
            self.out += op

    def dump(self, obj):
        self.out += b"\x80\x02"
        self.save(obj)
        self.out += b"."
        return bytes(self.out)

    # -- objects
    def save(self, obj):
        t = type(obj)
        if obj is None:
            self.out += b"N"
        elif t is bool:
            self.out += b"\x88" if obj else b"\x89"
        elif t is int:
            self._int(obj)
        elif t is float:
            self.out += b"G" + struct.pack(">d", obj)
        elif t is str:
            self._str(obj)
        elif id(obj) in self.memo:
            self._get(self.memo[id(obj)][0])
        elif isinstance(obj, self._Tensor):
            self._tensor(obj)
        elif isinstance(obj, list):                 # list subclasses are saved as lists
            self.out += b"]"
            self._memoize(obj)
            if obj:
                self._items(obj, b"e")
        elif isinstance(obj, collections.OrderedDict) and not isinstance(obj, collections.Counter):
            self._global("collections", "OrderedDict")
            self.out += b")R"
            self._memoize(obj)
            if obj:
                self._items(obj.items(), b"u")
            state = getattr(obj, "__dict__", None)
            if state:                       # e.g. a Module.state_dict()'s ``_metadata``
                self.save(dict(state))
                self.out += b"b"
        elif t is collections.Counter:
            self._global("collections", "Counter")
            self.save(dict(obj))
            self.out += b"\x85R"
        elif isinstance(obj, dict):                 # dict subclasses (defaultdict, ...) are saved as dicts
            self.out += b"}"
            self._memoize(obj)
            if obj:
                self._items(obj.items(), b"u")
        elif isinstance(obj, tuple):                # cltorch.Size as torch.Size; namedtuples as tuples
            size = t.__name__ == "Size" and t.__module__.startswith("cltorch")
            if size:
                self._global("torch", "Size")
            self._tuple(obj)
            if size:
                self.out += b"\x85R"
        elif isinstance(obj, D.dtype):
            self._global("torch", obj.name)
        elif isinstance(obj, self._device):
            self._global("torch", "device")
            self._str(str(obj))
            self.out += b"\x85R"
        elif t is bytes or t is bytearray:
            if t is bytes:
                self._global("_codecs", "encode")
                self._str(obj.decode("latin1"))
                self._str("latin1")
                self.out += b"\x86R"
            else:
                self._global("builtins", "bytearray")
                self.save(bytes(obj))
                self.out += b"\x85R"
        elif isinstance(obj, set):                  # (torch's weights_only loader has no frozenset)
            self._global("builtins", "set")
            self.save(list(obj))
            self.out += b"\x85R"
        elif t is complex:
            self._global("builtins", "complex")
            self.save(obj.real)
            self.save(obj.imag)
            self.out += b"\x86R"
        elif isinstance(obj, np.generic) and obj.dtype.kind in "biuf":
            self.save(obj.item())
        elif isinstance(obj, (bool, int, float, str)):   # subclasses (IntEnum, ...) as the plain value
            self.save((bool if isinstance(obj, bool) else int if isinstance(obj, int) else
                       float if isinstance(obj, float) else str)(obj))
        else:
            hint = " (convert it with cltorch.from_numpy first)" if isinstance(obj, np.ndarray) else ""
            raise TypeError(f"cltorch.save cannot save an object of type {t.__module__}.{t.__qualname__}{hint}; "
                            "it saves tensors, Parameters, dtypes, devices, dict/OrderedDict/Counter/list/tuple/set "
                            "containers, and None/bool/int/float/complex/str/bytes/bytearray")

    def _tuple(self, obj):
        n = len(obj)
        if n == 0:
            self.out += b")"
            return
        if n > 3:
            self.out += b"("
        for x in obj:
            self.save(x)
        self.out += (b"\x85", b"\x86", b"\x87")[n - 1] if n <= 3 else b"t"

    def _tensor(self, t):
        st = t._storage
        rec = self.storages.get(id(st))
        if rec is None:
            rec = self.storages[id(st)] = (str(len(self.storages)), st)
        param = self._Parameter is not None and isinstance(t, self._Parameter)
        if param:
            self._global("torch._utils", "_rebuild_parameter")
        self._global("torch._utils", "_rebuild_tensor_v2")
        self.out += b"("
        self.out += b"("
        self._str("storage")
        self._global("torch", _STORAGE_NAME[st.dtype.name])
        self._str(rec[0])
        self._str("cpu")
        self._int(st.size)
        self.out += b"tQ"
        self._int(t._offset)
        self._tuple(tuple(int(s) for s in t._shape))
        self._tuple(tuple(int(s) for s in t._stride))
        self.out += b"\x88" if t.requires_grad and not param else b"\x89"
        self._global("collections", "OrderedDict")
        self.out += b")R"
        self.out += b"tR"
        if param:
            self.out += b"\x88" if t.requires_grad else b"\x89"
            self._global("collections", "OrderedDict")
            self.out += b")R\x87R"
        self._memoize(t)


def _parameter_class():
    try:
        from .nn.parameter import Parameter
        return Parameter
    except ImportError:
        try:
            from .nn import Parameter
            return Parameter
        except ImportError:
            return None


def _storage_bytes(st):
    """The storage's elements as a little-endian numpy array (no copy for cpu storages)."""
    if st.host is not None:
        st.host_sync()
        arr = st.host
    else:
        arr = st.read(0, st.size)
    if arr.dtype.byteorder == ">" or (arr.dtype.byteorder == "=" and sys.byteorder == "big"):
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return arr


# =============================================================================================== save
def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True):
    """Saves ``obj`` to ``f`` in PyTorch's zip checkpoint format.

    Args:
        obj: tensors and Parameters (any device and dtype), dtypes, devices, and Python containers of them
            (dict, ``collections.OrderedDict`` with its attributes such as a state dict's ``_metadata``,
            list, tuple, set) and scalars (None, bool, int, float, complex, str, bytes). Module and
            optimizer ``state_dict()`` objects fit. Shared objects stay shared.
        f: a path (str or ``os.PathLike``) or a writable binary file object.
        pickle_module, pickle_protocol: accepted for PyTorch's signature; only protocol 2 (torch's
            default) is written, and ``pickle_module`` must be None or ``pickle``.

    Views: a saved view **keeps its view relationship**, as in torch: every tensor saved in one call
    refers to its storage by key, each storage is written once, whole, and the loaded tensors share one
    storage again (an in-place change to one shows in the other). A small view of a big tensor
    therefore writes the big tensor's storage; save ``view.clone()`` to save it compactly.

    Devices: tensors on ``cl:N`` are read back to the host and written like cpu tensors (location
    ``"cpu"`` in the pickle, so torch loads the file as it is); the ``cl:N`` device is recorded in the
    archive's ``.data/cltorch.json`` so that :func:`load` puts them back on it.

    Atomic writes: for a path, the archive is written to a temporary file in the same folder
    (``.<name>.<random>.tmp``), flushed and ``fsync``-ed, then renamed over ``f`` (and the folder is
    fsync-ed). A crash or SIGKILL mid-save leaves the previous file intact (and possibly the temporary
    file behind). If ``f`` is a symbolic link, the file it points to is replaced. A file object is
    written in place, without that guarantee.

    Raises:
        TypeError: for an object it cannot save (everything is checked before the file is touched).
        ValueError: for ``pickle_protocol`` other than 2 or ``_use_new_zipfile_serialization=False``.
    """
    if pickle_module is not None and pickle_module is not pickle:
        raise ValueError("cltorch.save writes its own pickle stream; pickle_module must be None or pickle")
    if pickle_protocol != 2:
        raise ValueError(f"cltorch.save writes pickle protocol 2 (torch's default), got {pickle_protocol}")
    if not _use_new_zipfile_serialization:
        raise ValueError("cltorch.save writes only the zip format; the legacy (pre-1.6) format is not supported")
    enc = _Encoder()
    data_pkl = enc.dump(obj)
    storages = [st for _, st in enc.storages.values()]
    keys = [k for k, _ in enc.storages.values()]

    def write(stream):
        zw = _ZipWriter(stream)
        zw.write_record("archive/data.pkl", data_pkl)
        zw.write_record("archive/byteorder", b"little")
        for key, st in zip(keys, storages):
            zw.write_record(f"archive/data/{key}", _storage_bytes(st))
        zw.write_record("archive/version", b"3\n")
        meta = {"writer": "cltorch", "devices": {k: str(st.device) for k, st in zip(keys, storages)}}
        zw.write_record("archive/.data/cltorch.json", json.dumps(meta, sort_keys=True).encode())
        zw.write_record("archive/.data/serialization_id", "".join(
            str(random.SystemRandom().randrange(10)) for _ in range(40)).encode())
        zw.finish()

    if isinstance(f, (str, bytes, os.PathLike)):
        _atomic_write(os.fsdecode(f), write)
    else:
        if not hasattr(f, "write"):
            raise TypeError(f"cltorch.save: f must be a path or a writable binary file object, got "
                            f"{type(f).__name__}")
        write(f)
        if hasattr(f, "flush"):
            f.flush()


def _umask():
    try:
        with open("/proc/self/status") as s:
            for line in s:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    m = os.umask(0o22)
    os.umask(m)
    return m


def _atomic_write(path, write):
    path = os.path.realpath(path)
    folder, base = os.path.split(path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"cltorch.save: {path} is a directory")
    fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp", dir=folder)
    try:
        try:
            mode = os.stat(path).st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o666 & ~_umask()
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb", buffering=1 << 20) as out:
            fd = None
            write(out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
        tmp = None
        try:
            dfd = os.open(folder, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(dfd)
        except OSError:
            pass
        finally:
            os.close(dfd)
    finally:
        if fd is not None:
            os.close(fd)
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


# ====================================================================================== safe unpickler
class _StorageType:
    """Stands for ``torch.<Name>Storage`` in a pickle."""

    def __init__(self, name):
        self.name = name
        self.dtype = _STORAGE_DTYPE.get(name, "uint8" if name == "UntypedStorage" else None)

    def __repr__(self):
        return f"torch.{self.name}"


class _Marker:
    """Stands for an allowed torch class (``torch.Tensor``, ``torch.nn.Parameter``)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


_TENSOR_CLS = _Marker("torch.Tensor")
_PARAM_CLS = _Marker("torch.nn.parameter.Parameter")


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


class _SafeUnpickler:
    """An unpickler that runs only allowlisted opcodes and calls only allowlisted functions.

    Our own implementation over the pickle opcode set (the same design as torch's ``weights_only``
    unpickler). Supports protocols 0-5's binary opcodes for None/bool/int/float/str/bytes, tuples,
    lists, dicts, sets, memo, GLOBAL/STACK_GLOBAL (allowlist), REDUCE/NEWOBJ (allowlisted callables
    only), BUILD (on OrderedDict only) and BINPERSID (storages only). Everything else raises
    ``pickle.UnpicklingError``.
    """

    def __init__(self, data, persistent_load, allowed):
        self.data = memoryview(data)
        self.pos = 0
        self.persistent_load = persistent_load
        self.allowed = allowed
        self.memo = {}
        self.stack = []
        self.marks = []

    def _read(self, n):
        p = self.pos
        if n < 0 or p + n > len(self.data):
            raise pickle.UnpicklingError("pickle data was truncated")
        self.pos = p + n
        return self.data[p:p + n]

    def _line(self):
        d = self.data
        end = bytes(d[self.pos:self.pos + 512]).find(b"\n")
        if end < 0:
            raise pickle.UnpicklingError("pickle data was truncated (GLOBAL name)")
        s = bytes(d[self.pos:self.pos + end]).decode("utf-8")
        self.pos += end + 1
        return s

    def _pop_mark(self):
        if not self.marks:
            raise pickle.UnpicklingError("pickle: unbalanced MARK")
        items = self.stack
        self.stack = self.marks.pop()
        return items

    def _find(self, module, name):
        module = {"__builtin__": "builtins", "copy_reg": "copyreg"}.get(module, module)
        obj = self.allowed(module, name)
        if obj is None:
            raise pickle.UnpicklingError(
                f"Unsupported global: GLOBAL {module}.{name} is not allowed when loading a checkpoint with "
                "weights_only=True (it could run arbitrary code). Load with weights_only=False only if you "
                "trust the file's source.")
        return obj

    def load(self):
        st = None
        try:
            while True:
                op = self._read(1)[0]
                st = self.stack
                if op == 0x2E:        # STOP
                    if len(st) != 1 or self.marks:
                        raise pickle.UnpicklingError("pickle: malformed stream at STOP")
                    return st[0]
                h = _OPS.get(op)
                if h is None:
                    raise pickle.UnpicklingError(f"Unsupported pickle opcode {bytes([op])!r} at byte {self.pos - 1} "
                                                 "(not allowed when loading with weights_only=True)")
                h(self)
        except (pickle.UnpicklingError, RuntimeError, OSError, MemoryError):
            raise
        except Exception as e:
            if getattr(e, "_cltorch_passthrough", False):    # raised by the user's map_location callable
                raise
            raise pickle.UnpicklingError(f"malformed pickle data at byte {self.pos}: {type(e).__name__}: {e}") \
                from None

    # -- opcode handlers
    def op_proto(self):
        if self._read(1)[0] > 5:
            raise pickle.UnpicklingError("unsupported pickle protocol")

    def op_frame(self):
        self._read(8)

    def op_mark(self):
        self.marks.append(self.stack)
        self.stack = []

    def op_pop(self):
        if self.stack:
            self.stack.pop()
        else:
            self._pop_mark()

    def op_pop_mark(self):
        self._pop_mark()

    def op_dup(self):
        self.stack.append(self.stack[-1])

    def op_none(self):
        self.stack.append(None)

    def op_true(self):
        self.stack.append(True)

    def op_false(self):
        self.stack.append(False)

    def op_binint(self):
        self.stack.append(struct.unpack("<i", self._read(4))[0])

    def op_binint1(self):
        self.stack.append(self._read(1)[0])

    def op_binint2(self):
        self.stack.append(struct.unpack("<H", self._read(2))[0])

    def op_long1(self):
        n = self._read(1)[0]
        self.stack.append(int.from_bytes(self._read(n), "little", signed=True))

    def op_long4(self):
        n = struct.unpack("<i", self._read(4))[0]
        self.stack.append(int.from_bytes(self._read(n), "little", signed=True))

    def op_binfloat(self):
        self.stack.append(struct.unpack(">d", self._read(8))[0])

    def _unicode(self, n):
        self.stack.append(str(self._read(n), "utf-8", "surrogatepass"))

    def op_binunicode(self):
        self._unicode(struct.unpack("<I", self._read(4))[0])

    def op_short_binunicode(self):
        self._unicode(self._read(1)[0])

    def op_binunicode8(self):
        self._unicode(struct.unpack("<Q", self._read(8))[0])

    def op_short_binstring(self):   # Python 2 str: decoded as in torch.load's default (utf-8)
        self.stack.append(str(self._read(self._read(1)[0]), "utf-8"))

    def op_binstring(self):
        self.stack.append(str(self._read(struct.unpack("<i", self._read(4))[0]), "utf-8"))

    def op_short_binbytes(self):
        self.stack.append(bytes(self._read(self._read(1)[0])))

    def op_binbytes(self):
        self.stack.append(bytes(self._read(struct.unpack("<I", self._read(4))[0])))

    def op_binbytes8(self):
        self.stack.append(bytes(self._read(struct.unpack("<Q", self._read(8))[0])))

    def op_empty_tuple(self):
        self.stack.append(())

    def op_tuple(self):
        items = self._pop_mark()
        self.stack.append(tuple(items))

    def op_tuple1(self):
        self.stack[-1] = (self.stack[-1],)

    def op_tuple2(self):
        self.stack[-2:] = [tuple(self.stack[-2:])]

    def op_tuple3(self):
        self.stack[-3:] = [tuple(self.stack[-3:])]

    def op_empty_list(self):
        self.stack.append([])

    def op_empty_dict(self):
        self.stack.append({})

    def op_empty_set(self):
        self.stack.append(set())

    def op_frozenset(self):
        items = self._pop_mark()
        self.stack.append(frozenset(_hashable(items)))

    def _target(self, types, what):
        t = self.stack[-1]
        if type(t) not in types:
            raise pickle.UnpicklingError(f"pickle: {what} on a {type(t).__name__} is not allowed")
        return t

    def op_append(self):
        v = self.stack.pop()
        self._target((list,), "APPEND").append(v)

    def op_appends(self):
        items = self._pop_mark()
        self._target((list,), "APPENDS").extend(items)

    def op_additems(self):
        items = self._pop_mark()
        self._target((set,), "ADDITEMS").update(_hashable(items))

    def op_setitem(self):
        v = self.stack.pop()
        k = self.stack.pop()
        self._target((dict, collections.OrderedDict, collections.Counter), "SETITEM")[_hashable1(k)] = v

    def op_setitems(self):
        items = self._pop_mark()
        if len(items) % 2:
            raise pickle.UnpicklingError("pickle: odd number of items in SETITEMS")
        d = self._target((dict, collections.OrderedDict, collections.Counter), "SETITEMS")
        for i in range(0, len(items), 2):
            d[_hashable1(items[i])] = items[i + 1]

    def op_global(self):
        module = self._line()
        name = self._line()
        self.stack.append(self._find(module, name))

    def op_stack_global(self):
        name = self.stack.pop()
        module = self.stack.pop()
        if type(module) is not str or type(name) is not str:
            raise pickle.UnpicklingError("pickle: STACK_GLOBAL needs two strings")
        self.stack.append(self._find(module, name))

    def op_reduce(self):
        args = self.stack.pop()
        func = self.stack[-1]
        if not isinstance(func, _Callable) or type(args) is not tuple:
            raise pickle.UnpicklingError(f"pickle: REDUCE of {func!r} is not allowed")
        self.stack[-1] = func(*args)

    def op_newobj(self):
        args = self.stack.pop()
        cls = self.stack.pop()
        if not isinstance(cls, _Callable) or not cls.newobj or type(args) is not tuple:
            raise pickle.UnpicklingError(f"pickle: NEWOBJ of {cls!r} is not allowed")
        self.stack.append(cls(*args))

    def op_build(self):
        state = self.stack.pop()
        inst = self.stack[-1]
        if type(inst) is not collections.OrderedDict or type(state) is not dict or \
                not all(type(k) is str for k in state):
            raise pickle.UnpicklingError(f"pickle: BUILD on a {type(inst).__name__} is not allowed "
                                         "(only an OrderedDict's attributes, such as a state dict's _metadata)")
        inst.__dict__.update(state)

    def op_binpersid(self):
        pid = self.stack.pop()
        if type(pid) is not tuple or not pid or pid[0] not in ("storage", b"storage"):
            raise pickle.UnpicklingError(f"pickle: only storages may be persistent ids, got {pid!r:.100}")
        self.stack.append(self.persistent_load(pid))

    def op_binget(self):
        self._memo_get(self._read(1)[0])

    def op_long_binget(self):
        self._memo_get(struct.unpack("<I", self._read(4))[0])

    def _memo_get(self, i):
        if i not in self.memo:
            raise pickle.UnpicklingError(f"pickle: memo key {i} not found")
        self.stack.append(self.memo[i])

    def op_binput(self):
        self.memo[self._read(1)[0]] = self.stack[-1]

    def op_long_binput(self):
        self.memo[struct.unpack("<I", self._read(4))[0]] = self.stack[-1]

    def op_memoize(self):
        self.memo[len(self.memo)] = self.stack[-1]


def _hashable1(k):
    try:
        hash(k)
    except TypeError:
        raise pickle.UnpicklingError(f"pickle: unhashable key of type {type(k).__name__}") from None
    return k


def _hashable(items):
    return [_hashable1(k) for k in items]


_OPS = {}
for _code, _name in [
        (b"\x80", "proto"), (b"\x95", "frame"), (b"(", "mark"), (b"0", "pop"), (b"1", "pop_mark"), (b"2", "dup"),
        (b"N", "none"), (b"\x88", "true"), (b"\x89", "false"), (b"J", "binint"), (b"K", "binint1"),
        (b"M", "binint2"), (b"\x8a", "long1"), (b"\x8b", "long4"), (b"G", "binfloat"), (b"X", "binunicode"),
        (b"\x8c", "short_binunicode"), (b"\x8d", "binunicode8"), (b"U", "short_binstring"), (b"T", "binstring"),
        (b"C", "short_binbytes"), (b"B", "binbytes"), (b"\x8e", "binbytes8"), (b")", "empty_tuple"),
        (b"t", "tuple"), (b"\x85", "tuple1"), (b"\x86", "tuple2"), (b"\x87", "tuple3"), (b"]", "empty_list"),
        (b"}", "empty_dict"), (b"\x8f", "empty_set"), (b"\x91", "frozenset"), (b"a", "append"),
        (b"e", "appends"), (b"\x90", "additems"), (b"s", "setitem"), (b"u", "setitems"), (b"c", "global"),
        (b"\x93", "stack_global"), (b"R", "reduce"), (b"\x81", "newobj"), (b"b", "build"),
        (b"Q", "binpersid"), (b"h", "binget"), (b"j", "long_binget"), (b"q", "binput"), (b"r", "long_binput"),
        (b"\x94", "memoize")]:
    _OPS[_code[0]] = getattr(_SafeUnpickler, "op_" + _name)


class _Callable:
    """An allowlisted callable: ``fn`` runs with the pickle's arguments (REDUCE, or NEWOBJ if ``newobj``)."""

    def __init__(self, name, fn, newobj=False):
        self.name, self.fn, self.newobj = name, fn, newobj

    def __call__(self, *args):
        return self.fn(*args)

    def __repr__(self):
        return self.name


# ============================================================================================ loading
class _Loader:
    """One load: reads records from the archive and rebuilds tensors onto their target devices."""

    def __init__(self, zf, stream, prefix, map_location, use_mmap, path, name):
        self.zf, self.stream, self.prefix, self.map_location = zf, stream, prefix, map_location
        self.use_mmap, self.path, self.name = use_mmap, path, name
        self.pending = {}
        self._raw = {}
        from ._tensor import Tensor, Size
        from ._storage import Storage
        from ._device import device, canonical, CPU
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


def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=None, **pickle_load_args):
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
        weights_only: True (default) restricts unpickling to an allowlist (see the module docstring) and
            raises ``pickle.UnpicklingError`` for anything else, such as a global that could run code.
            False uses Python's full unpickler: it can run arbitrary code, so only for trusted files.
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
            result = _SafeUnpickler(data, loader.persistent_load, lookup).load()
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
            if module.startswith("torch"):
                raise pickle.UnpicklingError(f"cltorch.load: the checkpoint needs {module}.{name}, which has no "
                                             "cltorch counterpart")
            return super().find_class(module, name)

        def persistent_load(self, pid):
            if type(pid) is not tuple or not pid or pid[0] not in ("storage", b"storage"):
                raise pickle.UnpicklingError(f"unsupported persistent id {pid!r:.100}")
            return loader.persistent_load(pid)

    kwargs = dict(kwargs)
    kwargs.setdefault("encoding", "utf-8")
    return U(io.BytesIO(data), **kwargs).load()


# ======================================================================= plain pickle (copy, processes)
def _reduce_tensor(t):
    """``Tensor.__reduce_ex__`` for Python's pickle (multiprocessing, ``pickle.dumps``): a compact numpy
    copy of the values, the device, ``requires_grad`` and the class. Views are not kept."""
    arr = np.ascontiguousarray(t._host_view()).copy()
    return _unpickle_tensor, (type(t), arr, str(t.device), bool(t.requires_grad))


def _unpickle_tensor(cls, arr, device, requires_grad):
    from ._tensor import Tensor
    from ._storage import Storage
    from ._device import canonical
    dev = canonical(device)
    flat = np.ascontiguousarray(arr).reshape(-1)
    t = Tensor._make(Storage.from_host(flat, dev), arr.shape, requires_grad=requires_grad)
    if cls is not Tensor:
        t = cls(t, requires_grad)
    return t
