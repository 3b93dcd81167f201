"""Launch helpers the fused-kernel modules share (softmax, norms, losses, attention, rnn): the kernel cache, the 1-d
launch, the row view around a dim, dtypes, and which design a device profile chooses."""
import math

from ... import _dtype as D
from ...backend import geometry
from ..elementwise import _collapse

__all__ = ["kernel", "local_size", "launch", "is_host", "compute_dtype", "types_of", "rows3", "wrap_dim", "design"]

_KERNELS = {}


def kernel(rt, template, name, argtypes, **params):
    """A cached kernel of ``template`` rendered with ``params`` (cache keyed on the device and params)."""
    key = (rt.index, template, name, tuple(sorted(params.items())))
    k = _KERNELS.get(key)
    if k is None:
        k = _KERNELS[key] = rt.kernel(template, name, argtypes, **params)
    return k


def local_size(rt, table, default=64):
    return int(rt.profile.get_value(table, "local_size", default))


def launch(rt, k, n, ls, *args, host=False):
    """Enqueue ``k`` over ``n`` work-items in work-groups of about ``ls`` (fitted to the device's and the
    kernel's limits and to n: ``geometry.nd``). ``host`` (cpu tensors): then wait where memory numpy shares was
    touched (``Runtime.finish_if_exposed``)."""
    if n <= 0:
        return
    gs, lsz = geometry.nd(rt, n, ls, k)
    rt.launch(k, gs, lsz, *args)
    if host:
        rt.finish_if_exposed()


def is_host(*tensors):
    return any(t is not None and t._storage.host is not None for t in tensors)


def compute_dtype(dt):
    return D.float32 if dt is D.float16 else dt


def types_of(*dts):
    return tuple(sorted({d.cl for d in dts}))


def design(rt, table):
    """The design the device's own profile chooses for a fused-kernel family (``[softmax]``, ``[norm]``, ``[loss]``
    ``design``): "gpu" (row teams, ``softmax/team.py``) or "cpu". It comes from the device's own profile even in
    deterministic mode: both designs add in the order that the active profile's values fix (the same bits), so
    the choice only decides how the work maps onto work-items."""
    return "gpu" if rt.native_profile.get_value(table, "design", "cpu") == "gpu" else "cpu"


def rows3(x, dim):
    """See ``x`` as (outer, R, inner) around ``dim``: returns (x', outer, R, inner, so, sr, si), where x' is
    x or a contiguous copy of it (when the dims before or after ``dim`` do not collapse to one stride)."""
    shape, st = x._shape, x._stride
    outer = math.prod(shape[:dim])       # Python ints: exact, and without numpy's per-call overhead
    inner = math.prod(shape[dim + 1:])
    R = shape[dim]
    so = si = 0
    ok = True
    if dim:
        cs, (cst,) = _collapse(shape[:dim], [st[:dim]])
        if len(cs) > 1:
            ok = False
        so = cst[0] if cs else 0
    if dim + 1 < len(shape):
        cs, (cst,) = _collapse(shape[dim + 1:], [st[dim + 1:]])
        if len(cs) > 1:
            ok = False
        si = cst[0] if cs else 0
    if not ok:
        x = x.contiguous()
        so, si = R * inner, 1
    sr = x._stride[dim]
    return x, outer, R, inner, so, sr, si


def wrap_dim(dim, ndim):
    n = max(ndim, 1)
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError(f"dim must be an int, got {type(dim).__name__}")
    if dim < -n or dim >= n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim % n
