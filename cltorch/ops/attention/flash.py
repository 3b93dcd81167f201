"""The GPU design of fused attention, forward (``cl_kernels/sdpa_flash.cl.mako``, kind "fwd"): FlashAttention-2's
partitioning (Tri Dao, "FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning", 2023)
in OpenCL work-groups.

A work-group per (batch*head, block of queries), all in dimension 0 of the launch (NVIDIA allows 65,535
work-groups in dimensions 1 and 2); the query block sits in local memory, key and value blocks are staged into
local memory straight from their own strides (any layout, e.g. the transposed views of a fused qkv projection: no
pack kernel) with 4-vector loads where the layout allows, each work-item computes a register tile of the scores
and of the output, with the online softmax's row max exchanged through local memory. Causal blocks skip the keys
past their last row, and run longest first. Tiles come from ``plan.flash_plan``. The launch helpers here
(:func:`tparams`, :func:`vec_ok`, :func:`enqueue`) serve the backward too (``flash_backward.py``).
"""
import math

from ..._tensor import Tensor
from ...backend import geometry
from ..softmax import kernel, is_host, types_of
from .dropout import drop_args, drop_types
from .layout import L64 as _L, operand, mask_strides, np_ct
from .plan import flash_plan, compute_dtype

__all__ = ["forward", "tparams", "vec_ok", "enqueue", "TEMPLATE", "LOG2E"]

TEMPLATE = "sdpa_flash.cl.mako"
LOG2E = 1.0 / math.log(2.0)
_NO_TILES = dict(TM=0, TN=0, RM=0, RN=0, TK=0, TQ=0, RK=0, RQ=0)


def tparams(kind, dt, ct, cfg, plan=None, vec=False):
    """The template parameters of one flash kernel (``kind``) for storage dtype ``dt``, compute dtype ``ct``."""
    mt = "uchar" if cfg.mask_kind == "bool" else dt.cl
    p = dict(_NO_TILES, kind=kind, T=dt.cl, CT=ct.cl, E=cfg.E, EV=cfg.EV, mask=cfg.mask_kind, MT=mt,
             causal=bool(cfg.causal), dropout=cfg.dropout is not None, vec=bool(vec), types=types_of(dt, ct))
    if kind == "dlt":        # rowsum(dO * O) reads neither the mask nor q/k: one program per (dtype, Ev, vec)
        p.update(E=cfg.EV, mask="none", MT=dt.cl, causal=False, dropout=False)
    if plan is not None:
        p.update(plan.params())
    return p


def vec_ok(operands):
    """Whether every (tensor, [offset, b0, h, row, element strides], head dim) operand can be staged with aligned
    4-vector loads: device memory, contiguous along a head dim that is a multiple of 4, every other stride and the
    offset multiples of 4 elements."""
    for t, (off, sb, sh, sl, sd), dim in operands:
        if dim % 4 or t._storage.host is not None or sd != 1:
            return False
        if off % 4 or sb % 4 or sh % 4 or sl % 4:
            return False
    return True


def enqueue(rt, k, groups, wg, args, host):
    """Launch ``groups`` work-groups of ``wg`` work-items (the kernel's required size) in dimension 0, sized by
    ``backend.geometry`` (LaunchError when the device or the kernel cannot take ``wg``)."""
    if groups <= 0:
        return
    gs, ls = geometry.nd(rt, (groups * wg,), (wg,), k)
    if ls != (wg,):
        raise geometry.LaunchError(f"kernel '{k.function_name}' needs work-groups of {wg} work-items; cl:{rt.index} "
                                   f"allows {ls[0]} for it (CL_KERNEL_WORK_GROUP_SIZE or the profile's [limits])")
    rt.launch(k, gs, ls, *args)
    if host:
        rt.finish_if_exposed()


_OPND_TYPES = [None] + [_L] * 5
_MASK_TYPES = [None] + [_L] * 5


def mask_args(m2, placeholder, m_off, smb, smh, sml, sms):
    """The mask's kernel arguments (a placeholder buffer when there is no mask); fetch right at the launch."""
    return [(m2 if m2 is not None else placeholder)._storage.cl_buffer(), m_off, smb, smh, sml, sms]


def forward(q, k, v, mask, cfg):
    """(out, lse): attention of q (..., L, E), k (..., S, E), v (..., S, EV) under ``cfg``; out (..., L, EV) in
    q's dtype, lse (B0*H, L) the natural logsumexp of each row's scores (-inf for a row with no key) in the
    compute dtype (float32, or float64 for float64)."""
    dt = q.dtype
    ct = compute_dtype(dt)
    rt = q._runtime()
    BH = cfg.B0 * cfg.H
    out = Tensor._empty(tuple(q._shape[:-1]) + (cfg.EV,), dt, q.device)
    lse = Tensor._empty((BH, cfg.L), ct, q.device)
    if BH * cfg.L == 0:
        return out, lse
    if cfg.S == 0:                      # no keys: every row is fully masked
        out.zero_()
        lse.fill_(float("-inf"))
        return out, lse
    plan = flash_plan(rt, cfg, "fwd", ct)
    q2, qs = operand(q, cfg.nbatch)
    k2, ks = operand(k, cfg.nbatch)
    v2, vs = operand(v, cfg.nbatch)
    vec = vec_ok([(q2, qs, cfg.E), (k2, ks, cfg.E), (v2, vs, cfg.EV)])
    m2, *mst = mask_strides(mask, cfg, q._shape)
    nqb = -(-cfg.L // plan.block_rows)
    nct = np_ct(ct)
    kk = kernel(rt, TEMPLATE, plan.name, [None, None] + _OPND_TYPES * 3 + _MASK_TYPES + [_L] * 5 + [nct]
                + drop_types(nct, cfg), **tparams("fwd", dt, ct, cfg, plan, vec))
    args = [out._storage.cl_buffer(), lse._storage.cl_buffer(), q2._storage.cl_buffer(), *qs,
            k2._storage.cl_buffer(), *ks, v2._storage.cl_buffer(), *vs, *mask_args(m2, q2, *mst),
            cfg.L, cfg.S, cfg.H, cfg.Hk, nqb, nct(cfg.scale * LOG2E), *drop_args(nct, cfg)]
    enqueue(rt, kk, BH * nqb, plan.wg, args, is_host(q2, k2, v2, out))
    return out, lse
