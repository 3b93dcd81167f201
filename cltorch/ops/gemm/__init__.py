"""The GEMM launcher: ``C[b] = alpha * A[b] @ B[b] + beta * C[b]`` on one OpenCL device.

This module knows buffers, element offsets and strides, not Tensors; the matmul family of ops
(``matmul``, ``mm``, ``bmm``, ``addmm``, ``baddbmm``, ``linear``, ...) lowers to :func:`gemm`.

Kernel: ``cl_kernels/gemm.cl.mako``. Two code paths, chosen by the device profile's ``[gemm]`` table:

* ``local = 0`` (CPU devices): register blocking without local memory, a BLIS-style micro-kernel (Van Zee
  and van de Geijn, ACM TOMS 41(3), 2015). Each work-item keeps an ``mr x (nv*vw)`` block of C in
  vector registers and walks all of K. B is read either in place (``direct``: contiguous rows, aligned)
  or from a panel buffer made by a small pack kernel (``packed``: ``[N/nr][K][nr]``, zero padded, so
  the k loop reads consecutive aligned vectors and edge columns need no test). A is read through its
  strides (``strided``) or from a panel buffer (``packed``). Packing costs O(MK + KN) against the
  O(MNK) product, and is how transposed or otherwise strided operands reach the fast layout.
* ``local = 1`` (GPUs): work-group tiles of A and B staged in local memory, each work-item
  accumulating an ``mr x nr`` register tile (Volkov and Demmel, SC 2008). Operands are read through
  their strides.

Profile layout (``devices/*.toml``)::

    [gemm]
    local = 0
    sizes = [            # fp32 and fp16; the first row whose `upto` >= cbrt(M*N*K) (and `m_upto` >= M) is used
      { upto = 384, mr = 6, nv = 2, vw = 8, lx = 8, ly = 8, a_mode = "strided", b_mode = "auto" },
      ...
    ]
    sizes_f64 = [ ... ]  # the same for float64 (falls back to `sizes` with the vector width halved)

``b_mode = "auto"`` reads B in place when that is allowed (unit column stride and ``N >= nr``; when
``N % nr != 0`` the last column panel is computed at columns ``N - nr .. N - 1`` and stores only the columns
the panel before left, so no read passes row ends; vector accesses need only element alignment, as cpu tensors
over numpy memory are 16-byte aligned) and packs it otherwise. Optional keys of a ``local = 0`` row: ``kc`` and
``tm`` (K blocking: each work-item computes ``tm`` tiles stacked along M, K in blocks of ``kc``; 0 = off),
``ku`` (k-loop unroll pragma), ``pack_k`` (k steps per pack work-item, 8) and ``pack_local`` (pack
work-group size, 16). ``lx, ly`` are the main kernel's work-group shape (launch dim 0 runs over row
panels, or over column panels when ``kc > 0``). For ``local = 1`` a row holds ``lx, ly, mr, nr, tk``.

Products with fewer rows than one tile and a transposed B (``x @ W.T`` for a small batch) run as
``C^T = B^T A^T``, so the big operand is read in place rather than packed.

Every kernel and every launch plan is cached: a repeated call with the same shapes and strides costs a
dict lookup plus the enqueues (a few microseconds each). Nothing here waits for the device.
"""
import math

import numpy as np

__all__ = ["gemm", "GemmError", "choose_config", "clear_cache", "epilogue_kernel"]

_TEMPLATE = "gemm.cl.mako"

_I32 = np.int32
_I64 = np.int64
_INT_MAX = 2 ** 31 - 1

# Used when no profile has a [gemm] table (and to fill keys a profile row leaves out).
_DEFAULT_REG = {"mr": 6, "nv": 2, "vw": 8, "lx": 4, "ly": 4, "a_mode": "strided", "b_mode": "auto",
                "ku": 0, "kc": 0, "tm": 0, "pack_local": 16, "pack_k": 8}
_DEFAULT_LOCAL = {"lx": 16, "ly": 16, "mr": 4, "nr": 4, "tk": 16}

# The template is rendered with strict_undefined, so every name it uses gets a value; those of the other
# kernels keep these fixed dummies (which also keeps the program cache keys small in number).
_ALL_PARAMS = {"use_local": 0, "mr": 0, "nv": 0, "vw": 0, "a_mode": "", "b_mode": "", "ku": 0, "kc": 0,
               "tm": 0, "kb": 0, "lx": 0, "ly": 0, "nr": 0, "tk": 0, "a_kfast": 0, "b_kfast": 0, "c_epi": 0}


def _params(**kw):
    p = dict(_ALL_PARAMS)
    p.update(kw)
    return p


def _contig(lane_stride, k_stride):
    """Which direction of an operand to pack is contiguous: "lane", "k" or "" (neither)."""
    if lane_stride == 1:
        return "lane"
    if k_stride == 1:
        return "k"
    return ""


_DTYPES = {np.dtype(np.float32): ("float", "float"), np.dtype(np.float64): ("double", "double"),
           np.dtype(np.float16): ("half", "float")}


class GemmError(ValueError):
    """Bad arguments to :func:`gemm` (negative sizes, unsupported dtype, malformed descriptor)."""


_plans = {}


def clear_cache():
    """Forget every launch plan (kernels stay cached in their Runtime)."""
    _plans.clear()


def _cdiv(a, b):
    return -(-a // b)


def _round_up(a, b):
    return _cdiv(a, b) * b


def _row_for(table, size, M=None):
    """The first row of ``table`` for cube-root size ``size`` and ``M`` rows (rows with ``m_upto`` are
    skipped when M is None)."""
    for row in table:
        if row.get("upto", math.inf) >= size and ("m_upto" not in row or M is not None and row["m_upto"] >= M):
            return row
    return table[-1]


def choose_config(profile, dtype, M, N, K):
    """The profile row used for an ``M x N x K`` product of ``dtype`` (a dict of template values).

    ``profile`` is a Runtime's merged profile. Rows are looked up by ``cbrt(M*N*K)`` (``upto``) and, where a
    row has ``m_upto``, by ``M`` too: the first row with ``upto >= cbrt(M*N*K)`` and ``m_upto >= M``.
    """
    dtype = np.dtype(dtype)
    g = profile.get("gemm", {}) if profile is not None else {}
    local = int(g.get("local", 0))
    size = float(max(M, 1) * max(N, 1) * max(K, 1)) ** (1.0 / 3.0)
    halve = False
    table = None
    if dtype == np.float64:
        table = g.get("sizes_f64")
        if not table:
            halve = True
    if not table:
        table = g.get("sizes") or [{}]
    base = _DEFAULT_LOCAL if local else _DEFAULT_REG
    cfg = dict(base)
    cfg.update(_row_for(table, size, M))
    cfg.pop("upto", None)
    cfg.pop("m_upto", None)
    cfg["local"] = local
    if halve and not local:
        cfg["vw"] = max(1, int(cfg["vw"]) // 2)
    return cfg


def _check_desc(name, d):
    if not isinstance(d, (tuple, list)) or len(d) != 5:
        raise GemmError(f"gemm: operand {name} must be (buffer, offset, row_stride, col_stride, batch_stride), "
                        f"got {d!r}")
    for x in d[1:]:
        try:
            if int(x) != x:
                raise ValueError
        except (TypeError, ValueError):
            raise GemmError(f"gemm: operand {name}'s offset and strides must be integers, got {d!r}") from None


def _extent(off, batch, bs, rows, rs, cols, cs):
    """Largest element index an operand touches (plus one)."""
    return off + max(batch - 1, 0) * bs + max(rows - 1, 0) * rs + max(cols - 1, 0) * cs + 1


def gemm(rt, M, N, K, A, B, C, alpha=1.0, beta=0.0, batch=1, dtype=np.float32, E=None):
    """Enqueue ``C[b] = alpha * A[b] @ B[b] + beta * C[b] (+ E[b])`` for ``b < batch`` on ``rt``'s queue.

    Arguments:
        rt: a ``cltorch.backend.Runtime``.
        M, N, K: A is ``M x K``, B is ``K x N``, C is ``M x N`` (each per batch entry); 0 is allowed.
        A, B, C: descriptors ``(buffer, offset, row_stride, col_stride, batch_stride)``, all in elements
            of ``dtype``; element ``(b, i, j)`` of an operand is ``buffer[offset + b*batch_stride +
            i*row_stride + j*col_stride]``. Strides may be anything non-negative (0 broadcasts), so
            transposed and sliced operands are passed as they are, with no copy by the caller. C must not
            overlap A or B, and C's elements must not overlap each other.
        alpha, beta: scalars. When ``beta == 0`` C is not read (NaN or Inf in C do not propagate), as
            in BLAS and ``torch.addmm``.
        batch: number of independent products.
        dtype: numpy dtype of all three operands: float32, float64 (device needs fp64), or float16
            (read and written with ``vload_half``/``vstore_half_rte``, accumulated in float32).
        E: optional epilogue operand, a descriptor like A's (``M x N`` per batch entry; strides may be 0, so a
            bias row broadcasts with ``row_stride = 0``), added after the rest is rounded to C's type: the
            stored value equals the GEMM's followed by a separate elementwise ``C + E``. float32 and float64
            only; E may be read-only shared with A or B but must not overlap C.

    Returns nothing and does not wait: the work is queued in order on ``rt.queue``. Temporary panel
    buffers come from ``rt.alloc`` and go back to the pool once queued (safe on the in-order queue).

    Raises GemmError on negative sizes, a malformed descriptor or an unsupported dtype (float16 with E).
    """
    try:
        a_buf, a_off, a_rs, a_cs, a_bs = A
        b_buf, b_off, b_rs, b_cs, b_bs = B
        c_buf, c_off, c_rs, c_cs, c_bs = C
        # offsets are not part of the key, only whether any passes 2^30
        key = (rt, dtype, M, N, K, batch, a_rs, a_cs, a_bs, b_rs, b_cs, b_bs, c_rs, c_cs, c_bs,
               (a_off | b_off | c_off) >> 30)
        plan = _plans[key]
    except (KeyError, TypeError, ValueError):
        for name, d in (("A", A), ("B", B), ("C", C)):
            _check_desc(name, d)
        a_buf, a_off, a_rs, a_cs, a_bs = (int(x) if i else x for i, x in enumerate(A))
        b_buf, b_off, b_rs, b_cs, b_bs = (int(x) if i else x for i, x in enumerate(B))
        c_buf, c_off, c_rs, c_cs, c_bs = (int(x) if i else x for i, x in enumerate(C))
        key = (rt, dtype, M, N, K, batch, a_rs, a_cs, a_bs, b_rs, b_cs, b_bs, c_rs, c_cs, c_bs,
               (a_off | b_off | c_off) >> 30)
        plan = _plans.get(key)
        if plan is None:
            plan = _make_plan(rt, np.dtype(dtype), M, N, K, batch, (a_off, a_rs, a_cs, a_bs),
                              (b_off, b_rs, b_cs, b_bs), (c_off, c_rs, c_cs, c_bs))
            _plans[key] = plan
    if E is not None:
        _check_desc("E", E)
        if np.dtype(dtype) == np.float16:
            raise GemmError("gemm: the epilogue operand E supports float32 and float64, not float16")
        if min(int(x) for x in E[1:]) < 0:
            raise GemmError(f"gemm: operand E has a negative offset or stride: {tuple(E[1:])}")
        E = (E[0], *(int(x) for x in E[1:]))
    plan.run(a_buf, a_off, b_buf, b_off, c_buf, c_off, alpha, beta, E)


def epilogue_kernel(rt, params):
    """The ``gemm_main`` kernel of ``params`` (a main kernel's template values) with the ``E`` epilogue
    (``c_epi = 1``; arguments: the main kernel's, then ``E, e_off, e_rs, e_cs, e_bs``)."""
    if params.get("dt") == "half":
        raise GemmError("gemm: the epilogue operand E supports float32 and float64, not float16")
    it = _I64 if params["idx"] == "long" else _I32
    scal = np.float64 if params["acc"] == "double" else np.float32
    if params["use_local"]:
        types = [None, it, it, it, it, None, it, it, it, it, None, it, it, it, it, _I32, _I32, _I32, scal, scal]
    else:
        types = [None, it, it, it, it, it, None, it, it, it, it, None, it, it, it, it, _I32,
                 _I32, _I32, _I32, scal, scal]
    p = dict(params)
    p["c_epi"] = 1
    return rt.kernel(_TEMPLATE, "gemm_main", types + [None, it, it, it, it], **p)


def _e_args(self, E):
    """The main kernel to launch and the extra arguments for epilogue ``E`` (None: the plain kernel)."""
    if E is None:
        return self.main[0], ()
    k = self.__dict__.get("_epi_kernel")
    if k is None:
        k = self._epi_kernel = epilogue_kernel(self.rt, self.params)
    return k, E


def _make_plan(rt, dt, M, N, K, batch, a, b, c):
    """A plan for the product, or for its transpose ``C^T = B^T A^T`` when that reads better.

    The register-blocked kernel wants B with unit column stride (read in place) or packs B. When A has
    fewer rows than one tile and B is stored transposed (unit row stride: the weight of a linear
    layer, ``x @ W.T`` with a small batch), packing B would copy the big operand to multiply it once;
    the transposed product reads it in place as its A operand instead and packs only the small one.
    """
    if dt in _DTYPES and M > 0 and N > 0 and batch > 0:
        cfg = choose_config(rt.profile, dt, M, N, K)
        if not cfg["local"] and M < int(cfg["mr"]) and b[1] == 1 and b[2] != 1 and N > M:
            inner = _Plan(rt, dt, N, M, K, batch, (b[0], b[2], b[1], b[3]), (a[0], a[2], a[1], a[3]),
                          (c[0], c[2], c[1], c[3]))
            return _Swapped(inner)
    return _Plan(rt, dt, M, N, K, batch, a, b, c)


class _Swapped:
    """Runs a plan made for ``C^T = B^T A^T`` with the operands' roles exchanged."""

    def __init__(self, inner):
        self.inner = inner
        self.params = inner.params
        self.main = inner.main
        self.pack_a = getattr(inner, "pack_b", None)     # the roles of A and B are exchanged
        self.pack_b = getattr(inner, "pack_a", None)

    def run(self, a_buf, a_off, b_buf, b_off, c_buf, c_off, alpha, beta, E=None):
        if E is not None:
            E = (E[0], E[1], E[3], E[2], E[4])      # E^T, as C^T
        self.inner.run(b_buf, b_off, a_buf, a_off, c_buf, c_off, alpha, beta, E)


class _Plan:
    """Kernels, launch geometry and temporary-buffer sizes for one shape/stride signature."""

    def __init__(self, rt, dt, M, N, K, batch, a, b, c):
        if dt not in _DTYPES:
            raise GemmError(f"gemm: unsupported dtype {dt}; expected float32, float64 or float16")
        for n, v in (("M", M), ("N", N), ("K", K), ("batch", batch)):
            if int(v) != v or v < 0:
                raise GemmError(f"gemm: {n} must be a non-negative integer, got {v!r}")
        for name, d in (("A", a), ("B", b), ("C", c)):
            if min(d) < 0:
                raise GemmError(f"gemm: operand {name} has a negative offset or stride: {d}")
        self.rt = rt
        self.noop = M == 0 or N == 0 or batch == 0
        if self.noop:
            return
        dts, acc = _DTYPES[dt]
        self.launch_list = []
        cfg = choose_config(rt.profile, dt, M, N, K)
        self.cfg = cfg
        asize = np.dtype(np.float64 if acc == "double" else np.float32).itemsize
        a_off, a_rs, a_cs, a_bs = a
        b_off, b_rs, b_cs, b_bs = b
        c_off, c_rs, c_cs, c_bs = c
        # plans are shared by calls whose offsets differ (all below 2^30, or the key says otherwise)
        off = 2 ** 30 if max(a_off, b_off, c_off) < 2 ** 30 else _INT_MAX
        big = max(_extent(off, batch, a_bs, M, a_rs, K, a_cs), _extent(off, batch, b_bs, K, b_rs, N, b_cs),
                  _extent(off, batch, c_bs, M, c_rs, N, c_cs)) > _INT_MAX
        scal = np.float64 if acc == "double" else np.float32
        self.scal = scal
        if cfg["local"]:
            self._init_local(rt, cfg, dts, acc, asize, M, N, K, batch, a, b, c, big, scal)
        else:
            self._init_reg(rt, cfg, dts, acc, asize, M, N, K, batch, a, b, c, big, scal)

    # ----------------------------------------------------------------- register-blocked (CPU)
    def _init_reg(self, rt, cfg, dts, acc, asize, M, N, K, batch, a, b, c, big, scal):
        a_off, a_rs, a_cs, a_bs = a
        b_off, b_rs, b_cs, b_bs = b
        c_off, c_rs, c_cs, c_bs = c
        mr = int(cfg["mr"])
        vw = int(cfg["vw"])
        nv = int(cfg["nv"])
        if vw not in (1, 2, 4, 8, 16) or nv < 1 or mr < 1:
            raise GemmError(f"gemm: bad profile row {cfg}: vw must be 1, 2, 4, 8 or 16, nv and mr positive")
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
        # float and double read packed and in-place B with the same code; half reads packed panels as
        # float, so the mode is part of its program. Packed A has its own program (compile-time offsets).
        same = dts == acc
        a_mode = "packed" if pack_a else "strided"
        b_mode = "any" if same else ("packed" if pack_b else "direct")
        params = _params(dt=dts, acc=acc, idx=idx, use_local=0, mr=mr, nv=nv, vw=vw, a_mode=a_mode,
                         b_mode=b_mode, ku=int(cfg.get("ku", 0)), kc=kc, tm=tm, kb=kb)
        self.params = params
        pl = int(cfg.get("pack_local", 16))
        self.pack_a = self.pack_b = None      # (kernel, gsize, lsize, args after the source, temp bytes)
        self.tmp_bytes = 0
        pack_types = [None, it, it, it, it, _I32, _I32, None, it]
        nkb = _cdiv(K, kb)

        def pack_geometry(contig, panels):
            if contig == "lane":                  # dim 0 runs over panels (see the template)
                l0 = max(1, min(pl, panels))
                return (_round_up(panels, l0), nkb, batch), (l0, 1, 1)
            l0 = max(1, min(pl, nkb))
            return (_round_up(nkb, l0), panels, batch), (l0, 1, 1)

        if pack_a:
            ct = _contig(a_rs, a_cs)
            k = rt.kernel(_TEMPLATE, "gemm_pack_a_" + (ct or "any"), pack_types, **params)
            self.pack_a = (k, *pack_geometry(ct, Mp), (a_rs, a_cs, a_bs, M, K), batch * ap_bs * asize)
            self.tmp_bytes += batch * ap_bs * asize
        if pack_b:
            ct = _contig(b_cs, b_rs)
            k = rt.kernel(_TEMPLATE, "gemm_pack_b_" + (ct or "any"), pack_types, **params)
            self.pack_b = (k, *pack_geometry(ct, Np), (b_cs, b_rs, b_bs, N, K), batch * bp_bs * asize)
            self.tmp_bytes += batch * bp_bs * asize
        km = rt.kernel(_TEMPLATE, "gemm_main",
                       [None, it, it, it, it, it, None, it, it, it, it, None, it, it, it, it, _I32,
                        _I32, _I32, _I32, scal, scal], **params)
        # flags: bit 0 vector stores of C; bit 1 B in place with its last panel shifted to end at column N
        flags = int(vw > 1 and c_cs == 1) | (2 if not pack_b and N % nr else 0)
        # dim 0 of the launch: row panels (kc == 0) or column panels (kc > 0); dim 1 the other one
        n0, n1 = (Mp, Np) if not kc else (Np, _cdiv(Mp, tm))
        lx = max(1, min(int(cfg["lx"]), n0))
        ly = max(1, min(int(cfg["ly"]), n1))
        self.main = (km, (_round_up(n0, lx), _round_up(n1, ly), batch), (lx, ly, 1))
        # (row stride, k stride, batch stride, panel stride) as the kernel reads each operand
        self.a_strides = (1, mr, ap_bs, K * mr) if pack_a else (a_rs, a_cs, a_bs, mr * a_rs)
        self.b_strides = (nr, bp_bs, K * nr) if pack_b else (b_rs, b_bs, nr)
        self.c_rest = (c_rs, c_cs, c_bs, flags, M, N, K)
        self.ap_bs, self.bp_bs = ap_bs, bp_bs
        self.run = self._run_reg

    _e_args = _e_args

    def _run_reg(self, a_buf, a_off, b_buf, b_off, c_buf, c_off, alpha, beta, E=None):
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

    # ----------------------------------------------------------------- local-memory tiles (GPU)
    def _init_local(self, rt, cfg, dts, acc, asize, M, N, K, batch, a, b, c, big, scal):
        lx, ly, mr, nr, tk = (int(cfg[k]) for k in ("lx", "ly", "mr", "nr", "tk"))
        lmem = getattr(rt.info, "local_mem", 0) or 32768
        while tk > 1 and tk * (ly * mr + 1 + lx * nr + 1) * asize > lmem:
            tk //= 2
        idx = "long" if big else "int"
        it = _I64 if big else _I32
        params = _params(dt=dts, acc=acc, idx=idx, use_local=1, lx=lx, ly=ly, mr=mr, nr=nr, tk=tk,
                         a_kfast=int(a[2] == 1), b_kfast=int(b[1] == 1))
        self.params = params
        km = rt.kernel(_TEMPLATE, "gemm_main",
                       [None, it, it, it, it, None, it, it, it, it, None, it, it, it, it, _I32, _I32, _I32,
                        scal, scal], **params)
        gs = (_cdiv(N, lx * nr) * lx, _cdiv(M, ly * mr) * ly, batch)
        self.main = (km, gs, (lx, ly, 1))
        self.a_strides, self.b_strides, self.c_strides = a[1:], b[1:], c[1:]
        self.mnk = (M, N, K)
        self.run = self._run_local

    def _run_local(self, a_buf, a_off, b_buf, b_off, c_buf, c_off, alpha, beta, E=None):
        _, gs, ls = self.main
        km, extra = self._e_args(E)
        self.rt.launch(km, gs, ls, a_buf, a_off, *self.a_strides, b_buf, b_off, *self.b_strides,
           c_buf, c_off, *self.c_strides, *self.mnk, alpha, beta, *extra)

    def run(self, *args):        # replaced per instance; a no-op plan does nothing
        return None
