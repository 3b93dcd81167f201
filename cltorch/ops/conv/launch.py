"""What every convolution algorithm shares when it launches: the ``conv.cl.mako`` kernels (cached per signature),
the index type, pooled temporaries, 64-byte alignment for the GEMM's vector accesses, and the closing wait."""
import numpy as np

from ... import _dtype as D
from ..._tensor import Tensor

_TEMPLATE = "conv.cl.mako"
_INT_MAX = 2 ** 31 - 1

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


def _wstrides(w):
    """(offset, stride over output channels, depth, height, width strides) of a depthwise [C*M, 1, KD, KH, KW]
    weight: the weight arguments of both depthwise designs' kernels."""
    return (w._offset, w._stride[0]) + tuple(w._stride[2:5])


def _bias_args(b, w):
    """(buffer, offset, stride, present) of the bias argument of the depthwise kernels (w stands in for none)."""
    if b is None:
        return (w._storage.cl_buffer(), w._offset, 0, 0)
    return (b._storage.cl_buffer(), b._offset, b._stride[0], 1)


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

