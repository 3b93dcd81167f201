"""How the attention kernels see their operands: batch dims as two levels (b0, h) with one stride each, rows and
elements with theirs, so q, k, v, dO and the mask are read where they are (a transposed view of a fused qkv
projection included) and copied only when their leading batch dims do not collapse to one stride."""
import numpy as np

from ... import _dtype as D
from ..._tensor import Tensor
from ..elementwise import _collapse

__all__ = ["two_level", "operand", "mask_strides", "scratch", "np_ct", "L64"]

L64 = np.int64


def np_ct(ct):
    """The numpy scalar type of a kernel argument of compute dtype ``ct``."""
    return np.float64 if ct is D.float64 else np.float32


def two_level(t, nbatch):
    """(t', sb0, sh): t's batch dims (the first ``nbatch``) as two levels, the last one (h) and the rest
    collapsed (b0). t' is t or a contiguous copy when the leading batch dims do not collapse."""
    shape, st = t._shape, t._stride
    if nbatch == 0:
        return t, 0, 0
    sh = st[nbatch - 1] if shape[nbatch - 1] != 1 else 0
    lead = shape[:nbatch - 1]
    if not lead:
        return t, 0, sh
    cs, (cst,) = _collapse(lead, [st[:nbatch - 1]])
    if len(cs) > 1:
        t = t.contiguous()
        return two_level(t, nbatch)
    return t, (cst[0] if cs else 0), sh


def operand(t, nbatch):
    """(t', [offset, b0 stride, h stride, row stride, element stride]) of a (..., rows, elements) operand, in
    elements; a stride of a dim of size 1 is reported as 0."""
    t2, sb, sh = two_level(t, nbatch)
    sl = t2._stride[-2] if t2._shape[-2] != 1 else 0
    sd = t2._stride[-1] if t2._shape[-1] != 1 else 0
    return t2, [t2._offset, sb, sh, sl, sd]


def mask_strides(mask, cfg, qshape):
    """(mask', m_off, smb, smh, sml, sms) for a mask broadcast to query's batch dims + (L, S)."""
    if mask is None:
        return None, 0, 0, 0, 0, 0
    full = tuple(qshape[:-2]) + (cfg.L, cfg.S)
    m = mask.expand(full) if tuple(mask._shape) != full else mask
    m, smb, smh = two_level(m, cfg.nbatch)
    return m, m._offset, smb, smh, m._stride[-2], m._stride[-1]


def scratch(rt, shape, dt, device):
    """A tensor in a pooled OpenCL buffer of ``rt`` (also for cpu tensors, whose numpy memory is not aligned
    for the kernels' vector loads)."""
    from ..._storage import Storage
    n = 1
    for s in shape:
        n *= s
    nbytes = max(n * dt.itemsize, 1)
    return Tensor._make(Storage(device, dt, n, buf=rt.alloc(nbytes), rt=rt, nbytes=nbytes), shape)
