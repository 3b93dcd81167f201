"""``cltorch.save`` and ``cltorch.load``: PyTorch's zip checkpoint format, without torch.

Format (what ``torch.save`` writes since torch 1.6, read from the torch sources and checked against files
that torch 2.13 writes; the code here is our own):

- a zip archive of *stored* (uncompressed) records, all under one folder (``archive/`` when we write;
  torch names it after the file's stem, and we accept any name);
- ``data.pkl``: a pickle (protocol 2 by default) of the object. A tensor is the call
  ``torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
  OrderedDict())``; a ``Parameter`` wraps that in ``torch._utils._rebuild_parameter(tensor,
  requires_grad, OrderedDict())``. A storage is a *persistent id*
  ``("storage", torch.<Type>Storage, key, location, numel)`` (``location`` is ``"cpu"`` or ``"cuda:0"``);
- ``data/<key>``: the storage's raw bytes, little-endian, each record's data aligned to 64 bytes;
- ``byteorder`` (``little``), ``version`` (``3``), ``.data/serialization_id``.

cltorch also writes ``.data/cltorch.json``, which records the cltorch device (``cl:N``) of each storage.
torch ignores it; in the pickle every storage's location is ``"cpu"``, so that ``torch.load(f,
weights_only=True)`` reads our files with no ``map_location``.

``save`` pickles anything Python's pickle can (whole Modules, optimizers, numpy arrays, your classes);
cltorch classes are written under their torch names, so whole models move between cltorch and torch.
``load`` is restricted by default (``weights_only=True``, as torch) to an allowlist: only the pickle
opcodes and the globals that tensors, state dicts and optimizer state dicts need, plus what
:func:`add_safe_globals` allows. Anything else, such as an ``os.system`` global, raises
``pickle.UnpicklingError`` naming it before anything is called. ``weights_only=False`` uses Python's full
unpickler and can run arbitrary code: use it only for files you trust.

Modules: ``_saving`` (the pickler and ``save``), ``_zip_writer`` (the archive, atomic writes),
``_loading`` (the archive reader, storages, ``load``), ``_safe_unpickler`` (the restricted unpickler),
``_allowlist`` (``add_safe_globals`` and friends), ``_names`` (cltorch <-> torch global names),
``_format`` (shared tables), ``_plain_pickle`` (a Tensor under ``pickle.dumps``).
"""
from . import _allowlist, _format, _loading, _names, _plain_pickle, _safe_unpickler, _saving, _zip_writer  # noqa: F401
from ._allowlist import add_safe_globals, clear_safe_globals, get_safe_globals, safe_globals
from ._format import _parameter_class  # noqa: F401
from ._loading import get_unsafe_globals_in_checkpoint, load
from ._plain_pickle import _reduce_tensor, _unpickle_tensor  # noqa: F401
from ._saving import save

__all__ = ["save", "load", "add_safe_globals", "clear_safe_globals", "get_safe_globals", "safe_globals",
           "get_unsafe_globals_in_checkpoint"]
