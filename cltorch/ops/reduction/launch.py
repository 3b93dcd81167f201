"""Running a reduction plan's launches on a tensor's data: the output (and indices), the partials between the
passes, the buffers and offsets of each launch."""
from ... import _dtype as D
from ..._tensor import Tensor

__all__ = ["run"]


def run(plan, x):
    """The result of ``plan`` (a ReducePlan) on x: the output, or (values, indices) for an arg reduction."""
    out = Tensor._empty(plan.oshape, plan.out_dtype, plan.device)
    arg = plan.arg
    iout = Tensor._empty(plan.oshape, D.int64, plan.device) if arg else None
    if plan.kind != "launch":
        if plan.kind == "fill":
            from ..pointwise import full_like_value
            full_like_value(out, plan.fill)
        return (out, iout) if arg else out
    rt = plan.rt
    if plan.C > 1:
        part = Tensor._empty((plan.M * plan.C,), plan.acc_dtype, plan.device)
        ipart = Tensor._empty((plan.M * plan.C,), D.int64, plan.device) if arg else None
    for k, gs, ls, dst, src, tail in plan.launches:
        if dst == "out":
            args = [out._storage.cl_buffer(), 0] + ([iout._storage.cl_buffer(), 0] if arg else [])
        else:
            args = [part._storage.cl_buffer(), 0] + ([ipart._storage.cl_buffer(), 0] if arg else [])
        if src == "x":
            args += [x._storage.cl_buffer(), x._offset]
        else:
            args += [part._storage.cl_buffer(), 0] + ([ipart._storage.cl_buffer(), 0] if arg else [])
        args += tail
        rt.launch(k, gs, ls, *args)
    if x._storage.host is not None:
        rt.finish_if_exposed()   # cpu tensors wait only for memory numpy shares
    return (out, iout) if arg else out
