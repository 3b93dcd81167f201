"""RMSprop (``torch.optim.RMSprop``)."""
from ._common import check_lr, check_modes, check_nonneg, scalar
from .optimizer import Optimizer, _as_step, _bump_step, _zeros_like

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
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

    def step(self, closure=None):
        """One RMSprop step over every parameter with a gradient. Returns ``closure()``'s loss if given."""
        return self._fused_step(closure)

    def _group_plan(self, group):
        """The host half of one rmsprop step for ``group`` (see ``Optimizer._group_plan``)."""
        lr = scalar(group["lr"])
        alpha = scalar(group["alpha"])
        eps = scalar(group["eps"])
        wd = scalar(group["weight_decay"])
        mom = scalar(group["momentum"])
        centered = group["centered"]
        flags = dict(wd=wd != 0, maximize=group["maximize"], momentum=mom > 0, centered=centered)
        sc = (-lr, wd, alpha, 1 - alpha, eps, mom)
        items = []
        for p, g in self._grads_of(group):
            st = self.state[p]
            if len(st) == 0:
                st["step"] = _as_step(0.0)
                st["square_avg"] = _zeros_like(p)
                if mom > 0:
                    st["momentum_buffer"] = _zeros_like(p)
                if centered:
                    st["grad_avg"] = _zeros_like(p)
            _bump_step(st["step"])
            states = [st["square_avg"]]
            if mom > 0:
                if "momentum_buffer" not in st:
                    st["momentum_buffer"] = _zeros_like(p)
                states.append(st["momentum_buffer"])
            if centered:
                if "grad_avg" not in st:
                    st["grad_avg"] = _zeros_like(p)
                states.append(st["grad_avg"])
            items.append((p, g, states, sc))
        return "rmsprop", flags, items
