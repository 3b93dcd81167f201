"""The CPU design of softmax / log_softmax (``cl_kernels/softmax.cl.mako``), also the design of every profile's rows
along a non-last dim (neighbouring work-items read neighbouring rows).

A row is read by 1 to 32 work-items ("lanes", the ``[softmax]`` profile table's ``lanes`` rows by row length: one
lane with float8 loads on CPUs); three passes over each row: the max, the sum of ``exp(x - max)``, the write. The
sums add in one fixed order (32 stripes, then a balanced tree; see the template) whatever the lanes, work-group size
or vector width, so every configuration gives the same bits.
"""
import math

import numpy as np

from ...backend import geometry
from .common import kernel, launch, local_size, is_host, compute_dtype, types_of

__all__ = ["forward", "backward"]

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


def forward(out, x, outer, R, inner, so, sr, si, log, safe):
    """Launch softmax_fwd over x seen as (outer, R, inner) with strides (so, sr, si) into the contiguous ``out``."""
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


def backward(gi, g, gso, gsr, gsi, y, yso, ysr, ysi, outer, R, inner, log, safe):
    """Launch softmax_bwd (g and y seen as (outer, R, inner) with their strides) into the contiguous ``gi``."""
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
