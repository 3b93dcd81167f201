"""PyTorch's ``torch.types``: type aliases for annotations (``Number``, ``Device``, ``_size``...)."""
from typing import Sequence, Union

from ._tensor import Tensor, Size
from ._device import device as _device_cls
from ._dtype import dtype as _dtype_cls

__all__ = ["Number", "Device", "Storage"]

Number = Union[int, float, bool]
_int = int
_float = float
_bool = bool
_complex = complex
_dtype = _dtype_cls
_device = _device_cls
_size = Union[Size, Sequence[int]]
_TensorOrTensors = Union[Tensor, Sequence[Tensor]]
Device = Union[_device_cls, str, int, None]
Storage = object   # cltorch exposes no public storage class
