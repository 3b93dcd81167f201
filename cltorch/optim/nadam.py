"""NAdam (``torch.optim.NAdam``)."""
from ._common import check_betas, check_lr, check_modes, check_nonneg, scalar
from .optimizer import FusedOptimizer, _as_step, _bump_step, _step_value

__all__ = ["NAdam"]


class NAdam(FusedOptimizer):
    r"""NAdam, Adam with Nesterov momentum (Dozat, 2016), with PyTorch's momentum-decay schedule.

    The update is the pseudo-code of PyTorch's ``torch.optim.NAdam`` documentation, at step ``t``::

        g = -grad if maximize else grad
        if weight_decay != 0:
            decoupled: param = param * (1 - lr * weight_decay)
            else:      g = g + weight_decay * param
        mu_t      = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
        mu_{t+1}  = beta1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        m^ = mu_{t+1} * m / (1 - prod_{i<=t+1} mu_i) + (1 - mu_t) * g / (1 - prod_{i<=t} mu_i)
        param = param - lr * m^ / (sqrt(v / (1 - beta2**t)) + eps)

    Args:
        params; lr (2e-3); betas ((0.9, 0.999)); eps (1e-8); weight_decay (0); momentum_decay (4e-3);
        decoupled_weight_decay (False); foreach, capturable (accepted); maximize (False).

    State per parameter: ``step``, ``mu_product`` (0-d float32 cpu tensors, as in PyTorch), ``exp_avg``,
    ``exp_avg_sq``.
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        check_lr(lr)
        check_nonneg("epsilon", eps)
        check_betas(betas)
        check_nonneg("weight_decay", weight_decay)
        check_nonneg("momentum_decay", momentum_decay)
        check_modes(foreach, None, differentiable)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    _group_defaults = dict(maximize=False, foreach=None, capturable=False, differentiable=False,
                           decoupled_weight_decay=False)

    def __setstate__(self, state):
        super().__setstate__(state)
        for st in self.state.values():
            if isinstance(st, dict) and "mu_product" in st:
                st["mu_product"] = _as_step(st["mu_product"])

    _algo = "nadam"
    _counters = (("step", 0.0), ("mu_product", 1.0))

    def _plan_hyper(self, group):
        b1, b2 = (scalar(b) for b in group["betas"])
        wd = scalar(group["weight_decay"])
        flags = dict(wd=wd != 0, decoupled=group["decoupled_weight_decay"], maximize=group["maximize"])
        return flags, (scalar(group["lr"]), b1, b2, scalar(group["eps"]), wd, scalar(group["momentum_decay"]))

    @staticmethod
    def _advance(st, h, fresh):
        import numpy as np
        b1, psi = h[1], h[5]
        t = _bump_step(st["step"])
        mu = b1 * (1.0 - 0.5 * 0.96 ** (t * psi))
        # mu_product is a float32 tensor in PyTorch, and `mu_product *= mu` multiplies in float32 (the Python
        # scalar is cast to the tensor's dtype first): the same two roundings here
        mp = float(np.float32(_step_value(st["mu_product"])) * np.float32(mu))
        _set_counter(st["mu_product"], mp)
        return t, mp

    @staticmethod
    def _plan_scalars(h, key):
        lr, b1, b2, eps, wd, psi = h
        t, mp = key
        mu = b1 * (1.0 - 0.5 * 0.96 ** (t * psi))
        mu_next = b1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * psi))
        bc2 = 1 - b2 ** t
        mp_next = mp * mu_next
        return (wd, 1 - lr * wd, 1 - b1, b2, 1 - b2, bc2, eps, -lr * (1.0 - mu) / (1.0 - mp),
                -lr * mu_next / (1.0 - mp_next))


def _set_counter(t, value):
    st = t._storage
    if st.host is not None:
        st.host[t._offset] = value
        st.version += 1
    else:
        t.fill_(value)
