"""``cltorch.ops.aten``: the few aten operators that PyTorch scripts (and OpInfo) call through ``torch.ops.aten``.

Each name is a packet with PyTorch's overload attributes (``.default``, ``.Tensor``) that call one function:
``slice``, ``native_dropout_backward`` and ``max_pool2d_with_indices_backward``, composed of public ops. A name
not here raises AttributeError naming it.
"""

import builtins

__all__ = ["slice", "native_dropout_backward", "max_pool2d_with_indices_backward"]


class _Packet:
    """An aten operator: callable, and callable through its overload names."""

    def __init__(self, name, fn, overloads=("default",)):
        self.__name__ = name
        self._fn = fn
        for o in overloads:
            setattr(self, o, fn)

    def __call__(self, *args, **kwargs):
        return self._fn(*args, **kwargs)

    def __repr__(self):
        return f"<cltorch.ops.aten.{self.__name__}>"


def _slice(input, dim=0, start=None, end=None, step=1):  # noqa: A002
    """aten.slice.Tensor: the view ``input[..., start:end:step]`` along ``dim`` (start/end clamped as Python
    slices; step must be positive, else RuntimeError)."""
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    nd = input.dim()
    if nd == 0:
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    d = dim + nd if dim < 0 else dim
    idx = [builtins.slice(None)] * d + [builtins.slice(start, end, step)]
    return input[tuple(idx)]


def _native_dropout_backward(grad_output, mask, scale):
    """aten.native_dropout_backward: ``grad_output * mask * scale`` (mask bool or float)."""
    return grad_output * mask.to(grad_output.dtype) * scale


def _max_pool2d_with_indices_backward(grad_output, input, kernel_size, stride, padding, dilation, ceil_mode,  # noqa: A002
                                      indices):
    """aten.max_pool2d_with_indices_backward: the gradient of max_pool2d with respect to input, given the flat
    per-plane ``indices`` that max_pool2d_with_indices returned: every output's gradient is added at its index
    (scatter_add over each (N, C) plane of H*W elements); differentiable in grad_output."""
    import cltorch
    if input.dim() not in (3, 4):
        raise RuntimeError(f"max_pool2d_with_indices_backward: expected 3-D or 4-D input, got {input.dim()}-D")
    lead = tuple(input.shape[:-2])
    hw = input.shape[-2] * input.shape[-1]
    g = grad_output.reshape(*lead, -1)
    z = cltorch.zeros(*lead, hw, dtype=grad_output.dtype, device=grad_output.device)
    r = z.scatter_add(-1, indices.reshape(*lead, -1), g).reshape(input.shape)
    if input.requires_grad:    # PyTorch's derivative with respect to input is zero, but the result depends on it
        r = r + (input - input.detach()) * 0
    return r


slice = _Packet("slice", _slice, ("default", "Tensor"))  # noqa: A001 - aten's name
native_dropout_backward = _Packet("native_dropout_backward", _native_dropout_backward)
max_pool2d_with_indices_backward = _Packet("max_pool2d_with_indices_backward", _max_pool2d_with_indices_backward)
