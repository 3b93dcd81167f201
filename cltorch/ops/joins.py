"""Joins and rearrangements: cat/concat/concatenate, stack, hstack, vstack, dstack, column_stack, flip,
fliplr, flipud, roll, repeat, repeat_interleave, tile, tril, triu, one_hot, meshgrid, cartesian_prod.

``cat`` is registered with its derivative (split of the gradient); ``flip`` too (its derivative is a
flip). The others are compositions of views, ``cat``, ``expand`` + copy, ``index_select`` and
``masked_fill``, so their gradients come from those.

cpu tensors: ``cat`` and ``stack`` (the DataLoader's collate) and ``flip`` run in numpy with no OpenCL call,
so they work inside DataLoader worker processes (DESIGN.md, decision 3). On a device, ``cat`` copies each
input into its slice of the output with the elementwise kernel (casting to the promoted dtype on the way),
and ``flip`` is one elementwise copy through a negative-stride view.
"""
import numpy as np

from .. import _dtype as D
from .._dispatch import call, register
from .._storage import Storage
from .._tensor import Tensor
from ._util import method, size_args

__all__ = ["cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack", "column_stack", "row_stack",
           "flip", "fliplr", "flipud", "roll", "repeat_interleave", "tile", "tril", "triu", "meshgrid",
           "cartesian_prod", "one_hot"]


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _wrap(dim, ndim):
    lo, hi = (-1, 0) if ndim == 0 else (-ndim, ndim - 1)
    dim = int(dim)
    if dim < lo or dim > hi:
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but got {dim})")
    return dim % ndim if ndim else 0


# ================================================================================================ cat
def _check_cat(tensors, dim, fname="cat"):
    if isinstance(tensors, Tensor):
        raise TypeError(f"{fname}(): argument 'tensors' must be tuple of Tensors, not Tensor")
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError(f"torch.{fname}(): expected a non-empty list of Tensors")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {i} in argument 0, but got {type(t).__name__}")
    dev = tensors[0].device
    for t in tensors[1:]:
        if t.device != dev:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"{dev} and {t.device}!")
    for i, t in enumerate(tensors):
        if t.dim() == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    # PyTorch's legacy rule: 1-D empty tensors are skipped
    ref = next((t for t in tensors if not (t.dim() == 1 and t._shape[0] == 0)), tensors[0])
    nd = ref.dim()
    dim = _wrap(dim, nd)
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = D.promote_types(dtype, t.dtype)
    for i, t in enumerate(tensors):
        if t.dim() == 1 and t._shape[0] == 0 and t is not ref:
            continue
        if t.dim() != nd:
            raise RuntimeError(f"Tensors must have same number of dimensions: got {nd} and {t.dim()}")
        for d in range(nd):
            if d != dim and t._shape[d] != ref._shape[d]:
                raise RuntimeError(f"Sizes of tensors must match except in dimension {dim}. Expected size "
                                   f"{ref._shape[d]} but got size {t._shape[d]} for tensor number {i} in the list "
                                   f"(shapes {list(ref._shape)} and {list(t._shape)}).")
    return tensors, dim, dtype, ref


def _cat_fwd(ctx, tensors, dim, dtype):
    ref = next((t for t in tensors if not (t.dim() == 1 and t._shape[0] == 0)), tensors[0])
    parts = [t for t in tensors if not (t.dim() == 1 and t._shape[0] == 0 and t is not ref)]
    shape = list(ref._shape)
    shape[dim] = sum(t._shape[dim] for t in parts)
    dev = ref.device
    if ctx is not None:
        ctx.dim = dim
        ctx.sizes = [t._shape[dim] if any(t is q for q in parts) else None for t in tensors]
        ctx.dtypes = [t.dtype for t in tensors]
    if dev.type == "cpu":
        if all(t._storage.host is not None for t in parts):
            arrs = [t._host_view() for t in parts]
            res = np.empty(shape, dtype=dtype.np)
            np.concatenate(arrs, axis=dim, out=res, casting="unsafe")
            return Tensor._make(Storage.from_host(res.reshape(-1), dev), tuple(shape))
    out = Tensor._empty(tuple(shape), dtype, dev)
    from .views import _copy_into
    off = 0
    for t in parts:
        n = t._shape[dim]
        if n:
            sh = list(shape)
            sh[dim] = n
            v = out._view(tuple(sh), out._stride, out._offset + off * out._stride[dim])
            _copy_into(v, t)
        off += n
    return out


def _cat_bwd(ctx, g):
    grads, off = [], 0
    for n, dt in zip(ctx.sizes, ctx.dtypes):
        if n is None:
            grads.append(None)
            continue
        gi = g.narrow(ctx.dim, off, n)
        if gi.dtype is not dt and (dt.is_floating_point or dt.is_complex):
            gi = gi.to(dt)
        grads.append(gi if dt.is_floating_point or dt.is_complex else None)
        off += n
    return grads, None, None


_cat_op = register("cat", _cat_fwd, _cat_bwd)


def cat(tensors, dim=0, *, out=None):
    """Concatenates tensors along ``dim``. dtypes promote; all tensors must be on one device and agree in every
    other dim (errors name both shapes); 1-D empty tensors are skipped, as in PyTorch. cpu tensors are joined
    by numpy (no OpenCL)."""
    tensors, dim, dtype, _ = _check_cat(tensors, dim)
    r = call(_cat_op, tensors, dim, dtype)
    return r if out is None else out.copy_(r)


concat = concatenate = cat


def stack(tensors, dim=0, *, out=None):
    """Joins equal-shaped tensors along a new dim ``dim``."""
    if isinstance(tensors, Tensor):
        raise TypeError("stack(): argument 'tensors' must be tuple of Tensors, not Tensor")
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    s0 = tensors[0]._shape
    for i, t in enumerate(tensors[1:], 1):
        if t._shape != s0:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(s0)} at entry 0 and "
                               f"{list(t._shape)} at entry {i}")
    nd = len(s0) + 1
    d = _wrap(dim, nd)
    r = cat([t.unsqueeze(d) for t in tensors], d)
    return r if out is None else out.copy_(r)


def _atleast(t, n):
    """atleast_1d/2d/3d: (N,) -> (1, N) -> (1, N, 1); (M, N) -> (M, N, 1)."""
    if t.dim() >= n:
        return t
    if t.dim() == 0:
        return t.reshape((1,) * n)
    if n == 2:
        return t.unsqueeze(0)
    return t.reshape(1, -1, 1) if t.dim() == 1 else t.unsqueeze(-1)


def hstack(tensors):
    """Concatenates along dim 1 (dim 0 for 1-D tensors)."""
    ts = [_atleast(t, 1) for t in tensors]
    return cat(ts, 0 if ts and ts[0].dim() == 1 else 1)


def vstack(tensors):
    """Concatenates along dim 0 after making every tensor at least 2-D."""
    return cat([_atleast(t, 2) for t in tensors], 0)


row_stack = vstack


def dstack(tensors):
    """Concatenates along dim 2 after making every tensor at least 3-D."""
    return cat([_atleast(t, 3) for t in tensors], 2)


def column_stack(tensors):
    """Stacks 0-D and 1-D tensors as columns, then concatenates along dim 1."""
    return cat([t.reshape(-1, 1) if t.dim() <= 1 else t for t in tensors], 1)


# ================================================================================================ flip / roll
def _flip_fwd(ctx, x, dims):
    if ctx is not None:
        ctx.dims = dims
    if x._storage.host is not None:
        a = np.flip(x._host_view(), axis=dims) if dims else x._host_view()
        return Tensor._make(Storage.from_host(np.array(a, copy=True).reshape(-1), x.device), x._shape)
    st = list(x._stride)
    off = x._offset
    for d in dims:
        if x._shape[d]:
            off += (x._shape[d] - 1) * st[d]
        st[d] = -st[d]
    rev = Tensor._make(x._storage, x._shape, tuple(st), off)
    from .views import _materialize
    return _materialize(rev)


_flip_op = register("flip", _flip_fwd, lambda ctx, g: (call(_flip_op, g, ctx.dims), None))


def flip(input, dims):  # noqa: A002
    """A copy with the order of entries reversed along each of ``dims``."""
    if isinstance(dims, int):
        dims = (dims,)
    dims = tuple(_wrap(d, input.dim()) for d in dims)
    if len(set(dims)) != len(dims):
        raise RuntimeError(f"dims has duplicates, original flip dims size={len(dims)}, but unique flip dims "
                           f"size={len(set(dims))}")
    return call(_flip_op, input, tuple(sorted(dims)))


def fliplr(input):  # noqa: A002
    """Flips dim 1 (left/right); input must be at least 2-D."""
    if input.dim() < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, (1,))


def flipud(input):  # noqa: A002
    """Flips dim 0 (up/down); input must be at least 1-D."""
    if input.dim() < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, (0,))


method("flip", lambda self, *dims: flip(self, dims[0] if len(dims) == 1 and isinstance(dims[0], (list, tuple))
                                        else dims))
method("fliplr", fliplr)
method("flipud", flipud)


def roll(input, shifts, dims=None):  # noqa: A002
    """Rotates entries along ``dims`` by ``shifts`` (ints or tuples of equal length); with dims=None the
    flattened tensor is rolled and the shape restored. Entries shifted past the end come back at the start."""
    if dims is None:
        if isinstance(shifts, (tuple, list)):
            if len(shifts) != 1:
                raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:0")
            shifts = shifts[0]
        return roll(input.reshape(-1), shifts, 0).reshape(input._shape)
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    x = input
    for s, d in zip(shifts, dims):
        d = _wrap(d, x.dim())
        n = x._shape[d]
        if n == 0:
            continue
        s %= n
        if s:
            x = cat([x.narrow(d, n - s, s), x.narrow(d, 0, n - s)], d)
    return x if x is not input else input.clone()


method("roll", lambda self, shifts, dims=None: roll(self, shifts, dims))


# ================================================================================================ repeat / tile
def repeat(self, *sizes):
    """``Tensor.repeat``: tiles the tensor ``sizes[i]`` times along each dim (extra leading sizes add dims)."""
    sizes = size_args(sizes)
    if len(sizes) < self.dim():
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of "
                           "tensor")
    if any(s < 0 for s in sizes):
        raise RuntimeError(f"Trying to create tensor with negative dimension: {list(sizes)}")
    x = self.reshape((1,) * (len(sizes) - self.dim()) + tuple(self._shape))
    # view as (1, s0, 1, s1, ...) then expand to (r0, s0, r1, s1, ...) and copy
    for i in range(len(sizes)):
        x = x.unsqueeze(2 * i)
    exp = []
    for r, s in zip(sizes, x._shape[1::2]):
        exp += [r, s]
    x = x.expand(*exp)
    return x.reshape(tuple(r * s for r, s in zip(sizes, exp[1::2])))


method("repeat", repeat)


def tile(input, dims):  # noqa: A002
    """Like ``Tensor.repeat``, but a shorter ``dims`` is padded with leading 1s."""
    dims = size_args((dims,)) if not isinstance(dims, int) else (dims,)
    if len(dims) < input.dim():
        dims = (1,) * (input.dim() - len(dims)) + tuple(dims)
    return repeat(input, *dims)


method("tile", lambda self, *dims: tile(self, dims[0] if len(dims) == 1 and not isinstance(dims[0], int)
                                        else dims))


def _repeat_index(reps, n):
    r = np.asarray(reps, dtype=np.int64).reshape(-1)
    if r.size == 1 and n != 1:
        r = np.full(n, int(r[0]), dtype=np.int64)
    if r.size != n:
        raise RuntimeError(f"repeats must have the same size as input along dim, but got repeats.size(0) = "
                           f"{r.size} and input.size({n})")
    if (r < 0).any():
        raise RuntimeError("repeats can not be negative")
    return np.repeat(np.arange(n, dtype=np.int64), r)


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):  # noqa: A002
    """Repeats each entry along ``dim`` (the flattened input when None) ``repeats`` times (an int or a 1-D
    tensor with one count per entry). ``repeat_interleave(repeats)`` alone gives the indices
    ``[0]*repeats[0] + [1]*repeats[1] + ...``. Tensor repeats are read back to the host once."""
    from .creation import tensor
    if repeats is None:
        reps = input
        if reps.dim() > 1:
            raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
        idx = _repeat_index(reps.tolist(), reps.numel())
        return tensor(idx, dtype=D.int64, device=reps.device)
    x = input
    if dim is None:
        x = x.reshape(-1)
        dim = 0
    dim = _wrap(dim, x.dim())
    if x.dim() == 0:
        x = x.reshape(1)
    if isinstance(repeats, Tensor):
        if repeats.dim() > 1:
            raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
        if repeats.numel() == 1:
            repeats = int(repeats.item())
        else:
            idx = _repeat_index(repeats.tolist(), x._shape[dim])
            return x.index_select(dim, tensor(idx, dtype=D.int64, device=x.device))
    repeats = int(repeats)
    if repeats < 0:
        raise RuntimeError("repeats can not be negative")
    shape = list(x._shape)
    y = x.unsqueeze(dim + 1)
    exp = list(y._shape)
    exp[dim + 1] = repeats
    shape[dim] *= repeats
    return y.expand(*exp).reshape(tuple(shape))


method("repeat_interleave", lambda self, repeats=None, dim=None, *, output_size=None:
       repeat_interleave(self, repeats, dim, output_size=output_size))


# ================================================================================================ tril / triu
_tri_masks = {}


def _tri_mask(m, n, k, upper, device):
    key = (m, n, k, upper, str(device))
    t = _tri_masks.get(key)
    if t is None:
        i = np.arange(m).reshape(-1, 1)
        j = np.arange(n).reshape(1, -1)
        keep = (j - i >= k) if upper else (j - i <= k)
        from .creation import tensor
        t = tensor(~keep, dtype=D.bool, device=device)
        if len(_tri_masks) > 64:
            _tri_masks.clear()
        _tri_masks[key] = t
    return t


def _tri(input, diagonal, upper):
    name = "triu" if upper else "tril"
    if input.dim() < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
    m, n = input._shape[-2], input._shape[-1]
    return input.masked_fill(_tri_mask(m, n, int(diagonal), upper, input.device), 0)


def tril(input, diagonal=0):  # noqa: A002
    """The lower triangle (j - i <= diagonal) of the last two dims; the rest is zero."""
    return _tri(input, diagonal, False)


def triu(input, diagonal=0):  # noqa: A002
    """The upper triangle (j - i >= diagonal) of the last two dims; the rest is zero."""
    return _tri(input, diagonal, True)


def _tri_(upper):
    def f(self, diagonal=0):
        from .pointwise import masked_fill_
        if self.dim() < 2:
            raise RuntimeError(f"{'triu' if upper else 'tril'}_: input tensor must have at least 2 dimensions")
        m, n = self._shape[-2], self._shape[-1]
        return masked_fill_(self, _tri_mask(m, n, int(diagonal), upper, self.device), 0)
    return f


method("tril", tril)
method("triu", triu)
method("tril_", _tri_(False))
method("triu_", _tri_(True))


# ================================================================================================ one_hot
def one_hot(tensor, num_classes=-1):
    """int64 tensor of shape ``tensor.shape + (num_classes,)`` with a 1 at each class index. num_classes=-1
    uses max + 1 (one read from the device). Negative or too large classes raise RuntimeError naming them."""
    if tensor.dtype is not D.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    num_classes = int(num_classes)
    if num_classes == -1:
        if tensor.numel() == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        lo, hi = stack([tensor.min(), tensor.max()]).tolist()
        if lo < 0:
            raise RuntimeError(f"Class values must be non-negative (got {lo}).")
        num_classes = hi + 1
    elif num_classes < -1:
        raise RuntimeError("num_classes should be positive")
    from .creation import zeros
    out = zeros(tuple(tensor._shape) + (num_classes,), dtype=D.int64, device=tensor.device)
    if tensor.numel() == 0:
        return out
    rt = out._runtime()
    rt.synchronize()     # earlier ops' deferred errors surface here, not as this one's
    try:
        out.scatter_(-1, tensor.unsqueeze(-1), 1)
        rt.synchronize()  # the bounds flag of the scatter: one_hot reports at the call, in its own words
    except IndexError as e:
        bad = str(e).split()[1]
        if int(bad) < 0:
            raise RuntimeError(f"Class values must be non-negative (got {bad}).") from None
        raise RuntimeError(f"Class values must be smaller than num_classes (got {bad} with num_classes="
                           f"{num_classes}).") from None
    return out


# ================================================================================================ meshgrid
def meshgrid(*tensors, indexing=None):
    """Coordinate grids from 0-D/1-D tensors: with ``indexing='ij'`` (the default) output i varies along dim i;
    ``'xy'`` swaps the first two dims. The outputs are expanded views."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: {indexing}")
    if not tensors:
        raise RuntimeError("torch.meshgrid expects a non-empty TensorList")
    for t in tensors:
        if t.dim() > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t.dim()}D")
    ts = [t.reshape(-1) for t in tensors]
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = [t._shape[0] for t in ts]
    outs = []
    for i, t in enumerate(ts):
        v = [1] * len(ts)
        v[i] = -1
        outs.append(t.reshape(v).expand(*shape))
    if swap:
        outs[0], outs[1] = outs[1], outs[0]
    return tuple(outs)


def cartesian_prod(*tensors):
    """All combinations of the entries of 1-D tensors, as rows (like itertools.product)."""
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return stack([g.reshape(-1) for g in grids], 1)
