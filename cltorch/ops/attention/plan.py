"""Which fused attention design runs, with which tiles: the launch plans of scaled_dot_product_attention.

Two designs, chosen by the device profile's ``[sdpa] design`` (``"cpu"`` when absent):

- ``"cpu"`` (``cpu.py``, ``cl_kernels/sdpa.cl.mako``): each work-item owns a few query rows (or keys) and keeps
  its tiles in vector registers; K and V are packed once per call. Tiles: ``vector_width``, ``block_m``, ...
  (see ``devices/default.toml``); :func:`cpu_tiles`.
- ``"flash"`` (``flash.py``, ``flash_backward.py``, ``cl_kernels/sdpa_flash.cl.mako``): the FlashAttention-2
  partitioning for GPUs (a work-group per block of queries, K/V tiles staged in local memory from their own
  strides, register tiles of S and P V). Tiles per head dim from the profile's ``flash_fwd``, ``flash_dq``
  and ``flash_dkv`` lists (the first row whose ``head_dim`` is at least the larger of E and Ev), then fitted
  here to the device: local memory and work-group size within ``backend.geometry.limits`` (the device's and the
  profile's ``[limits]``), the block no larger than the sequence needs, and enough work-groups to fill the
  device (at least two per compute unit while a smaller block is possible); :func:`flash_plan`.

Deterministic mode runs every device under the CPU tables (``backend/deterministic.py``), so the CPU design,
whose summation order is the same on every device. Plans are memoised in ``_plans`` (cleared when that mode
changes, ``cltorch/_deterministic.py``).
"""
import math
from dataclasses import dataclass, field

from ... import _dtype as D
from ..._dispatch import is_grad_enabled
from ...backend import geometry

__all__ = ["Cfg", "fused_config", "design", "cpu_tiles", "flash_plan", "FlashPlan", "compute_dtype",
           "FLASH_DTYPES"]

_plans = {}

# storage dtypes the flash design takes (half and bfloat16 are computed in float)
FLASH_DTYPES = (D.float32, D.float64, D.float16, D.bfloat16)

# head-dim rows used when a GPU profile names the flash design without tables (devices/gpu.toml has them)
_DEFAULT_ROWS = {
    "fwd": [dict(head_dim=32, tm=8, tn=8, rm=8, rn=8), dict(head_dim=64, tm=8, tn=8, rm=8, rn=4),
            dict(head_dim=128, tm=8, tn=8, rm=4, rn=2)],
    "dq": [dict(head_dim=64, tm=8, tn=8, rm=4, rn=4), dict(head_dim=128, tm=4, tn=8, rm=4, rn=2)],
    "dkv": [dict(head_dim=64, tk=8, tq=8, rk=4, rq=4), dict(head_dim=128, tk=4, tq=8, rk=4, rq=2)],
}


def compute_dtype(dt):
    """The arithmetic dtype of a storage dtype: float32 for the 16-bit floats."""
    return D.float64 if dt is D.float64 else D.float32


class Cfg:
    """One attention call: batch dims (``nbatch`` of them, flattened as B0 x H for query, B0 x Hk for key and
    value), lengths L (queries) and S (keys), head dims E (q, k) and EV (v), the mask kind, causal, the scale,
    the dropout draw (``dropout`` p, ``drop_args``, ``drop_seed``), query's batch shape, and the design."""
    __slots__ = ("nbatch", "B0", "H", "Hk", "L", "S", "E", "EV", "mask_kind", "causal", "scale", "dropout",
                 "drop_args", "drop_seed", "qbatch", "design")


def design(rt):
    """The profile's fused attention design for a runtime: "cpu" or "flash"."""
    d = str(rt.profile.get_value("sdpa", "design", "cpu"))
    if d not in ("cpu", "flash"):
        raise ValueError(f"devices profile [sdpa] design = {d!r}: expected 'cpu' or 'flash'")
    return d


def fused_config(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa):
    """(Cfg, None) when a fused design can run these inputs, else (None, the reason)."""
    dt = query.dtype
    rt = query._runtime()
    dsg = design(rt)
    E, EV = query._shape[-1], value._shape[-1]
    if dsg == "flash":
        fmax = int(rt.profile.get_value("sdpa", "flash_max_head_dim", 128))
        if dt not in FLASH_DTYPES or max(E, EV) > fmax:
            dsg = "cpu"              # the generic kernels take the rest they can (float32/64, larger heads)
    if dsg == "cpu" and dt not in (D.float32, D.float64):
        return None, f"dtype {dt.name} (the fused kernel takes float32 and float64)"
    if dropout_p >= 1.0:
        return None, "dropout_p = 1"
    if dsg == "cpu" and dropout_p > 0.0:
        tl = cpu_tiles(rt, compute_dtype(dt))
        if not all(n % 4 == 0 for n in (tl["BN"], tl["BNK"], tl["BNQ"])):
            return None, ("dropout with the profile's key blocks (block_n, bwd_block_n, bwd_block_n_dq must be "
                          "multiples of 4)")
    maxd = int(rt.profile.get_value("sdpa", "max_head_dim", 256))
    if dsg == "cpu" and (E > maxd or EV > maxd) or E == 0 or EV == 0:
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
    cfg = Cfg()
    cfg.nbatch = nb
    cfg.B0 = math.prod(qb[:-1]) if nb else 1
    cfg.H, cfg.Hk = H, Hk
    cfg.L, cfg.S, cfg.E, cfg.EV = query._shape[-2], key._shape[-2], E, EV
    cfg.mask_kind = "none" if attn_mask is None else ("bool" if attn_mask.dtype is D.bool else "float")
    cfg.causal = bool(is_causal)
    cfg.scale = float(scale)
    cfg.dropout = cfg.drop_args = cfg.drop_seed = None
    cfg.qbatch = tuple(qb)
    cfg.design = dsg
    return cfg, None


# ------------------------------------------------------------------------------------------------ cpu design
def _round(n, m):
    return ((n + m - 1) // m) * m


def cpu_tiles(rt, ct):
    """The CPU design's tiles from the profile's [sdpa] table (defaults suit a CPU device): a dict with VW, BM,
    BN, BMQ, BNK, BNQ, BQ, R, RQ, plus LS (local size) and SC (key chunk). float64 uses ``vector_width_f64``
    (default half of ``vector_width``), so a vector keeps the same number of bytes."""
    key = ("cpu", rt.index, ct.name)
    t = _plans.get(key)
    if t is None:
        p = rt.profile
        g = lambda k, d: int(p.get_value("sdpa", k, d))   # noqa: E731
        vw = g("vector_width", 8)
        if ct is D.float64:
            vw = g("vector_width_f64", max(1, vw // 2))
        bn = max(vw, _round(g("block_n", 16), vw))
        bnk = max(vw, _round(g("bwd_block_n", 8), vw))
        bnq = max(vw, _round(g("bwd_block_n_dq", 16), vw))
        t = _plans[key] = dict(VW=vw, BM=g("block_m", 4), BN=bn, BMQ=g("bwd_block_m", 2), BNK=bnk, BNQ=bnq,
                               BQ=g("bwd_block_q", 2), R=max(1, g("row_groups", 1)),
                               RQ=max(1, g("bwd_row_groups", 1)), LS=g("local_size", 16), SC=g("key_chunk", 256))
    return t


# ---------------------------------------------------------------------------------------------- flash design
def _odd(n):
    return n if n % 2 else n + 1


@dataclass(frozen=True)
class FlashPlan:
    """One flash-design launch: ``kind`` ("fwd", "dq", "dkv"), the kernel ``name``, the work-item grid and
    register tiles (``tiles``: tm, tn, rm, rn for fwd/dq; tk, tq, rk, rq for dkv), the block sizes ``block_rows``
    (queries) and ``block_keys``, the work-group size ``wg``, the number of work-groups ``groups`` (all in
    dimension 0), and ``local_bytes`` of local memory per work-group."""
    kind: str
    name: str
    tiles: dict = field(hash=False)
    block_rows: int
    block_keys: int
    wg: int
    groups: int
    local_bytes: int

    def params(self):
        """The template parameters fixed by the plan (the kernel's others: dtypes, mask, causal, dropout, vec)."""
        return {k.upper(): v for k, v in self.tiles.items()}


def _local_bytes(kind, t, E, EV, csize, dropout):
    """Bytes of local memory of one work-group (mirrors the arrays of cl_kernels/sdpa_flash.cl.mako)."""
    E4P, EV4P = _odd((E + 3) // 4), _odd((EV + 3) // 4)
    vb = 4 * csize
    if kind == "fwd":
        bm, bn = t["tm"] * t["rm"], t["tn"] * t["rn"]
        psl = _odd(bm // 4)
        return (bm * E4P + bn * max(E4P, psl) + bn * EV4P) * vb + bm * t["tn"] * csize
    if kind == "dq":
        bm, bn = t["tm"] * t["rm"], t["tn"] * t["rn"]
        psl = _odd(bm // 4)
        return (bm * E4P + bm * EV4P + bn * E4P + bn * max(EV4P, psl) + (bn * psl if dropout else 0)) * vb
    bn, bm = t["tk"] * t["rk"], t["tq"] * t["rq"]
    ksl = _odd(bn // 4)
    return (bn * E4P + bn * EV4P + bm * E4P + bm * EV4P + 2 * bm * ksl) * vb


def _row(rt, kind, hd):
    rows = rt.profile.get_value("sdpa", "flash_" + kind) or _DEFAULT_ROWS[kind]
    for r in rows:
        if hd <= int(r.get("head_dim", 1 << 30)):
            return {k: int(v) for k, v in r.items() if k != "head_dim"}
    return {k: int(v) for k, v in rows[-1].items() if k != "head_dim"}


def flash_plan(rt, cfg, kind, ct):
    """The :class:`FlashPlan` of ``kind`` ("fwd", "dq" or "dkv") for a call (``cfg``) in compute dtype ``ct``.

    From the profile's row for the head dim, shrunk (each step halves one factor, never below the constraints:
    rm, rk multiples of 4; tn a multiple of 4 for fwd and dq) until the work-group's local memory and size fit
    ``geometry.limits(rt)``; then the query block (fwd, dq: tm) or key block (dkv: tk) is halved while it is
    at least twice the sequence, and while there are fewer than two work-groups per compute unit."""
    drop = cfg.dropout is not None
    key = ("flash", kind, rt.index, ct.name, cfg.E, cfg.EV, cfg.B0 * cfg.H, cfg.B0 * cfg.Hk, cfg.L, cfg.S, drop)
    p = _plans.get(key)
    if p is not None:
        return p
    lim = geometry.limits(rt)
    csize = ct.itemsize
    t = _row(rt, kind, max(cfg.E, cfg.EV))
    rows_f, keys_f = ("tm", "rm"), ("tn", "rn")
    if kind == "dkv":
        rows_f, keys_f = ("tq", "rq"), ("tk", "rk")
    _check_row(kind, t)
    wgmax = min(lim.max_work_group_size, lim.max_work_item_sizes[0])

    def fits(t):
        return (_local_bytes(kind, t, cfg.E, cfg.EV, csize, drop) <= lim.local_mem_size
                and t[rows_f[0]] * t[keys_f[0]] <= wgmax)

    # local memory and work-group size: halve (in this order) the keys per work-item, the row and key groups,
    # then the rows per work-item
    order = ([("rn", 1), ("tm", 1), ("tn", 4), ("rm", 4)] if kind != "dkv"
             else [("rq", 1), ("tq", 1), ("tk", 1), ("rk", 4)])
    while not fits(t):
        for f, lo in order:
            if t[f] // 2 >= lo:
                t[f] //= 2
                break
        else:
            raise RuntimeError(f"scaled_dot_product_attention: no flash tile of head dims {cfg.E}, {cfg.EV} fits "
                               f"{lim.local_mem_size} bytes of local memory on cl:{rt.index}")
    g, r = (rows_f if kind != "dkv" else keys_f)    # the factor that sets how many work-groups there are
    extent = cfg.L if kind != "dkv" else cfg.S
    outer = cfg.B0 * (cfg.H if kind != "dkv" else cfg.Hk)
    while t[g] > 1 and t[g] * t[r] >= 2 * max(extent, 1):
        t[g] //= 2
    cus = max(1, int(getattr(rt.info, "compute_units", 1) or 1))

    def groups(t):
        return outer * -(-extent // (t[g] * t[r]))
    while t[g] > 1 and groups(t) < 2 * cus:
        t[g] //= 2
    name = {"fwd": "sdpa_flash_fwd", "dq": "sdpa_flash_dq", "dkv": "sdpa_flash_dkv"}[kind]
    bm, bn = t[rows_f[0]] * t[rows_f[1]], t[keys_f[0]] * t[keys_f[1]]
    p = _plans[key] = FlashPlan(kind, name, dict(t), bm, bn, t[rows_f[0]] * t[keys_f[0]], groups(t),
                                _local_bytes(kind, t, cfg.E, cfg.EV, csize, drop))
    return p


def _check_row(kind, t):
    need = ("tm", "tn", "rm", "rn") if kind != "dkv" else ("tk", "tq", "rk", "rq")
    missing = [k for k in need if k not in t]
    if missing:
        raise ValueError(f"devices profile [sdpa] flash_{kind}: a row lacks {missing}")
    r4 = t["rm"] if kind != "dkv" else t["rk"]
    if r4 % 4 or (kind != "dkv" and t["tn"] % 4) or any(t[k] < 1 for k in need):
        raise ValueError(f"devices profile [sdpa] flash_{kind} row {t}: rm/rk must be multiples of 4, tn a "
                         "multiple of 4, every value at least 1")
