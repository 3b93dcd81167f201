"""``stft`` / ``istft`` (PyTorch's short-time Fourier transform and its inverse) composed of cltorch.fft and tensor
ops, so both are differentiable.

stft: the signal (optionally padded by ``n_fft // 2`` on each side, ``pad_mode`` as F.pad) is cut into frames
of ``n_fft`` every ``hop_length`` samples (``unfold``), each frame multiplied by the window (zero-padded to
``n_fft`` in the middle), and transformed (``rfft`` when onesided, else ``fft``; ``normalized`` scales by
``n_fft ** -0.5``). Output (B?, n_freq, n_frames) complex, or its ``view_as_real`` for ``return_complex=False``.

istft: the inverse transform of each frame, times the window, overlap-added (``index_add``) and divided by the
overlap-added squared window (the least-squares inverse of Griffin and Lim, 1984, as PyTorch's); raises
RuntimeError where that envelope is ~0 inside the output ("window overlap add min"), as PyTorch.
"""
from .. import _dtype as D
from .._tensor import Tensor

__all__ = ["stft", "istft"]


def _window(window, n_fft, win_length, like, name):
    from ..ops.creation import ones, zeros
    from ..ops.joins import cat
    if win_length is None:
        win_length = n_fft if window is None else window.shape[0]
    if not 0 < win_length <= n_fft:
        raise RuntimeError(f"{name}: expected 0 < win_length <= n_fft, but got win_length={win_length}")
    rd = like.dtype.to_real() if like.dtype.is_complex else like.dtype
    if window is None:
        window = ones(win_length, dtype=rd, device=like.device)
    elif window.dim() != 1 or window.shape[0] != win_length:
        raise RuntimeError(f"{name}: expected a 1D window tensor of size equal to win_length={win_length}, but got "
                           f"window with size {list(window.shape)}")
    if win_length < n_fft:
        left = (n_fft - win_length) // 2
        window = cat([zeros(left, dtype=window.dtype, device=window.device), window,
                      zeros(n_fft - win_length - left, dtype=window.dtype, device=window.device)])
    return window


def stft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, pad_mode="reflect",  # noqa: A002
         normalized=False, onesided=None, return_complex=None, align_to_window=None):
    """PyTorch's ``torch.stft`` for a 1-d (L) or 2-d (B, L) signal; returns (B?, n_fft // 2 + 1 or n_fft, n_frames).

    Raises RuntimeError as PyTorch: ``return_complex`` not given for a real input, ``n_fft`` or ``hop_length``
    out of range, a window of the wrong size; NotImplementedError for ``align_to_window=True``."""
    from . import fft as _fft, rfft as _rfft
    from ..ops import complex as C
    if not isinstance(input, Tensor):
        raise TypeError(f"stft(): argument 'input' must be Tensor, not {type(input).__name__}")
    if return_complex is None:
        if not input.dtype.is_complex and not (window is not None and window.dtype.is_complex):
            raise RuntimeError("stft requires the return_complex parameter be given for real inputs, and will "
                               "further require that return_complex=True in a future PyTorch release.")
        return_complex = True
    if align_to_window:
        raise NotImplementedError("stft: align_to_window=True is not provided by cltorch")
    if input.dim() not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got {input.dim()}D")
    x = input if input.dim() == 2 else input.unsqueeze(0)
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        x = x.to(D.get_default_dtype())
    hop = n_fft // 4 if hop_length is None else hop_length
    if center:
        from ..ops.padding import pad
        p = n_fft // 2
        if x.dtype.is_complex:
            v = C.view_as_real(x).permute(0, 2, 1)
            x = C.view_as_complex(pad(v, (p, p), mode=pad_mode).permute(0, 2, 1).contiguous())
        else:
            x = pad(x.unsqueeze(1), (p, p), mode=pad_mode).squeeze(1)
    L = x.shape[-1]
    if not 0 < n_fft <= L:
        raise RuntimeError(f"stft: expected 0 < n_fft < {L}, but got n_fft={n_fft}")
    if hop <= 0:
        raise RuntimeError(f"stft: expected hop_length > 0, but got hop_length={hop}")
    w = _window(window, n_fft, win_length, x, "stft")
    frames = x.unfold(-1, n_fft, hop)                       # (B, n_frames, n_fft)
    frames = frames * w if not x.dtype.is_complex else C._mul(frames, w)
    if onesided is None:
        onesided = not (x.dtype.is_complex or w.dtype.is_complex)
    if onesided and (x.dtype.is_complex or w.dtype.is_complex):
        raise RuntimeError("Cannot have onesided output if window or input is complex")
    norm = "ortho" if normalized else "backward"
    spec = (_rfft if onesided else _fft)(frames, dim=-1, norm=norm).transpose(1, 2)
    if input.dim() == 1:
        spec = spec.squeeze(0)
    return spec if return_complex else C.view_as_real(spec)


def istft(input, n_fft, hop_length=None, win_length=None, window=None, center=True, normalized=False,  # noqa: A002
          onesided=None, length=None, return_complex=False):
    """PyTorch's ``torch.istft``: the inverse of :func:`stft` for a complex (B?, n_freq, n_frames) input. Raises
    RuntimeError for a real input, mismatched sizes, and where the window envelope vanishes."""
    from . import ifft as _ifft, irfft as _irfft
    from ..ops import complex as C
    from ..ops.creation import zeros, arange
    if not input.dtype.is_complex:
        raise RuntimeError("istft requires a complex-valued input tensor matching the output from stft with "
                           "return_complex=True.")
    z = input if input.dim() == 3 else input.unsqueeze(0)
    hop = n_fft // 4 if hop_length is None else hop_length
    n_freq, n_frames = z.shape[1], z.shape[2]
    if onesided is None:
        onesided = n_freq != n_fft
    if onesided and n_freq != n_fft // 2 + 1:
        raise RuntimeError(f"istft: expected the frequency dimension (size {n_freq}) to equal n_fft / 2 + 1 when "
                           "onesided=True")
    if not onesided and n_freq != n_fft:
        raise RuntimeError(f"istft: expected the frequency dimension (size {n_freq}) to equal n_fft when "
                           "onesided=False")
    if onesided and return_complex:
        raise RuntimeError("cannot have onesided output if window or input is complex")
    w = _window(window, n_fft, win_length, C.real(z) if z.dtype.is_complex else z, "istft")
    norm = "ortho" if normalized else "backward"
    spec = z.transpose(1, 2)                                  # (B, n_frames, n_freq)
    frames = _irfft(spec, n=n_fft, dim=-1, norm=norm) if onesided else _ifft(spec, n=n_fft, dim=-1, norm=norm)
    if not return_complex and frames.dtype.is_complex:
        frames = C.real(frames)
    frames = frames * w if not frames.dtype.is_complex else C._mul(frames, w)
    total = n_fft + hop * (n_frames - 1)
    idx = (arange(n_frames, device=z.device).unsqueeze(1) * hop + arange(n_fft, device=z.device)).reshape(-1)
    B = z.shape[0]
    y = zeros((B, total), dtype=frames.dtype, device=z.device).index_add(1, idx, frames.reshape(B, -1)) \
        if not frames.dtype.is_complex else \
        C.view_as_complex(zeros((B, total, 2), dtype=frames.dtype.to_real(), device=z.device).index_add(
            1, idx, C.view_as_real(frames).reshape(B, -1, 2)))
    env = zeros(total, dtype=w.dtype, device=z.device).index_add(0, idx, (w * w).repeat(n_frames))
    start = n_fft // 2 if center else 0
    end = total if length is None and not center else (start + length if length is not None else total - n_fft // 2)
    end = min(end, total)
    y, env = y[:, start:end], env[start:end]
    if env.numel() and (env.abs() < 1e-11).any().item():
        raise RuntimeError("istft: window overlap add min: the squared window's overlap-add is ~0 inside the "
                           "output; choose a window and hop_length that satisfy NOLA")
    y = y / env if not y.dtype.is_complex else C._div(y, env)
    if length is not None and y.shape[-1] < length:
        from ..ops.joins import cat
        y = cat([y, zeros((B, length - y.shape[-1]), dtype=y.dtype, device=y.device)], -1)
    return y.squeeze(0) if input.dim() == 2 else y


def _attach():
    from ..ops._util import method
    method("stft", stft)
    method("istft", istft)


_attach()
