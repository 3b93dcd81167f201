"""How a Tensor pickles with Python's own pickle (``pickle.dumps``, ``copy.deepcopy``, multiprocessing):
a compact numpy copy of its values, the device, ``requires_grad`` and the class. ``save`` does not use
this: it writes torch's tensor format."""
import numpy as np


def _reduce_tensor(t):
    """``Tensor.__reduce_ex__`` for Python's pickle (multiprocessing, ``pickle.dumps``): a compact numpy
    copy of the values, the device, ``requires_grad`` and the class. Views are not kept."""
    arr = np.ascontiguousarray(t._host_view()).copy()
    return _unpickle_tensor, (type(t), arr, str(t.device), bool(t.requires_grad))


def _unpickle_tensor(cls, arr, device, requires_grad):
    from .._tensor import Tensor
    from .._storage import Storage
    from .._device import canonical
    dev = canonical(device)
    flat = np.ascontiguousarray(arr).reshape(-1)
    t = Tensor._make(Storage.from_host(flat, dev), arr.shape, requires_grad=requires_grad)
    if cls is not Tensor:
        t = cls(t, requires_grad)
    return t
