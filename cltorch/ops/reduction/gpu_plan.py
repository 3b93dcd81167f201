"""The GPU design of a reduction's launches (``cl_kernels/reduction_gpu.cl.mako``), chosen by the device profile's
``[reduction] design = "gpu"`` (``devices/gpu.toml``).

The reduced elements of each output are read along their smallest stride:

- ``rows`` (the reduced elements of an output are contiguous, or closer together than the outputs; a full
  reduction): a team of ``team`` lanes per (output, slice). Many rows: a warp-sized team (``row_team``) or less per
  row, one pass. Few rows (a full reduction): a work-group per slice and enough slices per row to give the device
  ``groups_per_cu`` groups per compute unit, then a second pass over each row's partials (one group per row).
- ``cols`` (the outputs lie along a contiguous dim: ``m.sum(0)``, bias gradients, LayerNorm/BatchNorm partial
  sums): 2-D work-groups, ``col_lanes`` lanes along the outputs read consecutive columns (``load_width`` each),
  ``col_rows`` lanes along the rows; the rows are split into enough slabs to fill the device, then a second pass
  over each column's slab partials.

Each lane keeps ``accumulators`` independent accumulators and reads ``load_width`` elements per load (one vector
load where the addresses are aligned). A lane never loops more than ``max_iters`` times: longer spans are split
across more slices (this bounds both the latency and the rounding error of a lane's sequential sum).

The order of every operation depends on the shape, the strides and these profile values, never on the device's
compute units or fitted work-group sizes when the profile fixes the group count (``fixed_groups``, which the
deterministic profile sets): then every device adds in the same order. Otherwise the group target is
``groups_per_cu`` x compute units.

Shapes and sources: the design follows the usual GPU reduction (grid-stride partials, a shared-memory tree with
warp-synchronous last steps, a fixed-order second pass) as described in NVIDIA's "Optimizing Parallel Reduction
in CUDA" (M. Harris) and CUB's device reduce; column reductions as PyTorch's and CUB's "reduce along the
non-contiguous dim" kernels (lanes across the contiguous dim, the reduced dim split over the y dimension).
"""
from dataclasses import dataclass

from ... import _dtype as D
from ...backend import geometry
from ..elementwise import _collapse
from . import exchange
from .kernels import gpu_kernel

__all__ = ["Settings", "Pass", "settings", "rows_pass", "cols_pass", "choose_design", "plan_gpu"]

_MAX_SLABS = 65535          # groups in dimension 1 of a launch (CUDA's grid y): the column slabs stay below it


@dataclass(frozen=True)
class Settings:
    """The profile's ``[reduction]`` values of the GPU design (see devices/gpu.toml)."""
    local_size: int = 256
    groups_per_cu: int = 4
    fixed_groups: int = 0
    accumulators: int = 4
    load_width: int = 4
    row_team: int = 32
    col_lanes: int = 32
    col_rows: int = 8
    max_iters: int = 64


def settings(prof):
    """The :class:`Settings` of a profile."""
    d = Settings()
    return Settings(**{f: int(prof.get_value("reduction", f, getattr(d, f))) for f in d.__dataclass_fields__})


@dataclass(frozen=True)
class Pass:
    """One launch of the GPU design: ``design`` ("rows" | "cols"), ``team`` (rows: lanes per (output, slice);
    cols: lanes along the rows), ``slices`` (partials per output; 1: the launch finishes), ``vw`` (elements per
    load), ``nacc`` (accumulators per lane), ``local`` and ``global_size`` (the launch's sizes)."""
    design: str
    team: int
    slices: int
    vw: int
    nacc: int
    local: tuple
    global_size: tuple

    @property
    def groups(self):
        n = 1
        for g, l in zip(self.global_size, self.local):
            n *= g // l
        return n


def _cdiv(a, b):
    return -(-a // b)


def _pow2_ceil(n):
    p = 1
    while p < n:
        p *= 2
    return p


def _pow2_floor(n):
    p = 1
    while p * 2 <= n:
        p *= 2
    return p


def _target(rt, cfg):
    """Work-groups wanted for one launch: fixed by the profile, or groups_per_cu per compute unit."""
    return cfg.fixed_groups or cfg.groups_per_cu * max(1, int(rt.info.compute_units))


def rows_pass(rt, cfg, M, R, vw, slices=None, cap=None):
    """The ``rows`` launch for M outputs of R reduced elements each (``slices``: force that many partials per
    output; ``cap``: the largest work-group the kernel allows)."""
    want = _pow2_floor(max(1, cfg.local_size))
    fitted = geometry.fit_local(rt, want)[0]
    dev_l = _pow2_floor(min(want, fitted, cap or want))
    order_l = want if cfg.fixed_groups else dev_l          # the group size the order is planned with
    A = cfg.accumulators
    need = _pow2_ceil(_cdiv(R, vw * A))                     # lanes that give each lane one whole iteration
    target = _target(rt, cfg)
    small = min(cfg.row_team, need, order_l)
    if slices is not None:
        T, S = min(order_l, need), slices
    elif M * small >= target * order_l:                     # enough rows for warp-sized teams to fill the device
        T, S = small, 1
    else:                                                   # few rows: a group per slice, the rows split
        T = min(order_l, need)
        S = min(_cdiv(target * order_l, M * T), _cdiv(R, T * vw * A))
    if slices is None:
        S = max(S, _cdiv(R, T * vw * A * cfg.max_iters), 1)
    if T > dev_l:
        raise geometry.LaunchError(
            f"reduction: the fixed-order plan needs teams of {T} work-items but this device allows work-groups of "
            f"{dev_l}; lower [reduction] local_size in the profile")
    units = M * S
    local = geometry.fit_local(rt, (max(1, min(dev_l // T, units)) * T,), (units * T,))
    return Pass("rows", T, S, vw, A, local, geometry.grid((units * T,), local))


def cols_pass(rt, cfg, M, R, vw, slices=None, cap=None):
    """The ``cols`` launch for M outputs (columns, vw consecutive per lane) of R reduced rows each."""
    A = cfg.accumulators
    LY = min(_pow2_floor(max(1, cfg.col_rows)), _pow2_ceil(_cdiv(R, A)))
    lanes_x = _cdiv(M, vw)
    if slices is None:
        S = min(_cdiv(_target(rt, cfg), _cdiv(lanes_x, cfg.col_lanes)), _cdiv(R, LY * A))
        S = min(max(S, _cdiv(R, LY * A * cfg.max_iters), 1), _MAX_SLABS)
    else:
        S = slices
    local = geometry.fit_local(rt, (cfg.col_lanes, LY), (lanes_x, S * LY))
    while cap and local[0] * local[1] > cap and local[0] > 1:
        local = (local[0] // 2, local[1])
    if local[1] != LY:
        if cfg.fixed_groups:
            raise geometry.LaunchError(f"reduction: the fixed-order plan needs {LY} work-items along the rows of a "
                                       f"column reduction; this device allows {local[1]}")
        LY = local[1]
    return Pass("cols", LY, S, vw, A, local, geometry.grid((lanes_x, S * LY), local))


def choose_design(kshape, kstr, rshape, rstr):
    """"rows" when the reduced elements lie closer together than the outputs (or everything is reduced), else
    "cols" (neighbouring lanes then read neighbouring outputs)."""
    if not kshape:
        return "rows"
    if not rshape:
        return "cols" if kstr[-1] == 1 else "rows"
    if rstr[-1] == 1:
        return "rows"
    if kstr[-1] == 1:
        return "cols"
    return "rows" if min(abs(s) for s in rstr) <= min(abs(s) for s in kstr) else "cols"


def _vector_type(dt):
    """Whether OpenCL has vector loads of dtype ``dt`` without extensions (not half, not bfloat16)."""
    return dt is not D.float16 and dt is not D.bfloat16 and dt._kind != 3


def plan_gpu(p, x, s, kept, dims):
    """Fill plan ``p`` (M outputs of R elements each over the kept dims ``kept`` and the reduced dims ``dims`` of
    ``x``, spec ``s``) with the GPU design's launches."""
    from ..elementwise import _aligned
    rt, M, R, arg = p.rt, p.M, p.R, p.arg
    cfg = settings(rt.profile)
    kshape, (kstr,) = _collapse(tuple(x._shape[d] for d in kept), [tuple(x._stride[d] for d in kept)])
    if not arg:         # any order of the reduced dims gives the same set: read the smallest stride innermost
        dims = sorted(dims, key=lambda d: -x._stride[d])
    rshape, (rstr,) = _collapse(tuple(x._shape[d] for d in dims), [tuple(x._stride[d] for d in dims)])
    design = choose_design(kshape, kstr, rshape, rstr)
    rk, rr = len(kshape), len(rshape)
    tail = [M, R, 0, R]
    for s_, st in zip(kshape, kstr):
        tail += [s_, st]
    for s_, st in zip(rshape, rstr):
        tail += [s_, st]
    xchg = exchange.mode(rt)
    if xchg is None:                # undecided while a capture records: this plan is not kept (see exchange.mode)
        p.keep, xchg = False, ""
    lw = max(1, cfg.load_width)
    acc_vw = lw if _vector_type(s.acc_dtype) else 1
    if design == "rows":
        vw = lw if _vector_type(x.dtype) else 1
        rcont = rr == 1 and rstr[0] == 1
        valign = rcont and vw > 1 and all(st % vw == 0 for st in kstr) and _aligned(x, vw)
    else:
        vw = lw if _vector_type(x.dtype) and kstr[-1] == 1 and kshape[-1] % lw == 0 else 1
        rcont = False
        valign = vw > 1 and all(st % vw == 0 for st in kstr[:-1]) and all(st % vw == 0 for st in rstr) and \
            _aligned(x, vw)
    make = rows_pass if design == "rows" else cols_pass
    ps, k = _fit(rt, lambda cap: make(rt, cfg, M, R, vw, cap=cap),
                 lambda ps: gpu_kernel(rt, design, x.dtype, s.map_dtype, s.acc_dtype,
                                       s.out_dtype if ps.slices == 1 else s.acc_dtype, s.map_expr, s.combine,
                                       s.identity, s.finish if ps.slices == 1 else "acc", s.better, False, rk, rr,
                                       ps.slices == 1, team=ps.team, vw=ps.vw, nacc=ps.nacc, lsize=_size(ps.local),
                                       valign=valign, rcont=rcont, xchg=xchg if design == "rows" else ""))
    S = ps.slices
    tail[2] = S
    p.C, p.passes = S, [ps]
    p.launches.append((k, ps.global_size, ps.local, "out" if S == 1 else "part", "x", tail))
    if S == 1:
        return
    # the second pass: each output's S partials, in a fixed order (rows: part is (M, S); cols: part is (S, M))
    if design == "rows":
        vw2 = acc_vw
        ps2, k2 = _fit(rt, lambda cap: rows_pass(rt, cfg, M, S, vw2, slices=1, cap=cap),
                       lambda ps2: gpu_kernel(rt, "rows", s.acc_dtype, s.acc_dtype, s.acc_dtype, s.out_dtype, "x",
                                              s.combine, s.identity, s.finish, s.better, arg, 1, 1, True,
                                              team=ps2.team, vw=ps2.vw, nacc=ps2.nacc, lsize=_size(ps2.local),
                                              valign=vw2 > 1 and S % vw2 == 0, rcont=True, xchg=xchg))
        tail2 = [M, S, 1, R, M, S, S, 1]
    else:
        vw2 = acc_vw if M % lw == 0 else 1
        ps2, k2 = _fit(rt, lambda cap: cols_pass(rt, cfg, M, S, vw2, slices=1, cap=cap),
                       lambda ps2: gpu_kernel(rt, "cols", s.acc_dtype, s.acc_dtype, s.acc_dtype, s.out_dtype, "x",
                                              s.combine, s.identity, s.finish, s.better, arg, 1, 1, True,
                                              team=ps2.team, vw=ps2.vw, nacc=ps2.nacc, lsize=_size(ps2.local),
                                              valign=vw2 > 1, rcont=False, xchg=""))
        tail2 = [M, S, 1, R, M, 1, S, M]
    p.passes.append(ps2)
    p.launches.append((k2, ps2.global_size, ps2.local, "out", "part", tail2))


def _size(local):
    n = 1
    for v in local:
        n *= v
    return n


def _fit(rt, make, build):
    """(pass, kernel): the pass for the device, re-planned under the kernel's own work-group limit
    (CL_KERNEL_WORK_GROUP_SIZE) when the built kernel allows fewer work-items than planned."""
    ps = make(None)
    for _ in range(4):
        k = build(ps)
        cap = geometry.cap(rt, k)
        if _size(ps.local) <= cap:
            return ps, k
        ps = make(cap)
    raise geometry.LaunchError(f"reduction: no work-group size fits the kernel's limit of {cap} work-items")
