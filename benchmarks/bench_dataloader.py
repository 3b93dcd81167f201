"""DataLoader throughput: cltorch against torch on the same dataset, in the same run.

60,000 samples of 784 float32 (MNIST-sized) with int64 labels, a small per-sample transform written in
Python, batch 128, ``shuffle=True``, ``num_workers`` 0 and 2 (2 with ``persistent_workers=True``).
For each library and worker count: one warm-up pass of 20 batches, then ``--epochs`` timed full epochs;
the median epoch gives samples/s. Two transforms:

- ``tensor``: ``(x - mean) / std`` on the sample tensor (0-d tensors mean and std), as users write it;
- ``numpy``: the same arithmetic on a numpy row; ``default_collate`` turns the rows into a tensor.

torch runs in this interpreter when importable, else in ``--torch-python`` (or ``$TORCH_PYTHON``), a
Python that has torch (e.g. ``python3 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch numpy``);
without either only cltorch's numbers are printed.

``--startup`` also measures what a fresh (non-persistent) iterator costs before its first batch, with and
without tensor arithmetic in the workers, and the kernel-cache hits of each worker (the figures behind the
DataLoader docstring's choice of start method).

Run from the repository root: ``python benchmarks/bench_dataloader.py [--epochs 2] [--transform both]``.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

N, D, BATCH = 60000, 784, 128
MEAN, STD = 0.1307, 0.3081


class Samples:
    """Map-style dataset over one library's tensors (``lib`` is the module: cltorch or torch)."""

    def __init__(self, lib, transform, n=N):
        rng = np.random.default_rng(0)
        self.lib_name = lib.__name__
        self.transform = transform
        x = rng.random((n, D), dtype=np.float32)
        y = rng.integers(0, 10, n)
        if transform == "numpy":
            self.x, self.y = x, y
        else:
            self.x, self.y = lib.from_numpy(x), lib.from_numpy(y)
            self.mean, self.std = lib.tensor(MEAN), lib.tensor(STD)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        if self.transform == "numpy":
            return (self.x[i] - MEAN) / STD, int(self.y[i])
        if self.transform == "none":
            return self.x[i], self.y[i]
        return (self.x[i] - self.mean) / self.std, self.y[i]


class StatsSamples(Samples):
    """Returns the worker's program-cache counters with each sample (for --startup)."""

    def __getitem__(self, i):
        import cltorch
        x, y = super().__getitem__(i)
        s = cltorch.backend.stats()
        return x, y, s["builds"], s["disk_hits"]


def _lib(name):
    if name == "torch":
        import torch
        return torch
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import cltorch
    return cltorch


def _dataloader(lib):
    if lib.__name__ == "torch":
        from torch.utils.data import DataLoader
    else:
        from cltorch.utils.data import DataLoader
    return DataLoader


def throughput(libname, transform, workers, epochs):
    lib = _lib(libname)
    DataLoader = _dataloader(lib)
    ds = Samples(lib, transform)
    out = {}
    for nw in workers:
        kw = dict(num_workers=nw, persistent_workers=nw > 0)
        if nw and libname == "torch":
            kw["multiprocessing_context"] = None   # torch's default (fork on Linux before Python 3.14)
        dl = DataLoader(ds, batch_size=BATCH, shuffle=True, **kw)
        for k, _ in enumerate(dl):
            if k == 20:
                break
        times = []
        for _ in range(epochs):
            t = time.perf_counter()
            n = 0
            for xb, yb in dl:
                n += len(yb)
            times.append(time.perf_counter() - t)
            assert n == len(ds) and tuple(xb.shape[1:]) == (D,)
        out[nw] = len(ds) / float(np.median(times))
        del dl
    return out


def startup(transform_compute):
    """Seconds to the first batch of fresh 2-worker iterators (forkserver) and the workers' cache stats."""
    lib = _lib("cltorch")
    from cltorch.utils.data import DataLoader
    ds = StatsSamples(lib, "tensor" if transform_compute else "none", n=4 * BATCH)
    res = {}
    firsts = []
    for rep in range(3):
        dl = DataLoader(ds, batch_size=BATCH, num_workers=2)
        t = time.perf_counter()
        it = iter(dl)
        b0 = next(it)
        firsts.append(time.perf_counter() - t)
        b1 = next(it)
        del it
    res["first_batch_s"] = firsts
    # the last iterator's two batches come from workers 0 and 1
    res["worker_builds"] = [int(b0[2].max().item()), int(b1[2].max().item())]
    res["worker_disk_hits"] = [int(b0[3].max().item()), int(b1[3].max().item())]
    dl = DataLoader(ds, batch_size=BATCH, num_workers=2, persistent_workers=True)
    for _ in dl:
        pass
    t = time.perf_counter()
    next(iter(dl))
    res["persistent_next_epoch_first_batch_s"] = time.perf_counter() - t
    return res


def _torch_numbers(args, transform):
    try:
        import torch  # noqa: F401
        return throughput("torch", transform, args.workers, args.epochs)
    except ImportError:
        pass
    py = args.torch_python or os.environ.get("TORCH_PYTHON")
    if not py:
        return None
    cmd = [py, os.path.abspath(__file__), "--lib", "torch", "--transform", transform, "--epochs", str(args.epochs),
           "--workers", *map(str, args.workers), "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print(f"torch run failed:\n{r.stderr[-2000:]}", file=sys.stderr)
        return None
    return {int(k): v for k, v in json.loads(r.stdout.strip().splitlines()[-1]).items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=2, help="timed epochs per configuration (0: skip throughput)")
    p.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    p.add_argument("--transform", choices=["tensor", "numpy", "both"], default="both")
    p.add_argument("--lib", choices=["cltorch", "torch"], default=None, help="run one library only (internal)")
    p.add_argument("--json", action="store_true", help="print one JSON line (internal)")
    p.add_argument("--torch-python", default=None)
    p.add_argument("--startup", action="store_true")
    args = p.parse_args()
    transforms = ["tensor", "numpy"] if args.transform == "both" else [args.transform]

    if args.lib:
        r = throughput(args.lib, transforms[0], args.workers, args.epochs)
        print(json.dumps(r) if args.json else r)
        return

    if args.epochs:
        print(f"DataLoader: {N} samples x {D} float32, batch {BATCH}, shuffle, median of {args.epochs} epochs")
    for tf in transforms if args.epochs else []:
        ours = throughput("cltorch", tf, args.workers, args.epochs)
        theirs = _torch_numbers(args, tf)
        print(f"\ntransform: {tf}")
        print(f"{'num_workers':>12} {'cltorch/s':>12} {'torch/s':>12} {'ratio':>8}")
        for nw in args.workers:
            t = theirs.get(nw) if theirs else None
            ratio = f"{ours[nw] / t:.2f}x" if t else "-"
            print(f"{nw:>12} {ours[nw]:>12.0f} {t if t is None else round(t):>12} {ratio:>8}")
    if args.startup:
        for compute in (False, True):
            r = startup(compute)
            print(f"\nstart-up, 2 forkserver workers, {'tensor arithmetic' if compute else 'no arithmetic'} "
                  f"in __getitem__: first batch {', '.join(f'{s:.2f}' for s in r['first_batch_s'])} s; "
                  f"per-worker program builds {r['worker_builds']}, disk-cache hits {r['worker_disk_hits']}; "
                  f"persistent workers, next epoch's first batch {r['persistent_next_epoch_first_batch_s']:.3f} s")


if __name__ == "__main__":
    main()
