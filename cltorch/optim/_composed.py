"""Helpers of the optimizers whose step is composed from public tensor ops (Adadelta, ASGD, Rprop, Adafactor).

Those algorithms have no fused kernel in ``cl_kernels/optim.cl.mako``; each step is a few in-place
elementwise ops per parameter (each one kernel launch, all on the parameter's device, none waiting for it).
"""
import cltorch as torch

from .optimizer import _as_step, _bump_step

__all__ = ["effective_grad", "check_real", "composed_step"]


def composed_step(opt, closure):
    """The step of a composed optimizer: run ``closure`` (with grad), then, without grad, for every parameter
    with a gradient: make its state on first sight (``step`` plus ``opt._init_state(p, g, group, state)``),
    bump ``state["step"]`` and call ``opt._update(p, g, state, h, t)``, where ``h = opt._hyper(group)`` is
    computed once per group and ``t`` is the new step number. Returns the closure's loss."""
    loss = opt._closure_loss(closure)
    name = type(opt).__name__
    with torch.no_grad():
        for group in opt.param_groups:
            h = opt._hyper(group)
            for p, g in opt._grads_of(group):
                check_real(name, p)
                st = opt.state[p]
                if len(st) == 0:
                    st["step"] = _as_step(0.0)
                    opt._init_state(p, g, group, st)
                t = _bump_step(st["step"])
                opt._update(p, g, st, h, t)
    return loss


def effective_grad(p, g, maximize, weight_decay=0.0):
    """``-g`` when maximizing, plus ``weight_decay * p`` when it is non-zero (a new tensor, or ``g`` itself)."""
    if maximize:
        g = torch.neg(g)
    if weight_decay != 0:
        g = g.add(p, alpha=weight_decay)
    return g


def check_real(name, p):
    """Complex parameters are not supported by cltorch.optim (NotImplementedError naming the optimizer)."""
    if getattr(p.dtype, "is_complex", False):
        raise NotImplementedError(f"{name}: complex parameters are not supported by cltorch.optim")
    if not p.dtype.is_floating_point:
        raise RuntimeError(f"{name} updates floating-point parameters; got {p.dtype}")
