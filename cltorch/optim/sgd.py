"""SGD with momentum, dampening, Nesterov momentum, weight decay and maximize (``torch.optim.SGD``)."""
from ._common import check_lr, check_modes, scalar
from .optimizer import FusedOptimizer

__all__ = ["SGD"]


class SGD(FusedOptimizer):
    r"""Stochastic gradient descent, optionally with momentum.

    The update is the pseudo-code of PyTorch's ``torch.optim.SGD`` documentation::

        g = -grad if maximize else grad
        if weight_decay != 0: g = g + weight_decay * param
        if momentum != 0:
            b = g on the first step, else momentum * b + (1 - dampening) * g
            g = g + momentum * b if nesterov else b
        param = param - lr * g

    Args:
        params: parameters or param groups. lr (float or Tensor, default 1e-3), momentum (0), dampening (0),
        weight_decay (0), nesterov (False), maximize (False); foreach/fused select the fused kernel (always
        used here). Raises ValueError for negative lr, momentum or weight_decay, and for nesterov without
        momentum or with dampening.

    State per parameter: ``momentum_buffer`` (same shape and dtype as the parameter) when momentum != 0.
    """

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        check_lr(lr)
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        check_modes(foreach, fused, differentiable)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach, differentiable=differentiable,
                        fused=fused)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("nesterov", False)
            group.setdefault("maximize", False)
            group.setdefault("foreach", None)
            group.setdefault("differentiable", False)
            group.setdefault("fused", False)

    _algo = "sgd"
    _counters = ()      # no step counter (PyTorch's SGD keeps none)

    def _plan_hyper(self, group):
        lr = scalar(group["lr"])
        mom = scalar(group["momentum"])
        wd = scalar(group["weight_decay"])
        damp = scalar(group["dampening"])
        flags = dict(wd=wd != 0, maximize=group["maximize"], momentum=mom != 0, nesterov=group["nesterov"])
        return flags, (-lr, wd, mom, 1.0 - damp)

    @staticmethod
    def _advance(st, h, fresh):
        return 1.0 if fresh else 0.0     # `first`: the momentum buffer was made this step (it starts as g)

    @staticmethod
    def _plan_scalars(h, first):
        return h + (first,)
