"""Fused softmax and log_softmax over any dim (``cl_kernels/softmax.cl.mako``).

Forward: one kernel that makes three passes over each row along ``dim``: the row max, the sum of
``exp(x - max)``, and the write (the standard max-subtraction, so logits of any size are stable). A row is
read by 1 to 32 work-items ("lanes", the ``[softmax]`` profile table's ``lanes`` rows by row length: one lane
with float8 loads on CPUs, several rows per work-group for short rows on GPUs, 32 lanes for long ones); the
sums add in one fixed order (32 stripes, then a balanced tree; see the template) whatever the lanes,
work-group size or vector width, so every configuration gives the same bits. Backward: one kernel with the
explicit formulas

* softmax:     ``grad_in = y * (g - sum(g * y, dim))``
* log_softmax: ``grad_in = g - exp(y) * sum(g, dim)``

When the backward itself runs with grad mode on (``create_graph=True``) it is composed from
differentiable ops instead, so double (and higher) backward works.

Also here: small launch helpers shared by the other fused-kernel modules (norms, losses, attention).
"""
import warnings

import math

import numpy as np

from .. import _dtype as D
from .._dispatch import call, register, is_grad_enabled
from .._tensor import Tensor
from ..backend import geometry
from ._util import method
from .elementwise import _collapse

__all__ = ["softmax", "log_softmax"]


# ------------------------------------------------------------------------------------------- shared helpers
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


# ------------------------------------------------------------------------------------------------- softmax
_L = np.int64


def _row_vector(rt, inner, inner_strides, dtype, ct):
    """Rows per work-item as vector lanes for rows along a non-last dim (the ``[softmax]`` table's
    ``row_vector``; 0: one row per work-item): they must split ``inner`` evenly and be adjacent in memory."""
    rv = int(rt.profile.get_value("softmax", "row_vector", 0) or 0)
    if rv in (2, 4, 8, 16) and inner > 1 and inner % rv == 0 and all(s == 1 for s in inner_strides) \
            and ct is dtype:
        return rv
    return 0


def _shape(rt, R, inner, nrows):
    """(lanes per row, work-group size, work-items) for ``nrows`` rows of length ``R``: the ``[softmax]``
    profile table's ``local_size`` (fitted to the device: ``geometry.local1``), and its ``lanes`` rows (the
    first whose ``upto`` >= R gives the lanes per row; none, or ``inner`` > 1, where neighbouring work-items
    read neighbouring rows: one lane)."""
    ls = geometry.local1(rt, local_size(rt, "softmax"))
    tpr = 1
    if inner == 1:
        for row in rt.profile.get_value("softmax", "lanes", None) or ():
            if row.get("upto", math.inf) >= R:
                tpr = int(row["lanes"])
                break
    if tpr not in (1, 2, 4, 8, 16, 32):
        raise ValueError(f"[softmax] lanes must be a power of two <= 32, got {tpr} (profile {rt.profile.name})")
    if tpr == 1:
        return 1, ls, nrows
    ls = max(ls, tpr) // tpr * tpr
    rpg = ls // tpr
    return tpr, ls, (nrows + rpg - 1) // rpg * ls


def _sized_kernel(rt, name, argtypes, tpr, ls, n, nrows, **params):
    """(kernel, work-group size, work-items) of softmax.cl.mako's ``name``. With several lanes per row the
    work-group size is a template value (``LS``, the size of a local array): the kernel is built at ``ls`` and
    rebuilt smaller while it allows fewer work-items (``geometry.template_local``), and the work-items follow."""
    if tpr == 1:
        return kernel(rt, "softmax.cl.mako", name, argtypes, TPR=1, LS=0, **params), ls, n
    k, ls2 = geometry.template_local(rt, ls, lambda L: kernel(rt, "softmax.cl.mako", name, argtypes, TPR=tpr, LS=L,
                                                              **params), tpr)
    if ls2 != ls:
        rpg = ls2 // tpr
        n = (nrows + rpg - 1) // rpg * ls2
    return k, ls2, n


def _softmax_raw(x, dim, log, safe=False):
    """Kernel launch: softmax/log_softmax of floating ``x`` along ``dim`` (already wrapped); new tensor."""
    if x.dim() == 0:
        x1 = _softmax_raw(x.reshape(1), 0, log, safe)
        return x1.reshape(())
    out = Tensor._empty(x._shape, x.dtype, x.device)
    if x.numel() == 0:
        return out
    x, outer, R, inner, so, sr, si = rows3(x, dim)
    rt = out._runtime()
    ct = compute_dtype(x.dtype)
    nrows = outer * inner
    tpr, ls, n = _shape(rt, R, inner, nrows)
    contig = inner == 1 and sr == 1 and ct is x.dtype
    rv = _row_vector(rt, inner, (si,), x.dtype, ct) if tpr == 1 else 0
    n = n // rv if rv else n
    k, ls, n = _sized_kernel(rt, "softmax_fwd", [None, _L, None, _L] + [_L] * 6, tpr, ls, n, nrows, T=x.dtype.cl,
                             CT=ct.cl, log=bool(log), safe=bool(safe), contig=contig, rowvec=rv,
                             types=types_of(x.dtype, ct))
    launch(rt, k, n, ls, out._storage.cl_buffer(), out._offset,
           x._storage.cl_buffer(), x._offset, nrows, R, inner, so, sr, si, host=is_host(out, x))
    return out


def _softmax_bwd_raw(g, y, dim, log, safe=False):
    """Kernel launch of the softmax/log_softmax backward (no autograd); ``safe`` only selects the forward's
    program (the backward formula is the same)."""
    gi = Tensor._empty(y._shape, y.dtype, y.device)
    if y.numel() == 0:
        return gi
    if y.dim() == 0:
        return _softmax_bwd_raw(g.reshape(1), y.reshape(1), 0, log, safe).reshape(())
    if g.dtype is not y.dtype:
        g = g.to(y.dtype)
    if g._shape != y._shape:
        g = g.expand(y._shape)
    g, outer, R, inner, gso, gsr, gsi = rows3(g, dim)
    y, _, _, _, yso, ysr, ysi = rows3(y, dim)
    rt = gi._runtime()
    ct = compute_dtype(y.dtype)
    nrows = outer * inner
    tpr, ls, n = _shape(rt, R, inner, nrows)
    contig = inner == 1 and gsr == 1 and ysr == 1 and ct is y.dtype
    rv = _row_vector(rt, inner, (gsi, ysi), y.dtype, ct) if tpr == 1 else 0
    n = n // rv if rv else n
    k, ls, n = _sized_kernel(rt, "softmax_bwd", [None, _L, None] + [_L] * 4 + [None] + [_L] * 4 + [_L] * 3, tpr,
                             ls, n, nrows, T=y.dtype.cl, CT=ct.cl, log=bool(log), safe=bool(safe), contig=contig,
                             rowvec=rv, types=types_of(y.dtype, ct))
    launch(rt, k, n, ls, gi._storage.cl_buffer(), gi._offset,
           g._storage.cl_buffer(), g._offset, gso, gsr, gsi, y._storage.cl_buffer(), y._offset, yso, ysr, ysi,
           nrows, R, inner, host=is_host(gi, g, y))
    return gi


def _sm_fwd(ctx, x, dim, log, safe):
    out = _softmax_raw(x, dim, log, safe)
    if ctx is not None:
        ctx.save_for_backward(out)
        ctx.dim, ctx.log, ctx.safe = dim, log, safe
    return out


def _sm_bwd(ctx, g):
    (y,) = ctx.saved_tensors
    if is_grad_enabled():
        return softmax_backward_composed(g, y, ctx.dim, ctx.log), None, None, None
    return _softmax_bwd_raw(g, y, ctx.dim, ctx.log, ctx.safe), None, None, None


def softmax_backward_composed(g, y, dim, log):
    """The softmax/log_softmax backward written with differentiable ops (for double backward)."""
    if y.dim() == 0:
        return g * 0 if not log else g - y.exp() * g
    if log:
        return g - y.exp() * g.sum(dim, keepdim=True)
    return y * (g - (g * y).sum(dim, keepdim=True))


_softmax_op = register("softmax", _sm_fwd, _sm_bwd)


def _implicit_dim(ndim, name):
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X "
                  "as an argument.", UserWarning, stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def _prep(input, dim, dtype, name):
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(input).__name__}")
    if dim is None:
        dim = _implicit_dim(input.dim(), name)
    if dtype is not None:
        dtype = D.to_dtype(dtype)
        if input.dtype is not dtype:
            input = input.to(dtype)
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"\"{name}_lastdim_kernel_impl\" not implemented for "
                           f"'{input.dtype.name.capitalize()}': {name} needs a floating point input "
                           "(pass dtype=cltorch.float32)")
    return input, wrap_dim(dim, input.dim())


def softmax(input, dim=None, dtype=None, *, _stacklevel=3):  # noqa: A002
    """Softmax along ``dim``: ``exp(x - max) / sum(exp(x - max))``, one fused kernel.

    input: a floating tensor of any shape (any strides); dim: the dim to normalise (negative allowed);
    dtype: cast the input to this dtype first (as PyTorch does). Returns a tensor of input's shape.
    Raises IndexError for a dim out of range and RuntimeError for integer inputs without ``dtype``.
    A row containing NaN or +inf gives NaN, as in PyTorch; a row of all -inf gives NaN too.
    """
    input, dim = _prep(input, dim, dtype, "softmax")
    return call(_softmax_op, input, dim, False, False)


def log_softmax(input, dim=None, dtype=None, *, _stacklevel=3):  # noqa: A002
    """log(softmax(x)) along ``dim`` computed stably as ``x - max - log(sum(exp(x - max)))``; one kernel.

    Same arguments, shapes and errors as :func:`softmax`.
    """
    input, dim = _prep(input, dim, dtype, "log_softmax")
    return call(_softmax_op, input, dim, True, False)


def safe_softmax(input, dim):
    """Softmax where a row that is entirely -inf gives zeros (and zero gradients) instead of NaN, as torch's
    internal ``_safe_softmax`` that SDPA's math path uses."""
    input, dim = _prep(input, dim, None, "softmax")
    return call(_softmax_op, input, dim, False, True)


method("softmax", lambda self, dim=None, dtype=None: softmax(self, dim, dtype))
method("log_softmax", lambda self, dim=None, dtype=None: log_softmax(self, dim, dtype))
