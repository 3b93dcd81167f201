"""Discrete Fourier transforms: the one complex-to-complex primitive (``fft_c2c``) and its launches.

Kernels (``cl_kernels/fft.cl.mako``): a batched 1-d Stockham autosort FFT along the contiguous last dim for sizes
whose prime factors are 2, 3, 5 and 7 (one pass per radix, radix 4 for pairs of twos; E. Bainville, "OpenCL Fast
Fourier Transform", 2010, for the pass's indexing), and Bluestein's chirp-z transform for every other size
(L. Bluestein, 1970: ``X_k = c_k sum_j (x_j c_j) conj(c_{k-j})`` with the chirp ``c_m = exp(-i pi m^2 / n)``, a
circular convolution of power-of-two length M >= 2n - 1 done with the Stockham kernel). Twiddle and chirp tables
are computed in double on the host (angles from ``t mod n`` and ``m^2 mod 2n``, exact integers) and kept per
size and device.

``fft_c2c(x, dims, inverse, scale)`` transforms a complex tensor along each of ``dims`` in turn (a dim that is not
last is moved last, made contiguous, transformed and moved back) and multiplies by ``scale``. Its derivative is
the adjoint: the opposite-direction transform of the cotangent with the same scale. Every function of
``cltorch.fft`` (r2c, c2r, Hermitian, n-d, padding with ``n``/``s``) is composed of this primitive and
differentiable real ops, so their gradients follow.
"""
import math

import numpy as np

from .. import _dtype as D
from .._dispatch import call, register
from .._tensor import Tensor
from ..backend import geometry

__all__ = ["fft_c2c", "rfft_last", "smooth_factors"]

_L = np.int64
_tables = {}      # (device, dtype name, kind, n) -> Tensor


def smooth_factors(n):
    """The Stockham pass radices for n (4s first, then 2, 3, 5, 7), or None when n has another prime factor."""
    out = []
    while n % 4 == 0:
        out.append(4)
        n //= 4
    for r in (2, 3, 5, 7):
        while n % r == 0:
            out.append(r)
            n //= r
    return out if n == 1 else None


def _table(device, cdt, kind, n, M=0, sign=-1):
    key = (device, cdt.name, kind, n, M, sign)
    t = _tables.get(key)
    if t is None:
        from .creation import tensor
        if kind == "tw":        # pass p's twiddles: exp(-2 pi i r k / (ns R)) at (r-1)*ns + k, one table per pass
            a = _pass_twiddles(n)[M]
        elif kind == "chirp":   # c_m = exp(sign i pi (m^2 mod 2n) / n)
            a = _chirp(n, sign)
        elif kind == "r2c":     # exp(-2 pi i k / n), k = 0 .. n/2
            a = np.exp(-2j * np.pi * np.arange(n // 2 + 1) / n)
        else:                   # "kernel": FFT_M of b, b_m = conj(c_m) at m and at M - m
            c = np.conj(_chirp(n, sign))
            b = np.zeros(M, np.complex128)
            b[:n] = c
            b[M - n + 1:] = c[1:][::-1]
            a = np.fft.fft(b)
        t = _tables[key] = tensor(a.astype(cdt.np), device=device)
    return t


def _pass_twiddles(n):
    out, ns = [], 1
    for R in smooth_factors(n) or []:
        r = np.arange(1, R)[:, None]
        k = np.arange(ns)[None, :]
        out.append(np.exp(-2j * np.pi * ((r * k) % (ns * R)) / (ns * R)).reshape(-1))
        ns *= R
    return out or [np.ones(1)]


def _chirp(n, sign):
    m = np.arange(n, dtype=np.int64)
    return np.exp(sign * 1j * np.pi * ((m * m) % (2 * n)) / n)


def _kernel(rt, cdt, kind, R=0, sign=0):
    T = "double" if cdt is D.complex128 else "float"
    st = np.float64 if T == "double" else np.float32
    args = {"pass": [None, _L, None, _L, None, _L, _L, st], "chirp_in": [None, _L, None, None, _L, _L],
            "spectrum_mul": [None, None, _L, st], "r2c_post": [None, None, None, _L, st], "chirp_out": [None, None, _L, None, _L, _L, st]}[kind]
    name = {"pass": "fft_pass"}.get(kind, kind)
    return rt.kernel("fft.cl.mako", name, args + [_L, _L], T=T, kernel=kind, R=R, sign=sign), st


def _launch(rt, k, X, batch, *args):
    """Run ``k`` on the (X, batch) range: work-groups of up to the ``[fft] local_size`` work-items (default 64)
    along X first, then along the batch, fitted to the device (``geometry.nd``); more batches than the device
    allows work-groups in dimension 1 (NVIDIA: 65,535) run as several launches, each given its first batch
    (``geometry.pieces``); the kernels' last arguments are that first batch and the batch count."""
    gs, ls = geometry.nd(rt, (X, batch), int(rt.profile.get_value("fft", "local_size", 64)), k)
    for origin, part in geometry.pieces(rt, gs, ls):
        rt.launch(k, part, ls, *args, origin[1], batch)


def _empty_like(x, shape=None):
    from .._storage import Storage
    shape = x._shape if shape is None else shape
    return Tensor._make(Storage.empty(math.prod(shape), x.dtype, x.device), shape)


def _stockham(x, out, n, batch, inverse, scale, x_off=0):
    """out (contiguous, batch x n, not x) = scale * DFT_n(x) (``inverse``: the unnormalized inverse) with the
    Stockham passes; n must be smooth. The passes ping-pong between ``out`` and one scratch buffer, arranged so
    that the last one writes ``out``."""
    rt = out._storage.runtime()
    cdt = x.dtype
    radices = smooth_factors(n)
    if not radices:         # n == 1: a scaled copy
        from .views import _copy_into
        _copy_into(out.view(-1), x.reshape(-1))
        k, st = _kernel(rt, cdt, "spectrum_mul")
        _launch(rt, k, 1, batch, out._storage.cl_buffer(),
                  _table(x.device, cdt, "tw", 1, 0)._storage.cl_buffer(), 1, st(scale))
        return out
    sign = 1 if inverse else -1
    scratch = _empty_like(out, (batch * n,)) if len(radices) > 1 else None
    P = len(radices)
    src, src_off, ns = x, x_off, 1
    for i, R in enumerate(radices):
        dst = out if (P - 1 - i) % 2 == 0 else scratch
        k, st = _kernel(rt, cdt, "pass", R, sign)
        tw = _table(x.device, cdt, "tw", n, i)
        _launch(rt, k, n // R, batch, src._storage.cl_buffer(), src_off, dst._storage.cl_buffer(), 0,
                  tw._storage.cl_buffer(), n, ns, st(scale if i == P - 1 else 1.0))
        src, src_off = dst, 0
        ns *= R
    return out


def _bluestein(x, out, n, batch, inverse, scale):
    """out = scale * DFT_n(x) for any n, through a power-of-two circular convolution (see the module docstring);
    the inverse uses the conjugate chirp."""
    rt = out._storage.runtime()
    cdt = x.dtype
    M = 1 << (2 * n - 2).bit_length()
    sign = 1 if inverse else -1
    chirp = _table(x.device, cdt, "chirp", n, sign=sign)
    spec = _table(x.device, cdt, "kernel", n, M, sign=sign)
    a = _empty_like(x, (batch * M,))
    k, _ = _kernel(rt, cdt, "chirp_in")
    _launch(rt, k, M, batch, x._storage.cl_buffer(), x._offset, a._storage.cl_buffer(),
              chirp._storage.cl_buffer(), n, M)
    A = _empty_like(x, (batch * M,))
    _stockham(a, A, M, batch, False, 1.0)
    k, st = _kernel(rt, cdt, "spectrum_mul")
    _launch(rt, k, M, batch, A._storage.cl_buffer(), spec._storage.cl_buffer(), M, st(1.0 / M))
    _stockham(A, a, M, batch, True, 1.0)
    k, st = _kernel(rt, cdt, "chirp_out")
    _launch(rt, k, n, batch, a._storage.cl_buffer(), out._storage.cl_buffer(), out._offset,
              chirp._storage.cl_buffer(), n, M, st(scale))
    return out


def _fft_last(x, inverse, scale):
    """The 1-d transform of a complex tensor along its last dim (no autograd); returns a new contiguous tensor."""
    x = x.contiguous()
    n = x._shape[-1]
    batch = x.numel() // n if n else 0
    out = _empty_like(x)
    if batch == 0:
        return out
    if smooth_factors(n) is not None:
        out = _stockham(x, out, n, batch, inverse, scale, x_off=x._offset)
    else:
        out = _bluestein(x, out, n, batch, inverse, scale)
    if x._storage.host is not None:
        out._storage.runtime().finish_if_exposed()     # cpu tensors wait only for memory numpy shares
    return out


def _c2c_fwd(ctx, x, dims, inverse, scale):
    if ctx is not None:
        ctx.dims, ctx.inverse, ctx.scale = dims, inverse, scale
    if not dims:
        return x.clone() if scale == 1 else _scaled(x, scale)
    from .views import movedim
    y = x
    for i, d in enumerate(dims):
        s = scale if i == len(dims) - 1 else 1.0
        if d == x.dim() - 1:
            y = _fft_last(y, inverse, s)
        else:
            y = movedim(_fft_last(movedim(y, d, -1), inverse, s), -1, d)
    return y


def _scaled(x, scale):
    from .complex import real_view, complex_view
    return complex_view(real_view(x.contiguous()) * scale)


def _c2c_bwd(ctx, g):
    if not g.dtype.is_complex:
        from .complex import complex as mk
        g = mk(g, g * 0)
    return call(_c2c_op, g, ctx.dims, not ctx.inverse, ctx.scale), None, None, None


_c2c_op = register("fft_c2c", _c2c_fwd, _c2c_bwd)


def fft_c2c(x, dims, inverse, scale):
    """scale * the DFT (``inverse``: the unnormalized inverse DFT) of complex ``x`` over ``dims`` (a tuple of
    non-negative dims), differentiable (the backward is the adjoint transform)."""
    return call(_c2c_op, x, tuple(dims), bool(inverse), float(scale))


# ------------------------------------------------------------------------------------------ real input, even n
def _rfft_last_fwd(ctx, x, scale):
    """scale * the first n/2 + 1 DFT bins of real x (n = last dim, even) from one n/2-point complex transform of
    the samples paired as (even, odd) (the pairing is view_as_complex of x, no copy; kernel ``r2c_post``)."""
    from .complex import complex_view
    if ctx is not None:
        ctx.scale, ctx.n = scale, x._shape[-1]
    n = x._shape[-1]
    h = n // 2
    xc = x.contiguous()
    if xc._offset % 2:
        xc = xc.clone()
    z = complex_view(xc.view(xc._shape[:-1] + (h, 2)))
    batch = z.numel() // h if h else 0
    Z = _fft_last(z, False, 1.0)
    out = Tensor._make(Z._storage.__class__.empty(batch * (h + 1), Z.dtype, Z.device), x._shape[:-1] + (h + 1,))
    if batch:
        rt = out._storage.runtime()
        k, st = _kernel(rt, Z.dtype, "r2c_post")
        w = _table(x.device, Z.dtype, "r2c", n)
        _launch(rt, k, h + 1, batch, Z._storage.cl_buffer(), out._storage.cl_buffer(), w._storage.cl_buffer(),
                  h, st(scale))
        if out._storage.host is not None:
            rt.finish_if_exposed()
    return out


def _rfft_last_bwd(ctx, g):
    """The adjoint: the real part of scale * the unnormalized inverse DFT of g zero-padded to n bins."""
    from .complex import real
    from .joins import cat
    from .creation import zeros
    if not g.dtype.is_complex:
        from .complex import complex as mk
        g = mk(g, g * 0)
    pad = zeros(g._shape[:-1] + (ctx.n - g._shape[-1],), dtype=g.dtype, device=g.device)
    full = cat([g, pad], -1)
    return real(fft_c2c(full, (g.dim() - 1,), True, ctx.scale)), None


_rfft_op = register("rfft_last", _rfft_last_fwd, _rfft_last_bwd)


def rfft_last(x, scale):
    """scale * rfft of real float32/float64 ``x`` along its last dim, whose size must be even (>= 2);
    differentiable."""
    return call(_rfft_op, x, float(scale))
