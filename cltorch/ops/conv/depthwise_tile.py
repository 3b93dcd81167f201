"""Depthwise convolutions, the GPU design (``cl_kernels/conv_depthwise_tile.cl.mako``): a work-group per tile of
one plane stages the input patch plus its halo (the forward), the u patch its taps reach (the input gradient), or a
block of u rows and the input rows their taps read (the weight gradient) in local memory with coalesced loads, and
every tap reads it from there. Each output adds the same terms in the same order as the kernels of
``conv_depthwise.cl.mako`` (``depthwise.py``), so the two designs give the same bits, deterministic mode's
cross-device identity included.

A profile chooses it with ``[conv] dw_design = "tile"`` (gpu.toml). Keys: ``dw_local`` (work-items per tile,
default 128), ``dw_tile_rows`` (output rows per work-item, default 2). A geometry whose patch does not fit the
local memory (or whose weight gradient needs more work-items than a group may have) runs the other design: each
function returns None then.
"""
import numpy as np

from ..._tensor import Tensor
from ...backend import geometry
from .launch import _bias_args, _dtname, _finish, _idx_type, _span, _wstrides

_TEMPLATE = "conv_depthwise_tile.cl.mako"


def _pow2_at_least(n):
    p = 1
    while p < n:
        p *= 2
    return p


def tile(rt, rows, cols, sh, sw, kh, kw, dh, dw, isz, transposed=False):
    """(LX, LY, RH, PH, PW) for output planes of ``rows`` x ``cols`` (all depths), or None when the patch does not fit
    the local memory. LX covers a row (at most 32), LY x RH rows fill ``[conv] dw_local`` work-items."""
    prof = rt.profile
    nt = min(int(prof.get_value("conv", "dw_local", 128)), geometry.cap(rt))
    lx = min(32, _pow2_at_least(cols), nt)
    rh = max(1, min(int(prof.get_value("conv", "dw_tile_rows", 2)), rows))
    ly = max(1, min(nt // lx, _pow2_at_least(-(-rows // rh))))
    th = ly * rh
    if transposed:
        ph_, pw_ = (th - 1 + (kh - 1) * dh) // sh + 2, (lx - 1 + (kw - 1) * dw) // sw + 2
    else:
        ph_, pw_ = (th - 1) * sh + (kh - 1) * dh + 1, (lx - 1) * sw + (kw - 1) * dw + 1
    if ph_ * pw_ * isz > geometry.limits(rt).local_mem_size // 2:
        return None
    return lx, ly, rh, ph_, pw_


def _kernel(rt, dt, idx, name, **params):
    I = np.int64 if idx == "long" else np.int32
    i32 = np.int32
    if name == "dwt_wgrad_part":
        types = [None] + [I] * 6 + [None] + [I] * 6 + [None, None, None, None] + [i32] * 24
    else:
        types = [None] + [I] * 6 + [None] + [I] * 5 + [None, I, I, i32, None, I, None] + [i32] * (
            26 if name == "dwt_bwd_input" else 25)
    return rt.kernel(_TEMPLATE, name, types, dt=dt, idx=idx, **params)


def forward(x, w, b, geom):
    """y = conv(x, w) + b (depthwise: x [N, C, ...], w [C*M, 1, KD, KH, KW]) or None when the tile does not fit."""
    import pyopencl as cl
    rt = x._runtime()
    dt = _dtname(x)
    isz = 8 if dt == "double" else 4
    N, C = x._shape[0], x._shape[1]
    CM = w._shape[0]
    M = CM // C
    g = geom
    t = tile(rt, g.OH, g.OW, g[2], g[3], g.KH, g.KW, g[8], g[9], isz)
    if t is None:
        return None
    lx, ly, rh, ph_, pw_ = t
    y = Tensor._empty((N, CM) + g.out_sp, x.dtype, x.device)
    idx = _idx_type(_span(x), _span(w), y.numel() + 1)
    k = _kernel(rt, dt, idx, "dwt_fwd", mult=M, rh=rh)
    if lx * ly > geometry.cap(rt, k):
        return None
    nth, ntw = -(-g.OH // (ly * rh)), -(-g.OW // lx)
    groups = N * C * g.OD * nth * ntw
    rt.launch(k, (groups * lx * ly,), (lx * ly,), x._storage.cl_buffer(), x._offset, *x._stride,
              w._storage.cl_buffer(), *_wstrides(w), *_bias_args(b, w), y._storage.cl_buffer(), y._offset,
              cl.LocalMemory(ph_ * pw_ * isz), C, *g.sizes(), *g.launch_args(), lx, ly, nth, ntw, ph_, pw_)
    _finish(rt, x, w, b, y)
    return y


def transposed(u, w, b, geom):
    """z = conv_t(u, w) + b (the depthwise input gradient) or None when the tile does not fit."""
    import pyopencl as cl
    rt = u._runtime()
    dt = _dtname(u)
    isz = 8 if dt == "double" else 4
    N, CM = u._shape[0], u._shape[1]
    g = geom
    C = g.G
    t = tile(rt, g.H, g.W, g[2], g[3], g.KH, g.KW, g[8], g[9], isz, transposed=True)
    if t is None:
        return None
    lx, ly, rh, ph_, pw_ = t
    z = Tensor._empty((N, C) + g.in_sp, u.dtype, u.device)
    idx = _idx_type(_span(u), _span(w), z.numel() + 1)
    k = _kernel(rt, dt, idx, "dwt_bwd_input", mult=1, rh=rh)
    if lx * ly > geometry.cap(rt, k):
        return None
    nth, ntw = -(-g.H // (ly * rh)), -(-g.W // lx)
    groups = N * C * g.D * nth * ntw
    rt.launch(k, (groups * lx * ly,), (lx * ly,), u._storage.cl_buffer(), u._offset, *u._stride,
              w._storage.cl_buffer(), *_wstrides(w), *_bias_args(b, w), z._storage.cl_buffer(), z._offset,
              cl.LocalMemory(ph_ * pw_ * isz), C, CM // C, *g.sizes(), *g.launch_args(), lx, ly, nth, ntw, ph_, pw_)
    _finish(rt, u, w, b, z)
    return z


def wgrad_part(rt, x, u, geom, part, T, RB, NR, NBLK, dt, idx):
    """Launch dwt_wgrad_part into ``part`` (the partials of ``depthwise.weight_grad``, same layout and bits as
    dw_wgrad_part). Returns False (nothing launched) when the block or the work-group does not fit."""
    import pyopencl as cl
    isz = 8 if dt == "double" else 4
    g = geom
    C, CM = x._shape[1], u._shape[1]
    nei = g.KD * g.KH
    lim = geometry.limits(rt)
    nt = T * 8
    k = _kernel(rt, dt, idx, "dwt_wgrad_part", mult=1, rh=1)
    local = (RB * g.OW + RB * nei * g.W + nt) * isz
    if nt > geometry.cap(rt, k) or local > lim.local_mem_size // 2:
        return False
    rt.launch(k, (CM * NBLK * nt,), (nt,), x._storage.cl_buffer(), x._offset, *x._stride, u._storage.cl_buffer(),
              u._offset, *u._stride, part, cl.LocalMemory(RB * g.OW * isz), cl.LocalMemory(RB * nei * g.W * isz),
              cl.LocalMemory(nt * isz), C, CM // C, *g.sizes(), *g.launch_args(), T, RB, NR, NBLK)
    return True
