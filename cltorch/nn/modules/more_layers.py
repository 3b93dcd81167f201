"""Layers PyTorch has and cltorch composes from existing ops: ``Fold``, ``LPPool1d/2d/3d``,
``FeatureAlphaDropout``, ``CrossMapLRN2d`` and the deprecated ``NLLLoss2d`` (PyTorch's signatures, attributes and
reprs; none has parameters or buffers, so their state dicts are empty as in PyTorch)."""
from .. import functional as F
from .dropout import _DropoutNd
from .loss import NLLLoss
from .module import Module

__all__ = ["Fold", "LPPool1d", "LPPool2d", "LPPool3d", "FeatureAlphaDropout", "CrossMapLRN2d", "NLLLoss2d"]


class Fold(Module):
    """Sums sliding local blocks into a tensor (col2im): (N, C*kh*kw, L) or (C*kh*kw, L) -> (N, C, *output_size)
    or (C, *output_size). See :func:`cltorch.nn.functional.fold` for the errors."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input):  # noqa: A002
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return ("output_size={output_size}, kernel_size={kernel_size}, dilation={dilation}, padding={padding}, "
                "stride={stride}".format(**self.__dict__))


class _LPPoolNd(Module):
    _fn = None

    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type, self.kernel_size, self.stride, self.ceil_mode = norm_type, kernel_size, stride, ceil_mode

    def forward(self, input):  # noqa: A002
        return type(self)._fn(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self):
        return ("norm_type={norm_type}, kernel_size={kernel_size}, stride={stride}, ceil_mode={ceil_mode}"
                .format(**self.__dict__))


class LPPool1d(_LPPoolNd):
    """Power-average pooling over (N, C, L) or (C, L): ``(sum of x^p over the window)^(1/p)``."""
    _fn = staticmethod(F.lp_pool1d)


class LPPool2d(_LPPoolNd):
    """Power-average pooling over (N, C, H, W) or (C, H, W)."""
    _fn = staticmethod(F.lp_pool2d)


class LPPool3d(_LPPoolNd):
    """Power-average pooling over (N, C, D, H, W) or (C, D, H, W)."""
    _fn = staticmethod(F.lp_pool3d)


class FeatureAlphaDropout(_DropoutNd):
    """Alpha dropout of whole channels of (N, C, *) in training mode (see
    :func:`cltorch.nn.functional.feature_alpha_dropout`)."""

    def forward(self, input):  # noqa: A002
        return F.feature_alpha_dropout(input, self.p, self.training)


class CrossMapLRN2d(Module):
    """PyTorch's legacy cross-channel local response normalisation of (N, C, H, W) (see
    :func:`cltorch.nn.functional.cross_map_lrn2d` for its exact channel windows)."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):  # noqa: A002
        return F.cross_map_lrn2d(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return "{size}, alpha={alpha}, beta={beta}, k={k}".format(**self.__dict__)


class NLLLoss2d(NLLLoss):
    """Deprecated alias of :class:`NLLLoss` (warns on construction, as PyTorch does)."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
        import warnings
        warnings.warn("`NLLLoss2d` has been deprecated. Please use `NLLLoss` instead as a drop-in replacement and "
                      "see https://pytorch.org/docs/main/nn.html#torch.nn.NLLLoss for more details.", stacklevel=2)
        super().__init__(weight, size_average, ignore_index, reduce, reduction)
