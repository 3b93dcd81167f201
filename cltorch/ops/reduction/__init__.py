"""The reduction launcher: two kernel designs for every reduction, chosen by the device profile.

``reduce(x, dim, keepdim, ...)`` takes map, combine and finish expressions over any set of dims. Arg-reductions
carry (value, index) pairs; ties go to the lower index, so ``max(dim)`` returns the first index, as PyTorch does.

- ``dims.py``: PyTorch's dim arguments; ``plan.py``: one signature's plan (shape, empty cases, the design);
- ``cpu_plan.py``: the CPU design (``cl_kernels/reduction.cl.mako``: one work-item per output and partial, float8
  lanes); ``gpu_plan.py``: the GPU design (``cl_kernels/reduction_gpu.cl.mako``: teams per row, column tiles,
  work-group trees from ``group_reduce.cl.mako``, a fixed-order second pass); ``exchange.py``: the probed lane
  exchange of the GPU trees; ``kernels.py``: the kernels; ``launch.py``: running a plan.
"""
from .dims import normalize_dims, is_sorted_dims
from .plan import ReducePlan, Spec, identity_value

__all__ = ["reduce", "normalize_dims", "identity_value"]

_plans = {}
_align = {}


def reduce(x, dim=None, keepdim=False, *, map_expr="x", combine="a + b", identity="0", finish="acc",
           acc_dtype=None, out_dtype=None, map_dtype=None, better=None, name="reduce"):
    """Reduce ``x`` over ``dim`` (int, tuple or None for all).

    acc = identity; for each element x (cast to map_dtype): b = map_expr; a = combine (or, with
    ``better``, keep (b, index) when the predicate over b, bi, a, ai holds). The result is ``finish``
    over ``acc`` and ``nred`` (the number of reduced elements), cast to out_dtype. Returns the output,
    or (values, indices) when ``better`` is given.

    The launch decisions depend only on x's dtype, shape, strides, device and alignment and on the
    arguments, so they are made once per such signature (a :class:`ReducePlan`), as ``pointwise`` does.
    """
    acc_dtype = acc_dtype or x.dtype
    out_dtype = out_dtype or acc_dtype
    map_dtype = map_dtype or acc_dtype
    dims = dim if dim.__class__ is tuple and is_sorted_dims(dim, len(x._shape)) else normalize_dims(dim, x.dim())
    key = (x.dtype, x._shape, x._stride, x.device, dims, keepdim, map_expr, combine, identity, finish, acc_dtype,
           out_dtype, map_dtype, better, _vector_aligned(x))
    plan = _plans.get(key)
    if plan is None:
        if x.dtype._kind == 3 or acc_dtype._kind == 3:
            raise NotImplementedError(f"{name} is not implemented for complex tensors in cltorch (sum and mean are; "
                                      "they reduce the view_as_real view)")
        plan = ReducePlan(x, dims, keepdim, Spec(map_expr, combine, identity, finish, acc_dtype, out_dtype,
                                                 map_dtype, better), name)
        if plan.keep:
            _plans[key] = plan
    return plan.run(x)


def _vector_aligned(x):
    """Whether x's data allows vector loads of the width its device's profile reads (the CPU design's
    ``vector_width``, the GPU design's ``load_width``)."""
    dev = x.device
    vw = _align.get(dev)
    if vw is None:
        prof = x._storage.runtime().profile
        key = "load_width" if prof.get_value("reduction", "design", "cpu") == "gpu" else "vector_width"
        vw = _align[dev] = prof.get_value("reduction", key, 1)
    if vw <= 1:
        return True
    from ..elementwise import _aligned
    return _aligned(x, vw)
