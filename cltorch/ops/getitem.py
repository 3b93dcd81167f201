"""``Tensor.__getitem__`` / ``__setitem__``: PyTorch's indexing rules.

Basic indices (ints, slices with positive steps, None, Ellipsis) give a view sharing storage.
Advanced indices (integer tensors or lists, bool masks) are handed, after the basic part, to
``indexing.advanced_getitem`` / ``advanced_setitem``, which follow PyTorch's result-shape rules.
"""
from .. import _dtype as D
from .._tensor import Tensor
from ._util import method
from .views import strided_view

__all__ = []


def _is_adv(i):
    if isinstance(i, Tensor):
        return True
    if isinstance(i, (list, tuple)):
        return True
    try:
        import numpy as np
        return isinstance(i, np.ndarray)
    except ImportError:
        return False


def _normalize(idx):
    if not isinstance(idx, tuple):
        idx = (idx,)
    return idx


def _consumes(i):
    if i is None or i is Ellipsis:
        return 0
    if isinstance(i, Tensor) and i.dtype is D.bool:
        return max(i.dim(), 1) if i.dim() else 0
    if isinstance(i, bool):
        return 0
    return 1


def _split(x, idx):
    """Apply the basic part; returns (view, [(dim in view, advanced index)])."""
    idx = _normalize(idx)
    n_ell = sum(1 for i in idx if i is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(_consumes(i) for i in idx)
    if used > x.dim():
        raise IndexError(f"too many indices for tensor of dimension {x.dim()}")
    shape, stride, off = [], [], x._offset
    adv = []
    d = 0  # dim of x
    for i in idx:
        if i is Ellipsis:
            for _ in range(x.dim() - used):
                shape.append(x._shape[d])
                stride.append(x._stride[d])
                d += 1
        elif i is None or isinstance(i, bool):
            if i is False:
                raise NotImplementedError("indexing with a False scalar is not supported")
            # PyTorch applies the indices in order, so None is unsqueeze() of the partial result: its stride is
            # size * stride of the dim it lands before (x's next unconsumed dim), 1 past the last dim
            shape.append(1)
            stride.append(x._shape[d] * x._stride[d] if d < x.dim() else 1)
        elif isinstance(i, int) or (hasattr(i, "__index__") and not _is_adv(i)):
            i = int(i)
            size = x._shape[d]
            if i < -size or i >= size:
                raise IndexError(f"index {i} is out of bounds for dimension {d} with size {size}")
            off += (i % size) * x._stride[d]
            d += 1
        elif isinstance(i, slice):
            size = x._shape[d]
            start, stop, step = i.indices(size)
            if i.step is not None and i.step <= 0:
                raise ValueError("step must be greater than zero")
            n = max(0, (stop - start + step - 1) // step)
            shape.append(n)
            stride.append(x._stride[d] * step)
            off += start * x._stride[d] if n else 0
            d += 1
        elif _is_adv(i):
            from .indexing.common import _as_tensor_index
            t = _as_tensor_index(i, x.device)
            if t.dtype is D.bool or t.dtype is D.uint8:
                k = t.dim()
                for j in range(k):
                    if t._shape[j] != x._shape[d + j]:
                        raise IndexError(f"The shape of the mask {list(t._shape)} at index {j} does not match the "
                                         f"shape of the indexed tensor {list(x._shape)} at index {d + j}")
                adv.append((len(shape), t))
                for j in range(k):
                    shape.append(x._shape[d + j])
                    stride.append(x._stride[d + j])
                d += k
                if k == 0:
                    shape.append(1)
                    stride.append(0)
            else:
                if t.dtype.is_floating_point:
                    raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
                adv.append((len(shape), t))
                shape.append(x._shape[d])
                stride.append(x._stride[d])
                d += 1
        else:
            raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are "
                             f"valid indices (got {type(i).__name__})")
    while d < x.dim():
        shape.append(x._shape[d])
        stride.append(x._stride[d])
        d += 1
    return shape, stride, off, adv


def getitem(x, idx):
    if idx.__class__ is int and x._shape and not x._requires_grad:
        # x[i] on a tensor outside autograd (a dataset's row): the view directly
        size = x._shape[0]
        if -size <= idx < size:
            return x._view(x._shape[1:], x._stride[1:], x._offset + (idx % size) * x._stride[0])
    shape, stride, off, adv = _split(x, idx)
    v = strided_view(x, shape, stride, off, lambda t, i=idx: _basic_only(t, i))
    if not adv:
        return v
    from .indexing import advanced_getitem
    return advanced_getitem(v, adv)


def _basic_only(t, idx):
    shape, stride, off, adv = _split(t, idx)
    return t._view(tuple(shape), tuple(stride), off)


def setitem(x, idx, value):
    shape, stride, off, adv = _split(x, idx)
    v = strided_view(x, shape, stride, off, lambda t, i=idx: _basic_only(t, i)) if (x.requires_grad or not adv) \
        else x._view(tuple(shape), tuple(stride), off)
    if adv:
        from .indexing import advanced_setitem
        advanced_setitem(x, v, adv, value)
        return
    if not isinstance(value, Tensor):
        v.fill_(value)
    else:
        v.copy_(value)


method("__getitem__", getitem)
method("__setitem__", setitem)
