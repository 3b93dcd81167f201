"""The GPU GEMM design: work-group tiles in local memory, register blocks, split-K (``cl_kernels/gemm_gpu.cl.mako``).

:func:`plan.gpu_config` chooses the tile and the number of K slices; this module fits the choice to the
operands' layouts (which fetch pattern, how wide the global loads may be, whether C takes vector stores), builds
the kernels, checks them against the device (a kernel whose work-group limit, ``CL_KERNEL_WORK_GROUP_SIZE``, is
below its tile's work-items is passed over for the next row) and queues the launches.

Launches: one ``gemm_tile`` over ``groups x threads`` work-items in dimension 0 (batch entries, K slices and
tiles all folded there: NVIDIA allows 65,535 groups in dimensions 1 and 2 only); with K split in S slices,
``gemm_tile`` writes S partial sums into a workspace (``[S][batch][M][N]`` in the accumulation type, from the
runtime's pool) and ``gemm_splitk_sum`` adds them in slice order into C.

Matrix units (tensor cores through inline PTX, AMD's MFMA/WMMA builtins, Intel's DPAS) are ``mma.py``'s design,
chosen per dtype behind a probe before this one (``DESIGNS["gpu"] = mma.or_else(gpu.make_plan)``); this design runs
every product they do not take.
"""
import numpy as np

from ...backend import geometry
from ...backend.program import KernelBuildError
from . import plan as _plan

__all__ = ["GpuPlan", "make_plan", "TEMPLATE", "layout"]

TEMPLATE = "gemm_gpu.cl.mako"
_I32 = np.int32
_I64 = np.int64


def _register_cap(rt, regs):
    """Build options capping registers per work-item at ``regs`` (a row's ``regs``), where the compiler takes a cap:
    NVIDIA's ``cl_nv_compiler_options`` (``-cl-nv-maxrregcount``: with 256 work-items, 128 registers let two
    groups share an SM's 64 K registers). () elsewhere, for 0, or after the driver refused it once."""
    if not regs or getattr(rt, "_gemm_no_cap", False) or "cl_nv_compiler_options" not in rt.info.extensions:
        return ()
    return (f"-cl-nv-maxrregcount={int(regs)}",)


def layout(lanes, k, ls, ks, bs, off_mod, dt, nat, threads):
    """(fast, ga) for an operand with ``lanes`` lanes (BM or BN), K tile ``k`` (BK), lane, k and batch strides
    ``ls``, ``ks``, ``bs``: which direction a work-item's global load runs along ("k" or "l") and how many elements
    it takes. A unit-stride direction is read with vectors of up to 4 elements where the offsets and the other
    strides keep them aligned (``nat``: the kernel reads float and double vectors at natural alignment;
    ``off_mod``: the offsets' residue mod 4, 0 when all are multiples of 4)."""
    if ks == 1 and ls != 1:
        fast, extent, other = "k", k, ls
    elif ls == 1:
        fast, extent, other = "l", lanes, ks
    else:
        return ("l" if ls <= ks else "k"), 1
    for ga in (4, 2):
        if extent % ga or (lanes * k // ga) % threads:
            continue
        if nat and dt in ("float", "double") and (other % ga or bs % ga or off_mod % ga):
            continue
        return fast, ga
    return fast, 1


class GpuPlan:
    """Kernels, launch geometry and workspace size of one shape/stride signature under the GPU design."""

    def __init__(self, rt, dt, types, M, N, K, batch, a, b, c, big, off_mod, error):
        self.rt = rt
        dts, acc = types
        self.acc_size = 8 if acc == "double" else 4
        self.scal = np.float64 if acc == "double" else np.float32
        a_off, a_rs, a_cs, a_bs = a
        b_off, b_rs, b_cs, b_bs = b
        c_off, c_rs, c_cs, c_bs = c
        lim = geometry.limits(rt)
        g = rt.profile.get("gemm", {})
        rows = _plan.gpu_rows(rt.profile, dt)
        nat = int(bool(getattr(rt.info, "is_gpu", False)))
        while True:
            try:
                cfg = _plan.gpu_config(rt.profile, rt.info.compute_units, dt, M, N, K, batch,
                                       lim.max_work_group_size, lim.local_mem_size, rows)
            except _plan.ProfileRowError as e:
                raise error(f"gemm: {e}") from None
            threads = cfg.threads
            ws = cfg.splits * batch * M * N if cfg.splits > 1 else 0
            idx = "long" if big or ws > 2 ** 31 - 1 else "int"
            it = _I64 if idx == "long" else _I32
            one = batch == 1            # a single entry's batch stride is never used
            a_fast, a_ga = layout(cfg.bm, cfg.bk, a_rs, a_cs, 0 if one else a_bs, off_mod, dts, nat, threads)
            b_fast, b_ga = layout(cfg.bn, cfg.bk, b_cs, b_rs, 0 if one else b_bs, off_mod, dts, nat, threads)
            vw = cfg.vw
            if cfg.splits > 1:
                c_vec = int(not nat or N % vw == 0)
            else:
                c_vec = int(c_cs == 1 and (not nat or (c_rs % vw == 0 and (batch == 1 or c_bs % vw == 0)
                                                   and off_mod % vw == 0)))
            params = dict(dt=dts, acc=acc, idx=idx, bm=cfg.bm, bn=cfg.bn, bk=cfg.bk, tm=cfg.tm, tn=cfg.tn, vw=vw,
                          nat=nat, a_fast=a_fast, a_ga=a_ga, b_fast=b_fast, b_ga=b_ga,
                          gm=int(g.get("band", 8)),
                          c_vec=c_vec, split=int(cfg.splits > 1), c_epi=0)
            types_tile = [None, it, it, it, it, None, it, it, it, it, None, it, it, it, it, it,
                          _I32, _I32, _I32, _I32, self.scal, self.scal]
            options = _register_cap(rt, cfg.regs)
            try:
                k = rt.kernel(TEMPLATE, "gemm_tile", types_tile, options, **params)
            except KernelBuildError:
                if not options:
                    raise
                rt._gemm_no_cap = True   # the driver refused the option: build without it from now on
                options = ()
                k = rt.kernel(TEMPLATE, "gemm_tile", types_tile, **params)
            if geometry.cap(rt, k) >= threads:
                break
            # the compiled kernel allows fewer work-items than its tile has (registers): the next row
            rows = [r for r in rows if r != cfg.row()]
            if not rows:
                raise error(f"gemm: no GEMM profile row's kernel fits {rt.info.name}: the last, {cfg.row()}, "
                            f"allows {geometry.cap(rt, k)} work-items per group, below its {threads}")
        self.cfg = cfg
        self.params = params
        self.main = (k, *geometry.nd(rt, (cfg.groups * threads,), (threads,), k))
        if self.main[2] != (threads,):
            raise error(f"gemm: the device's limits leave {self.main[2]} work-items per group for a tile of "
                        f"{threads}")
        self.a_strides, self.b_strides = (a_rs, a_cs, a_bs), (b_rs, b_cs, b_bs)
        self.mnk = (M, N, K, cfg.kc)
        self.c_strides = (c_rs, c_cs, c_bs, 0)
        self.ws_elems = ws
        if cfg.splits > 1:
            total = batch * M * N
            ks = rt.kernel(TEMPLATE, "gemm_splitk_sum",
                           [None, it, _I32, None, it, it, it, it, _I32, _I32, it, self.scal, self.scal],
                           options, **dict(params, split=0))
            self.sum = (ks, *geometry.nd(rt, (total,), (int(g.get("sum_local", 256)),), ks))
            self.w_strides = (N, 1, M * N, total)       # the workspace as gemm_tile's C: rows, cols, batch, slice
            self.sum_rest = (c_rs, c_cs, c_bs, M, N, total)

    def describe(self):
        """The plan's choices, for benchmarks, the tuner and reports."""
        c, p = self.cfg, self.params
        return {"design": "gpu", "bm": c.bm, "bn": c.bn, "bk": c.bk, "tm": c.tm, "tn": c.tn, "vw": c.vw,
                "regs": c.regs, "threads": c.threads, "splits": c.splits, "groups": c.groups,
                "A": f"{p['a_fast']}x{p['a_ga']}", "B": f"{p['b_fast']}x{p['b_ga']}"}

    def _e_args(self, k, E):
        """The kernel ``k`` with the E epilogue, and E's arguments (None: ``k`` itself)."""
        if E is None:
            return k, ()
        cache = self.__dict__.setdefault("_epi", {})
        ke = cache.get(k)
        if ke is None:
            from . import epilogue_kernel
            ke = cache[k] = epilogue_kernel(self.rt, k)
        return ke, E

    def run(self, a_buf, a_off, b_buf, b_off, c_buf, c_off, alpha, beta, E=None):
        rt = self.rt
        k, gs, ls = self.main
        M, N, K, kc = self.mnk
        if self.ws_elems:
            nbytes = self.ws_elems * self.acc_size
            w = rt.alloc(nbytes)
            rt.launch(k, gs, ls, a_buf, a_off, *self.a_strides, b_buf, b_off, *self.b_strides,
                      w, 0, *self.w_strides, M, N, K, kc, alpha, beta)
            ks, gs2, ls2 = self.sum
            ks, extra = self._e_args(ks, E)
            rt.launch(ks, gs2, ls2, w, self.w_strides[3], self.cfg.splits, c_buf, c_off, *self.sum_rest,
                      alpha, beta, *extra)
            rt.release(nbytes)     # the block returns to the pool with its last reference (after the queue)
            return
        k, extra = self._e_args(k, E)
        rt.launch(k, gs, ls, a_buf, a_off, *self.a_strides, b_buf, b_off, *self.b_strides,
                  c_buf, c_off, *self.c_strides, M, N, K, kc, alpha, beta, *extra)


def make_plan(rt, dt, types, M, N, K, batch, a, b, c, big, off_mod, error):
    """The GPU design's plan (see :class:`GpuPlan`)."""
    return GpuPlan(rt, dt, types, M, N, K, batch, a, b, c, big, off_mod, error)
