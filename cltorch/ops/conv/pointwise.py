"""1x1 convolutions (one tap, stride 1, no padding): on the NC(D)HW layout their three directions are plain GEMMs
over the positions, y[n] = W x[n], z[n] = W^T u[n], v = sum_n u[n] x[n]^T, with no im2col or col2im (the GEMM of
``cltorch/ops/gemm/`` batched over the images)."""
from .launch import _aligned, _aligned_empty, _contig_w, _finish, _gemm, _NP, _dtname, _spatial_contiguous


def applies(geom):
    """Whether ``geom`` is a 1x1 convolution: one tap, stride 1, no padding (dilation is then irrelevant)."""
    return geom.KS == 1 and geom.launch_args()[:6] == (1, 1, 1, 0, 0, 0)


def forward(x, w, b, geom, y):
    """y = conv(x, w) (+ b, already in y: the GEMMs add with beta = 1) for x with spatially contiguous dims: one GEMM
    per group batched over the images. y: the [N, O, ...] output from the caller, 64-byte aligned on cpu."""
    rt = x._runtime()
    npdt = _NP[_dtname(x)]
    G = geom.G
    N, C = x._shape[0], x._shape[1]
    O = w._shape[0]
    Og, CI = O // G, C // G
    Kg = CI
    P = geom.P
    w = _contig_w(w)
    beta = 1.0 if b is not None else 0.0
    gemm = _gemm()
    x = _aligned(x)
    sn, sc = x._stride[:2]
    # buffers fetched after any nested op (the copy above may wait for the queue, ending earlier fetches' hold)
    ybuf, wbuf, xbuf = y._storage.cl_buffer(), w._storage.cl_buffer(), x._storage.cl_buffer()
    for g in range(G):
        gemm(rt, Og, P, Kg, (wbuf, w._offset + g * Og * Kg, Kg, 1, 0),
             (xbuf, x._offset + g * CI * sc, sc, 1, sn),
             (ybuf, y._offset + g * Og * P, P, 1, O * P), 1.0, beta, N, npdt)
    _finish(rt, x, w, b, y)
    return y


def transposed(u, w, b, geom):
    """z = conv_t(u, w) + b: z[n, g] = W_g^T u[n, g], A = W_g^T read through its strides, batched over n."""
    rt = u._runtime()
    npdt = _NP[_dtname(u)]
    G = geom.G
    N, O = u._shape[0], u._shape[1]
    Cg = w._shape[1]
    Og = O // G
    Kg = Cg
    P = geom.P
    w = _contig_w(w)
    if not _spatial_contiguous(u):
        u = u.contiguous()
    u = _aligned(u)
    us = u._stride
    gemm = _gemm()
    z = _aligned_empty((N, G * Cg) + geom.in_sp, u.dtype, u.device)
    if b is not None:
        from ..elementwise import pointwise
        pointwise("x0", [b.reshape(1, -1, 1, 1, 1)], z.dtype, z.dtype, out=z, shape=z._shape)
    ubuf, wbuf, zbuf = u._storage.cl_buffer(), w._storage.cl_buffer(), z._storage.cl_buffer()
    for g in range(G):
        gemm(rt, Cg, P, Og, (wbuf, w._offset + g * Og * Kg, 1, Kg, 0),
             (ubuf, u._offset + g * Og * us[1], us[1], 1, us[0]),
             (zbuf, z._offset + g * Cg * P, P, 1, G * Cg * P), 1.0, 0.0 if b is None else 1.0, N, npdt)
    _finish(rt, u, w, b, z)
    return z


def weight_grad(rt, x, u, geom, v, npdt):
    """v = conv_w(x, u) of a 1x1 convolution: part[n, g] = u[n, g] x[n, g]^T (one GEMM batched over the images,
    K = the positions; x^T is packed by the GEMM), then v = the sum of part over n (the reduction's fixed order).
    v: the aligned [O, C/G, 1, 1, 1] output, filled when N == 1; returns the weight gradient (shaped as v)."""
    G = geom.G
    N, C = x._shape[0], x._shape[1]
    O = u._shape[1]
    Og, CI = O // G, C // G
    P = geom.P
    if not _spatial_contiguous(x):
        x = x.contiguous()
    if not _spatial_contiguous(u):
        u = u.contiguous()
    x, u = _aligned(x), _aligned(u)
    xs, us = x._stride, u._stride
    gemm = _gemm()
    part = v if N == 1 else _aligned_empty((N, O, CI), x.dtype, x.device)
    xbuf, ubuf, pbuf = x._storage.cl_buffer(), u._storage.cl_buffer(), part._storage.cl_buffer()
    for g in range(G):
        gemm(rt, Og, CI, P, (ubuf, u._offset + g * Og * us[1], us[1], 1, us[0]),
             (xbuf, x._offset + g * CI * xs[1], 1, xs[1], xs[0]),
             (pbuf, part._offset + g * Og * CI, CI, 1, O * CI), 1.0, 0.0, N, npdt)
    if N > 1:
        from ..reduction import reduce
        v = reduce(part, (0,), name="sum").reshape(v._shape)
    _finish(rt, x, u, v)
    return v

