"""``torch.use_deterministic_algorithms`` and its queries: cltorch's deterministic mode.

Every sum's order depends only on the profile values a launch uses, with one exception by default: the puts that
accumulate floats (``index_add``, ``scatter_add``, ``scatter_reduce`` sum/mean/prod, ``index_put(accumulate=True)``,
and what is built on them: the gradients of gather, index_select and advanced indexing, fold, embedding_bag,
istft) update their destinations with atomics, in whatever order the device runs them, so their last bits can
change from run to run where indices repeat (as on CUDA). Deterministic mode fixes every order, those puts' too,
and goes further: the same bits on every device and vendor. While it is on,

- every device runs under one profile (``cltorch/backend/deterministic.py``: the CPU tables, scalar elementwise
  code, the reductions' GPU design with a fixed group count), so reductions, GEMM's accumulation over k, softmax, norms and losses add in the same order
  whatever the device's work-group sizes and vector widths, and whatever profile it would otherwise use;
- every program is rendered with ``deterministic=True``: exp, log, log1p, expm1, tanh, erf, pow and rsqrt are our
  own functions of + - * / (``cl_kernels/det_math.cl.mako``), under ``FP_CONTRACT OFF``, built with
  ``-cl-fp32-correctly-rounded-divide-sqrt``; so no vendor builtin's last bits reach a result;
- a put that accumulates floats folds each destination's sources in their row-major order, as a sequential loop
  (torch's on the CPU) does: a stable sort of the destination offsets, then one work-item per destination
  (``ops/indexing/launch._put_ordered``).

The default path is untouched: its programs, plans and profiles stay as they are (the mode's are cached under
other keys). Switching clears the ops' launch plans so the next launch plans under the other profile.
Not covered: sin/cos/tan and the other trigonometric and special functions keep the builtins (random normal draws
already use our own, see ``cl_kernels/philox.cl.mako``); double precision keeps the builtins.
"""
import sys

__all__ = ["use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
           "is_deterministic_algorithms_warn_only_enabled", "set_deterministic_debug_mode",
           "get_deterministic_debug_mode"]

_warn_only = [False]

# module-level caches of launch decisions made from a runtime's profile (cleared when the mode changes)
_PLAN_CACHES = {
    "cltorch.ops.elementwise": ("_plans", "_kernels"), "cltorch.ops.reduction": ("_plans", "_align"),
    "cltorch.ops.reduction.kernels": ("_kernels",),
    "cltorch.ops.gemm": ("_plans",), "cltorch.ops.attention.plan": ("_plans",),
    "cltorch.ops.softmax.common": ("_KERNELS",), "cltorch.ops.softmax.team": ("_plans",), "cltorch.ops.conv.launch": ("_kcache",),
    "cltorch.ops.conv.igemm": ("_kcache", "_plans"), "cltorch.ops.pool": ("_kcache",),
    "cltorch.ops.global_pool": ("_kernels",),
    "cltorch.ops.indexing.launch": ("_kernels",), "cltorch.ops.sortscan": ("_kernels",),
    "cltorch.optim._fused": ("_kernels",), "cltorch.ops._philox_launch": ("_KERNELS",),
}


def use_deterministic_algorithms(mode, *, warn_only=False):
    """PyTorch's ``torch.use_deterministic_algorithms(mode, *, warn_only=False)``: ``mode=True`` turns on
    cltorch's cross-vendor deterministic mode (see the module's doc); ``False`` returns to the default kernels.
    ``warn_only`` is recorded (no cltorch op is nondeterministic in the mode, so nothing ever warns or raises).
    Raises TypeError when ``mode`` is not a bool (PyTorch's check)."""
    if not isinstance(mode, bool):
        raise TypeError(f"use_deterministic_algorithms(): argument 'mode' (position 1) must be bool, not "
                        f"{type(mode).__name__}")
    rtm = _rt_module()
    _warn_only[0] = bool(warn_only) and mode
    if rtm.DETERMINISTIC[0] == mode:
        return
    from .backend.deterministic import profile
    for rt in list(rtm._runtimes.values()):
        rt.synchronize()
    rtm.DETERMINISTIC[0] = mode
    for rt in list(rtm._runtimes.values()):
        rt.profile = profile() if mode else rt.native_profile
    clear_plans()


def clear_plans():
    """Forget every launch plan and kernel cached from a runtime's profile (``_PLAN_CACHES``), so the next launch
    plans under the profile and limits the runtimes have now (what switching the mode does; tests that swap a
    profile call it too)."""
    for mod, names in _PLAN_CACHES.items():
        m = sys.modules.get(mod)
        for n in names if m is not None else ():
            c = getattr(m, n, None)
            if isinstance(c, dict):
                c.clear()


def are_deterministic_algorithms_enabled():
    """Whether deterministic mode is on."""
    rtm = _rt_module()
    return rtm.DETERMINISTIC[0]


def is_deterministic_algorithms_warn_only_enabled():
    """The ``warn_only`` given with ``use_deterministic_algorithms(True)``."""
    return _warn_only[0]


def set_deterministic_debug_mode(debug_mode):
    """PyTorch's: 0 / "default" off, 1 / "warn" on with warn_only, 2 / "error" on."""
    names = {"default": 0, "warn": 1, "error": 2}
    if isinstance(debug_mode, str):
        if debug_mode not in names:
            raise RuntimeError(f"invalid value of debug_mode, expected one of `default`, `warn`, `error`, but got "
                               f"{debug_mode}")
        debug_mode = names[debug_mode]
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}")
    use_deterministic_algorithms(debug_mode != 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode():
    if not are_deterministic_algorithms_enabled():
        return 0
    return 1 if _warn_only[0] else 2


def _rt_module():
    import importlib
    return importlib.import_module("cltorch.backend.runtime")   # the package's `runtime` is a function
