"""fp32 GEMM: our OpenCL kernel against numpy/OpenBLAS, side by side in one run.

For each cube size n (256, 512, 1024, 2048 by default) it times ``C = A @ B`` with A, B, C ``n x n``
float32, contiguous, on the default OpenCL device, and numpy's ``A @ B`` on the host, alternating the
two in rounds so that both see the same machine load. Ours is timed over a batch of queued GEMMs
between two ``queue.finish()`` calls (never a sync per op), including the packing kernels the
launcher queues. Each round gives one GFLOP/s figure per side; the medians are printed, with the
ratio ours/numpy (the median of the rounds' ratios, each round's two sides having seen the same load) and the bar from issue 3 (>= 0.6x at 256 and 1024, >= 0.5x at 2048).

    python benchmarks/bench_gemm.py [--sizes 256 512 1024 2048] [--rounds 7] [--quick]
                                    [--device N] [--dtype float32|float64] [--config JSON]
                                    [--quiet-wait S]

``--config`` replaces the profile's ``[gemm]`` table for this run (used to search tile sizes), e.g.
``--config '{"design": "cpu", "sizes": [{"mr": 6, "nv": 2, "vw": 8, "lx": 8, "ly": 8}]}'``.

The machine may be shared: "others' load" is the CPU time other processes took during that size's
rounds, in cores (of 2 here). Under load OpenBLAS (whose threads wait for each other) slows far more
than our kernel, so only rows with a load near 0 give the real ratio.

Measured here (2-core AMD EPYC, PoCL 3.0, numpy 2.4.6 / OpenBLAS 0.3.31 Haswell kernels, OPENBLAS_CORETYPE
unset as in the test environment), each row from the run where other processes were nearest idle:

| n | ours GFLOP/s | numpy GFLOP/s | ratio | bar | others' load |
|---|---|---|---|---|---|
| 256 | 102.0 | 115.1 | 0.87 | >= 0.6 | 0.04 |
| 512 | 88.7 | 115.1 | 0.77 | | 0.09 |
| 1024 | 120.1 | 134.4 | 0.96 | >= 0.6 | 0.13 |
| 2048 | 121.8 | 130.1 | 0.94 | >= 0.5 | 0.12 |

numpy's speed depends on OPENBLAS_CORETYPE (set on some machines here, see the environment notes):
the header line prints it and the BLAS kernel threadpoolctl reports, so a table is read with them.
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BARS = {256: 0.6, 1024: 0.6, 2048: 0.5}


def _blas_info():
    try:
        from threadpoolctl import threadpool_info
        for d in threadpool_info():
            if d.get("user_api") == "blas":
                return f"{d.get('internal_api')} {d.get('version')} ({d.get('architecture')}, {d.get('num_threads')} threads)"
    except Exception:
        pass
    return "unknown BLAS"


class _Load:
    """CPU time that other processes used during a block, in cores (Linux /proc/stat; None elsewhere).

    The machine is shared: a ratio measured while other processes run is not the unloaded ratio, so the
    table prints this next to each size."""

    def __enter__(self):
        self.t0, self.b0, self.o0 = time.perf_counter(), self._busy(), self._own()
        return self

    def __exit__(self, *exc):
        wall = time.perf_counter() - self.t0
        b1 = self._busy()
        self.cores = None if b1 is None or self.b0 is None else \
            max(0.0, (b1 - self.b0) - (self._own() - self.o0)) / max(wall, 1e-9)

    @staticmethod
    def _busy():
        try:
            with open("/proc/stat") as f:
                v = [int(x) for x in f.readline().split()[1:]]
            return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None

    @staticmethod
    def _own():
        t = os.times()
        return t.user + t.system


def _wait_quiet(limit_s, threshold=0.2):
    """Wait (at most limit_s) for a second in which other processes used under ``threshold`` cores."""
    t_end = time.perf_counter() + limit_s
    while time.perf_counter() < t_end:
        with _Load() as ld:
            time.sleep(1.0)
        if ld.cores is None or ld.cores < threshold:
            return True
    return False


def _time_ours(fn, queue, target_s):
    """Seconds per call of ``fn``: batches of calls between two finish() calls."""
    queue.finish()
    t0 = time.perf_counter()
    fn()
    queue.finish()
    one = max(time.perf_counter() - t0, 1e-6)
    reps = max(1, int(target_s / one))
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    queue.finish()
    return (time.perf_counter() - t0) / reps


def _time_numpy(fn, target_s):
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-6)
    reps = max(1, int(target_s / one))
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps


def run(sizes, rounds=7, device=0, dtype="float32", config=None, target_s=0.25, out=print, quiet_wait=0.0):
    import pyopencl as cl
    from cltorch.backend import runtime
    from cltorch.ops import gemm as _gemm
    rt = runtime(device)
    if config is not None:
        rt.profile["gemm"] = config
        _gemm.clear_cache()
    dt = np.dtype(dtype)
    mf = cl.mem_flags
    out(f"# GEMM {dt.name}, device: {rt.info.name} (profile {rt.profile.name}); numpy {np.__version__} with "
        f"{_blas_info()}; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    out("")
    out("| n | ours GFLOP/s | numpy GFLOP/s | ratio | bar | others' load (cores) | config |")
    out("|---|---|---|---|---|---|---|")
    rows = []
    rng = np.random.default_rng(0)
    for n in sizes:
        A = rng.standard_normal((n, n)).astype(dt)
        B = rng.standard_normal((n, n)).astype(dt)
        dA = cl.Buffer(rt.ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=A)
        dB = cl.Buffer(rt.ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=B)
        dC = cl.Buffer(rt.ctx, mf.READ_WRITE, n * n * dt.itemsize)

        def ours():
            _gemm.gemm(rt, n, n, n, (dA, 0, n, 1, 0), (dB, 0, n, 1, 0), (dC, 0, n, 1, 0), 1.0, 0.0, 1, dt)

        def ref():
            np.matmul(A, B)

        ours()
        rt.queue.finish()
        C = np.empty((n, n), dt)
        cl.enqueue_copy(rt.queue, C, dC)
        rt.queue.finish()
        expect = A.astype(np.float64) @ B.astype(np.float64)
        err = float(np.abs(C - expect).max() / np.abs(expect).max())
        if err > (1e-4 if dt == np.float32 else 1e-10):
            raise AssertionError(f"GEMM {n}: relative error {err:.3g} against the float64 reference")
        flops = 2.0 * n ** 3
        go, gn, loads = [], [], []
        for _ in range(rounds):
            if quiet_wait:
                _wait_quiet(quiet_wait)
            with _Load() as load:
                go.append(flops / _time_ours(ours, rt.queue, target_s) / 1e9)
                gn.append(flops / _time_numpy(ref, target_s) / 1e9)
            loads.append(load.cores)
        load_cores = None if None in loads else statistics.mean(loads)
        ld = "?" if load_cores is None else f"{load_cores:.2f}"
        o, r = statistics.median(go), statistics.median(gn)
        # the ratio is the median of each round's ratio: both sides of a round saw the same load
        ratio = statistics.median(x / y for x, y in zip(go, gn))
        cfg = _gemm.describe(rt, n, n, n, 1, dt)
        bar = BARS.get(n)
        ok = "" if bar is None else (f">= {bar} ok" if ratio >= bar else f">= {bar} MISSED")
        out(f"| {n} | {o:.1f} | {r:.1f} | {ratio:.2f} | {ok} | {ld} | {json.dumps(cfg, separators=(',', ':'))} |")
        rows.append({"n": n, "ours": o, "numpy": r, "ratio": ratio, "bar": bar, "load": load_cores, "config": cfg})
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024, 2048])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--config", default=None, help="JSON [gemm] table replacing the profile's")
    p.add_argument("--quick", action="store_true", help="one short round per size (a smoke test)")
    p.add_argument("--quiet-wait", type=float, default=0.0, metavar="S",
                   help="before each round wait up to S seconds for a second with other processes idle")
    a = p.parse_args(argv)
    rounds, target = (1, 0.02) if a.quick else (a.rounds, 0.25)
    run(a.sizes, rounds, a.device, a.dtype, json.loads(a.config) if a.config else None, target,
        quiet_wait=a.quiet_wait)


if __name__ == "__main__":
    main()
