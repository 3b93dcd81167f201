"""``cltorch.amp.GradScaler``: dynamic loss scaling, PyTorch's algorithm, written on the public tensor API.

The algorithm (PyTorch's ``torch.amp.GradScaler``): ``scale(loss)`` multiplies by the scale S (init_scale);
``unscale_(opt)`` multiplies each gradient by 1/S (computed in float64, then float32) after checking it for inf/NaN;
``step(opt)`` unscales if not done yet and runs ``opt.step()`` only when no gradient had an inf/NaN (else the
step is skipped and returns None); ``update()`` multiplies S by backoff_factor after a skipped step and resets the
count of good steps, or multiplies S by growth_factor after growth_interval good steps in a row (only when
the grown S is finite). The scale lives in a float32 tensor on the device of the first scaled output.

``device="cuda"`` with ``enabled=True`` warns, as PyTorch on a machine without CUDA, and disables the scaler:
then ``scale`` returns its input, ``step`` calls ``opt.step()``, ``update`` does nothing, ``get_scale()`` is 1.0
and ``state_dict()`` is ``{}``. ``"cl"``, ``"cl:N"`` and ``"cpu"`` scale for real (any dtype; the logic does not
depend on it).
"""
import warnings
from enum import Enum

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor
from ..ops.creation import full
from ..ops.pointwise import isfinite
from ..autograd import no_grad

__all__ = ["GradScaler", "OptState"]


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_state():
    return {"stage": OptState.READY, "found_inf_per_device": {}}


class GradScaler:
    """Dynamic loss scaling (see the module's doc).

    Args: device ("cl", "cl:N", "cpu"; "cuda" disables itself with a warning), init_scale (65536.0),
    growth_factor (2.0, must be > 1), backoff_factor (0.5, must be < 1), growth_interval (2000), enabled (True).
    Errors as PyTorch: RuntimeError on unscale_/step out of order or a closure passed to step, ValueError for
    float16 gradients in unscale_ and for outputs that are not tensors, AssertionError for bad factors."""

    def __init__(self, device="cl", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        self._device = device
        self._enabled = bool(enabled)
        if self._enabled and str(device).split(":")[0] == "cuda":
            warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                          stacklevel=2)
            self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
            self._init_scale = float(init_scale)
            self._scale = None
            self._growth_factor = float(growth_factor)
            self._backoff_factor = float(backoff_factor)
            self._growth_interval = int(growth_interval)
            self._init_growth_tracker = 0
            self._growth_tracker = None
            self._per_optimizer_states = {}

    # ------------------------------------------------------------------ scaling
    def _lazy_init(self, dev):
        self._scale = full((), self._init_scale, dtype=D.float32, device=dev)
        self._growth_tracker = self._init_growth_tracker

    def scale(self, outputs):
        """``outputs`` (a tensor, or an iterable of them, nested) multiplied by the scale; returned unchanged
        when disabled. Raises ValueError for anything else."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            if self._scale is None:
                self._lazy_init(outputs.device)
            return outputs * self._scale.to(device=outputs.device)

        def apply(v):
            if isinstance(v, Tensor):
                if self._scale is None:
                    self._lazy_init(v.device)
                return v * self._scale.to(device=v.device)
            if isinstance(v, (list, tuple)):
                r = [apply(x) for x in v]
                return type(v)(r) if isinstance(v, tuple) and not hasattr(v, "_fields") else \
                    (type(v)(*r) if isinstance(v, tuple) else r)
            if hasattr(v, "__iter__"):
                return map(apply, v)
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")
        return apply(outputs)

    def _state(self, optimizer):
        st = self._per_optimizer_states.get(id(optimizer))
        if st is None:
            st = self._per_optimizer_states[id(optimizer)] = _fresh_state()
        return st

    def _unscale_grads(self, optimizer, inv_scale, allow_fp16):
        """Each gradient times ``inv_scale`` (float); per device, a 0-d float32 tensor that is 1 when some
        gradient there had an inf or NaN before unscaling."""
        found = {}
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    if not allow_fp16 and g.dtype is D.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    bad = (~isfinite(g)).any().to(D.float32)
                    f = found.get(g.device)
                    found[g.device] = bad if f is None else f + bad
                    g.mul_(inv_scale)
        return found

    def unscale_(self, optimizer):
        """Divide ``optimizer``'s gradients by the scale, in place, recording inf/NaN for ``step``. At most once
        per optimizer between updates (RuntimeError otherwise, and after step)."""
        if not self._enabled:
            return
        self._check("unscale_")
        st = self._state(optimizer)
        if st["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if st["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv = float(D.float32.np.type(1.0 / float(self._scale.item())))   # reciprocal in double, kept as float
        st["found_inf_per_device"] = self._unscale_grads(optimizer, inv, False)
        st["stage"] = OptState.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """``optimizer.step(*args, **kwargs)`` unless a gradient had an inf or NaN (then skipped: returns None).
        Unscales first if ``unscale_`` was not called. Raises RuntimeError for a ``closure`` keyword (when
        enabled) and for a second step before ``update``."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check("step")
        st = self._state(optimizer)
        if st["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if st["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if len(st["found_inf_per_device"]) == 0:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        retval = None
        if not sum(v.item() for v in st["found_inf_per_device"].values()):
            retval = optimizer.step(*args, **kwargs)
        st["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale=None):
        """Grow or back off the scale from the steps since the last update (see the module's doc), or set it to
        ``new_scale`` (a float or a 1-element tensor). Clears the per-optimizer records."""
        if not self._enabled:
            return
        self._check("update")
        if new_scale is not None:
            if isinstance(new_scale, Tensor):
                if new_scale.numel() != 1:
                    raise AssertionError("new_scale should be a single-element tensor")
                new_scale = new_scale.item()
            self._scale.fill_(float(new_scale))
        else:
            found = [v.item() for st in self._per_optimizer_states.values()
                     for v in st["found_inf_per_device"].values()]
            if len(found) == 0:
                raise AssertionError("No inf checks were recorded prior to update.")
            s = float(self._scale.item())
            if sum(found):
                self._scale.fill_(float(D.float32.np.type(s * self._backoff_factor)))
                self._growth_tracker = 0
            else:
                good = self._growth_tracker + 1
                if good == self._growth_interval:
                    with np.errstate(over="ignore"):
                        grown = D.float32.np.type(s * self._growth_factor)
                    if np.isfinite(grown):
                        self._scale.fill_(float(grown))
                    good = 0
                self._growth_tracker = good
        self._per_optimizer_states = {}

    def _check(self, funcname):
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  This may indicate your script did "
                                 "not use scaler.scale(loss or outputs) earlier in the iteration.")

    # ------------------------------------------------------------------ accessors and state
    def get_scale(self):
        """The scale as a Python float (init_scale before the first ``scale``); 1.0 when disabled."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale.item())

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = new_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = new_factor

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = new_interval

    def _get_growth_tracker(self):
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None else self._growth_tracker

    def is_enabled(self):
        return self._enabled

    def state_dict(self):
        """PyTorch's keys: scale, growth_factor, backoff_factor, growth_interval, _growth_tracker; ``{}`` when
        disabled."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict):
        """Restore from ``state_dict()``. Raises RuntimeError for an empty dict (saved by a disabled scaler)."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        if self._scale is not None:
            self._scale.fill_(self._init_scale)
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._growth_tracker is not None:
            self._growth_tracker = self._init_growth_tracker
