"""PyTorch's ``torch.autograd.variable``: ``Variable``, the pre-0.4 wrapper. As in PyTorch today,
``Variable(t, requires_grad=...)`` returns a tensor, and every tensor is an instance of ``Variable``."""
from .._tensor import Tensor

__all__ = ["Variable"]


class _VariableMeta(type):
    def __instancecheck__(cls, other):
        return isinstance(other, Tensor)


class Variable(metaclass=_VariableMeta):
    """``Variable(tensor, requires_grad=False)``: the tensor itself (a fresh leaf sharing its storage when
    ``requires_grad`` is asked of a non-leaf). Raises TypeError for a non-tensor."""

    def __new__(cls, data=None, requires_grad=False, volatile=False):
        if data is None:
            from ..ops.creation import empty
            return empty(0, requires_grad=requires_grad)
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        if requires_grad:
            return data.detach().requires_grad_(True) if not data.is_leaf else data.requires_grad_(True)
        return data
