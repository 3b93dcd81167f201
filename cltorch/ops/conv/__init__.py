"""Convolutions: ``conv1d/2d/3d``, ``conv_transpose1d/2d/3d`` (PyTorch's semantics).

Every convolution runs as a 3-d one (``Geom``): a 2-d convolution has depth 1 and a 1-d one depth and height
1, so the ops, kernels and launchers below have one code path for all three ranks.

Three registered ops carry everything, and each one's derivative is written with the other two, so
gradients of any order exist (the "convolution triangle"). With the geometry fixed (stride, top/left
padding, dilation, groups, input and output sizes) and ``<a, b>`` the sum of elementwise products:

* ``conv(x, w, b)``  -> y: the forward convolution (cross-correlation, as PyTorch computes it);
* ``conv_t(u, w, b)`` -> z: its adjoint in ``x`` (``<conv(x, w), u> = <x, conv_t(u, w)>``); this is
  ``conv_transpose2d`` and the gradient of ``conv`` with respect to its input;
* ``conv_w(x, u)``   -> v: its adjoint in ``w`` (``<conv(x, w), u> = <w, conv_w(x, u)>``); the
  gradient of ``conv`` with respect to its weight.

so  d conv = (conv_t(g, w), conv_w(x, g), sum g);  d conv_t = (conv(g, w), conv_w(g, u), sum g);
d conv_w = (conv_t(u, g), conv(x, g)).

Two kernels compute each direction (``cl_kernels/conv.cl.mako``):

* "direct": implicit GEMM with register blocking (no im2col buffer); best for the small channel counts
  of small CNNs on CPU devices.
* "gemm": im2col (or col2im) plus the tuned GEMM of ``cltorch/ops/gemm/``; best when the GEMM
  dimensions are large. The batch is processed in chunks so the column buffer stays below
  ``[conv] col_bytes`` of the device profile.

The choice is made per call by :func:`_algo` (profile keys ``[conv] direct_max_k`` and
``direct_max_co``; 1x1 convolutions with stride 1 and no padding always take "gemm", where their three
directions are plain GEMMs with no im2col: :func:`_pointwise`); ``set_algorithm("direct" | "gemm" | None)``
forces one (tests use it to check both).
Depthwise geometries (groups == in_channels, a small channel multiplier) run their own kernels
(``ops/conv/depthwise.py``) unless an algorithm is forced.
Only float32 and float64 are computed (float16 inputs are computed in float32 and cast back); integer
inputs raise RuntimeError as in PyTorch.
"""
import numpy as np

from ... import _dtype as D
from ..._dispatch import call, register
from ..._tensor import Tensor
from .format import _layout, _out_format, _to_layout

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"]

_TEMPLATE = "conv.cl.mako"
_INT_MAX = 2 ** 31 - 1

_force = [None]


def set_algorithm(name):
    """Force the convolution algorithm: "direct", "gemm", or None (choose per call; depthwise geometries then run
    the depthwise kernels of ``ops/conv/depthwise.py``). Returns the previous."""
    if name not in (None, "direct", "gemm"):
        raise ValueError(f"unknown convolution algorithm {name!r}; expected 'direct', 'gemm' or None")
    prev = _force[0]
    _force[0] = name
    return prev


# ----------------------------------------------------------------------------------------------- geometry
class Geom(tuple):
    """(G, sd, sh, sw, pd, ph, pw, dd, dh, dw, D, H, W, OD, OH, OW, KD, KH, KW): groups, stride,
    front/top/left padding, dilation, the input (x) and output (y) spatial sizes and the kernel size of one
    3-D convolution. 1-d and 2-d convolutions are 3-d ones with depth (and height) 1, so one set of kernels
    and launchers serves all three. Immutable."""

    __slots__ = ()

    def __new__(cls, *vals):
        return tuple.__new__(cls, tuple(int(v) for v in vals))

    @classmethod
    def make(cls, groups, stride, lo_pad, dilation, in_sp, out_sp, ks):
        """From per-dim tuples of 1 to 3 entries (the leading dims of a shorter convolution become size 1)."""
        def lift(t, fill):
            t = tuple(t)
            return (fill,) * (3 - len(t)) + t
        return cls(groups, *lift(stride, 1), *lift(lo_pad, 0), *lift(dilation, 1), *lift(in_sp, 1),
                   *lift(out_sp, 1), *lift(ks, 1))

    G = property(lambda s: s[0])
    D = property(lambda s: s[10])
    H = property(lambda s: s[11])
    W = property(lambda s: s[12])
    OD = property(lambda s: s[13])
    OH = property(lambda s: s[14])
    OW = property(lambda s: s[15])
    KD = property(lambda s: s[16])
    KH = property(lambda s: s[17])
    KW = property(lambda s: s[18])
    in_sp = property(lambda s: s[10:13])
    out_sp = property(lambda s: s[13:16])
    KS = property(lambda s: s[16] * s[17] * s[18])      # taps per channel
    P = property(lambda s: s[13] * s[14] * s[15])       # output positions
    Pin = property(lambda s: s[10] * s[11] * s[12])     # input positions

    def launch_args(self):
        """stride, padding and dilation (9 ints) as every kernel takes them."""
        return self[1:10]

    def sizes(self, transposed=False):
        """(D, H, W, OD, OH, OW, KD, KH, KW) of the kernel reading ``in`` and writing ``out`` (transposed: the
        kernel's input is the convolution's output)."""
        i, o = (self.out_sp, self.in_sp) if transposed else (self.in_sp, self.out_sp)
        return i + o + self[16:19]


def _cdiv(a, b):
    return -(-a // b)


def _round_up(a, b):
    return _cdiv(a, b) * b


# ----------------------------------------------------------------------------------------------- launching
_zero = {}


def _zero_buffer(rt):
    """A 16-byte zero buffer on rt: out-of-range taps of the direct kernels read it."""
    buf = _zero.get(rt.index)
    if buf is None:
        import pyopencl as cl
        buf = rt.alloc(16)
        cl.enqueue_copy(rt.queue, buf, np.zeros(2, np.float64), is_blocking=True)
        _zero[rt.index] = buf
    return buf


_NP = {"float": np.float32, "double": np.float64}


def _kernels(rt, dt, idx, cfg):
    """The conv program's kernels for (dt, idx, vw, nv, mr) (cached by the Runtime)."""
    I = np.int64 if idx == "long" else np.int32
    i32 = np.int32
    params = dict(dt=dt, idx=idx, vw=cfg["vw"], nv=cfg["nv"], mr=cfg["mr"])
    return {
        "prep": lambda: rt.kernel(_TEMPLATE, "conv_prep_w", [None] + [I] * 7 + [None, I, I, i32, None]
                                  + [i32] * 6, **params),
        "direct": lambda: rt.kernel(_TEMPLATE, "conv_direct", [None] + [I] * 6 + [None, None, I, None]
                                    + [i32] * 25, **params),
        "direct_t": lambda: rt.kernel(_TEMPLATE, "conv_direct_t", [None] + [I] * 6 + [None, None, I, None]
                                      + [i32] * 25, **params),
        "im2col": lambda: rt.kernel(_TEMPLATE, "im2col", [None] + [I] * 6 + [None] + [I] * 5 + [i32] * 23,
                                    **params),
        "wgrad": lambda: rt.kernel(_TEMPLATE, "conv_wgrad", [None, I, I, I, None, I, None, I, None, I, I]
                                   + [i32] * 7, **params),
        "col2im": lambda: rt.kernel(_TEMPLATE, "col2im", [None, I, I, I, I, I, None, I] + [i32] * 20, **params),
    }


_kcache = {}


def _kernel(rt, dt, idx, cfg, name):
    key = (rt.index, dt, idx, cfg["vw"], cfg["nv"], cfg["mr"], name)
    k = _kcache.get(key)
    if k is None:
        k = _kcache[key] = _kernels(rt, dt, idx, cfg)[name]()
    return k


def _config(rt, dt, co):
    """Register blocking of the direct kernels: vector width vw, vectors per position nv, positions mr."""
    prof = rt.profile
    vw = int(prof.get_value("conv", "vw_f64" if dt == "double" else "vw", 4 if dt == "double" else 8))
    nv = 1 if co <= vw else int(prof.get_value("conv", "nv", 2))
    mr = int(prof.get_value("conv", "mr", 4))
    return {"vw": vw, "nv": nv, "mr": mr, "lx": int(prof.get_value("conv", "local_size", 16))}


def _span(t):
    """1 + the largest element index t reaches in its storage."""
    return t._offset + sum((s - 1) * st for s, st in zip(t._shape, t._stride) if s > 0) + 1


def _idx_type(*extents):
    return "long" if max(extents) > _INT_MAX else "int"


class _Tmp:
    """Temporary pooled buffers for one launch sequence (released to the accounting when done; the
    in-order queue makes reuse by later enqueues safe)."""

    def __init__(self, rt):
        self.rt, self.n = rt, 0
        self.keep = []

    def __call__(self, nbytes):
        b = self.rt.alloc(nbytes)
        self.n += max(int(nbytes), 1)
        self.keep.append(b)
        return b

    def done(self):
        self.rt.release(self.n)
        self.n = 0
        self.keep = []


def _dtname(t):
    return "double" if t.dtype is D.float64 else "float"


def _finish(rt, *tensors):
    """The wait at the end of an op on cpu tensors, only where memory numpy shares is touched
    (``Runtime.finish_if_exposed``)."""
    if any(t is not None and t._storage.host is not None for t in tensors):
        rt.finish_if_exposed()


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
    rt.launch(k, (_round_up(nb, lx), ncb, _round_up(NG, lz)), (lx, 1, lz),
              x._storage.cl_buffer(), x._offset, *x._stride, wt, y._storage.cl_buffer(), y._offset,
              _zero_buffer(rt), G, CI, CO, *sizes, *geom.launch_args(), Opad, nb, ncb, N * G)
    tmp.done()
    _finish(rt, x, w, b, y)
    return y


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
    ls = max(1, min(int(rt.profile.get_value("conv", "im2col_local", 64)), n))
    rt.launch(k, (_round_up(n, ls),), (ls,), x._storage.cl_buffer(), x._offset + n0 * sn,
              *x._stride, col, c_off, c_sn, c_sg, c_sk, c_sp, G, CI, *geom.sizes(), *geom.launch_args(), Kp,
              int(ones), nb * G)


_GEMM_CFG = {"vw": 1, "nv": 1, "mr": 1}


def _gemm():
    """The GEMM launcher, called under the runtime's lock: a GEMM plan sets arguments on shared Kernel objects,
    so two threads must not interleave their launches."""
    from .. import gemm as G

    def locked(rt, *args, **kw):
        with rt.lock:
            G.gemm(rt, *args, **kw)
            rt.pending = True
    return locked


# The GEMM's vector loads and stores assume operands whose element offsets are multiples of the vector
# width are vector-aligned in memory. Pooled device buffers are; a numpy array behind a cpu tensor may
# be only 16-byte aligned (PoCL then faults on aligned AVX moves). So GEMM outputs on cpu are allocated
# 64-byte aligned here, and cpu operands the GEMM may read with vector loads are copied when misaligned.
_ALIGN = 64


def _aligned_empty(shape, dtype, device):
    if device.type != "cpu":
        return Tensor._empty(shape, dtype, device)
    from ..._storage import Storage
    n = 1
    for s in shape:
        n *= s
    isz = dtype.itemsize
    raw = np.empty(n + _ALIGN // isz, dtype.np)
    off = ((-raw.ctypes.data) % _ALIGN) // isz
    return Tensor._make(Storage.from_host(raw[off:off + n], device), shape)


def _aligned(t):
    """t itself when it is on a device or its host memory is 64-byte aligned, else an aligned copy."""
    h = t._storage.host
    if h is None or h.ctypes.data % _ALIGN == 0:
        return t
    from ..elementwise import pointwise
    return pointwise("x0", [t], t.dtype, t.dtype, out=_aligned_empty(t._shape, t.dtype, t.device))


def _spatial_contiguous(t):
    """True when t's spatial dims (2, 3, 4) are laid out contiguously (unit-size dims' strides don't matter)."""
    st = t._stride
    want = 1
    for d in (4, 3, 2):
        if t._shape[d] != 1 and st[d] != want:
            return False
        want *= t._shape[d]
    return True


def _contig_w(w):
    return w if w.is_contiguous() else w.contiguous()


def _pointwise(geom):
    """A 1x1 convolution (one tap, stride 1, no padding): on the NCHW layout its three directions are plain GEMMs
    over the positions, y[n] = W x[n], z[n] = W^T u[n], v = sum_n u[n] x[n]^T, with no im2col or col2im."""
    return geom.KS == 1 and geom.launch_args()[:6] == (1, 1, 1, 0, 0, 0)


def _gemm_conv(x, w, b, geom):
    """y = conv(x, w) + b through im2col and the GEMM."""
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
    y = _aligned_empty((N, O) + geom.out_sp, x.dtype, x.device)
    w = _contig_w(w)
    if b is not None:
        from ..elementwise import pointwise
        pointwise("x0", [b.reshape(1, O, 1, 1, 1)], x.dtype, x.dtype, out=y, shape=y._shape)
    beta = 1.0 if b is not None else 0.0
    idx = _idx_type(_span(x), y.numel() + 1)
    gemm = _gemm()
    sn, sc = x._stride[:2]
    pointwise_1x1 = _pointwise(geom) and _spatial_contiguous(x)
    if pointwise_1x1:
        x = _aligned(x)
        sn, sc = x._stride[:2]
    # buffers fetched after any nested op (the copy above may wait for the queue, ending earlier fetches' hold)
    ybuf, wbuf = y._storage.cl_buffer(), w._storage.cl_buffer()
    tmp = _Tmp(rt)
    if pointwise_1x1:
        xbuf = x._storage.cl_buffer()
        for g in range(G):
            gemm(rt, Og, P, Kg, (wbuf, w._offset + g * Og * Kg, Kg, 1, 0),
                 (xbuf, x._offset + g * CI * sc, sc, 1, sn),
                 (ybuf, y._offset + g * Og * P, P, 1, O * P), 1.0, beta, N, npdt)
    else:
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
    """z = conv_t(u, w) + b through the GEMM (columns = W^T u) and col2im."""
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
    if _pointwise(geom):        # z[n, g] = W_g^T u[n, g]: A = W_g^T read through its strides, batched over n
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
        rt.launch(k, (_round_up(HW, lx), G * Cg, m), (lx, 1, 1), col, 0, G * Kg * P, Kg * P, P, 1,
                  zbuf, z._offset + n0 * G * Cg * HW, G, Cg, *geom.sizes(), *geom.launch_args())
    tmp.done()
    if b is not None:
        from ..elementwise import pointwise
        pointwise("x0 + x1", [z, b.reshape(1, -1, 1, 1, 1)], z.dtype, z.dtype, out=z)
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
        from ..elementwise import pointwise
        pointwise("0", [], x.dtype, x.dtype, out=v, shape=v._shape)
        _finish(rt, v)
        return v
    if _pointwise(geom):
        return _pointwise_conv_w(rt, x, u, geom, v, npdt)
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


def _pointwise_conv_w(rt, x, u, geom, v, npdt):
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
    vw = int(prof.get_value("conv", "vw_f64" if dt == "double" else "vw", 4 if dt == "double" else 8))
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
        rt.launch(k, (Kp // NR, _cdiv(Og, cfg["mr"]), G), (1, 1, 1), u._storage.cl_buffer(), u._offset + n0 * us[0],
                  us[0], us[1], col, m * P * Kp, v._storage.cl_buffer(), v._offset, bt._storage.cl_buffer(),
                  bt._offset, 1, int(with_bias), m, P, Og, Kg, Kp, int(n0 > 0))
    tmp.done()
    _finish(rt, x, u, v)
    return v, gb


def _depthwise(rt, geom, cin_per_group, cout_per_group):
    """Whether a convolution runs the depthwise kernels (``ops/conv/depthwise.py``): no algorithm forced and a
    depthwise geometry (groups > 1, one input channel per group, a small channel multiplier)."""
    if _force[0] is not None:
        return False
    from .depthwise import eligible
    return eligible(rt, geom, cin_per_group, cout_per_group)


def _algo(rt, cin, cout, geom):
    """"direct" or "gemm" for a convolution whose GEMM has K = cin*KH*KW and cout output channels."""
    if _force[0] is not None:
        return _force[0]
    prof = rt.profile
    if prof.get_value("gemm", "local", 0) or _pointwise(geom):      # GPUs: local-memory GEMM tiles
        return "gemm"
    kmax = int(prof.get_value("conv", "direct_max_k", 1024))
    comax = int(prof.get_value("conv", "direct_max_co", 128))
    if cin * geom.KS <= kmax and cout <= comax:
        return "direct"
    return "gemm"


# ----------------------------------------------------------------------------------------------- dtype glue
def _compute(fn, *ts):
    """Run fn on float32/float64 tensors; float16 goes through float32 and comes back."""
    half = any(t is not None and t.dtype is D.float16 for t in ts)
    if half:
        ts = tuple(None if t is None else t.float() for t in ts)
        return fn(*ts).half()
    return fn(*ts)


def _empty_out(shape, like):
    from ..elementwise import pointwise
    t = Tensor._empty(shape, like.dtype, like.device)
    if t.numel():
        pointwise("0", [], like.dtype, like.dtype, out=t, shape=t._shape)
    return t


def run_conv(x, w, b, geom):
    N, O = x._shape[0], w._shape[0]
    shape = (N, O) + geom.out_sp
    if N == 0 or O == 0 or geom.P == 0:
        return Tensor._empty(shape, x.dtype, x.device)
    if x._shape[1] == 0:
        y = _empty_out(shape, x)
        return y if b is None else y + b.reshape(1, O, 1, 1, 1)

    def f(x, w, b):
        rt = x._runtime()
        if _depthwise(rt, geom, w._shape[1], O // geom.G):
            from .depthwise import forward
            return forward(x, w, b, geom)
        if _algo(rt, x._shape[1] // geom.G, O // geom.G, geom) == "direct":
            return _direct(x, w, b, geom, False, shape)
        return _gemm_conv(x, w, b, geom)
    return _compute(f, x, w, b)


def run_conv_t(u, w, b, geom):
    N, O, Cg = u._shape[0], w._shape[0], w._shape[1]
    shape = (N, geom.G * Cg) + geom.in_sp
    if N == 0 or Cg == 0 or geom.Pin == 0:
        return Tensor._empty(shape, u.dtype, u.device)
    if O == 0 or geom.P == 0:
        z = _empty_out(shape, u)
        return z if b is None else z + b.reshape(1, -1, 1, 1, 1)

    def f(u, w, b):
        rt = u._runtime()
        if _depthwise(rt, geom, Cg, O // geom.G):
            from .depthwise import transposed
            return transposed(u, w, b, geom)
        if _algo(rt, O // geom.G, Cg, geom) == "direct":
            return _direct(u, w, b, geom, True, shape)
        return _gemm_conv_t(u, w, b, geom)
    return _compute(f, u, w, b)


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


def run_conv_w(x, u, geom, wshape, with_bias=False):
    """The weight gradient v (and, with_bias, the bias gradient sum of u over n, h, w): (v, gb or None)."""
    O = u._shape[1]
    if any(s == 0 for s in wshape) or x._shape[0] == 0 or geom.P == 0:
        v = Tensor._empty(wshape, x.dtype, x.device) if any(s == 0 for s in wshape) else _empty_out(wshape, x)
        return v, (_empty_out((O,), x) if with_bias else None)

    def f(x, u):
        if _depthwise(x._runtime(), geom, wshape[1], O // geom.G):
            from .depthwise import weight_grad
            v, gb = weight_grad(x, u, geom, wshape, with_bias)
            return v if gb is None else (v, gb)
        if _algo(x._runtime(), x._shape[1] // geom.G, O // geom.G, geom) == "direct":
            if _wgrad_as_conv_pays(x, u, geom):
                v = _wgrad_as_conv(x, u, geom, wshape)
                return v if not with_bias else (v, u.sum((0, 2, 3, 4)))
            v, gb = _direct_conv_w(x, u, geom, wshape, with_bias)
            return v if gb is None else (v, gb)
        v = _gemm_conv_w(x, u, geom, wshape)
        return v if not with_bias else (v, u.sum((0, 2, 3, 4)))

    half = x.dtype is D.float16
    out = f(x.float(), u.float()) if half else f(x, u)
    if not isinstance(out, tuple):
        out = (out, None)
    if half:
        out = tuple(None if t is None else t.half() for t in out)
    return out


# ----------------------------------------------------------------------------------------------- the ops
def _conv_fwd(ctx, x, w, b, geom):
    y = run_conv(x, w, b, geom)
    if ctx is not None:
        ctx.save_for_backward(x, w)
        ctx.geom = geom
        ctx.fmts = (_layout(x), _layout(w))
    return y


def _conv_bwd(ctx, g):
    x, w = ctx.saved_tensors
    need = ctx.needs_input_grad
    geom = ctx.geom
    gx = call(_conv_t_op, g, w, None, geom) if need[0] else None
    need_b = len(need) > 2 and need[2]
    gw = gb = None
    if need[1] and need_b:
        gw, gb = call(_conv_wb_op, x, g, geom, tuple(w._shape))
    elif need[1]:
        gw = call(_conv_w_op, x, g, geom, tuple(w._shape))
    elif need_b:
        gb = g.sum((0, 2, 3, 4))
    fx, fw = getattr(ctx, "fmts", (None, None))
    return _to_layout(gx, fx), _to_layout(gw, fw), gb, None


def _conv_t_fwd(ctx, u, w, b, geom):
    z = run_conv_t(u, w, b, geom)
    if ctx is not None:
        ctx.save_for_backward(u, w)
        ctx.geom = geom
        ctx.fmts = (_layout(u), _layout(w))
    return z


def _conv_t_bwd(ctx, g):
    u, w = ctx.saved_tensors
    need = ctx.needs_input_grad
    geom = ctx.geom
    gu = call(_conv_op, g, w, None, geom) if need[0] else None
    gw = call(_conv_w_op, g, u, geom, tuple(w._shape)) if need[1] else None
    gb = g.sum((0, 2, 3, 4)) if len(need) > 2 and need[2] else None
    fu, fw = getattr(ctx, "fmts", (None, None))
    return _to_layout(gu, fu), _to_layout(gw, fw), gb, None


def _conv_w_fwd(ctx, x, u, geom, wshape):
    v, _ = run_conv_w(x, u, geom, wshape)
    if ctx is not None:
        ctx.save_for_backward(x, u)
        ctx.geom = geom
    return v


def _conv_w_bwd(ctx, g):
    x, u = ctx.saved_tensors
    need = ctx.needs_input_grad
    gx = call(_conv_t_op, u, g, None, ctx.geom) if need[0] else None
    gu = call(_conv_op, x, g, None, ctx.geom) if need[1] else None
    return gx, gu, None, None


def _conv_wb_fwd(ctx, x, u, geom, wshape):
    """(weight gradient, bias gradient) in one pass: the bias gradient is the sum of u over n, h, w."""
    out = run_conv_w(x, u, geom, wshape, True)
    if ctx is not None:
        ctx.save_for_backward(x, u)
        ctx.geom = geom
        ctx.ushape = u._shape
    return out


def _conv_wb_bwd(ctx, gv, gb):
    x, u = ctx.saved_tensors
    need = ctx.needs_input_grad
    gx = call(_conv_t_op, u, gv, None, ctx.geom) if gv is not None and need[0] else None
    gu = None
    if need[1]:
        if gv is not None:
            gu = call(_conv_op, x, gv, gb, ctx.geom)
        elif gb is not None:
            gu = gb.reshape(1, -1, 1, 1, 1).expand(*ctx.ushape)
    return gx, gu, None, None


_conv_op = register("convolution", _conv_fwd, _conv_bwd)
_conv_t_op = register("convolution_transpose", _conv_t_fwd, _conv_t_bwd)
_conv_w_op = register("convolution_weight", _conv_w_fwd, _conv_w_bwd)
_conv_wb_op = register("convolution_weight_bias", _conv_wb_fwd, _conv_wb_bwd)


# ----------------------------------------------------------------------------------------------- arguments
def _tuple(v, n, name):
    if isinstance(v, Tensor):
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        if len(v) == 1:
            v = tuple(v) * n
        if len(v) != n:
            raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} values to match "
                               f"the convolution dimensions, but got {name}={list(v)}")
        return tuple(int(a) for a in v)
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} must be an int or a tuple of ints, got {type(v).__name__}")
    return (int(v),) * n


def _check_inputs(name, x, w, b, nd):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(x).__name__}")
    if not isinstance(w, Tensor):
        raise TypeError(f"{name}(): argument 'weight' must be Tensor, not {type(w).__name__}")
    if b is not None and not isinstance(b, Tensor):
        raise TypeError(f"{name}(): argument 'bias' must be Tensor, not {type(b).__name__}")
    if x.dim() not in (nd + 1, nd + 2):
        raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to {name}, but got "
                           f"input of size: {list(x.shape)}")
    if w.dim() != nd + 2:
        raise RuntimeError(f"weight should have {nd + 2} dimensions for {name}, but got weight of size "
                           f"{list(w.shape)}")
    from ..elementwise import common_device
    common_device([t for t in (x, w, b) if t is not None])
    for t in (x, w, b):
        if t is not None and t.device != x.device:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"{x.device} and {t.device}!")
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"\"{name}\" not implemented for '{x.dtype.name.capitalize()}'")
    if w.dtype is not x.dtype:
        raise RuntimeError(f"Input type ({x.dtype.name}) and weight type ({w.dtype.name}) should be the same")
    if b is not None:
        if b.dtype is not x.dtype:
            raise RuntimeError(f"Input type ({x.dtype.name}) and bias type ({b.dtype.name}) should be the same")


def _lift(t, nd):
    """(N, C, *spatial[nd]) -> (N, C, 1.., *spatial): every convolution op works on 3 spatial dims."""
    for _ in range(3 - nd):
        t = t.unsqueeze(2)
    return t


def _unlift(t, nd):
    for _ in range(3 - nd):
        t = t.squeeze(2)
    return t


def _conv_nd(name, x, w, b, stride, padding, dilation, groups, nd):
    """conv1d/2d/3d: validate like PyTorch, lift to 3 spatial dims, run the convolution op."""
    _check_inputs(name, x, w, b, nd)
    unbatched = x.dim() == nd + 1
    if unbatched:
        x = x.unsqueeze(0)
    groups = int(groups)
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    stride = _tuple(stride, nd, "stride")
    dilation = _tuple(dilation, nd, "dilation")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("dilation should be greater than zero")
    ks = tuple(w.shape[2:])
    O = w.shape[0]
    C = x.shape[1]
    if O % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
                           f"but got weight of size {list(w.shape)} instead")
    if C != w.shape[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(w.shape)}, expected input"
                           f"{list(x.shape)} to have {w.shape[1] * groups} channels, but got {C} channels instead")
    if b is not None and (b.dim() != 1 or b.shape[0] != O):
        raise RuntimeError(f"Given weight of size {list(w.shape)}, expected bias to be 1-dimensional with {O} "
                           f"elements, but got bias of size {list(b.shape)} instead")
    eff = tuple(d * (k - 1) + 1 for d, k in zip(dilation, ks))
    if isinstance(padding, str):
        if padding == "valid":
            lo = hi = (0,) * nd
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            tot = tuple(e - 1 for e in eff)
            lo = tuple(t // 2 for t in tot)
            hi = tuple(t - l for t, l in zip(tot, lo))
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    else:
        lo = hi = _tuple(padding, nd, "padding")
        if any(p < 0 for p in lo):
            raise RuntimeError("negative padding is not supported")
    spatial = tuple(x.shape[2:])
    padded = tuple(s + a + c for s, a, c in zip(spatial, lo, hi))
    if any(p < e for p, e in zip(padded, eff)):
        raise RuntimeError(f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). Kernel "
                           f"size: ({' x '.join(map(str, eff))}). Kernel size can't be greater than actual input "
                           "size")
    out = tuple((p - e) // s + 1 for p, e, s in zip(padded, eff, stride))
    geom = Geom.make(groups, stride, lo, dilation, spatial, out, ks)
    y = _out_format(_unlift(call(_conv_op, _lift(x, nd), _lift(w, nd), b, geom), nd), x, w, nd)
    return y.squeeze(0) if unbatched else y


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """2-D convolution (cross-correlation) as ``torch.nn.functional.conv2d``.

    input: ``(N, C, H, W)`` or unbatched ``(C, H, W)``; weight: ``(O, C/groups, kH, kW)``; bias: ``(O,)``
    or None. stride, dilation: int or pair; padding: int, pair, ``'valid'`` or ``'same'`` (the odd extra
    pad of an even effective kernel goes at the bottom/right; ``'same'`` with stride > 1 raises
    RuntimeError). Output ``(N, O, OH, OW)``, ``OH = (H + 2*pH - dH*(kH-1) - 1) // sH + 1``.
    dtypes: float32 and float64 (float16 is computed in float32); all operands must share dtype and
    device. Raises RuntimeError on bad ranks, channel/group mismatches, non-positive stride or dilation,
    negative padding, or a kernel larger than the padded input. Differentiable to any order.
    """
    return _conv_nd("conv2d", input, weight, bias, stride, padding, dilation, groups, 2)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """1-D convolution as ``torch.nn.functional.conv1d``: input ``(N, C, L)`` or ``(C, L)``, weight
    ``(O, C/groups, k)``; padding int, 1-tuple, ``'valid'`` or ``'same'``. Computed as a 2-D convolution
    with height 1; see :func:`conv2d` for dtypes and errors."""
    return _conv_nd("conv1d", input, weight, bias, stride, padding, dilation, groups, 1)


def _conv_t_nd(name, x, w, b, stride, padding, output_padding, groups, dilation, nd):
    _check_inputs(name, x, w, b, nd)
    unbatched = x.dim() == nd + 1
    if unbatched:
        x = x.unsqueeze(0)
    groups = int(groups)
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if isinstance(padding, str):
        raise TypeError(f"{name}(): argument 'padding' must be tuple of ints, not str")
    stride = _tuple(stride, nd, "stride")
    padding = _tuple(padding, nd, "padding")
    output_padding = _tuple(output_padding, nd, "output_padding")
    dilation = _tuple(dilation, nd, "dilation")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        raise RuntimeError("dilation should be greater than zero")
    if any(p < 0 for p in padding):
        raise RuntimeError("negative padding is not supported")
    if any(p < 0 for p in output_padding):
        raise RuntimeError("negative output_padding is not supported")
    for op, s, d in zip(output_padding, stride, dilation):
        if op >= s and op >= d:
            raise RuntimeError("output padding must be smaller than either stride or dilation, but got "
                               f"output_padding={list(output_padding)}, stride={list(stride)}, "
                               f"dilation={list(dilation)}")
    Cin = x.shape[1]
    if w.shape[0] != Cin:
        raise RuntimeError(f"Given transposed=1, weight of size {list(w.shape)}, expected input {list(x.shape)} "
                           f"to have {w.shape[0]} channels, but got {Cin} channels instead")
    if Cin % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
                           f"but got weight of size {list(w.shape)} instead")
    Cout = w.shape[1] * groups
    if b is not None and (b.dim() != 1 or b.shape[0] != Cout):
        raise RuntimeError(f"Given transposed=1, weight of size {list(w.shape)}, expected bias to be "
                           f"1-dimensional with {Cout} elements, but got bias of size {list(b.shape)} instead")
    ks = tuple(w.shape[2:])
    spatial = tuple(x.shape[2:])
    out = tuple((i - 1) * s - 2 * p + d * (k - 1) + op + 1
                for i, s, p, d, k, op in zip(spatial, stride, padding, dilation, ks, output_padding))
    if any(o <= 0 for o in out):
        raise RuntimeError(f"Given input size per channel: ({' x '.join(map(str, spatial))}). Calculated output "
                           f"size per channel: ({' x '.join(map(str, out))}). Output size is too small")
    geom = Geom.make(groups, stride, padding, dilation, out, spatial, ks)
    z = _out_format(_unlift(call(_conv_t_op, _lift(x, nd), _lift(w, nd), b, geom), nd), x, w, nd)
    return z.squeeze(0) if unbatched else z


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,  # noqa: A002
                     dilation=1):
    """Transposed 2-D convolution as ``torch.nn.functional.conv_transpose2d`` (the adjoint of conv2d in
    its input).

    input ``(N, Cin, H, W)`` or ``(Cin, H, W)``; weight ``(Cin, Cout/groups, kH, kW)``; bias ``(Cout,)``.
    Output size ``(H - 1)*sH - 2*pH + dH*(kH - 1) + output_padding + 1``; output_padding must be smaller
    than the stride or the dilation (RuntimeError otherwise). dtypes as :func:`conv2d`.
    """
    return _conv_t_nd("conv_transpose2d", input, weight, bias, stride, padding, output_padding, groups, dilation,
                      2)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,  # noqa: A002
                     dilation=1):
    """Transposed 1-D convolution as ``torch.nn.functional.conv_transpose1d``; see conv_transpose2d."""
    return _conv_t_nd("conv_transpose1d", input, weight, bias, stride, padding, output_padding, groups, dilation,
                      1)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """3-D convolution as ``torch.nn.functional.conv3d``.

    input ``(N, C, D, H, W)`` or unbatched ``(C, D, H, W)``; weight ``(O, C/groups, kD, kH, kW)``; bias
    ``(O,)`` or None; stride, dilation: int or triple; padding int, triple, ``'valid'`` or ``'same'``. Output
    ``(N, O, OD, OH, OW)`` with each size as in :func:`conv2d`. The same kernels as conv2d (implicit GEMM, or
    im2col with one more spatial dim plus the tuned GEMM). dtypes and errors as :func:`conv2d`.
    """
    return _conv_nd("conv3d", input, weight, bias, stride, padding, dilation, groups, 3)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,  # noqa: A002
                     dilation=1):
    """Transposed 3-D convolution as ``torch.nn.functional.conv_transpose3d``: input ``(N, Cin, D, H, W)`` or
    ``(Cin, D, H, W)``, weight ``(Cin, Cout/groups, kD, kH, kW)``; sizes and errors as conv_transpose2d."""
    return _conv_t_nd("conv_transpose3d", input, weight, bias, stride, padding, output_padding, groups, dilation,
                      3)
