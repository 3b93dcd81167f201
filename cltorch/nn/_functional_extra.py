"""More of ``torch.nn.functional``, composed from cltorch ops (autograd differentiates through them): ``fold``
(col2im), ``lp_pool1d/2d/3d``, ``feature_alpha_dropout``, ``gumbel_softmax``, ``conv_tbc``, ``cross_map_lrn2d``
(the function behind ``nn.CrossMapLRN2d``) and the ``*_with_indices`` pooling aliases. Exported by
``cltorch.nn.functional``."""
import numpy as np

import cltorch as torch

__all__ = ["fold", "lp_pool1d", "lp_pool2d", "lp_pool3d", "feature_alpha_dropout", "gumbel_softmax", "conv_tbc",
           "max_pool1d_with_indices", "adaptive_max_pool2d_with_indices", "native_channel_shuffle"]


def _F():
    from . import functional
    return functional


def _tuple(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


# ------------------------------------------------------------------------------------------------ fold
def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):  # noqa: A002
    """Sums sliding local blocks into a tensor (col2im), the inverse layout of :func:`unfold`.

    input (N, C*kh*kw, L) or (C*kh*kw, L) -> (N, C, H, W) or (C, H, W) with ``(H, W) = output_size``; ``L`` must
    be the number of block positions. Overlapping entries are summed. Computed as one ``index_add`` over the
    flattened padded positions (its gradient is an ``index_select``, i.e. unfold), then a crop of the padding.
    Raises RuntimeError for a wrong input rank, a channel count not divisible by kh*kw, or a wrong L.
    """
    if input.dim() not in (2, 3):
        raise RuntimeError("Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported (got "
                           f"{input.dim()}D)")
    batched = input.dim() == 3
    x = input if batched else input.unsqueeze(0)
    H, W = _tuple(output_size, 2)
    kh, kw = _tuple(kernel_size, 2)
    dh, dw = _tuple(dilation, 2)
    ph, pw = _tuple(padding, 2)
    sh, sw = _tuple(stride, 2)
    N, CK, L = x.shape
    if CK % (kh * kw) != 0:
        raise RuntimeError("Expected size of input's dimension 1 to be divisible by the product of kernel_size, but "
                           f"got input.size(1)={CK} and kernel_size=({kh}, {kw})")
    Hp, Wp = H + 2 * ph, W + 2 * pw
    oh = (Hp - (dh * (kh - 1) + 1)) // sh + 1
    ow = (Wp - (dw * (kw - 1) + 1)) // sw + 1
    if oh <= 0 or ow <= 0 or oh * ow != L:
        raise RuntimeError(f"Given output_size=({H}, {W}), kernel_size=({kh}, {kw}), dilation=({dh}, {dw}), "
                           f"padding=({ph}, {pw}), stride=({sh}, {sw}), expected size of input's dimension 2 to match "
                           f"the calculated number of sliding blocks {oh} * {ow} = {oh * ow}, but got "
                           f"input.size(2)={L}.")
    C = CK // (kh * kw)
    rows = np.arange(kh)[:, None, None, None] * dh + np.arange(oh)[None, None, :, None] * sh
    cols = np.arange(kw)[None, :, None, None] * dw + np.arange(ow)[None, None, None, :] * sw
    idx = torch.from_numpy((rows * Wp + cols).reshape(-1).astype(np.int64)).to(x.device)
    out = torch.zeros((N, C, Hp * Wp), dtype=x.dtype, device=x.device)
    out = out.index_add(2, idx, x.reshape(N, C, kh * kw * L)).reshape(N, C, Hp, Wp)
    if ph or pw:
        out = out[:, :, ph:ph + H, pw:pw + W]
    return out if batched else out.squeeze(0)


# ------------------------------------------------------------------------------------------------ power-average pooling
def _lp_finish(out, norm_type, window):
    return (torch.sign(out) * torch.relu(torch.abs(out))).mul(window).pow(1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):  # noqa: A002
    """Power-average pooling ``(sum over the window of x^p)^(1/p)`` over (N, C, L) or (C, L), as PyTorch: an
    ``avg_pool1d`` of ``x^p`` times the window size, then the 1/p power (negative averages give NaN/0 as there)."""
    F = _F()
    out = F.avg_pool1d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return _lp_finish(out, norm_type, kernel_size)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):  # noqa: A002
    """Power-average pooling over (N, C, H, W) or (C, H, W); see :func:`lp_pool1d`."""
    F = _F()
    kh, kw = _tuple(kernel_size, 2)
    out = F.avg_pool2d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return _lp_finish(out, norm_type, kh * kw)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):  # noqa: A002
    """Power-average pooling over (N, C, D, H, W) or (C, D, H, W); see :func:`lp_pool1d`."""
    F = _F()
    kd, kh, kw = _tuple(kernel_size, 3)
    out = F.avg_pool3d(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    return _lp_finish(out, norm_type, kd * kh * kw)


# ------------------------------------------------------------------------------------------------ dropout
_ALPHA = 1.7580993408473766  # -SELU's negative saturation (scale * alpha)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):  # noqa: A002
    """Alpha dropout of whole channels: input (N, C, *) (at least 2-D); each (n, c) channel is kept with
    probability 1-p, else set to SELU's saturation value, then an affine map keeps mean and variance, as PyTorch's
    ``feature_alpha_dropout``. The mask comes from the Philox generator (``bernoulli_``). Raises ValueError for p
    outside [0, 1] and RuntimeError for an input of fewer than 2 dims (in training)."""
    F = _F()
    F._check_p(p)
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if p == 1.0:
        return input.mul_(0.0) if inplace else input * 0.0
    if input.dim() < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    noise = F._keep_mask(tuple(input.shape[:2]) + (1,) * (input.dim() - 2), 1.0 - p, input)
    a = 1.0 / ((_ALPHA * _ALPHA * p + 1) * (1 - p)) ** 0.5
    b = (noise - 1.0) * (_ALPHA * a) + _ALPHA * a * p
    noise = noise * a
    if inplace:
        return input.mul_(noise).add_(b)
    return input * noise + b


# ------------------------------------------------------------------------------------------------ misc
def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """Samples from the Gumbel-Softmax distribution: ``softmax((logits + g) / tau, dim)`` with ``g = -log(E)``,
    E ~ Exp(1) from the Philox generator. ``hard=True`` returns the one-hot of the argmax in the forward and the
    soft sample's gradient (straight-through). Same shape and dtype as ``logits``. ``eps`` is unused, as in
    PyTorch (deprecated there)."""
    gumbels = -torch.empty_like(logits).exponential_().log()
    y_soft = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.max(dim, keepdim=True)[1]
    y_hard = torch.zeros_like(logits).scatter_(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


def conv_tbc(input, weight, bias, pad=0):  # noqa: A002
    """1-D convolution in (time, batch, channel) layout: input (T, B, C_in), weight (K, C_in, C_out), bias (C_out,)
    -> (T + 2*pad - K + 1, B, C_out). A ``conv1d`` on the permuted operands."""
    if input.dim() != 3 or weight.dim() != 3:
        raise RuntimeError(f"conv_tbc: input must have 3 dims and weight 3 dims (got {input.dim()} and "
                           f"{weight.dim()})")
    if input.shape[2] != weight.shape[1]:
        raise RuntimeError(f"conv_tbc: input channels ({input.shape[2]}) must equal weight.size(1) "
                           f"({weight.shape[1]})")
    out = _F().conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, 1, pad)
    return out.permute(2, 0, 1)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
                            return_indices=False):
    """``max_pool1d(..., return_indices=True)``: (values, indices)."""
    return _F().max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):  # noqa: A002
    """``adaptive_max_pool2d(..., return_indices=True)``: (values, indices)."""
    return _F().adaptive_max_pool2d(input, output_size, True)


def native_channel_shuffle(input, groups):  # noqa: A002
    """``channel_shuffle(input, groups)`` (PyTorch's native entry point): (N, C, *) with C divisible by groups."""
    return _F().channel_shuffle(input, groups)


def cross_map_lrn2d(input, size, alpha=1e-4, beta=0.75, k=1.0):  # noqa: A002
    """PyTorch's legacy cross-channel LRN on (N, C, H, W): ``x * (k + alpha/size * S)^-beta`` where S sums x^2 over
    the channel windows of PyTorch's running-sum recurrence (``pre_pad = (size-1)//2 + 1``; as there, channel 0 is
    never subtracted from the running sum, so it counts in every channel's window). The windows are a (C, C) 0/1
    matrix built on the host and applied with one ``tensordot``; the gradient is that of this forward (PyTorch's own
    backward differs from its forward's gradient, and fails for some sizes). Raises ValueError for non-4-D input."""
    if input.dim() != 4:
        raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.dim()}D instead.")
    C = input.shape[1]
    pre_pad = int((size - 1) / 2 + 1)
    win = np.zeros((C, C), dtype=np.float64)     # win[c, j]: channel j's square counts in channel c's sum
    if C:
        win[0, :min(pre_pad, C)] = 1
    for c in range(1, C):
        win[c] = win[c - 1]
        if c < C - pre_pad + 1:
            win[c, c + pre_pad - 1] += 1
        if c > pre_pad:
            win[c, c - pre_pad] -= 1
    w = torch.from_numpy(win.astype(np.float32)).to(device=input.device, dtype=input.dtype)
    s = torch.tensordot(input * input, w, dims=([1], [1])).permute(0, 3, 1, 2)
    return input * (s * (alpha / size) + k).pow(-beta)
