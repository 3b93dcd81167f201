"""PyTorch's ``torch.autograd.function`` path: ``Function`` and its ``ctx`` (defined in ``cltorch.autograd``)."""
from . import Function, FunctionCtx  # noqa: F401

__all__ = ["Function", "FunctionCtx"]
