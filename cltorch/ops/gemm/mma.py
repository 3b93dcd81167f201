"""GEMM on matrix units (``cl_kernels/gemm_mma.cl.mako`` with the units of ``mma_units.cl.mako``), behind probes.

Matrix units multiply small tiles of 16-bit (or TF32) operands with float32 sums at many times the float units'
rate: NVIDIA's tensor cores (inline PTX ``mma.sync`` + ``ldmatrix``; NVIDIA's OpenCL has no other way), AMD's
MFMA (CDNA) and WMMA (RDNA3) builtins, Intel's DPAS (``cl_intel_subgroup_matrix_multiply_accumulate``). A unit
runs a product only when

1. the device profile (``[gemm] matrix_units``) or the environment (``CLTORCH_MATRIX_UNITS``, which wins) turns it
   on: ``"off"`` (every shipped profile: none of these kernels has been measured on a device yet), ``"auto"`` (the
   unit of the device's vendor and architecture), or unit names separated by commas (tried in order; a name with
   ``:emulated`` runs the same kernel with each instruction replaced by plain OpenCL C through local memory, on any
   device: that is how CPU devices and Oclgrind check the kernels' lane and fragment arithmetic), and
2. its probe passed on this device and driver: it builds the GEMM kernel of each tile row the profile lists and
   multiplies fixed matrices with edges in M, N and K in both layouts of each operand, against numpy in float64 of
   the same rounded inputs (``backend/probes.py`` keeps the verdict and its reason on disk per platform, device,
   driver, unit, dtype, variant and rows). A build error, a failed launch or wrong numbers fall back to the
   portable GPU design (``gpu.py``); :func:`report` says which design runs and why (``cltorch devices``,
   ``cltorch probe``).

dtypes: float16 and bfloat16 (every unit), float32 on TF32 units (NVIDIA) only while TF32 is allowed
(``cltorch.backends.cuda.matmul.allow_tf32``, ``set_float32_matmul_precision("high" | "medium")``; off by default, as
in torch). Deterministic mode never gets here (its profile runs the CPU design on every device).

Some variants of a unit differ in how its instruction is spelt (``nv_mma``: the ``asm`` keyword, ldmatrix's 32- or
64-bit address operand, or element loads instead of ldmatrix); the probe tries them in order and keeps the first
that passes.

Tile rows (``[gemm] mma_sizes``, else the unit's defaults below): ``{bm, bn, bk, wm, wn}``: a work-group computes a
``bm x bn`` tile with ``wm x wn`` warps (sub-groups) of the unit's width; ``bk`` is in 16-bit elements (halved for
float32). Rows are tried in order: the first whose work-groups reach ``groups_per_cu`` x compute units is taken,
else the last that fits the device's work-group and local-memory limits. Not measured on any device.
"""
import os

import numpy as np

from ... import _runtime_settings
from ...backend import geometry, probes
from ...backend.program import KernelBuildError

__all__ = ["UNITS", "ENV", "MmaPlan", "make_plan", "setting", "auto_units", "choose", "report", "unit_rows",
           "clear_cache", "storage_name"]

TEMPLATE = "gemm_mma.cl.mako"
ENV = "CLTORCH_MATRIX_UNITS"
VERSION = "1"
EMULATED = ":emulated"
NOT_PROBED = "not probed yet"

# name: (vendor, lanes per warp, {storage: (IM, IN, IK)}) -- the same table as mma_units.cl.mako's UNITS
# (tests/test_gemm_mma.py holds them equal)
UNITS = {
    "nv_mma": ("nvidia", 32, {"half": (16, 8, 16), "bf16": (16, 8, 16), "float": (16, 8, 8)}),
    "amd_mfma": ("amd", 64, {"half": (32, 32, 8), "bf16": (32, 32, 8)}),
    "amd_wmma": ("amd", 32, {"half": (16, 16, 16), "bf16": (16, 16, 16)}),
    "intel_dpas": ("intel", 8, {"half": (8, 8, 16), "bf16": (8, 8, 16)}),
    "intel_dpas16": ("intel", 16, {"half": (8, 16, 16), "bf16": (8, 16, 16)}),
}

# default tile rows per unit (register and local-memory budgets; not measured on a device)
ROWS = {
    "nv_mma": [dict(bm=128, bn=128, bk=32, wm=2, wn=4), dict(bm=64, bn=64, bk=32, wm=2, wn=2)],
    "amd_mfma": [dict(bm=128, bn=128, bk=32, wm=2, wn=2), dict(bm=64, bn=64, bk=32, wm=2, wn=2)],
    "amd_wmma": [dict(bm=128, bn=128, bk=32, wm=2, wn=4), dict(bm=64, bn=64, bk=32, wm=2, wn=2)],
    "intel_dpas": [dict(bm=64, bn=64, bk=32, wm=4, wn=4), dict(bm=32, bn=32, bk=32, wm=2, wn=2)],
    "intel_dpas16": [dict(bm=64, bn=128, bk=32, wm=4, wn=4), dict(bm=32, bn=64, bk=32, wm=2, wn=2)],
}

# spellings of a unit's instructions, tried in order by the probe (template parameters)
VARIANTS = {
    "nv_mma": [dict(asm_kw="__asm__", ldm="r32"), dict(asm_kw="__asm__", ldm="r64"),
               dict(asm_kw="asm", ldm="r32"), dict(asm_kw="__asm__", ldm="none")],
}
# emulated: ldmatrix's emulation (its address form does not matter there), so the lane arithmetic of the
# ldmatrix path is what an emulated run checks
EMU_VARIANTS = {"nv_mma": [dict(ldm="r32")]}
_PLAIN = [{}]
_SPELLING = dict(asm_kw="__asm__", ldm="none")      # template defaults a variant overrides
_ROW_KEYS = ("bm", "bn", "bk", "wm", "wn")
_I32, _I64 = np.int32, np.int64


def storage_name(dt):
    """The template's storage name for a numpy dtype that may run on matrix units ("half", "bf16", "float"), or
    None (float64)."""
    dt = np.dtype(dt)
    if dt == np.float16:
        return "half"
    if dt == np.float32:
        return "float"
    if str(dt) == "bfloat16":
        return "bf16"
    return None


def tf32_allowed():
    """True when float32 products may use TF32 units (torch's rule: precision "high" or "medium")."""
    return _runtime_settings.get_float32_matmul_precision() != "highest"


def setting(profile):
    """(value, where): the matrix-unit setting in force: ``CLTORCH_MATRIX_UNITS`` if set, else the profile's
    ``[gemm] matrix_units`` (default "off")."""
    env = os.environ.get(ENV)
    if env is not None and env.strip():
        return env.strip(), f"{ENV}={env.strip()}"
    g = profile.get("gemm", {}) if profile is not None else {}
    v = str(g.get("matrix_units", "off")).strip() or "off"
    return v, f'[gemm] matrix_units = "{v}" in the profile'


def auto_units(info):
    """The units a device's vendor and architecture have, best first (what "auto" tries)."""
    if not info.is_gpu:
        return []
    name = info.name.lower()
    if info.cls == "nvidia":
        return ["nv_mma"]
    if info.cls == "amd":
        if any(name.startswith(p) for p in ("gfx908", "gfx90a", "gfx94", "gfx95")) or "mi1" in name \
                or "mi2" in name or "mi3" in name:
            return ["amd_mfma"]
        if name.startswith("gfx11"):
            return ["amd_wmma"]
        return []
    if info.cls == "intel" and "cl_intel_subgroup_matrix_multiply_accumulate" in info.extensions:
        return ["intel_dpas", "intel_dpas16"]
    return []


def _parse(value, info):
    """[(unit, emulated)] the setting asks for, and a reason when that is none."""
    v = value.lower()
    if v in ("off", "0", "none", "false", ""):
        return [], "switched off"
    if v == "auto":
        units = auto_units(info)
        if not units:
            return [], f"no matrix unit known for {info.name} ({info.cls}{'' if info.is_gpu else ', not a GPU'})"
        return [(u, False) for u in units], ""
    out = []
    for part in v.split(","):
        part = part.strip()
        emu = part.endswith(EMULATED)
        name = part[:-len(EMULATED)] if emu else part
        if name not in UNITS:
            raise ValueError(f"matrix unit {part!r} unknown: expected 'off', 'auto' or names among "
                             f"{', '.join(UNITS)} (each optionally with ':emulated')")
        out.append((name, emu))
    return out, ""


def unit_rows(profile, unit, dts):
    """The tile rows of ``unit`` for storage ``dts`` (dicts bm, bn, bk, wm, wn; bk in elements of ``dts``)."""
    g = profile.get("gemm", {}) if profile is not None else {}
    table = g.get("mma_sizes") or ROWS[unit]
    rows = []
    for r in table:
        try:
            row = {k: int(r[k]) for k in _ROW_KEYS}
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"[gemm] mma_sizes row {r} needs integers {', '.join(_ROW_KEYS)}") from None
        if dts == "float":
            row["bk"] = max(UNITS[unit][2]["float"][2], row["bk"] // 2)
        rows.append(row)
    return rows


def row_problem(row, unit, dts, max_threads=None, local_mem=None, emulated=False):
    """Why ``row`` cannot make a kernel of ``unit`` for ``dts`` within the limits, or None."""
    _, W, shapes = UNITS[unit]
    if dts not in shapes:
        return f"{unit} has no {dts} instruction"
    IM, IN, IK = shapes[dts]
    bm, bn, bk, wm, wn = (row[k] for k in _ROW_KEYS)
    if min(bm, bn, bk, wm, wn) < 1 or bm % (wm * IM) or bn % (wn * IN) or bk % IK:
        return f"bm must be a multiple of wm x {IM}, bn of wn x {IN}, bk of {IK}"
    T = wm * wn * W
    if max_threads is not None and T > max_threads:
        return f"{T} work-items exceed the limit of {max_threads}"
    if (bm * bk) % T or (bn * bk) % T:
        return f"bm*bk and bn*bk must be multiples of the {T} work-items"
    nbytes = local_bytes(row, unit, dts, emulated)
    if local_mem is not None and nbytes > local_mem:
        return f"{nbytes} bytes of local memory exceed {local_mem}"
    return None


def local_bytes(row, unit, dts, emulated=False):
    """Local memory of a row's kernel: two buffers of each padded tile (and the emulation's scratch)."""
    es = 4 if dts == "float" else 2
    pad = 16 // es
    IM, IN, IK = UNITS[unit][2][dts]
    bm, bn, bk, wm, wn = (row[k] for k in _ROW_KEYS)
    # the larger of the two layouts of each operand (a plan's layouts are chosen after the row)
    tiles = 2 * es * (max(bm * (bk + pad), bk * (bm + pad)) + max(bn * (bk + pad), bk * (bn + pad)))
    if emulated:         # per warp: one IK slice's operands and (nv_mma, 16-bit) its ldmatrix row offsets
        fm, fn = bm // wm // IM, bn // wn // IN
        tiles += wm * wn * ((fm * IM * IK + fn * IK * IN) * es + (32 * 4 * (fm + (fn + 1) // 2)
                                                                  if unit == "nv_mma" and dts != "float" else 0))
    return tiles


# ----------------------------------------------------------------------------------------------- the choice
_chosen = {}


def clear_cache():
    """Forget the units chosen per device (the probes' verdicts stay on disk)."""
    _chosen.clear()


class Choice:
    """A unit that passed its probe on a device: name, emulated, the variant's template parameters, the rows."""

    def __init__(self, unit, emulated, variant, rows):
        self.unit, self.emulated, self.variant, self.rows = unit, emulated, variant, rows

    @property
    def label(self):
        return self.unit + (EMULATED if self.emulated else "")


def _probe_name(unit, emulated, dts, variant, rows):
    var = ",".join(f"{k}={v}" for k, v in sorted(variant.items())) or "-"
    rws = ";".join("x".join(str(r[k]) for k in _ROW_KEYS) for r in rows)
    return f"gemm matrix unit {unit}{EMULATED if emulated else ''} {dts} [{var}] rows {rws} v{VERSION}"


def choose(rt, dts):
    """``(Choice or None, why)``: the unit products of storage ``dts`` ("half", "bf16", "float") run on ``rt``'s
    device, probing each candidate the first time (while a capture records only verdicts already known count,
    nothing is launched: an unknown one gives ``(None, NOT_PROBED)``, not kept)."""
    value, where = setting(rt.profile)
    key = (rt.index, value, dts)
    hit = _chosen.get(key)
    if hit is not None:
        return hit
    try:
        cands, why = _parse(value, rt.info)
    except ValueError as e:
        return None, str(e)
    if not cands:
        out = (None, f"{why} ({where})")
        _chosen[key] = out
        return out
    reasons = []
    for unit, emu in cands:
        shapes = UNITS[unit][2]
        if dts not in shapes:
            reasons.append(f"{unit}: no {dts} instruction")
            continue
        lim = geometry.limits(rt)
        rows = [r for r in unit_rows(rt.profile, unit, dts)
                if row_problem(r, unit, dts, lim.max_work_group_size, lim.local_mem_size, emu) is None]
        if not rows:
            reasons.append(f"{unit}: no [gemm] mma_sizes row fits this device")
            continue
        for variant in (VARIANTS if not emu else EMU_VARIANTS).get(unit, _PLAIN):
            hit = probes.result(rt, _probe_name(unit, emu, dts, variant, rows),
                                lambda rt, u=unit, e=emu, v=variant, r=rows: probe(rt, u, e, dts, v, r))
            if hit is None:
                return None, NOT_PROBED
            ok, detail = hit
            if ok:
                out = (Choice(unit, emu, variant, rows), f"probe passed ({detail}; {where})")
                _chosen[key] = out
                return out
            spelt = f" [{', '.join(f'{k}={v}' for k, v in variant.items())}]" if variant else ""
            reasons.append(f"{unit}{EMULATED if emu else ''}{spelt}: {detail}")
            if detail.startswith("not built"):      # the same for every spelling
                break
    out = (None, "probe failed: " + " | ".join(reasons) + f" ({where})")
    _chosen[key] = out
    return out


# ----------------------------------------------------------------------------------------------- the probe
def _tf32(x):
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).copy()
    fin = (u & 0x7F800000) != 0x7F800000
    u[fin] = (u[fin] + np.uint32(0x1000)) & np.uint32(0xFFFFE000)
    return u.view(np.float32)


def _reference(a, b, dts):
    """float64 product of the operands as the unit sees them (TF32 rounds float32 inputs)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if dts == "float":
        a64, b64 = _tf32(a).astype(np.float64), _tf32(b).astype(np.float64)
    return a64 @ b64


def requirement(info, unit):
    """Why ``unit``'s real instructions are not even built for a device, or None. Inline PTX goes only to NVIDIA's
    compiler: LLVM's CPU back ends abort the process on it (PoCL: "LLVM ERROR: Cannot pop empty stack!"). The AMD
    and Intel kernels carry their own guards (an #error naming the missing builtin or extension), so any compiler
    reports a plain build error for them."""
    if unit == "nv_mma" and not (info.is_gpu and info.cls == "nvidia"):
        return (f"not built: inline PTX is for NVIDIA's OpenCL compiler, and {info.name} ({info.platform}) is not "
                "an NVIDIA GPU")
    return None


def _first_error(log):
    """The first error lines of a build log, without the compiler's temporary file names."""
    import re
    lines = [re.sub(r"^(error:\s*)?\S*:\d+:\d+:\s*(error:\s*)?", "", ln.strip())
             for ln in str(log).splitlines() if ln.strip()]
    errs = [ln for ln in lines if "error" in ln.lower() or ln.startswith('"')] or lines
    return " | ".join(errs[:3])[:300]


def check(rt, unit, emulated, dts, variant, rows, layouts=(("row", "row"), ("col", "col"))):
    """(ok, detail): the unit's GEMM kernel of each row, built on ``rt``'s device, multiplies fixed matrices with
    edges in M, N and K, in both layouts of each operand, to within float32 rounding of numpy's float64 product of
    the same (rounded) inputs. A failure's detail starts with what failed: "build error: ...", "launch error: ...",
    "wrong numbers: ..." (or "not built: ...", see :func:`requirement`)."""
    why = None if emulated else requirement(rt.info, unit)
    if why:
        return False, why
    try:
        return _check(rt, unit, emulated, dts, variant, rows, layouts)
    except KernelBuildError as e:
        return False, "build error: " + _first_error(e.log)
    except Exception as e:  # noqa: BLE001 - what a launch raises is the verdict's reason
        return False, f"launch error: {type(e).__name__}: {' '.join(str(e).split())[:240]}"


def probe(rt, unit, emulated, dts, variant, rows, timeout=600):
    """:func:`check`, for a unit's real instructions in a child process (see :func:`isolated`); emulated units are
    checked here."""
    if emulated:
        return check(rt, unit, emulated, dts, variant, rows)
    return isolated(rt, unit, "cltorch.ops.gemm.mma", "check", [unit, False, dts, variant, rows], timeout)


def isolated(rt, unit, module, func, args, timeout=600):
    """(ok, detail) of ``module.func(rt, *args)`` (a probe's check) in a child process on ``rt``'s device
    (``probes.isolated``): a kernel that faults on a GPU loses its context, and a compiler may abort; neither
    reaches the user's process. Refuses at once (see :func:`requirement`) what must not be built on this device."""
    why = requirement(rt.info, unit)
    if why:
        return False, why
    return probes.isolated(rt, module, func, args, timeout)


def _check(rt, unit, emulated, dts, variant, rows, layouts):
    import pyopencl as cl
    from ..._dtype import bfloat16
    npdt = {"half": np.float16, "bf16": np.dtype(bfloat16.np), "float": np.float32}[dts]
    rng = np.random.default_rng(11)
    worst = 0.0
    for row in rows:
        M, N, K = row["bm"] + 23, row["bn"] + 13, 2 * row["bk"] + 12     # edge tiles, a K tail in a step
        a = rng.uniform(-1, 1, (M, K)).astype(npdt)
        b = rng.uniform(-1, 1, (K, N)).astype(npdt)
        want = _reference(a, b, dts)
        for la, lb in layouts:           # default: A kc + B lc, then A lc + B kc (each operand in both layouts)
            ha = np.ascontiguousarray(a) if la == "row" else np.ascontiguousarray(a.T)
            hb = np.ascontiguousarray(b) if lb == "row" else np.ascontiguousarray(b.T)
            da = (0, K, 1, 0) if la == "row" else (0, 1, M, 0)
            db = (0, N, 1, 0) if lb == "row" else (0, 1, K, 0)
            c = np.zeros((M, N), npdt)
            mf = cl.mem_flags
            bufs = [rt.driver(cl.Buffer, rt.ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=x) for x in (ha, hb, c)]
            plan = MmaPlan(rt, np.dtype(npdt), dts, Choice(unit, emulated, variant, [row]), M, N, K, 1, da, db,
                           (0, N, 1, 0), False, 0, ValueError)
            plan.run(bufs[0], 0, bufs[1], 0, bufs[2], 0, 1.0, 0.0)
            rt.copy(c, bufs[2])
            rt.finish()
            got = c.astype(np.float64)
            err = float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))
            worst = max(worst, err)
            # 16-bit storage of C rounds to 2^-9 (float16) / 2^-8 (bfloat16) relative; float32 sums add ~K 2^-24
            tol = {"half": 2e-3, "bf16": 8e-3, "float": 1e-4}[dts]
            if not np.isfinite(err) or err > tol:
                return False, (f"wrong numbers: max relative error {err:.2e} (over {tol:.0e}) for a {M}x{N}x{K} "
                               f"product, A {la}-major, B {lb}-major, tile {row}")
    return True, f"{len(rows)} tile row(s), {len(layouts)} layouts each, max relative error {worst:.1e}"


# ----------------------------------------------------------------------------------------------- the plan
def _layout(ls, ks, BL, bk, T, dts, nat, other, bs, off_mod):
    """(layout, G) of an operand with lane stride ``ls`` and k stride ``ks`` (see gemm_mma.cl.mako)."""
    if ks == 1 and ls != 1:
        lay, extent = "kc", bk
    elif ls == 1:
        lay, extent = "lc", BL
    else:
        return "kc", 1
    for G in ((8, 4, 2) if dts != "float" else (4, 2)):
        if extent % G or (BL * bk) % (G * T):
            continue
        if nat and (other % G or bs % G or off_mod % G):
            continue
        return lay, G
    return lay, 1


class MmaPlan:
    """Kernel and launch geometry of one shape/stride signature on a matrix unit."""

    def __init__(self, rt, dt, dts, choice, M, N, K, batch, a, b, c, big, off_mod, error):
        self.rt = rt
        unit = choice.unit
        _, W, shapes = UNITS[unit]
        a_off, a_rs, a_cs, a_bs = a
        b_off, b_rs, b_cs, b_bs = b
        c_off, c_rs, c_cs, c_bs = c
        lim = geometry.limits(rt)
        g = rt.profile.get("gemm", {})
        rows = [r for r in choice.rows if row_problem(r, unit, dts, lim.max_work_group_size, lim.local_mem_size,
                                                      choice.emulated) is None]
        if not rows:
            raise error(f"gemm: no matrix-unit tile row of {unit} fits {rt.info.name}")
        target = max(1, int(float(g.get("groups_per_cu", 1)) * max(1, int(rt.info.compute_units))))
        row = None
        for r in rows:
            if r["bm"] < 2 * M and r["bn"] < 2 * N and -(-M // r["bm"]) * -(-N // r["bn"]) * batch >= target:
                row = r
                break
        row = row or rows[-1]
        bm, bn, bk, wm, wn = (row[k] for k in _ROW_KEYS)
        T = wm * wn * W
        nat = int(bool(getattr(rt.info, "is_gpu", False)))
        one = batch == 1
        a_lay, a_g = _layout(a_rs, a_cs, bm, bk, T, dts, nat, a_rs if a_cs == 1 else a_cs, 0 if one else a_bs,
                             off_mod)
        b_lay, b_g = _layout(b_cs, b_rs, bn, bk, T, dts, nat, b_cs if b_rs == 1 else b_rs, 0 if one else b_bs,
                             off_mod)
        idx = "long" if big else "int"
        it = _I64 if big else _I32
        self.params = dict(unit=unit, emu=int(choice.emulated), dt=dts, idx=idx, bm=bm, bn=bn, bk=bk, wm=wm, wn=wn,
                           a_lay=a_lay, a_g=a_g, b_lay=b_lay, b_g=b_g, nat=nat, gm=int(g.get("band", 8)),
                           c_epi=0, **dict(_SPELLING, **choice.variant))
        self.arg_types = [None, it, it, it, it, None, it, it, it, it, None, it, it, it, it,
                          _I32, _I32, _I32, np.float32, np.float32]
        k = rt.kernel(TEMPLATE, "gemm_mma", self.arg_types, **self.params)
        if geometry.cap(rt, k) < T:
            raise error(f"gemm: the {unit} kernel of tile {row} allows {geometry.cap(rt, k)} work-items per group "
                        f"on {rt.info.name}, below its {T}")
        groups = -(-M // bm) * -(-N // bn) * batch
        self.main = (k, *geometry.nd(rt, (groups * T,), (T,), k))
        if self.main[2] != (T,):
            raise error(f"gemm: the device's limits leave {self.main[2]} work-items per group for a tile of {T}")
        self.choice, self.row, self.T, self.groups = choice, row, T, groups
        self.a_strides, self.b_strides, self.c_strides = (a_rs, a_cs, a_bs), (b_rs, b_cs, b_bs), (c_rs, c_cs, c_bs)
        self.mnk = (M, N, K)

    def describe(self):
        """The plan's choices, for benchmarks and reports."""
        p = self.params
        return {"design": "mma", "unit": self.choice.label, "dtype": p["dt"], "bm": p["bm"], "bn": p["bn"],
                "bk": p["bk"], "warps": (p["wm"], p["wn"]), "threads": self.T, "groups": self.groups,
                "A": f"{p['a_lay']}x{p['a_g']}", "B": f"{p['b_lay']}x{p['b_g']}",
                **{k: v for k, v in self.choice.variant.items()}}

    def run(self, a_buf, a_off, b_buf, b_off, c_buf, c_off, alpha, beta, E=None):
        rt = self.rt
        k, gs, ls = self.main
        extra = ()
        if E is not None:
            cache = self.__dict__.setdefault("_epi", {})
            ke = cache.get(k)
            if ke is None:
                it = self.arg_types[1]
                ke = cache[k] = rt.kernel(TEMPLATE, "gemm_mma", self.arg_types + [None, it, it, it, it],
                                          **dict(self.params, c_epi=1))
            k, extra = ke, E
        rt.launch(k, gs, ls, a_buf, a_off, *self.a_strides, b_buf, b_off, *self.b_strides,
                  c_buf, c_off, *self.c_strides, *self.mnk, alpha, beta, *extra)


class Provisional(Exception):
    """No verdict yet and a capture records: the portable plan runs now and is not kept."""


def or_else(portable):
    """A plan maker (the signature of ``gpu.make_plan``) that makes the matrix-unit plan where :func:`make_plan`
    gives one, else ``portable``'s. While a capture records before the probe ran, the portable plan is marked
    ``provisional`` (``gemm()`` does not keep it: the next call outside the capture probes)."""
    def make(rt, dt, types, M, N, K, batch, a, b, c, big, off_mod, error):
        try:
            p = make_plan(rt, dt, types, M, N, K, batch, a, b, c, big, off_mod, error)
        except Provisional:
            p = portable(rt, dt, types, M, N, K, batch, a, b, c, big, off_mod, error)
            p.provisional = True
            return p
        return p if p is not None else portable(rt, dt, types, M, N, K, batch, a, b, c, big, off_mod, error)
    return make


def make_plan(rt, dt, types, M, N, K, batch, a, b, c, big, off_mod, error):
    """The matrix-unit plan for this product, or None when the portable design runs it: a dtype no unit takes
    (float64; float32 unless TF32 is allowed), no unit chosen on this device (switched off, none for its vendor,
    probe failed). Raises Provisional while a capture records and the probe has not run (its launches belong to
    no graph)."""
    dts = storage_name(dt)
    if dts is None or (dts == "float" and not tf32_allowed()):
        return None
    value, _ = setting(rt.profile)
    if value.lower() in ("off", "0", "none", "false", ""):
        return None
    choice, why = choose(rt, dts)
    if choice is None:
        if why == NOT_PROBED:
            raise Provisional()
        return None
    return MmaPlan(rt, dt, dts, choice, M, N, K, batch, a, b, c, big, off_mod, error)


def report(info, profile, runtime=None, design=None):
    """[(dtype name, design, why)] for float16, bfloat16 and float32 products on a device: which GEMM design runs
    them and why (matrix units switched off, no unit for this device, the probe's verdict and reason). ``runtime``:
    a callable giving the device's Runtime, called only when a probe has to be consulted. ``design``: the
    profile's GEMM design ("cpu" or "gpu")."""
    out = []
    value, where = setting(profile)
    for name, dts in (("float16", "half"), ("bfloat16", "bf16"), ("float32", "float")):
        if design == "cpu":
            out.append((name, "cpu", 'the profile\'s [gemm] design = "cpu" (register blocking, no matrix units)'))
            continue
        if dts == "float" and not tf32_allowed():
            out.append((name, "gpu", "float32 arithmetic (TF32 not allowed: cltorch.backends.cuda.matmul."
                                     "allow_tf32 / set_float32_matmul_precision('high') allow it)"))
            continue
        try:
            cands, why = _parse(value, info)
        except ValueError as e:
            out.append((name, "gpu", str(e)))
            continue
        if not cands:
            hint = "" if value.lower() != "off" else f"; {ENV}=auto turns them on"
            out.append((name, "gpu", f"matrix units {why} ({where}{hint})"))
            continue
        if not any(dts in UNITS[u][2] for u, _ in cands):
            out.append((name, "gpu", f"{', '.join(u for u, _ in cands)} has no {name} instruction"))
            continue
        if runtime is None:
            out.append((name, "gpu", "matrix units requested; the probe has not run"))
            continue
        choice, why = choose(runtime(), dts)
        out.append((name, f"mma:{choice.label}" if choice else "gpu", why))
    return out
