"""One SGD training step of an MLP 784-256-256-10 (ReLU), batch 128, cross-entropy: cltorch against PyTorch CPU
eager and tinygrad's CL backend on the same PoCL device (eager and TinyJit), side by side in one run.

A step is ``zero_grad; loss = cross_entropy(model(x), y); backward; step`` on a fixed batch (numpy random data,
the same on every side). Steps are queued back to back and the device is synchronised once per timed batch of
steps, as a training loop that reads the loss only now and then. Sides alternate in rounds; medians are printed.

    python benchmarks/bench_mlp.py [--device cl:0] [--rounds 5] [--quick] [--profile]

Bars (issue 9): our step <= 1.5x torch CPU eager's time; >= 2.5x the steps/s of tinygrad's TinyJit.
``--profile`` prints cProfile's view of our step (set CLTORCH_PROFILE_KERNELS=1 for per-kernel device time).
"""
import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _anchors as A  # noqa: E402

SIZES = (784, 256, 256, 10)
BATCH = 128
LR = 0.01


def _data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], BATCH).astype(np.int64)
    return x, y


def ours_step(device):
    """(step, sync) for cltorch on ``device``."""
    import cltorch
    import cltorch.nn as nn
    import cltorch.nn.functional as F
    cltorch.manual_seed(0)
    xn, yn = _data()
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).to(device)
    opt = cltorch.optim.SGD(model.parameters(), lr=LR)
    x, y = cltorch.from_numpy(xn).to(device), cltorch.from_numpy(yn).to(device)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step, cltorch.cl.synchronize


def torch_step():
    torch = A.torch()
    if torch is None:
        return None
    import torch.nn as nn
    import torch.nn.functional as F
    torch.manual_seed(0)
    xn, yn = _data()
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    x, y = torch.from_numpy(xn), torch.from_numpy(yn)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step, None


def tinygrad_steps():
    """{"eager": (step, sync), "jit": (step, sync)} for tinygrad on its CL device, or None."""
    tg = A.tinygrad()
    if tg is None:
        return None
    from tinygrad import Device, Tensor, TinyJit
    from tinygrad import nn as tnn
    from tinygrad.helpers import Context
    xn, yn = _data()
    dev = Device["CL"]

    def make():
        Tensor.manual_seed(0)
        layers = [tnn.Linear(a, b) for a, b in zip(SIZES[:-1], SIZES[1:])]
        params = tnn.state.get_parameters(layers)
        opt = tnn.optim.SGD(params, lr=LR)

        def fwd(x):
            for i, lin in enumerate(layers):
                x = lin(x)
                if i < len(layers) - 1:
                    x = x.relu()
            return x
        return fwd, opt

    x = Tensor(xn).realize()
    y = Tensor(yn.astype(np.int32)).realize()
    out = {}
    for kind in ("eager", "jit"):
        fwd, opt = make()

        def train_step(xb, yb, fwd=fwd, opt=opt):
            with Context(TRAINING=1):
                opt.zero_grad()
                loss = fwd(xb).sparse_categorical_crossentropy(yb)
                loss.backward()
                opt.step()
            return loss.realize()
        fn = TinyJit(train_step) if kind == "jit" else train_step
        out[kind] = ((lambda fn=fn: fn(x, y)), dev.synchronize)
    return out


def run(quick=False, device="cl:0", rounds=None, profile=False, out=print):
    rounds = rounds or (1 if quick else 7)
    target = 0.05 if quick else 0.3
    step, sync = ours_step(device)
    sides = {"ours": (step, sync)}
    sides.update(A.torch_sides(lambda: torch_step()[0]))
    tgs = tinygrad_steps() if not quick else None  # tinygrad's first compile takes minutes: not in --quick
    if tgs:
        sides["tinygrad"] = tgs["eager"]
        sides["tinygrad TinyJit"] = tgs["jit"]
    load = A.load_avg()
    res = A.interleaved(sides, rounds=rounds, target_s=target, warmup=3)
    A.restore_torch_threads()
    med = {k: A.median(v) * 1e3 for k, v in res.items()}
    anchors = {k: v for k, v in med.items() if k != "ours"}
    rows = []
    bt = A.best_torch(res)
    r_t = A.round_ratio(res["ours"], res.get(bt))
    rows.append(A.case("MLP 784-256-256-10 b128 SGD step", "ms", med["ours"], anchors, r_t, f"ours/{bt} time",
                       "<= 1.5x torch's time", None if r_t is None else r_t <= 1.5,
                       note=f"{1e3 / med['ours']:.0f} steps/s; load {load:.1f}; {A.cpu_note()}"))
    if "tinygrad TinyJit" in res:
        r_j = A.round_ratio(res["tinygrad TinyJit"], res["ours"])  # our steps/s over tinygrad's
        rows.append(A.case("MLP step vs tinygrad TinyJit (CL, same PoCL)", "ms", med["ours"], anchors, r_j,
                           "ours/tinygrad-jit steps/s", ">= 2.5x TinyJit's steps/s", r_j >= 2.5,
                           note=f"tinygrad eager {1e3 / med['tinygrad']:.0f}, TinyJit "
                                f"{1e3 / med['tinygrad TinyJit']:.0f} steps/s"))
    else:
        rows.append(A.case("MLP step vs tinygrad TinyJit (CL, same PoCL)", "ms", med["ours"], {}, None, "", 
                           ">= 2.5x TinyJit's steps/s", None,
                           note="skipped in --quick" if quick else A.why_missing.get("tinygrad", "")))
    if profile:
        A.profile_host(step, sync, n=50, out=out)
    return rows


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
    print(A.describe())
    rows = run(a.quick, a.device, a.rounds, a.profile)
    for r in rows:
        anc = ", ".join(f"{k} {v:.3f}" for k, v in r["anchors"].items())
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f} ({r['ratio_desc']})"
        print(f"{r['case']}: ours {r['ours']:.3f} ms; {anc}; ratio {ratio}; bar {r['bar']}: "
              f"{ {True: 'met', False: 'MISSED', None: '-'}[r['met']]}; {r['note']}")


if __name__ == "__main__":
    main()
