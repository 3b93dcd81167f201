"""Top-level names PyTorch scripts call that are thin forms of existing ops: ``clamp_min``, ``clamp_max``,
``arctan2`` (and ``Tensor.arctan2``/``arctan2_``), ``from_dlpack``, ``frombuffer`` and the in-place top-level
functions ``torch.exp_(t)``, ``torch.sigmoid_(t)``... and ``torch.arcsinh(t)``, ``torch.is_signed(t)``... (each
calls the Tensor method of that name)."""
import numpy as np

from .. import _dtype as D
from .._tensor import Tensor
from .creation import from_numpy

__all__ = ["clamp_min", "clamp_max", "arctan2", "from_dlpack", "frombuffer"]


def clamp_min(input, min):  # noqa: A002
    """PyTorch's ``torch.clamp_min(input, min)``: ``input.clamp(min=min)``; ``min`` a number or tensor."""
    return input.clamp_min(min)


def clamp_max(input, max):  # noqa: A002
    """PyTorch's ``torch.clamp_max(input, max)``: ``input.clamp(max=max)``; ``max`` a number or tensor."""
    return input.clamp_max(max)


def arctan2(input, other, *, out=None):
    """PyTorch's ``torch.arctan2``: the alias of ``atan2(input, other)``."""
    r = input.atan2(other)
    if out is not None:
        out.copy_(r)
        return out
    return r


if not hasattr(Tensor, "arctan2"):
    Tensor.arctan2 = Tensor.atan2
if not hasattr(Tensor, "arctan2_") and hasattr(Tensor, "atan2_"):
    Tensor.arctan2_ = Tensor.atan2_


class _Capsule:
    """Wraps a bare DLPack capsule for ``np.from_dlpack`` (which wants ``__dlpack__``)."""
    def __init__(self, cap):
        self.cap = cap

    def __dlpack__(self, *a, **k):
        return self.cap

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU; numpy checks the DLTensor's own device and refuses others


def from_dlpack(ext_tensor):
    """PyTorch's ``torch.from_dlpack``: a cpu tensor sharing memory with a host (kDLCPU) DLPack producer
    (an object with ``__dlpack__``, e.g. a numpy array or a torch cpu tensor, or a bare capsule), through
    numpy's ``from_dlpack``. A cltorch Tensor is returned as is.

    Raises:
        NotImplementedError: a producer on a device other than the host (CUDA, ROCm...): cltorch cannot
            import foreign device memory."""
    if isinstance(ext_tensor, Tensor):
        return ext_tensor
    if hasattr(ext_tensor, "__dlpack_device__"):
        dev = ext_tensor.__dlpack_device__()
        if int(dev[0]) not in (1, 3):   # kDLCPU, kDLCUDAHost (pinned host memory)
            raise NotImplementedError(f"from_dlpack(): DLPack device type {int(dev[0])} is not supported; "
                                      "only host (kDLCPU) memory can be imported")
        src = ext_tensor
    elif hasattr(ext_tensor, "__dlpack__"):
        src = ext_tensor
    else:
        src = _Capsule(ext_tensor)
    try:
        a = np.from_dlpack(src)
    except (BufferError, RuntimeError) as e:
        if "device" in str(e).lower():
            raise NotImplementedError(f"from_dlpack(): only host (kDLCPU) memory can be imported ({e})") from e
        raise
    return from_numpy(a)


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """PyTorch's ``torch.frombuffer``: a 1-D cpu tensor sharing memory with an object exposing the buffer
    protocol (``count`` elements of ``dtype`` from byte ``offset``; ``count=-1``: to the end), through
    ``numpy.frombuffer``. Writes through the tensor change the buffer, as PyTorch. A read-only buffer
    (``bytes``) is shared too; writing it is undefined, as PyTorch warns.

    Raises:
        ValueError: the buffer's length, ``offset`` and ``count`` do not fit (PyTorch's error type)."""
    if not isinstance(dtype, D.dtype):
        raise TypeError(f"frombuffer(): argument 'dtype' must be torch.dtype, not {type(dtype).__name__}")
    nbytes = memoryview(buffer).nbytes
    isz = dtype.itemsize
    if offset < 0 or (nbytes > 0 and offset >= nbytes):
        raise ValueError(f"both buffer length ({nbytes}) and offset ({offset}) must be positive and "
                         "offset must be smaller than buffer length")
    if count == 0 or count < -1:
        raise ValueError(f"both buffer length ({nbytes}) and count ({count}) must not be 0")
    if count == -1 and (nbytes - offset) % isz:
        raise ValueError(f"buffer length ({nbytes - offset} bytes) after offset ({offset} bytes) must be a "
                         f"multiple of element size ({isz})")
    if count > 0 and offset + count * isz > nbytes:
        raise ValueError(f"requested buffer length ({count} * {isz} bytes) after offset ({offset} bytes) must "
                         f"not be greater than actual buffer length ({nbytes} bytes)")
    a = np.frombuffer(buffer, dtype=dtype.np, count=count, offset=offset)
    t = from_numpy(a)
    if requires_grad:
        t.requires_grad_(True)
    return t


# torch.X_(t, *args) for the in-place Tensor methods PyTorch also has at top level
_INPLACE = ["abs_", "acos_", "acosh_", "asin_", "asinh_", "atan_", "atanh_", "ceil_", "clamp_", "clamp_min_",
            "clamp_max_", "clip_", "cos_", "cosh_", "deg2rad_", "detach_", "erf_", "erfc_", "exp2_", "exp_",
            "expm1_", "fill_", "fix_", "floor_", "frac_", "gcd_", "i0_", "index_put_", "lcm_", "ldexp_",
            "log10_", "log1p_", "log2_", "log_", "logit_", "nan_to_num_", "neg_", "negative_", "rad2deg_",
            "reciprocal_", "relu_", "round_", "rsqrt_", "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_",
            "square_", "tan_", "tanh_", "trunc_", "xlogy_", "zero_",
            "addmv_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_", "arctanh_", "as_strided_",
            "conj_physical_", "resize_as_sparse_"]
# torch.X(t, *args) for Tensor methods PyTorch also has at top level that no op module exports
_METHODS = ["arccosh", "arcsinh", "arctanh", "hardshrink", "prelu", "is_neg", "is_same_size", "is_signed",
            "dequantize", "int_repr", "q_scale", "q_zero_point", "q_per_channel_scales", "q_per_channel_zero_points",
            "q_per_channel_axis", "qscheme", "smm", "sspaddmm"]


def _inplace(name):
    def f(input, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"PyTorch's ``torch.{name}(input, ...)``: ``input.{name}(...)``, in place; returns ``input``."
    return f


def _method_function(name):
    def f(input, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"PyTorch's ``torch.{name}(input, ...)``: ``input.{name}(...)``."
    return f


# both kinds: cltorch/__init__.py adds each name it does not define already
inplace_functions = {n: _inplace(n) for n in _INPLACE if hasattr(Tensor, n)}
inplace_functions.update((n, _method_function(n)) for n in _METHODS if hasattr(Tensor, n))
