"""Adam and AdamW (``torch.optim.Adam``, ``torch.optim.AdamW``)."""
from ._common import check_betas, check_lr, check_modes, check_nonneg, scalar
from .optimizer import FusedOptimizer

__all__ = ["Adam", "AdamW"]


class Adam(FusedOptimizer):
    r"""Adam (Kingma & Ba, 2015), with AMSGrad (Reddi et al., 2018) and optional decoupled weight decay.

    The update is the pseudo-code of PyTorch's ``torch.optim.Adam`` documentation, at step ``t``::

        g = -grad if maximize else grad
        if weight_decay != 0:
            decoupled: param = param * (1 - lr * weight_decay)      (AdamW)
            else:      g = g + weight_decay * param
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        amsgrad: v_max = max(v_max, v), and v_max replaces v below
        param = param - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

    Args:
        params; lr (float or Tensor, 1e-3); betas ((0.9, 0.999)); eps (1e-8); weight_decay (0); amsgrad
        (False); maximize (False); decoupled_weight_decay (False); foreach/fused/capturable are accepted (the
        fused kernel always runs). ValueError for out-of-range values.

    State per parameter: ``step`` (0-d float32 cpu tensor), ``exp_avg``, ``exp_avg_sq`` and, with amsgrad,
    ``max_exp_avg_sq`` (parameter's shape and dtype).
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        check_lr(lr)
        check_nonneg("epsilon", eps)
        check_betas(betas)
        check_nonneg("weight_decay", weight_decay)
        check_modes(foreach, fused, differentiable)
        betas = (scalar(betas[0]), scalar(betas[1]))
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, capturable=capturable, differentiable=differentiable,
                        fused=fused, decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    _group_defaults = dict(amsgrad=False, maximize=False, foreach=None, capturable=False,
                           differentiable=False, decoupled_weight_decay=False, fused=None)

    _algo = "adam"

    def _plan_hyper(self, group):
        lr = scalar(group["lr"])
        b1, b2 = (scalar(b) for b in group["betas"])
        flags = dict(wd=scalar(group["weight_decay"]) != 0, decoupled=group["decoupled_weight_decay"],
                     amsgrad=group["amsgrad"], maximize=group["maximize"])
        return flags, (lr, b1, b2, scalar(group["weight_decay"]), scalar(group["eps"]))

    @staticmethod
    def _plan_scalars(h, t):
        lr, b1, b2, wd, eps = h
        bc1 = 1 - b1 ** t
        bc2 = 1 - b2 ** t
        return (wd, 1 - lr * wd, 1 - b1, b2, 1 - b2, -(lr / bc1), bc2 ** 0.5, eps)


class AdamW(Adam):
    r"""AdamW (Loshchilov & Hutter, 2019): Adam with decoupled weight decay, ``param *= 1 - lr * weight_decay``
    before the Adam update (PyTorch's documented form). Same arguments as :class:`Adam`, with
    ``weight_decay`` defaulting to 1e-2.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                         foreach=foreach, maximize=maximize, capturable=capturable, differentiable=differentiable,
                         fused=fused, decoupled_weight_decay=True)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
