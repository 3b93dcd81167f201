"""The convolutions' arguments as PyTorch checks them (same errors and messages), and the :class:`Geom` they
describe; the lift of 1-d and 2-d tensors to the 3-d path."""
import numpy as np

from ..._tensor import Tensor
from .geom import Geom


def _tuple(v, n, name):
    if isinstance(v, Tensor):
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        if len(v) == 1:
            v = tuple(v) * n
        if len(v) != n:
            raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} values to match "
                               f"the convolution dimensions, but got {name}={list(v)}")
        return tuple(int(a) for a in v)
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} must be an int or a tuple of ints, got {type(v).__name__}")
    return (int(v),) * n


def _check_inputs(name, x, w, b, nd):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(x).__name__}")
    if not isinstance(w, Tensor):
        raise TypeError(f"{name}(): argument 'weight' must be Tensor, not {type(w).__name__}")
    if b is not None and not isinstance(b, Tensor):
        raise TypeError(f"{name}(): argument 'bias' must be Tensor, not {type(b).__name__}")
    if x.dim() not in (nd + 1, nd + 2):
        raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to {name}, but got "
                           f"input of size: {list(x.shape)}")
    if w.dim() != nd + 2:
        raise RuntimeError(f"weight should have {nd + 2} dimensions for {name}, but got weight of size "
                           f"{list(w.shape)}")
    from ..elementwise import common_device
    common_device([t for t in (x, w, b) if t is not None])
    for t in (x, w, b):
        if t is not None and t.device != x.device:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"{x.device} and {t.device}!")
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"\"{name}\" not implemented for '{x.dtype.name.capitalize()}'")
    if w.dtype is not x.dtype:
        raise RuntimeError(f"Input type ({x.dtype.name}) and weight type ({w.dtype.name}) should be the same")
    if b is not None:
        if b.dtype is not x.dtype:
            raise RuntimeError(f"Input type ({x.dtype.name}) and bias type ({b.dtype.name}) should be the same")


def _lift(t, nd):
    """(N, C, *spatial[nd]) -> (N, C, 1.., *spatial): every convolution op works on 3 spatial dims."""
    for _ in range(3 - nd):
        t = t.unsqueeze(2)
    return t


def _unlift(t, nd):
    for _ in range(3 - nd):
        t = t.squeeze(2)
    return t


def _batched(name, x, w, b, groups, nd):
    """The checks both directions start with: (x with a batch dim, whether it had none, groups as an int)."""
    _check_inputs(name, x, w, b, nd)
    unbatched = x.dim() == nd + 1
    if unbatched:
        x = x.unsqueeze(0)
    groups = int(groups)
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    return x, unbatched, groups


def conv_geometry(name, x, w, b, stride, padding, dilation, groups, nd):
    """conv1d/2d/3d's arguments checked as PyTorch checks them: (batched x, its :class:`Geom`, whether x was
    unbatched)."""
    x, unbatched, groups = _batched(name, x, w, b, groups, nd)
    stride = _tuple(stride, nd, "stride")
    dilation = _tuple(dilation, nd, "dilation")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("dilation should be greater than zero")
    ks = tuple(w.shape[2:])
    O = w.shape[0]
    C = x.shape[1]
    if O % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
                           f"but got weight of size {list(w.shape)} instead")
    if C != w.shape[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(w.shape)}, expected input"
                           f"{list(x.shape)} to have {w.shape[1] * groups} channels, but got {C} channels instead")
    if b is not None and (b.dim() != 1 or b.shape[0] != O):
        raise RuntimeError(f"Given weight of size {list(w.shape)}, expected bias to be 1-dimensional with {O} "
                           f"elements, but got bias of size {list(b.shape)} instead")
    eff = tuple(d * (k - 1) + 1 for d, k in zip(dilation, ks))
    if isinstance(padding, str):
        if padding == "valid":
            lo = hi = (0,) * nd
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            tot = tuple(e - 1 for e in eff)
            lo = tuple(t // 2 for t in tot)
            hi = tuple(t - l for t, l in zip(tot, lo))
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    else:
        lo = hi = _tuple(padding, nd, "padding")
        if any(p < 0 for p in lo):
            raise RuntimeError("negative padding is not supported")
    spatial = tuple(x.shape[2:])
    padded = tuple(s + a + c for s, a, c in zip(spatial, lo, hi))
    if any(p < e for p, e in zip(padded, eff)):
        raise RuntimeError(f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). Kernel "
                           f"size: ({' x '.join(map(str, eff))}). Kernel size can't be greater than actual input "
                           "size")
    out = tuple((p - e) // s + 1 for p, e, s in zip(padded, eff, stride))
    return x, Geom.make(groups, stride, lo, dilation, spatial, out, ks), unbatched


def conv_t_geometry(name, x, w, b, stride, padding, output_padding, groups, dilation, nd):
    """conv_transpose1d/2d/3d's arguments checked as PyTorch checks them: (batched x, the :class:`Geom` of the
    convolution it is the transpose of, whether x was unbatched)."""
    x, unbatched, groups = _batched(name, x, w, b, groups, nd)
    if isinstance(padding, str):
        raise TypeError(f"{name}(): argument 'padding' must be tuple of ints, not str")
    stride = _tuple(stride, nd, "stride")
    padding = _tuple(padding, nd, "padding")
    output_padding = _tuple(output_padding, nd, "output_padding")
    dilation = _tuple(dilation, nd, "dilation")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("dilation should be greater than zero")
    if any(p < 0 for p in padding):
        raise RuntimeError("negative padding is not supported")
    if any(p < 0 for p in output_padding):
        raise RuntimeError("negative output_padding is not supported")
    for op, s, d in zip(output_padding, stride, dilation):
        if op >= s and op >= d:
            raise RuntimeError("output padding must be smaller than either stride or dilation, but got "
                               f"output_padding={list(output_padding)}, stride={list(stride)}, "
                               f"dilation={list(dilation)}")
    Cin = x.shape[1]
    if w.shape[0] != Cin:
        raise RuntimeError(f"Given transposed=1, weight of size {list(w.shape)}, expected input {list(x.shape)} "
                           f"to have {w.shape[0]} channels, but got {Cin} channels instead")
    if Cin % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
                           f"but got weight of size {list(w.shape)} instead")
    Cout = w.shape[1] * groups
    if b is not None and (b.dim() != 1 or b.shape[0] != Cout):
        raise RuntimeError(f"Given transposed=1, weight of size {list(w.shape)}, expected bias to be "
                           f"1-dimensional with {Cout} elements, but got bias of size {list(b.shape)} instead")
    ks = tuple(w.shape[2:])
    spatial = tuple(x.shape[2:])
    out = tuple((i - 1) * s - 2 * p + d * (k - 1) + op + 1
                for i, s, p, d, k, op in zip(spatial, stride, padding, dilation, ks, output_padding))
    if any(o <= 0 for o in out):
        raise RuntimeError(f"Given input size per channel: ({' x '.join(map(str, spatial))}). Calculated output "
                           f"size per channel: ({' x '.join(map(str, out))}). Output size is too small")
    return x, Geom.make(groups, stride, padding, dilation, out, spatial, ks), unbatched
