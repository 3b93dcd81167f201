"""SparseAdam (``torch.optim.SparseAdam``): its constructor, and PyTorch's error for dense gradients.

PyTorch's SparseAdam updates only the rows present in a sparse gradient and raises RuntimeError for a dense
one. cltorch has no sparse tensors (``Tensor.is_sparse`` is always False, and ``nn.Embedding(sparse=True)``
raises NotImplementedError in its forward), so every gradient it can see is dense: ``step`` raises
PyTorch's RuntimeError for the first parameter that has a gradient. Use :class:`cltorch.optim.Adam` instead.
"""
from ._common import check_lr, scalar
from .optimizer import Optimizer

__all__ = ["SparseAdam"]


class SparseAdam(Optimizer):
    r"""Adam for sparse gradients (PyTorch's ``torch.optim.SparseAdam``), which cltorch cannot produce.

    Args:
        params; lr (float or 1-element Tensor, 1e-3, > 0); betas ((0.9, 0.999)); eps (1e-8, > 0);
        maximize (False). ValueError for out-of-range values, as PyTorch; ValueError for sparse or complex
        parameters (none exist in cltorch).

    ``step(closure=None)`` runs the closure, then raises ``RuntimeError("SparseAdam does not support dense
    gradients, please consider Adam instead")`` when a parameter has a gradient (all cltorch gradients are
    dense); with no gradients at all it returns the closure's loss, as PyTorch.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False):
        check_lr(lr)
        if not 0.0 < scalar(lr):
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))
        sparse, complex_ = [], []
        for i, group in enumerate(self.param_groups):
            for j, p in enumerate(group["params"]):
                if p.is_sparse:
                    sparse.append([i, j])
                if p.is_complex():
                    complex_.append([i, j])
        if sparse:
            raise ValueError(f"Sparse params at indices {sparse}: SparseAdam requires dense parameter tensors")
        if complex_:
            raise ValueError(f"Complex params at indices {complex_}: SparseAdam does not support complex "
                             "parameters")

    def step(self, closure=None):
        """Raises RuntimeError for a dense gradient (every gradient in cltorch); see the class docstring."""
        loss = self._closure_loss(closure)
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None and not p.grad.is_sparse:
                    raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead")
        return loss
