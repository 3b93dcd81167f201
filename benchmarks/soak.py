"""Soak test (issue 10, "No leaks"): train a small MLP for many steps and check that nothing accumulates.

    python benchmarks/soak.py [--steps 2000] [--minutes M] [--device cl:0] [--workers 2] [--pin-memory]

Each step is ``zero_grad; cross_entropy(model(x), y).backward(); clip_grad_norm_; AdamW.step`` on batches from a
DataLoader over an in-memory dataset (``--workers`` > 0 runs its worker processes, ``--pin-memory`` its pin
thread). Every ``--checkpoint-every`` steps the model and optimizer are saved, loaded back and checked, and every
``--empty-cache-every`` steps the pool is emptied. With ``--minutes`` the run lasts that long (at least
``--steps`` steps).

After a warm-up (``--warmup`` steps, default 5% of the run, at least 50) it checks, and prints:
- ``cltorch.cl.memory_allocated()`` at the end of each step: the same value at every step (live tensors do not
  grow: graphs, saved tensors, gradients and optimizer state are released or reused);
- process RSS: grows by less than 5% from the end of warm-up to the end;
- Python objects (``gc.get_objects()``): no steady growth (kernel argument objects and graph nodes are released).
Exit status 1 when a check fails.
"""
import argparse
import gc
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cltorch as torch  # noqa: E402
import cltorch.nn as nn  # noqa: E402
import cltorch.nn.functional as F  # noqa: E402
from cltorch.utils.data import DataLoader, TensorDataset  # noqa: E402


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _mib(n):
    return f"{n / (1 << 20):.1f} MiB"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--minutes", type=float, default=0.0, help="run at least this long (0: just --steps)")
    ap.add_argument("--device", default="cl:0")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--pin-memory", action="store_true")
    ap.add_argument("--warmup", type=int, default=None)
    ap.add_argument("--checkpoint-every", type=int, default=250)
    ap.add_argument("--empty-cache-every", type=int, default=500)
    ap.add_argument("--report-every", type=int, default=250)
    args = ap.parse_args(argv)

    dev = args.device
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    n_samples, d_in, n_cls = 4096, 64, 10
    centers = rng.standard_normal((n_cls, d_in)).astype(np.float32) * 2
    y_all = rng.integers(0, n_cls, n_samples)
    x_all = (centers[y_all] + rng.standard_normal((n_samples, d_in)).astype(np.float32))
    ds = TensorDataset(torch.tensor(x_all), torch.tensor(y_all))
    loader = DataLoader(ds, batch_size=args.batch, shuffle=True, drop_last=True, num_workers=args.workers,
                        pin_memory=args.pin_memory, persistent_workers=args.workers > 0)
    model = nn.Sequential(nn.Linear(d_in, 128), nn.ReLU(), nn.Linear(128, 128), nn.GELU(), nn.Dropout(0.1),
                          nn.LayerNorm(128), nn.Linear(128, n_cls)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    warmup = args.warmup if args.warmup is not None else max(50, args.steps // 20)
    deadline = time.time() + args.minutes * 60 if args.minutes else None
    ckpt = Path(tempfile.mkdtemp(prefix="cltorch-soak-")) / "soak.pt"
    mem_values, objs = set(), []
    rss0 = None
    step = 0
    losses = []
    failures = []
    t0 = time.time()
    print(f"soak: {dev} ({torch.cl.get_device_name(dev) if dev.startswith('cl') else 'host'}), batch {args.batch}, "
          f"workers {args.workers}, pin_memory {args.pin_memory}, at least {args.steps} steps"
          + (f" and {args.minutes} min" if args.minutes else ""), flush=True)
    while step < args.steps or (deadline is not None and time.time() < deadline):
        for xb, yb in loader:
            xb, yb = xb.to(dev, non_blocking=True), yb.to(dev, non_blocking=True)
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            if step % 50 == 0:
                losses.append(loss.item())
            del xb, yb, loss
            if args.checkpoint_every and step % args.checkpoint_every == 0:
                torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, ckpt)
                back = torch.load(ckpt)
                if back["step"] != step or not all(
                        np.array_equal(back["model"][k].cpu().numpy(), v.detach().cpu().numpy())
                        for k, v in model.state_dict().items()):
                    failures.append(f"checkpoint at step {step} did not round-trip")
                model.load_state_dict(back["model"])
                opt.load_state_dict(back["opt"])
                del back
            if args.empty_cache_every and step % args.empty_cache_every == 0:
                torch.cl.empty_cache()
            if step == warmup:
                gc.collect()
                rss0 = rss_bytes()
            if step > warmup:
                torch.cl.synchronize()
                mem_values.add(torch.cl.memory_allocated(dev) if dev.startswith("cl") else 0)
                if step % args.report_every == 0:
                    gc.collect()
                    objs.append(len(gc.get_objects()))
                    el = time.time() - t0
                    print(f"  step {step:6d}  {el:7.1f} s  {step / el:6.1f} steps/s  loss {losses[-1]:.4f}  "
                          f"allocated {_mib(torch.cl.memory_allocated(dev) if dev.startswith('cl') else 0)}  "
                          f"RSS {_mib(rss_bytes())}  objects {objs[-1]}", flush=True)
            if step >= args.steps and (deadline is None or time.time() >= deadline):
                break
    elapsed = time.time() - t0
    gc.collect()
    rss1 = rss_bytes()
    growth = (rss1 - rss0) / rss0 if rss0 else float("nan")
    del loader
    print(f"soak: {step} steps in {elapsed:.1f} s ({step / elapsed:.1f} steps/s); loss {losses[0]:.4f} -> "
          f"{losses[-1]:.4f}")
    print(f"  memory_allocated after warm-up ({warmup} steps): {sorted(mem_values)[:4]} "
          f"({'flat' if len(mem_values) <= 1 else 'MOVED'})")
    print(f"  RSS {_mib(rss0)} -> {_mib(rss1)}: {growth * 100:+.2f}% (limit +5%)")
    if len(objs) >= 2:
        print(f"  Python objects at reports: first {objs[0]}, last {objs[-1]}, max {max(objs)}")
    if len(mem_values) > 1:
        failures.append(f"memory_allocated moved after warm-up: {sorted(mem_values)[:8]}")
    if not growth < 0.05:
        failures.append(f"RSS grew {growth * 100:.2f}%")
    if len(objs) >= 3 and objs[-1] - objs[0] > 1000:
        failures.append(f"Python objects grew from {objs[0]} to {objs[-1]}")
    if not losses[-1] < losses[0]:
        failures.append("the loss did not go down")
    for f in failures:
        print("FAIL:", f)
    print("soak:", "OK" if not failures else "FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
