"""Views (no copy), copies and conversions, each registered with its derivative.

A view shares its input's storage with new (shape, stride, offset). Views whose derivative is a
reshape, permute or broadcast-sum say so directly; the others (slicing, select, narrow, diagonal,
unfold, as_strided) carry the function that re-applies the view, and their backward writes the gradient
into zeros through that same view (``_view_scatter``, itself differentiable).

Pure data movement on cpu tensors (copy, contiguous, casts) takes a host (numpy) path that needs no
OpenCL, so DataLoader workers can use it (DESIGN.md, decision 3).
"""
import numpy as np

from .. import _dtype as D
from .._device import canonical
from .._dispatch import call, register, is_grad_enabled
from .._memory_format import format_strides, suggest_format, contiguous_format, preserve_format, memory_format
from .._storage import Storage, aligned_empty, check_caps
from .._tensor import Tensor, contiguous_strides
from ._util import method, size_args
from .elementwise import pointwise, broadcast_shapes

__all__ = ["view_as_shape", "reshape", "transpose", "permute", "squeeze", "unsqueeze", "flatten", "unflatten",
           "narrow", "select", "movedim", "moveaxis", "split", "chunk", "unbind", "diagonal", "as_strided", "t",
           "swapaxes", "swapdims", "clone", "broadcast_to", "broadcast_tensors", "atleast_1d", "atleast_2d",
           "sum_to_size", "adjoint"]


def _prod(s):
    n = 1
    for v in s:
        n *= v
    return n


def _infer(shape, numel):
    shape = list(shape)
    neg = [i for i, s in enumerate(shape) if s == -1]
    if len(neg) > 1:
        raise RuntimeError("only one dimension can be inferred")
    if neg:
        rest = _prod(s for s in shape if s != -1)
        if rest == 0 or numel % rest:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape[neg[0]] = numel // rest
    if _prod(shape) != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return tuple(shape)


def _view_strides(oldshape, oldstride, newshape):
    """PyTorch's computeStride: strides for viewing without a copy, or None when impossible."""
    if not oldshape:
        return tuple(1 for _ in newshape)
    numel = _prod(oldshape)
    if numel == 0:
        return contiguous_strides(newshape)
    newstride = [0] * len(newshape)
    view_d = len(newshape) - 1
    chunk_base_stride = oldstride[-1]
    tensor_numel = 1
    view_numel = 1
    for tensor_d in range(len(oldshape) - 1, -1, -1):
        tensor_numel *= oldshape[tensor_d]
        if tensor_d == 0 or (oldshape[tensor_d - 1] != 1 and
                             oldstride[tensor_d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or newshape[view_d] == 1):
                newstride[view_d] = view_numel * chunk_base_stride
                view_numel *= newshape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = oldstride[tensor_d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(newstride)


# ------------------------------------------------------------------------------------------ generic view ops
def _reshape_view_fwd(ctx, x, shape):
    st = _view_strides(x._shape, x._stride, shape)
    if st is None:
        raise RuntimeError(f"view size is not compatible with input tensor's size and stride (size {list(x._shape)},"
                           f" stride {list(x._stride)}: at least one dimension spans across two contiguous subspaces)."
                           " Use .reshape(...) instead.")
    if ctx is not None:
        ctx.shape = x._shape
    return x._view(shape, st, x._offset)


_view_op = register("view", _reshape_view_fwd, lambda ctx, g: (g.reshape(ctx.shape), None))


def view_as_shape(x, *shape):
    """``x.view(*shape)``: same storage, new shape (one -1 inferred). Raises RuntimeError when the strides
    do not allow it, as PyTorch does."""
    if len(shape) == 1 and isinstance(shape[0], D.dtype):
        raise NotImplementedError("view(dtype) is not supported")
    shape = _infer(size_args(shape), x.numel())
    return call(_view_op, x, shape)


def reshape(x, *shape):
    """A view when the strides allow it, else a contiguous copy."""
    shape = _infer(size_args(shape), x.numel())
    if _view_strides(x._shape, x._stride, shape) is not None:
        return call(_view_op, x, shape)
    return call(_view_op, x.contiguous(), shape)


def _permute_fwd(ctx, x, dims):
    if ctx is not None:
        inv = [0] * len(dims)
        for i, d in enumerate(dims):
            inv[d] = i
        ctx.inv = tuple(inv)
    return x._view(tuple(x._shape[d] for d in dims), tuple(x._stride[d] for d in dims), x._offset)


_permute_op = register("permute", _permute_fwd, lambda ctx, g: (g.permute(ctx.inv), None))


def permute(x, *dims):
    """Reorders dims (a view). Raises on a repeated or out-of-range dim."""
    dims = size_args(dims)
    n = x.dim()
    if len(dims) != n:
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does not match the "
                           f"length of the desired ordering of dimensions i.e. input.dim() = {n} is not equal to "
                           f"len(dims) = {len(dims)}")
    dims = tuple(x._wrap(d) for d in dims)
    if len(set(dims)) != n:
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return call(_permute_op, x, dims)


def transpose(x, dim0, dim1):
    """Swaps two dims (a view)."""
    n = x.dim()
    if n == 0:
        return x.view(())
    d0, d1 = x._wrap(dim0), x._wrap(dim1)
    dims = list(range(n))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return call(_permute_op, x, tuple(dims))


swapaxes = swapdims = transpose


def t(x):
    """Transpose of a tensor of at most 2 dims."""
    if x.dim() > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.dim()}D")
    return transpose(x, 0, 1) if x.dim() == 2 else x.view(x._shape)


def adjoint(x):
    """The conjugate transpose of the last two dims: a view for real dtypes; for complex ones the (materialized)
    conjugate of that view, as cltorch's ``conj`` has no lazy bit."""
    return _conj_if_complex(transpose(x, -2, -1))


def _conj_if_complex(y):
    if not y.dtype.is_complex:
        return y
    from .complex import conj     # complex.py imports this module
    return conj(y)


def sum_to_size(g, shape):
    """Sum ``g`` down to ``shape`` (the inverse of broadcasting)."""
    shape = tuple(shape)
    if g._shape == shape:
        return g
    lead = g.dim() - len(shape)
    dims = list(range(lead))
    for i, s in enumerate(shape):
        if s == 1 and g._shape[lead + i] != 1:
            dims.append(lead + i)
    r = g.sum(dim=tuple(dims), keepdim=True) if dims else g
    return r.reshape(shape) if r._shape != shape else r


def _expand_fwd(ctx, x, shape):
    nd = len(shape)
    if nd < x.dim():
        raise RuntimeError(f"expand(torch.FloatTensor{{{list(x._shape)}}}, size={list(shape)}): the number of sizes "
                           f"provided ({nd}) must be greater or equal to the number of dimensions in the tensor "
                           f"({x.dim()})")
    lead = nd - x.dim()
    out_shape, out_stride = [], []
    for i, s in enumerate(shape):
        if i < lead:
            if s < 0:
                raise RuntimeError(f"The expanded size of the tensor (-1) isn't allowed in a leading, non-existing "
                                   f"dimension {i}")
            out_shape.append(s)
            out_stride.append(0)
        else:
            xs, xst = x._shape[i - lead], x._stride[i - lead]
            if s == -1 or s == xs:
                out_shape.append(xs)
                out_stride.append(xst)
            elif xs == 1:
                out_shape.append(s)
                out_stride.append(0)
            else:
                raise RuntimeError(f"The expanded size of the tensor ({s}) must match the existing size ({xs}) at "
                                   f"non-singleton dimension {i}.  Target sizes: {list(shape)}.  Tensor sizes: "
                                   f"{list(x._shape)}")
    if ctx is not None:
        ctx.shape = x._shape
    return x._view(tuple(out_shape), tuple(out_stride), x._offset)


_expand_op = register("expand", _expand_fwd, lambda ctx, g: (sum_to_size(g, ctx.shape), None))


def expand(x, *shape):
    """Broadcast to ``shape`` (-1 keeps a dim) as a view with stride 0 on the new dims."""
    shape = size_args(shape)
    if shape == x._shape:
        return x
    return call(_expand_op, x, shape)


def broadcast_to(x, shape):
    return expand(x, *shape)


def broadcast_tensors(*tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tensors[0]
    shape = broadcast_shapes(*[t._shape for t in tensors])
    return tuple(expand(t, *shape) for t in tensors)


def _squeeze_fwd(ctx, x, shape, stride):
    if ctx is not None:
        ctx.shape = x._shape
    return x._view(shape, stride, x._offset)


_squeeze_op = register("squeeze", _squeeze_fwd, lambda ctx, g: (g.reshape(ctx.shape), None, None))


def squeeze(x, dim=None):
    """Removes size-1 dims (all, one, or a tuple of dims); other dims are kept."""
    if dim is None:
        dims = set(range(x.dim()))
    elif isinstance(dim, (tuple, list)):
        dims = {x._wrap(d) for d in dim}
    else:
        dims = {x._wrap(dim)}
    keep = [i for i in range(x.dim()) if not (i in dims and x._shape[i] == 1)]
    return call(_squeeze_op, x, tuple(x._shape[i] for i in keep), tuple(x._stride[i] for i in keep))


def unsqueeze(x, dim):
    """Inserts a size-1 dim at ``dim``; its stride is size*stride of the next dim (1 at the end)."""
    n = x.dim() + 1
    if dim < -n or dim >= n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    d = dim % n
    shape = list(x._shape)
    stride = list(x._stride)
    st = shape[d] * stride[d] if d < x.dim() else 1
    shape.insert(d, 1)
    stride.insert(d, st)
    return call(_squeeze_op, x, tuple(shape), tuple(stride))


def flatten(x, start_dim=0, end_dim=-1):
    """Merges dims start_dim..end_dim (a view when possible)."""
    if x.dim() == 0:
        return x.reshape(1)
    s, e = x._wrap(start_dim), x._wrap(end_dim)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = x._shape[:s] + (_prod(x._shape[s:e + 1]),) + x._shape[e + 1:]
    return reshape(x, shape)


def unflatten(x, dim, sizes):
    d = x._wrap(dim)
    sizes = _infer(tuple(sizes), x._shape[d])
    return view_as_shape(x, x._shape[:d] + sizes + x._shape[d + 1:]) if _view_strides(
        x._shape, x._stride, x._shape[:d] + sizes + x._shape[d + 1:]) is not None else \
        reshape(x, x._shape[:d] + sizes + x._shape[d + 1:])


def movedim(x, source, destination):
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    n = x.dim()
    src = [x._wrap(s) for s in src]
    dst = [x._wrap(d) for d in dst]
    order = [None] * n
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(i for i in range(n) if i not in src)
    order = [o if o is not None else next(rest) for o in order]
    return permute(x, order)


moveaxis = movedim


# ------------------------------------------------------------------------------------------ strided views
def _view_scatter_fwd(ctx, g, shape, fn):
    z = Tensor._empty(shape, g.dtype, g.device)
    from .pointwise import full_like_value
    full_like_value(z, 0)
    v = fn(z)
    if v._overlaps():
        # overlapping windows (unfold with step < size, as_strided): gradients must add up, so scatter-add
        # through the linear index each view element has in z
        from .creation import arange
        lin = fn(arange(z.numel(), device=z.device).view(z._shape))
        z.view(-1).index_add_(0, lin.reshape(-1), g.reshape(-1))
    else:
        pointwise("x0", [g], v.dtype, v.dtype if v.dtype is not D.float16 else D.float32, out=v)
    if ctx is not None:
        ctx.fn = fn
    return z


_view_scatter_op = register("view_scatter", _view_scatter_fwd, lambda ctx, gg: (ctx.fn(gg), None, None))


def _strided_fwd(ctx, x, shape, stride, offset, fn):
    if ctx is not None:
        ctx.shape, ctx.fn = x._shape, fn
    return x._view(shape, stride, offset)


_strided_op = register("strided_view", _strided_fwd,
                       lambda ctx, g: (call(_view_scatter_op, g, ctx.shape, ctx.fn), None, None, None, None))


def strided_view(x, shape, stride, offset, fn):
    """A view of x with the given geometry; ``fn(t)`` must re-apply the same view to any tensor of x's shape."""
    return call(_strided_op, x, tuple(shape), tuple(stride), offset, fn)


def narrow(x, dim, start, length):
    d = x._wrap(dim)
    size = x._shape[d]
    if isinstance(start, Tensor):
        start = start.item()
    if start < 0:
        start += size
    if start < 0 or start > size or length < 0 or start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    shape = list(x._shape)
    shape[d] = length
    return strided_view(x, shape, x._stride, x._offset + start * x._stride[d],
                        lambda t, d=d, s=start, n=length: narrow(t, d, s, n))


def select(x, dim, index):
    if x.dim() == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = x._wrap(dim)
    size = x._shape[d]
    if index < -size or index >= size:
        raise IndexError(f"index {index} is out of bounds for dimension {d} with size {size}")
    index %= size
    return strided_view(x, x._shape[:d] + x._shape[d + 1:], x._stride[:d] + x._stride[d + 1:],
                        x._offset + index * x._stride[d], lambda t, d=d, i=index: select(t, d, i))


def _geom_index(shape, stride, off, device):
    """The storage index of every element of the geometry (shape, stride, off): an int64 tensor of that shape."""
    from .creation import arange, full
    idx = full(tuple(shape), off, dtype=D.int64, device=device)
    for d, (n, st) in enumerate(zip(shape, stride)):
        if n > 1 and st:
            view = [1] * len(shape)
            view[d] = n
            idx = idx + (arange(n, device=device) * st).reshape(view)
    return idx


def _extent(shape, stride, off):
    return off + sum((n - 1) * st for n, st in zip(shape, stride)) + 1 if all(shape) else off


def _as_strided_fwd(ctx, x, size, stride, off):
    if ctx is not None:
        ctx.geom = (x._shape, x._stride, x._offset, size, stride, off)
    return x._view(size, stride, off)


def _as_strided_bwd(ctx, g):
    """PyTorch's as_strided backward over the storage: the output's gradient is summed into a zero buffer at the
    storage positions the output reads (index_add: overlapping outputs add), then read back at the positions of
    the input's own geometry, so input and output may start at different storage offsets. Storage elements
    outside the input's own geometry (as_strided of a view reaching into its base) get no gradient, unlike PyTorch,
    which differentiates with respect to the base."""
    from .creation import zeros
    ishape, istride, ioff, oshape, ostride, ooff = ctx.geom
    if g.numel() == 0 or not all(ishape):
        return zeros(ishape, dtype=g.dtype, device=g.device), None, None, None
    lo = min(ioff, ooff)
    hi = max(_extent(ishape, istride, ioff), _extent(oshape, ostride, ooff))
    buf = zeros((hi - lo,), dtype=g.dtype, device=g.device)
    buf = buf.index_add(0, _geom_index(oshape, ostride, ooff - lo, g.device).reshape(-1), g.reshape(-1))
    gi = buf.index_select(0, _geom_index(ishape, istride, ioff - lo, g.device).reshape(-1))
    return gi.reshape(ishape), None, None, None


_as_strided_op = register("as_strided", _as_strided_fwd, _as_strided_bwd)


def as_strided(x, size, stride, storage_offset=None):
    """A view with explicit geometry (size, stride, storage_offset in elements of the whole storage; the offset
    defaults to x's) over x's storage. Its gradient follows the storage, as PyTorch's (see _as_strided_bwd)."""
    off = x._offset if storage_offset is None else storage_offset
    size, stride = tuple(size), tuple(stride)
    if any(st < 0 for st in stride):
        raise RuntimeError(f"as_strided: Negative strides are not supported at the moment, got strides: {list(stride)}")
    return call(_as_strided_op, x, size, stride, off)


def diagonal(x, offset=0, dim1=0, dim2=1):
    d1, d2 = x._wrap(dim1), x._wrap(dim2)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n1, n2 = x._shape[d1], x._shape[d2]
    if offset >= 0:
        ln = max(min(n1, n2 - offset), 0)
        off = x._offset + offset * x._stride[d2] if ln else x._offset
    else:
        ln = max(min(n1 + offset, n2), 0)
        off = x._offset - offset * x._stride[d1] if ln else x._offset
    keep = [i for i in range(x.dim()) if i not in (d1, d2)]
    shape = [x._shape[i] for i in keep] + [ln]
    stride = [x._stride[i] for i in keep] + [x._stride[d1] + x._stride[d2]]
    return strided_view(x, shape, stride, off, lambda t, o=offset, a=d1, b=d2: diagonal(t, o, a, b))


def unfold(x, dimension, size, step):
    d = x._wrap(dimension) if x.dim() else 0
    n = x._shape[d] if x.dim() else 1
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {n} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    cnt = (n - size) // step + 1
    if x.dim() == 0:     # a 0-d tensor unfolds to shape (size,) (size is 0 or 1)
        return strided_view(x, [size], [1], x._offset, lambda t, a=d, b=size, c=step: unfold(t, a, b, c))
    shape = list(x._shape)
    stride = list(x._stride)
    shape[d] = cnt
    stride[d] = x._stride[d] * step
    shape.append(size)
    stride.append(x._stride[d])
    return strided_view(x, shape, stride, x._offset, lambda t, a=d, b=size, c=step: unfold(t, a, b, c))


def split(x, split_size_or_sections, dim=0):
    d = x._wrap(dim)
    n = x._shape[d]
    if isinstance(split_size_or_sections, int):
        s = split_size_or_sections
        if s <= 0 and n:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {n}")
        sizes = [min(s, n - i) for i in range(0, n, s)] if n else [0]
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != n:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at "
                               f"dimension {d}), but got split_sizes={sizes}")
    out, start = [], 0
    for s in sizes:
        out.append(narrow(x, d, start, s))
        start += s
    return tuple(out)


def chunk(x, chunks, dim=0):
    d = x._wrap(dim)
    n = x._shape[d]
    s = -(-n // chunks) if n else 0
    if s == 0:
        return split(x, [0] * 1, d) if n == 0 else ()
    return split(x, s, d)


def unbind(x, dim=0):
    d = x._wrap(dim)
    return tuple(select(x, d, i) for i in range(x._shape[d]))


def atleast_1d(*tensors):
    """``atleast_1d(t)`` views a 0-d tensor as shape (1,); several tensors, or one list/tuple of them, give a
    tuple (PyTorch's overloads)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(atleast_1d(t) for t in tensors[0])
    if len(tensors) != 1:
        return tuple(atleast_1d(t) for t in tensors)
    x = tensors[0]
    return x.reshape(1) if x.dim() == 0 else x


def atleast_2d(*tensors):
    """``atleast_2d(t)``: 0-d -> (1, 1), (N,) -> (1, N); several tensors or one list/tuple give a tuple."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(atleast_2d(t) for t in tensors[0])
    if len(tensors) != 1:
        return tuple(atleast_2d(t) for t in tensors)
    x = tensors[0]
    return x.reshape(1, -1) if x.dim() < 2 else x


# ------------------------------------------------------------------------------------------ copies
def _materialize(x, dtype=None, device=None):
    """A new contiguous tensor with x's values (cast to dtype, on device); host path for cpu -> cpu."""
    dtype = dtype or x.dtype
    device = device or x.device
    check_caps(dtype, device)
    if (dtype._kind == 3 or x.dtype._kind == 3) and dtype is not x.dtype and x.device == device:
        from .complex import cast      # casts to or from complex, on one device (ops/complex.py)
        return cast(x, dtype, device)
    if x.device.type == "cpu" and device.type == "cpu":
        a = x._host_view()
        if dtype is D.bool and x.dtype is not D.bool:
            a = a != 0
        arr = aligned_empty(a.size, dtype.np)
        arr.reshape(a.shape)[...] = D.host_values(a, dtype)
        return Tensor._make(Storage.from_host(arr, device), x._shape)
    if x.device == device:
        ct = D.float32 if dtype is D.float16 else (dtype if dtype.is_floating_point else
                                                    (D.float32 if x.dtype is D.float16 else x.dtype))
        return pointwise("x0", [x], dtype, ct)
    # across devices: through host memory
    a = x._host_view() if x.device.type != "cpu" else x._host_view()
    if dtype is not x.dtype:
        a = (a != 0) if dtype is D.bool else D.host_values(a, dtype)
    arr = np.ascontiguousarray(a, dtype=dtype.np).reshape(-1)
    if device.type == "cpu":
        if x.device.type == "cpu" and np.shares_memory(arr, x._storage.host):
            arr = arr.copy()
        return Tensor._make(Storage.from_host(arr, device), x._shape)
    return Tensor._make(Storage.from_host(arr, device), x._shape)


def _relayout(x, fmt):
    """A copy of x with the dense strides of memory format ``fmt`` (same dtype and device, no autograd)."""
    out = Tensor._make(Storage.empty(x.numel(), x.dtype, x.device), x._shape, format_strides(x._shape, fmt))
    return _copy_into(out, x)


def _clone_fwd(ctx, x, fmt=contiguous_format):
    if fmt is contiguous_format:
        return _materialize(x)
    return _relayout(x, fmt)


_clone_op = register("clone", _clone_fwd, lambda ctx, g: (g, None))


def _target_format(x, mf):
    """The layout a copy of x takes for ``memory_format=mf``: preserve_format (and None) keeps x's channels_last
    layout, else contiguous (see ``cltorch._memory_format``)."""
    if mf is None or mf is preserve_format:
        return suggest_format(x)
    if not isinstance(mf, memory_format):
        raise TypeError(f"memory_format must be a cltorch.memory_format, got {type(mf).__name__}")
    return mf


def clone(x, *, memory_format=None):
    """A copy that stays in the graph (gradient passes through). ``memory_format``: preserve_format (default:
    a channels_last input stays channels_last, anything else becomes contiguous), contiguous_format,
    channels_last (4-d) or channels_last_3d (5-d)."""
    fmt = _target_format(x, memory_format)
    if fmt is contiguous_format:
        return call(_clone_op, x)
    return call(_clone_op, x, fmt)


def contiguous(x, memory_format=None):
    """Self when already dense in ``memory_format`` (default contiguous_format), else such a copy. Raises
    RuntimeError for preserve_format, as PyTorch."""
    if memory_format is None or memory_format is contiguous_format:
        if x.is_contiguous():
            return x
        return call(_clone_op, x)
    if memory_format is preserve_format:
        raise RuntimeError("preserve memory format is unsupported by the contiguous operator")
    fmt = _target_format(x, memory_format)
    if x.is_contiguous(memory_format=fmt):
        return x
    return call(_clone_op, x, fmt)


def _to_fwd(ctx, x, dtype, device):
    if ctx is not None:
        ctx.dtype, ctx.device = x.dtype, x.device
    return _materialize(x, dtype, device)


def _to_bwd(ctx, g):
    return (g.to(device=ctx.device, dtype=ctx.dtype), None, None)


_to_op = register("to_copy", _to_fwd, _to_bwd)


def _parse_to(args, kw):
    dtype, device = kw.pop("dtype", None), kw.pop("device", None)
    for a in args:
        if isinstance(a, D.dtype):
            dtype = a
        elif isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        elif a is not None:
            device = a
    return dtype, device


def to(x, *args, non_blocking=False, copy=False, **kw):
    """``to(device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(other)`` or ``to(memory_format=...)``; returns
    self when nothing changes. ``memory_format`` (default preserve_format) lays a copy out as ``clone`` does."""
    mf = kw.pop("memory_format", None)
    flags = [a for a in args if isinstance(a, bool)]     # to(device, dtype, non_blocking, copy), positionally
    if len(flags) > 2:
        raise TypeError(f"to() received an invalid combination of arguments: {len(flags)} bool arguments")
    if len(flags) > 1:
        copy = flags[1]
    args = [a for a in args if not isinstance(a, bool)]
    dtype, device = _parse_to(args, kw)
    dtype = D.to_dtype(dtype) if dtype is not None else x.dtype
    device = canonical(device) if device is not None else x.device
    keep = mf is None or mf is preserve_format
    if dtype is x.dtype and device == x.device:
        if not copy and (keep or suggest_format(x) is _target_format(x, mf)):
            return x
        return clone(x, memory_format=mf)
    fmt = suggest_format(x) if keep else _target_format(x, mf)
    if x.requires_grad and not (dtype.is_floating_point or dtype.is_complex):
        r = _materialize(x, dtype, device)
    else:
        r = call(_to_op, x, dtype, device)
    return r if fmt is contiguous_format else clone(r, memory_format=fmt)


def _copy_into(dst, src):
    """Raw copy (no autograd): broadcast src into dst, casting dtype and crossing devices."""
    if isinstance(src, (int, float, bool, complex)):
        from .pointwise import full_like_value
        full_like_value(dst, src)
        return dst
    shape = broadcast_shapes(dst._shape, src._shape)
    if shape != dst._shape:
        raise RuntimeError(f"output with shape {list(dst._shape)} doesn't match the broadcast shape {list(shape)}")
    if dst.numel() == 0:
        return dst
    if dst.device.type == "cpu" and src.device.type == "cpu":
        a = src._host_view()
        if dst.dtype is D.bool and src.dtype is not D.bool:
            a = a != 0
        dv = dst._host_view()
        if np.may_share_memory(dv, a):
            a = a.copy()
        dv[...] = D.host_values(a, dst.dtype)
        return dst
    if src.device != dst.device:
        if not (src.device.type == "cpu" and src.dim() == 0):
            src = _materialize(src, dst.dtype, dst.device)
        else:
            src = src.item()
    if dst.is_contiguous() and isinstance(src, Tensor) and src.is_contiguous() and src.dtype is dst.dtype and \
            src._shape == dst._shape and src._storage is not dst._storage:
        rt = dst._runtime()
        isz = dst.dtype.itemsize
        rt.copy(dst._storage.cl_buffer(), src._storage.cl_buffer(), byte_count=dst.numel() * isz,
                src_offset=src._offset * isz, dst_offset=dst._offset * isz)
        rt.pending = True
        if dst._storage.host is not None or src._storage.host is not None:
            rt.finish_if_exposed()
        return dst
    if isinstance(src, Tensor) and src._storage is dst._storage:
        src = _materialize(src)
    if isinstance(src, Tensor) and (src.dtype._kind == 3 or dst.dtype._kind == 3) and src.dtype is not dst.dtype:
        src = _materialize(src, dst.dtype, src.device)      # casts to or from complex: ops/complex.py
    ct = D.float32 if dst.dtype is D.float16 else (dst.dtype if dst.dtype.is_floating_point else
                                                    (src.dtype if isinstance(src, Tensor) and not
                                                     src.dtype.is_floating_point else dst.dtype))
    if isinstance(src, Tensor) and src.dtype.is_floating_point and not dst.dtype.is_floating_point:
        ct = D.float32 if src.dtype is D.float16 else src.dtype
    pointwise("x0", [src], dst.dtype, ct, out=dst, shape=dst._shape)
    return dst


def copy_(self, src, non_blocking=False):
    """Copy ``src`` into self, broadcasting, casting dtypes and crossing devices. Bumps self's version."""
    from .pointwise import run_inplace
    if isinstance(src, Tensor):
        r = run_inplace(self, "copy_", lambda s, o: _copy_result(s, o), src)
        if r is not None:
            return r
    if self._overlaps() and isinstance(src, Tensor):
        raise RuntimeError("unsupported operation: some elements of the input tensor and the written-to tensor refer"
                           " to a single memory location. Please clone() the tensor before performing the operation.")
    _copy_into(self, src)
    self._storage.version += 1
    return self


def _copy_result(s, o):
    r = o.to(device=s.device, dtype=s.dtype)
    if r._shape != s._shape:
        r = expand(r, *s._shape)
    return r + s * 0 if s.requires_grad and False else r


def fill_(self, value):
    """Fill with a scalar (or 0-d tensor). Allowed on overlapping (expanded) tensors, as in PyTorch."""
    from .pointwise import full_like_value, run_inplace
    if isinstance(value, Tensor):
        if value.dim() != 0:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.dim()} "
                               f"dimensions.")
        if value.requires_grad or self.requires_grad:
            r = run_inplace(self, "fill_", lambda s, v: v.expand(*s._shape) + s * 0, value)
            if r is not None:
                return r
        value = value.item()
    if self.requires_grad and is_grad_enabled():
        r = run_inplace(self, "fill_", lambda s: s * 0 + value)
        if r is not None:
            return r
    full_like_value(self, value)
    self._storage.version += 1
    return self


def zero_(self):
    return fill_(self, 0)


def type_as(self, other):
    return to(self, other.dtype)


def _type(self, dtype=None, non_blocking=False):
    if dtype is None:
        return {"float32": "torch.FloatTensor", "float64": "torch.DoubleTensor", "float16": "torch.HalfTensor",
                "int64": "torch.LongTensor", "int32": "torch.IntTensor", "int16": "torch.ShortTensor",
                "int8": "torch.CharTensor", "uint8": "torch.ByteTensor", "bool": "torch.BoolTensor",
                "bfloat16": "torch.BFloat16Tensor", "complex64": "torch.ComplexFloatTensor",
                "complex128": "torch.ComplexDoubleTensor"}[self.dtype.name]
    return to(self, dtype)


for _n, _f in (("view", view_as_shape), ("reshape", reshape), ("transpose", transpose), ("permute", permute),
               ("expand", expand), ("squeeze", squeeze), ("unsqueeze", unsqueeze), ("flatten", flatten),
               ("unflatten", unflatten), ("narrow", narrow), ("select", select), ("movedim", movedim),
               ("moveaxis", movedim), ("split", split), ("chunk", chunk), ("unbind", unbind), ("diagonal", diagonal),
               ("as_strided", as_strided), ("t", t), ("swapaxes", transpose), ("swapdims", transpose),
               ("clone", clone), ("contiguous", contiguous), ("to", to), ("copy_", copy_), ("fill_", fill_),
               ("zero_", zero_), ("type_as", type_as), ("type", _type), ("unfold", unfold),
               ("broadcast_to", broadcast_to), ("sum_to_size", lambda s, *shape: sum_to_size(s, size_args(shape))),
               ("adjoint", adjoint)):
    method(_n, _f)
method("view_as", lambda self, other: view_as_shape(self, other._shape))
method("reshape_as", lambda self, other: reshape(self, other._shape))
method("expand_as", lambda self, other: expand(self, *other._shape))
method("T", property(lambda self: permute(self, tuple(reversed(range(self.dim()))))))
method("mT", property(lambda self: transpose(self, -2, -1)))
method("H", property(lambda self: _conj_if_complex(permute(self, tuple(reversed(range(self.dim())))))))
method("cpu", lambda self: to(self, "cpu"))
method("cl", lambda self, index=None: to(self, "cl" if index is None else f"cl:{index}"))
method("cuda", lambda self, *a, **k: to(self, "cuda"))
for _n, _dt in (("float", D.float32), ("double", D.float64), ("half", D.float16), ("long", D.int64),
                ("int", D.int32), ("short", D.int16), ("char", D.int8), ("byte", D.uint8), ("bool", D.bool),
                ("bfloat16", D.bfloat16)):
    method(_n, lambda self, memory_format=preserve_format, _dt=_dt: to(self, _dt, memory_format=memory_format))
method("new_tensor", lambda self, data, dtype=None, device=None, requires_grad=False: __import__(
    "cltorch").tensor(data, dtype=dtype or self.dtype, device=device or self.device, requires_grad=requires_grad))


def detach(self):
    """A tensor sharing storage, cut from the graph (requires_grad False)."""
    t = Tensor._make(self._storage, self._shape, self._stride, self._offset)
    t._base = self._base
    return t


def detach_(self):
    self.grad_fn = None
    self._requires_grad = False
    return self


method("detach", detach)
method("detach_", detach_)
