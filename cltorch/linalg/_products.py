"""``torch.linalg``'s norms and products half: vector, matrix and general norms, cond, cross, diagonal,
matrix_power, multi_dot, vecdot, vander, tensorinv, tensorsolve, and the top-level ``addr``.

Everything is composed from cltorch's ops, so gradients come from theirs; the one registered op is the vector
norm (``ops/reductions.py``, with ``matrix_norm``, since ``torch.norm`` needs both), whose backward gives PyTorch's
subgradients at a zero norm. The SVD- and inverse-based pieces (``'nuc'``, ord 2/-2, ``cond``, negative
``matrix_power``, ``tensorinv``, ``tensorsolve``) use the factorizations of ``ops/lapack.py`` and
``ops/lapack_api.py`` (``svdvals``, ``inv``, ``inv_ex``, ``solve``).
Semantics, argument checks and error messages follow PyTorch's ``aten/src/ATen/native/LinearAlgebra.cpp``.
"""
import math

from .. import _dtype as D
from .._tensor import Tensor
from ..ops._util import method
from ..ops.reductions import vector_norm as _vector_norm, matrix_norm, _ord_text, _scalar_name as _cap
from ..ops.lapack import svdvals
from ..ops.linalg import vdot as _vdot
from ..ops.lapack_api import inv, inv_ex, solve
from ..ops.shape_ops import cross as _cross
from ..ops.views import diagonal as _diagonal

__all__ = ["vector_norm", "matrix_norm", "norm", "cond", "cross", "diagonal", "matrix_power", "multi_dot",
           "vecdot", "vander", "tensorinv", "tensorsolve", "addr"]


def _check_square(A, what):
    if A.dim() < 2:
        raise RuntimeError(f"{what}: The input tensor A must have at least 2 dimensions.")
    if A._shape[-1] != A._shape[-2]:
        raise RuntimeError(f"{what}: A must be batches of square matrices, but they are {A._shape[-2]} by "
                           f"{A._shape[-1]} matrices")


# ------------------------------------------------------------------------------------------------ norms
def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):  # noqa: A002
    """``torch.linalg.vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None)``.

    ``(sum |x|^ord)^(1/ord)`` over ``dim`` (an int or a tuple; None or () reduces every dim); ord inf / -inf
    give max / min of |x|, ord 0 the count of non-zeros (with a zero gradient). Input must be floating
    (RuntimeError otherwise); ``dtype`` casts first and may not narrow. ord < 0 or inf over an empty reduction
    raises RuntimeError (no identity). The gradient is PyTorch's ``norm_backward``: zero where the norm is 0."""
    return _vector_norm(x, ord, dim, keepdim, dtype=dtype, out=out)


def norm(A, ord=None, dim=None, keepdim=False, *, out=None, dtype=None):  # noqa: A002
    """``torch.linalg.norm(A, ord=None, dim=None, keepdim=False, *, dtype=None)``.

    A matrix norm (``matrix_norm``) when ``ord`` is given and ``dim`` is a pair (or None with 2-D ``A``), or when
    ``ord`` is a string; otherwise ``vector_norm`` with ord 2 by default (over every element when both are None).
    RuntimeError when ``dim`` has other than 1 or 2 entries, or ``ord`` is given without ``dim`` for an input
    that is not 1-D or 2-D."""
    if out is not None:
        raise NotImplementedError("linalg.norm: out= is not supported")
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None:
        dim = tuple(dim)
        if len(dim) not in (1, 2):
            raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {list(dim)}")
    elif ord is not None and A.dim() not in (1, 2):
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got "
                           f"{A.dim()}D.")
    if isinstance(ord, str):
        return matrix_norm(A, ord, dim if dim is not None else (0, 1), keepdim, dtype=dtype)
    if ord is not None and ((dim is not None and len(dim) == 2) or (dim is None and A.dim() == 2)):
        return matrix_norm(A, ord, dim if dim is not None else (0, 1), keepdim, dtype=dtype)
    return _vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


def _cond_ord_text(p):
    if isinstance(p, str):
        return p
    if isinstance(p, float) and math.isfinite(p):
        return f"{p:.6f}"
    return _ord_text(p)


def cond(A, p=None, *, out=None):
    """``torch.linalg.cond(A, p=None)``: the condition number of each matrix of ``A`` (``(*, m, n)``).

    p None / 2 / -2: ratio of the largest and smallest singular values (``svdvals``; any shape). p 'fro', 'nuc',
    1, -1, inf, -inf: ``matrix_norm(A, p) * matrix_norm(inv(A), p)`` for square ``A``, inf where a matrix is
    singular (``inv_ex``'s info) and where 0 * inf would give nan. Empty matrices give 0. Unlike PyTorch's (whose
    in-place fill of the inverse breaks its backward), this one is differentiable for every p. RuntimeError for
    fewer than 2 dims, an invalid p, or a non-square ``A`` with a norm that needs the inverse."""
    if out is not None:
        raise NotImplementedError("linalg.cond: out= is not supported")
    if A.dim() < 2:
        raise RuntimeError("linalg.cond: The input tensor must have at least 2 dimensions.")
    ord_ = 2 if p is None else p
    valid = ord_ in ("fro", "nuc") if isinstance(ord_, str) else (
        not isinstance(ord_, bool) and isinstance(ord_, (int, float)) and abs(ord_) in (1, 2, math.inf))
    if isinstance(ord_, str):
        _check_square(A, f"linalg.cond(ord={ord_})")
    if not valid:
        raise RuntimeError(f"linalg.cond got an invalid norm type: {_cond_ord_text(ord_)}")
    if A.numel() == 0:
        return A.new_zeros(tuple(A._shape[:-2]))
    if not isinstance(ord_, str) and abs(ord_) == 2:
        s = svdvals(A)
        smax, smin = s.narrow(-1, 0, 1), s.narrow(-1, s._shape[-1] - 1, 1)
        r = smin / smax if ord_ == -2 else smax / smin
        return r.squeeze(-1)
    _check_square(A, f"linalg.cond(ord={_cond_ord_text(ord_)})")
    inverse, info = inv_ex(A)
    inverse = inverse.masked_fill((info > 0).unsqueeze(-1).unsqueeze(-1), math.inf)
    # 0 * inf (a zero matrix) is inf, as NumPy's and PyTorch's cond give
    return (matrix_norm(A, ord_) * matrix_norm(inverse, ord_)).nan_to_num(math.inf, math.inf, -math.inf)


# ------------------------------------------------------------------------------------------------ products
def cross(input, other, *, dim=-1, out=None):  # noqa: A002
    """``torch.linalg.cross(input, other, *, dim=-1)``: the cross product of 3-vectors along ``dim``, broadcasting
    the other dims. Both inputs must have the same number of dims and size 3 at ``dim`` (RuntimeError), and the
    same dtype."""
    if out is not None:
        raise NotImplementedError("linalg.cross: out= is not supported")
    if input.dim() != other.dim():
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    d = input._wrap(dim)
    if input._shape[d] != 3 or other._shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {input._shape[d]} and "
                           f"{other._shape[d]}")
    if input.dtype is not other.dtype:
        raise RuntimeError(f"expected scalar type {_cap(input.dtype)} but found {_cap(other.dtype)}")
    return _cross(input, other, d)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """``torch.linalg.diagonal(A, *, offset=0, dim1=-2, dim2=-1)``: ``torch.diagonal`` with the last two dims as
    default (a view; shape: the other dims, then the diagonal's length)."""
    return _diagonal(A, offset, dim1, dim2)


def matrix_power(A, n, *, out=None):
    """``torch.linalg.matrix_power(A, n)``: the integer power ``A^n`` of each square matrix of ``A`` (``(*, m, m)``).

    n = 0 gives the identity (same dtype and shape); n < 0 is ``inv(A)^|n|`` (floating input only, singular raises
    as ``inv`` does). Computed by repeated squaring with ``matmul``. TypeError for a non-int n, RuntimeError for
    fewer than 2 dims or non-square matrices."""
    if out is not None:
        raise NotImplementedError("linalg.matrix_power: out= is not supported")
    if isinstance(n, bool) or not isinstance(n, int):
        try:
            n = n.__index__()
        except AttributeError:
            raise TypeError(f"linalg_matrix_power(): argument 'n' (position 2) must be int, not "
                            f"{type(n).__name__}") from None
    _check_square(A, "linalg.matrix_power")
    if n == 0:
        from ..ops.creation import eye, ones
        from ..ops.pointwise import where
        e = eye(A._shape[-1], dtype=A.dtype, device=A.device).expand(*A._shape)
        if not A.requires_grad:
            return e.clone()
        # PyTorch's result is a copy into A's buffer: it carries a grad_fn, with a zero gradient for A
        return where(ones(tuple(A._shape), dtype=D.bool, device=A.device), e, A)
    if n < 0:
        A = inv(A)
        n = -n
    if n == 1:
        return A.clone()
    result, base = None, A
    while n:
        if n & 1:
            result = base if result is None else result.matmul(base)
        n >>= 1
        if n:
            base = base.matmul(base)
    return result


_TYPEMETA = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
             "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
             "uint8": "unsigned char", "bool": "bool"}


def _chain_order(dims):
    """Matrix-chain order (CLRS 15.2): ``split[i][j]`` is the best k for the product of matrices i..j."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def multi_dot(tensors, *, out=None):
    """``torch.linalg.multi_dot(tensors)``: the product of two or more matrices in the cheapest order.

    The first tensor may be 1-D (a row vector) and the last 1-D (a column vector); every other must be 2-D. The
    result drops the dims the 1-D ends stand for (two 1-D tensors give a 0-d dot product). Order by the classic
    matrix-chain dynamic programme (CLRS 15.2). RuntimeError for fewer than 2 tensors, wrong ranks, mixed dtypes
    or devices, or shapes that cannot be multiplied."""
    if out is not None:
        raise NotImplementedError("linalg.multi_dot: out= is not supported")
    tensors = list(tensors)
    n = len(tensors)
    if n < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {n}")
    first, last = tensors[0], tensors[-1]
    if first.dim() not in (1, 2):
        raise RuntimeError(f"multi_dot(): the first tensor must be 1D or 2D but got {first.dim()}D")
    if last.dim() not in (1, 2):
        raise RuntimeError(f"multi_dot(): the last tensor must be 1D or 2D but got {last.dim()}D")
    for i in range(1, n - 1):
        if tensors[i].dim() != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {tensors[i].dim()}D")
    for i, t in enumerate(tensors[1:], 1):
        if t.dtype is not first.dtype:
            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but tensor 0 is "
                               f"{_TYPEMETA.get(first.dtype.name, first.dtype.name)} and tensor {i} "
                               f"{_TYPEMETA.get(t.dtype.name, t.dtype.name)}")
        if t.device != first.device:
            raise RuntimeError(f"multi_dot(): all tensors must be on the same device but tensor 0 is on "
                               f"{first.device} and tensor {i} on {t.device}")
    mats = list(tensors)
    if first.dim() == 1:
        mats[0] = first.unsqueeze(0)
    if last.dim() == 1:
        mats[-1] = last.unsqueeze(-1)
    for i in range(n - 1):
        if mats[i]._shape[1] != mats[i + 1]._shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes {list(tensors[i]._shape)} and "
                               f"{list(tensors[i + 1]._shape)} cannot be multiplied")
    dims = [m._shape[0] for m in mats] + [mats[-1]._shape[1]]
    split = _chain_order(dims)

    def product(i, j):
        if i == j:
            return mats[i]
        k = split[i][j]
        return product(i, k).matmul(product(k + 1, j))

    r = product(0, n - 1)
    if first.dim() == 1 and last.dim() == 1:
        return r.reshape(())
    if first.dim() == 1:
        return r.squeeze(0)
    if last.dim() == 1:
        return r.squeeze(-1)
    return r


def vecdot(x, y, *, dim=-1, out=None):
    """``torch.linalg.vecdot(x, y, *, dim=-1)``: ``sum(conj(x) * y, dim)`` after broadcasting (real dtypes here).
    Both must be floating and of the same dtype (RuntimeError)."""
    if out is not None:
        raise NotImplementedError("linalg.vecdot: out= is not supported")
    if x.dtype is not y.dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found x of type "
                           f"{_cap(x.dtype)} and y of type {_cap(y.dtype)} instead")
    if x.dtype.is_complex:             # PyTorch's rule: x is conjugated
        return (x.conj() * y).sum(dim)
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"linalg.vecdot: Expected a floating point or complex tensor as input. Got "
                           f"{_cap(x.dtype)}")
    return (x * y).sum(dim)


def vander(x, *, N=None):
    """``torch.linalg.vander(x, *, N=None)``: the Vandermonde matrix ``x[..., i]^j`` for j < N (default
    ``x.size(-1)``), shape ``(*, n, N)``. float32/float64 or integer input (integers give int64, as PyTorch's
    cumprod does); each power is the previous times x, so the gradient is exact at zeros. RuntimeError for bool
    or float16 input and for N <= 1."""
    if not (x.dtype in (D.float32, D.float64) or (not x.dtype.is_floating_point and x.dtype is not D.bool)):
        raise RuntimeError(f"linalg.vander supports floating point, complex, and integer tensors, but got "
                           f"{_cap(x.dtype)}")
    x_ = x.unsqueeze(-1) if x.dim() == 0 else x
    n = x_._shape[-1] if N is None else int(N)
    if n <= 1:
        raise RuntimeError("N must be greater than 1.")
    if not x_.dtype.is_floating_point:
        x_ = x_.to(D.int64)
    from ..ops.joins import stack
    col = x_
    cols = [x_.new_ones(x_._shape), col]
    for _ in range(n - 2):
        col = col * x_
        cols.append(col)
    return stack(cols, -1)


def _prod(shape):
    p = 1
    for s in shape:
        p *= s
    return p


def tensorinv(A, ind=2, *, out=None):
    """``torch.linalg.tensorinv(A, ind=2)``: the tensor ``X`` with ``tensordot(X, A, ind)`` the identity; ``A``
    reshaped to a square ``(prod(shape[:ind]), prod(shape[ind:]))`` matrix, inverted (``inv``), and shaped
    ``shape[ind:] + shape[:ind]``. RuntimeError for ind <= 0 or unequal products; a singular ``A`` raises as
    ``inv`` does."""
    if out is not None:
        raise NotImplementedError("linalg.tensorinv: out= is not supported")
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    shape = tuple(A._shape)
    p_end, p_start = _prod(shape[ind:]), _prod(shape[:ind])
    if p_end != p_start:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {p_end} != {p_start}")
    return inv(A.reshape(p_start, p_end)).reshape(*(shape[ind:] + shape[:ind]))


def tensorsolve(A, B, dims=None, *, out=None):
    """``torch.linalg.tensorsolve(A, B, dims=None)``: ``X`` with ``tensordot(A, X, X.ndim) == B``. The dims of
    ``A`` in ``dims`` move to the end first; then ``A`` reshapes to a square ``(prod(B.shape), prod(rest))``
    matrix and ``solve`` gives ``X`` of shape ``A.shape[B.ndim:]``. RuntimeError when the products differ."""
    if out is not None:
        raise NotImplementedError("linalg.tensorsolve: out= is not supported")
    nd = A.dim()
    if dims is not None:
        dims = tuple(dims)
        A = A.movedim(dims, tuple(range(nd - len(dims), nd)))
    result_shape = tuple(A._shape[B.dim():])
    rp, op = _prod(result_shape), _prod(B._shape)
    if rp != op:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
                           f"prod(self.shape[:other.ndim]), but got {rp} != {op}")
    x = solve(A.reshape(rp, rp), B.reshape(-1))
    return x.reshape(*result_shape)


def addr(input, vec1, vec2, *, beta=1, alpha=1, out=None):  # noqa: A002
    """``torch.addr(input, vec1, vec2, *, beta=1, alpha=1)``: ``beta * input + alpha * outer(vec1, vec2)``,
    ``input`` broadcasting to ``(n, m)``; beta = 0 ignores ``input`` (its nan/inf do not propagate). The dtype
    is the promotion of the three; bool computes ``(beta and input) or (alpha and outer)``. RuntimeError for
    vectors that are not 1-D, or a float beta / alpha with an integer or bool result."""
    if out is not None:
        raise NotImplementedError("addr: out= is not supported")
    for name, v in (("vec1", vec1), ("vec2", vec2)):
        if v.dim() != 1:
            raise RuntimeError(f"addr: Expected 1-D argument {name}, but got {v.dim()}-D")
    dt = D.promote_types(D.promote_types(input.dtype, vec1.dtype), vec2.dtype)
    if not dt.is_floating_point:
        for name, v in (("beta", beta), ("alpha", alpha)):
            if isinstance(v, float):
                raise RuntimeError(f"For integral input tensors, argument {name} must not be a floating point "
                                   "number.")
    shape = (vec1._shape[0], vec2._shape[0])
    a, b = vec1.unsqueeze(1), vec2.unsqueeze(0)
    x = input.expand(*shape)              # PyTorch checks the broadcast even when beta = 0 ignores input
    if dt is D.bool:
        o = a.to(D.bool) & b.to(D.bool) if alpha else a.new_zeros(shape, dtype=D.bool)
        return (o | x.to(D.bool)) if beta else o
    o = a.to(dt) * b.to(dt)
    if alpha != 1:
        o = o * alpha
    if beta == 0:
        return o
    x = x.to(dt) if x.dtype is not dt else x
    return o + (x if beta == 1 else x * beta)


def _addr_(self, vec1, vec2, *, beta=1, alpha=1):
    """In-place ``addr``: ``self`` must already have the result's shape ``(n, m)``."""
    if self.dim() != 2:
        raise RuntimeError(f"2D tensor expected, got {self.dim()}D tensor for input")
    r = addr(self.clone(), vec1, vec2, beta=beta, alpha=alpha)      # the graph keeps the clone, not self
    if tuple(r._shape) != tuple(self._shape):
        raise RuntimeError(f"addr_: the result's shape {list(r._shape)} differs from self's {list(self._shape)}")
    return self.copy_(r)


# ------------------------------------------------------------------------------------------------ legacy torch.*
def vander_torch(x, N=None, increasing=False):
    """``torch.vander(x, N=None, increasing=False)``: for 1-D ``x`` of n entries, the (n, N) matrix of powers
    ``x^(N-1), ..., x, 1`` (``x^0 ... x^(N-1)`` with ``increasing``); N defaults to n, N=0 gives (n, 0). Integer
    and bool input give int64. RuntimeError for input that is not 1-D or N < 0."""
    if x.dim() != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x._shape[0] if N is None else int(N)
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    xv = x if x.dtype.is_floating_point else x.to(D.int64)
    from ..ops.joins import stack
    if n == 0:
        return xv.new_zeros((x._shape[0], 0))
    cols, col = [xv.new_ones(xv._shape)], xv
    for _ in range(n - 1):
        cols.append(col)
        col = col * xv
    if not increasing:
        cols.reverse()
    return stack(cols, 1)


def chain_matmul(*matrices, out=None):
    """``torch.chain_matmul(*matrices)`` (deprecated in PyTorch for ``linalg.multi_dot``): the product of 2-D
    matrices in the cheapest order; one matrix gives a copy. RuntimeError for none or a non-2-D matrix."""
    if out is not None:
        raise NotImplementedError("chain_matmul: out= is not supported")
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for m in matrices:
        if m.dim() != 2:
            raise RuntimeError(f"Tensor dimension is {m.dim()}, expected 2 instead.")
    if len(matrices) == 1:
        return matrices[0].clone()
    return multi_dot(matrices)


def frobenius_norm(input, dim, keepdim=False, *, out=None):  # noqa: A002
    """``torch.frobenius_norm(input, dim, keepdim=False)``: the 2-norm over at most two dims (``vector_norm``)."""
    if out is not None:
        raise NotImplementedError("frobenius_norm: out= is not supported")
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if len(dims) > 2:
        raise RuntimeError(f"Expected at most 2 dimensions, but got {len(dims)} dimensions instead.")
    return _vector_norm(input, 2, dims, keepdim)


def nuclear_norm(input, dim=None, keepdim=False, *, out=None):  # noqa: A002
    """``torch.nuclear_norm(input, keepdim=False)`` or ``(input, dim, keepdim=False)``: ``matrix_norm(input,
    'nuc', dim)``, over the last two dims when ``dim`` is not given."""
    if out is not None:
        raise NotImplementedError("nuclear_norm: out= is not supported")
    if isinstance(dim, bool):
        dim, keepdim = None, dim
    return matrix_norm(input, "nuc", (-2, -1) if dim is None else dim, keepdim)


method("addr", addr)
method("addr_", _addr_)
method("matrix_power", matrix_power)
method("vdot", lambda self, other: _vdot(self, other))
