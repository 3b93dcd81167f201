"""PyTorch's ``torch.autograd.grad_mode`` path: the grad-mode context managers (defined in ``cltorch.autograd``)."""
from . import no_grad, enable_grad, set_grad_enabled, inference_mode  # noqa: F401

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "inference_mode"]
