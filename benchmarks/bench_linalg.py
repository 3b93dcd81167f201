"""cltorch.linalg factorizations and solves against numpy.linalg, side by side in one process (issue 15's bars).

Cases (float32, on ``--device``): ``linalg.solve`` of a 512x512 A against a 512x512 B, ``linalg.cholesky`` of a
1024x1024 symmetric positive-definite matrix (the two barred rows: at least 0.5x numpy's speed), and, without a
bar, ``linalg.inv`` 512x512, ``linalg.lu_factor`` 512x512 (our numpy blocked LU; numpy has no LU, so its anchor is
numpy.linalg.solve's LU-based solve of the same A with one right-hand side) and ``linalg.svdvals`` 256x256.
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
    cases = [(f"linalg.solve {ns}x{ns} (B {ns}x{ns}) f32", lambda: L.solve(a, b), lambda: np.linalg.solve(an, bn),
              True, lambda o: o),
             (f"linalg.cholesky {nc}x{nc} f32", lambda: L.cholesky(s), lambda: np.linalg.cholesky(sn), True,
              lambda o: o),
             (f"linalg.inv {ns}x{ns} f32", lambda: L.inv(a), lambda: np.linalg.inv(an), False, lambda o: o),
             (f"linalg.lu_factor {ns}x{ns} f32 (numpy: solve, 1 rhs)", lambda: L.lu_factor(a),
              lambda: np.linalg.solve(an, b1), False, None),
             (f"linalg.svdvals {nsv}x{nsv} f32", lambda: L.svdvals(v), lambda: np.linalg.svd(vn, compute_uv=False),
              False, lambda o: o)]
    rows = []
    for label, ours, theirs, barred, pick in cases:
        if pick is not None:
            got, ref = pick(ours()).cpu().numpy(), theirs()
            err = float(np.abs(got - ref).max() / np.abs(ref).max())
            if err > 1e-4:
                raise AssertionError(f"{label}: relative error {err:.3g} against numpy")
        else:                   # P L U reproduces A
            LU, piv = ours()
            P, Lm, U = cltorch.lu_unpack(LU, piv)
            err = float(np.abs((P @ Lm @ U).cpu().numpy() - an).max() / np.abs(an).max())
            if err > 1e-4:
                raise AssertionError(f"{label}: P L U differs from A by {err:.3g} (relative)")
        load = A.load_avg()
        res = A.interleaved({"ours": (ours, sync), "numpy": (theirs, None)}, rounds=rounds, target_s=target,
                            warmup=2)
        med = {k: A.median(v) * 1e3 for k, v in res.items()}
        ratio = med["numpy"] / med["ours"]
        bar = f">= {BAR}" if barred else None
        met = (ratio >= BAR) if (barred and not quick) else None
        rows.append(A.case(label, "ms", med["ours"], {"numpy": med["numpy"]}, ratio, "numpy/ours time", bar, met,
                           note=f"load {load:.1f}; max rel err {err:.1e}; {A.cpu_note(1e3, 'ms')}"))
    return rows


def suite(quick=False, device="cl:0"):
    """Rows for benchmarks/run.py."""
    return run(quick=quick, device=device)


def main(argv=None):
    A.command_line(run, __doc__, argv)


if __name__ == "__main__":
    main()
