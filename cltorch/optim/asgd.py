"""Averaged SGD (``torch.optim.ASGD``)."""
import cltorch as torch
from cltorch import _dtype as D

from ._common import check_lr, check_modes, check_nonneg, scalar
from ._composed import composed_step, effective_grad
from .nadam import _set_counter as _set_scalar   # writes a 0-d state tensor in place
from .optimizer import Optimizer, _as_step, _step_value, _zeros_like
from ..ops.elementwise import pointwise

__all__ = ["ASGD"]


class ASGD(Optimizer):
    r"""Averaged stochastic gradient descent (Polyak & Juditsky, 1992, "Acceleration of stochastic
    approximation by averaging"), with the decaying step of Bottou (2012, "Stochastic gradient descent
    tricks", section 5.3), as PyTorch's ``torch.optim.ASGD`` implements it. At step ``t``::

        g = -grad if maximize else grad
        if weight_decay != 0: g = g + weight_decay * param
        param = param * (1 - lambd * eta) - eta * g
        ax = param if mu == 1 else ax + mu * (param - ax)
        eta = lr / (1 + lambd * lr * t) ** alpha
        mu = 1 / max(1, t - t0)

    ``eta`` and ``mu`` are read back from their 0-d float32 state tensors, as PyTorch does (so its float32
    rounding of ``eta`` is reproduced). The averaged parameters are ``optimizer.state[p]["ax"]``.

    Args:
        params; lr (float or 1-element Tensor, 1e-2); lambd (1e-4, decay term); alpha (0.75, power for the
        eta update); t0 (1e6, the step at which averaging starts); weight_decay (0); foreach, capturable
        (accepted); maximize (False); differentiable (True raises NotImplementedError). ValueError for a
        negative lr or weight_decay, as PyTorch.

    State per parameter: ``step`` (0-d float32 cpu tensor), ``eta`` and ``mu`` (0-d float32 tensors), ``ax``
    (parameter's shape, dtype and device).
    """

    _group_defaults = dict(foreach=None, maximize=False, differentiable=False, capturable=False)

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None,
                 maximize=False, differentiable=False, capturable=False):
        check_lr(lr)
        check_nonneg("weight_decay", weight_decay)
        check_modes(foreach, None, differentiable)
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        # load_state_dict moves every state tensor to its parameter's device and dtype: eta and mu go back to
        # 0-d float32 cpu tensors, which the step reads and writes without waiting for a device (and which a
        # compiled replay can re-derive; a device read would make the step fall back to eager)
        for st in self.state.values():
            if isinstance(st, dict):
                for k in ("eta", "mu"):
                    if k in st:
                        st[k] = _as_step(st[k])

    def step(self, closure=None):
        """One ASGD step over every parameter with a gradient. Returns ``closure()``'s loss if given."""
        return composed_step(self, closure)

    @staticmethod
    def _hyper(group):
        return dict(lr=scalar(group["lr"]), lambd=scalar(group["lambd"]), alpha=scalar(group["alpha"]),
                    t0=scalar(group["t0"]), wd=scalar(group["weight_decay"]), maximize=group["maximize"])

    @staticmethod
    def _init_state(p, g, group, st):
        st["eta"] = torch.tensor(scalar(group["lr"]), dtype=torch.float32)
        st["mu"] = torch.tensor(1.0, dtype=torch.float32)
        st["ax"] = _zeros_like(p)

    @staticmethod
    def _update(p, g, st, h, t):
        lr, lambd = h["lr"], h["lambd"]
        g = effective_grad(p, g, h["maximize"], h["wd"])
        eta = _step_value(st["eta"])
        mu = _step_value(st["mu"])
        p.mul_(1 - lambd * eta).add_(g, alpha=-eta)
        _average(st["ax"], p, mu)
        _set_scalar(st["eta"], lr / ((1 + lambd * lr * t) ** h["alpha"]))
        _set_scalar(st["mu"], 1 / max(1, t - h["t0"]))


def _average(ax, p, mu):
    """``ax = p`` when ``mu == 1``, else ``ax = ax + (p - ax) * mu`` (PyTorch's two branches, with the same
    roundings: the kernel is built without FP contraction), in place in one launch whatever ``mu`` is.

    One kernel for both branches keeps the step's launches the same from step to step, so a compiled replay
    (which re-runs this step without launching and takes the new scalar arguments) stays valid when averaging
    starts at step ``t0``; two branches would launch other kernels then. ax: the parameter's shape, dtype and
    device; p may be non-contiguous."""
    ct = D.float32 if ax.dtype in (D.float16, D.bfloat16) else ax.dtype
    pointwise("(x3 != 0) ? x1 : x0 + (x1 - x0) * x2", [ax, p, float(mu), int(mu == 1)], ax.dtype, ct, out=ax,
              op_compute=[ct, ct, ct, D.int32])
    ax._storage.version += 1     # an in-place write, as copy_/add_ count it
