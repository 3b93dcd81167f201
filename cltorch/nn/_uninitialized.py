"""Uninitialised parameters and buffers (PyTorch's ``torch.nn.parameter.UninitializedParameter``,
``UninitializedBuffer``, ``UninitializedTensorMixin`` and ``is_lazy``), the placeholders of the Lazy* modules.

One holds an empty tensor that only carries a device, a dtype and ``requires_grad``; ``materialize(shape)``
gives it storage of ``shape`` and turns the object itself into a :class:`Parameter` (or a plain Tensor), so every
reference to it (an optimizer's, a module's) sees the materialized tensor. Asking for its ``shape`` raises
RuntimeError, as in PyTorch; ``.to()``, ``.cpu()``, dtype casts and ``Module.to`` keep it uninitialised.
"""
from .._tensor import Tensor
from .parameter import Parameter

__all__ = ["UninitializedTensorMixin", "UninitializedParameter", "UninitializedBuffer", "is_lazy"]


def _empty0(device, dtype):
    from ..ops.creation import empty
    return empty(0, device=device, dtype=dtype)


class UninitializedTensorMixin:
    """What the uninitialised parameter and buffer share: ``materialize``, the refused ``shape``, the repr."""

    cls_to_become = Tensor

    def materialize(self, shape, device=None, dtype=None):
        """Give the tensor fresh (uninitialised) storage of ``shape`` on ``device``/``dtype`` (default: its own)
        and turn it into ``cls_to_become`` in place."""
        from ..ops.creation import empty
        device = self.device if device is None else device
        dtype = self.dtype if dtype is None else dtype
        self.data = empty(tuple(shape), device=device, dtype=dtype)
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise RuntimeError("Can't access the shape of an uninitialized parameter or buffer. This error usually "
                           "happens in `load_state_dict` when trying to load an uninitialized parameter into an "
                           "initialized one. Call `forward` to initialize the parameters before accessing their "
                           "attributes.")

    def share_memory_(self):
        raise RuntimeError("Can't share memory on an uninitialized parameter or buffer. Call `forward` to initialize "
                           "the parameters before calling `module.share_memory()`.")

    def __repr__(self):
        return f"<{type(self).__name__}>"

    __str__ = __repr__

    def _rewrap(self, t):
        """An uninitialised tensor of this class with ``t``'s device and dtype."""
        return type(self)(requires_grad=self.requires_grad, device=t.device, dtype=t.dtype)

    def to(self, *args, **kwargs):
        return self._rewrap(Tensor.to(self, *args, **kwargs))

    def cpu(self, *args, **kwargs):
        return self._rewrap(Tensor.cpu(self, *args, **kwargs))

    def __deepcopy__(self, memo):
        if id(self) not in memo:
            memo[id(self)] = type(self)(requires_grad=self.requires_grad, device=self.device, dtype=self.dtype)
        return memo[id(self)]


def is_lazy(param):
    """True when ``param`` is an :class:`UninitializedParameter` or :class:`UninitializedBuffer`."""
    return isinstance(param, UninitializedTensorMixin)


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A Parameter whose shape is not known yet: ``UninitializedParameter(requires_grad=True, device=None,
    dtype=None)``. ``materialize(shape)`` makes it a :class:`Parameter`."""

    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        return Parameter.__new__(cls, _empty0(device, dtype), requires_grad)

    def __init__(self, requires_grad=True, device=None, dtype=None):
        pass


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer whose shape is not known yet: ``UninitializedBuffer(requires_grad=False, device=None, dtype=None,
    persistent=True)``. ``materialize(shape)`` makes it a plain Tensor."""

    cls_to_become = Tensor

    def __new__(cls, requires_grad=False, device=None, dtype=None, persistent=True):
        d = _empty0(device, dtype)
        b = cls._make(d._storage, d._shape, d._stride, d._offset)
        b._requires_grad = bool(requires_grad)
        b.persistent = persistent
        return b

    def __init__(self, requires_grad=False, device=None, dtype=None, persistent=True):
        pass
