"""``cltorch.nn.init``: PyTorch's weight initialisers (``torch.nn.init``), same names, arguments and formulas.

Every initialiser fills the tensor in place under no_grad and returns it. Random ones draw with the
counter-based Philox generator (``Tensor.uniform_`` / ``normal_``, the global generator or ``generator=``),
so the same seed gives the same weights on every device. ``trunc_normal_`` maps Philox uniforms through the
inverse normal CDF on the host (numpy, float64) and ``orthogonal_`` takes ``cltorch.linalg.qr`` (host LAPACK) of
Philox normals, so those too are identical on every device. Formulas: Glorot & Bengio (2010) for ``xavier_*``,
He et al. (2015) for ``kaiming_*``, Saxe et al. (2013) for ``orthogonal_``.
"""
import math
import warnings

import numpy as np

import cltorch as torch

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_",
           "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_",
           "sparse_"]


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for ``nonlinearity``: 1 for linear/conv/sigmoid, 5/3 for tanh, sqrt(2) for relu,
    sqrt(2 / (1 + slope^2)) for leaky_relu (slope ``param``, default 0.01), 3/4 for selu.
    Raises ValueError for an unknown nonlinearity or a non-numeric slope."""
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _gen(generator):
    return {} if generator is None else {"generator": generator}


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill with U(a, b)."""
    with torch.no_grad():
        return tensor.uniform_(a, b, **_gen(generator))


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill with N(mean, std^2)."""
    with torch.no_grad():
        return tensor.normal_(mean, std, **_gen(generator))


# Giles (2010), "Approximating the erfinv function", single-precision version (relative error of a few 1e-7,
# enough for float32 weights); float64 weights get two Newton steps on erf besides.
_ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                   -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
                0.00943887047, 1.00167406, 2.83297682)


def _erf(x):
    """erf in float64 for numpy arrays (the standard library's, element by element)."""
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _erfinv(y, newton=2):
    """Inverse error function on (-1, 1) for float64 numpy arrays (``newton`` refinement steps)."""
    y = np.asarray(y, dtype=np.float64)
    w = -np.log((1.0 - y) * (1.0 + y))
    wc = w - 2.5
    wt = np.sqrt(np.maximum(w, 0.0)) - 3.0
    pc = np.full_like(y, _ERFINV_CENTRAL[0])
    for c in _ERFINV_CENTRAL[1:]:
        pc = pc * wc + c
    pt = np.full_like(y, _ERFINV_TAIL[0])
    for c in _ERFINV_TAIL[1:]:
        pt = pt * wt + c
    x = np.where(w < 5.0, pc, pt) * y
    for _ in range(newton):  # Newton: x -= (erf(x) - y) / erf'(x)
        fin = np.isfinite(x)
        xf = np.where(fin, x, 0.0)
        step = (_erf(xf) - y) / (2.0 / math.sqrt(math.pi) * np.exp(-xf * xf))
        x = np.where(fin & np.isfinite(step), xf - step, x)
    return x


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fill with N(mean, std^2) truncated to [a, b], by the inverse-CDF method: Philox uniforms on
    [2 cdf(a') - 1, 2 cdf(b') - 1], then ``mean + std sqrt(2) erfinv(u)``, clamped to [a, b]."""
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution of values may "
                      "be incorrect.", stacklevel=2)

    def norm_cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    lo, hi = norm_cdf((a - mean) / std), norm_cdf((b - mean) / std)
    with torch.no_grad():
        if tensor.numel() == 0:
            return tensor
        u = torch.empty(tensor.shape, dtype=torch.float64 if _fp64(tensor) else torch.float32, device=tensor.device)
        u.uniform_(2 * lo - 1, 2 * hi - 1, **_gen(generator))
        host = np.asarray(u.cpu().numpy(), dtype=np.float64)
        host = np.clip(host, np.nextafter(-1.0, 0.0), np.nextafter(1.0, 0.0))
        vals = np.clip(_erfinv(host, 2 if _fp64(tensor) else 0) * (std * math.sqrt(2.0)) + mean, a, b)
        tensor.copy_(torch.from_numpy(vals.astype(tensor.dtype.np if tensor.dtype is not torch.float16
                                                  else np.float32)))
    return tensor


def _fp64(tensor):
    return tensor.dtype is torch.float64


def constant_(tensor, val):
    """Fill with ``val``."""
    with torch.no_grad():
        return tensor.fill_(val)


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    with torch.no_grad():
        return tensor.zero_()


def eye_(tensor):
    """Fill a 2-D tensor with the identity (ones on the main diagonal). ValueError for other ranks."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    with torch.no_grad():
        tensor.copy_(torch.eye(*tensor.shape, dtype=tensor.dtype, device=tensor.device))
    return tensor


def dirac_(tensor, groups=1):
    """Fill a {3,4,5}-D convolution weight with the Dirac delta (identity convolution), per group."""
    dims = tensor.dim()
    if dims not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tensor.shape
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_chans_per_grp = sizes[0] // groups
    min_dim = min(out_chans_per_grp, sizes[1])
    w = np.zeros(tuple(sizes), dtype=np.float64)
    for g in range(groups):
        for d in range(min_dim):
            idx = (g * out_chans_per_grp + d, d) + tuple(s // 2 for s in sizes[2:])
            w[idx] = 1
    with torch.no_grad():
        tensor.copy_(torch.from_numpy(w))
    return tensor


def _calculate_fan_in_and_fan_out(tensor):
    """(fan_in, fan_out) = (size(1) * receptive, size(0) * receptive), receptive = prod(shape[2:])."""
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    num_input_fmaps = tensor.shape[1]
    num_output_fmaps = tensor.shape[0]
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return num_input_fmaps * receptive, num_output_fmaps * receptive


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """U(-a, a) with ``a = gain * sqrt(6 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """N(0, std^2) with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-bound, bound) with ``bound = gain * sqrt(3 / fan)``, gain = calculate_gain(nonlinearity, a) and fan
    the ``mode`` fan. A tensor with a zero-size dim is left alone with a warning, as in PyTorch."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    std = gain / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """N(0, std^2) with ``std = gain / sqrt(fan)``."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    std = gain / math.sqrt(fan)
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor, gain=1, generator=None):
    """Fill ``tensor`` (at least 2-D: rows = its size 0, cols = the product of the others) with a (semi-)
    orthogonal matrix times ``gain``, PyTorch's construction (Saxe et al. 2013): Q of ``cltorch.linalg.qr``
    of a (rows, cols) Philox standard normal matrix (transposed first when rows < cols, so Q has orthonormal
    columns, and transposed back), each column multiplied by the sign of R's diagonal so that Q is uniformly
    distributed (Mezzadri 2007). The normals and the QR are float32 (float64 for a float64 tensor), so the
    same seed gives the same matrix on every device. ValueError for a tensor of fewer than 2 dims."""
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    with torch.no_grad():
        flat = torch.empty((rows, cols), dtype=torch.float32, device=tensor.device)
        flat.normal_(0.0, 1.0, **_gen(generator))
        flat = flat.to(device="cpu", dtype=torch.float64 if tensor.dtype == torch.float64 else torch.float32)
        if rows < cols:
            flat = flat.t()
        q, r = torch.linalg.qr(flat)
        d = torch.diagonal(r)
        # sign(d) from comparisons and casts: exact ops, which run in numpy on cpu tensors, so that initialising
        # needs no OpenCL CPU device (a machine with GPUs only)
        q = q * ((d > 0).to(q.dtype) - (d < 0).to(q.dtype))
        if rows < cols:
            q = q.t()
        tensor.view(rows, cols).copy_(q.to(tensor.device))
        tensor.mul_(gain)
    return tensor


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """A 2-D tensor with N(0, std^2) entries and a fraction ``sparsity`` of each column set to zero (rows
    chosen by a Philox permutation)."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    num_zeros = int(math.ceil(sparsity * rows))
    with torch.no_grad():
        tensor.normal_(0.0, std, **_gen(generator))
        if num_zeros:
            keys = torch.empty((rows, cols), dtype=torch.float32, device=tensor.device).uniform_(0.0, 1.0,
                                                                                                 **_gen(generator))
            order = np.argsort(np.asarray(keys.cpu().numpy()), axis=0, kind="stable")
            mask = np.ones((rows, cols), dtype=np.float64)
            for c in range(cols):
                mask[order[:num_zeros, c], c] = 0.0
            tensor.mul_(torch.from_numpy(mask).to(device=tensor.device, dtype=tensor.dtype))
    return tensor


def _deprecated(new):
    def f(*args, **kwargs):
        warnings.warn(f"nn.init.{new.__name__[:-1]} is now deprecated in favor of nn.init.{new.__name__}.",
                      FutureWarning, stacklevel=2)
        return new(*args, **kwargs)
    f.__name__ = new.__name__[:-1]
    return f


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
