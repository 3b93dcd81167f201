"""Norm kernels at the real-model shapes (issue 16): every BatchNorm2d of bench_models.py's MobileNetV2 (width 0.35,
batch 16, CIFAR strides) and the 13 LayerNorms of its ViT (batch 64, 65 tokens, dim 64), forward and backward
(input, weight and bias gradients) of each, one "step" per call, ours on ``--device`` and PyTorch CPU eager
(default threads and one thread) side by side, in alternating rounds; medians are printed.

    python benchmarks/bench_norms.py [--device cl:0] [--rounds 5]

Rows also print with ``--only bn`` or ``--only ln``. The shapes (with how many layers of each) are the ones the
two models' forward passes give; they are written out here so the benchmark needs no model code.
"""
import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _anchors as A  # noqa: E402

# (shape, number of BatchNorm2d layers with that input shape) in MobileNetV2 x0.35, batch 16 of 32x32
MOBILENET_BN = [((16, 16, 32, 32), 2), ((16, 8, 32, 32), 3), ((16, 48, 32, 32), 5), ((16, 48, 16, 16), 1),
                ((16, 16, 16, 16), 3), ((16, 96, 16, 16), 5), ((16, 96, 8, 8), 1), ((16, 24, 8, 8), 4),
                ((16, 144, 8, 8), 8), ((16, 32, 8, 8), 3), ((16, 192, 8, 8), 5), ((16, 192, 4, 4), 1),
                ((16, 56, 4, 4), 3), ((16, 336, 4, 4), 6), ((16, 112, 4, 4), 1), ((16, 1280, 4, 4), 1)]
VIT_LN = [((64, 65, 64), 13)]


def _step(lib, kind, device, shapes):
    """A callable running forward + backward of every layer in ``shapes`` (inputs made once)."""
    rng = np.random.default_rng(0)
    kw = {"device": device} if device else {}
    layers = []
    for shape, count in shapes:
        C = shape[1] if kind == "bn" else shape[-1]
        for _ in range(count):
            x = lib.tensor((1.0 + rng.standard_normal(shape)).astype(np.float32), requires_grad=True, **kw)
            w = lib.tensor(rng.standard_normal(C).astype(np.float32), requires_grad=True, **kw)
            b = lib.tensor(rng.standard_normal(C).astype(np.float32), requires_grad=True, **kw)
            g = lib.tensor(rng.standard_normal(shape).astype(np.float32), **kw)
            layers.append((x, w, b, g))
    F = lib.nn.functional

    def step():
        for x, w, b, g in layers:
            x.grad = w.grad = b.grad = None
            if kind == "bn":
                y = F.batch_norm(x, None, None, w, b, training=True)
            else:
                y = F.layer_norm(x, (x.shape[-1],), w, b)
            y.backward(g)
    return step


def run(device="cl:0", rounds=5, only=("bn", "ln"), quick=False, out=print):
    """Rows (``_anchors.case``) of forward+backward time per step, ours on ``device`` against PyTorch CPU; with
    ``quick`` one round over the first 4 shapes of each model. Prints one line per row through ``out``."""
    import cltorch
    torch = A.torch()
    rows = []
    for kind in only:
        shapes, what = (MOBILENET_BN, "MobileNetV2 BatchNorm2d x52") if kind == "bn" else (VIT_LN, "ViT LayerNorm x13")
        if quick:
            shapes, what, rounds = shapes[:4], what + " (quick: first 4)", 1
        sides = {"ours": (_step(cltorch, kind, device, shapes), cltorch.cl.synchronize)}
        if torch is not None:
            sides.update(A.torch_sides(lambda: _step(torch, kind, None, shapes)))
        res = A.interleaved(sides, rounds=rounds)
        A.restore_torch_threads()
        med = {k: statistics.median(v) * 1e3 for k, v in res.items()}
        bt = A.best_torch(res)
        r = A.round_ratio(res["ours"], res.get(bt)) if bt else None
        note = f"ours on {device}; load {A.load_avg():.1f}; " + A.cpu_note()
        rows.append(A.case(f"{what} forward+backward per step", "ms", med["ours"],
                           {k: v for k, v in med.items() if k != "ours"}, r, f"ours/{bt} time" if bt else "",
                           note=note))
        line = f"{what} forward+backward per step: ours {med['ours']:.2f} ms on {device}"
        for k in res:
            if k != "ours":
                line += f"; {k} {med[k]:.2f} ms"
        out(line + "; " + note)
    return rows


def suite(quick=False, device="cl:0"):
    """Rows for benchmarks/run.py."""
    return run(device=device, quick=quick, out=lambda *a: None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cl:0")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", nargs="*", choices=["bn", "ln"], default=["bn", "ln"])
    ap.add_argument("--quick", action="store_true", help="smoke mode: one round, the first 4 shapes of each model")
    args = ap.parse_args()
    print(A.describe(with_tinygrad=False))
    run(args.device, args.rounds, args.only, args.quick)


if __name__ == "__main__":
    main()
