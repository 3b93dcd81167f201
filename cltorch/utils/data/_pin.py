"""``pin_memory``: copies a batch into page-locked staging memory, recursively (PyTorch's rules)."""
import collections.abc
import copy

import cltorch

__all__ = ["pin_memory"]


def pin_memory(data, device=None):
    """Tensors -> ``Tensor.pin_memory()`` (``CL_MEM_ALLOC_HOST_PTR`` staging, so a later
    ``.to(device, non_blocking=True)`` is a DMA enqueue); str/bytes unchanged; mappings, namedtuples and
    sequences rebuilt with pinned elements (tuples become lists, as in PyTorch); any other object with a
    ``pin_memory()`` method -> its result; everything else unchanged."""
    if isinstance(data, cltorch.Tensor):
        return data.pin_memory()
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        try:
            if isinstance(data, collections.abc.MutableMapping):
                clone = copy.copy(data)
                clone.update({k: pin_memory(v, device) for k, v in data.items()})
                return clone
            return type(data)({k: pin_memory(v, device) for k, v in data.items()})
        except TypeError:
            return {k: pin_memory(v, device) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(pin_memory(s, device) for s in data))
    if isinstance(data, tuple):
        return [pin_memory(s, device) for s in data]
    if isinstance(data, collections.abc.Sequence):
        try:
            if isinstance(data, collections.abc.MutableSequence):
                clone = copy.copy(data)
                for i, item in enumerate(data):
                    clone[i] = pin_memory(item, device)
                return clone
            return type(data)([pin_memory(s, device) for s in data])
        except TypeError:
            return [pin_memory(s, device) for s in data]
    if hasattr(data, "pin_memory"):
        return data.pin_memory()
    return data
