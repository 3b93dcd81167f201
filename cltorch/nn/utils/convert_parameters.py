"""Flatten parameters into one vector and back (PyTorch's ``torch.nn.utils.convert_parameters``)."""
import cltorch as torch
from ..._tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def _check_same_device(param, old_device):
    if old_device is None:
        return param.device
    if param.device != old_device:
        raise TypeError(f"Found two parameters on different devices ({old_device} and {param.device}), this is "
                        "currently not supported.")
    return old_device


def parameters_to_vector(parameters):
    """One 1-D tensor holding every parameter's values in order (a copy; gradients flow back to them)."""
    device = None
    vec = []
    for p in parameters:
        device = _check_same_device(p, device)
        vec.append(p.reshape(-1))
    if not vec:
        return torch.empty(0)
    from ..functional import _cat
    return _cat(vec)


def vector_to_parameters(vec, parameters):
    """Point each parameter's data at its slice of ``vec`` (1-D), in order; the parameters then share
    ``vec``'s storage, as in PyTorch. TypeError when vec is not a tensor, ValueError when sizes differ."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    params = list(parameters)
    total = sum(p.numel() for p in params)
    if vec.dim() != 1 or vec.numel() != total:
        raise ValueError(f"vector_to_parameters: vec has shape {list(vec.shape)} but the parameters hold {total} "
                         "elements")
    device = None
    pointer = 0
    for p in params:
        device = _check_same_device(p, device)
        n = p.numel()
        p.data = vec[pointer:pointer + n].view_as(p).data
        pointer += n
