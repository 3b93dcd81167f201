"""Comparisons of whole tensors: ``isclose``, ``allclose``, ``equal``, ``isin``.

All are compositions of registered pointwise and reduction ops. ``allclose`` and ``equal`` return a Python bool
and so read one value back from the device (a sync), as PyTorch's do.
"""
from .. import _dtype as D
from .._tensor import Tensor, Size
from ._util import method

__all__ = ["isclose", "allclose", "equal", "isin", "broadcast_shapes"]


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):  # noqa: A002
    """Elementwise ``|input - other| <= atol + rtol * |other|`` (or equal, which covers equal infinities); NaNs are
    close to each other only with ``equal_nan``. Same shapes as broadcasting gives; bool result.

    Raises RuntimeError when the dtypes differ or rtol/atol is negative (PyTorch's checks)."""
    if not isinstance(other, Tensor):
        raise TypeError(f"isclose(): argument 'other' must be Tensor, not {type(other).__name__}")
    if input.dtype is not other.dtype:
        raise RuntimeError(f"{input.dtype} did not match {other.dtype}")
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol}")
    close = input == other
    if input.dtype is D.bool:
        return close
    a, b = input, other
    if a.dtype.is_complex:
        return _isclose_complex(a, b, close, rtol, atol, equal_nan)
    if not a.dtype.is_floating_point:
        a, b = a.to(D.get_default_dtype()), b.to(D.get_default_dtype())
    if equal_nan and input.dtype.is_floating_point:
        close = close | (a.isnan() & b.isnan())
    if rtol == 0 and atol == 0:
        return close
    diff = (a - b).abs()
    return close | (diff.isfinite() & (diff <= atol + rtol * b.abs()))


def _isclose_complex(a, b, close, rtol, atol, equal_nan):
    """PyTorch's rule for complex: equal, or ``|a - b| <= atol + rtol * |b|`` with the complex modulus and a finite
    difference; with ``equal_nan`` two values are close when both have a NaN in some part."""
    from .complex import real_view
    if equal_nan:
        ra, rb = real_view(a), real_view(b)
        close = close | (ra.isnan().any(-1) & rb.isnan().any(-1))
    if rtol == 0 and atol == 0:
        return close
    diff = (a - b).abs()
    return close | (diff.isfinite() & (diff <= atol + rtol * b.abs()))


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):  # noqa: A002
    """True when ``isclose`` holds everywhere (a Python bool; reads the answer back from the device)."""
    return bool(isclose(input, other, rtol, atol, equal_nan).all().item())


def equal(input, other):  # noqa: A002
    """True when both tensors have the same shape and elements (a Python bool; NaN is not equal to NaN)."""
    if not isinstance(input, Tensor) or not isinstance(other, Tensor):
        raise TypeError("equal(): arguments must be Tensors")
    if input._shape != other._shape:
        return False
    if not input.numel():
        return True
    return bool((input == other).all().item())


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Bool tensor of ``elements``' shape: whether each element occurs in ``test_elements`` (either may be a
    scalar). Compares every pair (O(n*m) memory on the device); ``assume_unique`` changes nothing."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin(): expected at least one tensor argument")
    if not isinstance(elements, Tensor):
        from .creation import tensor
        elements = tensor(elements, device=test_elements.device)
    if not isinstance(test_elements, Tensor):
        res = elements == test_elements
    elif not test_elements.numel():
        from .creation import zeros
        res = zeros(elements._shape, dtype=D.bool, device=elements.device)
    else:
        res = (elements.reshape(-1, 1) == test_elements.reshape(1, -1)).any(-1).reshape(elements._shape)
    return ~res if invert else res


def broadcast_shapes(*shapes):
    """The shape that tensors of ``shapes`` broadcast to (a Size); an int is a 1-d shape. RuntimeError when
    they do not broadcast."""
    from .elementwise import broadcast_shapes as _bs
    norm = []
    for s in shapes:
        if isinstance(s, int):
            s = (s,)
        for v in s:
            if v < 0:
                raise RuntimeError(f"Trying to create tensor with negative dimension {v}: {list(s)}")
        norm.append(tuple(s))
    return Size(_bs(*norm))


method("isclose", isclose)
method("allclose", allclose)
method("equal", equal)
