"""Folding an eval-mode BatchNorm into the preceding Conv or Linear (PyTorch's ``torch.nn.utils.fusion``).

``fuse_*_bn_weights`` return ``(weight, bias)`` Parameters: ``w * g / sqrt(var + eps)`` scaled per output channel
(dim 0; dim 1 for transposed convs) and ``(b - mean) * g / sqrt(var + eps) + beta`` (b = 0 when absent, g = 1 and
beta = 0 when the BatchNorm has no affine parameters). ``fuse_*_bn_eval`` return a deep copy of the conv/linear with
them; both modules must be in eval mode (AssertionError otherwise, as in PyTorch)."""
import copy

import cltorch as torch
from ..parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"]


def _bn_scale_shift(bn_rm, bn_rv, bn_eps, bn_w, bn_b, like):
    if bn_w is None:
        bn_w = torch.ones_like(bn_rm)
    if bn_b is None:
        bn_b = torch.zeros_like(bn_rm)
    scale = bn_w * torch.rsqrt(bn_rv + bn_eps)
    return scale.to(like.dtype), bn_b


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """Fused ``(weight, bias)`` Parameters for a conv weight (out, in/groups, *k) (``transpose``: (in, out/groups,
    *k)) followed by a BatchNorm with running mean/var ``bn_rm``/``bn_rv`` (channels,)."""
    dtype = conv_w.dtype
    if conv_b is None:
        conv_b = torch.zeros_like(bn_rm)
    scale, bn_b = _bn_scale_shift(bn_rm, bn_rv, bn_eps, bn_w, bn_b, conv_w)
    shape = [1, -1] + [1] * (conv_w.dim() - 2) if transpose else [-1] + [1] * (conv_w.dim() - 1)
    w = (conv_w * scale.reshape(shape)).to(dtype)
    b = ((conv_b - bn_rm) * scale + bn_b).to(dtype)
    return Parameter(w, conv_w.requires_grad), Parameter(b, conv_b.requires_grad)


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A copy of ``conv`` whose weight and bias include the eval-mode BatchNorm ``bn``."""
    assert not (conv.training or bn.training), "Fusion only for eval!"
    fused = copy.deepcopy(conv)
    assert bn.running_mean is not None and bn.running_var is not None
    fused.weight, fused.bias = fuse_conv_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                    bn.eps, bn.weight, bn.bias, transpose)
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """Fused ``(weight, bias)`` Parameters for a Linear weight (out, in) followed by a BatchNorm1d over ``out``."""
    if linear_b is None:
        linear_b = torch.zeros_like(bn_rm)
    scale, bn_b = _bn_scale_shift(bn_rm, bn_rv, bn_eps, bn_w, bn_b, linear_w)
    w = linear_w * scale.unsqueeze(-1)
    b = (linear_b - bn_rm) * scale + bn_b
    return Parameter(w, linear_w.requires_grad), Parameter(b, linear_b.requires_grad)


def fuse_linear_bn_eval(linear, bn):
    """A copy of ``linear`` whose weight and bias include the eval-mode BatchNorm1d ``bn``. AssertionError when the
    BatchNorm's features differ from the Linear's outputs (unless one of them is 1, which broadcasts)."""
    assert not (linear.training or bn.training), "Fusion only for eval!"
    assert linear.out_features == bn.num_features or bn.num_features == 1, \
        "To fuse, linear.out_features == bn.num_features or bn.num_features == 1"
    fused = copy.deepcopy(linear)
    assert bn.running_mean is not None and bn.running_var is not None
    fused.weight, fused.bias = fuse_linear_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                      bn.eps, bn.weight, bn.bias)
    return fused
