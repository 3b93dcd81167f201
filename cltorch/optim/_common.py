"""Argument checks and small helpers shared by the optimizer modules."""


def scalar(x):
    """A Python float from a float or a 1-element Tensor (``lr`` may be a Tensor, as in PyTorch)."""
    if hasattr(x, "item"):
        return float(x.item())
    return float(x)


def check_lr(lr):
    if hasattr(lr, "numel") and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not 0.0 <= scalar(lr):
        raise ValueError(f"Invalid learning rate: {lr}")


def check_betas(betas):
    if not 0.0 <= scalar(betas[0]) < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= scalar(betas[1]) < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")


def check_nonneg(name, value):
    if not 0.0 <= value:
        raise ValueError(f"Invalid {name} value: {value}")


def check_modes(foreach, fused, differentiable):
    """``fused`` and ``foreach`` both select the fused multi-tensor kernels here; PyTorch's conflicts still
    raise. ``differentiable=True`` (autograd through the step) is not supported."""
    if fused and foreach:
        raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
    if differentiable:
        raise NotImplementedError("cltorch.optim: differentiable=True (autograd through the optimizer step) is "
                                  "not supported; the step runs as a fused in-place kernel")
