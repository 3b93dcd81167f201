"""Which GEMM design runs, and with which tile, for a device profile and a product's shape (pure Python).

Two designs, chosen by the profile's ``[gemm] design``:

* ``"cpu"``: register blocking without local memory (``cpu.py``, ``cl_kernels/gemm.cl.mako``); its rows are
  looked up by size (:func:`choose_config`).
* ``"gpu"``: work-group tiles in local memory with register blocks per work-item (``gpu.py``,
  ``cl_kernels/gemm_gpu.cl.mako``); its rows are chosen by the parallelism they give (:func:`gpu_config`).

A profile written before the ``design`` key (``local = 1``) reads as the GPU design. Nothing here builds or runs
a kernel: the plan tests call these functions with a fake DeviceInfo (an H200) to state what a GPU gets.

GPU profile layout (``devices/*.toml``)::

    [gemm]
    design = "gpu"
    groups_per_cu = 1      # a row is used when its work-groups reach compute units x this
    split_k = 8            # most slices K is cut into (1: never split)
    split_k_min = 256      # fewest k per slice
    sizes = [              # in order of preference: the largest tiles first
      { bm = 128, bn = 128, bk = 8, tm = 8, tn = 8, vw = 4 },
      ...
    ]
    sizes_f64 = [ ... ]    # float64 (falls back to `sizes` with vw at most 2)

A row: the work-group computes a ``bm x bn`` tile of C, staging ``bk`` steps of K of A and B in local memory;
each of its ``(bm/tm) * (bn/tn)`` work-items keeps a ``tm x tn`` register block whose rows and columns come in
runs of ``vw`` (the width of its local-memory vector loads). Optional ``regs``: a register cap per work-item for
compilers that take one (NVIDIA's ``cl_nv_compiler_options``; 0 or absent: the compiler's choice).

How a row is chosen (:func:`gpu_config`): rows are tried in order. A row whose tile is at least twice the
product in M or in N is passed over (its work-items would mostly idle) unless it is the last. A row is taken
when its work-groups (tiles x batch) reach ``groups_per_cu x compute units``; failing that, when splitting K
into S slices (each at least ``split_k_min`` long, S at most ``split_k``) reaches it. If no row does, the last
row considered is taken with the most slices allowed. Split-K sums its slices in a second kernel in slice
order (no atomics), so a result does not depend on timing.
"""
import math
from dataclasses import dataclass

import numpy as np

__all__ = ["design", "choose_config", "row_for", "GpuConfig", "gpu_config", "gpu_rows", "PAD", "DEFAULT_GPU_ROWS"]

# Used when no profile has a [gemm] table (and to fill keys a profile row leaves out).
DEFAULT_REG = {"mr": 6, "nv": 2, "vw": 8, "lx": 4, "ly": 4, "a_mode": "strided", "b_mode": "auto",
               "ku": 0, "kc": 0, "tm": 0, "pack_local": 16, "pack_k": 8}
DEFAULT_GPU_ROWS = [{"bm": 64, "bn": 64, "bk": 16, "tm": 4, "tn": 4, "vw": 4},
                    {"bm": 32, "bn": 32, "bk": 16, "tm": 4, "tn": 4, "vw": 4}]
PAD = 4          # elements each local row is padded by (keeps vw-aligned rows off each other's banks)
_ROW_KEYS = ("bm", "bn", "bk", "tm", "tn", "vw")


class ProfileRowError(ValueError):
    """A GPU profile row that no kernel can be made from (the message says which constraint fails)."""


def design(profile):
    """"cpu" or "gpu": the GEMM design a (merged) profile asks for."""
    g = profile.get("gemm", {}) if profile is not None else {}
    d = g.get("design")
    if d is None:
        return "gpu" if int(g.get("local", 0)) else "cpu"
    if d not in ("cpu", "gpu"):
        raise ValueError(f"[gemm] design must be \"cpu\" or \"gpu\", got {d!r}")
    return d


def row_for(table, size, M=None):
    """The first row of ``table`` for cube-root size ``size`` and ``M`` rows (rows with ``m_upto`` are
    skipped when M is None)."""
    for row in table:
        if row.get("upto", math.inf) >= size and ("m_upto" not in row or M is not None and row["m_upto"] >= M):
            return row
    return table[-1]


def choose_config(profile, dtype, M, N, K):
    """The CPU design's profile row for an ``M x N x K`` product of ``dtype`` (a dict of template values).

    Rows are looked up by ``cbrt(M*N*K)`` (``upto``) and, where a row has ``m_upto``, by ``M`` too: the first
    row with ``upto >= cbrt(M*N*K)`` and ``m_upto >= M``. float64 uses ``sizes_f64`` or, without it, the fp32
    row with its vector width halved.
    """
    dtype = np.dtype(dtype)
    g = profile.get("gemm", {}) if profile is not None else {}
    size = float(max(M, 1) * max(N, 1) * max(K, 1)) ** (1.0 / 3.0)
    halve = False
    table = None
    if dtype == np.float64:
        table = g.get("sizes_f64")
        if not table:
            halve = True
    if not table:
        table = g.get("sizes") or [{}]
    cfg = dict(DEFAULT_REG)
    cfg.update(row_for(table, size, M))
    cfg.pop("upto", None)
    cfg.pop("m_upto", None)
    cfg["local"] = 0
    if halve:
        cfg["vw"] = max(1, int(cfg["vw"]) // 2)
    return cfg


@dataclass(frozen=True)
class GpuConfig:
    """One GPU-design launch: the tile (``bm, bn, bk``), the register block (``tm x tn`` in runs of ``vw``),
    the work-group size ``threads``, the K slices ``splits`` of ``kc`` steps each, and the work-groups."""
    bm: int
    bn: int
    bk: int
    tm: int
    tn: int
    vw: int
    splits: int
    kc: int
    groups: int
    regs: int = 0

    @property
    def threads(self):
        return (self.bm // self.tm) * (self.bn // self.tn)

    def local_bytes(self, itemsize):
        """Local memory of the two staged tiles (double buffering), padded rows."""
        return 2 * self.bk * (self.bm + PAD + self.bn + PAD) * itemsize

    def row(self):
        r = {k: getattr(self, k) for k in _ROW_KEYS}
        if self.regs:
            r["regs"] = self.regs
        return r


def check_row(row, acc_size=4, max_threads=None, local_mem=None):
    """Raise ProfileRowError unless ``row`` (a dict with bm, bn, bk, tm, tn, vw) makes a kernel within the
    limits (work-items per group, local memory in bytes)."""
    try:
        bm, bn, bk, tm, tn, vw = (int(row[k]) for k in _ROW_KEYS)
    except (KeyError, TypeError, ValueError):
        raise ProfileRowError(f"GEMM profile row {row} needs integers bm, bn, bk, tm, tn, vw") from None
    why = None
    if vw not in (1, 2, 4):
        why = "vw must be 1, 2 or 4"
    elif min(bm, bn, bk, tm, tn) < 1 or bm % tm or bn % tn or tm % vw or tn % vw:
        why = "tm and tn must divide bm and bn, and vw divide tm and tn"
    else:
        threads = (bm // tm) * (bn // tn)
        if (bm * bk) % threads or (bn * bk) % threads:
            why = f"bm*bk and bn*bk must be multiples of the {threads} work-items"
        elif max_threads is not None and threads > max_threads:
            why = f"{threads} work-items exceed the limit of {max_threads}"
        elif local_mem is not None and 2 * bk * (bm + bn + 2 * PAD) * acc_size > local_mem:
            why = f"{2 * bk * (bm + bn + 2 * PAD) * acc_size} bytes of local memory exceed {local_mem}"
    if why:
        raise ProfileRowError(f"GEMM profile row {row}: {why}")


def gpu_rows(profile, dtype):
    """The GPU design's rows for ``dtype`` (dicts with bm, bn, bk, tm, tn, vw), in order of preference."""
    g = profile.get("gemm", {}) if profile is not None else {}
    table = None
    if np.dtype(dtype) == np.float64:
        table = g.get("sizes_f64")
        if not table:
            table = [dict(r, vw=min(2, int(r.get("vw", 4)))) for r in (g.get("sizes") or [])]
    if not table:
        table = g.get("sizes") or []
    rows = []
    for r in table:
        if not all(k in r for k in ("bm", "bn")):
            continue                   # a row of another design (an old tuned profile): not this design's
        d = dict(DEFAULT_GPU_ROWS[0])
        d.update({k: int(r[k]) for k in _ROW_KEYS if k in r})
        if int(r.get("regs", 0)):
            d["regs"] = int(r["regs"])
        rows.append(d)
    return rows or [dict(r) for r in DEFAULT_GPU_ROWS]


def _cdiv(a, b):
    return -(-a // b)


def gpu_config(profile, compute_units, dtype, M, N, K, batch=1, max_threads=None, local_mem=None, rows=None):
    """The :class:`GpuConfig` for a ``batch`` of ``M x N x K`` products (see the module docstring for the
    rule). ``compute_units``: the device's; ``max_threads``, ``local_mem``: its limits (rows beyond them are
    skipped); ``rows``: replaces the profile's table (the tuner). Raises ProfileRowError when no row fits."""
    g = profile.get("gemm", {}) if profile is not None else {}
    acc_size = 8 if np.dtype(dtype) == np.float64 else 4
    cands = []
    errors = []
    for r in (rows if rows is not None else gpu_rows(profile, dtype)):
        try:
            check_row(r, acc_size, max_threads, local_mem)
        except ProfileRowError as e:
            errors.append(str(e))
            continue
        cands.append(r)
    if not cands:
        raise ProfileRowError("no GEMM profile row fits this device: " + "; ".join(errors))
    target = max(1, math.ceil(float(g.get("groups_per_cu", 1)) * max(1, int(compute_units))))
    max_split = max(1, int(g.get("split_k", 8)))
    min_k = max(1, int(g.get("split_k_min", 256)))
    chosen = None
    usable = [r for r in cands if not (r["bm"] >= 2 * M or r["bn"] >= 2 * N)] or [cands[-1]]
    for r in usable:
        tiles = _cdiv(M, r["bm"]) * _cdiv(N, r["bn"]) * batch
        if tiles >= target:
            chosen = (r, 1)
            break
        s = min(max_split, _cdiv(target, tiles), K // min_k)
        if s >= 2 and tiles * s >= target:
            chosen = (r, s)
            break
    if chosen is None:
        r = usable[-1]
        chosen = (r, max(1, min(max_split, K // min_k)))
    r, s = chosen
    bk = r["bk"]
    kc = _round_up(_cdiv(max(K, 1), s), bk)
    s = max(1, _cdiv(K, kc)) if K > 0 else 1
    tiles = _cdiv(M, r["bm"]) * _cdiv(N, r["bn"]) * batch
    return GpuConfig(r["bm"], r["bn"], bk, r["tm"], r["tn"], r["vw"], s, kc, tiles * s, int(r.get("regs", 0)))


def _round_up(a, b):
    return _cdiv(a, b) * b
