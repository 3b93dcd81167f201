"""Verdicts of probes that build and run a kernel to decide whether a device may use something, kept on disk.

A vendor's intrinsic (inline PTX on NVIDIA, sub-group shuffles on Intel or through ``cl_khr_subgroup_shuffle``:
``ops/reduction/exchange.py``; matrix units: ``ops/gemm/mma.py``, ``ops/attention/mma.py``) is used only after a
probe built a kernel with it on the device and checked its numbers against the portable kernel's or a float64
reference. The verdict and the probe's words (why it failed, or what it checked) are kept in memory and on disk,
keyed by platform, device, driver version and probe name (a probe's name carries its version: a changed probe
judges again), so each probe runs once per machine and driver. A probe never runs while a capture records (its
launches belong to no graph): until it has run, its verdict is None (undecided). A check that may fault the device
or abort its compiler (real vendor instructions) runs in a child process (:func:`isolated`).

:func:`stored` is the one on-disk verdict store: the probes' file here, and the device list's compiler check
(``devices._compiler_check``, its own file) use it.
"""
import json
import os

__all__ = ["verdict", "result", "stored", "isolated"]

VERDICTS = "probe_verdicts.json"

_memo = {}


def _path(file):
    from .paths import cache_dir
    return cache_dir().parent / file


def _saved(file):
    try:
        return json.loads(_path(file).read_text())
    except (OSError, ValueError):
        return {}


def stored(file, key, judge):
    """The verdict saved under ``key`` in ``file`` (a JSON object beside the kernel cache), else ``judge()``'s,
    saved there first (any JSON value; the file is re-read just before the write, since another process may
    have written meanwhile, and replaced atomically; a cache that cannot be written only costs a later
    re-judgement). ``judge=None``: only a saved verdict counts; None when there is none."""
    saved = _saved(file)
    if key in saved:
        return saved[key]
    if judge is None:
        return None
    value = judge()
    saved = _saved(file)
    saved[key] = value
    path = _path(file)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(saved, indent=1))
        os.replace(tmp, path)
    except OSError:
        pass
    return value


def _key(rt, name):
    info = rt.info
    return "|".join((info.platform, info.name, info.driver_version, name))


def _judge(rt, check):
    try:
        ok, detail = check(rt)
    except Exception as e:  # noqa: BLE001 - a probe's failure is its verdict
        ok, detail = False, f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
    return [bool(ok), str(detail)]


def verdict(rt, name, check):
    """The cached verdict of probe ``name`` on ``rt``'s device, running ``check(rt)`` the first time.

    ``check`` returns (ok, detail); an exception it raises counts as (False, its message). Returns ok (a bool),
    or None while a capture records and the probe has not run."""
    hit = result(rt, name, check)
    return None if hit is None else hit[0]


def result(rt, name, check):
    """``(ok, detail)``: the cached verdict of probe ``name`` on ``rt``'s device and what the probe said (why it
    failed, or what it checked), running ``check(rt)`` the first time (see :func:`verdict`); None while a capture
    records and the probe has not run."""
    key = _key(rt, name)
    hit = _memo.get(key)
    if hit is None:
        recording = getattr(rt, "capture", None) is not None
        saved = stored(VERDICTS, key, None if recording else (lambda: _judge(rt, check)))
        if saved is None:
            return None
        hit = _memo[key] = (bool(saved[0]), str(saved[1]))
    return hit


def isolated(rt, module, func, args, timeout=600):
    """(ok, detail) of ``module.func(rt, *args)`` (a probe's check, named by its module's import path and its
    name; ``args`` JSON values) run in a child process on ``rt``'s device: a kernel that faults on a GPU loses its
    context, and a compiler may abort; neither reaches the user's process. A child that dies, times out or
    prints no verdict gives (False, what happened)."""
    import subprocess
    import sys
    from pathlib import Path
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    info = rt.info
    job = dict(index=info.index, name=info.name, platform=info.platform, module=module, func=func, args=args)
    code = ("import json, sys; from cltorch.backend import probes; "
            "print(json.dumps(probes._child(json.loads(sys.argv[1]))))")
    try:
        r = subprocess.run([sys.executable, "-c", code, json.dumps(job)], env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"the probe's process took over {timeout} s"
    if r.returncode != 0:
        tail = " | ".join(ln for ln in (r.stderr or "").strip().splitlines()[-3:])[-300:]
        return False, f"the probe's process died (exit status {r.returncode}): {tail}"
    try:
        ok, detail = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return False, f"the probe's process printed no verdict: {r.stdout[-200:]!r}"
    return bool(ok), str(detail)


def _child(job):
    """The probe's child process: ``job``'s check on the device the parent named (same index, name, platform)."""
    import importlib
    from .runtime import runtime
    rt = runtime(job["index"])
    if (rt.info.name, rt.info.platform) != (job["name"], job["platform"]):
        return [False, f"the probe's process found {rt.info.name} ({rt.info.platform}) as cl:{job['index']}"]
    return list(getattr(importlib.import_module(job["module"]), job["func"])(rt, *job["args"]))
