"""Per-layer forward and backward times of the digits CNN's convolutions and pooling (examples/train_digits.py:
Conv2d 1->16 and 16->32, 3x3, padding 1, on batch 64 of 8x8 images; MaxPool2d(2)), for both convolution
algorithms (direct implicit-GEMM kernels, im2col + GEMM), next to a numpy im2col + matmul baseline.

Backward of the first layer computes only the weight and bias gradients (its input needs none), as in
training. Prints medians of ``--reps`` runs of ``--inner`` iterations each, in microseconds per call.

    python benchmarks/bench_conv.py [--device cl:0] [--reps 7] [--inner 20] [--batch 64] [--conv3d] [--mobilenet]

``--mobilenet`` runs :func:`run_mobilenet` instead: MobileNetV2 x0.35's depthwise and 1x1 convolution shapes
(batch 16, 32x32 input), forward + backward against torch CPU. ``--conv3d`` adds :func:`run_conv3d`: Conv3d 3x3x3, 16 -> 16 channels, on 8x16x16x32x32 (N, C, D, H, W), forward
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


# MobileNetV2 x0.35's convolutions at batch 16 of 32x32 (benchmarks/bench_models.py's step): depthwise 3x3
# (channels, size, stride) and 1x1 (in, out, size), each forward + input and weight gradients
MBV2_DW = [(16, 32, 1), (48, 32, 1), (48, 32, 2), (96, 16, 1), (96, 16, 2), (144, 8, 1), (192, 8, 1), (192, 8, 2),
           (336, 4, 1)]
MBV2_PW = [(8, 48, 32), (48, 8, 32), (16, 96, 16), (96, 16, 16), (24, 144, 8), (144, 24, 8), (192, 32, 8),
           (56, 336, 4), (336, 56, 4), (112, 1280, 4)]


def run_mobilenet(device="cl:0", quick=False, batch=16):
    """Forward + backward (input and weight gradients) of each MobileNetV2 x0.35 depthwise and 1x1 convolution
    shape against torch CPU (the faster of its default threads and 1 thread), in alternating rounds. Returns rows
    (name, ours_ms, torch_ms, ours_cpu_ms, torch_cpu_ms): medians of wall and process CPU time per call."""
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _anchors as A
    T = A.torch()
    rng = np.random.default_rng(0)
    shapes = [("depthwise 3x3 %d ch %dx%d s%d" % (c, h, h, s), c, c, h, s, c) for c, h, s in MBV2_DW]
    shapes += [("1x1 %d->%d %dx%d" % (ci, co, h, h), ci, co, h, 1, 1) for ci, co, h in MBV2_PW]
    if quick:
        shapes = shapes[1:3] + shapes[10:12]
    rows = []
    for name, ci, co, h, s, g in shapes:
        k = 3 if g > 1 else 1
        oh = (h + 2 * (k // 2) - k) // s + 1
        xn = rng.standard_normal((batch, ci, h, h)).astype(np.float32)
        wn = (rng.standard_normal((co, ci // g, k, k)) * 0.1).astype(np.float32)
        gn = rng.standard_normal((batch, co, oh, oh)).astype(np.float32)

        def step(lib, dev=None):
            kw = {"device": dev} if dev else {}
            x = lib.tensor(xn, requires_grad=True, **kw)
            w = lib.tensor(wn, requires_grad=True, **kw)
            gy = lib.tensor(gn, **kw)
            f = lib.nn.functional.conv2d
            return lambda: f(x, w, None, s, k // 2, 1, g).backward(gy)
        sides = {"ours": (step(torch, device), torch.cl.synchronize)}
        if T is not None:
            sides.update(A.torch_sides(lambda: step(T)))
        res = A.interleaved(sides, rounds=1 if quick else 5, target_s=0.05 if quick else 0.2)
        A.restore_torch_threads()
        bt = A.best_torch(res)
        med = lambda k: A.median(res[k]) * 1e3 if k in res else None  # noqa: E731
        cpu = lambda k: A.median(A.cpu_times[k]) * 1e3 if k in A.cpu_times and A.cpu_times[k] else None  # noqa
        rows.append((name, med("ours"), med(bt) if bt else None, cpu("ours"), cpu(bt) if bt else None))
    return rows


def suite(quick=False, device="cl:0"):
    """run.py's rows: the digits CNN layers (forward, against numpy), conv3d (full runs) and MobileNetV2's
    convolutions (fwd+bwd, against torch)."""
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _anchors as A
    rows_in = run(device, reps=1 if quick else 7, inner=2 if quick else 20)
    rows = []
    np_rows = {name.split(" [")[0]: f for name, f, _, _ in rows_in if "[numpy" in name}
    for name, f, bw, fb in rows_in:
        if "[numpy" in name:
            continue
        base = np_rows.get(name.split(" [")[0])
        rows.append(A.case(f"{name} fwd (fwd+bwd {fb:.0f} us)", "us", f, {"numpy": base} if base else {},
                           None if not base else base / f, "ours/numpy speed (forward)", None, None))
    if not quick:
        for name, f, fb, tf, tfb in run_conv3d(device)[:1]:
            rows.append(A.case(f"{name} fwd", "us", f, {"torch": tf} if tf else {}, tf / f if tf else None,
                               "torch/ours time (forward)", None, None))
            rows.append(A.case(f"{name} fwd+bwd", "us", fb, {"torch": tfb} if tfb else {}, tfb / fb if tfb else None,
                               "torch/ours time (fwd+bwd)", None, None))
    load = A.load_avg()
    for name, ours, tm, oc, tc in run_mobilenet(device, quick):
        rows.append(A.case(f"MobileNetV2 {name} b16 fwd+bwd", "ms", ours, {"torch": tm} if tm else {},
                           ours / tm if tm else None, "ours/torch time", None, None,
                           note=f"process CPU ours {oc:.3g} ms, torch {tc:.3g} ms; load {load:.1f}" if tc else ""))
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cl:0")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--inner", type=int, default=20)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--conv3d", action="store_true", help="also the conv3d rows (8x16x16x32x32, 3x3x3, 16->16)")
    ap.add_argument("--mobilenet", action="store_true", help="only MobileNetV2's depthwise and 1x1 shapes vs torch")
    a = ap.parse_args()
    if a.mobilenet:
        print(f"{'MobileNetV2 x0.35 conv, b16, fwd+bwd':40s} {'ours ms':>8s} {'torch ms':>8s} {'ours cpu':>8s} "
              f"{'torch cpu':>9s}")
        for r in run_mobilenet(a.device):
            print(f"{r[0]:40s} " + " ".join("%8.2f" % v if v is not None else "     n/a" for v in r[1:]))
    else:
        run(a.device, a.reps, a.inner, a.batch)
        if a.conv3d:
            run_conv3d(a.device)
