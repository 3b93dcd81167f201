"""Factories: tensor, as_tensor, from_numpy, zeros, ones, full, empty, arange, linspace, logspace, eye,
the ``*_like`` forms and the ``new_*`` methods. Each takes ``dtype``, ``device`` and ``requires_grad``.

Values are computed on the host with numpy (exactly as PyTorch defines them: ``arange``'s length is
``ceil((end - start) / step)`` computed in double; ``linspace`` hits both endpoints exactly) and copied
once to the device; fills of large device tensors use the elementwise kernel.
"""
import math

import numpy as np

from .. import _dtype as D
from .._device import canonical
from .._storage import Storage, aligned_empty, check_caps
from .._memory_format import format_strides, suggest_format, contiguous_format, preserve_format
from .._tensor import Tensor
from ._util import method, size_args
from .pointwise import full_like_value

__all__ = ["tensor", "as_tensor", "from_numpy", "zeros", "ones", "full", "empty", "arange", "linspace", "logspace",
           "eye", "zeros_like", "ones_like", "full_like", "empty_like", "empty_strided", "scalar_tensor",
           "is_tensor", "numel", "asarray", "range"]

_brange = range


def _finish(t, requires_grad):
    if requires_grad:
        t.requires_grad_(True)
    return t


def _infer_dtype(data):
    """PyTorch's dtype inference for ``tensor(data)`` (``infer_scalar_type`` in torch/csrc/utils/tensor_new.cpp):
    a numpy array or numpy scalar gives its own dtype (np.float64 -> float64, np.int32 -> int32, np.bool_ ->
    bool, 0-d arrays too), a tensor its dtype, a Python bool bool, an int int64, a float the default dtype, a
    complex the default complex dtype; a sequence promotes its items' dtypes (``promote_types``: [np.int32, 2] is
    int64, [np.float32, 2.0] float32) and an empty one is the default dtype. Raises TypeError for anything else
    (a string, an object) and for numpy dtypes cltorch does not store (uint16/32/64)."""
    if isinstance(data, (np.ndarray, np.generic)):
        return D.from_numpy_dtype(data.dtype)
    if isinstance(data, bool):
        return D.bool
    if isinstance(data, int):
        return D.int64
    if isinstance(data, float):
        return D.get_default_dtype()
    if isinstance(data, complex):
        return D.default_complex()
    if isinstance(data, Tensor):
        return data.dtype
    if isinstance(data, (list, tuple)):
        out = None
        for x in data:
            d = _infer_dtype(x)
            out = d if out is None else D.promote_types(out, d)
        return D.get_default_dtype() if out is None else out
    raise TypeError(f"Could not infer dtype of {type(data).__name__}")


def _to_array(data, dtype):
    if isinstance(data, Tensor):
        return data._to_numpy_copy()
    if isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in data):
        data = [_to_array(x, dtype) if isinstance(x, (Tensor, list, tuple)) else x for x in data]
    a = np.array(data)
    if a.dtype == object:
        raise TypeError("tensor(): the nested sequence has inconsistent lengths or unsupported element types")
    return a


def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new tensor holding a copy of ``data`` (nested lists, numbers, numpy arrays and scalars, or tensors);
    without ``dtype``, the dtype PyTorch infers (numpy scalars keep theirs: ``tensor(np.float64(2.5))`` is
    float64)."""
    device = canonical(device)
    if isinstance(data, np.ndarray):
        dt = D.to_dtype(dtype) if dtype is not None else D.from_numpy_dtype(data.dtype)
        arr = data
    elif isinstance(data, Tensor):
        dt = D.to_dtype(dtype) if dtype is not None else data.dtype
        arr = data.detach()._to_numpy_copy()
    else:
        dt = D.to_dtype(dtype) if dtype is not None else _infer_dtype(data)
        arr = _to_array(data, dt)
    check_caps(dt, device)
    arr = np.asarray(arr != 0 if (dt is D.bool and arr.dtype != np.bool_) else D.host_values(arr, dt), dtype=dt.np)
    flat = aligned_empty(arr.size, dt.np)
    flat[...] = arr.reshape(-1)
    t = Tensor._make(Storage.from_host(flat, device), arr.shape)
    return _finish(t, requires_grad)


def scalar_tensor(s, *, dtype=None, device=None, requires_grad=False):
    return tensor(s, dtype=dtype or D.get_default_dtype(), device=device, requires_grad=requires_grad)


def from_numpy(a):
    """A cpu tensor sharing memory with the numpy array ``a`` (any strides with non-negative, aligned steps)."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(a).__name__})")
    dt = D.from_numpy_dtype(a.dtype)
    isz = a.itemsize
    if any(s < 0 for s in a.strides):
        raise ValueError("At least one stride in the given numpy array is negative, and tensors with negative "
                         "strides are not currently supported. (You can probably work around this by making a copy "
                         "of your array  with array.copy().) ")
    if any(s % isz for s in a.strides):
        raise ValueError("given numpy array strides not a multiple of the element byte size. Copy the numpy array "
                         "to reallocate the memory.")
    strides = tuple(s // isz for s in a.strides)
    span = 1 + sum((n - 1) * s for n, s in zip(a.shape, strides)) if a.size else 0
    base = np.lib.stride_tricks.as_strided(a, (span,), (isz,)) if a.size else np.empty(0, a.dtype)
    st = Storage(canonical("cpu"), dt, span, host=base)
    st.exposed = True
    return Tensor._make(st, a.shape, strides, 0)


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    return as_tensor(obj, dtype=dtype, device=device) if not copy else tensor(obj, dtype=dtype, device=device,
                                                                            requires_grad=requires_grad)


def as_tensor(data, dtype=None, device=None):
    """Like ``tensor`` but avoids a copy when ``data`` already is a tensor or numpy array of the right dtype and
    device (a cpu numpy array is shared)."""
    if isinstance(data, Tensor):
        return data.to(device=device if device is not None else data.device, dtype=dtype or data.dtype)
    if isinstance(data, np.ndarray) and canonical(device).type == "cpu" and \
            (dtype is None or D.to_dtype(dtype).np == data.dtype):
        try:
            return from_numpy(data)
        except (ValueError, TypeError):
            pass
    return tensor(data, dtype=dtype, device=device)


def empty(*size, dtype=None, device=None, requires_grad=False, pin_memory=False, out=None, layout=None,
          memory_format=None):
    """An uninitialised tensor of ``size``; ``memory_format`` (contiguous_format, or channels_last for 4-d and
    channels_last_3d for 5-d sizes) sets the strides. Raises RuntimeError for a negative size or a channels_last
    format of the wrong rank."""
    dt = D.to_dtype(dtype) if dtype is not None else D.get_default_dtype()
    device = canonical(device)
    check_caps(dt, device)
    shape = size_args(size)
    if any(s < 0 for s in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(shape)}: {list(shape)}")
    if memory_format is None or memory_format is contiguous_format:
        t = Tensor._empty(shape, dt, device)
    else:
        if memory_format is preserve_format:
            raise RuntimeError("preserve memory format is unsupported by the empty() operator")
        t = Tensor._make(Storage.empty(math.prod(shape), dt, device), shape, format_strides(shape, memory_format))
    return _finish(t, requires_grad)


def empty_strided(size, stride, *, dtype=None, device=None, requires_grad=False):
    dt = D.to_dtype(dtype) if dtype is not None else D.get_default_dtype()
    span = 1 + sum((n - 1) * s for n, s in zip(size, stride)) if all(size) else 0
    st = Storage.empty(span, dt, canonical(device))
    return _finish(Tensor._make(st, tuple(size), tuple(stride), 0), requires_grad)


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False, out=None, layout=None):
    """A tensor of ``size`` filled with ``fill_value``; the dtype follows the value (bool, int64 or default float)."""
    if dtype is None:
        dtype = D.bool if isinstance(fill_value, bool) else (D.int64 if isinstance(fill_value, int) else
                                                             D.default_complex() if isinstance(fill_value, complex)
                                                             else D.get_default_dtype())
    t = empty(size_args((size,)) if not isinstance(size, int) else (size,), dtype=dtype, device=device)
    full_like_value(t, fill_value)
    return _finish(t, requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad=False, out=None, layout=None):
    """A tensor of zeros."""
    t = empty(*size, dtype=dtype, device=device)
    full_like_value(t, 0)
    return _finish(t, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False, out=None, layout=None):
    """A tensor of ones."""
    t = empty(*size, dtype=dtype, device=device)
    full_like_value(t, 1)
    return _finish(t, requires_grad)


def _like(x, dtype, device):
    return (D.to_dtype(dtype) if dtype is not None else x.dtype), (device if device is not None else x.device)


def _like_format(x, memory_format):
    """The format a ``*_like`` result takes: ``preserve_format`` (the default) keeps x's channels_last layout."""
    if memory_format is None or memory_format is preserve_format:
        return suggest_format(x)
    return memory_format


def empty_like(x, *, dtype=None, device=None, requires_grad=False, memory_format=None, layout=None):
    """An uninitialised tensor of x's shape (dtype and device default to x's). ``memory_format``: see
    ``cltorch._memory_format`` (preserve_format, the default, keeps a channels_last layout)."""
    dt, dev = _like(x, dtype, device)
    return empty(x._shape, dtype=dt, device=dev, requires_grad=requires_grad,
                 memory_format=_like_format(x, memory_format))


def zeros_like(x, *, dtype=None, device=None, requires_grad=False, memory_format=None, layout=None):
    """Zeros of x's shape; dtype, device and ``memory_format`` as in :func:`empty_like`."""
    t = empty_like(x, dtype=dtype, device=device, memory_format=memory_format)
    full_like_value(t, 0)
    return _finish(t, requires_grad)


def ones_like(x, *, dtype=None, device=None, requires_grad=False, memory_format=None, layout=None):
    """Ones of x's shape; dtype, device and ``memory_format`` as in :func:`empty_like`."""
    t = empty_like(x, dtype=dtype, device=device, memory_format=memory_format)
    full_like_value(t, 1)
    return _finish(t, requires_grad)


def full_like(x, fill_value, *, dtype=None, device=None, requires_grad=False, memory_format=None, layout=None):
    """``fill_value`` in x's shape; dtype (x's unless given), device and ``memory_format`` as in
    :func:`empty_like`."""
    t = empty_like(x, dtype=dtype, device=device, memory_format=memory_format)
    full_like_value(t, fill_value)
    return _finish(t, requires_grad)


def _num(x):
    return x.item() if isinstance(x, Tensor) else x


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False, out=None, layout=None):
    """Values start, start+step, ... below end. Length ``ceil((end-start)/step)`` in double; the dtype is int64
    when every argument is an integer, else the default float dtype."""
    start, end, step = _num(start), _num(end), _num(step)
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("step must be nonzero")
    n = math.ceil((end - start) / step)
    if n < 0:
        raise RuntimeError("upper bound and larger bound inconsistent with step sign")
    if dtype is None:
        dtype = D.int64 if all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end, step)) else \
            D.get_default_dtype()
    dtype = D.to_dtype(dtype)
    if dtype.is_floating_point:
        vals = start + np.arange(n, dtype=np.float64) * step
    else:
        vals = start + np.arange(n, dtype=np.int64) * int(step) if isinstance(step, int) and isinstance(start, int) \
            else np.floor(start + np.arange(n, dtype=np.float64) * step)
    return tensor(vals.astype(dtype.np), dtype=dtype, device=device, requires_grad=requires_grad)


def range(start, end, step=1, *, dtype=None, device=None, requires_grad=False):  # noqa: A001
    """Deprecated in PyTorch: values from start to end inclusive."""
    n = int(math.floor((end - start) / step)) + 1
    vals = start + np.arange(n, dtype=np.float64) * step
    return tensor(vals, dtype=dtype or D.get_default_dtype(), device=device, requires_grad=requires_grad)


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False, out=None, layout=None):
    """``steps`` evenly spaced values from start to end, both included exactly. PyTorch's two-sided formula:
    the first half counts up from start, the second half down from end."""
    start, end = _num(start), _num(end)
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    dtype = D.to_dtype(dtype) if dtype is not None else D.get_default_dtype()
    cdt = np.float64 if dtype is D.float64 or not dtype.is_floating_point else np.float32
    if steps == 1:
        vals = np.array([start], dtype=cdt)
    else:
        i = np.arange(steps)
        s, e = cdt(start), cdt(end)
        step = (e - s) / cdt(steps - 1)
        half = steps // 2
        vals = np.where(i < half, s + step * i.astype(cdt), e - step * (steps - 1 - i).astype(cdt)).astype(cdt)
    return tensor(vals.astype(dtype.np), dtype=dtype, device=device, requires_grad=requires_grad)


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    lin = linspace(start, end, steps, dtype=D.float64).numpy(force=True)
    dtype = D.to_dtype(dtype) if dtype is not None else D.get_default_dtype()
    return tensor((base ** lin).astype(dtype.np), dtype=dtype, device=device, requires_grad=requires_grad)


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False, out=None, layout=None):
    """The identity matrix of n rows and m columns (default n)."""
    dtype = D.to_dtype(dtype) if dtype is not None else D.get_default_dtype()
    return tensor(np.eye(n, m if m is not None else n, dtype=dtype.np), dtype=dtype, device=device,
                  requires_grad=requires_grad)


def is_tensor(x):
    return isinstance(x, Tensor)


def numel(x):
    return x.numel()


def _new(kind):
    def f(self, *size, dtype=None, device=None, requires_grad=False, **kw):
        dt = dtype or self.dtype
        dev = device or self.device
        if kind == "full":
            size, value = size[0], size[1] if len(size) > 1 else kw.pop("fill_value")
            return full(size, value, dtype=dt, device=dev, requires_grad=requires_grad)
        return {"empty": empty, "zeros": zeros, "ones": ones}[kind](*size, dtype=dt, device=dev,
                                                                     requires_grad=requires_grad)
    return f


for _k in ("empty", "zeros", "ones", "full"):
    method("new_" + _k, _new(_k))
