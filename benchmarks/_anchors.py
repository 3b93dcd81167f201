"""The benchmark suite's anchors and timing helpers (shared by ``benchmarks/bench_*.py`` and ``run.py``).

Anchors are what our numbers are read against on the same machine, in the same run:

- numpy (always present);
- PyTorch on the CPU (``torch==2.13.0``), where it is importable in this interpreter;
- tinygrad on the same PoCL OpenCL device through its CL backend, where it is importable.

None of them is a runtime dependency of cltorch: install them in a benchmark environment only, e.g.
``python3 -m venv /tmp/benchvenv && /tmp/benchvenv/bin/pip install -e . torch==2.13.0 tinygrad``. Every
function here returns None (and says why in ``why_missing``) where an anchor is absent, so the benchmarks run
with our numbers alone.

tinygrad's CL backend opens the *system* OpenCL loader (``libOpenCL.so.1``, Debian's ``ocl-icd-libopencl1``),
which does not see the PoCL that pip installed (pyopencl's wheel ships ``libpocl`` and its own loader; the
``pocl-binary-distribution`` package ships PoCL's kernel library and headers). :func:`tinygrad` therefore writes a
one-line ``.icd`` file naming that ``libpocl`` into a temporary folder and points ``OCL_ICD_VENDORS`` at it
before tinygrad opens OpenCL, and selects tinygrad's CL device (``DEV=CL``).
"""
import ctypes.util
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

why_missing = {}
_cache = {}


# ------------------------------------------------------------------------------------------------ anchors
def torch():
    """The ``torch`` module when importable here (any version; :func:`torch_version` tells which), else None."""
    if "torch" not in _cache:
        try:
            import torch as t
            t.set_grad_enabled(True)
            _cache["torch_threads"] = t.get_num_threads()
            _cache["torch"] = t
        except Exception as e:  # ImportError, or a broken install
            why_missing["torch"] = f"torch is not importable here ({type(e).__name__}: {e})"
            _cache["torch"] = None
    return _cache["torch"]


def torch_sides(make_step):
    """Anchor sides for PyTorch: {"torch": (step, None), "torch 1 thread": (step, None)} or {}.

    ``make_step()`` returns a fresh step function. Each call first sets torch's thread count (the default, or 1):
    on a loaded 2-core machine torch's OpenMP threads wait on each other at every op, so a single thread is often
    faster; a bar is read against the faster of the two (see :func:`best_torch`)."""
    t = torch()
    if t is None:
        return {}
    n = t.get_num_threads()
    out = {}
    for name, k in (("torch", n), ("torch 1 thread", 1)):
        if name == "torch 1 thread" and n == 1:
            continue
        step = make_step()

        def fn(step=step, k=k):
            t.set_num_threads(k)
            return step()
        out[name] = (fn, None)
    return out


def best_torch(res):
    """The name of the faster torch side in an interleaved() result (median seconds), or None."""
    cands = [k for k in ("torch", "torch 1 thread") if res.get(k)]
    return min(cands, key=lambda k: statistics.median(res[k])) if cands else None


def torch_best_of_threads(measure):
    """(value, label) of ``measure()`` (seconds, lower is better) run with torch's default threads and with 1
    thread; the faster, labelled "torch" or "torch 1 thread". (None, None) without torch."""
    t = torch()
    if t is None:
        return None, None
    got = []
    for label, k in (("torch", _cache["torch_threads"]), ("torch 1 thread", 1)):
        t.set_num_threads(k)
        old = os.environ.get("OMP_NUM_THREADS")
        os.environ["OMP_NUM_THREADS"] = str(k)      # for anchors that run torch in a subprocess
        try:
            v = measure()
        finally:
            if old is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = old
        if v is not None:
            got.append((v, label))
    restore_torch_threads()
    return min(got) if got else (None, None)


def restore_torch_threads():
    t = torch()
    if t is not None:
        t.set_num_threads(_cache["torch_threads"])


def torch_version():
    t = torch()
    return None if t is None else t.__version__


def libpocl_path():
    """The ``libpocl`` shared library that pip installed (pyopencl's wheel or pocl-binary-distribution), or None."""
    roots = []
    for mod in ("pocl_binary_distribution", "pyopencl"):
        try:
            m = __import__(mod)
            roots.append(Path(m.__file__).resolve().parent)
        except Exception:
            pass
    for r in roots:  # os.walk, not glob: the libraries sit in hidden ".libs" folders
        for dirpath, _, files in os.walk(r):
            hits = sorted(f for f in files if f.startswith("libpocl") and (".so" in f or f.endswith(".dylib")))
            if hits:
                return os.path.join(dirpath, hits[0])
    return None


def setup_tinygrad_opencl():
    """Make the system OpenCL loader see pip's PoCL: write ``<tmp>/pocl.icd`` naming libpocl and set
    ``OCL_ICD_VENDORS`` to that folder (and ``DEV=CL`` for tinygrad). Returns the folder, or None with the reason
    in ``why_missing['tinygrad']``. Must run before tinygrad opens OpenCL; idempotent."""
    if "icd_dir" in _cache:
        return _cache["icd_dir"]
    _cache["icd_dir"] = None
    if not (ctypes.util.find_library("OpenCL") or os.path.exists("/lib/x86_64-linux-gnu/libOpenCL.so.1")):
        why_missing["tinygrad"] = ("no system OpenCL loader (libOpenCL.so.1); on Debian: apt-get install "
                                   "ocl-icd-libopencl1")
        return None
    lib = libpocl_path()
    if lib is None:
        why_missing["tinygrad"] = "no pip-installed libpocl found (pyopencl / pocl-binary-distribution)"
        return None
    d = tempfile.mkdtemp(prefix="cltorch-bench-icd-")
    with open(os.path.join(d, "pocl.icd"), "w") as f:
        f.write(lib + "\n")
    os.environ["OCL_ICD_VENDORS"] = d
    os.environ["DEV"] = "CL"
    _cache["icd_dir"] = d
    return d


def tinygrad():
    """The ``tinygrad`` module with its default device set to CL on PoCL, or None (reason in why_missing)."""
    if "tinygrad" in _cache:
        return _cache["tinygrad"]
    _cache["tinygrad"] = None
    import importlib.util
    if importlib.util.find_spec("tinygrad") is None:      # before touching OCL_ICD_VENDORS, which hides our drivers
        why_missing["tinygrad"] = "not installed (pip install tinygrad)"
        return None
    if setup_tinygrad_opencl() is None:
        return None
    try:
        import tinygrad as tg
        from tinygrad import Device
        Device["CL"]  # opens the OpenCL platform now, so a failure is reported here
        if Device.DEFAULT != "CL":
            raise RuntimeError(f"tinygrad's default device is {Device.DEFAULT}, not CL (DEV was set before import?)")
        _cache["tinygrad"] = tg
    except Exception as e:
        why_missing["tinygrad"] = f"tinygrad's CL backend is unavailable ({type(e).__name__}: {str(e)[:200]})"
    return _cache["tinygrad"]


def tinygrad_version():
    try:
        from importlib.metadata import version
        return version("tinygrad")
    except Exception:
        return None


def describe(with_tinygrad=True):
    """One line naming each anchor and its version (or why it is absent); ``with_tinygrad=False`` does not open
    tinygrad (slow to import) and names it by version only."""
    import numpy as np
    parts = [f"numpy {np.__version__}"]
    parts.append(f"torch {torch_version()} (CPU, {torch().get_num_threads()} threads)" if torch()
                 else "torch: absent")
    if with_tinygrad:
        parts.append(f"tinygrad {tinygrad_version()} (CL on PoCL)" if tinygrad() else "tinygrad: absent")
    else:
        parts.append(f"tinygrad {tinygrad_version() or 'absent'} (not used)")
    return "; ".join(parts)


# ------------------------------------------------------------------------------------------------ timing
def load_avg():
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def time_fn(fn, sync=None, target_s=0.2, min_iters=1, max_iters=10000, with_cpu=False):
    """Seconds per call of ``fn``: calls repeated (queued, no sync between them) for about ``target_s``, then
    one ``sync()``. The first call sizes the batch. ``with_cpu=True`` returns (wall, process CPU) seconds per call;
    process CPU time counts every thread of this process (PoCL's and OpenMP's workers too)."""
    if sync:
        sync()
    t0 = time.perf_counter()
    fn()
    if sync:
        sync()
    one = max(time.perf_counter() - t0, 1e-7)
    n = int(min(max_iters, max(min_iters, target_s / one)))
    c0 = time.process_time()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    if sync:
        sync()
    wall = (time.perf_counter() - t0) / n
    return (wall, (time.process_time() - c0) / n) if with_cpu else wall


cpu_times = {}


def interleaved(sides, rounds=5, target_s=0.2, warmup=1):
    """Time several sides in alternating rounds so that each round's sides see the same machine load.

    ``sides`` maps a name to ``(fn, sync)`` (or None to skip). Returns ``{name: [wall seconds per call per
    round]}``; the process CPU seconds per call of the same rounds are left in ``cpu_times[name]``. Each side is
    warmed up ``warmup`` times first (kernel builds, caches).
    """
    sides = {k: v for k, v in sides.items() if v is not None}
    for fn, sync in sides.values():
        for _ in range(warmup):
            fn()
        if sync:
            sync()
    out = {k: [] for k in sides}
    for k in sides:
        cpu_times[k] = []
    for _ in range(rounds):
        for k, (fn, sync) in sides.items():
            w, c = time_fn(fn, sync, target_s, with_cpu=True)
            out[k].append(w)
            cpu_times[k].append(c)
    return out


def cpu_note(scale=1e3, unit="ms"):
    """'CPU time per call: ours 1.2 ms, torch 0.8 ms' from the last interleaved() run (medians)."""
    return "process CPU per call: " + ", ".join(f"{k} {statistics.median(v) * scale:.3g} {unit}"
                                                for k, v in cpu_times.items() if v)


def median(xs):
    return statistics.median(xs) if xs else None


def round_ratio(a, b):
    """Median over rounds of a[i] / b[i] (both sides of a round saw the same load)."""
    if not a or not b:
        return None
    return statistics.median(x / y for x, y in zip(a, b))


def case(name, unit, ours, anchors=None, ratio=None, ratio_desc="", bar=None, met=None, note=""):
    """One row of the suite's table (see run.py).

    ``ours`` and ``anchors`` values are in ``unit``; ``ratio`` is the figure the bar is stated in (e.g. our time
    over torch's time, or our throughput over numpy's), described by ``ratio_desc``; ``bar`` the bar's text and
    ``met`` True/False/None (no anchor, no bar).
    """
    return {"case": name, "unit": unit, "ours": ours, "anchors": dict(anchors or {}), "ratio": ratio,
            "ratio_desc": ratio_desc, "bar": bar, "met": met, "note": note}


# ------------------------------------------------------------------------------------------------ examples
def load_example(name, lib="cltorch"):
    """The module ``examples/<name>.py`` with its imports pointing at ``lib`` ("cltorch" or "torch").

    The examples are PyTorch scripts whose only cltorch-specific lines are the imports, so replacing them gives
    the same model in PyTorch (used to compare a training step side by side).
    """
    import importlib.util
    import types
    path = ROOT / "examples" / f"{name}.py"
    if lib == "cltorch":
        key = f"_cltorch_example_{name}"
        if key in sys.modules:
            return sys.modules[key]
        spec = importlib.util.spec_from_file_location(key, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod
        spec.loader.exec_module(mod)
        return mod
    key = f"_torch_example_{name}"
    if key in sys.modules:
        return sys.modules[key]
    src = path.read_text()
    for a, b in (("import cltorch as torch", "import torch"), ("import cltorch.nn as nn", "import torch.nn as nn"),
                 ("import cltorch.nn.functional as F", "import torch.nn.functional as F"),
                 ("from cltorch.", "from torch.")):
        src = src.replace(a, b)
    mod = types.ModuleType(key)
    mod.__file__ = str(path)
    sys.modules[key] = mod
    exec(compile(src, str(path), "exec"), mod.__dict__)
    return mod


# ------------------------------------------------------------------------------------------------ profiling
def profile_host(fn, sync=None, n=20, top=25, out=print):
    """cProfile of ``n`` calls of ``fn`` (then one ``sync()``): the functions with the most own time, so a missed
    bar names its dominating host cost. With ``CLTORCH_PROFILE_KERNELS=1`` in the environment it also prints
    each kernel's device time (``cltorch.backend.runtime(0).kernel_profile()``) over the same calls."""
    import cProfile
    import io
    import pstats
    kp = os.environ.get("CLTORCH_PROFILE_KERNELS") == "1"
    rt = None
    if kp:
        import cltorch
        rt = cltorch.backend.runtime(0)
        rt.kernel_profile(reset=True)
    pr = cProfile.Profile()
    t0 = time.perf_counter()
    pr.enable()
    for _ in range(n):
        fn()
    if sync:
        sync()
    pr.disable()
    wall = time.perf_counter() - t0
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(top)
    out(f"cProfile over {n} calls ({wall / n * 1e3:.2f} ms per call under the profiler), by own time:")
    out("\n".join(s.getvalue().splitlines()[4:]))
    if rt is not None:
        prof = rt.kernel_profile(reset=True)
        tot = sum(t for _, t in prof.values())
        out(f"device time per call by kernel ({tot / n:.3f} ms per call in all):")
        for name, (calls, ms) in list(prof.items())[:top]:
            out(f"  {name:40s} {calls / n:6.1f} launches  {ms / n:8.3f} ms  {100 * ms / max(tot, 1e-12):5.1f}%")


def format_row(r):
    """One benchmark row (a dict made by ``case``) as a line: ours, the anchors, the ratio, the bar and the note."""
    anc = ", ".join(f"{k} {v:.4g} {r['unit']}" for k, v in r["anchors"].items())
    ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f} ({r['ratio_desc']})"
    bar = "" if r["bar"] is None else f"; bar {r['bar']}: {({True: 'met', False: 'MISSED', None: '-'})[r['met']]}"
    return f"{r['case']}: ours {r['ours']:.4g} {r['unit']}; {anc}; ratio {ratio}{bar}; {r['note']}"


def command_line(run, doc, argv=None):
    """The shared ``main`` of a benchmark whose ``run(quick, device, rounds)`` returns rows: ``--device``,
    ``--rounds``, ``--quick``; prints the machine line, then one line per row."""
    import argparse
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--device", default="cl:0")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    print(describe(with_tinygrad=False))
    for r in run(a.quick, a.device, a.rounds):
        print(format_row(r))
