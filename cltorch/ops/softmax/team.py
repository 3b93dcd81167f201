"""Row teams, the GPU design of softmax / log_softmax (``cl_kernels/softmax_team.cl.mako``), and the team plan the
norms' and cross_entropy's GPU designs share (``cl_kernels/row_team.cl.mako``).

A row along the last dim belongs to a team of ``lanes`` work-items (the profile table's ``lanes`` rows by row
length, 2 to 32), several teams per work-group. Lane t reads elements 32 i + t S .. 32 i + t S + S - 1 (S = 32 /
lanes) of the row, so a team reads each group of 32 elements in one coalesced transaction, and a lane's elements are
the CPU design's stripes t S .. t S + S - 1: the sums add in the CPU design's one order (32 stripes, then a balanced
tree), and the two designs give the same bits. A lane keeps up to ``cache`` values per array in registers: a row that
fits (R <= 32 K) is read from global memory once and the forward writes it once; a longer row is streamed in blocks
of K groups per pass (K loads in flight per lane). The lanes meet through a lane exchange where a probe allowed one
(``ops/reduction/exchange.py``: NVIDIA's shfl.sync in inline PTX, sub-group shuffles), else through local memory.

Shapes and sources: PyTorch's persistent "warp softmax" (a warp per row, each lane loading every 32nd element into
registers, warp shuffles for the row's max and sum) and its block softmax for long rows; Apex/Megatron's fused
softmax kernels; FlashAttention's online rescaling is not used (it would change the order of the sums).
"""
import math
from dataclasses import dataclass

import numpy as np

from ...backend import geometry
from ...backend.program import KernelBuildError
from ..reduction import exchange
from .common import kernel, is_host, compute_dtype, types_of, launch

__all__ = ["Team", "lanes", "layout", "plan", "softmax_fwd", "softmax_bwd"]


@dataclass(frozen=True)
class Team:
    """A team launch: ``tpr`` lanes per row, work-groups of ``ls`` work-items (``ls // tpr`` rows each), ``k``
    groups of 32 elements per lane in registers at once, ``cached`` whether a whole row fits there, ``xchg`` the
    lane exchange ("" for local memory), ``kernel`` the built kernel."""
    tpr: int
    ls: int
    k: int
    cached: bool
    xchg: str
    kernel: object

    def work_items(self, nrows):
        rpg = self.ls // self.tpr
        return -(-nrows // rpg) * self.ls


def _pow2_floor(n):
    return 1 << (max(1, int(n)).bit_length() - 1)


def _pow2_ceil(n):
    return 1 << max(0, int(n) - 1).bit_length()


def lanes(prof, table, R):
    """Lanes per row for rows of R elements: the first of the profile table's ``lanes`` rows whose ``upto`` >= R
    (none: 32). Raises ValueError unless it is a power of two from 2 to 32."""
    tpr = 32
    for row in prof.get_value(table, "lanes", None) or ():
        if row.get("upto", math.inf) >= R:
            tpr = int(row["lanes"])
            break
    if tpr not in (2, 4, 8, 16, 32):
        raise ValueError(f"[{table}] lanes must be a power of two from 2 to 32 in the GPU design, got {tpr} "
                         f"(profile {prof.name})")
    return tpr


_plans = {}


def layout(prof, table, R, arrays, tpr=None, kcap=None):
    """(lanes, K, cached) for rows of R elements under profile ``prof``'s table: lanes by R (:func:`lanes`, or
    ``tpr``), K groups of 32 per lane in registers, as many as the table's ``cache`` (values per lane) allows for
    ``arrays`` row arrays held at once (the forward 1, the backward 2) but no more than the row needs, and whether
    the whole row fits (``kcap``: at most that many groups). Pure: plan tests call it with a device's profile."""
    tpr = tpr or lanes(prof, table, R)
    S = 32 // tpr
    groups = max(1, -(-R // 32))
    kmax = _pow2_floor(max(1, int(prof.get_value(table, "cache", 128)) // (S * arrays)))
    k = min(_pow2_ceil(groups), kmax, kcap or kmax)
    return tpr, k, groups <= k


def plan(rt, table, R, arrays, key, build, tpr=None, kcap=None):
    """The :class:`Team` for rows of R elements: :func:`layout` under the device's own profile, and the work-group
    size from the table's ``local_size`` fitted to the device and the kernel (a multiple of 32 with a lane exchange,
    so sub-groups and warps hold whole teams). ``build(tpr, ls, k, cached, xchg)`` returns the kernel (``key``: what
    else it depends on; plans are memoised); ``tpr`` forces the lanes, ``kcap`` caps K. None of these values changes
    the order of a sum."""
    mkey = (rt.index, table, R, arrays, key, tpr, kcap)
    t = _plans.get(mkey)
    if t is not None:
        return t
    prof = rt.native_profile
    tpr, k, cached = layout(prof, table, R, arrays, tpr, kcap)
    xchg = exchange.mode(rt)
    keep = xchg is not None            # undecided while a capture records: use local memory, keep no plan
    xchg = xchg or ""
    want = int(prof.get_value(table, "local_size", 128))
    multiple = max(tpr, 32) if xchg else tpr
    try:
        kern, ls = geometry.template_local(rt, max(want, multiple), lambda L: build(tpr, L, k, cached, xchg),
                                           multiple)
    except KernelBuildError:
        if not xchg:
            raise
        # the probe passed for the reductions' kernel but this one does not build with the exchange: local memory
        xchg = ""
        kern, ls = geometry.template_local(rt, max(want, tpr), lambda L: build(tpr, L, k, cached, xchg), tpr)
    t = Team(tpr, ls, k, cached, xchg, kern)
    if keep:
        if len(_plans) > 4096:
            _plans.clear()
        _plans[mkey] = t
    return t


_L = np.int64
_FWD_ARGS = [None, _L, None, _L, _L, _L, _L, _L]
_BWD_ARGS = [None, _L, None, _L, _L, _L, None, _L, _L, _L, _L, _L]


def softmax_fwd(out, x, nrows, R, so, sr, log, safe):
    """Launch the team forward over ``nrows`` rows of R elements along the last dim of x (row stride so, element
    stride sr) into the contiguous ``out``."""
    rt = out._runtime()
    ct = compute_dtype(x.dtype)
    contig = sr == 1

    def build(tpr, ls, k, cached, xchg):
        return kernel(rt, "softmax_team.cl.mako", "softmax_team_fwd", _FWD_ARGS, T=x.dtype.cl, CT=ct.cl,
                      log=bool(log), safe=bool(safe), TPR=tpr, LS=ls, K=k, cached=cached, contig=contig,
                      which="fwd", xchg=xchg, types=types_of(x.dtype, ct))
    t = plan(rt, "softmax", R, 1, ("fwd", x.dtype.cl, bool(log), bool(safe), contig), build)
    launch(rt, t.kernel, t.work_items(nrows), t.ls, out._storage.cl_buffer(), out._offset, x._storage.cl_buffer(),
           x._offset, nrows, R, so, sr, host=is_host(out, x))
    return t


def softmax_bwd(gi, g, gso, gsr, y, yso, ysr, nrows, R, log):
    """Launch the team backward (see softmax_team.cl.mako) into the contiguous ``gi``."""
    rt = gi._runtime()
    ct = compute_dtype(y.dtype)
    contig = gsr == 1 and ysr == 1

    def build(tpr, ls, k, cached, xchg):
        return kernel(rt, "softmax_team.cl.mako", "softmax_team_bwd", _BWD_ARGS, T=y.dtype.cl, CT=ct.cl,
                      log=bool(log), safe=False, TPR=tpr, LS=ls, K=k, cached=cached, contig=contig,
                      which="bwd", xchg=xchg, types=types_of(y.dtype, ct))
    t = plan(rt, "softmax", R, 2, ("bwd", y.dtype.cl, bool(log), contig), build)
    launch(rt, t.kernel, t.work_items(nrows), t.ls, gi._storage.cl_buffer(), gi._offset, g._storage.cl_buffer(),
           g._offset, gso, gsr, y._storage.cl_buffer(), y._offset, yso, ysr, nrows, R, host=is_host(gi, g, y))
    return t
