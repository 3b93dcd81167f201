"""The GPU design of fused attention, backward (``cl_kernels/sdpa_flash.cl.mako``, kinds "dlt", "dq", "dkv"):
FlashAttention-2's backward (Tri Dao, 2023) without atomics, so every gradient element is summed by one
work-item in a fixed order.

1. ``sdpa_flash_dlt``: Dlt = rowsum(dO * O) per query row (one work-item per row).
2. ``sdpa_flash_dq``: a work-group per (batch*head, block of queries), looping over the key blocks: S and
   dP = dO V^T recomputed in registers, P = exp(S - LSE), dS = P * (dP - Dlt) through local memory into
   dQ += dS K * scale.
3. ``sdpa_flash_dkv``: a work-group per (batch*kv head, block of keys), K and V in local memory, looping over the
   query heads that share the kv head (GQA) and their query blocks: dV += P^T dO, dK += dS^T Q * scale, the
   accumulators spread over the work-group's work-items.

dQ could be added into by the dK/dV groups with float atomics (FlashAttention-2 does); the second pass, which
recomputes S and dP, keeps the result deterministic and the kernels free of atomics for 7 matrix products
instead of 5. Inputs are read from their own strides (no pack kernel).
"""
from ..._tensor import Tensor
from ...backend import geometry
from ..softmax import kernel, is_host
from .dropout import drop_args, drop_types
from .flash import TEMPLATE, LOG2E, tparams, vec_ok, enqueue, mask_args
from .layout import L64 as _L, operand, mask_strides, np_ct
from .plan import flash_plan, compute_dtype

__all__ = ["backward"]

_OPND = [None] + [_L] * 5


def _dlt(rt, g2, gs, o, cfg, dt, ct, host):
    """Dlt (B0*H, L) in the compute dtype: rowsum(dO * O)."""
    BH = cfg.B0 * cfg.H
    dlt = Tensor._empty((BH, cfg.L), ct, o.device)
    rows = BH * cfg.L
    vec = vec_ok([(g2, gs, cfg.EV), (o, [0, 0, 0, cfg.EV, 1], cfg.EV)])     # o: the forward's contiguous output
    kk = kernel(rt, TEMPLATE, "sdpa_flash_dlt", [None, None] + _OPND + [_L] * 3,
                **tparams("dlt", dt, ct, cfg, vec=vec))
    gsz, lsz = geometry.nd(rt, (rows,), (int(rt.profile.get_value("sdpa", "local_size", 64)),), kk)
    rt.launch(kk, gsz, lsz, dlt._storage.cl_buffer(), o._storage.cl_buffer(), g2._storage.cl_buffer(), *gs,
              cfg.L, cfg.H, rows)
    if host:
        rt.finish_if_exposed()
    return dlt


def backward(g, q, k, v, o, lse, mask, cfg, needs):
    """(dq, dk, dv) (None where ``needs`` is False) for the output gradient g of the forward's output o
    (contiguous) and logsumexp lse; gradients in the inputs' dtype, dk and dv in key's and value's shapes."""
    dt = q.dtype
    ct = compute_dtype(dt)
    rt = q._runtime()
    nct = np_ct(ct)
    BH = cfg.B0 * cfg.H
    if g.dtype is not dt:
        g = g.to(dt)
    if g._shape != o._shape:
        g = g.expand(o._shape)
    kshape = tuple(q._shape[:max(cfg.nbatch - 1, 0)]) + ((cfg.Hk,) if cfg.nbatch else ()) + (cfg.S, cfg.E)
    vshape = kshape[:-1] + (cfg.EV,)
    dq = Tensor._empty(q._shape, dt, q.device) if needs[0] else None
    want_kv = needs[1] or needs[2]
    dk = Tensor._empty(kshape, dt, q.device) if want_kv else None
    dv = Tensor._empty(vshape, dt, q.device) if want_kv else None
    if BH * cfg.L == 0 or cfg.S == 0:        # nothing to add: zero gradients
        for t in (dq, dk, dv):
            if t is not None and t.numel():
                t.zero_()
    else:
        q2, qs = operand(q, cfg.nbatch)
        k2, ks = operand(k, cfg.nbatch)
        v2, vs = operand(v, cfg.nbatch)
        g2, gs = operand(g, cfg.nbatch)
        host = is_host(q2, k2, v2, g2)
        vec = vec_ok([(q2, qs, cfg.E), (k2, ks, cfg.E), (v2, vs, cfg.EV), (g2, gs, cfg.EV)])
        m2, *mst = mask_strides(mask, cfg, q._shape)
        dlt = _dlt(rt, g2, gs, o, cfg, dt, ct, host)
        ins = lambda: [q2._storage.cl_buffer(), *qs, k2._storage.cl_buffer(), *ks,   # noqa: E731
                       v2._storage.cl_buffer(), *vs, g2._storage.cl_buffer(), *gs,
                       lse._storage.cl_buffer(), dlt._storage.cl_buffer(), *mask_args(m2, q2, *mst)]
        types = _OPND * 4 + [None, None] + _OPND + [_L] * 5 + [nct, nct] + drop_types(nct, cfg)
        if dq is not None:
            plan = flash_plan(rt, cfg, "dq", ct)
            nqb = -(-cfg.L // plan.block_rows)
            kk = kernel(rt, TEMPLATE, plan.name, [None] + types, **tparams("dq", dt, ct, cfg, plan, vec))
            enqueue(rt, kk, BH * nqb, plan.wg, [dq._storage.cl_buffer(), *ins(), cfg.L, cfg.S, cfg.H, cfg.Hk, nqb,
                                                nct(cfg.scale * LOG2E), nct(cfg.scale), *drop_args(nct, cfg)], host)
        if want_kv:
            plan = flash_plan(rt, cfg, "dkv", ct)
            nkb = -(-cfg.S // plan.block_keys)
            kk = kernel(rt, TEMPLATE, plan.name, [None, None] + types, **tparams("dkv", dt, ct, cfg, plan, vec))
            enqueue(rt, kk, cfg.B0 * cfg.Hk * nkb, plan.wg,
                    [dk._storage.cl_buffer(), dv._storage.cl_buffer(), *ins(), cfg.L, cfg.S, cfg.H, cfg.Hk, nkb,
                     nct(cfg.scale * LOG2E), nct(1.0 / LOG2E), *drop_args(nct, cfg)], host)
    if dk is not None and tuple(k._shape) != kshape and dk.numel() == k.numel():
        dk = dk.reshape(k._shape)
    if dv is not None and tuple(v._shape) != vshape and dv.numel() == v.numel():
        dv = dv.reshape(v._shape)
    return dq, (dk if needs[1] else None), (dv if needs[2] else None)
