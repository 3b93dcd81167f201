"""Process-wide settings that PyTorch keeps at top level: thread counts, print options, the default device
and the float32 matmul precision. This module imports nothing from cltorch (it sits below every floor), so
``_tensor`` (printing) and ``_device`` (the default device) can read it.

Thread counts are recorded only: OpenCL drivers (PoCL included) choose their own work-item threads, so
``set_num_threads`` does not change how kernels run; ``get_num_threads`` returns what was set (default
``os.cpu_count()``). ``set_float32_matmul_precision`` is read by the GEMM: "high" and "medium" let float32 products
run on TF32 matrix units where a device has them and their probe passed (``ops/gemm/mma.py``); "highest" (the
default) keeps float32 arithmetic. ``cltorch.backends.cuda.matmul.allow_tf32`` reads and sets the same value."""
import math
import os

_threads = {"intra": os.cpu_count() or 1, "interop": os.cpu_count() or 1, "interop_set": False}


def set_num_threads(n):
    """PyTorch's ``torch.set_num_threads(int)``: records the intra-op thread count. OpenCL devices choose
    their own threads, so this does not change kernel execution; ``get_num_threads`` returns it.

    Raises:
        TypeError: ``n`` not an int. RuntimeError: ``n`` <= 0 (PyTorch's "Number of threads must be positive")."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"set_num_threads(): argument 'int' must be int, not {type(n).__name__}")
    if n <= 0:
        raise RuntimeError("set_num_threads expects a positive integer")
    _threads["intra"] = n


def get_num_threads():
    """The count given to ``set_num_threads`` (default ``os.cpu_count()``)."""
    return _threads["intra"]


def set_num_interop_threads(n):
    """PyTorch's ``torch.set_num_interop_threads(int)``: records the inter-op thread count (recorded only:
    cltorch has no inter-op thread pool). As PyTorch, it may be set once.

    Raises:
        TypeError: ``n`` not an int. RuntimeError: ``n`` <= 0, or set a second time."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"set_num_interop_threads(): argument 'int' must be int, not {type(n).__name__}")
    if n <= 0:
        raise RuntimeError("Expected positive number of threads")
    if _threads["interop_set"]:
        raise RuntimeError("Error: cannot set number of interop threads after parallel work has started "
                           "or set_num_interop_threads called")
    _threads["interop"] = n
    _threads["interop_set"] = True


def get_num_interop_threads():
    """The count given to ``set_num_interop_threads`` (default ``os.cpu_count()``)."""
    return _threads["interop"]


# ---------------------------------------------------------------- print options
_PRINT_DEFAULTS = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80, "sci_mode": None}
print_options = dict(_PRINT_DEFAULTS)


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None,
                     sci_mode=None):
    """PyTorch's ``torch.set_printoptions``: how ``repr(tensor)`` formats.

    Args:
        precision: digits after the decimal point (default 4).
        threshold: element count above which the repr is summarised with ``...`` (default 1000).
        edgeitems: items shown at each end of each summarised dim (default 3).
        linewidth: characters per line before wrapping (default 80).
        profile: ``"default"``, ``"short"`` (precision 2, edgeitems 2) or ``"full"`` (never summarise);
            applied first, then the explicit arguments.
        sci_mode: True forces scientific notation, False forbids it, None (default) chooses as PyTorch.

    Raises:
        ValueError: an unknown ``profile``."""
    if profile is not None:
        if profile == "default":
            print_options.update(precision=4, threshold=1000, edgeitems=3, linewidth=80)
        elif profile == "short":
            print_options.update(precision=2, threshold=1000, edgeitems=2, linewidth=80)
        elif profile == "full":
            print_options.update(precision=4, threshold=math.inf, edgeitems=3, linewidth=80)
        else:
            raise ValueError(f"set_printoptions(): unknown profile {profile!r}; "
                             "expected 'default', 'short' or 'full'")
    for k, v in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                 ("linewidth", linewidth)):
        if v is not None:
            print_options[k] = v
    print_options["sci_mode"] = sci_mode   # PyTorch: sci_mode is always set (None restores automatic)


def _np_threshold():
    import sys
    t = print_options["threshold"]
    return sys.maxsize if t == math.inf else int(t)


# ---------------------------------------------------------------- default device
_default_device = [None]    # None: cpu (the factories' own default)


def set_default_device(device):
    """PyTorch's ``torch.set_default_device``: the device factories (``zeros``, ``tensor``, ``arange``, the
    window functions...) use when given ``device=None``. ``None`` restores cpu."""
    from ._device import device as Device   # lazy: _device reads this module
    _default_device[0] = None if device is None else Device(device)


def get_default_device():
    """PyTorch's ``torch.get_default_device``: the device factories use for ``device=None`` (cpu unless
    ``set_default_device`` changed it). A bare ``cl`` resolves to the default OpenCL device, as ``cuda`` does."""
    from ._device import canonical
    return canonical(None)


# ---------------------------------------------------------------- float32 matmul precision
_matmul_precision = ["highest"]


def set_float32_matmul_precision(precision):
    """PyTorch's ``torch.set_float32_matmul_precision``: ``"highest"`` (float32 products in float32, the default),
    ``"high"`` or ``"medium"`` (float32 products may use TF32 matrix units: inputs rounded to 10 mantissa bits,
    float32 sums; only where a device has them and their probe passed: NVIDIA tensor cores through
    ``cltorch.ops.gemm.mma``; everywhere else float32 stays float32). Same as setting
    ``cltorch.backends.cuda.matmul.allow_tf32`` (True for "high").

    Raises:
        RuntimeError: another string (PyTorch's error type)."""
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"Invalid precision {precision!r}: expected 'highest', 'high' or 'medium'")
    _matmul_precision[0] = precision


def get_float32_matmul_precision():
    """What ``set_float32_matmul_precision`` recorded (default ``"highest"``)."""
    return _matmul_precision[0]
