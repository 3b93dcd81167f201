"""The lane exchange of the GPU reductions' trees (``exchange_functions`` in cl_kernels/group_reduce.cl.mako):
which mechanism a device may use, decided by a probe.

The last steps of a team's tree (strides below the exchange width) can run on registers: NVIDIA's warp shuffle
through inline PTX (``shfl.sync.bfly``; NVIDIA's OpenCL has no sub-groups), Intel's ``intel_sub_group_shuffle_xor``
(``cl_intel_subgroups``), or ``sub_group_shuffle_xor`` (``cl_khr_subgroup_shuffle``). Each exchange step reads the
same two operands in the same order as the local-memory step it replaces, so the result has the same bits. The
probe builds the rows kernel with and without the mechanism, runs both on fixed data (float32 sums over teams
wider and narrower than a warp, an int64 sum, an argmax with ties, a float64 sum where the device has fp64) and
enables the mechanism only where every result is bit-identical (``backend/probes.py`` caches the verdict per
device and driver). The profile's ``[reduction] lane_exchange`` is "auto" (try the device's candidates), "off", or
one mechanism's name.
"""
import numpy as np

from ... import _dtype as D
from ...backend import geometry, probes

__all__ = ["mode", "candidates"]

_modes = {}
_VERSION = "1"


def candidates(info):
    """The mechanisms a device may have, best first."""
    ext = set(info.extensions)
    out = []
    if info.is_gpu and info.cls == "nvidia":
        out.append("ptx")
    if "cl_intel_subgroups" in ext:
        out.append("intel")
    if "cl_khr_subgroup_shuffle" in ext and "cl_khr_subgroups" in ext:
        out.append("khr")
    return out


def mode(rt):
    """The lane exchange the reductions use on ``rt``'s device: "ptx", "intel", "khr" or "" (none); None while
    a capture records and a probe it needs has not run (see ``backend/probes.py``; without the exchange the trees
    give the same bits, so a plan made then uses none and is not kept)."""
    want = rt.profile.get_value("reduction", "lane_exchange", "off") or "off"
    key = (rt.index, want)
    m = _modes.get(key)
    if m is None:
        m = ""
        if want != "off":
            for c in (candidates(rt.info) if want == "auto" else [want]):
                ok = probes.verdict(rt, f"reduction lane exchange {c} v{_VERSION}", lambda rt, c=c: _check(rt, c))
                if ok is None:
                    return None
                if ok:
                    m = c
                    break
        _modes[key] = m
    return m


def _run(rt, k, local, units, T, out_dt, x, arg):
    """Launch the rows kernel ``k`` (one pass, teams of T) over x (units rows) and return (values, indices)."""
    import pyopencl as cl
    mf = cl.mem_flags
    M, R = x.shape
    out = np.zeros(M, out_dt)
    iout = np.zeros(M, np.int64)
    bx, bo, bi = (rt.driver(cl.Buffer, rt.ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=a) for a in (x, out, iout))
    gsize = geometry.grid((units * T,), (local,))
    args = [bo, 0] + ([bi, 0] if arg else []) + [bx, 0, M, R, 1, R, M, R, R, 1]
    rt.launch(k, gsize, (local,), *args)        # never while a capture records (see mode)
    rt.copy(out, bo)
    rt.copy(iout, bi)
    rt.finish()
    return out, iout


def _check(rt, xchg):
    """(ok, detail): the rows kernel with ``xchg`` gives the bits of the one without, on fixed data."""
    from .kernels import gpu_kernel
    from ..reductions import _better
    rng = np.random.default_rng(7)
    f = (rng.standard_normal((37, 999)) * np.exp(rng.uniform(-8, 8, (37, 999)))).astype(np.float32)
    ties = rng.integers(0, 5, (37, 999)).astype(np.float32)
    ints = rng.integers(-2 ** 40, 2 ** 40, (37, 999)).astype(np.int64)
    cases = [("float32 sum, teams of 64", D.float32, f, "a + b", None, 64),
             ("float32 sum, teams of 8", D.float32, f, "a + b", None, 8),
             ("float32 argmax, teams of 32", D.float32, ties, "a", _better(True, True), 32),
             ("int64 sum, teams of 128", D.int64, ints, "a + b", None, 128)]
    if rt.info.fp64:
        cases.append(("float64 sum, teams of 64", D.float64, f.astype(np.float64), "a + b", None, 64))
    for name, dt, x, comb, better, T in cases:
        res = []
        for mech in (xchg, ""):
            k = gpu_kernel(rt, "rows", dt, dt, dt, dt, "x", comb, "0", "acc", better, False, 1, 1, True, team=T,
                           vw=1, nacc=2, lsize=128, valign=False, rcont=True, xchg=mech)
            res.append(_run(rt, k, 128, x.shape[0], T, x.dtype, x, better is not None))
        (v1, i1), (v0, i0) = res
        if v1.tobytes() != v0.tobytes() or (better is not None and not np.array_equal(i1, i0)):
            return False, f"{name}: the results differ from the local-memory tree's"
        if better is not None and not np.array_equal(i0, x.argmax(1)):
            return False, f"{name}: indices differ from numpy's first-index argmax"
        if better is None and not np.allclose(v0.astype(np.float64), x.astype(np.float64).sum(1), rtol=1e-4,
                                              atol=1e-6 * float(np.abs(x).max())):
            return False, f"{name}: sums far from float64's"
    return True, "bit-identical to the local-memory tree"
