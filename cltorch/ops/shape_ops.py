"""Shape and layout functions composed from registered views, joins and pointwise ops (gradients come from those):
ravel, diag/diag_embed/diagflat, rot90, tensor_split/hsplit/vsplit/dsplit/split_with_sizes, diff, cross, kron,
atleast_3d, block_diag, tril_indices/triu_indices, the ``*_copy`` variants, fill/zero_, and the complex-number
functions on real tensors (real, imag, conj, resolve_conj, resolve_neg, isreal).

Complex dtypes are not provided, so ``conj``/``real`` are the identity and ``imag`` raises, as PyTorch's do for a
real tensor.
"""
import numpy as np

from .. import _dtype as D
from .._tensor import Tensor
from ._util import method, size_args

__all__ = ["ravel", "diag", "diag_embed", "diagflat", "rot90", "tensor_split", "hsplit", "vsplit", "dsplit",
           "split_with_sizes", "unsafe_split", "unsafe_chunk", "unsafe_split_with_sizes", "diff", "cross", "kron",
           "atleast_3d", "block_diag", "tril_indices", "triu_indices", "view_copy", "permute_copy",
           "transpose_copy", "t_copy", "unsqueeze_copy", "squeeze_copy", "expand_copy", "diagonal_copy",
           "unbind_copy", "unfold_copy", "narrow_copy", "alias_copy", "as_strided_copy", "split_with_sizes_copy",
           "split_copy", "fill", "zero_", "real", "imag", "conj", "conj_physical", "resolve_conj", "resolve_neg",
           "isreal"]


def _creation():
    from . import creation
    return creation


def ravel(input):  # noqa: A002
    """The elements as a 1-d tensor (a view when the layout allows)."""
    return input.reshape(-1)


def diag_embed(input, offset=0, dim1=-2, dim2=-1):  # noqa: A002
    """Tensors whose (dim1, dim2) diagonals at ``offset`` hold the last dim of ``input`` (size n): the output
    has one more dim, of size n + |offset| for both dim1 and dim2; zeros elsewhere.

    Built as ``input @ S`` with a 0/1 selection matrix S of shape (n, m*m) (differentiable by matmul)."""
    nd = input.dim() + 1
    d1, d2 = dim1 % nd if -nd <= dim1 < nd else None, dim2 % nd if -nd <= dim2 < nd else None
    if d1 is None or d2 is None:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got "
                         f"{dim1 if d1 is None else dim2})")
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n = input._shape[-1] if input.dim() else 1
    m = n + abs(offset)
    sel = np.zeros((n, m, m), dtype=np.float64)
    t = np.arange(n)
    r, c = (t, t + offset) if offset >= 0 else (t - offset, t)
    sel[t, r, c] = 1
    x = input.reshape(1) if not input.dim() else input
    dt = x.dtype if x.dtype.is_floating_point else D.float64
    s = _creation().tensor(sel.reshape(n, m * m), dtype=dt, device=x.device)
    if x.dtype.is_floating_point:
        out = (x.unsqueeze(-2) @ s).squeeze(-2)
    else:   # integers: exact in float64 only up to 2**53; select instead of multiplying
        idx = np.full(m * m, n, dtype=np.int64)
        idx[r * m + c] = t
        pad = _creation().zeros((*x._shape[:-1], 1), dtype=x.dtype, device=x.device)
        from .joins import cat
        xi = cat([x, pad], -1)
        out = xi.index_select(-1, _creation().tensor(idx, device=x.device))
    out = out.reshape(*x._shape[:-1], m, m)
    # the two new dims are the last two; move them to (d1, d2)
    src = [out.dim() - 2, out.dim() - 1]
    return out.movedim(src, [d1, d2]) if (d1, d2) != tuple(src) else out


def diag(input, diagonal=0):  # noqa: A002
    """1-d input: the square matrix with ``input`` on its ``diagonal``; 2-d input: a copy of that diagonal.
    Other ranks raise RuntimeError."""
    if input.dim() == 1:
        return diag_embed(input, diagonal)
    if input.dim() == 2:
        return input.diagonal(diagonal).clone()
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.dim()}D")


def diagflat(input, offset=0):  # noqa: A002
    """The flattened input on the ``offset`` diagonal of a square matrix."""
    return diag_embed(input.reshape(-1), offset)


def rot90(input, k=1, dims=(0, 1)):  # noqa: A002
    """Rotate by 90 degrees ``k`` times in the plane ``dims`` (from dims[0] towards dims[1])."""
    dims = list(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.dim() < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.dim()}")
    d0, d1 = input._wrap(dims[0]), input._wrap(dims[1])
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    k %= 4
    if k == 1:
        return input.flip(d1).transpose(d0, d1)
    if k == 2:
        return input.flip([d0, d1])
    if k == 3:
        return input.flip(d0).transpose(d0, d1)
    return input.clone()


def tensor_split(input, indices_or_sections, dim=0):  # noqa: A002
    """Views of ``input`` split along ``dim``: an int n gives n parts (the first L % n one longer); a list (or
    1-d tensor) of indices gives the parts between them (indices clamp to [0, L])."""
    d = input._wrap(dim)
    L = input._shape[d]
    if isinstance(indices_or_sections, Tensor):
        if indices_or_sections.dtype.is_floating_point:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to have an integral type")
        if indices_or_sections.dim() == 0:
            indices_or_sections = int(indices_or_sections.item())
        elif indices_or_sections.dim() == 1:
            indices_or_sections = [int(v) for v in indices_or_sections.tolist()]
        else:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                               f"one-dimensional tensor, but got a tensor with {indices_or_sections.dim()} dims")
    if isinstance(indices_or_sections, int):
        n = indices_or_sections
        if n <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {n}")
        q, r = divmod(L, n)
        bounds, pos = [], 0
        for i in range(n - 1):
            pos += q + (1 if i < r else 0)
            bounds.append(pos)
    else:
        bounds = [int(i) for i in indices_or_sections]
    parts, start = [], 0
    for b in bounds + [L]:
        b = min(max(b if b >= 0 else b + L, 0), L)
        s = min(start, L)
        parts.append(input.narrow(d, s, max(b - s, 0)))
        start = max(b, s)
    return tuple(parts)


def _nsplit(input, sections, dim, name, min_dim):  # noqa: A002
    if input.dim() < min_dim:
        raise RuntimeError(f"torch.{name} requires a tensor with at least {min_dim} dimension, but got a tensor "
                           f"with {input.dim()} dimensions!")
    if isinstance(sections, int):
        L = input._shape[dim]
        if sections == 0 or L % sections:
            raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but the size of the "
                               f"dimension {L} is not divisible by the split_size {sections}!")
    return tensor_split(input, sections, dim)


def hsplit(input, indices_or_sections):  # noqa: A002
    """tensor_split along dim 1 (dim 0 for 1-d input); an int must divide that dim."""
    return _nsplit(input, indices_or_sections, 0 if input.dim() == 1 else 1, "hsplit", 1)


def vsplit(input, indices_or_sections):  # noqa: A002
    """tensor_split along dim 0 of an input with >= 2 dims; an int must divide that dim."""
    return _nsplit(input, indices_or_sections, 0, "vsplit", 2)


def dsplit(input, indices_or_sections):  # noqa: A002
    """tensor_split along dim 2 of an input with >= 3 dims; an int must divide that dim."""
    return _nsplit(input, indices_or_sections, 2, "dsplit", 3)


def split_with_sizes(input, split_sizes, dim=0):  # noqa: A002
    """Views of lengths ``split_sizes`` along ``dim``; they must sum to the dim's size (RuntimeError)."""
    d = input._wrap(dim)
    sizes = [int(s) for s in split_sizes]
    if sum(sizes) != input._shape[d] or any(s < 0 for s in sizes):
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {input._shape[d]} (input "
                           f"tensor's size at dimension {dim}), but got split_sizes={sizes}")
    return tuple(input.split(sizes, d))


def unsafe_split(input, split_size, dim=0):  # noqa: A002
    return tuple(input.split(split_size, dim))


def unsafe_chunk(input, chunks, dim=0):  # noqa: A002
    return tuple(input.chunk(chunks, dim))


unsafe_split_with_sizes = split_with_sizes


def diff(input, n=1, dim=-1, prepend=None, append=None):  # noqa: A002
    """The n-th forward difference along ``dim`` (after joining ``prepend``/``append``); bool input gives
    logical xor, as PyTorch's."""
    from .joins import cat
    if input.dim() == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    d = input._wrap(dim)
    parts = []
    for p in (prepend, None, append):
        if p is None and parts and parts[-1] is input:
            continue
        if p is None:
            parts.append(input)
            continue
        if not isinstance(p, Tensor):
            shape = list(input._shape)
            shape[d] = 1
            p = _creation().full(shape, p, dtype=input.dtype, device=input.device)
        parts.append(p)
    x = cat(parts, d) if len(parts) > 1 else input
    for _ in range(n):
        L = x._shape[d]
        if L == 0:
            break
        a, b = x.narrow(d, 1, L - 1), x.narrow(d, 0, L - 1)
        x = (a != b) if x.dtype is D.bool else a - b
    return x


def cross(input, other, dim=None):  # noqa: A002
    """Cross product of 3-vectors along ``dim`` (broadcasting); ``dim=None`` takes the first dim of size 3."""
    from .elementwise import broadcast_shapes
    from .joins import cat
    shape = broadcast_shapes(input._shape, other._shape)
    if input.dim() != other.dim():
        raise RuntimeError(f"linalg.cross: inputs must have the same number of dimensions, got {input.dim()} and "
                           f"{other.dim()}")
    if dim is None:
        dim = next((i for i, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    a, b = input.expand(*shape), other.expand(*shape)
    d = a._wrap(dim)
    if shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {input._shape[d]} and "
                           f"{other._shape[d]}")
    a1, a2, a3 = (a.narrow(d, i, 1) for i in range(3))
    b1, b2, b3 = (b.narrow(d, i, 1) for i in range(3))
    return cat([a2 * b3 - a3 * b2, a3 * b1 - a1 * b3, a1 * b2 - a2 * b1], d)


def kron(input, other):  # noqa: A002
    """Kronecker product: shape (a_i * b_i) per dim after padding the shorter rank with leading 1s."""
    nd = max(input.dim(), other.dim())
    a = input.reshape((1,) * (nd - input.dim()) + tuple(input._shape))
    b = other.reshape((1,) * (nd - other.dim()) + tuple(other._shape))
    ash = [v for s in a._shape for v in (s, 1)]
    bsh = [v for s in b._shape for v in (1, s)]
    out = a.reshape(*ash) * b.reshape(*bsh)
    return out.reshape(*[x * y for x, y in zip(a._shape, b._shape)])


def atleast_3d(*tensors):
    """Each tensor with at least 3 dims: 0-d -> (1, 1, 1), (n,) -> (1, n, 1), (m, n) -> (m, n, 1)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(atleast_3d(t) for t in tensors[0])
    if len(tensors) > 1:
        return tuple(atleast_3d(t) for t in tensors)
    t = tensors[0]
    if t.dim() == 0:
        return t.reshape(1, 1, 1)
    if t.dim() == 1:
        return t.reshape(1, -1, 1)
    if t.dim() == 2:
        return t.unsqueeze(-1)
    return t


def block_diag(*tensors):
    """The block-diagonal matrix of the given 0-, 1- or 2-d tensors (1-d is a row); promoted dtype."""
    from .joins import cat
    c = _creation()
    if not tensors:
        return c.zeros(1, 0)
    mats = []
    for i, t in enumerate(tensors):
        if t.dim() > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has "
                               f"{t.dim()} dimensions")
        mats.append(t.reshape(1, 1) if t.dim() == 0 else t.reshape(1, -1) if t.dim() == 1 else t)
    dt = mats[0].dtype
    for m in mats[1:]:
        dt = D.promote_types(dt, m.dtype)
    dev = mats[0].device
    total = sum(m._shape[1] for m in mats)
    rows, col = [], 0
    for m in mats:
        r, w = m._shape
        parts = [c.zeros(r, col, dtype=dt, device=dev), m.to(dt), c.zeros(r, total - col - w, dtype=dt, device=dev)]
        rows.append(cat(parts, 1))
        col += w
    return cat(rows, 0)


def _tri_indices(row, col, offset, dtype, device, upper):
    if dtype is None:
        dtype = D.int64
    dtype = D.to_dtype(dtype)
    if dtype.is_floating_point or dtype is D.bool:
        raise NotImplementedError(f"\"{'triu' if upper else 'tril'}_indices\" not implemented for "
                                  f"'{dtype.name.capitalize()}': only integer dtypes hold indices")
    r, cc = np.triu_indices(row, offset, col) if upper else np.tril_indices(row, offset, col)
    return _creation().tensor(np.stack([r, cc]).astype(np.int64).reshape(2, -1), dtype=dtype, device=device)


def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The (2, N) coordinates of the lower triangle (at ``offset``) of a row x col matrix, row-major order."""
    return _tri_indices(row, col, offset, dtype, device, False)


def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The (2, N) coordinates of the upper triangle (at ``offset``) of a row x col matrix, row-major order."""
    return _tri_indices(row, col, offset, dtype, device, True)


# ----------------------------------------------------------------------------- *_copy: the view, materialised
def view_copy(input, *size):  # noqa: A002
    if len(size) == 1 and isinstance(size[0], D.dtype):
        return input.view(size[0]).clone()
    return input.view(*size_args(size)).clone()


def permute_copy(input, dims):  # noqa: A002
    return input.permute(*dims).clone()


def transpose_copy(input, dim0, dim1):  # noqa: A002
    return input.transpose(dim0, dim1).clone()


def t_copy(input):  # noqa: A002
    return input.t().clone()


def unsqueeze_copy(input, dim):  # noqa: A002
    return input.unsqueeze(dim).clone()


def squeeze_copy(input, dim=None):  # noqa: A002
    return (input.squeeze() if dim is None else input.squeeze(dim)).clone()


def expand_copy(input, size, *, implicit=False):  # noqa: A002
    return input.expand(*size).clone()


def diagonal_copy(input, offset=0, dim1=0, dim2=1):  # noqa: A002
    return input.diagonal(offset, dim1, dim2).clone()


def unbind_copy(input, dim=0):  # noqa: A002
    return tuple(t.clone() for t in input.unbind(dim))


def unfold_copy(input, dimension, size, step):  # noqa: A002
    if input.dim() == 0:
        if size > 1 or dimension not in (0, -1):
            raise RuntimeError(f"maximum size for tensor at dimension 0 is 1 but size is {size}")
        return input.reshape(1).clone()
    return input.unfold(dimension, size, step).clone()


def narrow_copy(input, dim, start, length):  # noqa: A002
    return input.narrow(dim, start, length).clone()


def alias_copy(input):  # noqa: A002
    return input.clone()


def as_strided_copy(input, size, stride, storage_offset=None):  # noqa: A002
    return input.as_strided(size, stride, storage_offset).clone()


def split_copy(input, split_size, dim=0):  # noqa: A002
    return tuple(t.clone() for t in input.split(split_size, dim))


def split_with_sizes_copy(input, split_sizes, dim=0):  # noqa: A002
    return tuple(t.clone() for t in split_with_sizes(input, split_sizes, dim))


def fill(input, value):  # noqa: A002
    """A tensor of input's shape and dtype filled with ``value`` (a number or a 0-d tensor; its gradient is the
    sum, input's is zero)."""
    if isinstance(value, Tensor) and value.dim() != 0:
        raise RuntimeError(f"fill only supports 0-dimension value tensor but got tensor with {value.dim()} "
                           "dimensions.")
    from .pointwise import where
    mask = _creation().ones(input._shape, dtype=D.bool, device=input.device)
    return where(mask, value, input).to(input.dtype)


def zero_(input):  # noqa: A002
    return input.zero_()


def real(input):  # noqa: A002
    """A real tensor's real part: the tensor itself."""
    return input


def imag(input):  # noqa: A002
    raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")


def conj(input):  # noqa: A002
    """The conjugate of a real tensor: itself (complex dtypes are not provided)."""
    return input


conj_physical = resolve_conj = resolve_neg = conj


def isreal(input):  # noqa: A002
    """All True for a real tensor (complex dtypes are not provided)."""
    return _creation().ones(input._shape, dtype=D.bool, device=input.device)


for _n in ("ravel", "diag", "diag_embed", "diagflat", "rot90", "tensor_split", "hsplit", "vsplit", "dsplit",
           "split_with_sizes", "unsafe_split", "unsafe_chunk", "diff", "cross", "kron", "conj", "conj_physical",
           "resolve_conj", "resolve_neg", "isreal", "unsafe_split_with_sizes"):
    method(_n, globals()[_n])
Tensor.real = property(real)
Tensor.imag = property(imag)
if not hasattr(Tensor, "mH"):
    Tensor.mH = property(lambda self: self.adjoint())


# ----------------------------------------------------------------------------- *_scatter: out of place embeddings
def _embed_last(x, src, positions):
    """x (..., L) with the entries at ``positions`` (host ints, len k) taken from src (..., k): one index_select
    over cat([x, src], -1), so gradients flow to both."""
    from .joins import cat
    L = x._shape[-1]
    idx = np.arange(L, dtype=np.int64)
    idx[np.asarray(positions, dtype=np.int64)] = L + np.arange(len(positions), dtype=np.int64)
    return cat([x, src.to(x.dtype)], -1).index_select(-1, _creation().tensor(idx, device=x.device))


def select_scatter(input, src, dim, index):  # noqa: A002
    """A copy of input whose ``select(dim, index)`` slice is ``src`` (src has that slice's shape)."""
    d = input._wrap(dim)
    L = input._shape[d]
    i = index + L if index < 0 else index
    if not 0 <= i < L:
        raise IndexError(f"select_scatter(): index {index} out of range for tensor of size {list(input._shape)} at "
                         f"dimension {dim}")
    exp = input._shape[:d] + input._shape[d + 1:]
    if tuple(src._shape) != tuple(exp):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src._shape)}, "
                           f"slice size = {list(exp)}")
    return _embed_last(input.movedim(d, -1), src.unsqueeze(d).movedim(d, -1), [i]).movedim(-1, d)


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):  # noqa: A002
    """A copy of input whose slice ``start:end:step`` along ``dim`` is ``src``."""
    d = input._wrap(dim)
    pos = list(range(input._shape[d]))[slice(start, end, step)]
    exp = input._shape[:d] + (len(pos),) + input._shape[d + 1:]
    if tuple(src._shape) != tuple(exp):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src._shape)}, "
                           f"slice size = {list(exp)}")
    return _embed_last(input.movedim(d, -1), src.movedim(d, -1), pos).movedim(-1, d)


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):  # noqa: A002
    """A copy of input whose ``diagonal(offset, dim1, dim2)`` is ``src``."""
    d1, d2 = input._wrap(dim1), input._wrap(dim2)
    x = input.movedim([d1, d2], [-2, -1])
    R, C = x._shape[-2:]
    rows = np.arange(max(0, -offset), R)
    cols = rows + offset
    keep = cols < C
    rows, cols = rows[keep], cols[keep]
    exp = tuple(input.diagonal(offset, dim1, dim2)._shape)
    if tuple(src._shape) != exp:
        raise RuntimeError(f"expected src to have a size equal to the diagonal of self. src size = "
                           f"{list(src._shape)}, diagonal size = {list(exp)}")
    flat = _embed_last(x.reshape(*x._shape[:-2], R * C), src, rows * C + cols)
    return flat.reshape(*x._shape).movedim([-2, -1], [d1, d2])


def unravel_index(indices, shape):
    """The coordinates (a tuple of int64 tensors of indices' shape) of flat ``indices`` in a tensor of ``shape``;
    out-of-range indices raise RuntimeError (one device read)."""
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(int(s) for s in shape)
    if not isinstance(indices, Tensor):
        indices = _creation().tensor(indices)
    if indices.dtype.is_floating_point or indices.dtype is D.bool:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype}")
    n = int(np.prod(shape)) if shape else 1
    if indices.numel() and ((indices < -n) | (indices >= n)).any().item():
        raise RuntimeError("'indices' must be in range [-numel(shape), numel(shape) - 1] where numel(shape) = "
                           f"{n}")
    idx = indices.long() % n if n else indices.long()
    out = []
    for s in reversed(shape):
        out.append(idx % s)
        idx = idx // s
    return tuple(reversed(out))


def combinations(input, r=2, with_replacement=False):  # noqa: A002
    """The length-r combinations of a 1-d tensor's elements, as rows of an (N, r) tensor (itertools' order)."""
    import itertools
    if input.dim() != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input._shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return _creation().zeros(0, dtype=input.dtype, device=input.device)
    gen = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    combos = np.array(list(gen(range(input._shape[0]), r)), dtype=np.int64).reshape(-1, r)
    idx = _creation().tensor(combos.reshape(-1), device=input.device)
    return input.index_select(0, idx).reshape(-1, r)


__all__ += ["select_scatter", "slice_scatter", "diagonal_scatter", "unravel_index", "combinations"]
for _n in ("select_scatter", "slice_scatter", "diagonal_scatter"):
    method(_n, globals()[_n])
