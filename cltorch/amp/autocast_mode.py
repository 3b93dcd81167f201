"""``cltorch.amp.autocast`` and ``custom_fwd``/``custom_bwd``: PyTorch's mixed-precision context.

What runs:

- ``device_type="cpu"`` or ``"cl"`` with ``enabled=True``: ops named in ``cltorch._dispatch.AUTOCAST_OPS`` cast
  their floating inputs by PyTorch's policies: matmul, mm, bmm, linear, addmm, baddbmm, conv*, SDPA and RNN cells
  to the region's dtype; losses (and, on "cl", softmax, log_softmax, norms, exp/log/pow, sum...) to float32; cat,
  stack, index_copy (and on "cl" addcmul, addcdiv, atan2, ...) to their widest input. "cpu" uses torch's CPU lists,
  "cl" its CUDA lists. Default dtypes: bfloat16 on "cpu", float16 on "cl" (both run on every device: float16
  without cl_khr_fp16 and bfloat16 are 16-bit storage computed in float32). Casts of leaf tensors that require
  grad (weights) are cached until the outermost region exits, unless ``cache_enabled=False``. Regions nest, and
  ``enabled=False`` turns autocast off inside.
- ``enabled=False``: a pass-through (restores autocast off for its device type inside).
- ``device_type="cuda"`` (and the other device types PyTorch knows but cltorch never has: xpu, mps, hpu, xla,
  ...) with ``enabled=True``: PyTorch on a machine without that device warns and disables autocast; so does
  cltorch ("CUDA is not available ... Disabling autocast."), and ops run in their own dtypes.

``custom_fwd``/``custom_bwd`` decorate a ``cltorch.autograd.Function``'s forward and backward as PyTorch's do:
forward records the autocast state (``ctx._fwd_used_autocast``, ``ctx._dtype``) and, with ``cast_inputs``, casts
floating inputs and runs with autocast off; backward runs with forward's autocast state.
"""
import functools
import warnings

from .. import _dispatch
from .. import _dtype as D

__all__ = ["autocast", "custom_fwd", "custom_bwd", "is_autocast_available", "is_autocast_enabled",
           "get_autocast_dtype", "set_autocast_dtype", "set_autocast_enabled", "autocast_increment_nesting",
           "autocast_decrement_nesting", "clear_autocast_cache", "is_autocast_cache_enabled",
           "set_autocast_cache_enabled", "is_autocast_cpu_enabled", "get_autocast_cpu_dtype",
           "get_autocast_gpu_dtype"]

_OUR_TYPES = ("cl", "cpu")
# device types PyTorch accepts that cltorch never has: autocast for them warns and disables itself
_ABSENT_TYPES = {"cuda": "CUDA", "xpu": "XPU", "mps": "MPS", "hpu": "HPU", "xla": "XLA", "ipu": "IPU",
                 "mtia": "MTIA", "maia": "MAIA", "privateuseone": "privateuseone"}
_DTYPES = {"cpu": D.bfloat16, "cl": D.float16}
_CACHE = [True]
_NESTING = [0]


def _base(device_type):
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    return device_type.split(":")[0]


def is_autocast_available(device_type):
    """True for "cpu" and "cl" (cltorch's device types), False for others. Raises ValueError for a non-str."""
    return _base(device_type) in _OUR_TYPES


def is_autocast_enabled(device_type=None):
    """Whether an enabled autocast region of ``device_type`` (default "cl", where PyTorch's is "cuda") is active
    in this thread."""
    st = _dispatch.autocast_state()
    return st is not None and _base(device_type or "cl") in st


def get_autocast_dtype(device_type):
    """The dtype autocast uses for ``device_type`` when none is given (bfloat16 on "cpu", float16 on "cl"), or
    the active region's dtype."""
    b = _base(device_type)
    st = _dispatch.autocast_state()
    if st is not None and b in st:
        return st[b][0]
    return _DTYPES.get(b, D.float16)


def is_autocast_cpu_enabled():
    """Deprecated torch alias: ``is_autocast_enabled("cpu")``."""
    return is_autocast_enabled("cpu")


def get_autocast_cpu_dtype():
    """Deprecated torch alias: ``get_autocast_dtype("cpu")``."""
    return get_autocast_dtype("cpu")


def get_autocast_gpu_dtype():
    """Deprecated torch alias (``get_autocast_dtype("cuda")``); cltorch's GPU-style device type is "cl"."""
    return get_autocast_dtype("cl")


def set_autocast_dtype(device_type, dtype):
    """Sets the default dtype of later autocast regions of ``device_type``."""
    _DTYPES[_base(device_type)] = dtype


def set_autocast_enabled(device_type, enabled):
    """Turns autocast of ``device_type`` on (with its default dtype) or off in this thread, outside any ``with``."""
    b = _base(device_type)
    st = dict(_dispatch.autocast_state() or {})
    if enabled:
        st[b] = (_DTYPES.get(b, D.float16), {} if _CACHE[0] else None)
    else:
        st.pop(b, None)
    _dispatch.set_autocast_state(st or None)


def is_autocast_cache_enabled():
    return _CACHE[0]


def set_autocast_cache_enabled(enabled):
    _CACHE[0] = bool(enabled)


def clear_autocast_cache():
    """Drops the cached weight casts of every active region."""
    for _, cache in (_dispatch.autocast_state() or {}).values():
        if cache is not None:
            cache.clear()


def autocast_increment_nesting():
    _NESTING[0] += 1
    return _NESTING[0]


def autocast_decrement_nesting():
    _NESTING[0] -= 1
    return _NESTING[0]


class autocast:
    """PyTorch's ``torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``, as a context
    manager or a decorator. See the module's doc for what each device type does.

    ``dtype`` must be float16 or bfloat16 (others warn and disable autocast, as PyTorch's CPU autocast does).
    Raises ValueError when ``device_type`` is not a str, RuntimeError for a device type PyTorch does not know."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        base = _base(device_type)
        if base not in _OUR_TYPES and base not in _ABSENT_TYPES:
            raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")
        self.device = base
        self.fast_dtype = get_autocast_dtype(base) if dtype is None else D.to_dtype(dtype)
        self._cache_enabled = _CACHE[0] if cache_enabled is None else bool(cache_enabled)
        enabled = bool(enabled)
        if enabled and base in _ABSENT_TYPES:
            name = _ABSENT_TYPES[base]
            warnings.warn(f"{name} is not available or torch_xla is imported. Disabling autocast."
                          if base == "cuda" else f"User provided device_type of '{base}', but {name} is not "
                          "available. Disabling", stacklevel=2)
            enabled = False
        if enabled and self.fast_dtype not in (D.float16, D.bfloat16):
            who = "CPU" if base == "cpu" else "CL"
            warnings.warn(f"In {who} autocast, but the target dtype is not supported. Disabling autocast.\n"
                          f"{who} Autocast only supports dtype of cltorch.bfloat16, cltorch.float16 currently.",
                          stacklevel=2)
            enabled = False
        self._enabled = enabled
        self._prev = []

    def __enter__(self):
        if self.device in _ABSENT_TYPES:
            self._prev.append(None)
            return self
        prev = _dispatch.autocast_state()
        self._prev.append(prev)
        st = dict(prev or {})
        if self._enabled:
            old = st.get(self.device)
            cache = old[1] if old is not None and old[1] is not None else ({} if self._cache_enabled else None)
            st[self.device] = (self.fast_dtype, cache if self._cache_enabled else None)
        else:
            st.pop(self.device, None)
        _dispatch.set_autocast_state(st or None)
        autocast_increment_nesting()
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        prev = self._prev.pop()
        if self.device in _ABSENT_TYPES:
            return False
        if autocast_decrement_nesting() == 0:
            clear_autocast_cache()
        _dispatch.set_autocast_state(prev)
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self:
                return func(*args, **kwargs)
        return wrapper


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """Decorator for a custom Function's ``forward`` (PyTorch's ``torch.amp.custom_fwd``): records on ``ctx`` (the
    first argument) whether autocast was on for ``device_type`` and its dtype. With ``cast_inputs`` (a dtype) and
    autocast on, floating tensor inputs are cast to it and forward runs with autocast off."""
    base = _base(device_type)
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        on = is_autocast_enabled(base)
        if args:
            args[0]._dtype = get_autocast_dtype(base)
            args[0]._fwd_used_autocast = on
        if cast_inputs is None or not on:
            return fwd(*args, **kwargs)
        args = args[:1] + tuple(_cast(a, cast_inputs) for a in args[1:])
        kwargs = {k: _cast(v, cast_inputs) for k, v in kwargs.items()}
        with autocast(device_type=base, enabled=False):
            return fwd(*args, **kwargs)
    return decorate_fwd


def _cast(v, dtype):
    if getattr(v, "dtype", None) is not None and hasattr(v, "_storage") and v.dtype.is_floating_point \
            and v.dtype is not D.float64:
        return v.to(dtype)
    if isinstance(v, (list, tuple)):
        return type(v)(_cast(x, dtype) for x in v)
    if isinstance(v, dict):
        return {k: _cast(x, dtype) for k, x in v.items()}
    return v


def custom_bwd(bwd=None, *, device_type):
    """Decorator for a custom Function's ``backward`` (PyTorch's ``torch.amp.custom_bwd``): runs backward with
    the autocast state forward saw (``ctx._fwd_used_autocast``, ``ctx._dtype``)."""
    base = _base(device_type)
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0] if args else None
        on = getattr(ctx, "_fwd_used_autocast", False)
        with autocast(device_type=base, enabled=on, dtype=getattr(ctx, "_dtype", None)):
            return bwd(*args, **kwargs)
    return decorate_bwd
