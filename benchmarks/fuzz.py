"""Fuzz run (issue 10, nightly): the random op chains of ``tests/test_reliability_fuzz.py`` for N minutes.

    python benchmarks/fuzz.py [--minutes 10] [--seed S] [--grad-every 4] [--max-ops 6]

Each iteration draws a seed and runs one chain (views, elementwise, reductions, matmul, indexing on a random
shape, size 0 included, and dtype) on every device against numpy, checking values, shapes and PyTorch's result
dtypes; every ``--grad-every``-th iteration also gradchecks a random float64 chain of differentiable ops against
finite differences. The size-0 / 0-d family table runs once first. A failure prints its seed (rerun it with
``--replay SEED``) and the run goes on. Prints the counts at the end (chains, ops per kind, gradient chains,
failures); exit status 1 when anything failed.
"""
import argparse
import collections
import sys
import time
import traceback
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import test_reliability_fuzz as T  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=None, help="first seed (default: from the clock)")
    ap.add_argument("--grad-every", type=int, default=4)
    ap.add_argument("--max-ops", type=int, default=6)
    ap.add_argument("--replay", type=int, default=None, help="run one seed (value chain and gradient chain) and stop")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore", RuntimeWarning)        # numpy's mean of an empty slice, nan compares

    if args.replay is not None:
        print("value chain:", T.run_chain(args.replay, args.max_ops))
        print("gradient chain:", T.run_grad_chain(args.replay))
        return 0

    failures = []
    # the size-0 and 0-d table
    n_table = 0
    for case in T.ZERO + T.SCALAR:
        for dev in T.DEVICES:
            n_table += 1
            try:
                T.test_size_zero_and_scalar_shapes(case, dev)
            except Exception as e:  # noqa: BLE001 - every failure is reported
                failures.append(f"size-0/0-d {case[0]}:{case[1]} on {dev}: {type(e).__name__}: {e}")
    seed = args.seed if args.seed is not None else int(time.time() * 1000) % (2 ** 62)
    first = seed
    deadline = time.time() + args.minutes * 60
    t0 = time.time()
    chains = grads = ops = 0
    kinds = collections.Counter()
    print(f"fuzz: devices {T.DEVICES}, {args.minutes} min from seed {first}", flush=True)
    last_report = t0
    while time.time() < deadline:
        try:
            names = T.run_chain(seed, args.max_ops)
            chains += 1
            ops += len(names)
            kinds.update(names)
        except Exception as e:  # noqa: BLE001
            failures.append(f"seed {seed} (value chain): {type(e).__name__}: {e}")
            traceback.print_exc()
        if args.grad_every and seed % args.grad_every == 0:
            try:
                T.run_grad_chain(seed)
                grads += 1
            except Exception as e:  # noqa: BLE001
                failures.append(f"seed {seed} (gradient chain): {type(e).__name__}: {e}")
                traceback.print_exc()
        seed += 1
        if time.time() - last_report > 60:
            last_report = time.time()
            print(f"  {last_report - t0:6.0f} s: {chains} chains ({ops} ops), {grads} gradient chains, "
                  f"{len(failures)} failures", flush=True)
    el = time.time() - t0
    print(f"fuzz: {chains} value chains ({ops} ops, {chains * len(T.DEVICES)} device runs), {grads} gradient "
          f"chains, {n_table} size-0/0-d cases, seeds {first}..{seed - 1}, {el:.0f} s")
    print("  ops: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    for f in failures:
        print("FAIL:", f.splitlines()[0][:500])
    print("fuzz:", "OK" if not failures else f"{len(failures)} FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
