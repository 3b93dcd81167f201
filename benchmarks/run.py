"""The benchmark suite: runs every ``benchmarks/bench_*.py`` and prints one markdown table of all cases, each with
our figure, each anchor's (numpy, PyTorch CPU, tinygrad CL on the same PoCL device, where installed), the ratio the
issue's bar is stated in, the bar, and whether it is met.

    python benchmarks/run.py [--quick] [--only mlp train ...] [--skip sdpa ...] [--out results.md] [--device cl:0]

- Each benchmark runs in its own subprocess (a crash or hang in one does not stop the others; ``--quick`` runs
  them in this process unless ``--isolate``); its own printout goes to the log shown with ``--verbose`` (kept in
  the folder ``--logs``).
- A benchmark module is read in one of three ways: it defines ``suite(quick) -> rows`` (rows as made by
  ``_anchors.case``); or an adapter below knows its functions (the earlier issues' benchmarks); or it is run as a
  script (with ``--quick`` in quick mode) and its output is appended under the table.
- Figures are medians of several repetitions, the sides of a case alternating so that they see the same load.
  PyTorch is timed with its default threads and with one thread, and a bar is read against the faster (on a
  loaded 2-core machine its two OpenMP threads wait on each other at every op); numpy/OpenBLAS as it comes.
  The machine's load average is printed with the table: on a shared machine, re-run the key cases with
  ``--only`` when it is low.
- ``--quick`` is a smoke mode (small sizes, one repetition, no cold start, no tinygrad): it shows that every
  benchmark runs; its figures are not the bars' figures.

Anchors are benchmark-only dependencies; install them next to cltorch in a benchmark venv
(``pip install -e . torch==2.13.0 tinygrad``). Missing anchors leave their columns empty.
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
sys.path.insert(0, str(HERE))

import _anchors as A  # noqa: E402


# ------------------------------------------------------------------------------------------------ adapters
def _torch_per_op_add():
    torch = A.torch()
    if torch is None:
        return None
    a, b = torch.ones(1000), torch.ones(1000)
    return A.torch_best_of_threads(lambda: statistics.median(A.time_fn(lambda: a + b, None, 0.1) for _ in range(7)))[0]


def _tinygrad_gemm_gflops(n, target):
    tg = A.tinygrad()
    if tg is None:
        return None
    from tinygrad import Device, Tensor
    import numpy as np
    rng = np.random.default_rng(0)
    a = Tensor(rng.standard_normal((n, n)).astype(np.float32)).realize()
    b = Tensor(rng.standard_normal((n, n)).astype(np.float32)).realize()
    dev = Device["CL"]
    t = A.time_fn(lambda: (a @ b).realize(), dev.synchronize, target, max_iters=50)
    return 2 * n ** 3 / t / 1e9


def _tinygrad_add_ms(n):
    tg = A.tinygrad()
    if tg is None:
        return None
    from tinygrad import Device, Tensor
    import numpy as np
    a = Tensor(np.ones(n, np.float32)).realize()
    b = Tensor(np.ones(n, np.float32)).realize()
    return statistics.median(A.time_fn(lambda: (a + b).realize(), Device["CL"].synchronize, 0.2) for _ in range(5)) * 1e3


def adapt_elementwise(mod, quick, device):
    rows_in, per_op = mod.run(device, reps=1 if quick else 7, quick=quick)
    rows = []
    for i, (name, t_cl, t_np, gb) in enumerate(rows_in):
        anchors = {"numpy": t_np * 1e3}
        bar = met = None
        if i == 0:
            n = int(name.split(",")[1].strip().split("M")[0]) << 20
            if not quick:
                tg = _tinygrad_add_ms(n)
                if tg is not None:
                    anchors["tinygrad"] = tg
            bar = ">= 0.8x numpy's throughput"
            met = (t_np / t_cl) >= 0.8
        rows.append(A.case(name, "ms", t_cl * 1e3, anchors, t_np / t_cl, "ours/numpy throughput", bar, met,
                           note=f"{gb / t_cl:.1f} GB/s"))
    tt = _torch_per_op_add()
    import cltorch
    a, b = cltorch.ones(1000, device=device), cltorch.ones(1000, device=device)
    cpu = statistics.median(A.time_fn(lambda: a + b, cltorch.cl.synchronize, 0.2, with_cpu=True)[1]
                            for _ in range(1 if quick else 5))
    rows.append(A.case("per-op host overhead, 1,000-element add, queued", "us", per_op * 1e6,
                       {"torch": tt * 1e6} if tt else {}, None, "", "<= 10 us", per_op * 1e6 <= 10,
                       note=f"process CPU per op {cpu * 1e6:.1f} us (PoCL's threads included); load "
                            f"{A.load_avg():.1f}" + ("; torch eager for reference" if tt else "")))
    return rows


def adapt_gemm(mod, quick, device):
    sizes = [256] if quick else [256, 1024, 2048]
    target = 0.02 if quick else 0.25
    dev = int(device.split(":")[1]) if ":" in device and device.split(":")[1].isdigit() else 0
    res = mod.run(sizes, rounds=1 if quick else 5, device=dev, target_s=target, out=lambda *a: None)
    torch = A.torch()
    rows = []
    for r in res:
        n = r["n"]
        anchors = {"numpy": r["numpy"]}
        if torch is not None:
            a, b = torch.randn(n, n), torch.randn(n, n)
            tt, label = A.torch_best_of_threads(lambda: A.time_fn(lambda: torch.mm(a, b), None, target, max_iters=200))
            anchors[label] = 2 * n ** 3 / tt / 1e9
        if not quick:
            tg = _tinygrad_gemm_gflops(n, target)
            if tg is not None:
                anchors["tinygrad"] = tg
        bar = r.get("bar")
        rows.append(A.case(f"fp32 GEMM {n}^3", "GFLOP/s", r["ours"], anchors, r["ratio"], "ours/numpy GFLOP/s",
                           None if bar is None else f">= {bar}x numpy", None if bar is None else r["ratio"] >= bar,
                           note="torch/tinygrad timed after the interleaved ours/numpy rounds"))
    return rows


def adapt_optim(mod, quick, device):
    numel, tensors, iters = (1_000_000, 100, 3) if quick else (10_000_000, 100, 15)
    got = mod.bench_cltorch(numel, tensors, iters, device)
    res, host_ms, bound_ms = got[0], got[1], got[3]
    first = lambda v: v[0] if isinstance(v, (tuple, list)) else v  # noqa: E731  (wall ms, [cpu ms])
    default = [k for k in res if "default" in k]
    ours = first(res[default[0]]) if default else min(first(v) for v in res.values())
    t_ms, label = A.torch_best_of_threads(lambda: (lambda tr: first(tr) if tr else None)(
        mod.bench_torch(numel, tensors, iters)))
    anchors = {label: t_ms} if t_ms else {}
    r = ours / t_ms if t_ms else None
    return [A.case(f"AdamW step, {numel / 1e6:g}M params in {tensors} tensors", "ms", ours, anchors, r,
                   f"ours/{label} foreach time", "<= 1.5x torch foreach AdamW", None if r is None else r <= 1.5,
                   note=f"bandwidth bound {bound_ms:.2f} ms; host queueing {host_ms:.2f} ms")]


def adapt_sdpa(mod, quick, device):
    L = 256 if quick else 2048
    rep = 1 if quick else 3
    rows = []
    py = None  # torch in this interpreter (mod.torch_time uses it), else TORCH_PYTHON (not in --quick)
    if A.torch() is None and not quick:
        py = os.environ.get("TORCH_PYTHON") or ("/tmp/torchvenv/bin/python" if os.path.exists("/tmp/torchvenv/bin/python")
                                                else None)
    for causal in (False, True):
        fw, fc, fm = mod.ours(L, causal, False, mod.SDPBackend.FLASH_ATTENTION, device, rep)
        if A.torch() is not None:
            tw, label = A.torch_best_of_threads(lambda: (lambda t: t[0] if t else None)(
                mod.torch_time(L, causal, False, rep, py)))
        else:
            t = mod.torch_time(L, causal, False, rep, py)
            tw, label = (t[0] if t else None), "torch"
        anchors = {label: tw * 1e3} if tw else {}
        r = fw / tw if (tw and fw) else None
        bar = None if causal else "<= 2x torch CPU SDPA"
        rows.append(A.case(f"SDPA forward B=4 H=8 L={L} D=64{' causal' if causal else ''}", "ms",
                           None if fw is None else fw * 1e3, anchors, r, f"ours/{label} time", bar,
                           None if (bar is None or r is None) else r <= 2.0,
                           note="" if fw else "OOM"))
    return rows


def adapt_dataloader(mod, quick, device):
    if quick:  # fewer rows; the dataset instance is what workers receive, its class stays importable
        mod.Samples.__init__.__defaults__ = (2048,)
    epochs = 1 if quick else 2
    rows = []
    for tf in ("tensor", "numpy") if not quick else ("numpy",):
        ours = mod.throughput("cltorch", tf, [2], epochs)[2]
        theirs = mod.throughput("torch", tf, [2], epochs)[2] if A.torch() is not None else None
        r = ours / theirs if theirs else None
        rows.append(A.case(f"DataLoader, 2 workers, {tf} transform ({'2,048' if quick else '60,000'} x 784, b128)",
                           "samples/s", ours, {"torch": theirs} if theirs else {}, r, "ours/torch samples/s",
                           ">= 1.0x torch", None if r is None else r >= 1.0))
    return rows


def adapt_conv(mod, quick, device):
    rows_in = mod.run(device, reps=1 if quick else 7, inner=2 if quick else 20)
    rows = []
    np_rows = {name.split(" [")[0]: f for name, f, _, _ in rows_in if "[numpy" in name}
    for name, f, bw, fb in rows_in:
        if "[numpy" in name:
            continue
        base = np_rows.get(name.split(" [")[0])
        rows.append(A.case(f"{name} fwd (fwd+bwd {fb:.0f} us)", "us", f, {"numpy": base} if base else {},
                           None if not base else base / f, "ours/numpy speed (forward)", None, None))
    if not quick:   # conv3d 8x16x16x32x32, 3x3x3, 16->16: forward and fwd+bwd against torch CPU
        for name, f, fb, tf, tfb in mod.run_conv3d(device)[:1]:
            rows.append(A.case(f"{name} fwd", "us", f, {"torch": tf} if tf else {}, tf / f if tf else None,
                               "torch/ours time (forward)", None, None))
            rows.append(A.case(f"{name} fwd+bwd", "us", fb, {"torch": tfb} if tfb else {}, tfb / fb if tfb else None,
                               "torch/ours time (fwd+bwd)", None, None))
    return rows


ADAPTERS = {"bench_elementwise": adapt_elementwise, "bench_gemm": adapt_gemm, "bench_optim": adapt_optim,
            "bench_sdpa": adapt_sdpa, "bench_dataloader": adapt_dataloader, "bench_conv": adapt_conv}


# ------------------------------------------------------------------------------------------------ one benchmark
def collect(name, quick, device):
    """Import benchmarks/<name>.py and return its rows (suite() or an adapter)."""
    import importlib
    mod = importlib.import_module(name)
    if hasattr(mod, "suite"):
        return mod.suite(quick=quick, device=device)
    if name in ADAPTERS:
        return ADAPTERS[name](mod, quick, device)
    raise LookupError(f"{name}: no suite() and no adapter")


def run_one(name, quick, device, out_path):
    """In the child process: collect one benchmark's rows and write them as JSON to out_path."""
    t0 = time.perf_counter()
    rows = collect(name, quick, device)
    with open(out_path, "w") as f:
        json.dump({"rows": rows, "seconds": time.perf_counter() - t0}, f)


def run_inprocess(name, quick, device, log_path):
    """(exit code, rows) running one benchmark in this process, its printout to log_path (--quick mode)."""
    import contextlib
    import traceback
    with open(log_path, "w") as log, contextlib.redirect_stdout(log):
        try:
            return 0, collect(name, quick, device)
        except LookupError as e:
            log.write(str(e) + "\n")
            return 1, None
        except Exception:
            log.write(traceback.format_exc())
            return 1, None


def discover():
    return sorted(p.stem for p in HERE.glob("bench_*.py"))


def _script_fallback(name, quick, timeout):
    cmd = [sys.executable, str(HERE / f"{name}.py")] + (["--quick"] if quick else [])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=str(HERE.parent))
    return r.returncode, r.stdout + r.stderr


# ------------------------------------------------------------------------------------------------ table
def _fmt(v):
    if v is None:
        return "—"
    if isinstance(v, str):
        return v
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def table(rows):
    cols = []
    for r in rows:
        for k in r["anchors"]:
            if k not in cols:
                cols.append(k)
    order = {"numpy": 0, "torch": 1, "torch 1 thread": 2, "tinygrad": 3, "tinygrad TinyJit": 4}
    cols.sort(key=lambda c: order.get(c, 9))
    head = ["benchmark", "case", "unit", "ours"] + cols + ["ratio", "bar", "met", "note"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ratio = "—" if r["ratio"] is None else f"{r['ratio']:.2f}× ({r['ratio_desc']})"
        met = {True: "yes", False: "**NO**", None: "—"}[r["met"]]
        cells = [r.get("bench", ""), r["case"], r["unit"], _fmt(r["ours"])] + \
                [_fmt(r["anchors"].get(c)) for c in cols] + [ratio, r["bar"] or "—", met, r.get("note", "")]
        lines.append("| " + " | ".join(str(c).replace("|", "/") for c in cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke mode: runs everything small, asserts no speed")
    ap.add_argument("--only", nargs="+", default=None, help="benchmark names (with or without 'bench_')")
    ap.add_argument("--skip", nargs="+", default=[], help="benchmark names to leave out")
    ap.add_argument("--device", default="cl:0")
    ap.add_argument("--out", default=None, help="also write the markdown report to this file")
    ap.add_argument("--logs", default=None, help="keep each benchmark's own output in this folder")
    ap.add_argument("--verbose", action="store_true", help="print each benchmark's own output")
    ap.add_argument("--timeout", type=float, default=None, help="seconds per benchmark (default 120 quick, 2400)")
    ap.add_argument("--isolate", action="store_true", help="--quick: still run each benchmark in a subprocess")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--rows-out", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one:
        return run_one(a.one, a.quick, a.device, a.rows_out)

    norm = lambda n: n if n.startswith("bench_") else f"bench_{n}"  # noqa: E731
    names = discover()
    if a.only:
        names = [n for n in names if n in {norm(x) for x in a.only}]
    names = [n for n in names if n not in {norm(x) for x in a.skip}]
    timeout = a.timeout or (120 if a.quick else 2400)
    logdir = Path(a.logs) if a.logs else Path(tempfile.mkdtemp(prefix="cltorch-bench-logs-"))
    logdir.mkdir(parents=True, exist_ok=True)

    header = [f"# cltorch benchmarks{' (--quick: smoke mode, not the bars figures)' if a.quick else ''}",
              "", f"- device: {a.device}; {A.describe(with_tinygrad=not a.quick)}",
              f"- machine: {os.cpu_count()} cores; load average at start {A.load_avg():.2f}; "
              f"{time.strftime('%Y-%m-%d %H:%M')}"]
    print("\n".join(header), flush=True)
    all_rows, extra, failures = [], [], []
    for name in names:
        t0 = time.perf_counter()
        load0 = A.load_avg()
        rows_path = logdir / f"{name}.json"
        log_path = logdir / f"{name}.log"
        rows = None
        if a.quick and not a.isolate:
            rc, rows = run_inprocess(name, a.quick, a.device, log_path)
        else:
            cmd = [sys.executable, str(HERE / "run.py"), "--one", name, "--rows-out", str(rows_path),
                   "--device", a.device] + (["--quick"] if a.quick else [])
            try:
                with open(log_path, "w") as log:
                    rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=timeout,
                                        cwd=str(HERE.parent)).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
            if rc == 0 and rows_path.exists():
                rows = json.loads(rows_path.read_text())["rows"]
        logtxt = log_path.read_text(errors="replace")
        if a.verbose:
            print(logtxt)
        if rows is not None:
            for r in rows:
                r["bench"] = name[len("bench_"):]
            all_rows.extend(rows)
            status = f"{len(rows)} cases"
        elif rc != "timeout" and "no suite() and no adapter" in logtxt:
            rc2, txt = _script_fallback(name, a.quick, timeout)
            extra.append((name, rc2, txt))
            status = f"ran as a script (exit {rc2}), output below the table"
            if rc2 != 0:
                failures.append(name)
        else:
            failures.append(name)
            tail = "\n".join(logtxt.strip().splitlines()[-15:])
            extra.append((name, rc, tail))
            status = f"FAILED ({rc}); last lines below the table"
        print(f"- {name}: {status} in {time.perf_counter() - t0:.0f} s (load {load0:.1f} -> {A.load_avg():.1f})",
              flush=True)

    if a.quick:  # small sizes and one repetition: no verdicts
        for r in all_rows:
            r["met"] = None
    report = ["", table(all_rows), ""]
    missed = [r for r in all_rows if r["met"] is False]
    met = [r for r in all_rows if r["met"] is True]
    report.append(f"Bars: {len(met)} met, {len(missed)} missed" +
                  (": " + "; ".join(r["case"] for r in missed) if missed else "") +
                  (" (--quick judges none)" if a.quick else "") + ".")
    if A.why_missing:
        report.append("Anchors absent: " + "; ".join(f"{k}: {v}" for k, v in A.why_missing.items()))
    for name, rc, txt in extra:
        report += ["", f"## {name} (exit {rc})", "", "```", txt.rstrip(), "```"]
    report.append(f"\nload average at the end {A.load_avg():.2f}; logs in {logdir}")
    text = "\n".join(report)
    print(text)
    if a.out:
        Path(a.out).write_text("\n".join(header) + "\n" + text + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
