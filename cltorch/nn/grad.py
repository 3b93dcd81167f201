"""``cltorch.nn.grad`` (PyTorch's ``torch.nn.grad``): the gradients of a convolution with respect to its input and
to its weight, given the gradient of its output.

Each is the backward of the same convolution (a convolution is linear in its input and in its weight, so the
values of the tensor being differentiated do not matter): the convolution is run on a zero tensor of the
requested size and ``cltorch.autograd.grad`` returns its gradient (the convolution ops' own backward kernels).
The result is differentiable with respect to the other operand and ``grad_output`` when grad mode is on.
"""
import cltorch as torch
from . import functional as F

__all__ = ["conv1d_input", "conv1d_weight", "conv2d_input", "conv2d_weight", "conv3d_input", "conv3d_weight"]


def _backward(conv, input_or_size, weight_or_size, grad_output, stride, padding, dilation, groups, wrt_input):
    """The gradient w.r.t. the operand given by its size (the input when ``wrt_input``, else the weight)."""
    other = weight_or_size if wrt_input else input_or_size
    need_graph = torch.is_grad_enabled() and (other.requires_grad or grad_output.requires_grad)
    if not need_graph:
        other = other.detach()
    size = tuple(input_or_size) if wrt_input else tuple(weight_or_size)
    z = torch.zeros(size, dtype=grad_output.dtype, device=grad_output.device, requires_grad=True)
    with torch.enable_grad():
        y = conv(z, other, None, stride, padding, dilation, groups) if wrt_input else \
            conv(other, z, None, stride, padding, dilation, groups)
        if tuple(y.shape) != tuple(grad_output.shape):
            raise RuntimeError(f"grad_output has shape {list(grad_output.shape)}, but the convolution of the given "
                               f"sizes gives {list(y.shape)}")
        return torch.autograd.grad(y, z, grad_output, create_graph=need_graph)[0]


def conv1d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """Gradient of ``conv1d`` w.r.t. its input: input_size (N, C_in, L) (a shape), weight (C_out, C_in/groups, K),
    grad_output (N, C_out, L_out) -> (N, C_in, L). RuntimeError when grad_output's shape does not fit."""
    return _backward(F.conv1d, input_size, weight, grad_output, stride, padding, dilation, groups, True)


def conv1d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """Gradient of ``conv1d`` w.r.t. its weight: input (N, C_in, L), weight_size (a shape) -> weight_size."""
    return _backward(F.conv1d, input, weight_size, grad_output, stride, padding, dilation, groups, False)


def conv2d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """Gradient of ``conv2d`` w.r.t. its input (see :func:`conv1d_input`; (N, C, H, W) shapes)."""
    return _backward(F.conv2d, input_size, weight, grad_output, stride, padding, dilation, groups, True)


def conv2d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """Gradient of ``conv2d`` w.r.t. its weight (see :func:`conv1d_weight`)."""
    return _backward(F.conv2d, input, weight_size, grad_output, stride, padding, dilation, groups, False)


def conv3d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """Gradient of ``conv3d`` w.r.t. its input (see :func:`conv1d_input`; (N, C, D, H, W) shapes)."""
    return _backward(F.conv3d, input_size, weight, grad_output, stride, padding, dilation, groups, True)


def conv3d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """Gradient of ``conv3d`` w.r.t. its weight (see :func:`conv1d_weight`)."""
    return _backward(F.conv3d, input, weight_size, grad_output, stride, padding, dilation, groups, False)
