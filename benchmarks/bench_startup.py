"""Start-up time of the digits example: from ``import cltorch`` to the first synchronised training step.

Each measurement runs in a fresh Python process (``--child``) that does what ``examples/train_digits.py`` does
before its first step: import, load and split scikit-learn's digits, a DataLoader with 2 workers and pinned
memory, the DigitsCNN on the device, AdamW and OneCycleLR; then one step (forward, cross-entropy, backward,
optimizer and scheduler step) and ``loss.item()``. The child reports the seconds from just before ``import
cltorch`` to that value, and the program builds and disk-cache hits it made.

- **cold**: ``CLTORCH_CACHE_DIR`` (our binary cache) and ``POCL_CACHE_DIR`` (PoCL's) point at fresh empty
  folders: every kernel is compiled. Bar: under 30 s.
- **warm**: the same folders again, three runs, median. Bar: under 2 s, with no new entries in PoCL's cache
  folder (so nothing was compiled, neither by us nor by PoCL).
- **warm, PoCL cache only**: ``CLTORCH_NO_DISK_CACHE=1``, so every program is built from source and served by
  PoCL's own cache (about 44 ms a program here) instead of loaded from our binaries
  (``clCreateProgramWithBinary``): the issue asks which is faster.

    python benchmarks/bench_startup.py [--device cl] [--warm-runs 3] [--quick] [--bytecode]

``--quick`` measures one warm start with the caches as they are and no DataLoader workers (no fresh folders, no
cold run, no checks).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def child(device, workers):
    """The measured start-up (runs in a fresh process); prints one JSON line with the total and its phases."""
    t0 = time.perf_counter()
    import cltorch as torch
    import cltorch.nn.functional as F
    from cltorch.backend import program as _program
    from cltorch.utils.data import DataLoader, TensorDataset
    t_import = time.perf_counter() - t0
    spent = {"build_s": 0.0}
    real_build = _program.build_program

    def timed_build(*a, **k):  # program creation: from our binary cache, PoCL's cache, or a compile
        tb = time.perf_counter()
        try:
            return real_build(*a, **k)
        finally:
            spent["build_s"] += time.perf_counter() - tb
    _program.build_program = timed_build
    sys.path.insert(0, str(ROOT / "examples"))
    t1 = time.perf_counter()
    import train_digits as ex
    torch.manual_seed(0)
    dev = torch.device(device)
    xtr, xte, ytr, yte = ex.load_digits_split(0)
    t_data = time.perf_counter() - t1
    train = TensorDataset(torch.from_numpy(xtr), torch.from_numpy(ytr))
    g = torch.Generator().manual_seed(0)
    loader = DataLoader(train, batch_size=64, shuffle=True, num_workers=workers, pin_memory=True, generator=g,
                        persistent_workers=workers > 0, drop_last=True)
    model = ex.DigitsCNN().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-2)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, epochs=1, steps_per_epoch=len(loader))
    model.train()
    t2 = time.perf_counter()
    xb, yb = next(iter(loader))
    t3 = time.perf_counter()
    xb, yb = xb.to(dev, non_blocking=True), yb.to(dev, non_blocking=True)
    loss = F.cross_entropy(model(xb), yb)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    sched.step()
    lv = loss.item()
    t4 = time.perf_counter()
    st = torch.backend.stats()
    t5 = time.perf_counter()
    saved = _program.save_binaries(quiet=True)   # what the process does at exit (os._exit below skips atexit)
    save_s = time.perf_counter() - t5
    print(json.dumps({"save_s": save_s, "saved": saved, "import_s": t_import, "data_s": t_data,
                      "setup_s": t2 - t1 - t_data, "first_batch_s": t3 - t2, "step_s": t4 - t3,
                      "first_step_s": t4 - t0, "program_s": spent["build_s"], "loss": lv,
                      "builds": st.get("builds"), "disk_hits": st.get("disk_hits")}))
    sys.stdout.flush()
    os._exit(0)  # do not wait for the persistent workers' orderly shutdown: the figure is taken


def _phases(r):
    return (f"import cltorch {r['import_s']:.2f}, digits data {r['data_s']:.2f}, model and "
            f"optimizer {r['setup_s']:.2f}, first batch {r['first_batch_s']:.2f}, step to loss.item() "
            f"{r['step_s']:.2f}; program creation {r['program_s']:.2f} s in all; after the step, at exit: "
            f"{r.get('saved', 0)} binaries written to the kernel cache in {r.get('save_s', 0):.2f} s")


def _count_files(d):
    """Files under ``d``, leaving out the empty ``tempfile_*`` that PoCL leaves in its cache folder at start-up
    (measured: a warm run adds exactly one such 0-byte file and no kernel)."""
    n = 0
    for root, _, files in os.walk(d):
        for f in files:
            if f.startswith("tempfile_") and os.path.getsize(os.path.join(root, f)) == 0:
                continue
            n += 1
    return n


def _run_child(env, device, workers, timeout=900):
    r = subprocess.run([sys.executable, __file__, "--child", "--device", device, "--workers", str(workers)],
                       env=env, capture_output=True, text=True, timeout=timeout, cwd=str(ROOT))
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise RuntimeError(f"start-up child failed (exit {r.returncode}):\n{r.stderr[-3000:]}") from None


def measure(device="cl", warm_runs=3, workers=2, quick=False, out=print, bytecode=False):
    """Dict of results (see the module docstring). ``bytecode=True`` lets the children write and use ``.pyc``
    files even where ``PYTHONDONTWRITEBYTECODE`` is set (it is on this machine: every import compiles source)."""
    env = dict(os.environ)
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    res = {}
    if quick:  # no DataLoader workers: a smoke run of the same path, shorter
        r = _run_child(env, device, 0)
        res["warm_s"] = [r["first_step_s"]]
        res["warm"] = r
        return res
    with tempfile.TemporaryDirectory(prefix="cltorch-startup-") as tmp:
        ours_dir, pocl_dir = os.path.join(tmp, "cltorch"), os.path.join(tmp, "pocl")
        os.makedirs(ours_dir)
        os.makedirs(pocl_dir)
        env["CLTORCH_CACHE_DIR"], env["POCL_CACHE_DIR"] = ours_dir, pocl_dir
        env.pop("CLTORCH_NO_DISK_CACHE", None)
        res["cold"] = _run_child(env, device, workers)
        res["cold_s"] = res["cold"]["first_step_s"]
        res["cache_files_after_cold"] = {"cltorch": _count_files(ours_dir), "pocl": _count_files(pocl_dir)}
        before = _count_files(pocl_dir)
        warm = [_run_child(env, device, workers) for _ in range(warm_runs)]
        res["warm"] = warm
        res["warm_s"] = [w["first_step_s"] for w in warm]
        res["new_pocl_entries_warm"] = _count_files(pocl_dir) - before
        env_p = dict(env, CLTORCH_NO_DISK_CACHE="1")
        before = _count_files(pocl_dir)
        pw = [_run_child(env_p, device, workers) for _ in range(warm_runs)]
        res["pocl_only"] = pw
        res["pocl_only_s"] = [w["first_step_s"] for w in pw]
        res["new_pocl_entries_pocl_only"] = _count_files(pocl_dir) - before
    return res


def run(quick=False, device="cl", warm_runs=3, out=print, bytecode=False):
    """Rows for benchmarks/run.py."""
    sys.path.insert(0, str(HERE))
    import _anchors as A
    load = A.load_avg()
    r = measure(device, warm_runs, quick=quick, out=out, bytecode=bytecode)
    rows = []
    w = statistics.median(r["warm_s"])
    if quick:
        rows.append(A.case("warm start, import to first synced digits step (caches as they are)", "s", w, {}, None, "",
                           "< 2 s", None, note=f"--quick: one run, no workers, no fresh caches, not checked; "
                                                 f"{_phases(r['warm'])}"))
        return rows
    rows.append(A.case("cold start, first digits step, empty kernel caches", "s", r["cold_s"], {}, None, "",
                       "< 30 s", r["cold_s"] < 30,
                       note=f"{r['cold']['builds']} program builds; {_phases(r['cold'])}; "
                            f"caches after: {r['cache_files_after_cold']['cltorch']} of ours, "
                            f"{r['cache_files_after_cold']['pocl']} PoCL files; load {load:.1f}"))
    ok = w < 2.0 and r["new_pocl_entries_warm"] == 0
    mid = sorted(r["warm"], key=lambda x: x["first_step_s"])[len(r["warm"]) // 2]
    rows.append(A.case(f"warm start, import to first synced digits step (median of {len(r['warm_s'])})", "s", w, {},
                       None, "", "< 2 s, no new PoCL cache entries", ok,
                       note=f"runs {', '.join(f'{x:.2f}' for x in r['warm_s'])} s; new PoCL cache entries "
                            f"{r['new_pocl_entries_warm']}; builds {[x['builds'] for x in r['warm']]}; disk hits "
                            f"{r['warm'][0]['disk_hits']}; bytecode caching {'on' if bytecode else 'as the environment says'}; "
                            f"median run: {_phases(mid)}"))
    p = statistics.median(r["pocl_only_s"])
    rows.append(A.case("warm start served by PoCL's cache only (CLTORCH_NO_DISK_CACHE=1)", "s", p, {}, None, "", None,
                       None, note=f"runs {', '.join(f'{x:.2f}' for x in r['pocl_only_s'])} s; our binary cache is "
                                  f"{'faster' if w < p else 'slower'} by {abs(p - w):.2f} s; new PoCL entries "
                                  f"{r['new_pocl_entries_pocl_only']}"))
    return rows


def suite(quick=False, device="cl:0"):
    """Rows for benchmarks/run.py: children use .pyc files as a user's Python does (see ``--bytecode``)."""
    return run(quick=quick, device=device, bytecode=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cl")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--warm-runs", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--bytecode", action="store_true",
                    help="let the children use .pyc files even where PYTHONDONTWRITEBYTECODE is set")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        return child(a.device, a.workers)
    if a.bytecode:
        print("children run with bytecode caching (PYTHONDONTWRITEBYTECODE unset)")
    elif os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print("note: PYTHONDONTWRITEBYTECODE is set, so every import compiles its source (--bytecode to lift it)")
    for row in run(a.quick, a.device, a.warm_runs, bytecode=a.bytecode):
        met = {True: "met", False: "MISSED", None: "-"}[row["met"]]
        print(f"{row['case']}: {row['ours']:.2f} s; bar {row['bar']}: {met}; {row['note']}")


if __name__ == "__main__":
    main()
