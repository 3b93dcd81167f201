"""Helpers of the optimizers whose step is composed from public tensor ops (Adadelta, ASGD, Rprop, Adafactor).

Those algorithms have no fused kernel in ``cl_kernels/optim.cl.mako``; each step is a few in-place
elementwise ops per parameter (each one kernel launch, all on the parameter's device, none waiting for it).
"""
import cltorch as torch

__all__ = ["effective_grad", "check_real"]


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
