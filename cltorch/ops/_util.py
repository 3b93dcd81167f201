"""Small helpers shared by the op modules: attaching Tensor methods, argument parsing, factory kwargs."""
from .. import _dtype as D
from .._device import canonical
from .._tensor import Tensor

__all__ = ["method", "size_args", "resolve_dtype", "resolve_device", "is_tensor"]


def method(name, fn=None):
    """Attach ``fn`` as ``Tensor.<name>`` (decorator form when fn is None)."""
    def deco(f):
        setattr(Tensor, name, f)
        return f
    return deco(fn) if fn is not None else deco


def size_args(args):
    """``f(2, 3)``, ``f((2, 3))``, ``f([2, 3])`` and ``f(Size)`` all give (2, 3)."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = args[0]
    out = []
    for a in args:
        if isinstance(a, Tensor):
            a = a.item()
        if not isinstance(a, int) or isinstance(a, bool):
            try:
                a = a.__index__()
            except AttributeError:
                raise TypeError(f"expected a sequence of integers for a size, got {type(a).__name__}") from None
        out.append(int(a))
    return tuple(out)


def resolve_dtype(dtype, default=None):
    if dtype is None:
        return default if default is not None else D.get_default_dtype()
    return D.to_dtype(dtype)


def resolve_device(device):
    return canonical(device)


def is_tensor(x):
    return isinstance(x, Tensor)
