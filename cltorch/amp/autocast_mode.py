"""``cltorch.amp.autocast`` and ``custom_fwd``/``custom_bwd``: PyTorch's mixed-precision context, where cltorch has it.

What runs:

- ``enabled=False``: a pass-through, on every device type.
- ``device_type="cuda"`` (and the other device types PyTorch knows but cltorch never has: xpu, mps, hpu, xla,
  ...) with ``enabled=True``: PyTorch on a machine without that device warns and disables autocast; so does
  cltorch ("CUDA is not available ... Disabling autocast."), and ops run in their own dtypes.
- ``device_type="cl"`` or ``"cpu"`` with ``enabled=True``: raises NotImplementedError. Autocasting ops to float16
  or bfloat16 (per-op cast lists) is not implemented yet; a silent fp32 run would be a no-op pretending to be one.

``custom_fwd``/``custom_bwd`` decorate a ``cltorch.autograd.Function``'s forward and backward. With autocast never
active on a cltorch device, they record that on the context (``ctx._fwd_used_autocast = False``, ``ctx._dtype``)
and call the function; ``cast_inputs`` applies only inside an enabled autocast region, as in PyTorch.
"""
import functools
import warnings

__all__ = ["autocast", "custom_fwd", "custom_bwd", "is_autocast_available"]

_OUR_TYPES = ("cl", "cpu")
# device types PyTorch accepts that cltorch never has: autocast for them warns and disables itself
_ABSENT_TYPES = {"cuda": "CUDA", "xpu": "XPU", "mps": "MPS", "hpu": "HPU", "xla": "XLA", "ipu": "IPU",
                 "mtia": "MTIA", "maia": "MAIA", "privateuseone": "privateuseone"}


def is_autocast_available(device_type):
    """False for every device type: autocast is not implemented on cltorch's devices (see the module's doc)."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    return False


class autocast:
    """PyTorch's ``torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``, as a context
    manager or a decorator. See the module's doc for what each device type does.

    Raises ValueError when ``device_type`` is not a str, RuntimeError for a device type PyTorch does not know,
    NotImplementedError for an enabled region on "cl" or "cpu"."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        base = device_type.split(":")[0]
        if base not in _OUR_TYPES and base not in _ABSENT_TYPES:
            raise RuntimeError(f"User specified an unsupported autocast device_type '{device_type}'")
        self.device = base
        self.fast_dtype = dtype
        self._cache_enabled = True if cache_enabled is None else bool(cache_enabled)
        enabled = bool(enabled)
        if enabled and base in _ABSENT_TYPES:
            name = _ABSENT_TYPES[base]
            warnings.warn(f"{name} is not available or torch_xla is imported. Disabling autocast."
                          if base == "cuda" else f"User provided device_type of '{base}', but {name} is not "
                          "available. Disabling", stacklevel=2)
            enabled = False
        if enabled:
            want = "float16 or bfloat16" if dtype is None else repr(dtype)
            raise NotImplementedError(
                f"autocast(device_type='{device_type}', enabled=True): autocasting ops to {want} is not "
                "implemented yet in cltorch; run in float32 (enabled=False), or cast the model and inputs "
                "explicitly (model.half(), x.to(cltorch.bfloat16))")
        self._enabled = False

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self:
                return func(*args, **kwargs)
        return wrapper


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """Decorator for a custom Function's ``forward`` (PyTorch's ``torch.amp.custom_fwd``): records on ``ctx``
    (the first argument) whether autocast was on for ``device_type`` — never, on cltorch — and calls forward.
    ``cast_inputs`` would cast floating inputs inside an enabled autocast region, which cltorch never has."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        if args:
            args[0]._dtype = None
            args[0]._fwd_used_autocast = False
        return fwd(*args, **kwargs)
    return decorate_fwd


def custom_bwd(bwd=None, *, device_type):
    """Decorator for a custom Function's ``backward`` (PyTorch's ``torch.amp.custom_bwd``): runs backward with
    the autocast state forward saw (off, on cltorch)."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        return bwd(*args, **kwargs)
    return decorate_bwd
