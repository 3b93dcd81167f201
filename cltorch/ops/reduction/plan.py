"""A reduction signature's plan: the output's shape, the empty cases, and the launches of the design the device
profile chooses (``[reduction] design``: "cpu", today's one work-item per output and partial, ``cpu_plan.py``;
"gpu", work-group teams and column tiles, ``gpu_plan.py``)."""
from collections import namedtuple

from ..elementwise import _collapse
from .cpu_plan import plan_cpu
from .gpu_plan import plan_gpu
from .launch import run

__all__ = ["Spec", "ReducePlan", "identity_value"]

# What a reduction computes: acc = identity; b = map_expr over each element x (cast to map_dtype); a = combine
# (or, with ``better``, keep (b, index) where the predicate holds); the result is finish over acc and nred.
Spec = namedtuple("Spec", "map_expr combine identity finish acc_dtype out_dtype map_dtype better")


class ReducePlan:
    """The launches of one reduction signature (see ``reduce``); ``run(x)`` repeats them on x's data.

    ``kind``: "launch", "empty" (no outputs) or "fill" (no reduced elements: every output is the identity's
    finish). ``launches``: (kernel, global size, local size, output "out" | "part", input "x" | "part", argument
    tail); ``C``: partials per output (the ``part`` buffer holds M * C); ``design``: "cpu" or "gpu"; ``passes``:
    the GPU design's :class:`gpu_plan.Pass` of each launch; ``keep``: whether the plan may be cached."""

    def __init__(self, x, dims, keepdim, spec, name):
        nd = x.dim()
        kept = [d for d in range(nd) if d not in dims]
        if keepdim:
            oshape = tuple(1 if d in dims else s for d, s in enumerate(x._shape))
        else:
            oshape = tuple(x._shape[d] for d in kept)
        M = 1
        for s in oshape:
            M *= s
        R = 1
        for d in dims:
            R *= x._shape[d]
        arg = spec.better is not None
        self.oshape, self.out_dtype, self.acc_dtype, self.arg, self.device = oshape, spec.out_dtype, spec.acc_dtype, \
            arg, x.device
        self.M, self.R, self.C = M, R, 1
        self.kind, self.fill, self.launches, self.design, self.passes = "launch", None, [], None, []
        self.keep = True            # False: made under a provisional decision, not to be cached
        if M == 0:
            self.kind = "empty"
            return
        if R == 0:
            if arg:
                raise IndexError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0, or the "
                                 f"reduced dims to have non-zero size; got shape {list(x._shape)}")
            self.kind, self.fill = "fill", identity_value(spec.identity, spec.finish, spec.out_dtype)
            return
        self.rt = x._storage.runtime()
        self.design = design(self.rt)
        if self.design == "gpu":
            plan_gpu(self, x, spec, kept, dims)
        else:
            kshape, (kstr,) = _collapse(tuple(x._shape[d] for d in kept), [tuple(x._stride[d] for d in kept)])
            rshape, (rstr,) = _collapse(tuple(x._shape[d] for d in dims), [tuple(x._stride[d] for d in dims)])
            plan_cpu(self, x, spec, kshape, kstr, rshape, rstr)

    run = run


def design(rt):
    """The reduction design of a runtime's current profile: "gpu" or "cpu"."""
    return "gpu" if rt.profile.get_value("reduction", "design", "cpu") == "gpu" else "cpu"


def identity_value(identity, finish, dt):
    """The value an empty reduction gives (sum: 0, prod: 1, mean: nan...)."""
    env = {"INFINITY": float("inf"), "NAN": float("nan")}
    try:
        v = float(eval(identity.replace("f", "") if identity.endswith("f") else identity, {}, env))  # noqa: S307
    except Exception:
        v = 0.0
    if "nred" in finish:
        return float("nan")
    return v
