"""``cltorch.testing``: ``assert_close`` and ``make_tensor``, as ``torch.testing``.

``assert_close(actual, expected)`` compares tensors (any device), numpy arrays, Python numbers and (nested)
sequences/mappings of them: ``|actual - expected| <= atol + rtol * |expected|`` elementwise, NaNs equal only with
``equal_nan``. Tolerances default per dtype as in PyTorch (float16 1e-3/1e-5, bfloat16 1.6e-2/1e-5, float32
1.3e-6/1e-5, float64 1e-7/1e-7 as rtol/atol; integers and bool exact); with mixed dtypes the larger one. It checks
shape, then (by default) device and dtype, and raises AssertionError with PyTorch's message layout (mismatched
count, greatest absolute and relative difference with their index), ValueError when only one of rtol/atol is
given, TypeError for inputs of unrelated types (a tensor against a numpy array).
"""
import collections.abc
import math

import numpy as np

from .._tensor import Tensor
from .. import _dtype as D

__all__ = ["assert_close", "make_tensor"]

_TOL = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5), "float64": (1e-7, 1e-7)}


def _tol(dt):
    return _TOL.get(getattr(dt, "name", None) or str(np.dtype(dt)), (0.0, 0.0))


def _fail(msg, default, path):
    text = default if msg is None else (msg(default) if callable(msg) else msg)
    if path and msg is None:
        text += "\n\nThe failure occurred for item " + "".join(f"[{p!r}]" for p in path)
    raise AssertionError(text)


def _kind(x):
    if isinstance(x, Tensor):
        return "tensor"
    if isinstance(x, np.ndarray):
        return "numpy"
    if isinstance(x, (bool, int, float, np.number, np.bool_)):
        return "number"
    return None


def _compare_values(a, e, rtol, atol, equal_nan, scalar, msg, path):
    a = np.asarray(a)
    e = np.asarray(e)
    exact = rtol == 0 and atol == 0
    af = a.astype(np.int64) if a.dtype == np.bool_ else a
    ef = e.astype(np.int64) if e.dtype == np.bool_ else e
    common = np.result_type(af, ef)
    if scalar and np.issubdtype(common, np.floating):
        common = np.float64   # scalars are compared as Python numbers, as PyTorch does
    af, ef = af.astype(common), ef.astype(common)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        if np.issubdtype(common, np.integer):
            abs_diff = np.abs(af - ef)
            rel = abs_diff / np.abs(ef).astype(np.float64)
            ok = abs_diff <= atol + rtol * np.abs(ef).astype(np.float64)
        else:
            abs_diff = np.abs(af - ef)
            rel = abs_diff / np.abs(ef)
            ok = (abs_diff <= atol + rtol * np.abs(ef)) | (af == ef)
            if equal_nan:
                ok |= np.isnan(af) & np.isnan(ef)
    if ok.all():
        return
    word = "equal" if exact else "close"

    def allowed(t):
        return "" if exact else f" (up to {t} allowed)"

    if scalar:
        default = (f"Scalars are not {word}!\n\nExpected {e.item()} but got {a.item()}.\n"
                   f"Absolute difference: {abs_diff.item()}{allowed(atol)}\n"
                   f"Relative difference: {rel.item()}{allowed(rtol)}")
    else:
        n, bad = ok.size, int((~ok).sum())
        ia = np.unravel_index(int(np.argmax(abs_diff)), ok.shape)
        ir = np.unravel_index(int(np.argmax(rel)), ok.shape)
        default = (f"Tensor-likes are not {word}!\n\nMismatched elements: {bad} / {n} ({100 * bad / n:.1f}%)\n"
                   f"Greatest absolute difference: {abs_diff[ia].item()} at index {tuple(int(i) for i in ia)}"
                   f"{allowed(atol)}\n"
                   f"Greatest relative difference: {rel[ir].item()} at index {tuple(int(i) for i in ir)}"
                   f"{allowed(rtol)}")
    _fail(msg, default, path)


def _attr(name, a, e, msg, path):
    if a != e:
        _fail(msg, f"The values for attribute '{name}' do not match: {a} != {e}.", path)


def _one(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, msg, path):
    ka, ke = _kind(actual), _kind(expected)
    if ka is None or ke is None or ka != ke:
        raise TypeError(f"No comparison pair was able to handle inputs of type {type(actual)} and "
                        f"{type(expected)}.")
    if ka == "number":
        if check_dtype and type(actual) is not type(expected) and not (
                isinstance(actual, np.number) or isinstance(expected, np.number)):
            _attr("type", type(actual), type(expected), msg, path)
        dt_a = np.float64 if isinstance(actual, float) else np.asarray(actual).dtype
        dt_e = np.float64 if isinstance(expected, float) else np.asarray(expected).dtype
        r, a_ = (max(_tol(np.dtype(dt_a))[0], _tol(np.dtype(dt_e))[0]),
                 max(_tol(np.dtype(dt_a))[1], _tol(np.dtype(dt_e))[1])) if rtol is None else (rtol, atol)
        return _compare_values(actual, expected, r, a_, equal_nan, True, msg, path)
    _attr("shape", actual.shape, expected.shape, msg, path)
    if ka == "tensor":
        if check_device:
            _attr("device", actual.device, expected.device, msg, path)
        if check_dtype:
            _attr("dtype", actual.dtype, expected.dtype, msg, path)
        ta, te = _tol(actual.dtype), _tol(expected.dtype)
        a_np = actual.detach().cpu().numpy()
        e_np = expected.detach().cpu().numpy()
        scalar = actual.dim() == 0
    else:
        if check_dtype:
            _attr("dtype", actual.dtype, expected.dtype, msg, path)
        ta, te = _tol(actual.dtype), _tol(expected.dtype)
        a_np, e_np, scalar = actual, expected, actual.ndim == 0
    if rtol is None:
        rtol, atol = max(ta[0], te[0]), max(ta[1], te[1])
    _compare_values(a_np, e_np, rtol, atol, equal_nan, scalar, msg, path)


def _walk(actual, expected, path, opts):
    seq = (collections.abc.Sequence,)
    if isinstance(actual, seq) and not isinstance(actual, str) and isinstance(expected, seq) \
            and not isinstance(expected, str):
        if len(actual) != len(expected):
            _fail(opts[-1], f"The length of the sequences mismatch: {len(actual)} != {len(expected)}", path)
        for i, (a, e) in enumerate(zip(actual, expected)):
            _walk(a, e, path + (i,), opts)
        return
    if isinstance(actual, collections.abc.Mapping) and isinstance(expected, collections.abc.Mapping):
        ka, ke = set(actual), set(expected)
        if ka != ke:
            _fail(opts[-1], f"The keys of the mappings do not match:\nMissing keys in the actual mapping: "
                            f"{sorted(map(str, ke - ka))}\nExtra keys in the actual mapping: "
                            f"{sorted(map(str, ka - ke))}", path)
        for k in actual:
            _walk(actual[k], expected[k], path + (k,), opts)
        return
    _one(actual, expected, *opts[:-1], opts[-1], path)


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None, equal_nan=False,
                 check_device=True, check_dtype=True, check_layout=True, check_stride=False, msg=None):
    """Asserts that ``actual`` and ``expected`` are close (see the module docstring). ``msg``: a string or a
    callable taking the default message, replacing it."""
    if (rtol is None) != (atol is None):
        raise ValueError("Both 'rtol' and 'atol' must be either specified or omitted, but got no "
                         f"{'rtol' if rtol is None else 'atol'}.")
    _walk(actual, expected, (), (rtol, atol, equal_nan, check_device, check_dtype, msg))


def make_tensor(*shape, dtype, device, low=None, high=None, requires_grad=False, noncontiguous=False,
                exclude_zero=False, memory_format=None):
    """A tensor of ``shape`` filled with random values from cltorch's generator: floating dtypes uniform in
    ``[low, high)`` (default [-9, 9)), integers in ``[low, high)`` (default [-9, 10), unsigned from 0), bool 0/1.
    ``noncontiguous`` gives a strided view; ``exclude_zero`` replaces zeros (by the dtype's tiny for floats, 1 for
    integers). Raises ValueError when ``low > high`` or a bound is NaN."""
    from ..ops.random import rand, randint
    if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        shape = tuple(shape[0])
    shape = tuple(int(s) for s in shape)
    for b in (low, high):
        if b is not None and isinstance(b, float) and math.isnan(b):
            raise ValueError("make_tensor: low and high cannot be NaN")
    if low is not None and high is not None and low > high:
        raise ValueError(f"make_tensor: low must be weakly less than high, got {low} and {high}")
    alloc = shape[:-1] + (shape[-1] * 2,) if noncontiguous and shape and shape[-1] > 0 else shape
    if dtype is D.bool:
        t = randint(0, 2, alloc, device=device).to(D.bool)
    elif dtype.is_floating_point:
        lo = -9.0 if low is None else float(low)
        hi = 9.0 if high is None else float(high)
        t = (rand(alloc, device=device) * (hi - lo) + lo).to(dtype)
        if exclude_zero:
            t = t.masked_fill(t == 0, D.finfo(dtype).tiny)
    else:
        unsigned = dtype is D.uint8
        lo = (0 if unsigned else -9) if low is None else int(math.ceil(low))
        hi = 10 if high is None else int(math.floor(high))
        if hi <= lo:
            hi = lo + 1
        t = randint(lo, hi, alloc, device=device, dtype=dtype)
        if exclude_zero:
            t = t.masked_fill(t == 0, 1)
    if alloc != shape:
        t = t[..., ::2]
    if requires_grad and dtype.is_floating_point:
        t.requires_grad_(True)
    return t
