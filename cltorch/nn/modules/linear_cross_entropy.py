"""``LinearCrossEntropyLoss`` (torch 2.13's ``torch.nn.modules.linear_cross_entropy``): a Linear projection to
class logits fused (in PyTorch) with the cross entropy; here ``F.linear_cross_entropy``, which computes the
product and the loss unchunked."""
import math

from .. import functional as F
from .linear import Linear
from .linear_cross_entropy_options import LinearCrossEntropyOptions
from .loss import _WeightedLoss

__all__ = ["LinearCrossEntropyLoss", "LinearCrossEntropyOptions"]


class LinearCrossEntropyLoss(_WeightedLoss):
    """``LinearCrossEntropyLoss(in_features, num_classes, *, out_features=(), bias=False, device=None, dtype=None,
    reduction='mean', weight=None, ignore_index=None, label_smoothing=0.0, options=None)``.

    ``self.linear`` is a Linear(in_features, num_classes * prod(out_features)) (flat storage, as PyTorch's);
    ``forward(input, target)``: input (N, in_features) (or unbatched), target class indices (N, *out_features)
    or probabilities; returns ``cross_entropy(logits, target)`` with the logits laid out as
    (N, num_classes, *out_features). Raises RuntimeError for a class weight not of shape (num_classes,) or a
    label_smoothing outside [0, 1].
    """

    def __init__(self, in_features, num_classes, *, out_features=(), bias=False, device=None, dtype=None,
                 reduction="mean", weight=None, ignore_index=None, label_smoothing=0.0, options=None):
        if weight is not None and tuple(weight.shape) != (num_classes,):
            raise RuntimeError(f"expected weight shape to be {(num_classes,)}, got {tuple(weight.shape)}")
        if label_smoothing < 0 or label_smoothing > 1.0:
            raise RuntimeError(f"expected label_smoothing to be in range [0, 1], got {label_smoothing}")
        super().__init__(weight=weight, size_average=None, reduce=None, reduction=reduction)
        self.num_classes = num_classes
        self.out_features = out_features
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing
        self.linear = Linear(in_features, math.prod(out_features, start=num_classes), bias=bias, device=device,
                             dtype=dtype)
        self.options = options

    def forward(self, input, target):  # noqa: A002
        w = self.linear.weight.reshape((self.num_classes, *self.out_features, self.linear.in_features))
        b = (self.linear.bias.reshape((self.num_classes, *self.out_features)) if self.linear.bias is not None
             else None)
        return F.linear_cross_entropy(input, w, target, linear_bias=b, weight=self.weight, reduction=self.reduction,
                                      ignore_index=self.ignore_index, label_smoothing=self.label_smoothing,
                                      options=self.options)

    def extra_repr(self):
        return (f"in_features={self.linear.in_features}, num_classes={self.num_classes}, "
                f"out_features={self.out_features}, bias={self.linear.bias is not None}, "
                f"reduction={self.reduction}, ignore_index={self.ignore_index}, "
                f"label_smoothing={self.label_smoothing}, options={self.options}")
