"""Shared by the index ops: numpy helpers for cpu tensors (their pure data movement needs no OpenCL), dim
wrapping, the index and device checks with PyTorch's messages, and the guard of in-place forms."""
import numpy as np

from ... import _dtype as D
from ..._storage import Storage
from ..._tensor import Tensor


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _is_host(*ts):
    return all(t._storage.host is not None for t in ts if isinstance(t, Tensor))


def _tensor_from_host(arr, device):
    """A new tensor owning a contiguous copy of a numpy array (no OpenCL for cpu)."""
    arr = np.asarray(arr)
    flat = np.array(arr.reshape(-1), copy=True)       # (np.ascontiguousarray would turn 0-d into 1-d)
    return Tensor._make(Storage.from_host(flat, device), arr.shape)


def _host(t):
    """numpy view of a cpu tensor's values (bool as np.bool_)."""
    return t._host_view()


def _wrap_dim(x, dim):
    n = x.dim()
    lo, hi = (-1, 0) if n == 0 else (-n, n - 1)
    if not isinstance(dim, int):
        dim = int(dim)
    if dim < lo or dim > hi:
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but got {dim})")
    return dim % n if n else 0


def _bounds_msg(v, dim, size):
    return f"index {v} is out of bounds for dimension {dim} with size {size}"


def _host_check(a, size, dim, neg):
    """Raise IndexError for the first out-of-range value of the numpy int array ``a``."""
    if a.size == 0:
        return
    lo = -size if neg else 0
    bad = (a < lo) | (a >= size)
    if bad.any():
        v = int(a.reshape(-1)[np.argmax(bad.reshape(-1))])
        raise IndexError(_bounds_msg(v, dim, size))


def _check_index_dtype(t, what):
    if t.dtype.is_floating_point or t.dtype is D.bool:
        raise IndexError(f"{what}: tensors used as indices must be long, int, byte or bool tensors, got "
                         f"{t.dtype.name}")


def _long_on(t, device):
    """An int64 copy (or t itself) on ``device``."""
    if t.dtype is not D.int64:
        t = t.to(D.int64)
    if t.device != device:
        t = t.to(device)
    return t


def _as_tensor_index(i, device):
    if isinstance(i, Tensor):
        return i
    from ..creation import tensor
    if isinstance(i, (list, tuple)) and len(i) == 0:
        return tensor([], dtype=D.int64)
    return tensor(i) if not isinstance(i, np.ndarray) else tensor(i)


def _check_int_index(index, fname, int32_ok=True, empty_ok=False):
    """index must be an int64 (or, with int32_ok, int32) tensor; with empty_ok an empty index of any dtype passes
    (gather/scatter's rule in PyTorch)."""
    if not isinstance(index, Tensor):
        raise TypeError(f"{fname}(): argument 'index' must be Tensor, not {type(index).__name__}")
    if empty_ok and index.numel() == 0:
        return
    if index.dtype is not D.int64 and not (int32_ok and index.dtype is D.int32):
        raise RuntimeError(f"{fname}(): Expected dtype int{'32/int' if int32_ok else ''}64 for index")


def _index_long(index, device):
    """index as int64 on ``device`` (gather/scatter accept int32 and empty indices of any dtype)."""
    if index.dtype is D.int64:
        return index
    if index.numel() == 0:
        return Tensor._empty(index._shape, D.int64, device)
    return _long_on(index, device)


def _same_device(x, *others):
    for o in others:
        if isinstance(o, Tensor) and o.device != x.device:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"{x.device} and {o.device}!")


def _inplace(self, fname, fn, *args):
    from ..pointwise import run_inplace
    r = run_inplace(self, fname, lambda s, *a: fn(s, *a), *args)
    if r is not None:
        return r
    if self._overlaps():
        raise RuntimeError("unsupported operation: some elements of the input tensor and the written-to tensor "
                           "refer to a single memory location. Please clone() the tensor before performing the "
                           "operation.")
    return None
