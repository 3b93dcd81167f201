"""What deterministic mode (``cltorch.use_deterministic_algorithms(True)``) costs, and what autocast costs: one
training step (forward, backward, AdamW) of the digits CNN (batch 64) and of a small char-LM (d_model 64, 2 layers,
block 64, batch 16), timed in the default mode and in deterministic mode in one process, the two alternating so
they see the same load; and the digits step under bfloat16 autocast against float32.

    python benchmarks/bench_deterministic.py [--device cl:0] [--quick]

Ratios are deterministic over default (and autocast over float32) step time; there is no bar, the issue asks for
the figure. The deterministic mode's cost comes from its one profile (the CPU tables with scalar elementwise and
reduction code, where PoCL's default computes on float8) and from the polynomial math functions.
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "examples"))

import _anchors as A  # noqa: E402


def _step_fn(model_name, device, autocast=None):
    import cltorch
    import compare_devices as cd
    cfg = {"batch_size": 64 if model_name == "digits" else 16, "lr": 1e-3, "block": 64, "d_model": 64, "heads": 4,
           "layers": 2}
    batches, cfg = cd.make_batches(model_name, 4, 0, cfg)
    ex, model = cd.build(model_name, "cltorch", cfg)
    model = model.to(device)
    opt = cltorch.optim.AdamW(model.parameters(), lr=1e-3)
    data = [(cltorch.from_numpy(x).to(device), cltorch.from_numpy(y).to(device)) for x, y in batches]
    state = {"i": 0}

    def step():
        x, y = data[state["i"] % len(data)]
        state["i"] += 1
        with cltorch.autocast(device.split(":")[0], dtype=cltorch.bfloat16, enabled=autocast is not None):
            out = model(x)
            loss = ex.F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
    return step


def _time(step, device, reps, target):
    import cltorch
    sync = (lambda: cltorch.cl.synchronize(device)) if device != "cpu" else None
    step()
    step()              # builds and plans
    return [A.time_fn(step, sync, target, max_iters=50) for _ in range(reps)]


def run(quick=False, device="cl:0"):
    import cltorch
    reps, target = (1, 0.3) if quick else (5, 1.5)
    rows = []
    for model_name in ("digits", "charlm"):
        times = {False: [], True: []}
        fns = {}
        for mode in (False, True):
            cltorch.use_deterministic_algorithms(mode)
            fns[mode] = _step_fn(model_name, device)
        for _ in range(reps):               # alternate the modes so both see the same load
            for mode in (False, True):
                cltorch.use_deterministic_algorithms(mode)
                times[mode] += _time(fns[mode], device, 1, target)
        cltorch.use_deterministic_algorithms(False)
        d, t = statistics.median(times[False]) * 1e3, statistics.median(times[True]) * 1e3
        rows.append(A.case(f"{model_name} train step, deterministic mode ({device})", "ms", t,
                           {"default mode": d}, ratio=t / d, ratio_desc="deterministic / default step time",
                           note="bit-identical across PoCL and Intel's runtime (tests/test_deterministic.py)"))
    f32, bf = _step_fn("digits", device), _step_fn("digits", device, autocast=True)
    tf, tb = [], []
    for _ in range(reps):
        tf += _time(f32, device, 1, target)
        tb += _time(bf, device, 1, target)
    a, b = statistics.median(tf) * 1e3, statistics.median(tb) * 1e3
    rows.append(A.case(f"digits train step, bfloat16 autocast ({device})", "ms", b, {"float32": a}, ratio=b / a,
                       ratio_desc="autocast / float32 step time",
                       note="bfloat16 is storage here: GEMM/conv inputs cast, computed in float32"))
    return rows


def suite(quick=False, device="cl:0"):
    """Rows for benchmarks/run.py."""
    return run(quick=quick, device=device)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cl:0")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    for r in run(a.quick, a.device):
        anc = ", ".join(f"{k} {v:.2f}" for k, v in r["anchors"].items())
        print(f"{r['case']}: ours {r['ours']:.2f} {r['unit']}; {anc}; ratio {r['ratio']:.2f} ({r['ratio_desc']}); "
              f"{r['note']}")


if __name__ == "__main__":
    main()
