"""``Parameter`` and ``Buffer``: the tensors a Module registers (PyTorch's ``torch.nn.parameter``).

A Parameter is a :class:`cltorch.Tensor` subclass that shares the storage of the tensor it wraps, so
``Parameter(t)`` costs no copy and writes through ``t`` show in the parameter. Assigning one to a Module
attribute registers it in ``module._parameters``. Ops on a Parameter return plain Tensors.
"""
from .._tensor import Tensor

__all__ = ["Parameter", "Buffer", "UninitializedTensorMixin", "UninitializedParameter", "UninitializedBuffer",
           "is_lazy"]


def _empty0():
    from ..ops.creation import empty
    return empty(0)


class Parameter(Tensor):
    """A Tensor that a Module treats as a learnable parameter.

    Args:
        data: the tensor to wrap (storage is shared, not copied); ``None`` gives an empty float tensor.
        requires_grad: default True. Raises RuntimeError for a non-floating tensor with requires_grad=True,
            as PyTorch does.
    """

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = _empty0()
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter(data): expected a cltorch.Tensor, got {type(data).__name__}")
        p = cls._make(data._storage, data._shape, data._stride, data._offset)
        p.requires_grad = bool(requires_grad)
        return p

    def __init__(self, data=None, requires_grad=True):  # Tensor.__init__ refuses direct construction
        pass

    def __repr__(self):
        return "Parameter containing:\n" + Tensor.__repr__(self)

    __str__ = __repr__

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        from .._dispatch import set_grad_enabled_raw
        prev = set_grad_enabled_raw(False)
        try:
            data = self.clone()
        finally:
            set_grad_enabled_raw(prev)
        res = type(self)(data, self.requires_grad)
        if self.grad is not None:
            res.grad = self.grad.__deepcopy__(memo)
        memo[id(self)] = res
        return res


class Buffer(Tensor):
    """Marks a tensor to be registered as a buffer when assigned to a Module attribute
    (``self.b = nn.Buffer(t, persistent=False)``), as ``torch.nn.Buffer`` does. Shares ``data``'s storage."""

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            data = _empty0()
        if not isinstance(data, Tensor):
            raise TypeError(f"Buffer(data): expected a cltorch.Tensor, got {type(data).__name__}")
        b = cls._make(data._storage, data._shape, data._stride, data._offset)
        b._requires_grad = data.requires_grad and data.grad_fn is None
        b.persistent = persistent
        return b

    def __init__(self, data=None, *, persistent=True):
        pass


# The placeholders of the Lazy* modules live in ``_uninitialized.py`` (they subclass Parameter); PyTorch exports them
# from this path. Imported last: ``_uninitialized`` imports ``Parameter`` from here.
from ._uninitialized import (UninitializedTensorMixin, UninitializedParameter, UninitializedBuffer,  # noqa: E402,F401
                             is_lazy)
