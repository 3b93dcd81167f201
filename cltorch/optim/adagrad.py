"""Adagrad (``torch.optim.Adagrad``)."""
from ._common import check_lr, check_modes, check_nonneg, scalar
from .optimizer import FusedOptimizer, _as_step, _full_like

__all__ = ["Adagrad"]


class Adagrad(FusedOptimizer):
    r"""Adagrad (Duchi et al., 2011).

    The update is the pseudo-code of PyTorch's ``torch.optim.Adagrad`` documentation, at step ``t``::

        clr = lr / (1 + (t - 1) * lr_decay)
        g = -grad if maximize else grad
        if weight_decay != 0: g = g + weight_decay * param
        sum = sum + g * g
        param = param - clr * g / (sqrt(sum) + eps)

    Args:
        params; lr (1e-2); lr_decay (0); weight_decay (0); initial_accumulator_value (0); eps (1e-10);
        foreach, fused (accepted); maximize (False). ValueError for negative values.

    State per parameter (made at construction, as in PyTorch): ``step`` and ``sum`` (filled with
    ``initial_accumulator_value``).
    """

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        check_lr(lr)
        check_nonneg("lr_decay", lr_decay)
        check_nonneg("weight_decay", weight_decay)
        check_nonneg("initial_accumulator_value", initial_accumulator_value)
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        check_modes(foreach, fused, differentiable)
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                st = self.state[p]
                st["step"] = _as_step(0.0)
                st["sum"] = _full_like(p, group["initial_accumulator_value"])

    _group_defaults = dict(foreach=None, maximize=False, differentiable=False, fused=None)

    def share_memory(self):
        """Moves every ``sum`` state to shared memory, as PyTorch does, so that processes sharing the model
        (Hogwild) also share the accumulators. Raises RuntimeError for states on an OpenCL device."""
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["sum"].share_memory_()

    _algo = "adagrad"

    def _plan_hyper(self, group):
        wd = scalar(group["weight_decay"])
        return (dict(wd=wd != 0, maximize=group["maximize"]),
                (scalar(group["lr"]), scalar(group["lr_decay"]), wd, scalar(group["eps"])))

    @staticmethod
    def _new_state(p, name, group):
        # a parameter added after construction (add_param_group): its group's initial_accumulator_value
        return _full_like(p, group["initial_accumulator_value"])

    @staticmethod
    def _plan_scalars(h, t):
        lr, decay, wd, eps = h
        clr = lr / (1 + (t - 1) * decay)
        return (-clr, wd, eps)
