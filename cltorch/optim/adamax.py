"""Adamax (``torch.optim.Adamax``)."""
from ._common import check_betas, check_lr, check_modes, check_nonneg, scalar
from .optimizer import FusedOptimizer

__all__ = ["Adamax"]


class Adamax(FusedOptimizer):
    r"""Adamax, Adam's infinity-norm variant (Kingma & Ba, 2015, section 7).

    The update is the pseudo-code of PyTorch's ``torch.optim.Adamax`` documentation, at step ``t``::

        g = -grad if maximize else grad
        if weight_decay != 0: g = g + weight_decay * param
        m = beta1 * m + (1 - beta1) * g
        u = max(beta2 * u, |g| + eps)
        param = param - lr / (1 - beta1**t) * m / u

    Args:
        params; lr (2e-3); betas ((0.9, 0.999)); eps (1e-8); weight_decay (0); foreach, capturable
        (accepted); maximize (False). ValueError for out-of-range values.

    State per parameter: ``step``, ``exp_avg``, ``exp_inf``.
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        check_lr(lr)
        check_nonneg("epsilon", eps)
        check_betas(betas)
        check_nonneg("weight_decay", weight_decay)
        check_modes(foreach, None, differentiable)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    _group_defaults = dict(foreach=None, maximize=False, differentiable=False, capturable=False)

    _algo = "adamax"

    def _plan_hyper(self, group):
        b1, b2 = (scalar(b) for b in group["betas"])
        wd = scalar(group["weight_decay"])
        return dict(wd=wd != 0, maximize=group["maximize"]), (scalar(group["lr"]), b1, b2, scalar(group["eps"]), wd)

    @staticmethod
    def _plan_scalars(h, t):
        lr, b1, b2, eps, wd = h
        clr = lr / (1 - b1 ** t)
        return (wd, 1 - b1, b2, eps, -clr)
