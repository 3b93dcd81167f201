"""Depthwise convolutions: groups == input channels, one input channel per group, M output channels per input
channel (the channel multiplier). ``cltorch/ops/conv.py``'s three ops (``conv``, ``conv_t``, ``conv_w``) route
such geometries here (:func:`eligible`); everything else about them (argument checks, the 3-d lift, autograd,
16-bit through float32) stays in conv.py.

The kernels (``cl_kernels/conv_depthwise.cl.mako``) compute one output element per work-item and read their
operands through strides, so no weight reordering, im2col matrix or contiguous copy is made. The weight (and
bias) gradient is a two-pass reduction whose summation order depends only on the shapes: blocks of about 256
terms (whole output rows) summed in order, then the block sums in chunks of 256. It is therefore the same on
every device and work-group size (deterministic mode's cross-vendor bit-identity holds).

Profile keys (``[conv]``): ``dw_local`` (work-items per group along the output positions, default 64),
``dw_wgrad_local`` (along the taps of the weight gradient, default 16) and ``depthwise_max_mult`` (the largest
channel multiplier sent here, default 8; 3 in ``cpu.toml``, measured: from a multiplier of 4 on, PoCL's
register-blocked direct kernels are as fast or faster).
"""
import numpy as np

from .. import _dtype as D
from .._tensor import Tensor

_TEMPLATE = "conv_depthwise.cl.mako"
_BLOCK = 256            # terms per partial sum of the weight gradient (whole rows: about this many)


def eligible(rt, geom, cin_per_group, mult):
    """Whether a convolution with this geometry, ``cin_per_group`` input channels per group and ``mult`` output
    channels per group runs here: a depthwise one (more than one group, one input channel each) whose multiplier
    is at most ``[conv] depthwise_max_mult``."""
    if geom.G < 2 or cin_per_group != 1 or mult < 1:
        return False
    return mult <= int(rt.profile.get_value("conv", "depthwise_max_mult", 8))


def _kernel(rt, dt, idx, name, mr=1):
    I = np.int64 if idx == "long" else np.int32
    i32 = np.int32
    if name in ("dw_fwd", "dw_bwd_input"):
        types = [None] + [I] * 6 + [None] + [I] * 5 + [None, I, I, i32, None, I] + [i32] * 22
    elif name == "dw_wgrad_part":
        types = [None] + [I] * 6 + [None] + [I] * 6 + [None] + [i32] * 24
    else:
        types = [None, None, I, None, I, I] + [i32] * 4
    return rt.kernel(_TEMPLATE, name, types, dt=dt, idx=idx, mr=mr)


def _mr(rt):
    """Outputs per work-item of dw_fwd / dw_bwd_input (``[conv] dw_mr``: 8 on CPU devices, 1 on GPUs)."""
    mr = int(rt.profile.get_value("conv", "dw_mr", 8))
    if mr not in (1, 2, 4, 8, 16):
        raise ValueError(f"profile value [conv] dw_mr must be 1, 2, 4, 8 or 16, got {mr}")
    return mr


def _local(rt, key, default, n):
    return max(1, min(int(rt.profile.get_value("conv", key, default)), n))


def _round_up(a, b):
    return -(-a // b) * b


def _wstrides(w):
    """(offset, stride over output channels, depth, height, width strides) of a [C*M, 1, KD, KH, KW] weight."""
    return (w._offset, w._stride[0]) + tuple(w._stride[2:5])


def _bias_args(b, w):
    if b is None:
        return (w._storage.cl_buffer(), w._offset, 0, 0)
    return (b._storage.cl_buffer(), b._offset, b._stride[0], 1)


def forward(x, w, b, geom):
    """y = conv(x, w) + b for a depthwise geometry: x [N, C, D, H, W], w [C*M, 1, KD, KH, KW], b [C*M] or None;
    float32 or float64 (conv.py computes 16-bit inputs in float32). Returns y [N, C*M, OD, OH, OW] contiguous."""
    from .conv import _dtname, _finish, _idx_type, _span
    rt = x._runtime()
    N, C = x._shape[0], x._shape[1]
    CM = w._shape[0]
    y = Tensor._empty((N, CM) + geom.out_sp, x.dtype, x.device)
    dt = _dtname(x)
    idx = _idx_type(_span(x), _span(w), y.numel() + 1)
    mr = _mr(rt)
    k = _kernel(rt, dt, idx, "dw_fwd", mr)
    nwb = -(-geom.OW // mr)
    Q = geom.OD * geom.OH * nwb
    lx = _local(rt, "dw_local", 64, Q)
    rt.launch(k, (_round_up(Q, lx), CM, N), (lx, 1, 1), x._storage.cl_buffer(), x._offset, *x._stride,
              w._storage.cl_buffer(), *_wstrides(w), *_bias_args(b, w), y._storage.cl_buffer(), y._offset,
              C, CM // C, *geom.sizes(), *geom.launch_args(), nwb, Q)
    _finish(rt, x, w, b, y)
    return y


def transposed(u, w, b, geom):
    """z = conv_t(u, w) + b (the adjoint of :func:`forward` in x): u [N, C*M, OD, OH, OW], w [C*M, 1, KD, KH,
    KW], b [C] or None. Returns z [N, C, D, H, W] contiguous (a gather per element of z: no atomics)."""
    from .conv import _dtname, _finish, _idx_type, _span
    rt = u._runtime()
    N, CM = u._shape[0], u._shape[1]
    C = geom.G
    z = Tensor._empty((N, C) + geom.in_sp, u.dtype, u.device)
    dt = _dtname(u)
    idx = _idx_type(_span(u), _span(w), z.numel() + 1)
    mr = _mr(rt)
    k = _kernel(rt, dt, idx, "dw_bwd_input", mr)
    sw = geom[3]
    nwb = -(-(-(-geom.W // sw)) // mr)          # work-items per phase of a row (positions split by w mod sw)
    Q = geom.D * geom.H * sw * nwb
    lx = _local(rt, "dw_local", 64, Q)
    rt.launch(k, (_round_up(Q, lx), C, N), (lx, 1, 1), u._storage.cl_buffer(), u._offset, *u._stride,
              w._storage.cl_buffer(), *_wstrides(w), *_bias_args(b, w), z._storage.cl_buffer(), z._offset,
              C, CM // C, *geom.sizes(), *geom.launch_args(), nwb, Q)
    _finish(rt, u, w, b, z)
    return z


def weight_grad(x, u, geom, wshape, with_bias):
    """(v, gb): v = conv_w(x, u) [C*M, 1, KD, KH, KW] (the weight gradient) and, with_bias, gb = the sum of u over
    n and positions [C*M] (else None). x [N, C, D, H, W], u [N, C*M, OD, OH, OW], read through their strides.
    Fixed-order sums (see the module docstring): the result does not depend on the device's work-group sizes."""
    from .conv import _Tmp, _dtname, _finish, _idx_type, _span
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
    kp = _kernel(rt, dt, idx, "dw_wgrad_part")
    lx = _local(rt, "dw_wgrad_local", 16, T)
    ly = max(1, min(_local(rt, "dw_local", 64, CM) // lx, CM))
    rt.launch(kp, (_round_up(T, lx), _round_up(CM, ly), NBLK), (lx, ly, 1), x._storage.cl_buffer(), x._offset,
              *x._stride, u._storage.cl_buffer(), u._offset, *u._stride, part, C, CM // C, *geom.sizes(),
              *geom.launch_args(), T, RB, NR, NBLK)
    ks = _kernel(rt, dt, idx, "dw_wgrad_sum")
    n = T * CM
    ls = _local(rt, "dw_local", 64, n)
    bt = gb if gb is not None else v
    rt.launch(ks, (_round_up(n, ls),), (ls,), part, v._storage.cl_buffer(), v._offset, bt._storage.cl_buffer(),
              bt._offset, 1, T, KS, CM, NBLK)
    tmp.done()
    _finish(rt, x, u, v, gb)
    return v, gb
