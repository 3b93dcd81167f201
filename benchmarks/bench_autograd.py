"""Autograd overhead: what recording and replaying a graph of small ops costs on the host, cltorch against
PyTorch CPU eager, side by side in one run.

- ``chain``: forward of 30 pointwise ops (``y = (y * w + b).tanh()`` ten times, w and b leaf tensors that need
  gradients) on 1,000 float32 elements, ``sum``, then ``backward``; time per recorded op (forward and backward
  together, divided by the 30 forward ops).
- ``add, recording``: one queued ``a + b`` on 1,000 elements where ``a`` requires grad, so a graph node is made
  (compare with bench_elementwise's non-recording add).
- ``backward only``: ``backward`` of the chain's graph (``retain_graph=True``), per forward op.

All sides queue their work; cltorch's device is synchronised once per timed batch. Sides alternate in rounds.
Each row's note reads it against the launch floor (issue 16): the row's kernel launches per op (counted on one call)
times a bare pyopencl launch of the 1,000-element add with a pooled output, measured in the same run as
``benchmarks/bench_launch_floor.py`` does (batch plus finish), so "ours = floor + X" is the host overhead above it.

    python benchmarks/bench_autograd.py [--device cl:0] [--rounds 5] [--quick] [--profile]
"""
import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _anchors as A  # noqa: E402

N = 1000
DEPTH = 10
OPS = 3 * DEPTH


def _make(lib, device):
    rng = np.random.default_rng(0)
    kw = {} if device is None else {"device": device}
    x = lib.tensor(rng.standard_normal(N).astype(np.float32), **kw)
    ws = [lib.tensor(rng.standard_normal(N).astype(np.float32) * 0.5, requires_grad=True, **kw) for _ in range(DEPTH)]
    bs = [lib.tensor(rng.standard_normal(N).astype(np.float32) * 0.1, requires_grad=True, **kw) for _ in range(DEPTH)]

    def forward():
        y = x
        for w, b in zip(ws, bs):
            y = (y * w + b).tanh()
        return y.sum()

    def chain():
        for p in ws + bs:
            p.grad = None
        forward().backward()

    a = lib.ones(N, requires_grad=True, **kw)
    b = lib.ones(N, **kw)

    def add():
        return a + b

    graph = {}

    def backward_only():
        if "loss" not in graph:
            graph["loss"] = forward()
        graph["loss"].backward(retain_graph=True)
    return {"chain": chain, "add": add, "backward": backward_only, "check": (forward, ws)}


def run(quick=False, device="cl:0", rounds=None, profile=False, out=print):
    import cltorch
    rounds = rounds or (1 if quick else 7)
    target = 0.05 if quick else 0.25
    ours = _make(cltorch, device)
    torch = A.torch()
    theirs = _make(torch, None) if torch is not None else None
    sync = cltorch.cl.synchronize

    if theirs is not None:  # same values and gradients before timing anything
        lo, lt = ours["check"][0](), theirs["check"][0]()
        lo.backward()
        lt.backward()
        g_o = ours["check"][1][0].grad.cpu().numpy()
        g_t = theirs["check"][1][0].grad.numpy()
        if not np.allclose(g_o, g_t, rtol=1e-4, atol=1e-5):
            raise AssertionError(f"chain gradients differ from torch's by {np.abs(g_o - g_t).max():.3g}")

    floor = _floor(device)
    rows = []
    for key, label, per in (("chain", f"autograd chain: {OPS} pointwise ops on {N} f32, fwd+bwd, per op", OPS),
                            ("add", f"add on {N} f32 with a graph node (recording), queued", 1),
                            ("backward", f"backward only of the {OPS}-op chain, per op", OPS)):
        sides = {"ours": (ours[key], sync)}
        if theirs is not None:
            sides.update(A.torch_sides(lambda key=key: theirs[key]))
        load = A.load_avg()
        res = A.interleaved(sides, rounds=rounds, target_s=target, warmup=2)
        A.restore_torch_threads()
        med = {k: A.median(v) * 1e6 / per for k, v in res.items()}
        bt = A.best_torch(res)
        r = A.round_ratio(res["ours"], res.get(bt))
        note = f"load {load:.1f}; {A.cpu_note(1e6 / per, 'us')}"
        if floor is not None:
            lpo = _launches(ours[key]) / per
            f_us = lpo * floor * 1e6
            note += (f"; floor {lpo:.2f} launches/op x {floor * 1e6:.1f} us (bare pyopencl launch, pooled output, "
                     f"same run) = {f_us:.1f} us: ours = floor + {med['ours'] - f_us:.1f} us")
        rows.append(A.case(label, "us", med["ours"], {k: v for k, v in med.items() if k != "ours"}, r,
                           f"ours/{bt} time", None, None, note=note))
    if profile:
        A.profile_host(ours["chain"], sync, n=50, out=out)
    return rows


def _floor(device):
    """Wall seconds per bare pyopencl launch of the 1,000-element add with a pooled output, batch plus finish
    (bench_launch_floor.py's sustained rate), on ``device``; None where it cannot be measured."""
    try:
        import bench_launch_floor as F
        return F.device_floors(device, reps=5, inner=1000)["enqueue + set_args + pooled output"][0]
    except Exception as e:  # noqa: BLE001 - a benchmark row, not a test
        print(f"launch floor not measured: {type(e).__name__}: {e}")
        return None


def _launches(fn):
    """Kernel launches one call of ``fn`` makes (Runtime.launch calls)."""
    from cltorch.backend.runtime import Runtime
    n = [0]
    orig = Runtime.launch

    def launch(rt, *a, **k):
        n[0] += 1
        return orig(rt, *a, **k)
    Runtime.launch = launch
    try:
        fn()
    finally:
        Runtime.launch = orig
    return n[0]


def suite(quick=False, device="cl:0"):
    """Rows for benchmarks/run.py."""
    return run(quick=quick, device=device)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cl:0")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args(argv)
    print(A.describe(with_tinygrad=False))   # tinygrad points OCL_ICD_VENDORS at pip's PoCL, hiding our devices
    for r in run(a.quick, a.device, a.rounds, a.profile):
        anc = ", ".join(f"{k} {v:.1f}" for k, v in r["anchors"].items())
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f} ({r['ratio_desc']})"
        print(f"{r['case']}: ours {r['ours']:.1f} us; {anc}; ratio {ratio}; {r['note']}")


if __name__ == "__main__":
    main()
