"""cltorch.linalg factorizations and solves against numpy.linalg, side by side in one process (issue 15's bars).

Cases (float32, on ``--device``): ``linalg.solve`` of a 512x512 A against a 512x512 B, ``linalg.cholesky`` of a
1024x1024 symmetric positive-definite matrix (the two barred rows: at least 0.5x numpy's speed), and, without a
bar, ``linalg.inv`` 512x512, ``linalg.lu_factor`` 512x512 (our numpy blocked LU; numpy has no LU, so its anchor is
numpy.linalg.solve's LU-based solve of the same A with one right-hand side) and ``linalg.svdvals`` 256x256; and
``linalg.lu_factor`` of one 128x128 matrix and of batches of 256 8x8 and 256 32x32 matrices, against numpy's
solve (1 rhs per matrix) and torch.linalg.lu_factor (default threads and 1 thread) when torch is importable; the
LU rows also check that the pivots equal torch's.
cltorch runs these on the host through numpy's LAPACK (see cltorch/ops/lapack.py), so its time is numpy's plus
the copies to and from the device and the op's bookkeeping. Medians of interleaved rounds; the ratio is numpy's
time over ours (higher is better for us). Values are checked against numpy before timing. numpy is timed with
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset in this process.

    python benchmarks/bench_linalg.py [--device cl:0] [--rounds 5] [--quick]
"""
import os
import sys
from pathlib import Path

for _v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    os.environ.pop(_v, None)

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _anchors as A  # noqa: E402

BAR = 0.5


def run(quick=False, device="cl:0", rounds=None):
    import cltorch
    rounds = rounds or (1 if quick else 5)
    target = 0.05 if quick else 0.3
    sync = cltorch.cl.synchronize
    rng = np.random.default_rng(0)
    ns, nc, nsv = (128, 256, 64) if quick else (512, 1024, 256)
    an = rng.standard_normal((ns, ns)).astype(np.float32) + ns ** 0.5 * np.eye(ns, dtype=np.float32)
    bn = rng.standard_normal((ns, ns)).astype(np.float32)
    g = rng.standard_normal((nc, nc)).astype(np.float32)
    sn = (g @ g.T / nc + np.eye(nc, dtype=np.float32)).astype(np.float32)
    vn = rng.standard_normal((nsv, nsv)).astype(np.float32)
    b1 = bn[:, :1].copy()
    a, b, s, v = (cltorch.tensor(x, device=device) for x in (an, bn, sn, vn))
    L = cltorch.linalg
    T = A.torch()
    # (label, ours, numpy, barred, pick (None: an LU, checked by P L U and torch's pivots), LU input, torch step)
    cases = [(f"linalg.solve {ns}x{ns} (B {ns}x{ns}) f32", lambda: L.solve(a, b), lambda: np.linalg.solve(an, bn),
              True, lambda o: o, None, None),
             (f"linalg.cholesky {nc}x{nc} f32", lambda: L.cholesky(s), lambda: np.linalg.cholesky(sn), True,
              lambda o: o, None, None),
             (f"linalg.inv {ns}x{ns} f32", lambda: L.inv(a), lambda: np.linalg.inv(an), False, lambda o: o, None,
              None),
             (f"linalg.lu_factor {ns}x{ns} f32 (numpy: solve, 1 rhs)", lambda: L.lu_factor(a),
              lambda: np.linalg.solve(an, b1), False, None, an, None),
             (f"linalg.svdvals {nsv}x{nsv} f32", lambda: L.svdvals(v), lambda: np.linalg.svd(vn, compute_uv=False),
              False, lambda o: o, None, None)]
    for shape in ((128, 128), (256, 8, 8), (256, 32, 32)):
        xn = rng.standard_normal(shape).astype(np.float32)
        x, rhs = cltorch.tensor(xn, device=device), xn[..., :1].copy()
        name = "x".join(map(str, shape[-2:])) + (f", batch of {shape[0]}" if len(shape) > 2 else "")
        step = None if T is None else (lambda xt=T.tensor(xn): (lambda: T.linalg.lu_factor(xt)))
        cases.append((f"linalg.lu_factor {name} f32, random A (numpy: solve, 1 rhs)", lambda x=x: L.lu_factor(x),
                      lambda xn=xn, rhs=rhs: np.linalg.solve(xn, rhs), False, None, xn, step))
    rows = []
    for label, ours, theirs, barred, pick, xn, torch_step in cases:
        if pick is not None:
            got, ref = pick(ours()).cpu().numpy(), theirs()
            err = float(np.abs(got - ref).max() / np.abs(ref).max())
            if err > 1e-4:
                raise AssertionError(f"{label}: relative error {err:.3g} against numpy")
        else:                   # P L U reproduces A, and the pivots are torch's
            LU, piv = ours()
            P, Lm, U = cltorch.lu_unpack(LU, piv)
            err = float(np.abs((P @ Lm @ U).cpu().numpy() - xn).max() / np.abs(xn).max())
            if err > 1e-4:
                raise AssertionError(f"{label}: P L U differs from A by {err:.3g} (relative)")
            if T is not None and not np.array_equal(piv.cpu().numpy(),
                                                    T.linalg.lu_factor(T.tensor(xn)).pivots.numpy()):
                raise AssertionError(f"{label}: pivots differ from torch's")
        load = A.load_avg()
        sides = {"ours": (ours, sync), "numpy": (theirs, None)}
        if torch_step is not None:
            sides.update(A.torch_sides(torch_step))
        res = A.interleaved(sides, rounds=rounds, target_s=target, warmup=2)
        A.restore_torch_threads()
        med = {k: A.median(v) * 1e3 for k, v in res.items()}
        ratio = med["numpy"] / med["ours"]
        bar = f">= {BAR}" if barred else None
        met = (ratio >= BAR) if (barred and not quick) else None
        anchors = {k: v for k, v in med.items() if k != "ours"}
        rows.append(A.case(label, "ms", med["ours"], anchors, ratio, "numpy/ours time", bar, met,
                           note=f"load {load:.1f}; max rel err {err:.1e}; {A.cpu_note(1e3, 'ms')}"))
    return rows


def suite(quick=False, device="cl:0"):
    """Rows for benchmarks/run.py."""
    return run(quick=quick, device=device)


def main(argv=None):
    A.command_line(run, __doc__, argv)


if __name__ == "__main__":
    main()
