"""Elementwise and reduction throughput against numpy, side by side in one run (issue 2's bars).

Cases: ``c = a + b`` on 16M contiguous float32; the same with a transposed ``a``; ``sum`` of a 4096x4096
float32; and the per-op host overhead of a queued 1,000-element add through the public Tensor API.
Prints medians of several repetitions and the ratio ours/numpy in throughput (higher is better).

    python benchmarks/bench_elementwise.py [--device cl:0] [--reps 7] [--quick]
"""
import argparse
import statistics
import time

import numpy as np

import cltorch as torch


def _median_time(fn, reps, sync=None, inner=1):
    fn()
    if sync:
        sync()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        if sync:
            sync()
        ts.append((time.perf_counter() - t0) / inner)
    return statistics.median(ts)


def run(device="cl:0", reps=7, quick=False):
    n = (1 << 22) if quick else (1 << 24)
    side = 1024 if quick else 4096
    rows = []
    rng = np.random.default_rng(0)
    sync = torch.cl.synchronize

    an = rng.standard_normal(n).astype(np.float32)
    bn = rng.standard_normal(n).astype(np.float32)
    a, b = torch.tensor(an, device=device), torch.tensor(bn, device=device)
    out_np = np.empty_like(an)
    t_np = _median_time(lambda: np.add(an, bn, out=out_np), reps)
    t_cl = _median_time(lambda: a + b, reps, sync)
    gb = 3 * n * 4 / 1e9
    rows.append(("a+b contiguous, %dM f32" % (n >> 20), t_cl, t_np, gb))

    side_t = int(np.sqrt(n))
    an2 = an[: side_t * side_t].reshape(side_t, side_t)
    bn2 = bn[: side_t * side_t].reshape(side_t, side_t)
    a2, b2 = torch.tensor(an2, device=device), torch.tensor(bn2, device=device)
    t_np = _median_time(lambda: np.add(an2.T, bn2, out=out_np[: side_t * side_t].reshape(side_t, side_t)), reps)
    t_cl = _median_time(lambda: a2.t() + b2, reps, sync)
    rows.append(("a.T+b (transposed a), %dx%d" % (side_t, side_t), t_cl, t_np, 3 * side_t * side_t * 4 / 1e9))

    sn = rng.standard_normal((side, side)).astype(np.float32)
    s = torch.tensor(sn, device=device)
    t_np = _median_time(lambda: sn.sum(), reps)
    t_cl = _median_time(lambda: s.sum(), reps, sync)
    rows.append(("sum %dx%d f32" % (side, side), t_cl, t_np, side * side * 4 / 1e9))

    print(f"device: {device} ({torch.cl.get_device_name(device)})")
    print(f"| case | ours ms | numpy ms | ours GB/s | numpy GB/s | ratio (ours/numpy throughput) |")
    print("|---|---|---|---|---|---|")
    for name, tc, tn, g in rows:
        print(f"| {name} | {tc * 1e3:.2f} | {tn * 1e3:.2f} | {g / tc:.1f} | {g / tn:.1f} | {tn / tc:.2f}x |")

    small_a = torch.ones(1000, device=device)
    small_b = torch.ones(1000, device=device)
    per_op = _median_time(lambda: small_a + small_b, reps, sync=None, inner=2000)
    sync()
    print(f"\nper-op host overhead, queued 1,000-element add through the Tensor API: {per_op * 1e6:.1f} us "
          f"(median of {reps} x 2000 ops, no sync between ops)")
    floor = _launch_floor(small_a, small_b, reps)
    if floor:
        print(f"the floor under it, the same kernel launched straight through pyopencl (arguments set per call, as "
              f"ours): {floor[0] * 1e6:.1f} us; with a new output buffer from the pool per call: "
              f"{floor[1] * 1e6:.1f} us")
    return rows, per_op


def _launch_floor(a, b, reps):
    """(s per launch, s per launch with a pooled output allocation) of the kernel that ``a + b`` uses, called
    directly through pyopencl with no Tensor, dispatch or plan lookup: what a Python launch path cannot beat."""
    from cltorch.ops import elementwise as E
    plan = E._plans.get(E._plan_key("x0 + x1", [a, b], a.dtype, a.dtype, None, None, None))
    if plan is None or plan.kernel is None:
        return None
    rt = plan.rt
    out = rt.alloc(4 * a.numel())
    ab, bb = a._storage.cl_buffer(), b._storage.cl_buffer()
    k, q, gs, ls, tail = plan.kernel, rt.queue, plan.gs, plan.ls, plan.tail

    def launch():
        k(q, gs, ls, out, 0, ab, 0, bb, 0, *tail)

    def launch_alloc():
        o = rt.pool.allocate(4 * a.numel())
        k(q, gs, ls, o, 0, ab, 0, bb, 0, *tail)
    res = (_median_time(launch, reps, inner=2000), _median_time(launch_alloc, reps, inner=2000))
    rt.queue.finish()
    return res


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cl:0")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    run(args.device, args.reps, args.quick)
