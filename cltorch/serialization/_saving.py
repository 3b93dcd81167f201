"""``save``: pickles any object (as torch.save does) with tensors' storages as persistent ids, into
torch's zip checkpoint format.

The pickle is Python's own (``pickle._Pickler``, which lets a subclass choose the names that globals are
written under), with these objects written the way torch writes them:

- a tensor: ``torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
  OrderedDict())``; a Parameter wraps that in ``torch._utils._rebuild_parameter(tensor, requires_grad,
  OrderedDict())`` (``_rebuild_parameter_with_state`` / ``torch._tensor._rebuild_from_type_v2`` when Python
  attributes were set on it); a tensor subclass other than Parameter is written as its base class; a
  storage is the persistent id ``("storage", torch.<Type>Storage, key, "cpu", numel)``;
- a dtype: the global ``torch.<name>``; a device: ``torch.device(str)``; ``cltorch.Size``: ``torch.Size(tuple)``;
- a cltorch global (a Module or Optimizer class, a function): its torch name (see ``_names``), so that torch
  loads a whole cltorch model as the corresponding torch classes.

Everything else is pickled as Python pickles it; what pickle cannot pickle (a lambda, a local class) raises
the error Python's C pickler raises (what torch.save raises).
"""
import collections
import io
import json
import os
import pickle
import random
import sys
from types import FunctionType

from .. import _dtype as D
from . import _names, _zip_writer
from ._format import _STORAGE_NAME, _parameter_class


# what the autograd engine keeps in a tensor's __dict__ (autograd/graph.py: the cached AccumulateGrad node):
# not the user's attributes, never saved
_ENGINE_ATTRS = ("_acc",)


class _Global:
    """Stands for the global ``module.name`` in the pickle being written (torch need not be importable)."""

    __slots__ = ("module", "name")

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, *args):      # pickle asks that a reduce function be callable; this one is only named
        raise TypeError(f"{self.module}.{self.name} is a name written into a checkpoint, not a function")


class _Reduced:
    """An object that pickles as ``func(*args)``."""

    __slots__ = ("rv",)

    def __init__(self, func, args):
        self.rv = (func, args)

    def __reduce__(self):
        return self.rv


class _StorageRef:
    __slots__ = ("pid",)

    def __init__(self, pid):
        self.pid = pid


class _Pickler(pickle._Pickler):
    """The checkpoint pickler; ``storages`` collects ``key -> Storage`` as tensors are written."""

    dispatch = dict(pickle._Pickler.dispatch)

    def __init__(self, file, protocol):
        super().__init__(file, protocol)
        from .._tensor import Tensor, Size
        from .._device import device
        self.Tensor, self.Size, self.device, self.Parameter = Tensor, Size, device, _parameter_class()
        self.globals = {}         # (module, name) -> _Global (one object each, so that the memo finds it)
        self.storages = {}        # id(storage) -> (key, storage, _StorageRef)
        self.checked = set()      # ids of globals that Python's C pickler accepts

    def _g(self, module, name):
        g = self.globals.get((module, name))
        if g is None:
            g = self.globals[(module, name)] = _Global(module, name)
        return g

    def persistent_id(self, obj):
        return obj.pid if type(obj) is _StorageRef else None

    def save(self, obj, save_persistent_id=True):
        if type(obj) is _Global or isinstance(obj, D.dtype):
            x = self.memo.get(id(obj))
            if x is not None:
                self.write(self.get(x[0]))
            elif type(obj) is _Global:
                self._write_global(obj.module, obj.name, obj)
            else:
                self.save(self._g("torch", obj.name))
            return
        super().save(obj, save_persistent_id)

    def _write_global(self, module, name, obj):
        if self.proto >= 4:
            self.save(module)
            self.save(name)
            self.write(pickle.STACK_GLOBAL)
        else:
            self.write(pickle.GLOBAL + module.encode("utf-8") + b"\n" + name.encode("utf-8") + b"\n")
        self.memoize(obj)

    def save_global(self, obj, name=None):
        if id(obj) not in self.checked:      # the C pickler's own error for what pickle cannot name
            pickle.dumps(obj, self.proto)
            self.checked.add(id(obj))
        qual = name if name is not None else getattr(obj, "__qualname__", None) or obj.__name__
        mapped = _names.torch_name(pickle.whichmodule(obj, qual), qual, obj)
        if mapped is None:
            return super().save_global(obj, name)
        self._write_global(*mapped, obj)

    dispatch[FunctionType] = save_global

    def reducer_override(self, obj):
        if isinstance(obj, self.Tensor):
            return self._tensor(obj)
        if isinstance(obj, self.device):
            return self._g("torch", "device"), (str(obj),)
        if isinstance(obj, self.Size):
            return self._g("torch", "Size"), (tuple(int(s) for s in obj),)
        return NotImplemented

    def _tensor(self, t):
        st = t._storage
        rec = self.storages.get(id(st))
        if rec is None:
            key = str(len(self.storages))
            ref = _StorageRef(("storage", self._g("torch", _STORAGE_NAME[st.dtype.name]), key, "cpu", st.size))
            rec = self.storages[id(st)] = (key, st, ref)
        param = self.Parameter is not None and isinstance(t, self.Parameter)
        args = (rec[2], t._offset, tuple(int(s) for s in t._shape), tuple(int(s) for s in t._stride),
                bool(t.requires_grad) and not param, collections.OrderedDict())
        rebuild = self._g("torch._utils", "_rebuild_tensor_v2")
        state = {k: v for k, v in getattr(t, "__dict__", {}).items() if k not in _ENGINE_ATTRS} or None
        if param:
            if state is None:
                return self._g("torch._utils", "_rebuild_parameter"), (_Reduced(rebuild, args), bool(t.requires_grad),
                                                                      collections.OrderedDict())
            return self._g("torch._utils", "_rebuild_parameter_with_state"), (
                _Reduced(rebuild, args), bool(t.requires_grad), collections.OrderedDict(), state)
        if state is None:
            return rebuild, args
        return self._g("torch._tensor", "_rebuild_from_type_v2"), (rebuild, self._g("torch", "Tensor"), args, state)


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


def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False):
    """Saves ``obj`` to ``f`` in PyTorch's zip checkpoint format.

    Args:
        obj: anything Python's pickle can pickle, as torch.save: tensors and Parameters (any device and
            dtype), state dicts, whole ``nn.Module`` objects, optimizers, numpy arrays, instances of your
            own classes. Shared objects stay shared.
        f: a path (str or ``os.PathLike``) or a writable binary file object.
        pickle_module: None or ``pickle`` (cltorch writes with its own pickler).
        pickle_protocol: 2 (torch's default) to 5. ``load(weights_only=True)`` reads them all.

    Whole objects: a class or function of cltorch is written under its torch name (``torch.nn.Linear``,
    ``torch.optim.Adam``), so that ``torch.load(f, weights_only=False)`` in real torch gives torch objects,
    and :func:`load` maps torch's names back to cltorch's. Loading such a file with ``weights_only=True``
    needs those classes in :func:`add_safe_globals`.

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
        pickle.PicklingError, AttributeError, TypeError: what Python's pickle raises for an object it
            cannot pickle (a lambda, a local function or class, a generator); nothing is written then.
        ValueError: for another ``pickle_module``, ``pickle_protocol`` outside 2..5, or
            ``_use_new_zipfile_serialization=False`` (the legacy format).
    """
    if pickle_module is not None and pickle_module is not pickle:
        raise ValueError("cltorch.save writes its own pickle stream; pickle_module must be None or pickle")
    if not 2 <= pickle_protocol <= pickle.HIGHEST_PROTOCOL:
        raise ValueError(f"cltorch.save writes pickle protocols 2 to {pickle.HIGHEST_PROTOCOL} (torch's default "
                         f"is 2), got {pickle_protocol}")
    if not _use_new_zipfile_serialization:
        raise ValueError("cltorch.save writes only the zip format; the legacy (pre-1.6) format is not supported")
    buf = io.BytesIO()
    p = _Pickler(buf, pickle_protocol)
    p.dump(obj)
    data_pkl = buf.getvalue()
    records = [(key, st) for key, st, _ in p.storages.values()]

    def write(stream):
        zw = _zip_writer._ZipWriter(stream)
        zw.write_record("archive/data.pkl", data_pkl)
        if not _disable_byteorder_record:
            zw.write_record("archive/byteorder", b"little")
        for key, st in records:
            zw.write_record(f"archive/data/{key}", _storage_bytes(st))
        zw.write_record("archive/version", b"3\n")
        meta = {"writer": "cltorch", "devices": {k: str(st.device) for k, st in records}}
        zw.write_record("archive/.data/cltorch.json", json.dumps(meta, sort_keys=True).encode())
        zw.write_record("archive/.data/serialization_id", "".join(
            str(random.SystemRandom().randrange(10)) for _ in range(40)).encode())
        zw.finish()

    if isinstance(f, (str, bytes, os.PathLike)):
        _zip_writer._atomic_write(os.fsdecode(f), write)
    else:
        if not hasattr(f, "write"):
            raise TypeError(f"cltorch.save: f must be a path or a writable binary file object, got "
                            f"{type(f).__name__}")
        write(f)
        if hasattr(f, "flush"):
            f.flush()
