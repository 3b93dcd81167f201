"""Adafactor (``torch.optim.Adafactor``)."""
import math

import cltorch as torch

from ._common import check_modes, scalar
from ._composed import composed_step
from .optimizer import Optimizer, _zeros_like

__all__ = ["Adafactor"]


class Adafactor(Optimizer):
    r"""Adafactor (Shazeer & Stern, 2018, "Adafactor: Adaptive Learning Rates with Sublinear Memory Cost",
    Algorithms 4 and 5), in the form of PyTorch's ``torch.optim.Adafactor`` documentation (no first moment;
    relative step size; update clipping; ``eps1`` defaults to the dtype's machine epsilon). At step ``t``::

        g = -grad if maximize else grad
        beta2_t = 1 - t ** beta2_decay;  rho_t = min(lr, 1 / sqrt(t))
        alpha = max(eps2, RMS(param)) * rho_t
        if weight_decay != 0: param = param * (1 - lr * weight_decay)
        param of 2 or more dims (factored second moment over the last two dims):
            R = lerp(R, mean(g * g, dim=-1), 1 - beta2_t);  C = lerp(C, mean(g * g, dim=-2), 1 - beta2_t)
            v = (R @ C) / clamp(mean(R, dim=-2), min=eps1)
        else:
            v = lerp(v, g * g, 1 - beta2_t)
        u = g / sqrt(clamp(v, min=eps1 ** 2))
        param = param - alpha / max(1, RMS(u) / d) * u

    Args:
        params; lr (float or 1-element Tensor, 1e-2); beta2_decay (-0.8, <= 0); eps ((None, 1e-3): eps1,
        eps2); d (1.0, >= 1, clipping threshold); weight_decay (0); foreach (accepted); maximize (False).
        ValueError for out-of-range values, with PyTorch's messages.

    State per parameter: ``step`` (0-d float32 cpu tensor); ``row_var`` (shape with the last dim 1) and
    ``col_var`` (shape with dim -2 of size 1) for parameters of 2 or more dims, else ``variance``.
    """

    _group_defaults = dict(foreach=None, maximize=False)

    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0, *,
                 foreach=None, maximize=False):
        if hasattr(lr, "numel") and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= scalar(lr):
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        check_modes(foreach, None, False)
        defaults = dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize)
        super().__init__(params, defaults)

    def step(self, closure=None):
        """One Adafactor step over every parameter with a gradient. Returns ``closure()``'s loss if given."""
        return composed_step(self, closure)

    @staticmethod
    def _hyper(group):
        return dict(lr=scalar(group["lr"]), decay=scalar(group["beta2_decay"]), eps=group["eps"],
                    d=scalar(group["d"]), wd=scalar(group["weight_decay"]), maximize=group["maximize"])

    @staticmethod
    def _init_state(p, g, group, st):
        if g.dim() > 1:
            st["row_var"] = g.new_zeros(list(g.shape[:-1]) + [1])
            st["col_var"] = g.new_zeros(list(g.shape[:-2]) + [1, g.shape[-1]])
        else:
            st["variance"] = _zeros_like(p)

    @staticmethod
    def _update(p, g, st, h, t):
        lr, wd = h["lr"], h["wd"]
        eps1, eps2 = h["eps"]
        if h["maximize"]:
            g = torch.neg(g)
        e1 = torch.finfo(p.dtype).eps if eps1 is None else eps1
        w = t ** h["decay"]                       # 1 - beta2_t
        rho = min(lr, 1 / t ** 0.5)
        alpha = max(eps2, p.norm(2).item() / math.sqrt(p.numel())) * rho
        if wd != 0:
            p.mul_(1 - lr * wd)
        if g.dim() > 1:
            row, col = st["row_var"], st["col_var"]
            gg = g.mul(g)
            row.lerp_(gg.mean(dim=-1, keepdim=True), w)
            col.lerp_(gg.mean(dim=-2, keepdim=True), w)
            v = torch.matmul(row, col).div_(row.mean(dim=-2, keepdim=True).clamp_(min=e1))
        else:
            var = st["variance"]
            var.lerp_(g.mul(g), w)
            v = var.clone()
        u = v.clamp_(min=e1 * e1).rsqrt_().mul_(g)
        denom = max(1.0, u.norm(2).item() / (math.sqrt(u.numel()) * h["d"]))
        p.add_(u, alpha=-alpha / denom)
