"""Global pooling: the mean, or the maximum and its index, of every whole plane of an (N, C, H, W) tensor
(``cl_kernels/global_pool.cl.mako``).

``adaptive_avg_pool2d`` / ``adaptive_max_pool2d`` to 1 x 1 (the last pooling of ResNet- and MobileNet-style
models), their 1-d and 3-d forms, and any ``avg_pool2d`` / ``max_pool2d`` whose one window is the whole plane
come here from :mod:`cltorch.ops.pool` (``is_global``); their backward passes stay pool.py's gathers, which cost
one read per input element for a single window.

Each plane is read by a group of lanes (the profile's ``[pool] lanes`` rows by plane size, as ``[softmax]
lanes``: on GPUs up to 32 work-items per plane, lane t reading element t of each chunk of 32, so a warp reads a
plane coalesced), or by one work-item when the plane's elements are not adjacent (a channels_last input: then
neighbouring work-items read neighbouring channels, which is coalesced instead) and on CPUs. The sum adds in one
fixed order whatever the lanes and work-group size (32 stripes, then a balanced tree; see the template), so
deterministic mode gives the same bits on every device. The maximum follows PyTorch's CPU kernel
(``aten/src/ATen/native/cpu/AdaptiveMaxPoolKernel.cpp``): the first maximum wins, NaN propagates and the last
NaN's index is returned.
"""
import math

import numpy as np

from .. import _dtype as D
from .._tensor import Tensor
from ..backend import geometry

__all__ = ["is_global", "global_pool"]

_TEMPLATE = "global_pool.cl.mako"
_kernels = {}
_local = {}


def is_global(geom):
    """Whether the 2-d pooling geometry ``geom`` (pool.PoolGeom) has one window, covering the whole plane:
    adaptive pooling to 1 x 1, or a window of the plane's size without padding or dilation."""
    H, W, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, ad = geom
    if OH != 1 or OW != 1:
        return False
    return bool(ad) or (KH == H and KW == W and ph == 0 and pw == 0 and dh == 1 and dw == 1)


def _flat_planes(x):
    """(x, sn, sc, se): ``x`` (N, C, H, W) or a contiguous copy of it, with each plane's H*W elements ``se``
    apart (planes of a contiguous tensor have se = 1, of a channels_last one se = C)."""
    N, C, H, W = x._shape
    sn, sc, sh, sw = x._stride
    if H > 1 and W > 1 and sh != W * sw:
        x = x.contiguous()
        sn, sc, sh, sw = x._stride
    se = sw if W > 1 else (sh if H > 1 else 1)
    return x, sn, sc, se


def _lanes(rt, R, se):
    """Work-items per plane: the first ``[pool] lanes`` row whose ``upto`` >= R (1 without a table, or when the
    plane's elements are not adjacent)."""
    if se != 1:
        return 1
    for row in rt.profile.get_value("pool", "lanes", None) or ():
        if row.get("upto", math.inf) >= R:
            tpr = int(row["lanes"])
            if tpr not in (1, 2, 4, 8, 16, 32):
                raise ValueError(f"[pool] lanes must be a power of two <= 32, got {tpr} (profile {rt.profile.name})")
            return tpr
    return 1


def _kernel(rt, dt, idx, op, tpr):
    key = (rt.index, dt, idx, op, tpr)
    k = _kernels.get(key)
    if k is None:
        I = np.int64 if idx == "long" else np.int32
        s = np.float64 if dt == "double" else np.float32
        k = _kernels[key] = rt.kernel(_TEMPLATE, "global_pool", [None, I, I, I, I, np.int64, I, np.int64, None, None,
                                                                 np.int32, s] + [None] * ((tpr > 1) * (1 + (op == "max"))),
                                      dt=dt, idx=idx, op=op, TPR=tpr)
    return k


def _local_mem(nbytes):
    """One ``pyopencl.LocalMemory`` per size (the same argument object every launch, as capture compares them)."""
    m = _local.get(nbytes)
    if m is None:
        import pyopencl as cl
        m = _local[nbytes] = cl.LocalMemory(nbytes)
    return m


def global_pool(x, op, idx="int", divisor=0):
    """Pool each whole plane of ``x`` (N, C, H, W; float32 or float64; any strides) to one value.

    op "avg": returns y (N, C, 1, 1), the plane sums divided by ``divisor`` (0: by H*W); op "max": returns
    (y, indices), the maxima and their int64 plane-local indices h*W + w. idx: "long" when an element index of
    x may pass 2**31 - 1. Outputs are contiguous. Not differentiable itself (pool.py registers the ops)."""
    N, C, H, W = x._shape
    y = Tensor._empty((N, C, 1, 1), x.dtype, x.device)
    ind = Tensor._empty((N, C, 1, 1), D.int64, x.device) if op == "max" else None
    P, R = N * C, H * W
    if P == 0:
        return (y, ind) if op == "max" else y
    x, sn, sc, se = _flat_planes(x)
    rt = x._runtime()
    dt = "double" if x.dtype is D.float64 else "float"
    tpr = _lanes(rt, R, se)
    want = int(rt.profile.get_value("pool", "local_size", 128))
    k = _kernel(rt, dt, idx, op, tpr)
    while tpr > 1 and geometry.local1(rt, want, k) < tpr:    # a kernel (or device) allowing fewer lanes
        tpr //= 2
        k = _kernel(rt, dt, idx, op, tpr)
    s = np.float64 if dt == "double" else np.float32
    args = [x._storage.cl_buffer(), x._offset, sn, sc, se, C, R, P, y._storage.cl_buffer(),
            (ind if ind is not None else y)._storage.cl_buffer(), int(ind is not None), s(divisor or R)]
    if tpr == 1:
        gs, ls = geometry.nd(rt, P, want, k)
    else:
        per = geometry.local1(rt, want, k) // tpr           # planes per work-group
        per = min(per, P)
        ls = (per * tpr,)
        gs = (-(-P // per) * per * tpr,)
        args.append(_local_mem(ls[0] * x.dtype.itemsize))
        if op == "max":
            args.append(_local_mem(ls[0] * 8))
    rt.launch(k, gs, ls, *args)
    if x._storage.host is not None or y._storage.host is not None:
        rt.finish_if_exposed()
    return (y, ind) if op == "max" else y
