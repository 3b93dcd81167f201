"""Adam and AdamW (``torch.optim.Adam``, ``torch.optim.AdamW``)."""
from ._common import check_betas, check_lr, check_modes, check_nonneg, scalar
from .optimizer import Optimizer, _as_step, _bump_step, _zeros_like

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
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

    def step(self, closure=None):
        """One Adam step over every parameter with a gradient. Returns ``closure()``'s loss if given."""
        return self._fused_step(closure)

    def _group_plan(self, group):
        """The host half of one adam step for ``group`` (see ``Optimizer._group_plan``)."""
        lr = scalar(group["lr"])
        b1, b2 = (scalar(b) for b in group["betas"])
        wd = scalar(group["weight_decay"])
        eps = scalar(group["eps"])
        ams = group["amsgrad"]
        flags = dict(wd=wd != 0, decoupled=group["decoupled_weight_decay"], amsgrad=ams,
                     maximize=group["maximize"])
        cache = {}
        items = []
        for p, g in self._grads_of(group):
            st = self.state[p]
            if len(st) == 0:
                st["step"] = _as_step(0.0)
                st["exp_avg"] = _zeros_like(p)
                st["exp_avg_sq"] = _zeros_like(p)
                if ams:
                    st["max_exp_avg_sq"] = _zeros_like(p)
            if ams and "max_exp_avg_sq" not in st:
                st["max_exp_avg_sq"] = _zeros_like(p)
            t = _bump_step(st["step"])
            sc = cache.get(t)
            if sc is None:
                bc1 = 1 - b1 ** t
                bc2 = 1 - b2 ** t
                sc = cache[t] = (wd, 1 - lr * wd, 1 - b1, b2, 1 - b2, -(lr / bc1), bc2 ** 0.5, eps)
            states = [st["exp_avg"], st["exp_avg_sq"]] + ([st["max_exp_avg_sq"]] if ams else [])
            items.append((p, g, states, sc))
        return "adam", flags, items


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
