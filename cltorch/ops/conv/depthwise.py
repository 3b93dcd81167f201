"""Depthwise convolutions: groups == input channels, one input channel per group, M output channels per input
channel (the channel multiplier). ``cltorch/ops/conv/``'s three ops (``conv``, ``conv_t``, ``conv_w``) route
such geometries here (:func:`eligible`); everything else about them (argument checks, the 3-d lift, autograd,
16-bit through float32) stays in the package's other modules.

The kernels (``cl_kernels/conv_depthwise.cl.mako``) compute ``dw_mr`` outputs of ``dw_rows`` rows per work-item
and read their operands through strides, so no weight reordering, im2col matrix or contiguous copy is made; rows
read with unit stride use a compiled path whose taps select lanes of vectors loaded once per input row. The weight (and
bias) gradient is a two-pass reduction whose summation order depends only on the shapes: blocks of about 256
terms (whole output rows) summed in order, then the block sums in chunks of 256. It is therefore the same on
every device and work-group size (deterministic mode's cross-vendor bit-identity holds).

GPU profiles choose the GPU design of ``depthwise_tile.py`` (``[conv] dw_design = "tile"``: patches staged in local
memory), which computes the same terms in the same order, so either design gives the same bits.

Profile keys (``[conv]``): ``dw_local`` (work-items per group of the one-dimensional forward and input-gradient
launches, default 64), ``dw_mr`` (outputs along a row per work-item), ``dw_rows`` (rows per work-item, default 1),
``dw_wgrad_local`` (along the taps of the weight gradient, default 16) and ``depthwise_max_mult`` (the largest
channel multiplier sent here, default 8; 3 in ``cpu.toml``, measured: from a multiplier of 4 on, PoCL's
register-blocked direct kernels are as fast or faster).
"""
import numpy as np

from ... import _dtype as D
from ..._tensor import Tensor
from ...backend import geometry
from . import depthwise_tile
from .launch import _Tmp, _bias_args, _dtname, _finish, _idx_type, _span, _wstrides

_TEMPLATE = "conv_depthwise.cl.mako"
_BLOCK = 256            # terms per partial sum of the weight gradient (whole rows: about this many)


def eligible(rt, geom, cin_per_group, mult):
    """Whether a convolution with this geometry, ``cin_per_group`` input channels per group and ``mult`` output
    channels per group runs here: a depthwise one (more than one group, one input channel each) whose multiplier
    is at most ``[conv] depthwise_max_mult``."""
    if geom.G < 2 or cin_per_group != 1 or mult < 1:
        return False
    return mult <= int(rt.profile.get_value("conv", "depthwise_max_mult", 8))


def _kernel(rt, dt, idx, name, mr=1, fwo=None, fws=1, bwo=None, gwo=None):
    I = np.int64 if idx == "long" else np.int32
    i32 = np.int32
    if name in ("dw_fwd", "dw_bwd_input"):
        types = [None] + [I] * 6 + [None] + [I] * 5 + [None, I, I, i32, None, I] + [i32] * 24
    elif name in ("dw_wgrad_part", "dw_wgrad_rows"):
        types = [None] + [I] * 6 + [None] + [I] * 6 + [None] + [i32] * 24
    else:
        types = [None, None, I, None, I, I] + [i32] * 4
    return rt.kernel(_TEMPLATE, name, types, dt=dt, idx=idx, mr=mr, fwo=fwo, fws=fws, bwo=bwo, gwo=gwo,
                     gws=fws if gwo else 1)


_MAX_SPEC_KW = 7        # the compiled row path (see the template) for kernels up to this wide, strides 1 and 2


def _offsets(geom, unit_row, forward):
    """The taps' W offsets for the template's compiled row path, or None for the general path (rows not read with
    unit stride, kernels wider than 7, strides above 2). Forward: (j*dw - pw for each tap j); the input gradient:
    for each stride phase f, the taps (j, (f + pw - j*dw) / sw) whose division is exact, in order of j."""
    sw, pw, dw, KW = geom[3], geom[6], geom[9], geom.KW
    if not unit_row or KW > _MAX_SPEC_KW or sw > 2:
        return None
    if forward:
        return tuple(j * dw - pw for j in range(KW))
    return tuple(tuple((j, (f + pw - j * dw) // sw) for j in range(KW) if (f + pw - j * dw) % sw == 0)
                 for f in range(sw))


def _mr(rt, row):
    """Outputs per work-item of dw_fwd / dw_bwd_input for rows of ``row`` outputs: ``[conv] dw_mr`` (8 on CPU
    devices, 1 on GPUs), lowered to the smallest power of two covering the row (a 4-wide map takes 4 lanes, not 8
    of which half idle). mr never changes a result (every lane adds its taps in the same order)."""
    mr = int(rt.profile.get_value("conv", "dw_mr", 8))
    if mr not in (1, 2, 4, 8, 16):
        raise ValueError(f"profile value [conv] dw_mr must be 1, 2, 4, 8 or 16, got {mr}")
    while mr > 1 and mr // 2 >= row:
        mr //= 2
    return mr


def _rows(rt, rows):
    """Rows per work-item of dw_fwd / dw_bwd_input (``[conv] dw_rows``, default 1; at most ``rows``)."""
    return max(1, min(int(rt.profile.get_value("conv", "dw_rows", 1)), rows))


def _local(rt, key, default, n):
    return max(1, min(int(rt.profile.get_value("conv", key, default)), n))


def _tiled(rt):
    """Whether the profile chooses the GPU design (``[conv] dw_design = "tile"``: ``depthwise_tile.py``)."""
    return rt.profile.get_value("conv", "dw_design", "") == "tile"


def forward(x, w, b, geom):
    """y = conv(x, w) + b for a depthwise geometry: x [N, C, D, H, W], w [C*M, 1, KD, KH, KW], b [C*M] or None;
    float32 or float64 (``run.py`` computes 16-bit inputs in float32). Returns y [N, C*M, OD, OH, OW] contiguous."""
    rt = x._runtime()
    if _tiled(rt):
        y = depthwise_tile.forward(x, w, b, geom)
        if y is not None:
            return y
    N, C = x._shape[0], x._shape[1]
    CM = w._shape[0]
    y = Tensor._empty((N, CM) + geom.out_sp, x.dtype, x.device)
    dt = _dtname(x)
    idx = _idx_type(_span(x), _span(w), y.numel() + 1)
    mr = _mr(rt, geom.OW)
    fwo = _offsets(geom, x._stride[4] == 1 or geom.W == 1, True)
    k = _kernel(rt, dt, idx, "dw_fwd", mr, fwo=fwo, fws=geom[3] if fwo else 1)
    nwb = -(-geom.OW // mr)
    rh = _rows(rt, geom.OD * geom.OH)
    Q = -(-(geom.OD * geom.OH) // rh) * nwb
    n = Q * CM * N
    gs, ls = geometry.nd(rt, n, int(rt.profile.get_value("conv", "dw_local", 64)), k)
    rt.launch(k, gs, ls, x._storage.cl_buffer(), x._offset, *x._stride,
              w._storage.cl_buffer(), *_wstrides(w), *_bias_args(b, w), y._storage.cl_buffer(), y._offset,
              C, CM // C, *geom.sizes(), *geom.launch_args(), nwb, Q, N, rh)
    _finish(rt, x, w, b, y)
    return y


def transposed(u, w, b, geom):
    """z = conv_t(u, w) + b (the adjoint of :func:`forward` in x): u [N, C*M, OD, OH, OW], w [C*M, 1, KD, KH,
    KW], b [C] or None. Returns z [N, C, D, H, W] contiguous (a gather per element of z: no atomics)."""
    rt = u._runtime()
    if _tiled(rt):
        z = depthwise_tile.transposed(u, w, b, geom)
        if z is not None:
            return z
    N, CM = u._shape[0], u._shape[1]
    C = geom.G
    z = Tensor._empty((N, C) + geom.in_sp, u.dtype, u.device)
    dt = _dtname(u)
    idx = _idx_type(_span(u), _span(w), z.numel() + 1)
    sw = geom[3]
    mr = _mr(rt, -(-geom.W // sw))
    k = _kernel(rt, dt, idx, "dw_bwd_input", mr, bwo=_offsets(geom, u._stride[4] == 1 or geom.OW == 1, False))
    nwb = -(-(-(-geom.W // sw)) // mr)          # work-items per phase of a row (positions split by w mod sw)
    rh = _rows(rt, geom.D * geom.H)
    Q = -(-(geom.D * geom.H) // rh) * sw * nwb
    n = Q * C * N
    gs, ls = geometry.nd(rt, n, int(rt.profile.get_value("conv", "dw_local", 64)), k)
    rt.launch(k, gs, ls, u._storage.cl_buffer(), u._offset, *u._stride,
              w._storage.cl_buffer(), *_wstrides(w), *_bias_args(b, w), z._storage.cl_buffer(), z._offset,
              C, CM // C, *geom.sizes(), *geom.launch_args(), nwb, Q, N, rh)
    _finish(rt, u, w, b, z)
    return z


def weight_grad(x, u, geom, wshape, with_bias):
    """(v, gb): v = conv_w(x, u) [C*M, 1, KD, KH, KW] (the weight gradient) and, with_bias, gb = the sum of u over
    n and positions [C*M] (else None). x [N, C, D, H, W], u [N, C*M, OD, OH, OW], read through their strides.
    Fixed-order sums (see the module docstring): the result does not depend on the device's work-group sizes."""
    rt = x._runtime()
    N, C = x._shape[0], x._shape[1]
    CM = u._shape[1]
    KS = geom.KS
    T = KS + int(bool(with_bias))
    NR = N * geom.OD * geom.OH
    RB = max(1, _BLOCK // max(geom.OW, 1))
    NBLK = -(-NR // RB)
    v = Tensor._empty(tuple(wshape), x.dtype, x.device)
    gb = Tensor._empty((CM,), x.dtype, x.device) if with_bias else None
    dt = _dtname(x)
    isz = 8 if x.dtype is D.float64 else 4
    idx = _idx_type(_span(x), _span(u), CM * T * NBLK + 1)
    tmp = _Tmp(rt)
    part = tmp(CM * T * NBLK * isz)
    if not (_tiled(rt) and depthwise_tile.wgrad_part(rt, x, u, geom, part, T, RB, NR, NBLK, dt, idx)):
        gwo = _offsets(geom, (x._stride[4] == 1 or geom.W == 1) and (u._stride[4] == 1 or geom.OW == 1), True)
        if gwo is not None:         # a work-item per row of taps (and one for the bias)
            kp = _kernel(rt, dt, idx, "dw_wgrad_rows", fws=geom[3], gwo=gwo)
            nt = geom.KD * geom.KH + int(bool(with_bias))
        else:                       # a work-item per tap
            kp = _kernel(rt, dt, idx, "dw_wgrad_part")
            nt = T
        lx = _local(rt, "dw_wgrad_local", 16, nt)
        gs, ls = geometry.nd(rt, (nt, CM, NBLK), (lx, max(1, _local(rt, "dw_local", 64, CM) // lx), 1), kp)
        rt.launch(kp, gs, ls, x._storage.cl_buffer(), x._offset, *x._stride, u._storage.cl_buffer(), u._offset,
                  *u._stride, part, C, CM // C, *geom.sizes(), *geom.launch_args(), T, RB, NR, NBLK)
    ks = _kernel(rt, dt, idx, "dw_wgrad_sum")
    n = T * CM
    gs, ls = geometry.nd(rt, n, int(rt.profile.get_value("conv", "dw_local", 64)), ks)
    bt = gb if gb is not None else v
    rt.launch(ks, gs, ls, part, v._storage.cl_buffer(), v._offset, bt._storage.cl_buffer(),
              bt._offset, 1, T, KS, CM, NBLK)
    tmp.done()
    _finish(rt, x, u, v, gb)
    return v, gb
