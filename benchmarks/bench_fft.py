"""FFT throughput against numpy.fft (pocketfft), side by side in one process (issue 15's figures).

Cases: ``fft.rfft`` of 2^20 float32 (numpy computes in float64, so its result is the more accurate one) and
``fft.fft2`` of a 1024x1024 complex64 tensor; with ``--quick`` 2^16 and 256x256. Medians of interleaved rounds;
the ratio is numpy's time over ours (higher is better for us). Values are checked against numpy before timing.
numpy is timed with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset in this process (numpy.fft does not use BLAS,
but the suite's rule keeps every numpy anchor in the same environment).

    python benchmarks/bench_fft.py [--device cl:0] [--rounds 5] [--quick]
"""
import os
import sys
from pathlib import Path

for _v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    os.environ.pop(_v, None)

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _anchors as A  # noqa: E402


def run(quick=False, device="cl:0", rounds=None):
    import cltorch
    rounds = rounds or (1 if quick else 5)
    target = 0.05 if quick else 0.3
    sync = cltorch.cl.synchronize
    rng = np.random.default_rng(0)
    n = 1 << (16 if quick else 20)
    side = 256 if quick else 1024
    xn = rng.standard_normal(n).astype(np.float32)
    zn = (rng.standard_normal((side, side)) + 1j * rng.standard_normal((side, side))).astype(np.complex64)
    x, z = cltorch.tensor(xn, device=device), cltorch.tensor(zn, device=device)
    cases = [(f"fft.rfft of 2^{n.bit_length() - 1} f32", lambda: cltorch.fft.rfft(x), lambda: np.fft.rfft(xn),
              n * 4),
             (f"fft.fft2 {side}x{side} c64", lambda: cltorch.fft.fft2(z), lambda: np.fft.fft2(zn), side * side * 8)]
    rows = []
    for label, ours, theirs, nbytes in cases:
        got, ref = ours().cpu().numpy(), theirs()
        err = np.abs(got - ref).max() / np.abs(ref).max()
        if err > 1e-5:
            raise AssertionError(f"{label}: relative error {err:.3g} against numpy")
        load = A.load_avg()
        res = A.interleaved({"ours": (ours, sync), "numpy": (theirs, None)}, rounds=rounds, target_s=target,
                            warmup=2)
        med = {k: A.median(v) * 1e3 for k, v in res.items()}
        ratio = med["numpy"] / med["ours"]
        rows.append(A.case(label, "ms", med["ours"], {"numpy": med["numpy"]}, ratio, "numpy/ours time", None, None,
                           note=f"load {load:.1f}; max rel err {err:.1e}; {A.cpu_note(1e3, 'ms')}"))
    return rows


def suite(quick=False, device="cl:0"):
    """Rows for benchmarks/run.py."""
    return run(quick=quick, device=device)


def main(argv=None):
    A.command_line(run, __doc__, argv)


if __name__ == "__main__":
    main()
