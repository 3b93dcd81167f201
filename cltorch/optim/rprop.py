"""Rprop (``torch.optim.Rprop``)."""
import cltorch as torch

from ._common import check_lr, check_modes, scalar
from ._composed import composed_step, effective_grad
from .optimizer import Optimizer, _full_like, _zeros_like

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
        return composed_step(self, closure)

    @staticmethod
    def _hyper(group):
        etaminus, etaplus = (scalar(e) for e in group["etas"])
        lo, hi = (scalar(s) for s in group["step_sizes"])
        return dict(etaminus=etaminus, etaplus=etaplus, lo=lo, hi=hi, maximize=group["maximize"])

    @staticmethod
    def _init_state(p, g, group, st):
        st["prev"] = _zeros_like(p)
        st["step_size"] = _full_like(p, scalar(group["lr"]))

    @staticmethod
    def _update(p, g, st, h, t):
        g = effective_grad(p, g, h["maximize"])
        prev, size = st["prev"], st["step_size"]
        s = g.mul(prev).sign_()
        factor = torch.where(s > 0, h["etaplus"], torch.where(s < 0, h["etaminus"], 1.0))
        size.mul_(factor.to(dtype=size.dtype)).clamp_(h["lo"], h["hi"])
        g = torch.where(s < 0, torch.zeros_like(g), g)
        p.addcmul_(g.sign(), size, value=-1)
        prev.copy_(g)
