"""Per-layer forward and backward times of the digits CNN's convolutions and pooling (examples/train_digits.py:
Conv2d 1->16 and 16->32, 3x3, padding 1, on batch 64 of 8x8 images; MaxPool2d(2)), for both convolution
algorithms (direct implicit-GEMM kernels, im2col + GEMM), next to a numpy im2col + matmul baseline.

Backward of the first layer computes only the weight and bias gradients (its input needs none), as in
training. Prints medians of ``--reps`` runs of ``--inner`` iterations each, in microseconds per call.

    python benchmarks/bench_conv.py [--device cl:0] [--reps 7] [--inner 20] [--batch 64]
"""
import argparse
import statistics
import time

import numpy as np

import cltorch as torch
from cltorch.ops import conv as C
from cltorch.ops import pool as P


def _median(fn, reps, inner, sync):
    fn()
    sync()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        sync()
        ts.append((time.perf_counter() - t0) / inner)
    return statistics.median(ts) * 1e6


def _np_im2col_conv(x, w):
    """numpy baseline: 3x3 padding 1 convolution as im2col + one matmul (float32, OpenBLAS)."""
    n, c, h, wd = x.shape
    o = w.shape[0]
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.empty((c, 3, 3, n, h, wd), np.float32)
    for i in range(3):
        for j in range(3):
            cols[:, i, j] = xp[:, :, i:i + h, j:j + wd].transpose(1, 0, 2, 3)
    y = w.reshape(o, -1) @ cols.reshape(c * 9, -1)
    return y.reshape(o, n, h, wd).transpose(1, 0, 2, 3)


def run(device="cl:0", reps=7, inner=20, batch=64):
    rng = np.random.default_rng(0)
    sync = torch.cl.synchronize
    rows = []
    x0 = torch.tensor(rng.standard_normal((batch, 1, 8, 8)).astype(np.float32), device=device)
    layers = [("conv1 1->16", x0, 1, 16, False), ("conv2 16->32", None, 16, 32, True)]
    for algo in ("direct", "gemm"):
        prev = C.set_algorithm(algo)
        try:
            for name, x, cin, cout, need_gx in layers:
                if x is None:
                    x = torch.tensor(rng.standard_normal((batch, cin, 8, 8)).astype(np.float32), device=device)
                x = x.detach().requires_grad_(need_gx)
                w = torch.tensor(rng.standard_normal((cout, cin, 3, 3)).astype(np.float32) * 0.1, device=device,
                                 requires_grad=True)
                b = torch.zeros(cout, device=device, requires_grad=True)
                g = torch.ones(batch, cout, 8, 8, device=device)
                with torch.no_grad():
                    t_f = _median(lambda: C.conv2d(x, w, b, padding=1), reps, inner, sync)

                def fb():
                    y = C.conv2d(x, w, b, padding=1)
                    y.backward(g)
                t_fb = _median(fb, reps, inner, sync)
                rows.append((f"{name} [{algo}]", t_f, t_fb - t_f, t_fb))
        finally:
            C.set_algorithm(prev)
    xp = torch.tensor(rng.standard_normal((batch, 32, 8, 8)).astype(np.float32), device=device, requires_grad=True)
    gp = torch.ones(batch, 32, 4, 4, device=device)
    with torch.no_grad():
        t_f = _median(lambda: P.max_pool2d(xp, 2), reps, inner, sync)
    t_fb = _median(lambda: P.max_pool2d(xp, 2).backward(gp), reps, inner, sync)
    rows.append(("max_pool2d(2) 32x8x8", t_f, t_fb - t_f, t_fb))
    # numpy baseline for the forward convolutions
    for name, cin, cout in (("conv1 1->16", 1, 16), ("conv2 16->32", 16, 32)):
        xn = rng.standard_normal((batch, cin, 8, 8)).astype(np.float32)
        wn = rng.standard_normal((cout, cin, 3, 3)).astype(np.float32)
        t = _median(lambda: _np_im2col_conv(xn, wn), reps, inner, lambda: None)
        rows.append((f"{name} [numpy im2col+matmul]", t, float("nan"), float("nan")))
    print(f"device {device} ({torch.backend.runtime(0).info.name if device != 'cpu' else 'cpu'}), batch {batch}, "
          f"median us per call")
    print(f"{'layer':38s} {'forward':>10s} {'backward':>10s} {'fwd+bwd':>10s}")
    for name, f, bw, fb in rows:
        print(f"{name:38s} {f:10.1f} {bw:10.1f} {fb:10.1f}")
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cl:0")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--inner", type=int, default=20)
    ap.add_argument("--batch", type=int, default=64)
    a = ap.parse_args()
    run(a.device, a.reps, a.inner, a.batch)
