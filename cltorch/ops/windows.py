"""PyTorch's window functions: ``hann_window``, ``hamming_window``, ``bartlett_window``, ``blackman_window``,
``kaiser_window``.

Each is computed on the host in float64 with numpy from PyTorch's documented formulas, then cast to
``dtype`` and copied once to ``device``. With ``periodic=True`` (the default) a window of length N is the
symmetric window of length N + 1 with its last sample dropped (the form ``stft`` wants). ``window_length``
0 gives an empty tensor, 1 gives ``[1.]``.

Formulas (n = 0..M-1, M = N if symmetric else N + 1, D = M - 1):
  hann:     0.5 - 0.5 cos(2 pi n / D)
  hamming:  alpha - beta cos(2 pi n / D)
  bartlett: 1 - |2 n / D - 1|
  blackman: 0.42 - 0.5 cos(2 pi n / D) + 0.08 cos(4 pi n / D)
  kaiser:   I0(beta sqrt(1 - (2 n / D - 1)^2)) / I0(beta)      (I0: numpy's ``np.i0``)
"""
import numpy as np

from .. import _dtype as D
from .creation import tensor as _tensor

__all__ = ["hann_window", "hamming_window", "bartlett_window", "blackman_window", "kaiser_window"]


def _check(name, window_length, dtype):
    if isinstance(window_length, bool) or not isinstance(window_length, (int, np.integer)):
        raise TypeError(f"{name}(): argument 'window_length' must be int, not {type(window_length).__name__}")
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={window_length}")
    dt = D.get_default_dtype() if dtype is None else dtype
    if not dt.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {dt}")
    return dt


def _make(name, window_length, periodic, dtype, device, requires_grad, f):
    dt = _check(name, window_length, dtype)
    n = int(window_length)
    if n == 0:
        w = np.zeros(0, np.float64)
    elif n == 1:
        w = np.ones(1, np.float64)
    else:
        m = n + 1 if periodic else n
        x = np.arange(m, dtype=np.float64) / (m - 1)       # n / D in [0, 1]
        w = f(x)[:n]
    return _tensor(w, dtype=dt, device=device, requires_grad=requires_grad)


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False,
                pin_memory=False):
    """PyTorch's ``torch.hann_window``: a 1-D tensor of ``window_length`` samples of
    0.5 - 0.5 cos(2 pi n / D). Raises RuntimeError for a negative length or a non-float dtype."""
    return _make("hann_window", window_length, periodic, dtype, device, requires_grad,
                 lambda x: 0.5 - 0.5 * np.cos(2 * np.pi * x))


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, layout=None,
                   device=None, requires_grad=False, pin_memory=False):
    """PyTorch's ``torch.hamming_window``: alpha - beta cos(2 pi n / D) (defaults 0.54, 0.46).
    Raises RuntimeError for a negative length or a non-float dtype."""
    return _make("hamming_window", window_length, periodic, dtype, device, requires_grad,
                 lambda x: alpha - beta * np.cos(2 * np.pi * x))


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False,
                    pin_memory=False):
    """PyTorch's ``torch.bartlett_window`` (triangular): 1 - |2 n / D - 1|.
    Raises RuntimeError for a negative length or a non-float dtype."""
    return _make("bartlett_window", window_length, periodic, dtype, device, requires_grad,
                 lambda x: 1.0 - np.abs(2.0 * x - 1.0))


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False,
                    pin_memory=False):
    """PyTorch's ``torch.blackman_window``: 0.42 - 0.5 cos(2 pi n / D) + 0.08 cos(4 pi n / D).
    Raises RuntimeError for a negative length or a non-float dtype."""
    return _make("blackman_window", window_length, periodic, dtype, device, requires_grad,
                 lambda x: 0.42 - 0.5 * np.cos(2 * np.pi * x) + 0.08 * np.cos(4 * np.pi * x))


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None, device=None,
                  requires_grad=False, pin_memory=False):
    """PyTorch's ``torch.kaiser_window``: I0(beta sqrt(1 - (2 n / D - 1)^2)) / I0(beta), I0 the modified
    Bessel function of order 0 (numpy's ``np.i0``). Raises RuntimeError for a negative length or a
    non-float dtype."""
    return _make("kaiser_window", window_length, periodic, dtype, device, requires_grad,
                 lambda x: np.i0(beta * np.sqrt(np.clip(1.0 - (2.0 * x - 1.0) ** 2, 0.0, None))) / np.i0(beta))
