"""Statistics and distance functions composed from registered ops (gradients come from those): nansum, nanmean,
quantile/nanquantile (sort + gather + interpolation), logcumsumexp, dist, cdist, pdist, trapezoid/trapz/
cumulative_trapezoid, cov, corrcoef, renorm, searchsorted/bucketize (pairwise comparison counts), and on the host
bincount and histc (their output size or range depends on the data, so they read it back anyway; they sync).
"""
import math

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor
from ._util import method

__all__ = ["nansum", "nanmean", "quantile", "nanquantile", "logcumsumexp", "dist", "cdist", "pdist", "trapezoid",
           "trapz", "cumulative_trapezoid", "cov", "corrcoef", "renorm", "searchsorted", "bucketize", "bincount",
           "histc"]


def _c():
    from . import creation
    return creation


def _where(c, a, b):
    from .pointwise import where
    return where(c, a, b)


def nansum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """sum treating NaN as zero."""
    x = _where(input.isnan(), 0, input) if input.dtype.is_floating_point else input
    return x.sum(dim, keepdim, dtype=dtype) if dim is not None else x.sum(dtype=dtype)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """mean over the non-NaN elements (NaN where there are none). Floating input only (RuntimeError)."""
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"nanmean(): expected input to have floating point dtype but got {input.dtype}")
    keep = ~input.isnan()
    cnt = keep.sum(dim, keepdim) if dim is not None else keep.sum()
    return nansum(input, dim, keepdim, dtype=dtype) / cnt


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan, name):
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    if interpolation not in ("linear", "lower", "higher", "midpoint", "nearest"):
        raise ValueError(f"{name}() interpolation must be one of linear, lower, higher, midpoint or nearest. Got "
                         f"{interpolation}")
    scalar_q = not isinstance(q, Tensor) or q.dim() == 0
    qs = [float(q)] if not isinstance(q, Tensor) else [float(v) for v in q.reshape(-1).tolist()]
    if isinstance(q, Tensor) and q.dim() > 1:
        raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
    if any(not (0 <= v <= 1) for v in qs):
        raise RuntimeError(f"{name}() q values must be in the range [0, 1]")
    if input.numel() == 0:
        raise RuntimeError(f"{name}() input tensor must be non-empty")
    nd = input.dim()
    if dim is None:
        x = input.reshape(-1)
        d = 0
    else:
        d = input._wrap(dim)
        x = input.movedim(d, -1) if nd else input.reshape(1)
    s = x.sort(-1)[0]                       # NaN sorts last
    nan = s.isnan()
    n = s._shape[-1]
    cnt = (~nan).sum(-1, True).to(s.dtype) if ignore_nan else None
    Q = _c().tensor(qs, dtype=s.dtype, device=s.device)
    pos = Q * ((cnt - 1) if ignore_nan else (n - 1))          # (..., m)
    if not ignore_nan:
        pos = pos.expand(*s._shape[:-1], len(qs))
    pos = pos.clamp(min=0)
    lo, hi = pos.floor(), pos.ceil()
    if interpolation == "lower":
        r = s.gather(-1, lo.long())
    elif interpolation == "higher":
        r = s.gather(-1, hi.long())
    elif interpolation == "nearest":
        r = s.gather(-1, pos.round().long())
    else:
        vlo, vhi = s.gather(-1, lo.long()), s.gather(-1, hi.long())
        w = (pos - lo) if interpolation == "linear" else 0.5 * (hi > lo)
        r = vlo + (vhi - vlo) * w
    if not ignore_nan:
        r = _where(nan.any(-1, True), math.nan, r)
    # r: (..., m) -> (m, ...) with the reduced dim removed (or kept as size 1)
    r = r.movedim(-1, 0)
    if keepdim:
        if dim is None:
            r = r.reshape(len(qs), *([1] * nd))
        elif nd:
            r = r.unsqueeze(d + 1)
    return r[0] if scalar_q else r


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):  # noqa: A002
    """The q-th quantiles along ``dim`` (all elements when None): sort, then interpolate between the order
    statistics at position q (n - 1) ('linear', 'lower', 'higher', 'midpoint', 'nearest' as numpy's). A slice
    holding NaN gives NaN. ``q`` a float or 1-d tensor in [0, 1]; a 1-d q adds a leading dim of len(q)."""
    return _quantile(input, q, dim, keepdim, interpolation, False, "quantile")


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):  # noqa: A002
    """``quantile`` ignoring NaNs (a slice of only NaNs gives NaN)."""
    return _quantile(input, q, dim, keepdim, interpolation, True, "nanquantile")


def logcumsumexp(input, dim):  # noqa: A002
    """log(cumsum(exp(input))) along ``dim``, shifted by the slice's (finite) max for range. Elements more
    than ~87 (float32) below the slice max underflow in the shift."""
    if input.dim() == 0:
        return input.clone()
    m = input.detach().amax(dim, True)
    m = _where(m.isinf(), 0.0, m)
    return (input - m).exp().cumsum(dim).log() + m


def dist(input, other, p=2):  # noqa: A002
    """The p-norm of ``input - other`` (broadcast): a 0-d tensor."""
    return (input - other).norm(p)


def _pnorm_last(diff, p):
    """p-norm over the last dim with a zero (not NaN) gradient at zero distance."""
    if p == 0:   # a count: zero gradient, but differentiable as PyTorch's
        return (diff != 0).to(diff.dtype).sum(-1) + (diff * 0).sum(-1)
    a = diff.abs()
    if p == math.inf:   # PyTorch's gradient: the full sign to every element attaining the max (no splitting)
        m = a.detach().amax(-1)
        return m + ((a - a.detach()) * (a.detach() == m.unsqueeze(-1))).sum(-1)
    s = (a * a).sum(-1) if p == 2 else (a ** p).sum(-1) if p != 1 else a.sum(-1)
    if p == 1:
        return s
    zero = s == 0
    return _where(zero, 0.0, _where(zero, 1.0, s) ** (1.0 / p))


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """Pairwise p-norm distances between the rows of x1 (..., P, M) and x2 (..., R, M): (..., P, R).

    Computed by broadcasting the differences (exact for every p, O(P R M) memory); ``compute_mode`` is accepted
    and validated, the matmul form is not used. p < 0 raises RuntimeError."""
    if compute_mode not in ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                            "donot_use_mm_for_euclid_dist"):
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    if x1.dim() < 2 or x2.dim() < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.dim()}D, X2 got: {x2.dim()}D")
    if x1._shape[-1] != x2._shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1._shape[-1]} X2: "
                           f"{x2._shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    return _pnorm_last(x1.unsqueeze(-2) - x2.unsqueeze(-3), p)


def pdist(input, p=2):  # noqa: A002
    """Distances between all pairs of rows of an (N, M) input, the upper triangle of cdist in row-major order:
    shape (N (N - 1) / 2,)."""
    if input.dim() != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.dim()}D")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    n = input._shape[0]
    r, c = np.triu_indices(n, 1)
    ri = _c().tensor(r.astype(np.int64), device=input.device)
    ci = _c().tensor(c.astype(np.int64), device=input.device)
    return _pnorm_last(input.index_select(0, ri) - input.index_select(0, ci), p)


def _trap_parts(y, x, dx, dim):
    d = y._wrap(dim)
    L = y._shape[d]
    if L == 0:
        return None, d
    y0, y1 = y.narrow(d, 0, L - 1), y.narrow(d, 1, L - 1)
    avg = (y0 + y1) * 0.5
    if x is None:
        return avg * (1.0 if dx is None else dx), d
    if not isinstance(x, Tensor):
        return avg * x, d
    if x.dim() == 1:
        if x._shape[0] != L:
            raise RuntimeError(f"trapezoid: There must be one `x` value for each sample point, got {x._shape[0]} "
                               f"and {L}")
        dxs = x[1:] - x[:-1]
        shape = [1] * y.dim()
        shape[d] = L - 1
        return avg * dxs.reshape(*shape), d
    xd = x._wrap(dim) if x.dim() == y.dim() else d
    Lx = x._shape[xd]
    return avg * (x.narrow(xd, 1, Lx - 1) - x.narrow(xd, 0, Lx - 1)), d


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoidal rule along ``dim``: spacing ``x`` (a tensor of sample points, or a scalar spacing) or
    ``dx`` (default 1)."""
    parts, d = _trap_parts(y, x, dx, dim)
    if parts is None:
        shape = list(y._shape)
        del shape[d]
        return _c().zeros(shape, dtype=y.dtype if y.dtype.is_floating_point else D.get_default_dtype(),
                          device=y.device)
    return parts.sum(d)


def trapz(y, x=None, *, dx=None, dim=-1):
    """Alias of trapezoid (``trapz(y, x, dim=...)`` or ``trapz(y, dx=..., dim=...)``)."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoidal integral along ``dim`` (one element shorter than y there)."""
    parts, d = _trap_parts(y, x, dx, dim)
    if parts is None:
        return y.clone() if y.dtype.is_floating_point else y.to(D.get_default_dtype())
    return parts.cumsum(d)


def cov(input, *, correction=1, fweights=None, aweights=None):  # noqa: A002
    """Covariance of the variables in the rows of ``input`` (1-d: one variable), observations in the columns;
    ``fweights`` (integer counts) and ``aweights`` weight the observations (numpy's cov). (V, V) or 0-d."""
    if input.dim() > 2:
        raise ValueError(f"cov(): expected input to have two or fewer dimensions but got an input with "
                         f"{input.dim()} dimensions")
    x = input.reshape(1, -1) if input.dim() < 2 else input
    if not x.dtype.is_floating_point:
        x = x.to(D.get_default_dtype())
    n = x._shape[1]
    w = None
    if fweights is not None:
        if fweights.dtype.is_floating_point:
            raise RuntimeError("cov(): expected fweights to have integral dtype")
        w = fweights.to(x.dtype)
    if aweights is not None:
        if not aweights.dtype.is_floating_point:
            raise RuntimeError("cov(): expected aweights to have floating point dtype")
        w = aweights.to(x.dtype) if w is None else w * aweights
    if w is None:
        wsum = float(n)
        avg = x.mean(1, True)
        norm = wsum - correction
    else:
        wsum = w.sum()
        avg = (x * w).sum(1, True) / wsum
        norm = wsum - correction * ((w * aweights).sum() / wsum) if aweights is not None else wsum - correction
    if isinstance(norm, Tensor):
        norm = norm.clamp(min=0)
    else:
        norm = max(norm, 0)
    xc = x - avg
    xw = xc if w is None else xc * w
    c = (xc @ xw.mT) / norm
    return c.reshape(()) if c._shape == (1, 1) and input.dim() < 2 or c._shape == (1, 1) and x._shape[0] == 1 \
        else c


def corrcoef(input):  # noqa: A002
    """Pearson correlation coefficients of the rows (cov normalised by the standard deviations, clipped to
    [-1, 1])."""
    c = cov(input)
    if c.dim() == 0:
        return c / c
    dg = c.diagonal()
    sd = dg.sqrt()
    c = c / sd.unsqueeze(1) / sd.unsqueeze(0)
    return c.clamp(-1, 1)


def renorm(input, p, dim, maxnorm):  # noqa: A002
    """Each slice along ``dim`` whose p-norm exceeds ``maxnorm`` is scaled to norm ``maxnorm`` (factor
    maxnorm / (norm + 1e-7), as PyTorch's)."""
    if p <= 0:
        raise RuntimeError(f"renorm: non-positive-norm not supported, got p = {p}")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    d = input._wrap(dim)
    dims = [i for i in range(input.dim()) if i != d]
    nrm = input.norm(p, dims, True) if dims else input.abs()
    factor = _where(nrm > maxnorm, maxnorm / (nrm + 1e-7), 1.0)
    return input * factor


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):  # noqa: A002
    """Insertion indices of ``input`` into the last dim of ``sorted_sequence`` (left: first index i with
    seq[i] >= v; right or side='right': seq[i] > v). Counts pairwise comparisons (O(n m) memory)."""
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError("side and right can't be set to opposites, got side of left while right was True")
        right = side == "right"
    seq = sorted_sequence
    if sorter is not None:
        seq = seq.gather(-1, sorter)
    scalar = not isinstance(input, Tensor)
    v = _c().tensor(input, dtype=seq.dtype, device=seq.device) if scalar else input
    if seq.dim() == 1:
        cmp = (seq <= v.unsqueeze(-1)) if right else (seq < v.unsqueeze(-1))
    else:
        if seq._shape[:-1] != v._shape[:-1]:
            raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                               "dimensions of boundaries tensor and input value tensor must match, but we got "
                               f"boundaries tensor {list(seq._shape)} and input value tensor {list(v._shape)}")
        cmp = (seq.unsqueeze(-2) <= v.unsqueeze(-1)) if right else (seq.unsqueeze(-2) < v.unsqueeze(-1))
    r = cmp.sum(-1)
    return r.int() if out_int32 else r


def bucketize(input, boundaries, *, out_int32=False, right=False):  # noqa: A002
    """Bucket index of each element against the 1-d ``boundaries`` (searchsorted of the boundaries)."""
    if boundaries.dim() != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.dim()})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def bincount(input, weights=None, minlength=0):  # noqa: A002
    """Counts of each value of a 1-d non-negative integer tensor (length max(input) + 1, at least ``minlength``);
    with ``weights`` the sums of the weights (float32 weights give float32, others float64). On the host: the
    output length depends on the data. Not differentiable."""
    if input.dim() != 1 or input.dtype.is_floating_point or input.dtype is D.bool:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    a = input.cpu().numpy()
    if a.size and a.min() < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is not None:
        if weights._shape != input._shape:
            raise RuntimeError("weights should be 1-d and have the same length as input")
        wt = weights.detach().cpu().numpy().astype(np.float64)
        res = np.bincount(a, wt, minlength)
        dt = weights.dtype if weights.dtype in (D.float32, D.float16, D.bfloat16) else D.float64
    else:
        res = np.bincount(a, minlength=minlength)
        dt = D.int64
    return _c().tensor(res, device=input.device).to(dt)


def histc(input, bins=100, min=0, max=0):  # noqa: A002
    """Histogram of ``bins`` equal bins over [min, max] (the data's range when min == max); elements outside
    are ignored, the last bin includes max. Float result of input's dtype. On the host (it reads the range).
    Not differentiable."""
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"\"histogram_cpu\" not implemented for '{input.dtype}'")
    if bins <= 0:
        raise RuntimeError("torch.histc: bins must be > 0")
    a = input.detach().cpu().numpy().astype(np.float64).reshape(-1)
    lo, hi = float(min), float(max)
    if lo > hi:
        raise RuntimeError("torch.histc: max must be larger than min")
    if lo == hi and a.size:
        lo, hi = float(a.min()), float(a.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"torch.histc: range of [{lo}, {hi}] is not finite")
    a = a[(a >= lo) & (a <= hi)]
    idx = np.minimum(((a - lo) * bins / (hi - lo)).astype(np.int64), bins - 1)
    res = np.bincount(idx, minlength=bins).astype(np.float64)
    return _c().tensor(res, device=input.device).to(input.dtype)


for _n in ("nansum", "nanmean", "quantile", "nanquantile", "logcumsumexp", "dist", "renorm", "bincount", "histc",
           "cov", "corrcoef"):
    method(_n, globals()[_n])
method("renorm_", lambda self, p, dim, maxnorm: self.copy_(renorm(self, p, dim, maxnorm)))


_MODE = __import__("collections").namedtuple("mode", ["values", "indices"])


def mode(input, dim=-1, keepdim=False):  # noqa: A002
    """(values, indices): the most frequent value along ``dim`` (the smallest among ties) and the index of its
    last occurrence, as PyTorch's CPU result. The indices are found on the host (one device read); the values
    are gathered from input, so they are differentiable."""
    nd = input.dim()
    d = input._wrap(dim) if nd else 0
    x = input.movedim(d, -1) if nd else input.reshape(1)
    a = x.detach().cpu().numpy()
    flat = a.reshape(-1, a.shape[-1]) if a.size else a.reshape(-1, max(a.shape[-1], 1))[:0]
    if a.shape[-1] == 0:
        raise IndexError(f"mode(): Expected reduction dim {dim} to have non-zero size.")
    idx = np.empty(flat.shape[0], dtype=np.int64)
    for r, row in enumerate(flat):
        vals, counts = np.unique(row, return_counts=True)   # sorted: argmax picks the smallest among ties
        v = vals[np.argmax(counts)]
        hits = np.nonzero((row == v) | (np.isnan(row) & np.isnan(v)))[0]
        idx[r] = hits[-1]
    it = _c().tensor(idx.reshape(a.shape[:-1] + (1,)), device=input.device)
    vals = x.gather(-1, it)
    if nd:
        vals, it = vals.movedim(-1, d), it.movedim(-1, d)
        if not keepdim:
            vals, it = vals.squeeze(d), it.squeeze(d)
    else:
        vals, it = vals.reshape(()), it.reshape(())
    return _MODE(vals, it)


method("mode", mode)
__all__ += ["mode"]
