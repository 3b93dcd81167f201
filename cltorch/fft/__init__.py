"""cltorch.fft: PyTorch's ``torch.fft`` (discrete Fourier transforms) on cltorch tensors.

Every transform is composed of one differentiable primitive, ``ops.fft.fft_c2c`` (a complex-to-complex DFT over
some dims, Stockham passes for 2/3/5/7-smooth sizes and Bluestein's chirp-z otherwise; see that module), and
ordinary tensor ops, so gradients flow through all of them:

- ``fft``/``ifft``/``fftn``...: the complex transform of the input (real inputs become complex, integers first
  become the default float dtype), zero-padded or trimmed to ``n``/``s``.
- ``rfft``: the complex transform of the real input, keeping the first ``n // 2 + 1`` bins of the last dim.
- ``irfft``: the Hermitian spectrum is rebuilt (``X[n-k] = conj(X[k])``), transformed back, and its real part taken:
  the imaginary parts of the zero (and, for even n, Nyquist) bins drop out, as in PyTorch, and the gradient is the
  exact derivative of that real-linear map (the doubled bins of PyTorch's backward come out of it).
- ``hfft(x) = irfft(conj(x))`` and ``ihfft(x) = conj(rfft(x))`` with the normalization reversed.

``norm``: "backward" (default; the inverse scales by 1/n), "ortho" (both 1/sqrt(n)), "forward" (the forward
scales by 1/n). Errors follow PyTorch: a bad ``norm``, ``n < 1``, mismatched ``s``/``dim``, repeated dims, a
complex input to ``rfft``/``ihfft`` raise RuntimeError (dims out of range: IndexError). float16/bfloat16 inputs raise
NotImplementedError (no complex32); float64 inputs give complex128, which needs a device with fp64.
"""
import math

from .. import _dtype as D
from .._tensor import Tensor
from ..ops.fft import fft_c2c, rfft_last
from ..ops import complex as _C

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2", "hfft2", "ihfft2",
           "fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn", "fftshift", "ifftshift", "fftfreq", "rfftfreq"]

_NORMS = ("backward", "ortho", "forward")
_SWAP = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _norm(norm):
    norm = "backward" if norm is None else norm
    if norm not in _NORMS:
        raise RuntimeError(f"Invalid normalization mode: \"{norm}\"")
    return norm


def _scale(norm, n, inverse):
    """The factor a transform of signal size n takes under ``norm``."""
    if norm == "ortho":
        return 1.0 / math.sqrt(n) if n else 1.0
    if (norm == "backward") == inverse:
        return 1.0 / n if n else 1.0
    return 1.0


def _float_of(x, name):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not {type(x).__name__}")
    dt = x.dtype
    if dt.is_complex:
        return x
    if dt is D.float16 or dt is D.bfloat16:
        raise NotImplementedError(f"{name}: {dt} inputs need complex32 results, which cltorch does not store; "
                                  "convert to float32 first")
    return x if dt.is_floating_point else x.to(D.get_default_dtype())


def _lift(x):
    """A real tensor as complex with zero imaginary part (differentiable: the gradient is the real part)."""
    from ..ops.creation import zeros_like
    return _C.complex(x, zeros_like(x))


def _to_complex(x, name):
    x = _float_of(x, name)
    return x if x.dtype.is_complex else _lift(x)


def _real_input(x, name):
    x = _float_of(x, name)
    if x.dtype.is_complex:
        raise RuntimeError(f"{name} expects a real input tensor, but got {_tname(x.dtype)}")
    return x


def _tname(dt):
    return {"complex64": "ComplexFloat", "complex128": "ComplexDouble"}.get(dt.name, dt.name.capitalize())


def _resize(x, d, n):
    """x along dim d trimmed or zero-padded to n (differentiable)."""
    size = x._shape[d]
    if n == size:
        return x
    if n < size:
        return x.narrow(d, 0, n)
    from ..ops.joins import cat
    from ..ops.creation import zeros
    shape = list(x._shape)
    shape[d] = n - size
    return cat([x, zeros(shape, dtype=x.dtype, device=x.device)], d)


def _check_n(n):
    if n < 1:
        raise RuntimeError(f"Invalid number of data points ({n}) specified")


def _dims(x, s, dim, name):
    """PyTorch's (s, dim) resolution for n-d transforms: the wrapped, unique dims and the signal size per dim
    (None where the input's size is kept)."""
    if dim is not None:
        dims = [dim] if isinstance(dim, int) else list(dim)
        dims = [x._wrap(d) for d in dims]
        if s is not None:
            s = list(s)
            if len(s) != len(dims):
                raise RuntimeError("When given, dim and shape arguments must have the same length")
    elif s is not None:
        s = list(s)
        if len(s) > x.dim():
            raise RuntimeError(f"Got shape with {len(s)} values but input tensor only has {x.dim()} dimensions.")
        dims = list(range(x.dim() - len(s), x.dim()))
    else:
        dims = list(range(x.dim()))
    if len(set(dims)) != len(dims):
        raise RuntimeError("FFT dims must be unique")
    sizes = [None] * len(dims) if s is None else [None if v == -1 else int(v) for v in s]
    for v in sizes:
        if v is not None:
            _check_n(v)
    return dims, sizes


def _c2c(x, dims, sizes, norm, inverse, name):
    norm = _norm(norm)
    x = _to_complex(x, name)
    for d, n in zip(dims, sizes):
        if n is not None:
            x = _resize(x, d, n)
        _check_n(x._shape[d])
    N = math.prod(x._shape[d] for d in dims)
    return fft_c2c(x, dims, inverse, _scale(norm, N, inverse))


def _r2c(x, dims, sizes, norm, name, onesided=True):
    """rfftn over dims (the last of them is halved): the full complex transform, then the first n//2+1 bins."""
    norm = _norm(norm)
    x = _real_input(x, name)
    for d, n in zip(dims, sizes):
        if n is not None:
            x = _resize(x, d, n)
        _check_n(x._shape[d])
    N = math.prod(x._shape[d] for d in dims)
    last = dims[-1]
    n = x._shape[last]
    if n % 2 == 0:      # the half-length complex transform of the paired samples (ops/fft.rfft_last)
        y = rfft_last(x.movedim(last, -1), _scale(norm, N, False)).movedim(-1, last)
        return fft_c2c(y, dims[:-1], False, 1.0) if len(dims) > 1 else y
    y = fft_c2c(_lift(x), dims, False, _scale(norm, N, False))
    return y.narrow(last, 0, n // 2 + 1)


def _c2r(x, dims, sizes, norm, name):
    """irfftn over dims: inverse complex transforms over all but the last dim, then the Hermitian rebuild and the
    inverse along the last, its real part."""
    norm = _norm(norm)
    x = _to_complex(x, name)
    last = dims[-1]
    n = sizes[-1] if sizes[-1] is not None else 2 * (x._shape[last] - 1)
    _check_n(n)
    for d, m in zip(dims[:-1], sizes[:-1]):
        if m is not None:
            x = _resize(x, d, m)
    x = _resize(x, last, n // 2 + 1)
    N = math.prod(x._shape[d] for d in dims[:-1]) * n
    if len(dims) > 1:
        x = fft_c2c(x, dims[:-1], True, 1.0)
    tail = n - n // 2 - 1            # bins n//2+1 .. n-1 are conj(X[n-k]), k = n-1 .. n//2+1
    if tail > 0:
        from ..ops.joins import cat
        mirror = _C.conj(x.narrow(last, 1, tail).flip(last))
        full = cat([x, mirror], last)
    else:
        full = x
    y = fft_c2c(full, (last,), True, _scale(norm, N, True))
    return _C.real(y)


# ------------------------------------------------------------------------------------------------- 1-d
def fft(input, n=None, dim=-1, norm=None, *, out=None):  # noqa: A002
    """The 1-d discrete Fourier transform along ``dim``, zero-padded or trimmed to ``n``. Real inputs give complex
    results (float32 -> complex64, float64 -> complex128)."""
    d = input._wrap(dim) if isinstance(input, Tensor) else dim
    if n is not None:
        _check_n(n)
    return _out(_c2c(input, [d], [n], norm, False, "fft"), out)


def ifft(input, n=None, dim=-1, norm=None, *, out=None):  # noqa: A002
    """The 1-d inverse DFT along ``dim`` (scaled by 1/n under the default norm)."""
    d = input._wrap(dim) if isinstance(input, Tensor) else dim
    if n is not None:
        _check_n(n)
    return _out(_c2c(input, [d], [n], norm, True, "ifft"), out)


def rfft(input, n=None, dim=-1, norm=None, *, out=None):  # noqa: A002
    """The DFT of a real input, its ``n // 2 + 1`` non-negative-frequency bins. Raises RuntimeError for a complex
    input."""
    d = input._wrap(dim) if isinstance(input, Tensor) else dim
    if n is not None:
        _check_n(n)
    return _out(_r2c(input, [d], [n], norm, "rfft"), out)


def irfft(input, n=None, dim=-1, norm=None, *, out=None):  # noqa: A002
    """The inverse of rfft: a real signal of length ``n`` (default ``2 * (m - 1)`` for m input bins)."""
    d = input._wrap(dim) if isinstance(input, Tensor) else dim
    return _out(_c2r(input, [d], [n], norm, "irfft"), out)


def hfft(input, n=None, dim=-1, norm=None, *, out=None):  # noqa: A002
    """The DFT of a Hermitian-symmetric signal given by its first half: real, of length ``n`` (default
    ``2 * (m - 1)``); ``irfft(conj(input))`` with the normalization reversed."""
    d = input._wrap(dim) if isinstance(input, Tensor) else dim
    x = _to_complex(input, "hfft")
    return _out(_c2r(_C.conj(x), [d], [n], _SWAP[_norm(norm)], "hfft"), out)


def ihfft(input, n=None, dim=-1, norm=None, *, out=None):  # noqa: A002
    """The inverse of hfft for a real input: ``conj(rfft(input))`` with the normalization reversed."""
    d = input._wrap(dim) if isinstance(input, Tensor) else dim
    if n is not None:
        _check_n(n)
    return _out(_C.conj(_r2c(input, [d], [n], _SWAP[_norm(norm)], "ihfft")), out)


# ------------------------------------------------------------------------------------------------- n-d
def fftn(input, s=None, dim=None, norm=None, *, out=None):  # noqa: A002
    """The n-d DFT over ``dim`` (default: the last ``len(s)`` dims, or all), each trimmed/padded to ``s``."""
    dims, sizes = _dims(input, s, dim, "fftn")
    return _out(_c2c(input, dims, sizes, norm, False, "fftn"), out)


def ifftn(input, s=None, dim=None, norm=None, *, out=None):  # noqa: A002
    """The n-d inverse DFT (see fftn)."""
    dims, sizes = _dims(input, s, dim, "ifftn")
    return _out(_c2c(input, dims, sizes, norm, True, "ifftn"), out)


def rfftn(input, s=None, dim=None, norm=None, *, out=None):  # noqa: A002
    """The n-d DFT of a real input, the last dim halved to ``n // 2 + 1`` bins."""
    dims, sizes = _dims(input, s, dim, "rfftn")
    if not dims:
        raise RuntimeError("rfftn must transform at least one axis")
    return _out(_r2c(input, dims, sizes, norm, "rfftn"), out)


def irfftn(input, s=None, dim=None, norm=None, *, out=None):  # noqa: A002
    """The inverse of rfftn: real output; the last dim's size defaults to ``2 * (m - 1)``."""
    dims, sizes = _dims(input, s, dim, "irfftn")
    if not dims:
        raise RuntimeError("irfftn must transform at least one axis")
    return _out(_c2r(input, dims, sizes, norm, "irfftn"), out)


def hfftn(input, s=None, dim=None, norm=None, *, out=None):  # noqa: A002
    """The n-d DFT of a Hermitian-symmetric signal given by its half (last dim): ``irfftn(conj(input))`` with the
    normalization reversed."""
    dims, sizes = _dims(input, s, dim, "hfftn")
    if not dims:
        raise RuntimeError("hfftn must transform at least one axis")
    x = _to_complex(input, "hfftn")
    return _out(_c2r(_C.conj(x), dims, sizes, _SWAP[_norm(norm)], "hfftn"), out)


def ihfftn(input, s=None, dim=None, norm=None, *, out=None):  # noqa: A002
    """The inverse of hfftn for a real input: ``conj(rfftn(input))`` with the normalization reversed."""
    dims, sizes = _dims(input, s, dim, "ihfftn")
    if not dims:
        raise RuntimeError("ihfftn must transform at least one axis")
    return _out(_C.conj(_r2c(input, dims, sizes, _SWAP[_norm(norm)], "ihfftn")), out)


def fft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):  # noqa: A002
    """fftn over two dims (default the last two)."""
    return fftn(input, s, dim, norm, out=out)


def ifft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):  # noqa: A002
    """ifftn over two dims (default the last two)."""
    return ifftn(input, s, dim, norm, out=out)


def rfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):  # noqa: A002
    """rfftn over two dims (default the last two)."""
    return rfftn(input, s, dim, norm, out=out)


def irfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):  # noqa: A002
    """irfftn over two dims (default the last two)."""
    return irfftn(input, s, dim, norm, out=out)


def hfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):  # noqa: A002
    """hfftn over two dims (default the last two)."""
    return hfftn(input, s, dim, norm, out=out)


def ihfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None):  # noqa: A002
    """ihfftn over two dims (default the last two)."""
    return ihfftn(input, s, dim, norm, out=out)


def _out(r, out):
    if out is None:
        return r
    if out.dtype is not r.dtype:
        raise RuntimeError(f"Expected out tensor to have dtype {r.dtype}, but got {out.dtype} instead")
    if tuple(out.shape) != tuple(r.shape):
        raise RuntimeError(f"out has shape {list(out.shape)}, the result has shape {list(r.shape)}")
    return out.copy_(r)


# ------------------------------------------------------------------------------------------------- helpers
def _shift(x, dim, inverse):
    if dim is None:
        dims = list(range(x.dim()))
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
    dims = [x._wrap(d) for d in dims]
    shifts = [(x._shape[d] + 1) // 2 if inverse else x._shape[d] // 2 for d in dims]
    if not dims:
        return x
    return x.roll(shifts, dims)


def fftshift(input, dim=None):  # noqa: A002
    """Moves the zero-frequency bin to the centre: a roll by ``n // 2`` along each of ``dim`` (default all)."""
    return _shift(input, dim, False)


def ifftshift(input, dim=None):  # noqa: A002
    """The inverse of fftshift: a roll by ``(n + 1) // 2`` along each of ``dim``."""
    return _shift(input, dim, True)


def _freq(values, n, d, dtype, device, requires_grad):
    from ..ops.creation import tensor
    import numpy as np
    dtype = D.get_default_dtype() if dtype is None else D.to_dtype(dtype)
    v = np.asarray(values, dtype=np.float64) * (1.0 / (n * d))
    return tensor(v, dtype=dtype, device=device, requires_grad=requires_grad)


def fftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, requires_grad=False, out=None):
    """The sample frequencies of an n-point DFT: ``[0, 1, ..., ceil(n/2) - 1, -floor(n/2), ..., -1] / (d * n)``."""
    import numpy as np
    if n < 0:
        raise RuntimeError(f"fftfreq: n must be non-negative, got {n}")
    k = np.concatenate([np.arange((n + 1) // 2), np.arange(-(n // 2), 0)]) if n else np.zeros(0)
    return _out(_freq(k, n, d, dtype, device, requires_grad), out)


def rfftfreq(n, d=1.0, *, dtype=None, layout=None, device=None, requires_grad=False, out=None):
    """The sample frequencies of rfft's bins: ``[0, 1, ..., n // 2] / (d * n)``."""
    import numpy as np
    if n < 0:
        raise RuntimeError(f"rfftfreq: n must be non-negative, got {n}")
    return _out(_freq(np.arange(n // 2 + 1), n, d, dtype, device, requires_grad), out)
