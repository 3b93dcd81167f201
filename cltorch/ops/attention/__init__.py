"""scaled_dot_product_attention: a fused flash-style kernel and the composed "math" path, with PyTorch 2.13's
semantics, plus ``SDPBackend`` and the ``sdpa_kernel`` context manager that chooses between them.

Fused path (``cl_kernels/sdpa.cl.mako``; FlashAttention-2, Tri Dao 2023): each work-item owns a block of query
rows and walks the keys block by block with an online softmax (running max and sum, accumulator rescaled when
the max grows), so no L x S matrix is ever stored: extra memory is O(L) (the row logsumexp, saved for the
backward) plus packed copies of K and V. The backward recomputes the attention weights from the logsumexp in
two kernels, one per query block (dQ) and one per key block (dK, dV), so no atomics are needed. Tile sizes
(query rows and keys per work-item, vector width) come from the device profile's ``[sdpa]`` table.

Math path: ``safe_softmax(q @ k^T * scale + bias) @ v`` from differentiable ops (matmul, the fused softmax).

Semantics (both paths): query (..., L, E), key (..., S, E), value (..., S, Ev); a bool ``attn_mask`` marks the
pairs that take part (True), a float one is added to the scores; ``is_causal`` masks ``j > i`` (top-left aligned
when L != S) and combines with ``attn_mask``; a query row whose keys are all masked gives zeros and zero
gradients (torch 2.13). ``enable_gqa`` lets key/value have fewer heads (dim -3) than query, a divisor of them.

Dropout (``dropout_p > 0``) runs inside the fused kernels: each attention weight (bh, i, j) is kept with
probability 1 - p according to one word of the Philox4x32-10 stream of the default generator
(``cltorch.ops.random``; element index ``(bh * L + i) * S4 + j`` with S4 = S rounded up to 4), so the forward and
the backward kernels draw the same mask, a seed reproduces it on every device, and the generator's offset
advances by the blocks used. The math path draws its mask with ``Tensor.bernoulli_``; the two paths give
different masks for the same seed (as PyTorch's backends do).

Dispatch: the fused path runs when FLASH_ATTENTION is enabled and the inputs fit (float32/float64, head dims up
to the profile's ``max_head_dim``, ``dropout_p < 1``, key/value batch dims equal to query's or grouped by
``enable_gqa``, the mask broadcastable to (..., L, S) and not requiring grad); otherwise the math path when MATH
is enabled (it also gives a float mask its gradient); otherwise RuntimeError ("No available kernel").
"""
import contextlib
import enum
import math
import threading

import numpy as np

from ... import _dtype as D
from ..._dispatch import call, register, is_grad_enabled, set_grad_enabled_raw
from ..._tensor import Tensor
from ..elementwise import _collapse, common_device
from ..softmax import kernel, launch, is_host, compute_dtype, types_of, safe_softmax

__all__ = ["scaled_dot_product_attention", "SDPBackend", "sdpa_kernel"]

_L = np.int64


# ------------------------------------------------------------------------------------------ backend choice
class SDPBackend(enum.IntEnum):
    """The SDPA implementations, numbered as PyTorch's ``torch.nn.attention.SDPBackend``. cltorch has
    FLASH_ATTENTION (the fused kernel) and MATH; the others are accepted names without an implementation."""
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


class _State(threading.local):
    def __init__(self):
        self.enabled = (SDPBackend.FLASH_ATTENTION, SDPBackend.MATH)


_state = _State()


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    """Context manager restricting scaled_dot_product_attention to ``backends`` (one SDPBackend or a list), as
    ``torch.nn.attention.sdpa_kernel``. With ``set_priority=True`` the list order is the order tried (by default
    the fused kernel is tried first). Thread-local."""
    if isinstance(backends, SDPBackend):
        backends = [backends]
    backends = list(backends)
    for b in backends:
        if not isinstance(b, SDPBackend):
            raise ValueError(f"Invalid backend {b!r}: expected SDPBackend values")
    if not set_priority:
        order = [SDPBackend.FLASH_ATTENTION, SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION,
                 SDPBackend.CUDNN_ATTENTION, SDPBackend.OVERRIDEABLE]
        backends = [b for b in order if b in backends]
    prev = _state.enabled
    _state.enabled = tuple(backends)
    try:
        yield
    finally:
        _state.enabled = prev


def _enabled_backends():
    return _state.enabled


# ------------------------------------------------------------------------------------------------- helpers
def _matmul(a, b):
    from ..linalg import matmul
    return matmul(a, b)


def _profile(rt):
    p = rt.profile

    def g(key, default):
        return p.get_value("sdpa", key, default)
    return g


def _two_level(t, nbatch):
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
        return _two_level(t, nbatch)
    return t, (cst[0] if cs else 0), sh


def _pack(rt, src, nbatch, NH, a_dim, c_dim, AP, CP, ct, params):
    """Contiguous zero-padded copy dst[b][a][c] (b = b0 * NH + h) of src's dims a_dim, c_dim; compute dtype."""
    src, sb0, sh = _two_level(src, nbatch)
    A, C = src._shape[a_dim], src._shape[c_dim]
    nb = 1
    for s in src._shape[:nbatch]:
        nb *= s
    dst = _scratch(rt, (nb, AP, CP), ct, src.device)
    total = nb * AP
    k = kernel(rt, "sdpa.cl.mako", "sdpa_pack", [None, None] + [_L] * 11, **params)
    launch(rt, k, total, 16, dst._storage.cl_buffer(), src._storage.cl_buffer(), src._offset, sb0, sh,
           src._stride[a_dim], src._stride[c_dim], NH, A, C, AP, CP, total, host=is_host(src, dst))
    return dst


def _round(n, m):
    return ((n + m - 1) // m) * m


def _scratch(rt, shape, dt, device):
    """A tensor in a pooled OpenCL buffer of ``rt`` (also for cpu tensors, whose numpy memory is not aligned
    for the kernels' vector loads)."""
    from ..._storage import Storage
    n = 1
    for s in shape:
        n *= s
    nbytes = max(n * dt.itemsize, 1)
    return Tensor._make(Storage(device, dt, n, buf=rt.alloc(nbytes), rt=rt, nbytes=nbytes), shape)


def _tparams(dt, ct, cfg, tiles):
    """Template parameters of the one sdpa program of a (dtype, head dims, mask kind, causal) configuration."""
    vw = tiles["VW"]
    up = lambda n: ((n + vw - 1) // vw) * vw   # noqa: E731
    mt = "uchar" if cfg.mask_kind == "bool" else dt.cl
    return dict(T=dt.cl, CT=ct.cl, E=cfg.E, EV=cfg.EV, EVP=up(cfg.EV), EP=up(cfg.E), mask=cfg.mask_kind, MT=mt,
                causal=bool(cfg.causal), dropout=cfg.dropout is not None, types=types_of(dt, ct), **tiles)


def _drop_types(ct, cfg):
    return [np.uint32, np.uint32, np.uint64, np.uint32, _np_ct(ct), np.int64] if cfg.dropout is not None else []


def _drop_args(ct, cfg):
    """Kernel arguments of the in-kernel dropout: key, first counter, threshold, scale, padded row length."""
    if cfg.dropout is None:
        return []
    k0, k1, ctr0, thr, pscale, sp4 = cfg.drop_args
    return [np.uint32(k0), np.uint32(k1), np.uint64(ctr0), np.uint32(thr), _np_ct(ct)(pscale), np.int64(sp4)]


def _setup_dropout(cfg, p):
    """Draw the Philox counters of this call from the default generator (cltorch.ops.random): one block of four
    words per four attention weights of each (padded) row."""
    from .. import random as R
    from .. import _philox_ref as REF
    sp4 = _round(cfg.S, 4)
    nblocks = cfg.B0 * cfg.H * cfg.L * sp4 // 4
    g = R.default_generator
    seed = g._seed
    ctr0 = g._take(nblocks)
    k0, k1 = REF.key_from_seed(seed)
    thr = int(math.ceil(p * 2.0 ** 32))
    cfg.dropout = float(p)
    cfg.drop_args = (int(k0), int(k1), int(ctr0), thr, 1.0 / (1.0 - p), sp4)
    cfg.drop_seed = seed


def _keep_tensor(cfg, like):
    """The fused kernels' dropout multipliers (keep / (1 - p), or 0) as a (..., L, S) tensor, recomputed on the
    host from the same Philox words (cltorch.ops._philox_ref); used by the composed double backward."""
    from .. import _philox_ref as REF
    from ..creation import tensor
    k0, k1, ctr0, thr, pscale, sp4 = cfg.drop_args
    BH = cfg.B0 * cfg.H
    words = REF.random_words(cfg.drop_seed, ctr0, BH * cfg.L * sp4 // 4).reshape(BH, cfg.L, sp4)[:, :, :cfg.S]
    keep = np.where(words >= np.uint32(thr), pscale, 0.0).reshape(tuple(cfg.qbatch) + (cfg.L, cfg.S))
    return tensor(keep, dtype=like.dtype, device=like.device)


def _tiles(rt, ct):
    """Tile sizes from the device profile's [sdpa] table (defaults suit a CPU device). float64 uses
    ``vector_width_f64`` (default half of ``vector_width``), so a vector keeps the same number of bytes."""
    key = (rt.index, ct.name)
    t = _TILES.get(key)
    if t is None:
        p = rt.profile
        g = lambda k, d: int(p.get_value("sdpa", k, d))   # noqa: E731
        vw = g("vector_width", 8)
        if ct is D.float64:
            vw = g("vector_width_f64", max(1, vw // 2))
        bn = max(vw, _round(g("block_n", 16), vw))
        bnk = max(vw, _round(g("bwd_block_n", 8), vw))
        bnq = max(vw, _round(g("bwd_block_n_dq", 16), vw))
        t = _TILES[key] = dict(VW=vw, BM=g("block_m", 4), BN=bn, BMQ=g("bwd_block_m", 2), BNK=bnk, BNQ=bnq,
                               BQ=g("bwd_block_q", 2), R=max(1, g("row_groups", 1)),
                               RQ=max(1, g("bwd_row_groups", 1)))
        _SC[key] = g("key_chunk", 256)
        _LS[rt.index] = g("local_size", 16)
    return t


_TILES = {}
_LS = {}
_SC = {}




# ---------------------------------------------------------------------------------------------- fused path
class _Cfg:
    __slots__ = ("nbatch", "B0", "H", "Hk", "L", "S", "E", "EV", "mask_kind", "causal", "scale", "dropout", "drop_args",
                 "drop_seed", "qbatch")


def _mask_buf(m2, q2):
    """The mask's buffer, or q's as a placeholder when there is no mask. Fetched right at the launch: a nested op
    between a fetch and its enqueue may wait for the queue, which ends the hold a fetch takes (Storage.cl_buffer)."""
    return (m2 if m2 is not None else q2)._storage.cl_buffer()


def _mask_strides(mask, cfg, qshape):
    """(mask', m_off, smb, smh, sml, sms) for a mask broadcast to query's batch dims + (L, S)."""
    if mask is None:
        return None, 0, 0, 0, 0, 0
    full = tuple(qshape[:-2]) + (cfg.L, cfg.S)
    m = mask.expand(full) if tuple(mask._shape) != full else mask
    m, smb, smh = _two_level(m, cfg.nbatch)
    return m, m._offset, smb, smh, m._stride[-2], m._stride[-1]


def _fwd_launch(q, k, v, mask, cfg):
    dt = q.dtype
    ct = compute_dtype(dt)
    rt = q._runtime()
    tiles = _tiles(rt, ct)
    ls = _LS[rt.index]
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
    SC = max(BN, _round(_SC[(rt.index, ct.name)], BN)) if R > 1 else SP     # whole key blocks per chunk
    kt = _pack(rt, k, cfg.nbatch, cfg.Hk, -1, -2, cfg.E, SP, ct, params)            # K^T: [kvh][E][SP]
    vp = _pack(rt, v, cfg.nbatch, cfg.Hk, -2, -1, SP, EVP, ct, params)              # V rows: [kvh][SP][EVP]
    q2, sqb, sqh = _two_level(q, cfg.nbatch)
    m2, m_off, smb, smh, sml, sms = _mask_strides(mask, cfg, q._shape)
    kk = kernel(rt, "sdpa.cl.mako", "sdpa_fwd",
                [None, None, None] + [_L] * 5 + [None, None, None] + [_L] * 5 + [_L] * 7 + [_np_ct(ct), _L]
                + _drop_types(ct, cfg), **params)
    mb = _mask_buf(m2, q2)
    launch(rt, kk, total, ls, out._storage.cl_buffer(), lse._storage.cl_buffer(), q2._storage.cl_buffer(),
           q2._offset, sqb, sqh, q2._stride[-2], q2._stride[-1], kt._storage.cl_buffer(), vp._storage.cl_buffer(),
           mb, m_off, smb, smh, sml, sms, cfg.L, cfg.S, SP, cfg.H, cfg.Hk, nqb, total, _np_ct(ct)(cfg.scale), SC,
           *_drop_args(ct, cfg), host=is_host(q2, out))
    return out, lse


def _lcm(a, b):
    return a * b // math.gcd(a, b)


def _np_ct(ct):
    return np.float64 if ct is D.float64 else np.float32


def _bwd_launch(g, q, k, v, o, lse, mask, cfg, needs):
    dt = q.dtype
    ct = compute_dtype(dt)
    rt = q._runtime()
    tiles = _tiles(rt, ct)
    ls = _LS[rt.index]
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
    q2, sqb, sqh = _two_level(q, cfg.nbatch)
    g2, sdb, sdh = _two_level(g, cfg.nbatch)
    m2, m_off, smb, smh, sml, sms = _mask_strides(mask, cfg, q._shape)
    host = is_host(q2, g2)
    dq = dk = dv = None
    if needs[0]:
        kp = _pack(rt, k, cfg.nbatch, cfg.Hk, -2, -1, SP, EP, ct, pq)          # [kvh][SP][EP]
        dq = Tensor._empty(q._shape, dt, q.device)
        nqb = (cfg.L + BM * RQ - 1) // (BM * RQ)
        total = BH * nqb
        SC = max(BN, _round(_SC[(rt.index, ct.name)], BN)) if RQ > 1 else SP
        if total:
            kk = kernel(rt, "sdpa.cl.mako", "sdpa_bwd_dq",
                        [None] + [_L] * 3 + [None] + [_L] * 5 + [None] + [_L] * 5 + [None] * 5 + [None] + [_L] * 5
                        + [_L] * 7 + [_np_ct(ct), _L] + _drop_types(ct, cfg),
                        **pq)
            dqs = dq._stride
            launch(rt, kk, total, ls, dq._storage.cl_buffer(), dqs[-3] * cfg.H if cfg.nbatch >= 2 else 0,
                   dqs[-3] if cfg.nbatch >= 1 else 0, dqs[-2],
                   q2._storage.cl_buffer(), q2._offset, sqb, sqh, q2._stride[-2], q2._stride[-1],
                   g2._storage.cl_buffer(), g2._offset, sdb, sdh, g2._stride[-2], g2._stride[-1],
                   lse._storage.cl_buffer(), dlt._storage.cl_buffer(), kt._storage.cl_buffer(),
                   vt._storage.cl_buffer(), kp._storage.cl_buffer(), _mask_buf(m2, q2), m_off, smb, smh, sml, sms,
                   cfg.L, cfg.S, SP, cfg.H, cfg.Hk, nqb, total, _np_ct(ct)(cfg.scale), SC, *_drop_args(ct, cfg),
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
                        + [_L] * 7 + [_np_ct(ct)] + _drop_types(ct, cfg),
                        **pk)
            launch(rt, kk, total, ls, dk._storage.cl_buffer(), dv._storage.cl_buffer(),
                   q2._storage.cl_buffer(), q2._offset, sqb, sqh, q2._stride[-2], q2._stride[-1],
                   g2._storage.cl_buffer(), g2._offset, sdb, sdh, g2._stride[-2], g2._stride[-1],
                   lse._storage.cl_buffer(), dlt._storage.cl_buffer(), kt._storage.cl_buffer(),
                   vt._storage.cl_buffer(), _mask_buf(m2, q2), m_off, smb, smh, sml, sms,
                   cfg.L, cfg.S, SPk, cfg.H, cfg.Hk, nkb, total, _np_ct(ct)(cfg.scale), *_drop_args(ct, cfg),
                   host=host)
        else:
            dk = dk.zero_() if dk.numel() else dk
            dv = dv.zero_() if dv.numel() else dv
        if tuple(k._shape) != kshape:
            dk = dk.reshape(k._shape) if dk.numel() == k.numel() else dk
        if tuple(v._shape) != vshape:
            dv = dv.reshape(v._shape) if dv.numel() == v.numel() else dv
    return dq, (dk if needs[1] else None), (dv if needs[2] else None)


def _flash_fwd(ctx, q, k, v, mask, cfg):
    out, lse = _fwd_launch(q, k, v, mask, cfg)
    if ctx is not None:
        ctx.save_for_backward(q, k, v, out, lse, mask)
        ctx.cfg = cfg
    return out


def _flash_bwd(ctx, g):
    q, k, v, o, lse, mask = ctx.saved_tensors
    cfg = ctx.cfg
    needs = ctx.needs_input_grad
    if is_grad_enabled():
        dq, dk, dv = _composed_grads(g, q, k, v, mask, cfg)
        return (dq if needs[0] else None), (dk if needs[1] else None), (dv if needs[2] else None), None, None
    dq, dk, dv = _bwd_launch(g, q, k, v, o, lse, mask, cfg, needs)
    return dq, dk, dv, None, None


_flash_op = register("scaled_dot_product_flash_attention", _flash_fwd, _flash_bwd)


def _composed_grads(g, q, k, v, mask, cfg):
    """The attention gradients from differentiable ops (double backward through the fused path):
    p = safe_softmax(s), dV = p^T dO, dS = p * (dO V^T - rowsum(dO * O)), dQ = dS K * scale, dK = dS^T Q * scale."""
    rep = cfg.H // cfg.Hk if cfg.nbatch else 1
    kk, vv = k, v
    if rep > 1:
        kk = _repeat_heads(k, rep)
        vv = _repeat_heads(v, rep)
    s = _matmul(q, kk.transpose(-2, -1)) * cfg.scale
    bias = _bias(mask, cfg.causal, cfg.L, cfg.S, q)
    if bias is not None:
        s = s + bias
    p = safe_softmax(s, -1)
    if cfg.dropout is not None:
        keep = _keep_tensor(cfg, q)
        dv = _matmul((p * keep).transpose(-2, -1), g)
        dp = _matmul(g, vv.transpose(-2, -1)) * keep
    else:
        dv = _matmul(p.transpose(-2, -1), g)
        dp = _matmul(g, vv.transpose(-2, -1))
    ds = p * (dp - (dp * p).sum(-1, keepdim=True))
    dq = _matmul(ds, kk) * cfg.scale
    dk = _matmul(ds.transpose(-2, -1), q) * cfg.scale
    if rep > 1:
        dk = _sum_heads(dk, rep)
        dv = _sum_heads(dv, rep)
    return dq, dk, dv


def _repeat_heads(t, rep):
    """(..., Hk, S, E) -> (..., Hk * rep, S, E) with each head repeated rep times (GQA)."""
    sh = tuple(t._shape)
    return t.unsqueeze(-3).expand(sh[:-2] + (rep,) + sh[-2:]).reshape(sh[:-3] + (sh[-3] * rep,) + sh[-2:])


def _sum_heads(t, rep):
    sh = tuple(t._shape)
    return t.reshape(sh[:-3] + (sh[-3] // rep, rep) + sh[-2:]).sum(-3)


def _bias(mask, causal, L, S, like):
    """The additive score bias of a bool/float mask and the causal mask (None when neither)."""
    from ..creation import arange
    from ..pointwise import where
    bias = None
    if causal:
        i = arange(L, device=like.device).reshape(L, 1)
        j = arange(S, device=like.device).reshape(1, S)
        bias = where(j > i, float("-inf"), 0.0).to(like.dtype)
    if mask is not None:
        m = mask
        if m.dtype is D.bool:
            m = where(m, 0.0, float("-inf")).to(like.dtype)
        bias = m if bias is None else bias + m
    return bias


# ----------------------------------------------------------------------------------------------- math path
def _math(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    """softmax(q k^T * scale + bias) v with differentiable ops; fully masked rows give zeros."""
    if enable_gqa and query.dim() >= 3 and key._shape[-3] != query._shape[-3]:
        rep = query._shape[-3] // key._shape[-3]
        key = _repeat_heads(key, rep)
        value = _repeat_heads(value, rep)
    s = _matmul(query, key.transpose(-2, -1)) * scale
    bias = _bias(attn_mask, is_causal, query._shape[-2], key._shape[-2], query)
    if bias is not None:
        s = s + bias
    p = safe_softmax(s, -1)
    if dropout_p > 0.0:
        if not hasattr(Tensor, "bernoulli_"):
            raise NotImplementedError("scaled_dot_product_attention with dropout_p > 0 needs Tensor.bernoulli_ "
                                      "(the Philox RNG ops), which this build lacks")
        prev = set_grad_enabled_raw(False)
        try:
            keep = Tensor._empty(p._shape, p.dtype, p.device).bernoulli_(1.0 - dropout_p)
        finally:
            set_grad_enabled_raw(prev)
        p = p * keep * (1.0 / (1.0 - dropout_p)) if dropout_p < 1.0 else p * keep
    return _matmul(p, value)


# --------------------------------------------------------------------------------------------- entry point
def _check(query, key, value, attn_mask, dropout_p, enable_gqa):
    for t, nm in ((query, "query"), (key, "key"), (value, "value")):
        if not isinstance(t, Tensor):
            raise TypeError(f"scaled_dot_product_attention(): argument '{nm}' must be Tensor, not "
                            f"{type(t).__name__}")
        if t.dim() < 2:
            raise RuntimeError(f"scaled_dot_product_attention: {nm} must be at least 2-D, got shape "
                               f"{list(t._shape)}")
    if not (query.dtype is key.dtype is value.dtype):
        raise RuntimeError(f"Expected query, key, and value to have the same dtype, but got query.dtype: "
                           f"{query.dtype.name} key.dtype: {key.dtype.name} and value.dtype: {value.dtype.name} "
                           "instead.")
    if not query.dtype.is_floating_point:
        raise RuntimeError(f"scaled_dot_product_attention: expected floating point inputs, got {query.dtype.name}")
    common_device([query, key, value] + ([attn_mask] if attn_mask is not None else []))
    if query._shape[-1] != key._shape[-1]:
        raise RuntimeError(f"scaled_dot_product_attention: query's and key's last dims must match, got query "
                           f"{list(query._shape)} and key {list(key._shape)}")
    if key._shape[-2] != value._shape[-2]:
        raise RuntimeError(f"scaled_dot_product_attention: key and value must have the same sequence length "
                           f"(dim -2), got key {list(key._shape)} and value {list(value._shape)}")
    if enable_gqa and query.dim() >= 3 and key.dim() >= 3:
        hq, hk, hv = query._shape[-3], key._shape[-3], value._shape[-3]
        if hk != hv or hq % hk != 0:
            raise RuntimeError(f"scaled_dot_product_attention with enable_gqa=True needs the query heads ({hq}) to "
                               f"be a multiple of the key/value heads ({hk}, {hv})")
    if attn_mask is not None and attn_mask.dtype is not D.bool and not attn_mask.dtype.is_floating_point:
        raise RuntimeError(f"Expected attn_mask dtype to be bool or float or to match query dtype, got "
                           f"{attn_mask.dtype.name}")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")


def _flash_config(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    """A _Cfg when the fused kernel can run these inputs, else (None, reason)."""
    dt = query.dtype
    if dt not in (D.float32, D.float64):
        return None, f"dtype {dt.name} (the fused kernel takes float32 and float64)"
    if dropout_p >= 1.0:
        return None, "dropout_p = 1"
    rt = query._runtime()
    if dropout_p > 0.0:
        tl = _tiles(rt, compute_dtype(dt))
        if not all(n % 4 == 0 for n in (tl["BN"], tl["BNK"], tl["BNQ"])):
            return None, "dropout with the profile's key blocks (block_n, bwd_block_n, bwd_block_n_dq must be multiples of 4)"
    maxd = int(rt.profile.get_value("sdpa", "max_head_dim", 256))
    E, EV = query._shape[-1], value._shape[-1]
    if E > maxd or EV > maxd or E == 0 or EV == 0:
        return None, f"head dims {E}, {EV} (the fused kernel takes 1..{maxd})"
    nb = query.dim() - 2
    if key.dim() != query.dim() or value.dim() != query.dim():
        return None, "key/value with a different number of dims than query"
    qb, kb, vb = query._shape[:nb], key._shape[:nb], value._shape[:nb]
    if kb != vb or kb[:-1] != qb[:-1] if nb else False:
        return None, "key/value batch dims that differ from query's"
    H = qb[-1] if nb else 1
    Hk = kb[-1] if nb else 1
    if Hk != H and not (enable_gqa and Hk and H % Hk == 0):
        return None, "key/value heads that differ from query's"
    if attn_mask is not None:
        if attn_mask.requires_grad and is_grad_enabled():
            return None, "an attn_mask that requires grad"
        try:
            from ..elementwise import broadcast_shapes
            full = tuple(qb) + (query._shape[-2], key._shape[-2])
            if broadcast_shapes(attn_mask._shape, full) != full:
                return None, "an attn_mask that does not broadcast to (..., L, S)"
        except RuntimeError:
            return None, "an attn_mask that does not broadcast to (..., L, S)"
    cfg = _Cfg()
    cfg.nbatch = nb
    B0 = 1
    for s in qb[:-1]:
        B0 *= s
    cfg.B0, cfg.H, cfg.Hk = B0, H, Hk
    cfg.L, cfg.S, cfg.E, cfg.EV = query._shape[-2], key._shape[-2], E, EV
    cfg.mask_kind = "none" if attn_mask is None else ("bool" if attn_mask.dtype is D.bool else "float")
    cfg.causal = bool(is_causal)
    cfg.scale = float(scale)
    cfg.dropout = None
    cfg.drop_args = None
    cfg.drop_seed = None
    cfg.qbatch = tuple(qb)
    return cfg, None


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """Attention ``softmax(query @ key^T * scale + bias) @ value`` as ``torch.nn.functional.
    scaled_dot_product_attention`` (PyTorch 2.13 semantics).

    query (..., L, E), key (..., S, E), value (..., S, Ev) -> (..., L, Ev), same dtype. attn_mask broadcastable to
    (..., L, S): bool (True = the pair takes part) or float (added to the scores). dropout_p: dropout on the
    attention weights (in the fused kernel, from the default Philox generator). is_causal: mask the pairs j > i
    (top-left aligned when L != S), combined with attn_mask. scale: defaults to 1/sqrt(E). enable_gqa: key/value may have H/k heads for query's H (dim -3).
    A query row with every key masked gives zeros (and zero gradients). Runs the fused flash-style kernel when it
    fits (see the module docstring), else the math path; ``sdpa_kernel`` restricts the choice. Raises RuntimeError
    for mismatched shapes or dtypes, or when no enabled backend can run the inputs.
    """
    _check(query, key, value, attn_mask, dropout_p, enable_gqa)
    if scale is None:
        scale = 1.0 / math.sqrt(query._shape[-1]) if query._shape[-1] else 1.0
    if attn_mask is not None and attn_mask.dtype is not D.bool and attn_mask.dtype is not query.dtype:
        attn_mask = attn_mask.to(query.dtype)
    why = None
    for b in _enabled_backends():
        if b == SDPBackend.FLASH_ATTENTION:
            cfg, why = _flash_config(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
            if cfg is not None:
                if dropout_p > 0.0:
                    _setup_dropout(cfg, dropout_p)
                m = attn_mask.detach() if attn_mask is not None and attn_mask.requires_grad else attn_mask
                return call(_flash_op, query, key, value, m, cfg)
        elif b == SDPBackend.MATH:
            return _math(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    raise RuntimeError("No available kernel. Aborting execution." + (f" The fused kernel cannot run: {why}."
                                                                     if why else ""))
