"""Normalisation layers: BatchNorm1d/2d/3d, LayerNorm, GroupNorm, RMSNorm, InstanceNorm1d/2d
(PyTorch's signatures, buffers, state-dict keys and initialisation)."""
import numbers

import cltorch as torch
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ._factory import empty_param
from .module import Module

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm", "GroupNorm", "RMSNorm", "InstanceNorm1d",
           "InstanceNorm2d", "InstanceNorm3d", "LocalResponseNorm"]


class _NormBase(Module):
    _version = 2

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if self.affine:
            self.weight = Parameter(empty_param((num_features,), device, dtype))
            self.register_parameter("bias", Parameter(empty_param((num_features,), device, dtype)) if bias else None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if self.track_running_stats:
            self.register_buffer("running_mean", torch.zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", torch.ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            with torch.no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input):  # noqa: A002
        raise NotImplementedError

    def extra_repr(self):
        return ("{num_features}, eps={eps}, momentum={momentum}, affine={affine}, bias={use_bias}, "
                "track_running_stats={track_running_stats}".format(**self.__dict__, use_bias=self.bias is not None))

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs, assign=False):
        version = local_metadata.get("version", None)
        if (version is None or version < 2) and self.track_running_stats:
            key = prefix + "num_batches_tracked"
            if key not in state_dict:  # checkpoints from before num_batches_tracked existed
                state_dict[key] = (self.num_batches_tracked if self.num_batches_tracked is not None
                                   and self.num_batches_tracked.device.type != "meta"
                                   else torch.tensor(0, dtype=torch.long))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs, assign)


class _BatchNorm(_NormBase):
    def forward(self, input):  # noqa: A002
        self._check_input_dim(input)
        if self.momentum is None:
            eaf = 0.0
        else:
            eaf = self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            with torch.no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:  # cumulative moving average (reads the counter, as PyTorch does)
                eaf = 1.0 / float(self.num_batches_tracked.item())
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        use_stats = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if use_stats else None,
                            self.running_var if use_stats else None, self.weight, self.bias, bn_training, eaf,
                            self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of (N, C) or (N, C, L); running statistics with PyTorch's momentum rule."""

    def _check_input_dim(self, input):  # noqa: A002
        if input.dim() != 2 and input.dim() != 3:
            raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of (N, C, H, W)."""

    def _check_input_dim(self, input):  # noqa: A002
        if input.dim() != 4:
            raise ValueError(f"expected 4D input (got {input.dim()}D input)")


class BatchNorm3d(_BatchNorm):
    """Batch normalisation of (N, C, D, H, W)."""

    def _check_input_dim(self, input):  # noqa: A002
        if input.dim() != 5:
            raise ValueError(f"expected 5D input (got {input.dim()}D input)")


class _InstanceNorm(_NormBase):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False, device=None,
                 dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def forward(self, input):  # noqa: A002
        self._check_input_dim(input)
        unbatched = input.dim() == self._get_no_batch_dim()
        if unbatched:
            input = input.unsqueeze(0)  # noqa: A001
        out = F.instance_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                              self.training or not self.track_running_stats, self.momentum or 0.0, self.eps)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    def _get_no_batch_dim(self):
        return 2

    def _check_input_dim(self, input):  # noqa: A002
        if input.dim() not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")


class InstanceNorm2d(_InstanceNorm):
    def _get_no_batch_dim(self):
        return 3

    def _check_input_dim(self, input):  # noqa: A002
        if input.dim() not in (3, 4):
            raise ValueError(f"expected 3D or 4D input (got {input.dim()}D input)")


class InstanceNorm3d(_InstanceNorm):
    def _get_no_batch_dim(self):
        return 4

    def _check_input_dim(self, input):  # noqa: A002
        if input.dim() not in (4, 5):
            raise ValueError(f"expected 4D or 5D input (got {input.dim()}D input)")


class LayerNorm(Module):
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over the trailing ``normalized_shape`` dims;
    weight ones, bias zeros (``bias=False`` drops the bias)."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if self.elementwise_affine:
            self.weight = Parameter(empty_param(self.normalized_shape, device, dtype))
            if bias:
                self.bias = Parameter(empty_param(self.normalized_shape, device, dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):  # noqa: A002
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return "{normalized_shape}, eps={eps}, elementwise_affine={elementwise_affine}".format(**self.__dict__)


class GroupNorm(Module):
    """Normalise (N, C, *) over ``num_groups`` groups of channels, then a per-channel affine (ones/zeros)."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        if self.affine:
            self.weight = Parameter(empty_param((num_channels,), device, dtype))
            self.register_parameter("bias", Parameter(empty_param((num_channels,), device, dtype)) if bias else None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):  # noqa: A002
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return "{num_groups}, {num_channels}, eps={eps}, affine={affine}, bias={use_bias}".format(
            **self.__dict__, use_bias=self.bias is not None)


class RMSNorm(Module):
    """``x / sqrt(mean(x^2) + eps) * weight`` over the trailing dims; eps=None uses finfo(dtype).eps."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if self.elementwise_affine:
            self.weight = Parameter(empty_param(self.normalized_shape, device, dtype))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return "{normalized_shape}, eps={eps}, elementwise_affine={elementwise_affine}".format(**self.__dict__)


class LocalResponseNorm(Module):
    """Local response normalisation across channels (Krizhevsky et al. 2012), composed from avg_pool."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):  # noqa: A002
        dim = input.dim()
        if dim < 3:
            raise ValueError(f"Expected 3D or higher dimensionality input (got {dim} dimensions)")
        div = (input * input).unsqueeze(1)
        if dim == 3:
            div = F.pad(div, (0, 0, self.size // 2, (self.size - 1) // 2))
            div = F.avg_pool2d(div, (self.size, 1), stride=1).squeeze(1)
        else:
            sizes = input.shape
            div = div.reshape(sizes[0], 1, sizes[1], sizes[2], -1)
            div = F.pad(div.reshape(sizes[0], 1, sizes[1], -1), (0, 0, self.size // 2, (self.size - 1) // 2))
            div = F.avg_pool2d(div, (self.size, 1), stride=1).squeeze(1)
            div = div.reshape(sizes)
        div = (div * self.alpha + self.k) ** self.beta
        return input / div

    def extra_repr(self):
        return "{size}, alpha={alpha}, beta={beta}, k={k}".format(**self.__dict__)

# PyTorch also exports these from this path; they are defined in more_layers.py, which imports this module.
from ._factory import forward_names as _forward_names  # noqa: E402
__all__ += ["CrossMapLRN2d"]
__getattr__ = _forward_names(__name__, dict.fromkeys(__all__[-1:], ".more_layers"))
