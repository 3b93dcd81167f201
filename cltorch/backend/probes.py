"""Verdicts of probes that build and run a kernel to decide whether a device may use a vendor intrinsic.

A vendor's intrinsic (inline PTX on NVIDIA, sub-group shuffles on Intel or through ``cl_khr_subgroup_shuffle``)
is used only after a probe built a kernel with it on the device and checked its numbers against the portable
kernel's. The verdict is kept in memory and on disk, keyed by platform, device, driver version and probe name (a
probe's name carries its version: a changed probe judges again), so each probe runs once per machine and driver.
"""
import json
import os

__all__ = ["verdict"]

_memo = {}


def _path():
    from .paths import cache_dir
    return cache_dir().parent / "probe_verdicts.json"


def verdict(rt, name, check):
    """The cached verdict of probe ``name`` on ``rt``'s device, running ``check(rt)`` the first time.

    ``check`` returns (ok, detail); an exception it raises counts as (False, its message). Returns ok (a bool)."""
    info = rt.info
    key = "|".join((info.platform, info.name, info.driver_version, name))
    ok = _memo.get(key)
    if ok is not None:
        return ok
    path = _path()
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError):
        saved = {}
    if key in saved:
        ok = bool(saved[key][0])
    else:
        try:
            ok, detail = check(rt)
        except Exception as e:  # noqa: BLE001 - a probe's failure is its verdict
            ok, detail = False, f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
        ok = bool(ok)
        saved[key] = [ok, detail]
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(saved, indent=1))
            os.replace(tmp, path)
        except OSError:
            pass
    _memo[key] = ok
    return ok
