"""The same eager step on ``cpu`` tensors and on ``cl:0`` (issue 16's cpu bar: cpu within 1.1x of cl:0), in one
process, the two sides alternating in rounds. Both run on the same OpenCL CPU device here (PoCL); ``cpu`` storages
are pooled host blocks reached through zero-copy buffers kept with each block, and small exact pointwise ops run in
numpy only while no kernel is queued (otherwise they queue their kernel, as on ``cl:0``).

- ``mlp``: one SGD step of a 784-256-256-10 ReLU MLP on a batch of 128 (zero_grad, forward, cross_entropy,
  backward, step).
- ``chain``: the 30-op pointwise chain of bench_autograd (``y = (y * w + b).tanh()`` ten times on 1,000 float32,
  sum, backward), per op.

The ratio is cpu time over cl:0 time (median of per-round ratios); process CPU per call is printed too, since on a
loaded 2-core machine wall time mostly measures who got the cores, and so is the number of queue finishes one step
makes on each side (cpu ops wait only where memory numpy shares is touched: ``Runtime.finish_if_exposed``).

    python benchmarks/bench_cpu_vs_cl.py [--rounds 7] [--quick]
"""
import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _anchors as A  # noqa: E402


def _mlp(device):
    import cltorch as torch
    import cltorch.nn as nn
    import cltorch.nn.functional as F
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    x = torch.randn(128, 784).to(device)
    y = torch.randint(0, 10, (128,)).to(device)

    def step():
        opt.zero_grad()
        F.cross_entropy(m(x), y).backward()
        opt.step()
    return step


def _chain(device, n=1000, depth=10):
    import cltorch as torch
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal(n).astype(np.float32), device=device)
    ws = [torch.tensor(rng.standard_normal(n).astype(np.float32) * .5, requires_grad=True, device=device)
          for _ in range(depth)]
    bs = [torch.tensor(rng.standard_normal(n).astype(np.float32) * .1, requires_grad=True, device=device)
          for _ in range(depth)]

    def step():
        for p in ws + bs:
            p.grad = None
        y = x
        for w, b in zip(ws, bs):
            y = (y * w + b).tanh()
        y.sum().backward()
    return step


def _waits(step, sync):
    """Queue finishes one call of ``step`` makes (``Runtime.synchronize`` finding queued work), the closing
    synchronize not counted: what the cpu wait rule (``Runtime.finish_if_exposed``) and host reads cost."""
    from cltorch.backend.runtime import Runtime
    sync()
    n = [0]
    orig = Runtime.synchronize

    def counted(rt):
        n[0] += bool(rt.pending)
        return orig(rt)
    Runtime.synchronize = counted
    try:
        step()
    finally:
        Runtime.synchronize = orig
    sync()
    return n[0]


def run(quick=False, rounds=None, device="cl:0"):
    import cltorch
    rounds = rounds or (1 if quick else 7)
    target = 0.05 if quick else 0.3
    sync = cltorch.cl.synchronize
    rows = []
    for key, label, make, unit, per in (("mlp", "MLP 784-256-256-10 b128 SGD step, cpu vs cl", _mlp, "ms", 1e3),
                                        ("chain", "30-op pointwise chain fwd+bwd on 1000 f32, per op, cpu vs cl",
                                         _chain, "us", 1e6 / 30)):
        sides = {"cpu": (make("cpu"), sync), device: (make(device), sync)}
        load = A.load_avg()
        res = A.interleaved(sides, rounds=rounds, target_s=target, warmup=3)
        cpu_t = {k: A.median(v) * per for k, v in A.cpu_times.items() if k in sides and v}
        r = A.round_ratio(res["cpu"], res[device])
        note = f"load {load:.1f}"
        if cpu_t:
            note += "; process CPU per call: " + ", ".join(f"{k} {v:.3g} {unit}" for k, v in cpu_t.items())
        note += "; queue finishes per step: " + ", ".join(f"{k} {_waits(f, sync)}" for k, (f, _) in sides.items())
        rows.append(A.case(label, unit, A.median(res["cpu"]) * per, {device: A.median(res[device]) * per}, r,
                           f"cpu/{device} time", "<= 1.1", None if r is None else r <= 1.1, note=note))
    return rows


def suite(quick=False, device="cl:0"):
    """Rows for benchmarks/run.py."""
    return run(quick=quick, device=device)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--device", default="cl:0")
    a = ap.parse_args(argv)
    for r in run(a.quick, a.rounds, a.device):
        anc = ", ".join(f"{k} {v:.3g}" for k, v in r["anchors"].items())
        print(f"{r['case']}: cpu {r['ours']:.3g} {r['unit']}; {anc}; ratio {r['ratio']:.2f} ({r['ratio_desc']}, bar "
              f"{r['bar']}: {'met' if r['met'] else 'not met'}); {r['note']}")


if __name__ == "__main__":
    main()
