"""The CPU GEMM design: register blocking without local memory (``cl_kernels/gemm.cl.mako``).

A BLIS-style micro-kernel (Van Zee and van de Geijn, ACM TOMS 41(3), 2015): each work-item keeps an
``mr x (nv*vw)`` block of C in vector registers and walks all of K. B is read either in place (contiguous rows)
or from a panel buffer made by a small pack kernel (``[N/nr][K][nr]``, zero padded, so the k loop reads
consecutive aligned vectors and edge columns need no test). A is read through its strides or from a panel
buffer. Packing costs O(MK + KN) against the O(MNK) product, and is how transposed or otherwise strided operands
reach the fast layout.

Profile rows (``[gemm] sizes``, chosen by :func:`plan.choose_config`): ``mr, nv, vw`` (register block), ``lx, ly``
(work-group shape: launch dim 0 runs over row panels, or over column panels when ``kc > 0``), ``a_mode``
("strided" or "packed"), ``b_mode`` ("auto", "direct" or "packed"), and optional ``kc``/``tm`` (K blocking: each
work-item computes ``tm`` tiles stacked along M, K in blocks of ``kc``; 0 = off), ``ku`` (k-loop unroll pragma),
``pack_k`` (k steps per pack work-item, 8) and ``pack_local`` (pack work-group size, 16).

``b_mode = "auto"`` reads B in place when that is allowed (unit column stride and ``N >= nr``; when
``N % nr != 0`` the last column panel is computed at columns ``N - nr .. N - 1`` and stores only the columns
the panel before left, so no read passes row ends; vector accesses need only element alignment, as cpu tensors
over numpy memory are 16-byte aligned) and packs it otherwise.

Products with fewer rows than one tile and a transposed B (``x @ W.T`` for a small batch) run as
``C^T = B^T A^T``, so the big operand is read in place rather than packed.
"""
import numpy as np

from ...backend import geometry
from .plan import choose_config

__all__ = ["make_plan", "CpuPlan", "Swapped", "TEMPLATE", "ALL_PARAMS"]

TEMPLATE = "gemm.cl.mako"
_I32 = np.int32
_I64 = np.int64
_INT_MAX = 2 ** 31 - 1

# The template is rendered with strict_undefined, so every name it uses gets a value; those of the other
# kernels keep these fixed dummies (which also keeps the program cache keys small in number).
ALL_PARAMS = {"mr": 0, "nv": 0, "vw": 0, "a_mode": "", "b_mode": "", "ku": 0, "kc": 0, "tm": 0, "kb": 0,
              "c_epi": 0}


def _params(**kw):
    p = dict(ALL_PARAMS)
    p.update(kw)
    return p


def _contig(lane_stride, k_stride):
    """Which direction of an operand to pack is contiguous: "lane", "k" or "" (neither)."""
    if lane_stride == 1:
        return "lane"
    if k_stride == 1:
        return "k"
    return ""


def _cdiv(a, b):
    return -(-a // b)


def make_plan(rt, dt, types, M, N, K, batch, a, b, c, big, off_mod, error):
    """A plan for the product, or for its transpose ``C^T = B^T A^T`` when that reads better.

    The register-blocked kernel wants B with unit column stride (read in place) or packs B. When A has
    fewer rows than one tile and B is stored transposed (unit row stride: the weight of a linear
    layer, ``x @ W.T`` with a small batch), packing B would copy the big operand to multiply it once;
    the transposed product reads it in place as its A operand instead and packs only the small one.
    ``types``: (storage, accumulation) type names; ``big``: an operand passes 2^31 elements; ``off_mod``: the
    offsets' residue mod 4 (unused: this design needs element alignment only); ``error``: the exception class for a
    bad profile row.
    """
    cfg = choose_config(rt.profile, dt, M, N, K)
    if M < int(cfg["mr"]) and b[1] == 1 and b[2] != 1 and N > M:
        inner = CpuPlan(rt, cfg, types, N, M, K, batch, (b[0], b[2], b[1], b[3]), (a[0], a[2], a[1], a[3]),
                        (c[0], c[2], c[1], c[3]), big, error)
        return Swapped(inner)
    return CpuPlan(rt, cfg, types, M, N, K, batch, a, b, c, big, error)


class Swapped:
    """Runs a plan made for ``C^T = B^T A^T`` with the operands' roles exchanged."""

    def __init__(self, inner):
        self.inner = inner
        self.params = inner.params
        self.main = inner.main
        self.pack_a = inner.pack_b        # the roles of A and B are exchanged
        self.pack_b = inner.pack_a

    def describe(self):
        return dict(self.inner.describe(), swapped=True)

    def run(self, a_buf, a_off, b_buf, b_off, c_buf, c_off, alpha, beta, E=None):
        if E is not None:
            E = (E[0], E[1], E[3], E[2], E[4])      # E^T, as C^T
        self.inner.run(b_buf, b_off, a_buf, a_off, c_buf, c_off, alpha, beta, E)


class CpuPlan:
    """Kernels, launch geometry and temporary-buffer sizes for one shape/stride signature."""

    def __init__(self, rt, cfg, types, M, N, K, batch, a, b, c, big, error):
        self.rt = rt
        dts, acc = types
        asize = np.dtype(np.float64 if acc == "double" else np.float32).itemsize
        scal = np.float64 if acc == "double" else np.float32
        a_off, a_rs, a_cs, a_bs = a
        b_off, b_rs, b_cs, b_bs = b
        c_off, c_rs, c_cs, c_bs = c
        mr = int(cfg["mr"])
        vw = int(cfg["vw"])
        nv = int(cfg["nv"])
        if vw not in (1, 2, 4, 8, 16) or nv < 1 or mr < 1:
            raise error(f"gemm: bad profile row {cfg}: vw must be 1, 2, 4, 8 or 16, nv and mr positive")
        if M < mr:                                # short C: fewer rows per work-item (few distinct programs)
            mr = M if M <= 2 else min(4, mr) if M <= 4 else mr
        while nv > 1 and (nv - 1) * vw >= N:      # narrow C: fewer vectors per row
            nv -= 1
        nr = nv * vw
        kc = int(cfg.get("kc", 0))
        tm = max(1, int(cfg.get("tm", 1))) if kc else 0
        if kc and K <= kc and tm == 1:
            kc = tm = 0                           # one block of one tile: the plain kernel
        pack_a = cfg["a_mode"] == "packed" and K > 0
        b_mode = cfg["b_mode"]
        direct_ok = b_cs == 1 and N >= nr          # vector accesses need only element alignment
        pack_b = K > 0 and (b_mode == "packed" or not direct_ok)
        Mp, Np = _cdiv(M, mr), _cdiv(N, nr)
        ap_bs = Mp * mr * K
        bp_bs = Np * nr * K
        if pack_a and batch * ap_bs > _INT_MAX or pack_b and batch * bp_bs > _INT_MAX:
            big = True
        idx = "long" if big else "int"
        it = _I64 if big else _I32
        kb = int(cfg.get("pack_k", 8))
        # float and double read packed and in-place B with the same code; half and bfloat16 read packed panels
        # as float, so the mode is part of their program. Packed A has its own program (compile-time offsets).
        same = dts == acc
        a_mode = "packed" if pack_a else "strided"
        b_mode = "any" if same else ("packed" if pack_b else "direct")
        params = _params(dt=dts, acc=acc, idx=idx, mr=mr, nv=nv, vw=vw, a_mode=a_mode,
                         b_mode=b_mode, ku=int(cfg.get("ku", 0)), kc=kc, tm=tm, kb=kb)
        self.params = params
        pl = int(cfg.get("pack_local", 16))
        self.pack_a = self.pack_b = None      # (kernel, gsize, lsize, args after the source, temp bytes)
        self.tmp_bytes = 0
        pack_types = [None, it, it, it, it, _I32, _I32, None, it]
        nkb = _cdiv(K, kb)

        def pack_geometry(k, contig, panels):
            # dim 0 runs over panels when the source is lane-contiguous (see the template), else over k blocks
            extents = (panels, nkb, batch) if contig == "lane" else (nkb, panels, batch)
            return geometry.nd(rt, extents, (pl, 1, 1), k)

        if pack_a:
            ct = _contig(a_rs, a_cs)
            k = rt.kernel(TEMPLATE, "gemm_pack_a_" + (ct or "any"), pack_types, **params)
            self.pack_a = (k, *pack_geometry(k, ct, Mp), (a_rs, a_cs, a_bs, M, K), batch * ap_bs * asize)
            self.tmp_bytes += batch * ap_bs * asize
        if pack_b:
            ct = _contig(b_cs, b_rs)
            k = rt.kernel(TEMPLATE, "gemm_pack_b_" + (ct or "any"), pack_types, **params)
            self.pack_b = (k, *pack_geometry(k, ct, Np), (b_cs, b_rs, b_bs, N, K), batch * bp_bs * asize)
            self.tmp_bytes += batch * bp_bs * asize
        km = rt.kernel(TEMPLATE, "gemm_main",
                       [None, it, it, it, it, it, None, it, it, it, it, None, it, it, it, it, _I32,
                        _I32, _I32, _I32, scal, scal], **params)
        # flags: bit 0 vector stores of C; bit 1 B in place with its last panel shifted to end at column N
        flags = int(vw > 1 and c_cs == 1) | (2 if not pack_b and N % nr else 0)
        # dim 0 of the launch: row panels (kc == 0) or column panels (kc > 0); dim 1 the other one
        n0, n1 = (Mp, Np) if not kc else (Np, _cdiv(Mp, tm))
        self.main = (km, *geometry.nd(rt, (n0, n1, batch), (int(cfg["lx"]), int(cfg["ly"]), 1), km))
        # (row stride, k stride, batch stride, panel stride) as the kernel reads each operand
        self.a_strides = (1, mr, ap_bs, K * mr) if pack_a else (a_rs, a_cs, a_bs, mr * a_rs)
        self.b_strides = (nr, bp_bs, K * nr) if pack_b else (b_rs, b_bs, nr)
        self.c_rest = (c_rs, c_cs, c_bs, flags, M, N, K)
        self.ap_bs, self.bp_bs = ap_bs, bp_bs

    def describe(self):
        """The plan's choices, for benchmarks and reports."""
        p = self.params
        return {"design": "cpu", "mr": p["mr"], "nv": p["nv"], "vw": p["vw"], "kc": p["kc"], "tm": p["tm"],
                "A": "packed" if self.pack_a else "in place", "B": "packed" if self.pack_b else "in place",
                "lx": self.main[2][0], "ly": self.main[2][1]}

    def _e_args(self, E):
        """The main kernel to launch and the extra arguments for epilogue ``E`` (None: the plain kernel)."""
        if E is None:
            return self.main[0], ()
        k = self.__dict__.get("_epi_kernel")
        if k is None:
            from . import epilogue_kernel
            k = self._epi_kernel = epilogue_kernel(self.rt, self.main[0])
        return k, E

    def run(self, a_buf, a_off, b_buf, b_off, c_buf, c_off, alpha, beta, E=None):
        rt = self.rt
        launch = rt.launch      # the runtime's lock keeps another thread from swapping a kernel's arguments
        if self.pack_a is not None:
            k, gs, ls, rest, nbytes = self.pack_a
            tmp = rt.alloc(nbytes)
            launch(k, gs, ls, a_buf, a_off, *rest, tmp, self.ap_bs)
            a_buf, a_off = tmp, 0
        if self.pack_b is not None:
            k, gs, ls, rest, nbytes = self.pack_b
            tmp = rt.alloc(nbytes)
            launch(k, gs, ls, b_buf, b_off, *rest, tmp, self.bp_bs)
            b_buf, b_off = tmp, 0
        _, gs, ls = self.main
        km, extra = self._e_args(E)
        launch(km, gs, ls, a_buf, a_off, *self.a_strides, b_buf, b_off, *self.b_strides, c_buf, c_off, *self.c_rest,
               alpha, beta, *extra)
        if self.tmp_bytes:
            # the temporaries return to the pool when their last reference goes; the in-order queue runs
            # whatever reuses them after this GEMM
            rt.release(self.tmp_bytes)
