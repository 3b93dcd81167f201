"""An optimizer step (AdamW by default; ``--algo`` sgd, sgd-momentum) over N parameters split into T tensors:
fused multi-tensor launch (8 tensors per launch) vs one launch per tensor (the same kernel) vs torch's
optimizer(foreach=True) where torch is importable; and the bandwidth bound. "default for device" is what
cltorch.optim uses on that device (profile [optim] slots; 1 on CPU devices, 8 elsewhere).

The bound: the bytes a step must move per parameter (AdamW reads param, grad, exp_avg, exp_avg_sq and writes
param, exp_avg, exp_avg_sq: 7 * itemsize; SGD with momentum reads param, grad, momentum_buffer and writes
param, momentum_buffer: 5 * itemsize; plain SGD 3 * itemsize), divided by the bandwidth of an elementwise
``a + b`` on the same device (3 * itemsize bytes per element), measured here the way bench_elementwise
measures it.

    python benchmarks/bench_optim.py [--algo adamw] [--numel 10000000] [--tensors 100] [--iters 15] [--device cl]
    python benchmarks/bench_optim.py --torch-only     # torch's numbers alone (needs no OpenCL)

Prints ms per step (median wall time), the ratio to the bound, and the least CPU time of a step (all threads;
less sensitive to other load on a shared machine).
"""
import argparse
import statistics
import time

# --algo: (optimizer class name, keyword arguments, float32 words moved per parameter by one step)
ALGOS = {"adamw": ("AdamW", dict(lr=1e-3), 7), "sgd": ("SGD", dict(lr=1e-3), 3),
         "sgd-momentum": ("SGD", dict(lr=1e-3, momentum=0.9), 5)}


def _median_ms(fn, sync, iters, warmup=2):
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _cpu_ms(fn, sync, iters):
    """Least process CPU time (all threads, ms) of one call: robust to other load on the machine."""
    import resource

    def cpu():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime
    best = float("inf")
    for _ in range(iters):
        sync()
        c0 = cpu()
        fn()
        sync()
        best = min(best, (cpu() - c0) * 1e3)
    return best


def bench_torch(numel, tensors, iters, algo="adamw"):
    try:
        import torch
    except ImportError:
        return None
    torch.manual_seed(0)
    n = numel // tensors
    ps = [torch.randn(n, requires_grad=True) for _ in range(tensors)]
    for p in ps:
        p.grad = torch.randn(n)
    name, kw, _ = ALGOS[algo]
    opt = getattr(torch.optim, name)(ps, foreach=True, **kw)
    return (_median_ms(opt.step, lambda: None, iters), _cpu_ms(opt.step, lambda: None, max(3, iters // 3)),
            torch.get_num_threads())


def bench_cltorch(numel, tensors, iters, device, algo="adamw"):
    import numpy as np

    import cltorch
    import cltorch.optim  # noqa: F401  (cltorch does not import optim itself yet)
    from cltorch.optim import _fused

    dev = cltorch.device(device)
    n = numel // tensors
    rng = np.random.default_rng(0)
    ps = [cltorch.tensor(rng.standard_normal(n, dtype=np.float32), device=dev, requires_grad=True)
          for _ in range(tensors)]
    for p in ps:
        p.grad = cltorch.tensor(rng.standard_normal(n, dtype=np.float32), device=dev)
    sync = cltorch.cl.synchronize
    res = {}

    name, kw, words = ALGOS[algo]
    opt = getattr(cltorch.optim, name)(ps, **kw)
    opt.step()
    real = _fused.fused_step
    variants = (("fused multi-tensor (device default)", {}),
                ("per-tensor launch (same kernel)", {"slots": 1, "split_barrier": False}),
                ("multi-tensor, no split barrier", {"slots": 8, "split_barrier": False}))
    for label, over in variants:
        if over:
            _fused.fused_step = lambda *a, _o=over, **k: real(*a, **{**k, **_o})
        try:
            res[label] = (_median_ms(opt.step, sync, iters), _cpu_ms(opt.step, sync, max(3, iters // 3)))
        finally:
            _fused.fused_step = real

    # Python-side cost of one step (launches queued, device not awaited)
    sync()
    t0 = time.perf_counter()
    opt.step()
    host_ms = (time.perf_counter() - t0) * 1e3
    sync()

    # bandwidth of an elementwise a + b over a large tensor
    m = 8 * 1024 * 1024
    a = cltorch.tensor(rng.standard_normal(m, dtype=np.float32), device=dev)
    b = cltorch.tensor(rng.standard_normal(m, dtype=np.float32), device=dev)
    out = cltorch.empty(m, device=dev)
    add = lambda: cltorch.add(a, b, out=out)  # noqa: E731
    add_ms = _median_ms(add, sync, iters)
    add_cpu = _cpu_ms(add, sync, max(3, iters // 3))
    bw = 3 * 4 * m / (add_ms * 1e-3)            # bytes/s
    bound_ms = words * 4 * numel / bw * 1e3
    bound_cpu = words * 4 * numel / (3 * 4 * m) * add_cpu   # the same bound in CPU time
    return res, host_ms, bw, bound_ms, bound_cpu, str(dev)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--algo", choices=sorted(ALGOS), default="adamw")
    ap.add_argument("--numel", type=int, default=10_000_000)
    ap.add_argument("--tensors", type=int, default=100)
    ap.add_argument("--iters", type=int, default=15)
    ap.add_argument("--device", default="cl")
    ap.add_argument("--torch-only", action="store_true")
    args = ap.parse_args()
    name, kw, words = ALGOS[args.algo]
    print(f"{name}({kw}) step, {args.numel:,} float32 parameters in {args.tensors} tensors, median of {args.iters}")
    if not args.torch_only:
        res, host_ms, bw, bound_ms, bound_cpu, dev = bench_cltorch(args.numel, args.tensors, args.iters,
                                                                   args.device, args.algo)
        print(f"device {dev}: elementwise a + b bandwidth {bw / 1e9:.1f} GB/s -> bound {bound_ms:.2f} ms/step "
              f"({words} x 4 bytes per parameter); in CPU time the bound is {bound_cpu:.2f} ms")
        for k, (v, c) in res.items():
            print(f"  cltorch {k:38s} {v:8.2f} ms/step {v / bound_ms:5.2f} x bound | cpu time {c:7.2f} ms "
                  f"{c / bound_cpu:5.2f} x bound")
        print(f"  host time to queue one fused step: {host_ms:.2f} ms")
    tr = bench_torch(args.numel, args.tensors, args.iters, args.algo)
    if tr is None:
        print(f"  torch {name}(foreach=True): torch is not installed")
    else:
        print(f"  torch {name}(foreach=True) on cpu ({tr[2]} threads) {tr[0]:8.2f} ms/step   (cpu time {tr[1]:7.2f} ms)")


if __name__ == "__main__":
    main()
