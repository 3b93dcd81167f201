"""The "igemm" algorithm, the GPU design: implicit GEMM with the gathered operand staged in local memory
(``cl_kernels/conv_igemm.cl.mako``; no column matrix), for the forward, the input gradient (phase-decomposed when
strided) and the weight gradient (split over the positions, the splits summed in a fixed order).

A GPU profile chooses it with ``[conv] design = "igemm"``; ``set_algorithm("igemm")`` forces it on any device (the
tests run it on CPU devices). The plan (:func:`conv_plan`, :func:`wgrad_plan`) is pure Python over the runtime's
``info`` and profile, so tests can state the parallelism a GPU gets from a described device.

Profile keys (``[conv]``):

* ``igemm``: rows ``{upto, tm, tn, tk, rm, rn}`` chosen by the output channels per group (the first row whose
  ``upto`` >= them; the last row has none): the work-group tile (tm output channels x tn positions), the depth of
  a local-memory slice (tk channels), the register block per work-item (rm x rn). The slice depth is lowered to
  the power of two covering the input channels per group (3 channels: 4, not 16 of which 13 are zero); the larger
  side of the tile halves (down to 32) while the launch has fewer than ``igemm_groups_per_cu`` (default 2)
  work-groups per compute unit. None of these changes a result: every output adds its terms in one order.
* ``igemm_wgrad``: one row ``{tm, tn, tk, rm, rn}`` for the weight gradient (tk positions per slice, consecutive
  work-items on consecutive positions); ``igemm_wgrad_groups`` (the work-groups the splits of the positions aim
  at, default 512) and ``igemm_wgrad_min_chunk`` (the fewest positions per split, default 256): the split length
  follows from the shapes and these two values only, never from the device, so the sum order is the same on every
  device with the same profile.
* ``igemm_vw``: the vector width of the local-memory loads and weight loads (default 4).
"""
from dataclasses import dataclass

import numpy as np

from ..._tensor import Tensor
from ...backend import geometry
from .geom import _cdiv, _round_up
from .launch import _Tmp, _dtname, _finish, _idx_type, _span

_TEMPLATE = "conv_igemm.cl.mako"
_DEFAULT_ROWS = ({"upto": 32, "tm": 32, "tn": 128, "tk": 16, "rm": 4, "rn": 8},
                 {"upto": 64, "tm": 64, "tn": 128, "tk": 16, "rm": 8, "rn": 8},
                 {"tm": 128, "tn": 128, "tk": 16, "rm": 8, "rn": 8})
_DEFAULT_WGRAD = {"tm": 64, "tn": 64, "tk": 8, "rm": 4, "rn": 8}


@dataclass(frozen=True)
class Tiles:
    """A work-group tile: tm x tn outputs, slices tk deep, rm x rn outputs per work-item, vw-wide vectors."""
    tm: int
    tn: int
    tk: int
    rm: int
    rn: int
    vw: int

    @property
    def local(self):
        """(LX, LY): work-items along the columns and along the rows."""
        return (self.tn // self.rn, self.tm // self.rm)

    @property
    def threads(self):
        return (self.tn // self.rn) * (self.tm // self.rm)

    def params(self, dt, idx, wgrad):
        return dict(dt=dt, idx=idx, tm=self.tm, tn=self.tn, tk=self.tk, rm=self.rm, rn=self.rn, vw=self.vw,
                    wgrad=int(wgrad))

    def local_bytes(self, isz, wgrad=False):
        pad = self.vw if wgrad else 0
        return self.tk * (self.tm + pad + self.tn + pad) * isz


@dataclass(frozen=True)
class ConvPlan:
    """The launch of igemm_conv: tiles, phases (the input gradient of a strided convolution has sd*sh*sw), the
    column grid per phase (qd, qh, qw), tiles per phase and channel tiles."""
    tiles: Tiles
    phases: int
    grid: tuple
    columns: int          # N * qd * qh * qw per phase
    tiles_per_phase: int
    channel_tiles: int
    groups: int

    @property
    def work_groups(self):
        return self.phases * self.tiles_per_phase * self.channel_tiles * self.groups

    def launch_sizes(self):
        lx, ly = self.tiles.local
        return ((self.phases * self.tiles_per_phase * lx, self.channel_tiles * ly, self.groups), (lx, ly, 1))


@dataclass(frozen=True)
class WgradPlan:
    """The launch of igemm_wgrad: tiles, splits of the positions (chunk positions each), column and row tiles."""
    tiles: Tiles
    chunk: int
    splits: int
    column_tiles: int
    row_tiles: int
    groups: int

    @property
    def work_groups(self):
        return self.column_tiles * self.row_tiles * self.groups * self.splits

    def launch_sizes(self):
        lx, ly = self.tiles.local
        return ((self.column_tiles * lx, self.row_tiles * ly, self.groups * self.splits), (lx, ly, 1))


def _pow2_at_least(n):
    p = 1
    while p < n:
        p *= 2
    return p


def _row(rt, co):
    rows = rt.profile.get_value("conv", "igemm", None) or _DEFAULT_ROWS
    for r in rows:
        if r.get("upto") is None or co <= int(r["upto"]):
            return r
    return rows[-1]


def _fit(rt, t, isz, wgrad, max_threads=None):
    """``t`` shrunk until its work-group fits the device's (and ``max_threads``) and its slices the local memory."""
    lim = geometry.limits(rt)
    cap = min(geometry.cap(rt), max_threads or geometry.cap(rt))
    tm, tn, tk, rm, rn, vw = t.tm, t.tn, t.tk, t.rm, t.rn, t.vw
    while (tn // rn) * (tm // rm) > cap or tn // rn > lim.max_work_item_sizes[0] or \
            tm // rm > lim.max_work_item_sizes[1]:
        if tn > 32 and tn >= tm:
            tn //= 2
        elif rn < 8 and tn // rn > 1:
            rn *= 2
        elif tm > vw * 2:
            tm //= 2
        elif rm < 8 and tm // rm > 1:
            rm *= 2
        else:
            break
        rn, rm = min(rn, tn), min(rm, tm)
    while tk > 1 and Tiles(tm, tn, tk, rm, rn, vw).local_bytes(isz, wgrad) > lim.local_mem_size:
        tk //= 2
    if wgrad:
        while tk > 1 and ((tn // rn) * (tm // rm)) % tk:
            tk //= 2
    return Tiles(tm, tn, tk, rm, rn, vw)


def _check(t):
    for name in ("tm", "tn", "tk", "rm", "rn", "vw"):
        v = getattr(t, name)
        if v < 1 or v & (v - 1):
            raise ValueError(f"profile [conv] igemm tile value {name} = {v} must be a power of two")
    if t.rm % t.vw or t.rn % t.vw or t.tm % t.rm or t.tn % t.rn:
        raise ValueError(f"profile [conv] igemm tiles {t}: rm and rn must be multiples of vw, tm of rm, tn of rn")


def conv_plan(rt, dt, co, ci, n, grid, groups, phases=1, max_threads=None):
    """The igemm_conv launch for a direction with ``co`` output and ``ci`` input channels per group, ``n`` images,
    the column grid ``grid`` = (qd, qh, qw) per phase and ``phases`` phases. Pure: reads ``rt.info``, ``rt.profile``
    and the geometry limits only."""
    prof = rt.profile
    r = _row(rt, co)
    vw = int(prof.get_value("conv", "igemm_vw", 4))
    tk = int(r.get("tk", 16))
    while tk > 1 and tk // 2 >= ci:
        tk //= 2
    isz = 8 if dt == "double" else 4
    t = _fit(rt, Tiles(int(r["tm"]), int(r["tn"]), tk, int(r["rm"]), int(r["rn"]), vw), isz, False, max_threads)
    _check(t)
    cols = n * grid[0] * grid[1] * grid[2]
    want = int(prof.get_value("conv", "igemm_groups_per_cu", 2)) * max(1, int(rt.info.compute_units))

    def plan(t):
        return ConvPlan(t, phases, tuple(grid), cols, _cdiv(cols, t.tn), _cdiv(co, t.tm), groups)
    p = plan(t)
    while p.work_groups < want and max(t.tn, t.tm) > 32:      # halve the larger side of the tile (columns first)
        if t.tn >= t.tm:
            tn = t.tn // 2
            t = Tiles(t.tm, tn, t.tk, t.rm, t.rn if tn // t.rn >= 4 or t.rn <= t.vw else t.rn // 2, t.vw)
        else:
            tm = t.tm // 2
            t = Tiles(tm, t.tn, t.tk, t.rm if tm // t.rm >= 4 or t.rm <= t.vw else t.rm // 2, t.rn, t.vw)
        p = plan(t)
    return p


def wgrad_plan(rt, dt, co, ncol, npos, groups, max_threads=None):
    """The igemm_wgrad launch for ``co`` output channels and ``ncol`` = CI*KD*KH*KW columns per group and ``npos`` =
    N*OD*OH*OW positions. The split length depends on these shapes and the profile only."""
    prof = rt.profile
    r = dict(_DEFAULT_WGRAD, **(prof.get_value("conv", "igemm_wgrad", None) or {}))
    vw = int(prof.get_value("conv", "igemm_vw", 4))
    isz = 8 if dt == "double" else 4
    t = _fit(rt, Tiles(int(r["tm"]), int(r["tn"]), int(r["tk"]), int(r["rm"]), int(r["rn"]), vw), isz, True,
             max_threads)
    _check(t)
    ct, rtl = _cdiv(ncol, t.tn), _cdiv(co, t.tm)
    aim = int(prof.get_value("conv", "igemm_wgrad_groups", 512))
    kmin = _round_up(int(prof.get_value("conv", "igemm_wgrad_min_chunk", 256)), t.tk)
    splits = max(1, _cdiv(aim, ct * rtl * groups))
    chunk = max(kmin, _round_up(_cdiv(npos, splits), t.tk))
    # the partial sums stay within the column budget, and the splits within a dimension's work-group limit
    budget = int(prof.get_value("conv", "col_bytes", 32 << 20))
    per_split = groups * co * ncol * isz
    max_splits = max(1, min(budget // max(per_split, 1), geometry.limits(rt).max_groups[2] // groups))
    if _cdiv(npos, chunk) > max_splits:
        chunk = _round_up(_cdiv(npos, max_splits), t.tk)
    return WgradPlan(t, chunk, _cdiv(npos, chunk), ct, rtl, groups)


# ----------------------------------------------------------------------------------------------- launching
_kcache = {}
_tables = {}
_plans = {}


def _kernel(rt, dt, idx, t, name):
    key = (rt.index, dt, idx, t, name)
    k = _kcache.get(key)
    if k is None:
        I = np.int64 if idx == "long" else np.int32
        i32 = np.int32
        types = {
            "igemm_prep": [None] + [I] * 7 + [None] + [i32] * 7 + [I],
            "igemm_conv": [None] + [I] * 6 + [None, None, I, I, i32, None, I, None] + [i32] * 24 + [I, i32],
            "igemm_wgrad": [None] + [I] * 6 + [None] + [I] * 6 + [None, I] + [i32] * 21 + [I, I, i32],
            "igemm_wsum": [None, None, I, i32, i32, i32, I],
        }[name]
        k = _kcache[key] = rt.kernel(_TEMPLATE, name, types, **t.params(dt, idx, name in ("igemm_wgrad",
                                                                                           "igemm_wsum")))
    return k


def _planned(rt, dt, idx, planner, *args):
    """(plan, kernel) for ``planner(rt, dt, *args)`` (conv_plan or wgrad_plan), memoised per device, profile and
    arguments (``_plans``; cleared with the other plan caches when deterministic mode changes the profile). The
    compiled kernel's own work-group limit is honoured: when it allows fewer work-items than the plan's tile, the
    plan is made again within it (``geometry.cap``)."""
    key = (rt.index, id(rt.profile), dt, idx, planner.__name__) + args
    hit = _plans.get(key)
    if hit is not None:
        return hit
    p = planner(rt, dt, *args)
    name = "igemm_wgrad" if isinstance(p, WgradPlan) else "igemm_conv"
    k = _kernel(rt, dt, idx, p.tiles, name)
    kc = geometry.cap(rt, k)
    if p.tiles.threads > kc:
        p = planner(rt, dt, *args, max_threads=kc)
        k = _kernel(rt, dt, idx, p.tiles, name)
    if len(_plans) > 1024:
        _plans.clear()
    _plans[key] = (p, k)
    return p, k


def _tap_table(rt, geom, transposed):
    """The int32 tap table of igemm_conv (see the template) on rt's device, cached per geometry: forward, one phase
    with every tap (t, e*dd, i*dh, j*dw); transposed, sd*sh*sw phases, each with the taps whose source (phase + p -
    tap*dil) / s is exact, and that quotient as the delta."""
    key = (rt.index, tuple(geom), transposed)
    buf = _tables.get(key)
    if buf is not None:
        return buf
    st, pad, dil = geom[1:4], geom[4:7], geom[7:10]
    ks = (geom.KD, geom.KH, geom.KW)
    KS = geom.KS
    taps = [(t, (t // (ks[1] * ks[2]), (t // ks[2]) % ks[1], t % ks[2])) for t in range(KS)]
    phases = [(0, 0, 0)] if not transposed else \
        [(a, b, c) for a in range(st[0]) for b in range(st[1]) for c in range(st[2])]
    tab = np.zeros((len(phases), 1 + 4 * KS), np.int32)
    for f, ph in enumerate(phases):
        rows = []
        for t, tap in taps:
            if not transposed:
                rows.append((t,) + tuple(k * d for k, d in zip(tap, dil)))
            else:
                num = tuple(p_ + pp - k * d for p_, pp, k, d in zip(ph, pad, tap, dil))
                if all(v % s == 0 for v, s in zip(num, st)):
                    rows.append((t,) + tuple(v // s for v, s in zip(num, st)))
        tab[f, 0] = len(rows)
        if rows:
            tab[f, 1:1 + 4 * len(rows)] = np.asarray(rows, np.int32).ravel()
    buf = rt.alloc(tab.nbytes)
    rt.copy(buf, tab, is_blocking=True)
    if len(_tables) > 256:
        _tables.clear()
    _tables[key] = buf
    return buf


def _prep(rt, tmp, w, geom, transposed, dt, idx, t, ci, co):
    """WP [G][KS][CIp][Opad] (see the template) in a temporary buffer: (buffer, CIp, Opad)."""
    G = geom.G
    Og = w._shape[0] // G
    s0, s1, s2, s3, s4 = w._stride
    w_ci, w_co = (s0, s1) if transposed else (s1, s0)
    cip, opad = _round_up(ci, t.tk), _round_up(co, t.tm)
    total = G * geom.KS * cip * opad
    isz = 8 if dt == "double" else 4
    wp = tmp(total * isz)
    k = _kernel(rt, dt, idx, t, "igemm_prep")
    gs, ls = geometry.nd(rt, total, int(rt.profile.get_value("conv", "im2col_local", 128)), k)
    rt.launch(k, gs, ls, w._storage.cl_buffer(), w._offset, Og * s0, w_ci, w_co, s2, s3, s4, wp, ci, cip, co,
              opad, geom.KD, geom.KH, geom.KW, total)
    return wp, cip, opad


def conv(x, w, b, geom, transposed):
    """y = conv(x, w) + b (transposed: z = conv_t(u, w) + b, x being u) with igemm_conv. x: [N, G*CI, ...] read
    through its strides; w [O, Cg, KD, KH, KW]; b or None; float32 or float64. Returns the contiguous output."""
    rt = x._runtime()
    dt = _dtname(x)
    G = geom.G
    N = x._shape[0]
    O, Cg = w._shape[0], w._shape[1]
    ci, co = (O // G, Cg) if transposed else (Cg, O // G)
    din = geom.out_sp if transposed else geom.in_sp
    dout = geom.in_sp if transposed else geom.out_sp
    st, pad = geom[1:4], geom[4:7]
    if transposed:
        grid = tuple(_cdiv(d, s) for d, s in zip(dout, st))
        om, bm, bo = st, (1, 1, 1), (0, 0, 0)
        phases = st[0] * st[1] * st[2]
    else:
        grid, om, bm, bo, phases = dout, (1, 1, 1), st, tuple(-p for p in pad), 1
    y = Tensor._empty((N, G * co) + tuple(dout), x.dtype, x.device)
    idx = _idx_type(_span(x), y.numel() + 1, G * geom.KS * (ci + 16) * (co + 128))
    p, k = _planned(rt, dt, idx, conv_plan, co, ci, N, tuple(grid), G, phases)
    tmp = _Tmp(rt)
    wp, cip, opad = _prep(rt, tmp, w, geom, transposed, dt, idx, p.tiles, ci, co)
    tt = _tap_table(rt, geom, transposed)
    bb = b if b is not None else w
    gs, ls = p.launch_sizes()
    rt.launch(k, gs, ls, x._storage.cl_buffer(), x._offset, *x._stride, wp, bb._storage.cl_buffer(), bb._offset,
              bb._stride[0] if b is not None else 0, int(b is not None), y._storage.cl_buffer(), y._offset, tt,
              G, ci, cip, co, opad, *din, *grid, *dout, *om, *bm, *bo, geom.KS, p.columns, p.tiles_per_phase)
    tmp.done()
    _finish(rt, x, w, b, y)
    return y


def weight_grad(x, u, geom, wshape):
    """v = conv_w(x, u) [O, Cg, KD, KH, KW] with igemm_wgrad (and igemm_wsum when the positions are split):
    x [N, C, D, H, W] and u [N, O, OD, OH, OW] read through their strides."""
    rt = x._runtime()
    dt = _dtname(x)
    isz = 8 if dt == "double" else 4
    G = geom.G
    N, C = x._shape[0], x._shape[1]
    O = u._shape[1]
    co, ci = O // G, C // G
    ncol = ci * geom.KS
    npos = N * geom.P
    v = Tensor._empty(tuple(wshape), x.dtype, x.device)
    budget = int(rt.profile.get_value("conv", "col_bytes", 32 << 20))
    idx = _idx_type(_span(x), _span(u), 2 * npos + 1, budget // isz + O * ncol + 1)
    p, k = _planned(rt, dt, idx, wgrad_plan, co, ncol, npos, G)
    tmp = _Tmp(rt)
    part = tmp(p.splits * O * ncol * isz) if p.splits > 1 else v._storage.cl_buffer()
    gs, ls = p.launch_sizes()
    # PART's offset: a split-free launch writes v in place (v is fresh: offset 0)
    rt.launch(k, gs, ls, x._storage.cl_buffer(), x._offset, *x._stride, u._storage.cl_buffer(), u._offset,
              *u._stride, part, v._offset if p.splits == 1 else 0, G, ci, co, geom.KD, geom.KH, geom.KW,
              *geom.in_sp, *geom.out_sp, *geom.launch_args(), npos, p.chunk, p.splits)
    if p.splits > 1:
        ks = _kernel(rt, dt, idx, p.tiles, "igemm_wsum")
        total = O * ncol
        gs, ls = geometry.nd(rt, total, int(rt.profile.get_value("conv", "im2col_local", 128)), ks)
        rt.launch(ks, gs, ls, part, v._storage.cl_buffer(), v._offset, co, ncol, p.splits, total)
    tmp.done()
    _finish(rt, x, u, v)
    return v
