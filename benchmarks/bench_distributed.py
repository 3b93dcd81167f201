"""cltorch.distributed between 2 ranks on this machine (issue 18's figures).

- all_reduce (SUM) of 1, 16 and 64 MB float32: cltorch on cpu tensors and on device tensors against raw mpi4py
  ``Allreduce`` on numpy arrays of the same size, in the same two rank processes, rounds interleaved. The figure is
  the algorithm bandwidth (bytes / time); the bar is >= 0.8x raw mpi4py's for cpu tensors. cltorch's sum is
  deterministic (reduce-scatter + all-gather, so every rank holds the same bits), checks every rank's header, and
  for device tensors stages the data through pinned host buffers in chunks.
- DDP digits step (the digits CNN of examples/train_digits.py, batch 64 per rank, SGD): the step time at 2 ranks
  against 1 rank, and the communication share at 2 ranks = (DDP step - the same step without DDP, both timed in
  the 2-rank job so that both see the same CPU contention) / DDP step.

numpy is timed with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset in the ranks' environment.

    python benchmarks/bench_distributed.py [--device cl:0] [--rounds 5] [--quick]
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

for _v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    os.environ.pop(_v, None)

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


# ------------------------------------------------------------------ inside the ranks
def _median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def rank_allreduce(sizes_mb, device, rounds):
    import numpy as np
    from mpi4py import MPI
    import cltorch
    import cltorch.distributed as dist
    dist.init_process_group("mpi")
    comm = MPI.COMM_WORLD
    out = []
    for mb in sizes_mb:
        n = int(mb * 2 ** 20) // 4
        a = np.random.default_rng(comm.rank).standard_normal(n).astype(np.float32)
        b = np.empty_like(a)
        tc = cltorch.from_numpy(a.copy())
        td = cltorch.from_numpy(a.copy()).to(device)

        def raw():
            comm.Allreduce(a, b)

        def ours_cpu():
            dist.all_reduce(tc)

        def ours_dev():
            dist.all_reduce(td)
            cltorch.cl.synchronize()
        sides = {"raw": raw, "cpu": ours_cpu, "dev": ours_dev}
        res = {k: [] for k in sides}
        for f in sides.values():
            f()
        reps = max(1, int(64 // mb)) if mb < 64 else 1
        for _ in range(rounds):
            for k, f in sides.items():
                comm.Barrier()
                t0 = time.perf_counter()
                for _ in range(reps):
                    f()
                t = (time.perf_counter() - t0) / reps
                res[k].append(comm.allreduce(t, op=MPI.MAX))      # the job's time: the slowest rank's
        out.append({"mb": mb, "bytes": n * 4, **{k: v for k, v in res.items()}})
    if comm.rank == 0:
        print("JSON " + json.dumps(out), flush=True)
    dist.destroy_process_group()


def rank_ddp(device, rounds, steps, batch):
    import numpy as np
    import cltorch as torch
    import cltorch.distributed as dist
    import cltorch.nn.functional as F
    from cltorch.nn.parallel import DistributedDataParallel as DDP
    from mpi4py import MPI
    sys.path.insert(0, str(HERE.parent / "examples"))
    from train_digits import DigitsCNN, load_digits_arrays
    dist.init_process_group("mpi")
    comm = MPI.COMM_WORLD
    images, y = load_digits_arrays()
    x = torch.from_numpy((images / 16.0).astype(np.float32)[:batch, None]).to(device)
    yt = torch.from_numpy(y[:batch]).to(device)
    torch.manual_seed(0)
    local = DigitsCNN().to(device)
    ddp = DDP(DigitsCNN().to(device))
    opts = {"local": torch.optim.SGD(local.parameters(), lr=0.01), "ddp": torch.optim.SGD(ddp.parameters(), lr=0.01)}
    models = {"local": local, "ddp": ddp}

    def step(k):
        opts[k].zero_grad()
        F.cross_entropy(models[k](x), yt).backward()
        opts[k].step()
        torch.cl.synchronize()
    res = {"local": [], "ddp": []}
    for k in res:
        for _ in range(3):
            step(k)
    for _ in range(rounds):
        for k in res:
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(steps):
                step(k)
            res[k].append(comm.allreduce((time.perf_counter() - t0) / steps, op=MPI.MAX))
    if comm.rank == 0:
        print("JSON " + json.dumps(res), flush=True)
    dist.destroy_process_group()


# ------------------------------------------------------------------ the launcher side
def _mpiexec():
    p = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return p if os.path.exists(p) else "mpiexec"


def _job(n, *args, timeout=900):
    cmd = [_mpiexec(), "-n", str(n), sys.executable, str(Path(__file__).resolve()), "--rank-program", *args]
    env = dict(os.environ)
    for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        env.pop(v, None)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    for line in p.stdout.splitlines():
        if line.startswith("JSON "):
            return json.loads(line[5:])
    raise RuntimeError(f"benchmark job failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")


def run(quick=False, device="cl:0", rounds=None):
    import _anchors as A
    rounds = rounds or (1 if quick else 5)
    sizes = [1, 4] if quick else [1, 16, 64]
    rows = []
    for r in _job(2, "allreduce", device, str(rounds), ",".join(str(s) for s in sizes)):
        bw = {k: r["bytes"] / _median(r[k]) / 1e9 for k in ("raw", "cpu", "dev")}
        ratio_cpu = _median([r["raw"][i] / r["cpu"][i] for i in range(len(r["raw"]))])
        ratio_dev = _median([r["raw"][i] / r["dev"][i] for i in range(len(r["raw"]))])
        rows.append(A.case(f"all_reduce {r['mb']} MB float32, 2 ranks, cpu tensors", "GB/s", bw["cpu"],
                           {"mpi4py": bw["raw"]}, ratio_cpu, "bandwidth vs raw mpi4py Allreduce", ">= 0.8x",
                           ratio_cpu >= 0.8))
        rows.append(A.case(f"all_reduce {r['mb']} MB float32, 2 ranks, {device} tensors", "GB/s", bw["dev"],
                           {"mpi4py": bw["raw"]}, ratio_dev, "bandwidth vs raw mpi4py Allreduce", None, None,
                           "device -> pinned host -> MPI -> device, chunked"))
    steps = 3 if quick else 10
    one = _job(1, "ddp", device, str(rounds), str(steps), "64")
    two = _job(2, "ddp", device, str(rounds), str(steps), "64")
    t1, t2 = _median(one["ddp"]), _median(two["ddp"])
    share = _median([(two["ddp"][i] - two["local"][i]) / two["ddp"][i] for i in range(len(two["ddp"]))])
    rows.append(A.case("DDP digits step, batch 64 per rank: 2 ranks vs 1", "ms", t2 * 1e3, {"1 rank": t1 * 1e3},
                       t2 / t1, "2-rank step time / 1-rank step time", None, None,
                       f"communication share at 2 ranks {share * 100:.0f}% (DDP step - local step); "
                       f"load {A.load_avg()}"))
    return rows


def suite(quick=False, device="cl:0"):
    """Rows for benchmarks/run.py."""
    return run(quick=quick, device=device)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--rank-program":
        kind = argv[1]
        if kind == "allreduce":
            rank_allreduce([float(s) if "." in s else int(s) for s in argv[4].split(",")], argv[2], int(argv[3]))
        else:
            rank_ddp(argv[2], int(argv[3]), int(argv[4]), int(argv[5]))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cl:0")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    import _anchors as A
    print(A.describe(with_tinygrad=False))
    for r in run(a.quick, a.device, a.rounds):
        anchors = "; ".join(f"{k} {v:.3g}" for k, v in r["anchors"].items())
        print(f"{r['case']}: ours {r['ours']:.3g} {r['unit']}; {anchors}; ratio {r['ratio']:.2f} ({r['ratio_desc']})"
              f"{'; bar ' + r['bar'] + (' met' if r['met'] else ' NOT met') if r['bar'] else ''}"
              f"{'; ' + r['note'] if r['note'] else ''}", flush=True)


if __name__ == "__main__":
    main()
