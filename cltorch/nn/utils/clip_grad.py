"""Gradient clipping (PyTorch's ``torch.nn.utils.clip_grad``).

The total norm stays a device tensor and the gradients are scaled by ``min(1, max_norm / (total + 1e-6))``
unconditionally, as PyTorch does, so clipping never waits for the device unless ``error_if_nonfinite=True``
(which must read the norm).
"""
import math

import cltorch as torch
from ..._tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_"]


def _tensors(x):
    if isinstance(x, Tensor):
        return [x]
    return list(x)


def _norm_type(norm_type):
    if isinstance(norm_type, str):
        if norm_type in ("inf", "Inf"):
            return math.inf
        raise ValueError(f"norm_type {norm_type!r} is not a number")
    return float(norm_type)


def _vector_norm(t, p):
    """The p-norm of all elements of t as a 0-d tensor (float accumulation in t's dtype)."""
    if p == math.inf:
        return t.abs().amax() if t.numel() else torch.zeros((), dtype=t.dtype, device=t.device)
    if p == -math.inf:
        return t.abs().amin()
    if p == 2.0:
        return (t * t).sum().sqrt()
    if p == 1.0:
        return t.abs().sum()
    if p == 0.0:
        return (t != 0).to(t.dtype).sum()
    return (t.abs() ** p).sum() ** (1.0 / p)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The p-norm of the concatenation of ``tensors`` (the norm of the per-tensor norms), as a 0-d tensor on
    the first tensor's device. ``norm_type`` may be ``inf``. RuntimeError when non-finite and
    ``error_if_nonfinite``."""
    tensors = [t for t in _tensors(tensors) if t is not None]
    p = _norm_type(norm_type)
    if not tensors:
        return torch.tensor(0.0)
    first = tensors[0].device
    with torch.no_grad():
        norms = [_vector_norm(t, p) for t in tensors]
        norms = [n.to(first) if n.device != first else n for n in norms]
        if p == math.inf:
            total = norms[0]
            for n in norms[1:]:
                total = torch.maximum(total, n.to(total.dtype))
        elif p == -math.inf:
            total = norms[0]
            for n in norms[1:]:
                total = torch.minimum(total, n.to(total.dtype))
        else:
            total = _vector_norm(_stack0(norms), p)
    if error_if_nonfinite and not bool(torch.isfinite(total)):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so "
                           "it cannot be clipped. To disable this error and scale the gradients by the non-finite "
                           "norm anyway, set `error_if_nonfinite=False`")
    return total


def _stack0(scalars):
    """Stack 0-d tensors (same device) into a 1-d tensor; without ``stack``, a chain of where-adds."""
    dt = scalars[0].dtype
    for s in scalars[1:]:
        dt = torch.promote_types(dt, s.dtype)
    stack = getattr(torch, "stack", None)
    if stack is None:
        try:
            from ...ops.joins import stack
        except ImportError:
            stack = None
    if stack is not None:
        return stack([s.to(dt) for s in scalars])
    n = len(scalars)
    out = torch.zeros(n, dtype=dt, device=scalars[0].device)
    idx = torch.arange(n, device=out.device)
    for i, s in enumerate(scalars):
        out = torch.where(idx == i, s.to(dt), out)
    return out


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the gradients of ``parameters`` in place by ``min(1, max_norm / (total_norm + 1e-6))``."""
    grads = [p.grad for p in _tensors(parameters) if p.grad is not None]
    if not grads:
        return
    with torch.no_grad():
        coef = (float(max_norm) / (total_norm + 1e-6)).clamp(max=1.0)
        per_dev = {}
        for g in grads:
            c = per_dev.get(g.device)
            if c is None:
                c = per_dev[g.device] = coef.to(g.device)
            g.mul_(c.to(g.dtype) if c.dtype is not g.dtype else c)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Clip the gradients of ``parameters`` (a tensor or an iterable) so that their total ``norm_type``-norm
    is at most ``max_norm``; returns the total norm BEFORE clipping (a 0-d tensor). ``norm_type``: any float
    or ``inf``. ``error_if_nonfinite``: RuntimeError if the total norm is nan or inf. ``foreach`` is accepted
    for compatibility (the per-tensor work is already one reduction and one scale per gradient)."""
    params = _tensors(parameters)
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return torch.tensor(0.0)
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(params, max_norm, total, foreach)
    return total


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Deprecated alias of :func:`clip_grad_norm_`."""
    import warnings
    warnings.warn("`torch.nn.utils.clip_grad_norm` is now deprecated in favor of `torch.nn.utils.clip_grad_norm_`.",
                  FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient of ``parameters`` in place to [-clip_value, clip_value]."""
    clip_value = float(clip_value)
    with torch.no_grad():
        for p in _tensors(parameters):
            if p.grad is not None:
                p.grad.clamp_(-clip_value, clip_value)
