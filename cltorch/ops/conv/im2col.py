"""The "gemm" algorithm: im2col (or col2im) around the tuned GEMM of ``cltorch/ops/gemm/``; best on CPU devices when
the GEMM dimensions are large. The batch runs in chunks so the column matrix stays below the profile's
``[conv] col_bytes``. 1x1 convolutions skip the column matrix (``pointwise.py``)."""
import numpy as np

from ..._tensor import Tensor
from ...backend import geometry
from . import pointwise
from .launch import (_GEMM_CFG, _NP, _Tmp, _aligned, _aligned_empty, _contig_w, _dtname, _finish, _gemm,
                     _idx_type, _kernel, _span, _spatial_contiguous)


def _col_chunk(rt, N, per_image_bytes):
    budget = int(rt.profile.get_value("conv", "col_bytes", 32 << 20))
    return max(1, min(N, budget // max(per_image_bytes, 1)))


def _im2col(rt, dt, idx, x, n0, nb, geom, col, c_off, c_sn, c_sg, c_sk, c_sp, cfg=None, Kp=None, ones=False):
    G = geom.G
    CI = x._shape[1] // G
    Kg = CI * geom.KS
    Kp = Kg if Kp is None else Kp
    P = geom.P
    k = _kernel(rt, dt, idx, cfg or _GEMM_CFG, "im2col")
    sn = x._stride[0]
    n = nb * G * P
    gs, ls = geometry.nd(rt, n, int(rt.profile.get_value("conv", "im2col_local", 64)), k)
    rt.launch(k, gs, ls, x._storage.cl_buffer(), x._offset + n0 * sn,
              *x._stride, col, c_off, c_sn, c_sg, c_sk, c_sp, G, CI, *geom.sizes(), *geom.launch_args(), Kp,
              int(ones), nb * G)



def _out_with_bias(x, w, b, geom):
    """The forward output [N, O, OD, OH, OW] (64-byte aligned on cpu), holding the bias when there is one (the GEMMs
    then add into it with beta = 1)."""
    O = w._shape[0]
    y = _aligned_empty((x._shape[0], O) + geom.out_sp, x.dtype, x.device)
    if b is not None:
        from ..elementwise import pointwise as ew
        ew("x0", [b.reshape(1, O, 1, 1, 1)], x.dtype, x.dtype, out=y, shape=y._shape)
    return y


def _gemm_conv(x, w, b, geom):
    """y = conv(x, w) + b through im2col and the GEMM (a 1x1 convolution on spatially contiguous x: GEMMs alone)."""
    if pointwise.applies(geom) and _spatial_contiguous(x):
        return pointwise.forward(x, w, b, geom, _out_with_bias(x, w, b, geom))
    rt = x._runtime()
    dt = _dtname(x)
    npdt = _NP[dt]
    isz = np.dtype(npdt).itemsize
    G = geom.G
    N, C = x._shape[0], x._shape[1]
    O = w._shape[0]
    Og, CI = O // G, C // G
    Kg = CI * geom.KS
    P = geom.P
    y = _out_with_bias(x, w, b, geom)
    w = _contig_w(w)
    beta = 1.0 if b is not None else 0.0
    idx = _idx_type(_span(x), y.numel() + 1)
    gemm = _gemm()
    # buffers fetched after any nested op (a copy may wait for the queue, ending earlier fetches' hold)
    ybuf, wbuf = y._storage.cl_buffer(), w._storage.cl_buffer()
    tmp = _Tmp(rt)
    nb = _col_chunk(rt, N, C * geom.KS * P * isz)
    col = tmp(nb * G * Kg * P * isz)
    for n0 in range(0, N, nb):
        m = min(nb, N - n0)
        # rows of k per position (each work-item writes contiguously: what PoCL's CPU device needs);
        # the GEMM reads the transposed view (k, p) -> p*Kg + k
        _im2col(rt, dt, idx, x, n0, m, geom, col, 0, G * Kg * P, Kg * P, 1, Kg)
        for g in range(G):
            gemm(rt, Og, P, Kg, (wbuf, w._offset + g * Og * Kg, Kg, 1, 0),
                 (col, g * Kg * P, 1, Kg, G * Kg * P),
                 (ybuf, y._offset + (n0 * O + g * Og) * P, P, 1, O * P), 1.0, beta, m, npdt)
    tmp.done()
    _finish(rt, x, w, b, y)
    return y


def _gemm_conv_t(u, w, b, geom):
    """z = conv_t(u, w) + b through the GEMM (columns = W^T u) and col2im (a 1x1 convolution: GEMMs alone)."""
    if pointwise.applies(geom):
        return pointwise.transposed(u, w, b, geom)
    rt = u._runtime()
    dt = _dtname(u)
    npdt = _NP[dt]
    isz = np.dtype(npdt).itemsize
    G = geom.G
    N, O = u._shape[0], u._shape[1]
    Cg = w._shape[1]
    Og = O // G
    Kg = Cg * geom.KS
    P = geom.P
    w = _contig_w(w)
    if not _spatial_contiguous(u):
        u = u.contiguous()
    u = _aligned(u)
    us = u._stride
    gemm = _gemm()
    z = Tensor._empty((N, G * Cg) + geom.in_sp, u.dtype, u.device)
    idx = _idx_type(_span(u), z.numel() + 1)
    tmp = _Tmp(rt)
    nb = _col_chunk(rt, N, G * Kg * P * isz)
    col = tmp(nb * G * Kg * P * isz)
    ubuf, wbuf, zbuf = u._storage.cl_buffer(), w._storage.cl_buffer(), z._storage.cl_buffer()
    k = _kernel(rt, dt, idx, _GEMM_CFG, "col2im")
    HW = geom.Pin
    lx = min(64, HW)
    for n0 in range(0, N, nb):
        m = min(nb, N - n0)
        for g in range(G):
            gemm(rt, Kg, P, Og, (wbuf, w._offset + g * Og * Kg, 1, Kg, 0),
                 (ubuf, u._offset + n0 * us[0] + g * Og * us[1], us[1], 1, us[0]),
                 (col, g * Kg * P, P, 1, G * Kg * P), 1.0, 0.0, m, npdt)
        gs, ls = geometry.nd(rt, (HW, G * Cg, m), (lx, 1, 1), k)
        rt.launch(k, gs, ls, col, 0, G * Kg * P, Kg * P, P, 1,
                  zbuf, z._offset + n0 * G * Cg * HW, G, Cg, *geom.sizes(), *geom.launch_args())
    tmp.done()
    if b is not None:
        from ..elementwise import pointwise as ew
        ew("x0 + x1", [z, b.reshape(1, -1, 1, 1, 1)], z.dtype, z.dtype, out=z)
    _finish(rt, u, w, b, z)
    return z


def _gemm_conv_w(x, u, geom, wshape):
    """v = conv_w(x, u): the weight gradient, sum over n and p of u[n, o, p] * col[n, k, p]."""
    rt = x._runtime()
    dt = _dtname(x)
    npdt = _NP[dt]
    isz = np.dtype(npdt).itemsize
    G = geom.G
    N, C = x._shape[0], x._shape[1]
    O = u._shape[1]
    Og, CI = O // G, C // G
    Kg = CI * geom.KS
    P = geom.P
    v = _aligned_empty(wshape, x.dtype, x.device)
    if N == 0 or P == 0:
        from ..elementwise import pointwise as ew
        ew("0", [], x.dtype, x.dtype, out=v, shape=v._shape)
        _finish(rt, v)
        return v
    if pointwise.applies(geom):
        return pointwise.weight_grad(rt, x, u, geom, v, npdt)
    up = u.permute(1, 0, 2, 3, 4).contiguous()     # [O, N, OD, OH, OW]: rows o, columns (n, p)
    idx = _idx_type(_span(x), up.numel() + 1)
    gemm = _gemm()
    tmp = _Tmp(rt)
    nb = _col_chunk(rt, N, C * geom.KS * P * isz)
    col = tmp(nb * G * Kg * P * isz)
    ubuf, vbuf = up._storage.cl_buffer(), v._storage.cl_buffer()
    for n0 in range(0, N, nb):
        m = min(nb, N - n0)
        # colT[g][(n, p)][k]: B = colT is (n*P + p, k) with unit column stride (read in place by the GEMM)
        _im2col(rt, dt, idx, x, n0, m, geom, col, 0, P * Kg, m * P * Kg, 1, Kg)
        for g in range(G):
            gemm(rt, Og, Kg, m * P, (ubuf, up._offset + g * Og * N * P + n0 * P, N * P, 1, 0),
                 (col, g * m * P * Kg, Kg, 1, 0), (vbuf, v._offset + g * Og * Kg, Kg, 1, 0),
                 1.0, 0.0 if n0 == 0 else 1.0, 1, npdt)
    tmp.done()
    _finish(rt, x, u, v)
    return v


