"""Dropout layers: active in training mode only; masks from the Philox generator."""
from .. import functional as F
from .module import Module

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout"]


class _DropoutNd(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """Zero each element with probability p and scale the rest by 1/(1-p), in training mode."""

    def forward(self, input):  # noqa: A002
        return F.dropout(input, self.p, self.training, self.inplace)


class Dropout1d(_DropoutNd):
    def forward(self, input):  # noqa: A002
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """Zero whole channels of (N, C, H, W) or (C, H, W) with probability p, in training mode."""

    def forward(self, input):  # noqa: A002
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    def forward(self, input):  # noqa: A002
        return F.dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(_DropoutNd):
    def forward(self, input):  # noqa: A002
        return F.alpha_dropout(input, self.p, self.training)

# PyTorch also exports these from this path; they are defined in more_layers.py, which imports this module.
from ._factory import forward_names as _forward_names  # noqa: E402
__all__ += ["FeatureAlphaDropout"]
__getattr__ = _forward_names(__name__, dict.fromkeys(__all__[-1:], ".more_layers"))
