"""Adadelta (``torch.optim.Adadelta``)."""
from ._common import check_lr, check_modes, check_nonneg, scalar
from ._composed import composed_step, effective_grad
from .optimizer import Optimizer, _zeros_like

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    r"""Adadelta (Zeiler, 2012, "ADADELTA: An Adaptive Learning Rate Method", Algorithm 1), with PyTorch's
    extra ``lr`` factor.

    The update is the pseudo-code of PyTorch's ``torch.optim.Adadelta`` documentation::

        g = -grad if maximize else grad
        if weight_decay != 0: g = g + weight_decay * param
        v = rho * v + (1 - rho) * g * g                       (square_avg)
        delta = sqrt(u + eps) / sqrt(v + eps) * g
        u = rho * u + (1 - rho) * delta * delta               (acc_delta)
        param = param - lr * delta

    Args:
        params; lr (float or 1-element Tensor, 1.0); rho (0.9, in [0, 1]); eps (1e-6); weight_decay (0);
        foreach, capturable (accepted; the step is composed of in-place tensor ops); maximize (False);
        differentiable (True raises NotImplementedError). ValueError for out-of-range values, as PyTorch.

    State per parameter: ``step`` (0-d float32 cpu tensor), ``square_avg``, ``acc_delta`` (parameter's shape,
    dtype and device).
    """

    _group_defaults = dict(foreach=None, maximize=False, differentiable=False, capturable=False)

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        check_nonneg("epsilon", eps)
        check_nonneg("weight_decay", weight_decay)
        check_modes(foreach, None, differentiable)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        capturable=capturable, foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    def step(self, closure=None):
        """One Adadelta step over every parameter with a gradient. Returns ``closure()``'s loss if given."""
        return composed_step(self, closure)

    @staticmethod
    def _hyper(group):
        return dict(lr=scalar(group["lr"]), rho=scalar(group["rho"]), eps=scalar(group["eps"]),
                    wd=scalar(group["weight_decay"]), maximize=group["maximize"])

    @staticmethod
    def _init_state(p, g, group, st):
        st["square_avg"] = _zeros_like(p)
        st["acc_delta"] = _zeros_like(p)

    @staticmethod
    def _update(p, g, st, h, t):
        rho, eps = h["rho"], h["eps"]
        g = effective_grad(p, g, h["maximize"], h["wd"])
        v, u = st["square_avg"], st["acc_delta"]
        v.mul_(rho).addcmul_(g, g, value=1 - rho)
        delta = u.add(eps).sqrt_().div_(v.add(eps).sqrt_()).mul_(g)
        u.mul_(rho).addcmul_(delta, delta, value=1 - rho)
        p.add_(delta, alpha=-h["lr"])
