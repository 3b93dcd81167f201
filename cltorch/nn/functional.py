"""``cltorch.nn.functional``: PyTorch's functional layer API (``torch.nn.functional``).

Floor 7 (DESIGN.md): written only against cltorch's public API. Fused kernels (convolution, pooling,
padding, softmax, norms, losses, embedding, scaled-dot-product attention) are ops of ``cltorch.ops`` that
the functions here call, found by name at call time (``_op``), so this file never touches OpenCL.
The activations (in ``_functional_activation.py``, exported here) are ops of ``cltorch.ops.activations``
with PyTorch's derivative formulas, including their kinks (e.g. ``hardtanh``'s gradient is 0 at the
boundaries, as PyTorch's ``hardtanh_backward``), and in-place forms that keep what PyTorch keeps. Dropout
draws its mask with the Philox generator (``bernoulli_``), so a seed gives the same mask on every device.
"""
import importlib
import math
import numbers
import warnings

import numpy as np

import cltorch as torch
from ._functional_activation import *  # noqa: F401,F403  (the activations)
from ._functional_activation import _SELU_ALPHA, _SELU_SCALE
from . import _functional_activation as _fa
from ..ops.statistics import pdist  # noqa: F401  (torch.nn.functional.pdist)


def _adopt(module):
    """The functions ``module`` defines are ``cltorch.nn.functional``'s, as in torch: a pickled reference to one
    (e.g. a TransformerEncoderLayer's ``activation``) names this public module, so it loads in torch too."""
    for _name in getattr(module, "__all__", ()):
        _fn = getattr(module, _name)
        if callable(_fn) and getattr(_fn, "__module__", None) == module.__name__:
            _fn.__module__ = __name__


_adopt(_fa)

from ._functional_pooling import *  # noqa: F401,F403,E402  (3-d conv/pooling, unpooling, fractional pooling)
from . import _functional_pooling as _fpool  # noqa: E402
from ._functional_more import *  # noqa: F401,F403,E402  (losses, embedding_bag, grid_sample, bicubic, ...)
from . import _functional_more as _fmore  # noqa: E402
_adopt(_fpool)
_adopt(_fmore)
from ._functional_extra import *  # noqa: F401,F403,E402  (fold, lp_pool*, feature_alpha_dropout, gumbel_softmax, ...)
from ._functional_extra import cross_map_lrn2d  # noqa: F401,E402
from . import _functional_extra as _fextra  # noqa: E402
_adopt(_fextra)

__all__ = [
    "conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d", "max_pool1d", "max_pool2d", "avg_pool1d",
    "avg_pool2d", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool2d", "max_pool2d_with_indices",
    "pad", "interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "linear", "bilinear", "threshold",
    "threshold_", "relu", "relu_", "relu6", "elu", "elu_", "selu", "selu_", "celu", "celu_", "leaky_relu",
    "leaky_relu_", "prelu", "rrelu", "rrelu_", "glu", "gelu", "logsigmoid", "hardshrink", "tanhshrink", "softsign",
    "softplus", "softmin", "softmax", "log_softmax", "softshrink", "tanh", "sigmoid", "hardsigmoid", "silu", "mish",
    "hardswish", "hardtanh", "hardtanh_", "batch_norm", "instance_norm", "layer_norm", "rms_norm", "group_norm",
    "normalize", "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "embedding", "one_hot",
    "pairwise_distance", "cosine_similarity", "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss",
    "huber_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "poisson_nll_loss", "gaussian_nll_loss",
    "margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss", "cosine_embedding_loss",
    "triplet_margin_loss", "multilabel_soft_margin_loss", "scaled_dot_product_attention",
    "multi_head_attention_forward", "pixel_shuffle", "pixel_unshuffle", "unfold", "channel_shuffle",
]
__all__ += _fpool.__all__ + _fmore.__all__ + _fextra.__all__

_OPS = {}


def _op(modules, name):
    """The op ``cltorch.ops.<module>.<name>`` (``modules``: one op module or several to look in, in order);
    NotImplementedError when that op does not exist (yet)."""
    key = (modules, name)
    fn = _OPS.get(key)
    if fn is None:
        for module in (modules,) if isinstance(modules, str) else modules:
            try:
                mod = importlib.import_module(f"cltorch.ops.{module}")
            except ImportError:
                continue
            fn = getattr(mod, name, None)
            if fn is not None:
                break
        if fn is None:
            raise NotImplementedError(f"nn.functional.{name} needs the op cltorch.ops.{modules}.{name}, "
                                      "which this build does not have")
        _OPS[key] = fn
    return fn


def _has_op(module, name):
    try:
        _op(module, name)
        return True
    except NotImplementedError:
        return False


class _Reduction:
    @staticmethod
    def legacy_get_string(size_average, reduce, emit_warning=True):
        """The ``reduction`` string for the deprecated ``size_average`` / ``reduce`` flags."""
        if size_average is None:
            size_average = True
        if reduce is None:
            reduce = True
        if emit_warning:
            warnings.warn("size_average and reduce args will be deprecated, please use reduction='{}' instead."
                          .format("mean" if size_average and reduce else ("sum" if reduce else "none")),
                          stacklevel=3)
        if size_average and reduce:
            return "mean"
        if reduce:
            return "sum"
        return "none"


def _reduction(size_average, reduce, reduction):
    if size_average is not None or reduce is not None:
        return _Reduction.legacy_get_string(size_average, reduce)
    return reduction


def _apply_reduction(loss, reduction):
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _pair(v, n=2):
    if isinstance(v, (tuple, list)):
        return tuple(v)
    return (v,) * n


# ------------------------------------------------------------------------------------------------ convolution
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """1-D convolution (cross-correlation): input (N, C_in, L) or (C_in, L), weight (C_out, C_in/groups, k).
    padding: int, tuple, 'valid' or 'same'."""
    return _op("conv", "conv1d")(input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """2-D convolution (cross-correlation): input (N, C_in, H, W) or (C_in, H, W), weight
    (C_out, C_in/groups, kH, kW). padding: int, pair, 'valid' or 'same' ('same' refuses stride > 1)."""
    return _op("conv", "conv2d")(input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,  # noqa: A002
                     dilation=1):
    """Transposed 1-D convolution; weight (C_in, C_out/groups, k)."""
    return _op("conv", "conv_transpose1d")(input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,  # noqa: A002
                     dilation=1):
    """Transposed 2-D convolution; weight (C_in, C_out/groups, kH, kW)."""
    return _op("conv", "conv_transpose2d")(input, weight, bias, stride, padding, output_padding, groups, dilation)


# ------------------------------------------------------------------------------------------------ pooling
def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
               return_indices=False):
    """2-D max pooling over (N, C, H, W) or (C, H, W); stride defaults to kernel_size; padding acts as -inf.
    ``return_indices=True`` also returns the flat (H*W) index of each maximum."""
    if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0):
        stride = kernel_size
    return _op("pool", "max_pool2d")(input, kernel_size, stride, padding, dilation, ceil_mode=ceil_mode,
                                     return_indices=return_indices)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
                            return_indices=True):
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,  # noqa: A002
               divisor_override=None):
    """2-D average pooling over (N, C, H, W) or (C, H, W); stride defaults to kernel_size."""
    if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0):
        stride = kernel_size
    return _op("pool", "avg_pool2d")(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                                     divisor_override)


def adaptive_avg_pool2d(input, output_size):  # noqa: A002
    """Average pooling to ``output_size`` (int or pair; None keeps that dim) with PyTorch's bin edges
    ``floor(i*In/Out)`` .. ``ceil((i+1)*In/Out)``."""
    return _op("pool", "adaptive_avg_pool2d")(input, output_size)


def adaptive_max_pool2d(input, output_size, return_indices=False):  # noqa: A002
    return _op("pool", "adaptive_max_pool2d")(input, output_size, return_indices)


def _as_2d_pool(input, fn):  # noqa: A002
    """Run a 2-D pooling op on (N, C, L) / (C, L) by inserting a height of 1."""
    x = input.unsqueeze(-2)
    r = fn(x)
    if isinstance(r, tuple):
        return tuple(t.squeeze(-2) for t in r)
    return r.squeeze(-2)


def _one(v):
    return v[0] if isinstance(v, (tuple, list)) else v


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,  # noqa: A002
               return_indices=False):
    """1-D max pooling over (N, C, L) or (C, L) (a 2-D pooling with a window height of 1)."""
    k = _one(kernel_size)
    s = k if stride is None or stride == () else _one(stride)
    return _as_2d_pool(input, lambda x: max_pool2d(x, (1, k), (1, s), (0, _one(padding)), (1, _one(dilation)),
                                                   ceil_mode, return_indices))


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):  # noqa: A002
    """1-D average pooling over (N, C, L) or (C, L)."""
    k = _one(kernel_size)
    s = k if stride is None or stride == () else _one(stride)
    return _as_2d_pool(input, lambda x: avg_pool2d(x, (1, k), (1, s), (0, _one(padding)), ceil_mode,
                                                   count_include_pad))


def adaptive_avg_pool1d(input, output_size):  # noqa: A002
    return _as_2d_pool(input, lambda x: adaptive_avg_pool2d(x, (1, _one(output_size))))


# ------------------------------------------------------------------------------------------------ padding, resize
def pad(input, pad, mode="constant", value=None):  # noqa: A002
    """Pad the last ``len(pad)//2`` dims; ``pad`` lists (left, right) pairs starting from the LAST dim.
    Modes 'constant' (``value``, default 0), 'reflect', 'replicate', 'circular'."""
    return _op("padding", "pad")(input, pad, mode, value)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,  # noqa: A002
                recompute_scale_factor=None, antialias=False):
    """Resize (N, C, *spatial) to ``size`` or by ``scale_factor``; modes 'nearest' and 'bilinear' at least."""
    if mode == "bicubic" or (mode == "area" and input.dim() == 5):
        return _fmore.interpolate_extra(input, size, scale_factor, mode, align_corners, recompute_scale_factor,
                                        antialias)
    return _op("padding", "interpolate")(input, size, scale_factor, mode, align_corners, recompute_scale_factor,
                                         antialias)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):  # noqa: A002
    warnings.warn("nn.functional.upsample is deprecated. Use nn.functional.interpolate instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):  # noqa: A002
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):  # noqa: A002
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ------------------------------------------------------------------------------------------------ rearrangements
def pixel_shuffle(input, upscale_factor):  # noqa: A002
    """(*, C r^2, H, W) -> (*, C, H r, W r) (Shi et al. 2016), a reshape and a permute."""
    r = int(upscale_factor)
    if input.dim() < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.dim()} dimension(s)")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    n = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):  # noqa: A002
    """(*, C, H r, W r) -> (*, C r^2, H, W), the inverse of :func:`pixel_shuffle`."""
    r = int(downscale_factor)
    if input.dim() < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.dim()} dimension(s)")
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle expects height and width to be divisible by downscale_factor, but got "
                           f"{h} and {w} with downscale_factor={r}")
    n = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)


def channel_shuffle(input, groups):  # noqa: A002
    """(N, g*k, *) -> channels regrouped as (k, g) (Zhang et al. 2018, ShuffleNet)."""
    n, c = input.shape[0], input.shape[1]
    rest = tuple(input.shape[2:])
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    return input.reshape(n, groups, c // groups, *rest).transpose(1, 2).reshape(n, c, *rest)


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):  # noqa: A002
    """Sliding local blocks (im2col): (N, C, H, W) or (C, H, W) -> (N, C*kh*kw, L) with L the number of
    window positions, channel-major then kernel row then column, as PyTorch. Computed as ``pad`` and one
    ``index_select`` over the flattened (H*W) positions, whose gradient (``index_add``) sums the overlapping
    windows (col2im)."""
    batched = input.dim() == 4
    if input.dim() not in (3, 4):
        raise RuntimeError(f"Input Error: Only 3D or 4D input Tensors are supported (got {input.dim()}D)")
    x = input if batched else input.unsqueeze(0)
    kh, kw = _pair(kernel_size)
    dh, dw = _pair(dilation)
    ph, pw = _pair(padding)
    sh, sw = _pair(stride)
    if ph or pw:
        x = pad(x, (pw, pw, ph, ph))
    N, C, H, W = x.shape
    oh = (H - (dh * (kh - 1) + 1)) // sh + 1
    ow = (W - (dw * (kw - 1) + 1)) // sw + 1
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"Given input with spatial size ({H - 2 * ph}, {W - 2 * pw}), kernel_size=({kh}, {kw}), "
                           f"dilation=({dh}, {dw}), padding=({ph}, {pw}), calculated shape of the array of sliding "
                           "blocks is non-positive.")
    rows = (np.arange(kh)[:, None, None, None] * dh + np.arange(oh)[None, None, :, None] * sh)
    cols = (np.arange(kw)[None, :, None, None] * dw + np.arange(ow)[None, None, None, :] * sw)
    idx = torch.from_numpy((rows * W + cols).reshape(-1).astype(np.int64)).to(x.device)
    out = x.reshape(N, C, H * W).index_select(2, idx).reshape(N, C * kh * kw, oh * ow)
    return out if batched else out.squeeze(0)


# ------------------------------------------------------------------------------------------------ linear
def linear(input, weight, bias=None):  # noqa: A002
    """``input @ weight.T + bias``: input (*, in), weight (out, in), bias (out,) -> (*, out)."""
    return torch.linear(input, weight, bias)


def bilinear(input1, input2, weight, bias=None):
    """``y_o = x1^T A_o x2 + b_o``: input1 (*, in1), input2 (*, in2), weight (out, in1, in2), bias (out,)
    -> (*, out). Computed as one GEMM of x1 against A (rearranged to (in1, out*in2)), then a product with
    x2 summed over in2."""
    if input1.shape[:-1] != input2.shape[:-1]:
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got {list(input1.shape[:-1])} and "
                           f"{list(input2.shape[:-1])}")
    if weight.dim() != 3 or input1.shape[-1] != weight.shape[1] or input2.shape[-1] != weight.shape[2]:
        raise RuntimeError(f"bilinear(): input sizes {input1.shape[-1]}, {input2.shape[-1]} do not match weight "
                           f"{list(weight.shape)}")
    out, i1, i2 = weight.shape
    lead = input1.shape[:-1]
    a = weight.permute(1, 0, 2).reshape(i1, out * i2)
    t = torch.matmul(input1.reshape(-1, i1), a).reshape(-1, out, i2)
    y = (t * input2.reshape(-1, 1, i2)).sum(-1)
    if bias is not None:
        y = y + bias
    return y.reshape(tuple(lead) + (out,))


# ------------------------------------------------------------------------------------------------ softmax (the other
# activations are in _functional_activation.py)
def _inplace_result(input, r):  # noqa: A002
    return input.copy_(r)


def softmax(input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002
    """Softmax along ``dim`` (fused kernel). ``dim=None`` picks PyTorch's deprecated implicit dim."""
    return _op("softmax", "softmax")(input, dim, dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002
    """log(softmax(x)) along ``dim``, computed stably (fused kernel)."""
    return _op("softmax", "log_softmax")(input, dim, dtype)


def softmin(input, dim=None, _stacklevel=3, dtype=None):  # noqa: A002
    return softmax(-input, dim, _stacklevel, dtype)


# ------------------------------------------------------------------------------------------------ normalisation
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,  # noqa: A002
               eps=1e-5):
    """Batch normalisation over (N, C, *) per channel; in training the running statistics (if given) are
    updated in place with ``momentum`` (unbiased variance), as PyTorch does."""
    return _op("norms", "batch_norm")(input, running_mean, running_var, weight, bias, training, momentum, eps)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,  # noqa: A002
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    return _op("norms", "instance_norm")(input, running_mean, running_var, weight, bias, use_input_stats,
                                         momentum, eps)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):  # noqa: A002
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over the trailing ``normalized_shape`` dims (biased
    variance; eps inside the square root)."""
    return _op("norms", "layer_norm")(input, normalized_shape, weight, bias, eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):  # noqa: A002
    """``x / sqrt(mean(x^2) + eps) * weight`` over the trailing dims; eps=None uses finfo(dtype).eps."""
    return _op("norms", "rms_norm")(input, normalized_shape, weight, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):  # noqa: A002
    """Normalise (N, C, *) over groups of C/num_groups channels, then the per-channel affine."""
    return _op("norms", "group_norm")(input, num_groups, weight, bias, eps)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):  # noqa: A002
    """``x / max(||x||_p, eps)`` along ``dim``."""
    n = torch.norm(input, p, dim, keepdim=True).clamp(min=eps)
    r = input / n
    return r if out is None else out.copy_(r)


# ------------------------------------------------------------------------------------------------ dropout
def _keep_mask(shape, keep, like):
    """A float mask of ``shape`` (like's dtype and device) with ones drawn with probability ``keep``."""
    m = torch.empty(shape, dtype=like.dtype, device=like.device)
    if not hasattr(m, "bernoulli_"):
        raise NotImplementedError("dropout needs Tensor.bernoulli_ (the Philox RNG op), which this build lacks")
    return m.bernoulli_(keep)


def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _dropout_with_mask_shape(input, p, training, inplace, mask_shape):  # noqa: A002
    _check_p(p)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input.mul_(0.0) if inplace else input * 0.0
    scale = _keep_mask(mask_shape, 1.0 - p, input).mul_(1.0 / (1.0 - p))
    return input.mul_(scale) if inplace else input * scale


def dropout(input, p=0.5, training=True, inplace=False):  # noqa: A002
    """Zero each element with probability ``p`` and scale the rest by ``1/(1-p)`` (training only). The
    Bernoulli mask comes from the global Philox generator, so a seed gives the same mask on every device."""
    return _dropout_with_mask_shape(input, p, training, inplace, input.shape)


def _feature_dropout(input, p, training, inplace, batched_dim, name):  # noqa: A002
    nd = input.dim()
    if nd not in (batched_dim - 1, batched_dim):
        raise RuntimeError(f"{name}: Expected {batched_dim - 1}D or {batched_dim}D input, but received a {nd}D "
                           "input.")
    keep = 2 if nd == batched_dim else 1
    mask_shape = tuple(input.shape[:keep]) + (1,) * (nd - keep)
    return _dropout_with_mask_shape(input, p, training, inplace, mask_shape)


def dropout1d(input, p=0.5, training=True, inplace=False):  # noqa: A002
    """Zero whole channels of (N, C, L) or (C, L) with probability p."""
    return _feature_dropout(input, p, training, inplace, 3, "dropout1d")


def dropout2d(input, p=0.5, training=True, inplace=False):  # noqa: A002
    """Zero whole channels of (N, C, H, W) or (C, H, W) with probability p. A 3-D input is taken as
    (N, C, L) with a warning, as PyTorch does."""
    _check_p(p)
    nd = input.dim()
    if nd not in (3, 4):
        warnings.warn(f"dropout2d: Received a {nd}-D input to dropout2d, which is deprecated and will result in an "
                      "error in a future release.", stacklevel=2)
    if nd == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout behavior "
                      "is desired - input is interpreted as shape (N, C, L), where C is the channel dim.", stacklevel=2)
    if nd < 2:
        return dropout(input, p, training, inplace)
    mask_shape = tuple(input.shape[:2]) + (1,) * (nd - 2)
    return _dropout_with_mask_shape(input, p, training, inplace, mask_shape)


def dropout3d(input, p=0.5, training=True, inplace=False):  # noqa: A002
    return _feature_dropout(input, p, training, inplace, 5, "dropout3d")


def alpha_dropout(input, p=0.5, training=False, inplace=False):  # noqa: A002
    """Dropout that keeps SELU's mean and variance (Klambauer et al. 2017)."""
    _check_p(p)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    alpha_p = -_SELU_ALPHA * _SELU_SCALE
    keep = _keep_mask(input.shape, 1.0 - p, input)
    a = ((1 - p) * (1 + p * alpha_p ** 2)) ** -0.5
    b = -a * alpha_p * p
    r = (input * keep + (1 - keep) * alpha_p) * a + b
    return _inplace_result(input, r) if inplace else r


# ------------------------------------------------------------------------------------------------ sparse
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,  # noqa: A002
              scale_grad_by_freq=False, sparse=False):
    """Rows of ``weight`` (num_embeddings, dim) picked by the integer ``input`` (any shape) -> (*, dim).
    ``padding_idx``: that row gets no gradient. ``max_norm``: the referenced rows whose norm exceeds it are
    rescaled in place first (under no_grad), as PyTorch does. Out-of-range indices raise IndexError."""
    if padding_idx is not None:
        n = weight.shape[0]
        if padding_idx > 0 and padding_idx >= n:
            raise AssertionError("Padding_idx must be within num_embeddings")
        if padding_idx < 0:
            if padding_idx < -n:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx = n + padding_idx
    if max_norm is not None:
        _embedding_renorm_(weight, input, max_norm, norm_type)
    if sparse:
        raise NotImplementedError("sparse gradients are not supported; use sparse=False")
    out = _op("indexing", "embedding")(input, weight, padding_idx)
    if scale_grad_by_freq and torch.is_grad_enabled() and weight.requires_grad:
        # each row's gradient divided by its frequency in input: the value is out, the gradient out * scale
        with torch.no_grad():
            idx = input.reshape(-1).long()
            counts = _op("indexing", "index_add")(torch.zeros(weight.shape[0], dtype=weight.dtype,
                                                              device=weight.device), 0, idx,
                                                  torch.ones(idx.shape[0], dtype=weight.dtype, device=weight.device))
            scale = (1.0 / counts.clamp(min=1)).index_select(0, idx).reshape(*input.shape, 1)
        out = out * scale + (out * (1.0 - scale)).detach()
    return out


def _embedding_renorm_(weight, input, max_norm, norm_type):  # noqa: A002
    """Rescale in place, under no_grad, the rows of weight referenced by input whose p-norm exceeds max_norm
    to norm ``max_norm`` (PyTorch's ``embedding_renorm_``: scale = max_norm / (norm + 1e-7))."""
    with torch.no_grad():
        n = weight.shape[0]
        idx = input.reshape(-1).long()
        counts = _op("indexing", "index_add")(torch.zeros(n, dtype=weight.dtype, device=weight.device), 0, idx,
                                              torch.ones(idx.shape[0], dtype=weight.dtype, device=weight.device))
        used = counts > 0
        norms = torch.norm(weight, norm_type, 1)
        scale = torch.where(used & (norms > max_norm), max_norm / (norms + 1e-7), 1.0)
        weight.mul_(scale.unsqueeze(1).to(weight.dtype))


def one_hot(tensor, num_classes=-1):
    """int64 tensor (*, num_classes) with a 1 at each index of ``tensor``."""
    return _op(("indexing", "joins"), "one_hot")(tensor, num_classes)


# ------------------------------------------------------------------------------------------------ distances
def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """``||x1 - x2 + eps||_p`` over the last dim."""
    return torch.norm(x1 - x2 + eps, p, -1, keepdim=keepdim)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """``sum((x1 / max(||x1||, eps)) * (x2 / max(||x2||, eps)), dim)``, as PyTorch's ATen computes it: the two
    inputs broadcast first (so each norm is over the broadcast shape) in their common dtype, which must be
    floating (RuntimeError otherwise), and the clamp to ``eps`` is outside the graph (the gradient is the
    unclamped norm's)."""
    dt = torch.promote_types(x1.dtype, x2.dtype)
    if not dt.is_floating_point:
        from ..ops.reductions import _scalar_name
        raise RuntimeError(f"expected common dtype to be floating point, yet common dtype is {_scalar_name(dt)}")
    x1, x2 = torch.broadcast_tensors(x1.to(dt), x2.to(dt))

    def _clamped_norm(x):
        n = torch.linalg.vector_norm(x, 2, dim, keepdim=True)
        return n + (n.clamp(min=eps) - n).detach()

    return ((x1 / _clamped_norm(x1)) * (x2 / _clamped_norm(x2))).sum(dim)


# ------------------------------------------------------------------------------------------------ losses (fused ops)
def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,  # noqa: A002
                  reduction="mean", label_smoothing=0.0):
    """Cross entropy of logits (N, C, *) or (C,) against class indices (N, *) or class probabilities of
    input's shape. With ``weight`` and reduction='mean', divides by the sum of the targets' weights."""
    reduction = _reduction(size_average, reduce, reduction)
    return _op("losses", "cross_entropy")(input, target, weight=weight, ignore_index=ignore_index,
                                          reduction=reduction, label_smoothing=label_smoothing)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,  # noqa: A002
             reduction="mean"):
    """Negative log likelihood of log-probabilities (N, C, *) at class indices (N, *)."""
    reduction = _reduction(size_average, reduce, reduction)
    return _op("losses", "nll_loss")(input, target, weight=weight, ignore_index=ignore_index, reduction=reduction)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):  # noqa: A002
    """Mean squared error ``(x - y)^2``."""
    reduction = _reduction(size_average, reduce, reduction)
    if weight is not None:
        return _apply_reduction((input - target) ** 2 * weight, reduction)
    return _op("losses", "mse_loss")(input, target, reduction=reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):  # noqa: A002
    """Mean absolute error ``|x - y|``."""
    reduction = _reduction(size_average, reduce, reduction)
    if weight is not None:
        return _apply_reduction((input - target).abs() * weight, reduction)
    return _op("losses", "l1_loss")(input, target, reduction=reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):  # noqa: A002
    """``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (d = x - y)."""
    reduction = _reduction(size_average, reduce, reduction)
    return _op("losses", "smooth_l1_loss")(input, target, reduction=reduction, beta=beta)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):  # noqa: A002
    """``0.5 d^2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)``."""
    if weight is not None:
        d = (input - target).abs()
        loss = torch.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta)) * weight
        return _apply_reduction(loss, reduction)
    return _op("losses", "huber_loss")(input, target, reduction=reduction, delta=delta)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,  # noqa: A002
                         reduction="mean"):
    """``-(y log x + (1 - y) log(1 - x))`` on probabilities x, each log clamped at -100 as PyTorch does."""
    reduction = _reduction(size_average, reduce, reduction)
    if target.shape != input.shape:
        raise ValueError(f"Using a target size ({target.shape}) that is different to the input size "
                         f"({input.shape}) is deprecated. Please ensure they have the same size.")
    return _op("losses", "binary_cross_entropy")(input, target, weight=weight, reduction=reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,  # noqa: A002
                                     reduction="mean", pos_weight=None):
    """BCE on logits, computed stably; ``pos_weight`` weights the positive term per class."""
    reduction = _reduction(size_average, reduce, reduction)
    if target.shape != input.shape:
        raise ValueError(f"Target size ({target.shape}) must be the same as input size ({input.shape})")
    return _op("losses", "binary_cross_entropy_with_logits")(input, target, weight=weight, reduction=reduction,
                                                             pos_weight=pos_weight)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):  # noqa: A002
    """``y (log y - x)`` with x log-probabilities (``log_target``: y given as log-probabilities too)."""
    reduction = _reduction(size_average, reduce, reduction)
    if reduction == "batchmean":
        total = _op("losses", "kl_div")(input, target, reduction="sum", log_target=log_target)
        return total / input.shape[0] if input.dim() != 0 else total
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      stacklevel=2)
    return _op("losses", "kl_div")(input, target, reduction=reduction, log_target=log_target)


# ------------------------------------------------------------------------------------------------ losses (composed)
def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,  # noqa: A002
                     reduce=None, reduction="mean"):
    """Poisson negative log likelihood: ``exp(x) - y x`` (log_input) or ``x - y log(x + eps)``; ``full`` adds
    Stirling's term ``y log y - y + 0.5 log(2 pi y)`` where y > 1."""
    reduction = _reduction(size_average, reduce, reduction)
    if log_input:
        loss = torch.exp(input) - target * input
    else:
        loss = input - target * torch.log(input + eps)
    if full:
        st = target * torch.log(target) - target + 0.5 * torch.log(2 * math.pi * target)
        loss = loss + torch.where(target > 1, st, 0.0)
    return _apply_reduction(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):  # noqa: A002
    """``0.5 (log(max(var, eps)) + (x - y)^2 / max(var, eps))`` (+ 0.5 log(2 pi) when ``full``)."""
    if isinstance(var, numbers.Number):
        var = torch.full_like(input, float(var))
    if var.shape != input.shape:
        if input.shape[:-1] == var.shape:
            var = var.unsqueeze(-1)
        elif not (input.shape[:-1] == var.shape[:-1] and var.shape[-1] == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    if bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    # PyTorch clamps a clone of var under no_grad: the value is clamped, the gradient passes as identity
    v = var + (var.detach().clamp(min=eps) - var.detach())
    loss = 0.5 * (torch.log(v) + (input - target) ** 2 / v)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _apply_reduction(loss, reduction)


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                        reduction="mean"):
    """``max(0, -y (x1 - x2) + margin)``."""
    reduction = _reduction(size_average, reduce, reduction)
    return _apply_reduction(torch.relu(-target * (input1 - input2) + margin), reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,  # noqa: A002
                         reduction="mean"):
    """``x`` where y != -1 plus ``max(0, margin - x)`` where y != 1 (PyTorch's ATen rule, so a target other than
    +-1 takes both terms)."""
    reduction = _reduction(size_average, reduce, reduction)
    pos = torch.where(target != -1, input, 0.0)
    neg = torch.where(target != 1, (margin - input).clamp(min=0), 0.0)
    return _apply_reduction(pos + neg, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):  # noqa: A002
    """``log(1 + exp(-y x))``."""
    reduction = _reduction(size_average, reduce, reduction)
    return _apply_reduction(torch.softplus(-target * input), reduction)


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                          reduction="mean"):
    """``1 - cos(x1, x2)`` where y = 1, ``max(0, cos(x1, x2) - margin)`` where y = -1."""
    reduction = _reduction(size_average, reduce, reduction)
    eps = 1e-12
    dim = input1.dim() - 1
    prod = (input1 * input2).sum(dim)
    m1 = (input1 * input1).sum(dim) + eps
    m2 = (input2 * input2).sum(dim) + eps
    cos = prod / torch.sqrt(m1 * m2)
    pos = torch.where(target == 1, 1 - cos, 0.0)
    neg = torch.where(target == -1, torch.relu(cos - margin), 0.0)
    return _apply_reduction(pos + neg, reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """``max(d(a, p) - d(a, n) + margin, 0)`` with d the pairwise p-distance."""
    reduction = _reduction(size_average, reduce, reduction)
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = torch.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _apply_reduction(torch.relu(d_pos - d_neg + margin), reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,  # noqa: A002
                                reduction="mean"):
    """``-mean_c(y log sigmoid(x) + (1 - y) log sigmoid(-x))`` per sample."""
    reduction = _reduction(size_average, reduce, reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.mean(dim=input.dim() - 1)
    return _apply_reduction(loss, reduction)


# ------------------------------------------------------------------------------------------------ attention
def _sdpa_math(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """The unfused reference: ``softmax(q k^T * scale + mask) v`` with fully masked rows giving zeros."""
    L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
    scale = 1.0 / math.sqrt(E) if scale is None else scale
    if enable_gqa and key.dim() >= 3 and query.shape[-3] != key.shape[-3]:
        rep = query.shape[-3] // key.shape[-3]
        key = key.unsqueeze(-3).expand(*key.shape[:-2], rep, S, E).reshape(*query.shape[:-3], query.shape[-3], S, E)
        value = value.unsqueeze(-3).expand(*value.shape[:-2], rep, S, value.shape[-1]).reshape(
            *query.shape[:-3], query.shape[-3], S, value.shape[-1])
    scores = torch.matmul(query, key.transpose(-2, -1)) * scale
    bias = None
    if is_causal:
        i = torch.arange(L, device=query.device).reshape(L, 1)
        j = torch.arange(S, device=query.device).reshape(1, S)
        bias = torch.where(j > i, float("-inf"), 0.0).to(query.dtype)
    if attn_mask is not None:
        m = attn_mask
        if m.dtype is torch.bool:
            m = torch.where(m, 0.0, float("-inf")).to(query.dtype)
        bias = m if bias is None else bias + m
    if bias is not None:
        scores = scores + bias
    from ..ops.softmax import safe_softmax
    w = safe_softmax(scores, -1)
    if dropout_p > 0.0:
        w = dropout(w, dropout_p, True)
    return torch.matmul(w, value)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """``softmax(q k^T * scale + mask) v`` with PyTorch 2.13's semantics: query (..., L, E), key (..., S, E),
    value (..., S, Ev); bool masks (True = attend) or float masks (added); ``is_causal`` aligned top-left;
    a fully masked row gives zeros. Dispatches to the fused op of ``cltorch.ops.attention`` (flash-style
    kernel or math path, see ``cltorch.nn.attention.sdpa_kernel``); without that op, the math path here."""
    if _has_op("attention", "scaled_dot_product_attention"):
        return _op("attention", "scaled_dot_product_attention")(query, key, value, attn_mask=attn_mask,
                                                                dropout_p=dropout_p, is_causal=is_causal,
                                                                scale=scale, enable_gqa=enable_gqa)
    return _sdpa_math(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)


def _cat(tensors, dim=0):
    cat = getattr(torch, "cat", None) or _op(("joins", "indexing"), "cat")
    return cat(tensors, dim)


def _canonical_mask(mask, mask_name, other_type, other_name, target_type, check_other=True):
    """A bool mask (True = masked out) becomes a float mask of -inf / 0; a float mask passes unchanged."""
    if mask is None:
        return None
    if mask.dtype is torch.bool:
        return torch.where(mask, float("-inf"), 0.0).to(target_type)
    if not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    return mask


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """Multi-head attention (Vaswani et al. 2017) with PyTorch's argument conventions: query (L, N, E) or
    (L, E), key/value (S, N, E_k/E_v). Masks: ``key_padding_mask`` (N, S) and ``attn_mask`` (L, S) or
    (N*num_heads, L, S), bool (True = not allowed) or float (added). Returns (output (L, N, E), weights
    (N, L, S) averaged over heads, or (N, H, L, S), or None when ``need_weights=False``)."""
    is_batched = query.dim() == 3
    self_attention = query is key and key is value
    if query.dim() not in (2, 3):
        raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received {query.dim()}-D "
                             "query tensor")
    if key.dim() != query.dim() or value.dim() != query.dim():
        raise AssertionError(f"For {'batched (3-D)' if is_batched else 'unbatched (2-D)'} `query`, expected `key` "
                             f"and `value` to be {query.dim()}-D but found {key.dim()}-D and {value.dim()}-D tensors "
                             "respectively")
    if not is_batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", None, "attn_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                           "method `generate_square_subsequent_mask` to create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype)
        if key_padding_mask is not None:
            is_causal = False

    # input projections
    if not use_separate_proj_weight:
        if self_attention:
            proj = linear(query, in_proj_weight, in_proj_bias)
            q, k, v = proj.chunk(3, dim=-1)
        else:
            w_q, w_k, w_v = in_proj_weight.chunk(3)
            b_q, b_k, b_v = in_proj_bias.chunk(3) if in_proj_bias is not None else (None, None, None)
            q, k, v = linear(query, w_q, b_q), linear(key, w_k, b_k), linear(value, w_v, b_v)
    else:
        b_q, b_k, b_v = in_proj_bias.chunk(3) if in_proj_bias is not None else (None, None, None)
        q = linear(query, q_proj_weight, b_q)
        k = linear(key, k_proj_weight, b_k)
        v = linear(value, v_proj_weight, b_v)

    if attn_mask is not None:
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(f"The shape of the 2D attn_mask is {tuple(attn_mask.shape)}, but should be "
                                   f"{(tgt_len, src_len)}.")
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.dim() == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(f"The shape of the 3D attn_mask is {tuple(attn_mask.shape)}, but should be "
                                   f"{(bsz * num_heads, tgt_len, src_len)}.")
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")

    if bias_k is not None and bias_v is not None:
        if static_k is not None or static_v is not None:
            raise AssertionError("bias cannot be added to static key/value.")
        k = _cat([k, bias_k.expand(1, bsz, embed_dim)])
        v = _cat([v, bias_v.expand(1, bsz, embed_dim)])
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))

    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = (k.reshape(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1) if static_k is None else static_k)
    v = (v.reshape(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1) if static_v is None else static_v)
    if add_zero_attn:
        z = torch.zeros(bsz * num_heads, 1, head_dim, dtype=k.dtype, device=k.device)
        k = _cat([k, z], dim=1)
        v = _cat([v, z], dim=1)
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    src_len = k.shape[1]

    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise AssertionError(f"expecting key_padding_mask shape of {(bsz, src_len)}, but got "
                                 f"{tuple(key_padding_mask.shape)}")
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(bsz, num_heads, 1, src_len)
        kpm = kpm.reshape(bsz * num_heads, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm

    if not training:
        dropout_p = 0.0

    if need_weights:
        q_scaled = q * math.sqrt(1.0 / float(head_dim))
        w = torch.bmm(q_scaled, k.transpose(-2, -1))
        if attn_mask is not None:
            w = w + attn_mask
        w = softmax(w, dim=-1)
        if dropout_p > 0.0:
            w = dropout(w, p=dropout_p)
        out = torch.bmm(w, v)
        out = out.transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, -1)
        w = w.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            w = w.mean(dim=1)
        if not is_batched:
            out, w = out.squeeze(1), w.squeeze(0)
        return out, w
    if attn_mask is not None:
        if attn_mask.shape[0] == 1 and attn_mask.dim() == 3:
            attn_mask = attn_mask.unsqueeze(0)
        else:
            attn_mask = attn_mask.reshape(bsz, num_heads, -1, src_len)
    q = q.reshape(bsz, num_heads, tgt_len, head_dim)
    k = k.reshape(bsz, num_heads, src_len, head_dim)
    v = v.reshape(bsz, num_heads, src_len, head_dim)
    out = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, -1)
    if not is_batched:
        out = out.squeeze(1)
    return out, None
