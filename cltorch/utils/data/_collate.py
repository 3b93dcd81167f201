"""``default_collate`` and ``default_convert``: how samples become batches (PyTorch's rules).

Collation of cpu tensors, numpy arrays and numbers runs on the host (numpy), never through OpenCL
(DESIGN decision 3): ``np.stack`` writes straight into the batch's memory, which inside a worker is a
shared-memory segment, so the batch reaches the main process without another copy.
"""
import collections.abc
import copy
import re

import numpy as np

import cltorch
from cltorch._dtype import from_numpy_dtype
from cltorch._tensor import contiguous_strides

from ._pickle import batch_array, host_view

__all__ = ["collate", "default_collate", "default_convert", "default_collate_fn_map", "collate_tensor_fn",
           "collate_numpy_array_fn", "collate_numpy_scalar_fn", "collate_float_fn", "collate_int_fn",
           "collate_str_fn"]

np_str_obj_array_pattern = re.compile(r"[SaUO]")

default_collate_err_msg_format = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}")


def _stack_arrays(arrays, np_dtype):
    """Stacks equal-shape numpy arrays into a fresh batch array (shared memory inside a worker).

    One ``concatenate`` for 1-D rows, else row by row: np.stack spends ~3 us per array on reshaping."""
    first = arrays[0].shape
    for i, a in enumerate(arrays):
        if a.shape != first:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(first)} at entry 0 "
                               f"and {list(a.shape)} at entry {i}")
    out = batch_array((len(arrays),) + tuple(first), np_dtype)
    if len(first) == 1:
        np.concatenate(arrays, out=out.reshape(-1), casting="unsafe")
    else:
        for i, a in enumerate(arrays):
            out[i] = a
    return out


def collate_tensor_fn(batch, *, collate_fn_map=None):
    """Stacks tensors along a new dim 0; the dtype is PyTorch's promotion of their dtypes.

    cpu tensors are stacked on the host (numpy copies into the batch's memory); tensors on an OpenCL
    device, or needing grad, by ``cltorch.stack``. Raises RuntimeError naming both sizes when shapes differ.
    """
    elem = batch[0]
    if elem.device.type != "cpu" or any(t.requires_grad for t in batch):
        return cltorch.stack(batch, 0)
    dt = elem.dtype
    shape = elem._shape
    for i, t in enumerate(batch):
        if t.dtype is not dt:
            dt = cltorch.promote_types(dt, t.dtype)
        if t._shape != shape:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(shape)} at entry 0 "
                               f"and {list(t._shape)} at entry {i}")
    out = batch_array((len(batch),) + tuple(shape), dt.np)
    _fill_rows(out, batch, shape)
    return cltorch.from_numpy(out)


def _fill_rows(out, batch, shape):
    """out[i] = batch[i] for cpu tensors; contiguous ones are copied as flat slices of their storage."""
    n = 1
    for s in shape:
        n *= s
    flat = out.reshape(len(batch), n)
    cstrides = contiguous_strides(shape)
    synced = set()
    for i, t in enumerate(batch):
        st = t._storage
        rt = st._rt
        if rt is not None and rt.pending and id(rt) not in synced:
            st.host_sync()
            synced.add(id(rt))
        host = st.host
        if host is not None and (t._stride == cstrides or n <= 1):
            off = t._offset
            flat[i] = host[off:off + n]
        else:
            out[i] = host_view(t)


def collate_numpy_array_fn(batch, *, collate_fn_map=None):
    """Stacks numpy arrays into one tensor (dtype kept). String and object arrays raise TypeError."""
    elem = batch[0]
    if np_str_obj_array_pattern.search(elem.dtype.str) is not None:
        raise TypeError(default_collate_err_msg_format.format(elem.dtype))
    d0 = elem.dtype
    dt = from_numpy_dtype(d0)
    for b in batch:
        if b.dtype is not d0 and b.dtype != d0:
            dt = cltorch.promote_types(dt, from_numpy_dtype(b.dtype))
    out = _stack_arrays(batch, dt.np)
    return cltorch.from_numpy(out)


def collate_numpy_scalar_fn(batch, *, collate_fn_map=None):
    """numpy scalars (``np.float32(1.0)``...) become a 1-D tensor of their dtype."""
    arr = np.array(batch)
    out = batch_array(arr.shape, arr.dtype)
    out[...] = arr
    return cltorch.from_numpy(out)


def collate_float_fn(batch, *, collate_fn_map=None):
    """Python floats become a float64 tensor (PyTorch's rule)."""
    out = batch_array((len(batch),), np.float64)
    out[:] = batch
    return cltorch.from_numpy(out)


def collate_int_fn(batch, *, collate_fn_map=None):
    """Python ints become an int64 tensor; Python bools a bool tensor."""
    dt = np.bool_ if all(type(b) is bool for b in batch) else np.int64
    out = batch_array((len(batch),), dt)
    out[:] = batch
    return cltorch.from_numpy(out)


def collate_str_fn(batch, *, collate_fn_map=None):
    """Strings and bytes stay a list."""
    return batch


default_collate_fn_map = {cltorch.Tensor: collate_tensor_fn}
default_collate_fn_map[np.ndarray] = collate_numpy_array_fn
default_collate_fn_map[np.memmap] = collate_numpy_array_fn
default_collate_fn_map[(np.bool_, np.number, np.object_)] = collate_numpy_scalar_fn
default_collate_fn_map[float] = collate_float_fn
default_collate_fn_map[int] = collate_int_fn
default_collate_fn_map[str] = collate_str_fn
default_collate_fn_map[bytes] = collate_str_fn


def collate(batch, *, collate_fn_map=None):
    """Collates a list of samples with ``collate_fn_map`` (``{type or tuple of types: fn}``), recursing into
    mappings, namedtuples and sequences. Element type lookup: exact type first, then ``isinstance`` in the
    map's order. Raises TypeError for an element type nothing handles, and RuntimeError for sequences of
    unequal lengths."""
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        if elem_type in collate_fn_map:
            return collate_fn_map[elem_type](batch, collate_fn_map=collate_fn_map)
        for collate_type in collate_fn_map:
            if isinstance(elem, collate_type):
                return collate_fn_map[collate_type](batch, collate_fn_map=collate_fn_map)

    if isinstance(elem, collections.abc.Mapping):
        try:
            if isinstance(elem, collections.abc.MutableMapping):
                clone = copy.copy(elem)
                clone.update({key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map) for key in elem})
                return clone
            return elem_type({key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map)
                              for key in elem})
        except TypeError:
            return {key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map) for key in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return elem_type(*(collate(samples, collate_fn_map=collate_fn_map) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence) and not isinstance(elem, (str, bytes)):
        it = iter(batch)
        elem_size = len(next(it))
        if not all(len(e) == elem_size for e in it):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = list(zip(*batch))
        if isinstance(elem, tuple):
            return [collate(samples, collate_fn_map=collate_fn_map) for samples in transposed]
        try:
            if isinstance(elem, collections.abc.MutableSequence):
                clone = copy.copy(elem)
                for i, samples in enumerate(transposed):
                    clone[i] = collate(samples, collate_fn_map=collate_fn_map)
                return clone
            return elem_type([collate(samples, collate_fn_map=collate_fn_map) for samples in transposed])
        except TypeError:
            return [collate(samples, collate_fn_map=collate_fn_map) for samples in transposed]
    raise TypeError(default_collate_err_msg_format.format(elem_type))


def default_collate(batch):
    """Puts a list of samples together into a batch, recursively (PyTorch's ``default_collate``):

    - tensors -> one tensor stacked along a new dim 0 (``[B, *shape]``);
    - numpy arrays -> a tensor (string/object arrays raise TypeError); numpy scalars -> a 1-D tensor;
    - float -> float64 tensor, int -> int64 tensor, bool -> bool tensor; str and bytes -> unchanged list;
    - Mapping -> same mapping type with each key collated; namedtuple -> same namedtuple of collated
      fields; tuple -> list of collated columns; other sequences -> same type where possible, else list
      (RuntimeError when the sequences have unequal lengths);
    - anything else -> TypeError "default_collate: batch must contain tensors, numpy arrays, numbers,
      dicts or lists; found <type>".
    """
    return collate(batch, collate_fn_map=default_collate_fn_map)


def default_convert(data):
    """Converts one sample without batching (``batch_size=None``): numpy arrays and scalars become tensors
    (sharing memory; string/object arrays are left alone), and mappings, namedtuples, tuples (-> list) and
    sequences are converted element by element. Everything else is returned unchanged."""
    elem_type = type(data)
    if isinstance(data, cltorch.Tensor):
        return data
    if elem_type.__module__ == "numpy" and elem_type.__name__ not in ("str_", "string_", "bytes_"):
        if isinstance(data, np.ndarray) and np_str_obj_array_pattern.search(data.dtype.str) is not None:
            return data
        return cltorch.from_numpy(np.asarray(data) if isinstance(data, np.ndarray) else np.array(data))
    if isinstance(data, collections.abc.Mapping):
        try:
            if isinstance(data, collections.abc.MutableMapping):
                clone = copy.copy(data)
                clone.update({key: default_convert(data[key]) for key in data})
                return clone
            return elem_type({key: default_convert(data[key]) for key in data})
        except TypeError:
            return {key: default_convert(data[key]) for key in data}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return elem_type(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            if isinstance(data, collections.abc.MutableSequence):
                clone = copy.copy(data)
                for i, d in enumerate(data):
                    clone[i] = default_convert(d)
                return clone
            return elem_type([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data
