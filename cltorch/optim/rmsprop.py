"""RMSprop (``torch.optim.RMSprop``)."""
from ._common import check_lr, check_modes, check_nonneg, scalar
from .optimizer import FusedOptimizer

__all__ = ["RMSprop"]


class RMSprop(FusedOptimizer):
    r"""RMSprop (Hinton's lecture notes; centered form of Graves, 2013).

    The update is the pseudo-code of PyTorch's ``torch.optim.RMSprop`` documentation (eps is added outside
    the square root)::

        g = -grad if maximize else grad
        if weight_decay != 0: g = g + weight_decay * param
        v = alpha * v + (1 - alpha) * g * g
        centered: g_avg = alpha * g_avg + (1 - alpha) * g;  v~ = v - g_avg**2    (else v~ = v)
        momentum > 0: b = momentum * b + g / (sqrt(v~) + eps); param = param - lr * b
        else:         param = param - lr * g / (sqrt(v~) + eps)

    Args:
        params; lr (1e-2); alpha (0.99); eps (1e-8); weight_decay (0); momentum (0); centered (False);
        capturable, foreach (accepted); maximize (False). ValueError for negative values.

    State per parameter: ``step``, ``square_avg``, ``momentum_buffer`` (momentum > 0), ``grad_avg``
    (centered).
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        check_lr(lr)
        check_nonneg("epsilon", eps)
        check_nonneg("momentum", momentum)
        check_nonneg("weight_decay", weight_decay)
        check_nonneg("alpha", alpha)
        check_modes(foreach, None, differentiable)
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach, maximize=maximize,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("momentum", 0)
            group.setdefault("centered", False)
            group.setdefault("foreach", None)
            group.setdefault("maximize", False)
            group.setdefault("differentiable", False)
            group.setdefault("capturable", False)

    _algo = "rmsprop"

    def _plan_hyper(self, group):
        lr = scalar(group["lr"])
        alpha = scalar(group["alpha"])
        wd = scalar(group["weight_decay"])
        mom = scalar(group["momentum"])
        flags = dict(wd=wd != 0, maximize=group["maximize"], momentum=mom > 0, centered=group["centered"])
        return flags, (-lr, wd, alpha, 1 - alpha, scalar(group["eps"]), mom)

    @staticmethod
    def _plan_scalars(h, t):
        return h         # nothing depends on the step number
