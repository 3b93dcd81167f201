"""Per-layer forward and backward times of the digits CNN's convolutions and pooling (examples/train_digits.py:
Conv2d 1->16 and 16->32, 3x3, padding 1, on batch 64 of 8x8 images; MaxPool2d(2)), for both convolution
algorithms (direct implicit-GEMM kernels, im2col + GEMM), next to a numpy im2col + matmul baseline.

Backward of the first layer computes only the weight and bias gradients (its input needs none), as in
training. Prints medians of ``--reps`` runs of ``--inner`` iterations each, in microseconds per call.

    python benchmarks/bench_conv.py [--device cl:0] [--reps 7] [--inner 20] [--batch 64] [--conv3d]

``--conv3d`` adds :func:`run_conv3d`: Conv3d 3x3x3, 16 -> 16 channels, on 8x16x16x32x32 (N, C, D, H, W), forward
and forward+backward against torch CPU, printed as ratios.
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


def run_conv3d(device="cl:0", reps=3, inner=1, shape=(8, 16, 16, 32, 32), cout=16):
    """Conv3d 3x3x3, padding 1, ``shape`` = (N, C, D, H, W) (default 8x16x16x32x32, 16 -> 16 channels): forward
    and forward+backward (input, weight and bias gradients) of cltorch (its default algorithm choice, then each
    algorithm) against torch CPU (the faster of its default threads and 1 thread). Returns rows
    (name, ours_fwd_us, ours_fb_us, torch_fwd_us, torch_fb_us); prints them with the ratios torch/ours."""
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _anchors as A
    rng = np.random.default_rng(0)
    xn = rng.standard_normal(shape).astype(np.float32)
    wn = (rng.standard_normal((cout, shape[1], 3, 3, 3)) * 0.05).astype(np.float32)
    gn = rng.standard_normal((shape[0], cout) + tuple(shape[2:])).astype(np.float32)
    sync = torch.cl.synchronize
    x = torch.tensor(xn, device=device, requires_grad=True)
    w = torch.tensor(wn, device=device, requires_grad=True)
    b = torch.zeros(cout, device=device, requires_grad=True)
    g = torch.tensor(gn, device=device)

    def fb():
        C.conv3d(x, w, b, padding=1).backward(g)
    rows = []
    for algo in (None, "direct", "gemm"):
        prev = C.set_algorithm(algo)
        try:
            with torch.no_grad():
                t_f = _median(lambda: C.conv3d(x, w, b, padding=1), reps, inner, sync)
            t_fb = _median(fb, reps, inner, sync)
        finally:
            C.set_algorithm(prev)
        rows.append([f"conv3d {shape[1]}->{cout} 3x3x3 [{algo or 'auto'}]", t_f, t_fb, None, None])
    T = A.torch()
    if T is not None:
        tx = T.tensor(xn, requires_grad=True)
        tw = T.tensor(wn, requires_grad=True)
        tb = T.zeros(cout, requires_grad=True)
        tg = T.tensor(gn)

        def t_fwd():
            with T.no_grad():
                return _median(lambda: T.nn.functional.conv3d(tx, tw, tb, padding=1), reps, inner,
                               lambda: None) / 1e6

        def t_fb():
            return _median(lambda: T.nn.functional.conv3d(tx, tw, tb, padding=1).backward(tg), reps, inner,
                           lambda: None) / 1e6
        tf, _ = A.torch_best_of_threads(t_fwd)
        tfb, _ = A.torch_best_of_threads(t_fb)
        for r in rows:
            r[3], r[4] = tf * 1e6, tfb * 1e6
    print(f"conv3d input {'x'.join(map(str, shape))} (N, C, D, H, W), kernel 3x3x3, padding 1, {shape[1]} -> {cout} "
          f"channels, device {device}; median us per call; ratio = torch CPU time / ours (> 1: we are faster)")
    print(f"{'layer':36s} {'forward':>11s} {'torch fwd':>11s} {'ratio':>6s} {'fwd+bwd':>11s} {'torch f+b':>11s} "
          f"{'ratio':>6s}")
    for name, f, fbt, tf, tfb in rows:
        rf = f"{tf / f:6.2f}" if tf else "   n/a"
        rfb = f"{tfb / fbt:6.2f}" if tfb else "   n/a"
        print(f"{name:36s} {f:11.0f} {tf or float('nan'):11.0f} {rf} {fbt:11.0f} {tfb or float('nan'):11.0f} {rfb}")
    return [tuple(r) for r in rows]


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cl:0")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--inner", type=int, default=20)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--conv3d", action="store_true", help="also the conv3d rows (8x16x16x32x32, 3x3x3, 16->16)")
    a = ap.parse_args()
    run(a.device, a.reps, a.inner, a.batch)
    if a.conv3d:
        run_conv3d(a.device)
