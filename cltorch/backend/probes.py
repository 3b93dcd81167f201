"""Verdicts of probes that build and run a kernel to decide whether a device may use a vendor intrinsic.

A vendor's intrinsic (inline PTX on NVIDIA, sub-group shuffles on Intel or through ``cl_khr_subgroup_shuffle``,
matrix units: ``ops/gemm/mma.py``) is used only after a probe built a kernel with it on the device and checked its
numbers against the portable kernel's or a float64 reference. The verdict and the probe's words (why it failed, or
what it checked) are kept in memory and on disk, keyed by platform, device, driver version and probe name (a
probe's name carries its version: a changed probe judges again), so each probe runs once per machine and driver.
"""
import json
import os

__all__ = ["verdict", "result", "known"]

_memo = {}


def _path():
    from .paths import cache_dir
    return cache_dir().parent / "probe_verdicts.json"


def _key(rt, name):
    info = rt.info
    return "|".join((info.platform, info.name, info.driver_version, name))


def _saved():
    try:
        return json.loads(_path().read_text())
    except (OSError, ValueError):
        return {}


def verdict(rt, name, check):
    """The cached verdict of probe ``name`` on ``rt``'s device, running ``check(rt)`` the first time.

    ``check`` returns (ok, detail); an exception it raises counts as (False, its message). Returns ok (a bool)."""
    return result(rt, name, check)[0]


def result(rt, name, check):
    """``(ok, detail)``: the cached verdict of probe ``name`` on ``rt``'s device and what the probe said (why it
    failed, or what it checked), running ``check(rt)`` the first time (see :func:`verdict`)."""
    key = _key(rt, name)
    hit = _memo.get(key)
    if hit is not None:
        return hit
    saved = _saved()
    if key in saved:
        hit = (bool(saved[key][0]), str(saved[key][1]))
    else:
        try:
            ok, detail = check(rt)
        except Exception as e:  # noqa: BLE001 - a probe's failure is its verdict
            ok, detail = False, f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
        hit = (bool(ok), str(detail))
        saved = _saved()            # another process may have written meanwhile
        saved[key] = list(hit)
        path = _path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(saved, indent=1))
            os.replace(tmp, path)
        except OSError:
            pass
    _memo[key] = hit
    return hit


def known(rt, name):
    """True when probe ``name`` has a verdict for ``rt``'s device (in memory or on disk): asking costs no launch."""
    key = _key(rt, name)
    return key in _memo or key in _saved()
