"""Rprop (``torch.optim.Rprop``)."""
import cltorch as torch

from ._common import check_lr, check_modes, scalar
from ._composed import check_real, effective_grad
from .optimizer import Optimizer, _as_step, _bump_step, _full_like, _zeros_like

__all__ = ["Rprop"]


class Rprop(Optimizer):
    r"""Resilient backpropagation (Riedmiller & Braun, 1993), in the variant of PyTorch's ``torch.optim.Rprop``
    documentation (Rprop without weight backtracking: a gradient whose sign flipped is zeroed)::

        g = -grad if maximize else grad
        s = sign(g * prev)
        step_size = clamp(step_size * (etaplus if s > 0 else etaminus if s < 0 else 1), *step_sizes)
        g = 0 where s < 0
        param = param - sign(g) * step_size
        prev = g

    Args:
        params; lr (float or 1-element Tensor, 1e-2: every step size starts there); etas ((0.5, 1.2):
        (etaminus, etaplus), with 0 < etaminus < 1 < etaplus); step_sizes ((1e-6, 50): min and max step
        size); capturable, foreach (accepted); maximize (False); differentiable (True raises
        NotImplementedError). ValueError for out-of-range values, as PyTorch.

    State per parameter: ``step`` (0-d float32 cpu tensor), ``prev`` and ``step_size`` (parameter's shape,
    dtype and device).
    """

    _group_defaults = dict(foreach=None, maximize=False, differentiable=False, capturable=False)

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False, foreach=None,
                 maximize=False, differentiable=False):
        check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        check_modes(foreach, None, differentiable)
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def step(self, closure=None):
        """One Rprop step over every parameter with a gradient. Returns ``closure()``'s loss if given."""
        loss = self._closure_loss(closure)
        with torch.no_grad():
            for group in self.param_groups:
                etaminus, etaplus = (scalar(e) for e in group["etas"])
                lo, hi = (scalar(s) for s in group["step_sizes"])
                for p, g in self._grads_of(group):
                    check_real("Rprop", p)
                    st = self.state[p]
                    if len(st) == 0:
                        st["step"] = _as_step(0.0)
                        st["prev"] = _zeros_like(p)
                        st["step_size"] = _full_like(p, scalar(group["lr"]))
                    _bump_step(st["step"])
                    g = effective_grad(p, g, group["maximize"])
                    prev, size = st["prev"], st["step_size"]
                    s = g.mul(prev).sign_()
                    factor = torch.where(s > 0, etaplus, torch.where(s < 0, etaminus, 1.0))
                    size.mul_(factor.to(dtype=size.dtype)).clamp_(lo, hi)
                    g = torch.where(s < 0, torch.zeros_like(g), g)
                    p.addcmul_(g.sign(), size, value=-1)
                    prev.copy_(g)
        return loss
