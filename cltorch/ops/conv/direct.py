"""The "direct" algorithm, the CPU design: register-blocked implicit-GEMM kernels (``conv_direct`` /
``conv_direct_t`` of ``cl_kernels/conv.cl.mako``, no column matrix) for the forward and transposed directions over
weights reordered by ``conv_prep_w``; the weight gradient through im2col into a [G][N*P][K] column matrix and
``conv_wgrad`` (which reads u in place), or, for large images, as a forward convolution with batch and channels
swapped (:func:`_wgrad_as_conv`)."""
import numpy as np

from ..._tensor import Tensor
from ...backend import geometry
from .geom import Geom, _cdiv, _round_up
from .im2col import _col_chunk, _im2col
from .launch import _Tmp, _dtname, _finish, _idx_type, _kernel, _span, _spatial_contiguous

_zero = {}


def _zero_buffer(rt):
    """A 16-byte zero buffer on rt: out-of-range taps of the direct kernels read it."""
    buf = _zero.get(rt.index)
    if buf is None:
        buf = rt.alloc(16)
        rt.copy(buf, np.zeros(2, np.float64), is_blocking=True)
        _zero[rt.index] = buf
    return buf


def _vw(prof, dt):
    """The direct kernels' vector width: ``[conv] vw`` (``vw_f64`` for float64)."""
    return int(prof.get_value("conv", "vw_f64" if dt == "double" else "vw", 4 if dt == "double" else 8))


def _config(rt, dt, co):
    """Register blocking of the direct kernels: vector width vw, vectors per position nv, positions mr."""
    prof = rt.profile
    vw = _vw(prof, dt)
    nv = 1 if co <= vw else int(prof.get_value("conv", "nv", 2))
    mr = int(prof.get_value("conv", "mr", 4))
    return {"vw": vw, "nv": nv, "mr": mr, "lx": int(prof.get_value("conv", "local_size", 16))}


def _prep_weight(rt, tmp, w, b, geom, transposed, dt, idx, cfg):
    """WT [G][K+1][Opad] for the direct kernels (see conv.cl.mako). Returns (buffer, Opad, CI, CO)."""
    G = geom.G
    O, Cg = w._shape[0], w._shape[1]
    Og = O // G
    s0, s1, s2, s3, s4 = w._stride
    if transposed:      # kernel input channels: the conv's output channels
        CI, CO, w_ci, w_co = Og, Cg, s0, s1
    else:
        CI, CO, w_ci, w_co = Cg, Og, s1, s0
    NR = cfg["vw"] * cfg["nv"]
    Opad = _round_up(CO, NR)
    K = geom.KS * CI
    isz = 8 if dt == "double" else 4
    wt = tmp(G * (K + 1) * Opad * isz)
    k = _kernel(rt, dt, idx, cfg, "prep")
    bb = b if b is not None else w
    rt.launch(k, (Opad, K + 1, G), None, w._storage.cl_buffer(), w._offset, Og * s0, w_ci, w_co, s2, s3, s4,
              bb._storage.cl_buffer(), bb._offset, bb._stride[0] if b is not None else 0, int(b is not None),
              wt, CI, CO, geom.KD, geom.KH, geom.KW, Opad)
    return wt, Opad, CI, CO


def _direct(x, w, b, geom, transposed, out_shape):
    """Run conv_direct (or conv_direct_t) and return the output tensor."""
    rt = x._runtime()
    dt = _dtname(x)
    G = geom.G
    N = x._shape[0]
    O, Cg = w._shape[0], w._shape[1]
    CO = Cg if transposed else O // G
    cfg = _config(rt, dt, CO)
    y = Tensor._empty(out_shape, x.dtype, x.device)
    idx = _idx_type(_span(x), y.numel() + 1, w.numel() * 2 + 64 * O)
    tmp = _Tmp(rt)
    wt, Opad, CI, CO = _prep_weight(rt, tmp, w, b, geom, transposed, dt, idx, cfg)
    # transposed: the kernel's input u has the conv's output size and its output the conv's input size
    sizes = geom.sizes(transposed)
    P = sizes[3] * sizes[4] * sizes[5]
    nb = _cdiv(P, cfg["mr"])
    ncb = Opad // (cfg["vw"] * cfg["nv"])
    NG = N * G
    ls = cfg["lx"]                     # work-group of about ls items: position blocks, then images
    lx = max(1, min(nb, ls))
    lz = max(1, min(NG, ls // lx))
    k = _kernel(rt, dt, idx, cfg, "direct_t" if transposed else "direct")
    gs, loc = geometry.nd(rt, (nb, ncb, NG), (lx, 1, lz), k)
    rt.launch(k, gs, loc,
              x._storage.cl_buffer(), x._offset, *x._stride, wt, y._storage.cl_buffer(), y._offset,
              _zero_buffer(rt), G, CI, CO, *sizes, *geom.launch_args(), Opad, nb, ncb, N * G)
    tmp.done()
    _finish(rt, x, w, b, y)
    return y


def _direct_conv_w(x, u, geom, wshape, with_bias):
    """Weight (and bias) gradient without the GEMM: im2col into [G][N*P][Kp] (k fastest, plus a row of ones
    when the bias gradient is wanted) and conv_wgrad, which reads u in place (no transposed copy).
    Returns (v, bias_grad or None)."""
    rt = x._runtime()
    dt = _dtname(x)
    isz = 8 if dt == "double" else 4
    G = geom.G
    N, C = x._shape[0], x._shape[1]
    O = u._shape[1]
    Og, CI = O // G, C // G
    Kg = CI * geom.KS
    P = geom.P
    prof = rt.profile
    vw = _vw(prof, dt)
    cfg = {"vw": vw, "nv": 1 if Kg + with_bias <= vw else int(prof.get_value("conv", "wgrad_nv", 2)),
           "mr": int(prof.get_value("conv", "wgrad_mr", 4))}
    NR = cfg["vw"] * cfg["nv"]
    Kp = _round_up(Kg + int(with_bias), NR)
    v = Tensor._empty(wshape, x.dtype, x.device)
    gb = Tensor._empty((O,), x.dtype, x.device) if with_bias else None
    if not _spatial_contiguous(u):
        u = u.contiguous()
    us = u._stride
    idx = _idx_type(_span(x), _span(u), G * N * P * Kp + 1)
    tmp = _Tmp(rt)
    nb = _col_chunk(rt, N, G * P * Kp * isz)
    col = tmp(G * nb * P * Kp * isz)
    k = _kernel(rt, dt, idx, cfg, "wgrad")
    bt = gb if gb is not None else v
    for n0 in range(0, N, nb):
        m = min(nb, N - n0)
        _im2col(rt, dt, idx, x, n0, m, geom, col, 0, P * Kp, m * P * Kp, 1, Kp, cfg, Kp, with_bias)
        gs, loc = geometry.nd(rt, (Kp // NR, _cdiv(Og, cfg["mr"]), G), (1, 1, 1), k)
        rt.launch(k, gs, loc, u._storage.cl_buffer(), u._offset + n0 * us[0],
                  us[0], us[1], col, m * P * Kp, v._storage.cl_buffer(), v._offset, bt._storage.cl_buffer(),
                  bt._offset, 1, int(with_bias), m, P, Og, Kg, Kp, int(n0 > 0))
    tmp.done()
    _finish(rt, x, u, v)
    return v, gb


def _wgrad_as_conv_pays(x, u, geom):
    """Whether the weight gradient should run as a forward convolution (see :func:`_wgrad_as_conv`): one group,
    long reductions (at least ``[conv] wgrad_conv_min_p`` output positions per image, default 4096: large
    images, where im2col's column matrix no longer fits in cache), and the reordered u within the
    column budget."""
    if geom.G != 1:
        return False
    rt = x._runtime()
    if geom.P < int(rt.profile.get_value("conv", "wgrad_conv_min_p", 4096)):
        return False
    isz = x.dtype.itemsize
    wt_bytes = (x._shape[0] * geom.P + 1) * _round_up(u._shape[1], 16) * isz
    return wt_bytes <= 2 * int(rt.profile.get_value("conv", "col_bytes", 32 << 20))


def _wgrad_as_conv(x, u, geom, wshape):
    """The weight gradient as a forward convolution run by the direct kernel, with batch and channels swapped:
    ``v[o, c, t] = sum_{n, p} u[n, o, p] * x[n, c, p*s - pad + t*d]`` is conv(x', u') with x' = x^T (batch c,
    channels n), the kernel u' = u^T (out o, in n, taps p), stride d and dilation s. It reads x and u in place
    (no column matrix): on 3-d images it is several times faster than im2col + conv_wgrad, whose column
    matrix is read from memory once per output-channel block."""
    g = geom
    tgeom = Geom(1, g[7], g[8], g[9], g[4], g[5], g[6], g[1], g[2], g[3], *g.in_sp, *g[16:19], *g.out_sp)
    C, O = x._shape[1], u._shape[1]
    y = _direct(x.transpose(0, 1), u.transpose(0, 1), None, tgeom, False, (C, O) + tuple(g[16:19]))
    v = y.transpose(0, 1)
    return v.contiguous() if tuple(v._shape) == tuple(wshape) else v.reshape(wshape)


