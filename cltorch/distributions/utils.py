"""Helpers shared by the distributions: broadcasting parameters, probs/logits conversion, lazy properties,
and the small pieces of special functions and triangular linear algebra that cltorch's ops do not provide yet
(``lgamma``, ``erfinv``, ``cholesky``, ``solve_triangular``), composed from public ops so autograd works."""
import math
from numbers import Number

import cltorch
import cltorch.nn.functional as F

__all__ = ["broadcast_all", "logits_to_probs", "probs_to_logits", "clamp_probs", "lazy_property", "euler_constant"]

euler_constant = 0.57721566490153286060


def broadcast_all(*values):
    """Broadcasts tensors and Python numbers to one shape. Numbers become tensors of the first tensor's
    dtype and device (the default dtype when there is none). Raises ValueError for any other type."""
    if not all(isinstance(v, (cltorch.Tensor, Number)) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number, cltorch.Tensor or objects "
                         "implementing __torch_function__.")
    if not all(isinstance(v, cltorch.Tensor) for v in values):
        ref = next((v for v in values if isinstance(v, cltorch.Tensor)), None)
        kw = dict(dtype=ref.dtype, device=ref.device) if ref is not None else dict(dtype=cltorch.get_default_dtype())
        values = [v if isinstance(v, cltorch.Tensor) else cltorch.tensor(float(v), **kw) for v in values]
    return cltorch.broadcast_tensors(*values)


def broadcast_shapes(*shapes):
    """NumPy/PyTorch broadcasting of shapes (cltorch has no public ``broadcast_shapes`` yet). Raises
    RuntimeError naming the shapes when they do not broadcast."""
    n = max((len(s) for s in shapes), default=0)
    out = [1] * n
    for s in shapes:
        for i, d in enumerate(tuple(s)[::-1]):
            j = n - 1 - i
            if d != 1:
                if out[j] not in (1, d):
                    raise RuntimeError(f"Shape mismatch: objects cannot be broadcast to a single shape: "
                                       f"{[tuple(x) for x in shapes]}")
                out[j] = d
    return cltorch.Size(out)


def _standard_normal(shape, dtype, device):
    return cltorch.randn(tuple(shape), dtype=dtype, device=device)


def _sum_rightmost(value, dim):
    """Sums the rightmost ``dim`` dims of ``value`` (dim 0: unchanged)."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[:value.dim() - dim]) + (-1,)).sum(-1)


def clamp_probs(probs):
    """Clamps probabilities to [eps, 1 - eps] of their dtype."""
    eps = cltorch.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits, is_binary=False):
    """sigmoid(logits) when binary, else softmax over the last dim."""
    return cltorch.sigmoid(logits) if is_binary else F.softmax(logits, dim=-1)


def probs_to_logits(probs, is_binary=False):
    """log(p) - log1p(-p) when binary, else log(p), with p clamped to [eps, 1 - eps]."""
    p = clamp_probs(probs)
    return (cltorch.log(p) - cltorch.log1p(-p)) if is_binary else cltorch.log(p)


class lazy_property:
    """A property computed on first access and then stored in the instance's ``__dict__`` (so it is also
    what ``Distribution.__repr__`` and argument validation see as "given")."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return self
        with cltorch.enable_grad():
            value = self.wrapped(instance)
        instance.__dict__[self.wrapped.__name__] = value
        return value


# --- special functions composed from public ops -------------------------------------------------------------

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def lgamma(x):
    """log Γ(x) for x > 0: the recurrence Γ(x) = Γ(x + 8) / (x (x+1) ... (x+7)), then Stirling's series to
    the z^-7 term at z = x + 8 (truncation error below 3e-10). Composed from log and arithmetic, so its
    gradient (the digamma function, to the same accuracy) comes from autograd."""
    shift = 0
    for k in range(8):
        shift = shift + cltorch.log(x + k)
    z = x + 8.0
    r = 1.0 / z
    r2 = r * r
    series = r * (1.0 / 12 + r2 * (-1.0 / 360 + r2 * (1.0 / 1260 - r2 / 1680)))
    return (z - 0.5) * cltorch.log(z) - z + _HALF_LOG_2PI + series - shift


def erfinv(y):
    """Inverse error function on (-1, 1): Giles' single-precision polynomial ("Approximating the erfinv
    function", GPU Computing Gems, 2011) followed by two Newton steps on erf(x) = y; ±1 give ±inf."""
    w = -cltorch.log((1.0 - y) * (1.0 + y))
    wc = w - 2.5
    p1 = 2.81022636e-08
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164,
              0.246640727, 1.50140941):
        p1 = c + p1 * wc
    wt = cltorch.sqrt(w.clamp(min=5.0)) - 3.0
    p2 = -0.000200214257
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
              1.00167406, 2.83297682):
        p2 = c + p2 * wt
    x = cltorch.where(w < 5.0, p1, p2) * y
    two_over_sqrt_pi = 2.0 / math.sqrt(math.pi)
    for _ in range(2):
        x = x - (cltorch.erf(x) - y) / (two_over_sqrt_pi * cltorch.exp(-x * x))
    inf = cltorch.full_like(y, math.inf)
    return cltorch.where(y >= 1.0, inf, cltorch.where(y <= -1.0, -inf, x))


# --- triangular linear algebra composed from public ops ------------------------------------------------------

def solve_lower(L, B):
    """Solves L X = B for X by forward substitution (L: (..., n, n) lower triangular, B: (..., n, m), batch
    dims broadcast). n steps of matmul and arithmetic, so gradients flow to L and B."""
    n = L.shape[-1]
    batch = tuple(broadcast_shapes(L.shape[:-2], B.shape[:-2]))
    L = L.expand(batch + (n, n))
    B = B.expand(batch + tuple(B.shape[-2:]))
    rows = []
    for i in range(n):
        r = B[..., i, :]
        if i:
            prev = cltorch.stack(rows, -2)                       # (..., i, m)
            r = r - (L[..., i:i + 1, :i] @ prev).squeeze(-2)
        rows.append(r / L[..., i, i].unsqueeze(-1))
    return cltorch.stack(rows, -2)


def cholesky(A):
    """Lower Cholesky factor of symmetric positive-definite (..., n, n) matrices, column by column
    (Cholesky–Crout). A matrix that is not positive definite gives NaN in its factor (the square root of a
    non-positive pivot); ``constraints.positive_definite`` checks that."""
    n = A.shape[-1]
    cols = []
    for j in range(n):
        a = A[..., :, j]                                         # (..., n)
        if j:
            Lp = cltorch.stack(cols, -1)                         # (..., n, j)
            a = a - (Lp @ Lp[..., j, :].unsqueeze(-1)).squeeze(-1)
        d = cltorch.sqrt(a[..., j:j + 1])
        mask = (cltorch.arange(n, device=A.device) >= j).to(A.dtype)
        cols.append(a / d * mask)
    return cltorch.stack(cols, -1)


def batch_mahalanobis(L, x):
    """x^T (L L^T)^-1 x for lower-triangular L (..., n, n) and x (..., n), batch dims broadcast."""
    y = solve_lower(L, x.unsqueeze(-1)).squeeze(-1)
    return (y * y).sum(-1)
