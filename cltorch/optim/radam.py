"""RAdam (``torch.optim.RAdam``)."""
import math

from ._common import check_betas, check_lr, check_modes, check_nonneg, scalar
from .optimizer import FusedOptimizer

__all__ = ["RAdam"]


class RAdam(FusedOptimizer):
    r"""RAdam, rectified Adam (Liu et al., 2020).

    The update is the pseudo-code of PyTorch's ``torch.optim.RAdam`` documentation, at step ``t``::

        g = -grad if maximize else grad
        if weight_decay != 0:
            decoupled: param = param * (1 - lr * weight_decay)
            else:      g = g + weight_decay * param
        m = beta1 * m + (1 - beta1) * g;   v = beta2 * v + (1 - beta2) * g * g
        m^ = m / (1 - beta1**t)
        rho_inf = 2 / (1 - beta2) - 1;  rho_t = rho_inf - 2 t beta2**t / (1 - beta2**t)
        if rho_t > 5:
            l = sqrt(1 - beta2**t) / (sqrt(v) + eps)
            r = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))
            param = param - lr * m^ * r * l
        else:
            param = param - lr * m^

    Args:
        params; lr (1e-3); betas ((0.9, 0.999)); eps (1e-8); weight_decay (0); decoupled_weight_decay
        (False); foreach, capturable (accepted); maximize (False).

    State per parameter: ``step``, ``exp_avg``, ``exp_avg_sq``.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        check_lr(lr)
        check_nonneg("epsilon", eps)
        check_betas(betas)
        check_nonneg("weight_decay", weight_decay)
        check_modes(foreach, None, differentiable)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable, decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    _group_defaults = dict(foreach=None, maximize=False, differentiable=False, decoupled_weight_decay=False,
                           capturable=False)

    _algo = "radam"

    def _plan_hyper(self, group):
        b1, b2 = (scalar(b) for b in group["betas"])
        wd = scalar(group["weight_decay"])
        flags = dict(wd=wd != 0, decoupled=group["decoupled_weight_decay"], maximize=group["maximize"])
        return flags, (scalar(group["lr"]), b1, b2, scalar(group["eps"]), wd)

    @staticmethod
    def _plan_scalars(h, t):
        lr, b1, b2, eps, wd = h
        bc1 = 1 - b1 ** t
        bc2 = 1 - b2 ** t
        rho_inf = 2 / (1 - b2) - 1
        rho_t = rho_inf - 2 * t * b2 ** t / bc2
        if rho_t > 5.0:
            rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            rectify = 1.0
        else:
            rect, rectify = 0.0, 0.0
        return (wd, 1 - lr * wd, 1 - b1, b2, 1 - b2, lr, bc1, bc2 ** 0.5, eps, rect, rectify)
