"""The CPU design of fused attention (``cl_kernels/sdpa.cl.mako``): register blocking instead of local memory.

Each work-item owns a block of query rows and walks the keys block by block with an online softmax (running max
and sum, the accumulator rescaled when the max grows), so no L x S matrix is ever stored: extra memory is O(L)
(the row logsumexp, saved for the backward) plus packed copies of K and V (``sdpa_pack``: K transposed and V rows,
zero padded, so the inner loops load whole vectors). The backward recomputes the attention weights from the
logsumexp in two kernels, one per query block (dQ) and one per key block (dK, dV), so no atomics are needed.
Tiles (query rows and keys per work-item, vector width) come from the profile's ``[sdpa]`` table
(``plan.cpu_tiles``). Algorithm: FlashAttention-2 (Tri Dao, 2023) with the online softmax of Milakov and
Gimelshein (2018).
"""
import math

from ..._tensor import Tensor
from ..softmax import kernel, launch, is_host, types_of
from .dropout import drop_args, drop_types
from .layout import L64 as _L, two_level, mask_strides, scratch, np_ct
from .plan import cpu_tiles, compute_dtype

__all__ = ["forward", "backward"]


def _round(n, m):
    return ((n + m - 1) // m) * m


def _lcm(a, b):
    return a * b // math.gcd(a, b)


_TILE_KEYS = ("VW", "BM", "BN", "BMQ", "BNK", "BNQ", "BQ", "R", "RQ")


def _tparams(dt, ct, cfg, tiles):
    """Template parameters of the one sdpa program of a (dtype, head dims, mask kind, causal) configuration."""
    vw = tiles["VW"]
    up = lambda n: ((n + vw - 1) // vw) * vw   # noqa: E731
    mt = "uchar" if cfg.mask_kind == "bool" else dt.cl
    return dict(T=dt.cl, CT=ct.cl, E=cfg.E, EV=cfg.EV, EVP=up(cfg.EV), EP=up(cfg.E), mask=cfg.mask_kind, MT=mt,
                causal=bool(cfg.causal), dropout=cfg.dropout is not None, types=types_of(dt, ct),
                **{k: tiles[k] for k in _TILE_KEYS})


def _pack(rt, src, nbatch, NH, a_dim, c_dim, AP, CP, ct, params):
    """Contiguous zero-padded copy dst[b][a][c] (b = b0 * NH + h) of src's dims a_dim, c_dim; compute dtype."""
    src, sb0, sh = two_level(src, nbatch)
    A, C = src._shape[a_dim], src._shape[c_dim]
    nb = 1
    for s in src._shape[:nbatch]:
        nb *= s
    dst = scratch(rt, (nb, AP, CP), ct, src.device)
    total = nb * AP
    k = kernel(rt, "sdpa.cl.mako", "sdpa_pack", [None, None] + [_L] * 11, **params)
    launch(rt, k, total, 16, dst._storage.cl_buffer(), src._storage.cl_buffer(), src._offset, sb0, sh,
           src._stride[a_dim], src._stride[c_dim], NH, A, C, AP, CP, total, host=is_host(src, dst))
    return dst


def _mask_buf(m2, q2):
    """The mask's buffer, or q's as a placeholder when there is no mask. Fetched right at the launch: a nested op
    between a fetch and its enqueue may wait for the queue, which ends the hold a fetch takes (Storage.cl_buffer)."""
    return (m2 if m2 is not None else q2)._storage.cl_buffer()


def forward(q, k, v, mask, cfg):
    """(out, lse): attention of q (..., L, E), k (..., S, E), v (..., S, EV) under ``cfg``; lse (B0*H, L) the
    natural logsumexp of each row's scores (-inf for a row with no key), in the compute dtype."""
    dt = q.dtype
    ct = compute_dtype(dt)
    rt = q._runtime()
    tiles = cpu_tiles(rt, ct)
    ls = tiles["LS"]
    BM, BN, R = tiles["BM"], tiles["BN"], tiles["R"]
    params = _tparams(dt, ct, cfg, tiles)
    BH = cfg.B0 * cfg.H
    SP = _round(cfg.S, _lcm(BN, tiles["BNK"]))
    EVP = params["EVP"]
    out = Tensor._empty(tuple(q._shape[:-1]) + (cfg.EV,), dt, q.device)
    lse = Tensor._empty((BH, cfg.L), ct, q.device)
    nqb = (cfg.L + BM * R - 1) // (BM * R)
    total = BH * nqb
    if total == 0:
        return out, lse
    if cfg.S == 0:                      # no keys: every row is fully masked
        out.zero_()
        lse.fill_(float("-inf"))
        return out, lse
    SC = max(BN, _round(tiles["SC"], BN)) if R > 1 else SP     # whole key blocks per chunk
    kt = _pack(rt, k, cfg.nbatch, cfg.Hk, -1, -2, cfg.E, SP, ct, params)            # K^T: [kvh][E][SP]
    vp = _pack(rt, v, cfg.nbatch, cfg.Hk, -2, -1, SP, EVP, ct, params)              # V rows: [kvh][SP][EVP]
    q2, sqb, sqh = two_level(q, cfg.nbatch)
    m2, m_off, smb, smh, sml, sms = mask_strides(mask, cfg, q._shape)
    kk = kernel(rt, "sdpa.cl.mako", "sdpa_fwd",
                [None, None, None] + [_L] * 5 + [None, None, None] + [_L] * 5 + [_L] * 7 + [np_ct(ct), _L]
                + drop_types(np_ct(ct), cfg), **params)
    mb = _mask_buf(m2, q2)
    launch(rt, kk, total, ls, out._storage.cl_buffer(), lse._storage.cl_buffer(), q2._storage.cl_buffer(),
           q2._offset, sqb, sqh, q2._stride[-2], q2._stride[-1], kt._storage.cl_buffer(), vp._storage.cl_buffer(),
           mb, m_off, smb, smh, sml, sms, cfg.L, cfg.S, SP, cfg.H, cfg.Hk, nqb, total, np_ct(ct)(cfg.scale), SC,
           *drop_args(np_ct(ct), cfg), host=is_host(q2, out))
    return out, lse


def backward(g, q, k, v, o, lse, mask, cfg, needs):
    """(dq, dk, dv) (None where ``needs`` is False) of the forward's output o and logsumexp lse, for the output
    gradient g."""
    dt = q.dtype
    ct = compute_dtype(dt)
    rt = q._runtime()
    tiles = cpu_tiles(rt, ct)
    ls = tiles["LS"]
    BM, BN, BNK, RQ = tiles["BMQ"], tiles["BNQ"], tiles["BNK"], tiles["RQ"]
    params = _tparams(dt, ct, cfg, tiles)
    BH = cfg.B0 * cfg.H
    BHk = cfg.B0 * cfg.Hk
    SP = _round(cfg.S, _lcm(BN, BNK))
    EP = params["EP"]
    if g.dtype is not dt:
        g = g.to(dt)
    if g._shape != o._shape:
        g = g.expand(o._shape)
    # Dlt = rowsum(dO * O)
    dlt = (g.to(ct) * o.to(ct)).sum(-1).reshape(BH, cfg.L) if ct is not dt else (g * o).sum(-1).reshape(BH, cfg.L)
    pq = pk = params
    kt = _pack(rt, k, cfg.nbatch, cfg.Hk, -1, -2, cfg.E, SP, ct, pk)            # [kvh][E][SP]
    vt = _pack(rt, v, cfg.nbatch, cfg.Hk, -1, -2, cfg.EV, SP, ct, pk)           # [kvh][EV][SP]
    q2, sqb, sqh = two_level(q, cfg.nbatch)
    g2, sdb, sdh = two_level(g, cfg.nbatch)
    m2, m_off, smb, smh, sml, sms = mask_strides(mask, cfg, q._shape)
    host = is_host(q2, g2)
    dq = dk = dv = None
    if needs[0]:
        kp = _pack(rt, k, cfg.nbatch, cfg.Hk, -2, -1, SP, EP, ct, pq)          # [kvh][SP][EP]
        dq = Tensor._empty(q._shape, dt, q.device)
        nqb = (cfg.L + BM * RQ - 1) // (BM * RQ)
        total = BH * nqb
        SC = max(BN, _round(tiles["SC"], BN)) if RQ > 1 else SP
        if total:
            kk = kernel(rt, "sdpa.cl.mako", "sdpa_bwd_dq",
                        [None] + [_L] * 3 + [None] + [_L] * 5 + [None] + [_L] * 5 + [None] * 5 + [None] + [_L] * 5
                        + [_L] * 7 + [np_ct(ct), _L] + drop_types(np_ct(ct), cfg),
                        **pq)
            dqs = dq._stride
            launch(rt, kk, total, ls, dq._storage.cl_buffer(), dqs[-3] * cfg.H if cfg.nbatch >= 2 else 0,
                   dqs[-3] if cfg.nbatch >= 1 else 0, dqs[-2],
                   q2._storage.cl_buffer(), q2._offset, sqb, sqh, q2._stride[-2], q2._stride[-1],
                   g2._storage.cl_buffer(), g2._offset, sdb, sdh, g2._stride[-2], g2._stride[-1],
                   lse._storage.cl_buffer(), dlt._storage.cl_buffer(), kt._storage.cl_buffer(),
                   vt._storage.cl_buffer(), kp._storage.cl_buffer(), _mask_buf(m2, q2), m_off, smb, smh, sml, sms,
                   cfg.L, cfg.S, SP, cfg.H, cfg.Hk, nqb, total, np_ct(ct)(cfg.scale), SC, *drop_args(np_ct(ct), cfg),
                   host=host)
        else:
            dq = dq.zero_() if dq.numel() else dq
    if needs[1] or needs[2]:
        kshape = tuple(q._shape[:max(cfg.nbatch - 1, 0)]) + ((cfg.Hk,) if cfg.nbatch else ()) + (cfg.S, cfg.E)
        vshape = kshape[:-1] + (cfg.EV,)
        dk = Tensor._empty(kshape, dt, q.device)
        dv = Tensor._empty(vshape, dt, q.device)
        nkb = (cfg.S + BNK - 1) // BNK
        total = BHk * nkb
        SPk = SP
        if total:
            kk = kernel(rt, "sdpa.cl.mako", "sdpa_bwd_dkv",
                        [None, None] + [None] + [_L] * 5 + [None] + [_L] * 5 + [None] * 4 + [None] + [_L] * 5
                        + [_L] * 7 + [np_ct(ct)] + drop_types(np_ct(ct), cfg),
                        **pk)
            launch(rt, kk, total, ls, dk._storage.cl_buffer(), dv._storage.cl_buffer(),
                   q2._storage.cl_buffer(), q2._offset, sqb, sqh, q2._stride[-2], q2._stride[-1],
                   g2._storage.cl_buffer(), g2._offset, sdb, sdh, g2._stride[-2], g2._stride[-1],
                   lse._storage.cl_buffer(), dlt._storage.cl_buffer(), kt._storage.cl_buffer(),
                   vt._storage.cl_buffer(), _mask_buf(m2, q2), m_off, smb, smh, sml, sms,
                   cfg.L, cfg.S, SPk, cfg.H, cfg.Hk, nkb, total, np_ct(ct)(cfg.scale), *drop_args(np_ct(ct), cfg),
                   host=host)
        else:
            dk = dk.zero_() if dk.numel() else dk
            dv = dv.zero_() if dv.numel() else dv
        if tuple(k._shape) != kshape:
            dk = dk.reshape(k._shape) if dk.numel() == k.numel() else dk
        if tuple(v._shape) != vshape:
            dv = dv.reshape(v._shape) if dv.numel() == v.numel() else dv
    return dq, (dk if needs[1] else None), (dv if needs[2] else None)
