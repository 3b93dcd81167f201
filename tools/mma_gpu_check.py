"""Matrix units on a GPU, in one short run (issue 27): what a GPU session runs to turn them on and measure them.

For the first GPU device (or --device): the probe's verdict per dtype with CLTORCH_MATRIX_UNITS=auto (and the
reason when it fails), then for float16, bfloat16 and TF32 float32 an M = N = K GEMM (default 4096) timed on each
candidate tile row of the unit, on the portable GPU design (units off), and on torch's GPU when there is one (TF32
off for float32 unless the row is TF32), with each result's largest relative difference from the others; then the
float16 attention forward (B8 H16 S1024 D64) on the flash design, on the unit and on torch. Prints one line per
measurement and, with --json, writes them.

    CLTORCH_PLATFORM=NVIDIA python tools/mma_gpu_check.py [--device cl:0] [--size 4096] [--json mma.json]

Rows tried: the profile's [gemm] mma_sizes, then a few others (--rows "bm,bn,bk,wm,wn;..." replaces them). The
fastest row that passed is what to write into the vendor's profile (devices/<vendor>.toml mma_sizes, first), with
matrix_units = "auto" once the bars hold.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

os.environ.setdefault("CLTORCH_MATRIX_UNITS", "auto")

import cltorch  # noqa: E402
from cltorch.backend import runtime  # noqa: E402
from cltorch.ops import gemm as G  # noqa: E402
from cltorch.ops.gemm import mma  # noqa: E402

EXTRA_ROWS = [dict(bm=128, bn=128, bk=32, wm=2, wn=2), dict(bm=128, bn=256, bk=32, wm=2, wn=4),
              dict(bm=256, bn=128, bk=32, wm=4, wn=2), dict(bm=128, bn=128, bk=64, wm=2, wn=4)]


def _gpu(device):
    if device:
        return runtime(cltorch.device(device).index)
    for i in range(cltorch.cl.device_count()):
        r = runtime(i)
        if r.info.is_gpu:
            return r
    raise SystemExit("no GPU OpenCL device")


def _time(fn, sync, reps=5, iters=10):
    fn()
    sync()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        best = min(best, (time.perf_counter() - t0) / iters)
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device")
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--rows", help='"bm,bn,bk,wm,wn;..." (replaces the rows tried)')
    ap.add_argument("--units", default="auto", help='the matrix-unit setting to time (default "auto"; a dry run on a '
                    'CPU device: --units nv_mma:emulated --size 96 --rows "32,24,16,2,1")')
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    rt = _gpu(args.device)
    dev = f"cl:{rt.info.index}"
    out = []

    def say(**rec):
        out.append(rec)
        print(json.dumps(rec), flush=True)

    from cltorch.cli.devices import gemm_designs
    os.environ["CLTORCH_MATRIX_UNITS"] = args.units
    say(device=dev, name=rt.info.name, driver=rt.info.driver_version, units=mma.auto_units(rt.info),
        setting=mma.setting(rt.profile)[1])
    for g in gemm_designs(rt.info, rt.profile):
        say(dtype=g["dtype"], design=g["design"], why=g["why"])
    try:
        import torch
        tdev = "cuda" if torch.cuda.is_available() else None
        if tdev:
            torch.backends.cuda.matmul.allow_tf32 = False
    except ImportError:
        torch, tdev = None, None
    n = args.size
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    g0 = dict(rt.profile.get("gemm", {}))
    units = mma.auto_units(rt.info) if args.units == "auto" else [args.units.split(",")[0].split(":")[0]]
    rows = [dict(zip(("bm", "bn", "bk", "wm", "wn"), map(int, r.split(",")))) for r in args.rows.split(";")] \
        if args.rows else [dict(r) for r in mma.unit_rows(rt.profile, units[0], "half")] + EXTRA_ROWS if units else []
    flops = 2.0 * n ** 3
    for dt in ("float16", "bfloat16", "float32"):
        A = cltorch.tensor(a, device=dev).to(getattr(cltorch, dt))
        B = cltorch.tensor(b, device=dev).to(getattr(cltorch, dt))
        results = {}

        def run(label, setting, mma_rows=None, tf32=False):
            os.environ["CLTORCH_MATRIX_UNITS"] = setting
            rt.profile["gemm"] = dict(g0, **({"mma_sizes": [mma_rows]} if mma_rows else {}))
            G.clear_cache()
            cltorch.set_float32_matmul_precision("high" if tf32 else "highest")
            try:
                C = A @ B
                s = _time(lambda: A @ B, cltorch.cl.synchronize)
                d = G.describe(rt, n, n, n, 1, {"float16": np.float16, "float32": np.float32}.get(
                    dt, np.dtype(cltorch.bfloat16.np))) or {}
                results[label] = C.float().cpu().numpy()
                say(dtype=dt, run=label, design=d.get("design"), unit=d.get("unit"), row=mma_rows,
                    ms=round(s * 1e3, 4), tflops=round(flops / s / 1e12, 1))
            except Exception as e:  # noqa: BLE001 - a row's failure is its result
                say(dtype=dt, run=label, row=mma_rows, error=f"{type(e).__name__}: {str(e)[:300]}")
            finally:
                cltorch.set_float32_matmul_precision("highest")
        run("portable", "off")
        for i, r in enumerate(rows if units else []):
            run(f"mma row {i}", args.units, r, tf32=dt == "float32")
        if tdev:
            ta = torch.tensor(a, device=tdev).to(getattr(torch, dt))
            tb = torch.tensor(b, device=tdev).to(getattr(torch, dt))
            s = _time(lambda: ta @ tb, torch.cuda.synchronize)
            results["torch"] = (ta @ tb).float().cpu().numpy()
            say(dtype=dt, run="torch", ms=round(s * 1e3, 4), tflops=round(flops / s / 1e12, 1))
        ref = results.get("portable")
        for k, v in results.items():
            if ref is not None and k != "portable":
                say(dtype=dt, run=k, max_rel_diff_from_portable=float(np.abs(v - ref).max() / np.abs(ref).max()))
    rt.profile["gemm"] = g0
    # attention forward, float16, B8 H16 S1024 D64 (the bench row): the flash design, the unit, torch
    shp = (8, 16, 1024, 64) if n >= 1024 else (1, 2, 128, 64)
    x = [rng.standard_normal(shp).astype(np.float32) for _ in range(3)]
    q, k, v = (cltorch.tensor(t, device=dev).half() for t in x)
    res = {}
    for label, setting in (("flash", "off"), ("mma", args.units)):
        os.environ["CLTORCH_MATRIX_UNITS"] = setting
        G.clear_cache()
        try:
            y = cltorch.nn.functional.scaled_dot_product_attention(q, k, v)
            s = _time(lambda: cltorch.nn.functional.scaled_dot_product_attention(q, k, v), cltorch.cl.synchronize)
            res[label] = y.float().cpu().numpy()
            say(op="sdpa fwd float16", shape=shp, run=label, ms=round(s * 1e3, 4),
                tflops=round(4.0 * np.prod(shp) * shp[2] / s / 1e12, 1))
        except Exception as e:  # noqa: BLE001
            say(op="sdpa fwd float16", run=label, error=f"{type(e).__name__}: {str(e)[:300]}")
    if tdev:
        tq, tk, tv = (torch.tensor(t, device=tdev).half() for t in x)
        f = torch.nn.functional.scaled_dot_product_attention
        s = _time(lambda: f(tq, tk, tv), torch.cuda.synchronize)
        say(op="sdpa fwd float16", shape=shp, run="torch", ms=round(s * 1e3, 4),
            tflops=round(4.0 * np.prod(shp) * shp[2] / s / 1e12, 1))
    if "flash" in res and "mma" in res:
        say(op="sdpa fwd float16", max_abs_diff_mma_vs_flash=float(np.abs(res["mma"] - res["flash"]).max()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
