"""Real-model training steps (issue 16, "the real-script shapes"): an LSTM, a small ViT and a MobileNetV2, ours
eager on ``--device`` (cl:0) and on ``cpu``, ours compiled (``cltorch.compile``) on ``--device``, and PyTorch CPU
eager, side by side in one process.

- LSTM: ``benchmarks/bench_rnn.py``'s train step (2 layers x 256, input 256, seq 64, batch 32; ``zero_grad``,
  forward, ``(out * out).mean().backward()``), its model code imported from there.
- ViT: ``tests/user_scripts/vit_cifar_adamw.py``'s model (patch 4, dim 64, depth 6, 4 heads), batch 64 of 32x32x3
  images, ``cross_entropy; zero_grad; backward; AdamW step``.
- MobileNetV2: ``tests/user_scripts/mobilenetv2_cifar.py``'s model (width 0.35, depthwise convs, BatchNorm,
  ReLU6, CIFAR strides), batch 16 of 32x32x3 images, the same step with SGD (momentum 0.9).

The two models' ``build`` functions are taken from the user scripts by parsing them (their function definitions
only; the scripts themselves train at import, having no main guard), so the benchmark and the test run the same
model code. Both libraries start from the same weights (ours, loaded into torch's model through numpy). Steps are
queued back to back with one device sync per timed batch; the sides alternate in rounds; medians are printed.
The compiled side is warmed past its captures first (an eager call, two captured calls); where compile falls
back or fails, the row says "n/a" and why.

    python benchmarks/bench_models.py [--device cl:0] [--rounds 5] [--quick] [--only vit mobilenet lstm]
                                      [--profile]

``--profile`` prints a cProfile of the eager ViT and MobileNetV2 steps (top 15 by own time); with
``CLTORCH_PROFILE_KERNELS=1`` also each kernel's device time.

Bars (issue 16): eager <= 2x torch's time, compiled <= 1x torch's time (read against the faster of torch's
default threads and one thread).
"""
import argparse
import ast
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _anchors as A  # noqa: E402

SCRIPTS = HERE.parent / "tests" / "user_scripts"
WARM = 5          # calls before timing the compiled side: eager warm-up, two captures, and a margin

VIT = dict(batch=64, depth=6)
VIT_QUICK = dict(batch=4, depth=1)
MBV2 = dict(batch=16, size=32)
MBV2_QUICK = dict(batch=2, size=16)


def script_defs(name):
    """The top-level imports and function definitions of ``tests/user_scripts/<name>.py`` as a namespace."""
    path = SCRIPTS / f"{name}.py"
    tree = ast.parse(path.read_text(), str(path))
    keep = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.Import, ast.ImportFrom))]
    ns = {"__name__": f"_bench_models_{name}"}
    exec(compile(ast.Module(body=keep, type_ignores=[]), str(path), "exec"), ns)
    return ns


def _lib(name):
    return A.torch() if name == "torch" else __import__("cltorch")


def _state_numpy(model):
    return {k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()}


def vit_state(cfg):
    """The ViT's initial weights (ours, seed 0) as numpy arrays."""
    import cltorch
    ns = script_defs("vit_cifar_adamw")
    cltorch.manual_seed(0)
    return _state_numpy(_vit(ns, cltorch, cfg))


def _vit(ns, lib, cfg):
    m = ns["build"](lib.nn, lib.nn.functional, lib)
    if cfg["depth"] != len(m.blocks):
        m.blocks = m.blocks[:cfg["depth"]]
    return m


def mbv2_state(cfg):
    import cltorch
    ns = script_defs("mobilenetv2_cifar")
    cltorch.manual_seed(0)
    return _state_numpy(ns["build"](cltorch.nn))


def _batch(cfg, size=32):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((cfg["batch"], 3, size, size)).astype(np.float32),
            rng.integers(0, 10, cfg["batch"]).astype(np.int64))


def make_step(model_name, lib_name, cfg, state, device="cpu"):
    """A training step (forward, loss, zero_grad, backward, optimizer step) of one model in one library, and its
    sync (None for torch)."""
    lib = _lib(lib_name)
    if model_name == "vit":
        ns = script_defs("vit_cifar_adamw")
        m = _vit(ns, lib, cfg)
        xn, yn = _batch(cfg)
    else:
        ns = script_defs("mobilenetv2_cifar")
        m = ns["build"](lib.nn)
        xn, yn = _batch(cfg, cfg["size"])
    m.load_state_dict({k: lib.from_numpy(v.copy()) for k, v in state.items()})
    m = m.to(device).train()
    if model_name == "vit":
        opt = lib.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.05)
    else:
        opt = lib.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=4e-5)
    x, y = lib.from_numpy(xn).to(device), lib.from_numpy(yn).to(device)
    F = lib.nn.functional

    def step():
        loss = F.cross_entropy(m(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
    sync = __import__("cltorch").cl.synchronize if lib_name == "cltorch" else None
    return step, sync


def _compiled(step, sync):
    """(compiled step, None) once it replays, or (None, reason)."""
    import cltorch
    try:
        c = cltorch.compile(step)
        for _ in range(WARM):
            c()
        sync()
    except Exception as e:  # report, do not hide: the row says n/a with this reason
        return None, f"compile failed: {type(e).__name__}: {str(e)[:160]}"
    if c.fallbacks() or not c.graphs():
        fb = c.fallbacks()
        return None, f"compile fell back to eager: {str(fb)[:200] if fb else 'no graph captured'}"
    return c, None


def lstm_sides(device, quick):
    import bench_rnn
    cfg = bench_rnn.QUICK if quick else bench_rnn.FULL
    state = bench_rnn._state(cfg)
    xn = np.random.default_rng(0).standard_normal((cfg["seq"], cfg["batch"], cfg["inp"])).astype(np.float32)
    eager, sync = bench_rnn.make_steps("cltorch", cfg, state, xn, device)
    sides = {"ours": (eager["train"], sync)}
    if device != "cpu":
        sides["ours cpu"] = (bench_rnn.make_steps("cltorch", cfg, state, xn, "cpu")[0]["train"], sync)
    cstep, _ = bench_rnn.make_steps("cltorch", cfg, state, xn, device)
    comp, why = _compiled(cstep["train"], sync)
    name = f"LSTM {cfg['layers']}x{cfg['hidden']} seq {cfg['seq']} b{cfg['batch']} train step (fwd+bwd)"
    make_torch = lambda: bench_rnn.make_steps("torch", cfg, state, xn)[0]["train"]  # noqa: E731
    return name, sides, comp, why, make_torch


def model_sides(model_name, device, quick):
    if model_name == "vit":
        cfg = VIT_QUICK if quick else VIT
        state = vit_state(cfg)
        name = f"ViT patch 4 dim 64 depth {cfg['depth']} b{cfg['batch']} 32x32 step (AdamW)"
    else:
        cfg = MBV2_QUICK if quick else MBV2
        state = mbv2_state(cfg)
        name = f"MobileNetV2 x0.35 b{cfg['batch']} {cfg['size']}x{cfg['size']} step (SGD momentum)"
    step, sync = make_step(model_name, "cltorch", cfg, state, device)
    sides = {"ours": (step, sync)}
    if device != "cpu":
        sides["ours cpu"] = make_step(model_name, "cltorch", cfg, state, "cpu")
    comp, why = _compiled(make_step(model_name, "cltorch", cfg, state, device)[0], sync)
    return name, sides, comp, why, lambda: make_step(model_name, "torch", cfg, state)[0]


def run(quick=False, device="cl:0", rounds=None, only=None, profile=False, out=print):
    rounds = rounds or (1 if quick else 5)
    target = 0.05 if quick else 0.5
    rows = []
    for key in ("lstm", "vit", "mobilenet"):
        if only and key not in only:
            continue
        name, sides, comp, why, make_torch = (lstm_sides(device, quick) if key == "lstm"
                                              else model_sides(key, device, quick))
        if comp is not None:
            sides["compiled"] = (comp, sides["ours"][1])
        sides.update(A.torch_sides(make_torch))
        load = A.load_avg()
        res = A.interleaved(sides, rounds=rounds, target_s=target, warmup=2)
        A.restore_torch_threads()
        med = {k: A.median(v) * 1e3 for k, v in res.items()}
        bt = A.best_torch(res)
        anchors = {k: v for k, v in med.items() if k.startswith("torch")}
        cpu_note = f"ours on cpu {med['ours cpu']:.1f} ms" if "ours cpu" in med else ""
        if "ours cpu" in med and bt:
            cpu_note += f" ({A.round_ratio(res['ours cpu'], res[bt]):.2f}x torch)"
        r = A.round_ratio(res["ours"], res.get(bt))
        rows.append(A.case(f"{name}, eager", "ms", med["ours"], anchors, r, f"ours/{bt} time", "<= 2x torch's time",
                           None if r is None else r <= 2.0,
                           note=f"ours on {device}; {cpu_note}; load {load:.1f}; {A.cpu_note()}"))
        if comp is not None:
            rc = A.round_ratio(res["compiled"], res.get(bt))
            re_ = A.round_ratio(res["compiled"], res["ours"])
            g = comp.graphs()[0]
            rows.append(A.case(f"{name}, compiled", "ms", med["compiled"], anchors, rc, f"compiled/{bt} time",
                               "<= 1x torch's time", None if rc is None else rc <= 1.0,
                               note=f"compiled/eager time {re_:.2f}; {g.launch_count} kernels per replay; "
                                    f"load {load:.1f}"))
        else:
            rows.append(A.case(f"{name}, compiled", "ms", "n/a", anchors, None, "", "<= 1x torch's time", None,
                               note=why))
        if profile and key != "lstm":
            out(f"--- {name}: eager on {device}")
            A.profile_host(sides["ours"][0], sides["ours"][1], n=3 if quick else 5, top=15, out=out)
    return rows


def suite(quick=False, device="cl:0"):
    """Rows for benchmarks/run.py."""
    return run(quick=quick, device=device)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cl:0")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", nargs="+", default=None, choices=("lstm", "vit", "mobilenet"))
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args(argv)
    print(A.describe(with_tinygrad=False))
    for r in run(a.quick, a.device, a.rounds, a.only, a.profile):
        anc = ", ".join(f"{k} {v:.2f}" for k, v in r["anchors"].items())
        ours = r["ours"] if isinstance(r["ours"], str) else f"{r['ours']:.2f}"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f} ({r['ratio_desc']})"
        print(f"{r['case']}: ours {ours} ms; {anc}; ratio {ratio}; bar {r['bar']}: "
              f"{ {True: 'met', False: 'MISSED', None: '-'}[r['met']]}; {r['note']}")


if __name__ == "__main__":
    main()
