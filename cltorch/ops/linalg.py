"""The matmul family: matmul (all of torch.matmul's broadcasting rules), mm, bmm, addmm, baddbmm, addmv,
linear, outer, dot, mv, einsum (contractions that lower to permute + bmm).

One registered op, ``matmul_nd``, multiplies (..., M, K) by (..., K, N) with broadcast batch dims through
the tiled GEMM template (``_gemm.gemm``), reading transposed and strided operands through their strides
with no copy when each operand's batch dims collapse to a single stride. Everything else is views and
composition, so its gradients come for free.
"""
import numpy as np

from .. import _dtype as D
from .._dispatch import call, register
from .._tensor import Tensor
from ._util import method
from .elementwise import broadcast_shapes, common_device
from . import gemm as _gemm

__all__ = ["matmul", "mm", "bmm", "addmm", "baddbmm", "addmv", "addbmm", "linear", "outer", "ger", "dot", "vdot",
           "mv", "einsum", "inner", "tensordot", "trace"]


def _batch_desc(t, bshape):
    """A single (batch_stride) for t's batch dims broadcast to ``bshape``, or None when they do not collapse."""
    nb = len(bshape)
    lead = nb - (t.dim() - 2)
    strides = []
    for i, s in enumerate(bshape):
        j = i - lead
        if j < 0 or t._shape[j] == 1:
            strides.append(0 if s != 1 else None)
        else:
            strides.append(t._stride[j])
    # collapse: element b (row-major over bshape) must sit at b_index * single_stride
    dims = [(s, st) for s, st in zip(bshape, strides) if s != 1]
    if not dims:
        return 0
    if all(st == 0 for _, st in dims):
        return 0
    single = dims[-1][1]
    acc = dims[-1][0]
    for s, st in reversed(dims[:-1]):
        if st != single * acc:
            return None
        acc *= s
    return single


def _gemm_dtype(dt):
    return dt.np


def _mm_forward(ctx, a, b):
    if a.dtype is not b.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {a.dtype.name} != {b.dtype.name}")
    dev = common_device([a, b])
    M, K = a._shape[-2], a._shape[-1]
    K2, N = b._shape[-2], b._shape[-1]
    if K != K2:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({M}x{K} and {K2}x{N}): shapes "
                           f"{list(a._shape)} and {list(b._shape)} disagree in the contracted dim ({K} vs {K2})")
    bshape = broadcast_shapes(a._shape[:-2], b._shape[:-2])
    if ctx is not None:
        ctx.save_for_backward(a, b)
    if not a.dtype.is_floating_point:
        # integer matmul: composed (exact in int64 arithmetic)
        return (a.unsqueeze(-1) * b.unsqueeze(-3)).sum(-2).to(a.dtype)
    out = Tensor._empty(bshape + (M, N), a.dtype, dev)
    batch = 1
    for s in bshape:
        batch *= s
    if out.numel() == 0:
        return out
    if K == 0:
        return out.zero_()
    abs_ = _batch_desc(a, bshape)
    bbs = _batch_desc(b, bshape)
    if abs_ is None:
        a = a.expand(*bshape, M, K).contiguous()
        abs_ = M * K
    if bbs is None:
        b = b.expand(*bshape, K, N).contiguous()
        bbs = K * N
    rt = out._storage.runtime()
    with rt.lock:  # the GEMM plan sets arguments on shared Kernel objects: one thread at a time
        _gemm.gemm(rt, M, N, K,
                   (a._storage.cl_buffer(), a._offset, a._stride[-2], a._stride[-1], abs_),
                   (b._storage.cl_buffer(), b._offset, b._stride[-2], b._stride[-1], bbs),
                   (out._storage.cl_buffer(), 0, N, 1, M * N), 1.0, 0.0, batch, _gemm_dtype(a.dtype))
        rt.pending = True
    if out._storage.host is not None or a._storage.host is not None or b._storage.host is not None:
        rt.finish_if_exposed()   # cpu tensors wait only for memory numpy shares
    return out


def _column_major(t):
    """True for a matrix stored by columns, such as ``weight.t()``."""
    return t._stride[-2] == 1 and t._stride[-1] != 1 and t._shape[-1] != 1


def _mm_backward(ctx, g):
    """dA = g @ B^T and dB = A^T @ g. Each gradient is written in its input's layout: for a column-major input
    (``linear``'s ``weight.t()``) the transposed product is computed and returned as a transposed view, so the
    gradient reaching the weight is contiguous and needs no copy."""
    a, b = ctx.saved_tensors
    ga = gb = None
    if ctx.needs_input_grad[0]:
        if _column_major(a):
            ga = matmul_nd(b, g.transpose(-1, -2)).transpose(-1, -2)
        else:
            ga = matmul_nd(g, b.transpose(-1, -2))
    if ctx.needs_input_grad[1]:
        if _column_major(b):
            gb = matmul_nd(g.transpose(-1, -2), a).transpose(-1, -2)
        else:
            gb = matmul_nd(a.transpose(-1, -2), g)
    return ga, gb


_mm_op = register("mm", _mm_forward, _mm_backward)


def matmul_nd(a, b):
    """(..., M, K) @ (..., K, N) with broadcast batch dims."""
    return call(_mm_op, a, b)


def matmul(input, other, *, out=None):  # noqa: A002
    """``torch.matmul``: 1-D operands are promoted (and the added dim removed), batch dims broadcast.
    Raises RuntimeError naming both shapes when the contracted dims disagree, or for 0-d operands."""
    a, b = input, other
    if a.dim() == 0 or b.dim() == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {a.dim()}D and {b.dim()}D")
    if a.dim() == 1 and b.dim() == 1:
        if a._shape[0] != b._shape[0]:
            raise RuntimeError(f"inconsistent tensor size, expected tensor [{a._shape[0]}] and src [{b._shape[0]}] "
                               "to have the same number of elements, but got "
                               f"{a._shape[0]} and {b._shape[0]} elements respectively")
        r = matmul_nd(a.unsqueeze(0), b.unsqueeze(1)).reshape(())
    elif a.dim() == 1:
        r = matmul_nd(a.unsqueeze(0), b).squeeze(-2)
    elif b.dim() == 1:
        r = matmul_nd(a, b.unsqueeze(1)).squeeze(-1)
    elif b.dim() == 2 and a.dim() > 2 and a.is_contiguous() and a.numel():
        # fold the batch into M: one GEMM
        r = matmul_nd(a.reshape(-1, a._shape[-1]), b).reshape(*a._shape[:-1], b._shape[-1])
    else:
        r = matmul_nd(a, b)
    return r if out is None else out.copy_(r)


def mm(input, mat2, *, out=None):  # noqa: A002
    """(n, m) @ (m, p) -> (n, p); both must be 2-D."""
    if input.dim() != 2 or mat2.dim() != 2:
        raise RuntimeError(f"mm: expected 2D tensors, got {input.dim()}D and {mat2.dim()}D (shapes "
                           f"{list(input._shape)} and {list(mat2._shape)})")
    return matmul(input, mat2, out=out)


def bmm(input, mat2, *, out=None):  # noqa: A002
    """(b, n, m) @ (b, m, p) -> (b, n, p); both must be 3-D with the same batch."""
    if input.dim() != 3 or mat2.dim() != 3:
        raise RuntimeError(f"batch1 must be a 3D tensor; got shapes {list(input._shape)} and {list(mat2._shape)}")
    if input._shape[0] != mat2._shape[0]:
        raise RuntimeError(f"batch1 and batch2 must have same number of batches, got {input._shape[0]} and "
                           f"{mat2._shape[0]}")
    return matmul(input, mat2, out=out)


def addmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):  # noqa: A002
    """``beta * input + alpha * (mat1 @ mat2)``."""
    p = mm(mat1, mat2)
    if alpha != 1:
        p = p * alpha
    r = p + (input * beta if beta != 1 else input) if beta != 0 else p
    return r if out is None else out.copy_(r)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):  # noqa: A002
    """``beta * input + alpha * (batch1 @ batch2)`` batched."""
    p = bmm(batch1, batch2)
    if alpha != 1:
        p = p * alpha
    r = p + (input * beta if beta != 1 else input) if beta != 0 else p
    return r if out is None else out.copy_(r)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    p = bmm(batch1, batch2).sum(0)
    return (p * alpha if alpha != 1 else p) + (input * beta if beta != 1 else input) if beta != 0 else p * alpha


def addmv(input, mat, vec, *, beta=1, alpha=1):  # noqa: A002
    p = mv(mat, vec)
    return (p * alpha if alpha != 1 else p) + (input * beta if beta != 1 else input) if beta != 0 else p * alpha


def mv(input, vec):  # noqa: A002
    if input.dim() != 2 or vec.dim() != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input.dim()}, {vec.dim()}")
    return matmul(input, vec)


def linear(input, weight, bias=None):  # noqa: A002
    """``input @ weight.T + bias``: input (*, in), weight (out, in), bias (out,) -> (*, out)."""
    if weight.dim() == 2 and input.dim() >= 1 and input._shape[-1] != weight._shape[1]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({_prod(input._shape[:-1])}x{input._shape[-1]}"
                           f" and {weight._shape[1]}x{weight._shape[0]})")
    r = matmul(input, weight.t() if weight.dim() == 2 else weight)
    return r + bias if bias is not None else r


def _prod(s):
    n = 1
    for v in s:
        n *= v
    return n


def outer(input, vec2):  # noqa: A002
    """Outer product of two 1-D tensors."""
    return input.unsqueeze(1) * vec2.unsqueeze(0)


ger = outer


def dot(input, other):  # noqa: A002
    """Dot product of two 1-D tensors of the same size and dtype."""
    if input.dim() != 1 or other.dim() != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.dim()}D and {other.dim()}D tensors")
    if input.dtype is not other.dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found {input.dtype.name} and "
                           f"{other.dtype.name}")
    return matmul(input, other)


def vdot(input, other):  # noqa: A002
    """``sum(conj(input) * other)`` of two 1-D tensors of the same size and dtype (``dot`` for real dtypes)."""
    if input.dtype.is_complex and input.dim() == 1 and other.dim() == 1 and input.dtype is other.dtype:
        from .complex import conj
        input = conj(input)
    return dot(input, other)


def inner(input, other):  # noqa: A002
    if input.dim() == 0 or other.dim() == 0:
        return input * other
    return matmul(input, other.transpose(-1, -2) if other.dim() > 1 else other)


def trace(input):  # noqa: A002
    return input.diagonal().sum()


def tensordot(a, b, dims=2):
    if isinstance(dims, int):
        da = list(range(a.dim() - dims, a.dim()))
        db = list(range(dims))
    else:
        da, db = [list(x) if isinstance(x, (list, tuple)) else [x] for x in dims]
    da = [d % a.dim() for d in da]
    db = [d % b.dim() for d in db]
    if len(da) != len(db):
        raise RuntimeError(f"both dimension lists should have same length, got {len(da)} and {len(db)}")
    for i, j in zip(da, db):   # a contracted size 1 against n sums the other operand over it (PyTorch's rule)
        sa, sb = a._shape[i], b._shape[j]
        if sa != sb:
            if sa == 1:
                b = b.sum(j, keepdim=True)
            elif sb == 1:
                a = a.sum(i, keepdim=True)
            else:
                raise RuntimeError(f"contracted dimensions need to match, but first has size {sa} in dim {i} and "
                                   f"second has size {sb} in dim {j}")
    fa = [d for d in range(a.dim()) if d not in da]
    fb = [d for d in range(b.dim()) if d not in db]
    A = a.permute(*fa, *da).reshape(_prod([a._shape[d] for d in fa]), -1)
    B = b.permute(*db, *fb).reshape(-1, _prod([b._shape[d] for d in fb]))
    return mm(A, B).reshape(*[a._shape[d] for d in fa], *[b._shape[d] for d in fb])


def einsum(equation, *operands):
    """Einstein summation for one or two operands (more are contracted left to right): each pairwise
    contraction lowers to permute + reshape + bmm. Supports '...' and an explicit or implicit output."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    eq = equation.replace(" ", "")
    if "->" in eq:
        lhs, out = eq.split("->")
    else:
        lhs, out = eq, None
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise RuntimeError(f"einsum(): {len(terms)} operand subscripts given for {len(operands)} operands")
    # expand '...' into unused capital letters
    letters = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in eq]
    ell = None
    new_terms = []
    for t, x in zip(terms, operands):
        if "..." in t:
            n = x.dim() - (len(t) - 3)
            ell = ell if ell is not None and len(ell) >= n else "".join(letters[:n])
            t = t.replace("...", ell[len(ell) - n:] if n else "")
        if len(t) != x.dim():
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({len(t)}) does not match the "
                               f"number of dimensions ({x.dim()}) for operand")
        new_terms.append(t)
    if out is None:
        counts = {}
        for t in new_terms:
            for c in t:
                counts[c] = counts.get(c, 0) + 1
        out = (ell or "") + "".join(sorted(c for c, n in counts.items() if n == 1 and (not ell or c not in ell)))
    else:
        out = out.replace("...", ell or "")
    cur, cur_t = operands[0], new_terms[0]
    cur, cur_t = _einsum_reduce_single(cur, cur_t, set(out) | set("".join(new_terms[1:])))
    for x, t in zip(operands[1:], new_terms[1:]):
        x, t = _einsum_reduce_single(x, t, set(out) | set(cur_t))
        cur, cur_t = _einsum_pair(cur, cur_t, x, t, out)
    cur, cur_t = _einsum_reduce_single(cur, cur_t, set(out))
    return cur.permute(*[cur_t.index(c) for c in out]) if cur_t != out else cur


def _einsum_reduce_single(x, t, keep):
    # repeated letters: take the diagonal
    while len(set(t)) != len(t):
        for c in t:
            if t.count(c) > 1:
                i = t.index(c)
                j = t.index(c, i + 1)
                x = x.diagonal(0, i, j)
                t = t[:i] + t[i + 1:j] + t[j + 1:] + c
                break
    drop = [i for i, c in enumerate(t) if c not in keep]
    if drop:
        x = x.sum(dim=tuple(drop))
        t = "".join(c for c in t if c in keep)
    return x, t


def _einsum_pair(a, ta, b, tb, out):
    batch = [c for c in ta if c in tb and c in out]
    contr = [c for c in ta if c in tb and c not in out]
    left = [c for c in ta if c not in tb]
    right = [c for c in tb if c not in ta]
    size = {}
    for c, s in list(zip(ta, a._shape)) + list(zip(tb, b._shape)):
        size[c] = max(size.get(c, 1), s)
    A = a.permute(*[ta.index(c) for c in batch + left + contr])
    B = b.permute(*[tb.index(c) for c in batch + contr + right])
    bs = [size[c] for c in batch]
    A = A.expand(*bs, *A._shape[len(batch):]).reshape(_prod(bs), _prod([size[c] for c in left]),
                                                      _prod([size[c] for c in contr]))
    B = B.expand(*bs, *B._shape[len(batch):]).reshape(_prod(bs), _prod([size[c] for c in contr]),
                                                      _prod([size[c] for c in right]))
    r = matmul_nd(A, B).reshape(*bs, *[size[c] for c in left], *[size[c] for c in right])
    return r, "".join(batch + left + right)


method("matmul", matmul)
method("__matmul__", matmul)
method("__rmatmul__", lambda self, other: matmul(other, self))
method("mm", mm)
method("bmm", bmm)
method("addmm", lambda self, m1, m2, *, beta=1, alpha=1: addmm(self, m1, m2, beta=beta, alpha=alpha))
method("baddbmm", lambda self, b1, b2, *, beta=1, alpha=1: baddbmm(self, b1, b2, beta=beta, alpha=alpha))
method("outer", outer)
method("dot", dot)
method("mv", mv)
method("inner", inner)
method("trace", trace)
np = np
D = D
