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

``--parts`` prints where the host time of the recorded add and of the chain's backward goes (``parts()``): each part
timed on its own, Python only (the runtime's launch a no-op while they run), next to the real bare launch.

    python benchmarks/bench_autograd.py [--device cl:0] [--rounds 5] [--quick] [--profile] [--parts]
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


def _t(fn, n, reps=15, sync=None):
    """Microseconds per call of ``fn``: the minimum over ``reps`` batches of ``n`` (the least disturbed batch on a
    shared machine). Process CPU time, so waiting for a core on a loaded machine is not counted; with ``sync``
    (called around each batch), wall time, which counts the driver's threads too."""
    import time
    clock = time.perf_counter if sync else time.process_time
    best = None
    for _ in range(reps):
        if sync:
            sync()
        t0 = clock()
        for _ in range(n):
            fn()
        if sync:
            sync()
        t = (clock() - t0) / n * 1e6
        best = t if best is None else min(best, t)
    return best


def parts(device="cl:0", out=print, rounds=3):
    """The host time of ``add, recording`` and of ``backward only`` split by part, in us (see the module's doc).
    Returns {part: us}. Parts are timed alone, so the sums do not match the whole exactly (caches, branch history)."""
    import cltorch
    from cltorch import _dispatch as Dp
    from cltorch._storage import Storage
    from cltorch.autograd import graph as G
    from cltorch.ops import elementwise as E
    sides = _make(cltorch, device)
    dev = cltorch.device(device)
    a = cltorch.ones(N, requires_grad=True, device=dev)
    b, c, g, acc = (cltorch.ones(N, device=dev) for _ in range(4))
    for _ in range(3):
        sides["chain"]()
        sides["backward"]()
        a + b, b + c, g * b, g.tanh()
    sync = cltorch.cl.synchronize
    plan = E.plan_of("x0 + x1", [b, c], b.dtype, b.dtype)
    o = b + c
    rt = b._storage.runtime()
    launch = rt.launch
    args = (o._storage.buf, o._offset, b._storage.buf, 0, c._storage.buf, 0, *plan.tail)
    r = {"launch (real: rt.launch of the add's kernel, queued)": _t(lambda: launch(plan.kernel, plan.gs, plan.ls, *args),
                                                                    2000, sync=sync)}
    sync()
    mctx = Dp.Ctx("mul")
    mctx.save_for_backward(g, b)
    mctx.a_scalar = mctx.b_scalar = None
    mctx.needs_input_grad = (True, True)
    tctx = Dp.Ctx("tanh")
    tctx.save_for_backward(g, g.tanh())
    sync()
    rt.launch = lambda *x: None     # Python only from here
    t = {}
    try:
        for _ in range(rounds):     # rounds over all parts, the minimum of each kept: the parts alternate
            _min_into(t, _python_parts(cltorch, Dp, G, Storage, sides, plan, a, b, c, g, acc, o, mctx, tctx, dev))
    finally:
        del rt.launch
    sync()
    r.update({
        "add rec: dispatch layers (public call, call, _call)": t["public b + c"] - t["add forward"],
        "add rec: dtype rule + plan lookup (forward's signature key)": t["add forward"] - t["plan.run"],
        "add rec: output construction (Storage.empty + Tensor._make)": t["output"],
        "add rec: plan.run's arguments and launch call, less the output": t["plan.run"] - t["output"],
        "add rec: Ctx": t["Ctx"],
        "add rec: record (edges, Node, output metadata)": t["Ctx+record"] - t["Ctx"],
        "add rec: whole, Python only": t["a + b"],
        "bwd: engine loop, per node (chain of pass-through nodes)": t["engine"],
        "bwd: saved_tensors with version checks (2 tensors)": t["saved"],
        "bwd: mul derivative above its 2 forwards": t["mul bw"] - 2 * t["mul fwd"],
        "bwd: tanh fused derivative above plan.run": t["tanh bw"] - t["plan.run"],
        "bwd: accumulation into .grad above plan.run": t["add_into"] - t["plan.run"],
        "bwd: one launch's Python (plan.run)": t["plan.run"],
        "bwd: whole, Python only, per forward op": t["bwd"],
        "fwd: tanh, Python only (its forward has no kept plan)": t["tanh"],
        "fwd: mul recording, Python only": t["mul rec"],
    })
    for k, v in r.items():
        out(f"{k}: {v:.2f} us")
    return r


def _min_into(t, new):
    for k, v in new.items():
        t[k] = min(v, t.get(k, v))


def _python_parts(cltorch, Dp, G, Storage, sides, plan, a, b, c, g, acc, o, mctx, tctx, dev):
    """One round of parts() timings, the runtime's launch already a no-op."""
    add, mul, tanh = Dp.REGISTRY["add"], Dp.REGISTRY["mul"], Dp.REGISTRY["tanh"]

    def rec():
        G.record(add, Dp.Ctx("add"), (a, b), o)
    t = {"public b + c": _t(lambda: b + c, 3000), "add forward": _t(lambda: add.forward(None, b, c), 3000),
         "plan.run": _t(lambda: plan.run((b, c), None), 3000),
         "output": _t(lambda: cltorch.Tensor._make(Storage.empty(N, b.dtype, dev, for_kernel=True), (N,), (1,)),
                      3000),
         "Ctx": _t(lambda: Dp.Ctx("add"), 3000), "Ctx+record": _t(rec, 3000), "a + b": _t(lambda: a + b, 3000),
         "tanh": _t(lambda: b.tanh(), 3000), "mul rec": _t(lambda: a * b, 3000)}
    prev = Dp.set_grad_enabled_raw(False)
    try:
        t.update({"saved": _t(lambda: mctx.saved_tensors, 3000), "mul fwd": _t(lambda: mul.forward(None, g, b), 3000),
                  "mul bw": _t(lambda: mul.backward(mctx, g), 3000),
                  "tanh bw": _t(lambda: tanh.backward(tctx, g), 3000),
                  "add_into": _t(lambda: G._add_into(acc, g), 3000)})
    finally:
        Dp.set_grad_enabled_raw(prev)
    t["bwd"] = _t(sides["backward"], 30) / OPS
    t["engine"] = _engine_per_node(cltorch, Dp, G)
    return t


def _engine_per_node(cltorch, Dp, G, n=300):
    """us per node of the engine over a chain of ``n`` nodes whose derivative hands the gradient on (no kernels)."""
    op = Dp.Op("pass_through", None, lambda ctx, g: (g,))
    leaf = cltorch.ones(10, requires_grad=True)
    meta = [((10,), leaf.dtype, leaf.device)]
    prev = G._edge(leaf)
    for _ in range(n):
        ctx = Dp.Ctx("pass_through")
        ctx.save_for_backward()
        prev = (G.Node(op, ctx, [prev], None, meta), 0)
    root = cltorch.ones(10)
    root._requires_grad, root.grad_fn = True, prev[0]
    g0 = cltorch.ones(10)

    def run():
        leaf.grad = None
        G.run_backward([root], [g0], retain_graph=True)
    return _t(run, 20) / (n + 1)


def suite(quick=False, device="cl:0"):
    """Rows for benchmarks/run.py."""
    return run(quick=quick, device=device)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cl:0")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--parts", action="store_true", help="the host time split by part (Python only), then exit")
    a = ap.parse_args(argv)
    if a.parts:
        parts(a.device)
        return
    print(A.describe(with_tinygrad=False))   # tinygrad points OCL_ICD_VENDORS at pip's PoCL, hiding our devices
    for r in run(a.quick, a.device, a.rounds, a.profile):
        anc = ", ".join(f"{k} {v:.1f}" for k, v in r["anchors"].items())
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f} ({r['ratio_desc']})"
        print(f"{r['case']}: ours {r['ours']:.1f} us; {anc}; ratio {ratio}; {r['note']}")


if __name__ == "__main__":
    main()
