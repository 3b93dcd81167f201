"""scaled_dot_product_attention: the fused flash-style kernel against our math path and torch's CPU SDPA.

B=4, H=8, D=64, L=S from 256 to 4096 (default), float32, causal and not, forward and forward+backward. For
each case it prints the median time and the peak extra device memory (``cltorch.cl.max_memory_allocated``
above the inputs) of the fused path and of the math path, and torch's time when torch can be run. The math
path stores the (B, H, L, S) score matrix, so at L=4096 it needs single 2 GiB buffers, above PoCL's largest
allocation, and the whole computation several GiB; at L=8192 (``--big-sizes``, forward only) its 8 GiB score
matrix cannot be allocated and it is reported as OOM, while the fused path (O(L) extra memory) runs.

torch: imported directly when it is installed in this environment, else run in a subprocess with the Python
given by ``--torch-python`` (default: /tmp/torchvenv/bin/python when it exists). Times are wall-clock medians;
``cpu`` columns give process CPU time / core count, which is steadier on a shared machine.

``--design cpu|flash`` runs that fused design whatever the device's profile names (``[sdpa] design``; the flash
design's tiles then come from the profile's ``flash_*`` rows or the defaults in ``cltorch/ops/attention/plan.py``),
to compare the two on one device.

    python benchmarks/bench_sdpa.py [--sizes 256 512 1024 2048 4096] [--repeat 3] [--device cl:0]
                                    [--big-sizes 8192] [--no-math] [--no-torch] [--torch-python PATH] [--fwd-only]
                                    [--design cpu|flash]
"""
import argparse
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import cltorch  # noqa: E402
from cltorch.ops.attention import scaled_dot_product_attention, sdpa_kernel, SDPBackend  # noqa: E402

B, H, D = 4, 8, 64
NCPU = os.cpu_count() or 1


def _run_case(fn, repeat):
    """(median wall s, median cpu s / cores) of fn() with a device sync after each call."""
    fn()
    cltorch.cl.synchronize()
    walls, cpus = [], []
    for _ in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        cltorch.cl.synchronize()
        walls.append(time.perf_counter() - t0)
        cpus.append((time.process_time() - c0) / NCPU)
    return float(np.median(walls)), float(np.median(cpus))


def ours(L, causal, backward, backend, device, repeat):
    rng = np.random.default_rng(0)
    mk = lambda: cltorch.tensor(rng.standard_normal((B, H, L, D)).astype(np.float32), device=device,  # noqa: E731
                                requires_grad=backward)
    q, k, v = mk(), mk(), mk()
    g = cltorch.tensor(rng.standard_normal((B, H, L, D)).astype(np.float32), device=device)
    gc.collect()
    base = cltorch.cl.memory_allocated(device)

    def fn():
        with sdpa_kernel([backend]):
            o = scaled_dot_product_attention(q, k, v, is_causal=causal)
        if backward:
            o.backward(g)
            q.grad = k.grad = v.grad = None
        del o
    try:
        fn()                                  # warm-up (kernel builds)
        cltorch.cl.synchronize()
        gc.collect()                          # free the warm-up's graph now, not inside the measured calls
        cltorch.cl.reset_peak_memory_stats(device)
        wall, cpu = _run_case(fn, repeat)
        peak = cltorch.cl.max_memory_allocated(device) - base
        return wall, cpu, peak
    except cltorch.cl.OutOfMemoryError:
        return None, None, None


_TORCH_CODE = r"""
import json, os, sys, time
import numpy as np
import torch
import torch.nn.functional as F
B, H, D = 4, 8, 64
L, causal, backward, repeat = int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3] == "1", int(sys.argv[4])
q, k, v = [torch.randn(B, H, L, D, requires_grad=backward) for _ in range(3)]
g = torch.randn(B, H, L, D)
def fn():
    o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    if backward:
        o.backward(g)
        q.grad = k.grad = v.grad = None
fn()
walls, cpus = [], []
for _ in range(repeat):
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    walls.append(time.perf_counter() - t0)
    cpus.append((time.process_time() - c0) / (os.cpu_count() or 1))
print(json.dumps([float(np.median(walls)), float(np.median(cpus)), torch.__version__]))
"""


def torch_time(L, causal, backward, repeat, python):
    try:
        import torch  # noqa: F401
        python = sys.executable
    except ImportError:
        if python is None:
            return None
    try:
        out = subprocess.run([python, "-c", _TORCH_CODE, str(L), str(int(causal)), str(int(backward)), str(repeat)],
                             capture_output=True, text=True, timeout=3600)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except Exception:
        return None


def fmt_ms(s):
    return "—" if s is None else f"{s * 1e3:9.1f}"


def fmt_mib(b):
    return "OOM" if b is None else f"{b / 2 ** 20:8.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--big-sizes", type=int, nargs="*", default=[8192],
                    help="sizes run forward only, once (where the math path runs out of memory)")
    ap.add_argument("--device", default="cl:0")
    ap.add_argument("--no-math", action="store_true")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--fwd-only", action="store_true")
    ap.add_argument("--torch-python", default="/tmp/torchvenv/bin/python"
                    if os.path.exists("/tmp/torchvenv/bin/python") else None)
    ap.add_argument("--design", choices=["cpu", "flash"], default=None,
                    help="the fused design to run (default: the device profile's [sdpa] design)")
    a = ap.parse_args()
    if a.design is not None:
        from cltorch.ops.attention import plan
        rt = cltorch.ones(1, device=a.device)._runtime()
        rt.profile["sdpa"] = dict(rt.profile.get("sdpa", {}), design=a.design)
        plan._plans.clear()
    design = cltorch.ones(1, device=a.device)._runtime().profile.get_value("sdpa", "design", "cpu")
    print(f"scaled_dot_product_attention, B={B} H={H} D={D} float32 on {cltorch.cl.get_device_name(a.device)} "
          f"(fused design: {design}); "
          f"times are medians of {a.repeat}; 'cpu' = process CPU time / {NCPU} cores; memory = peak extra device "
          "memory")
    hdr = (f"{'L':>5} {'causal':>6} {'pass':>7} | {'fused ms':>9} {'cpu':>9} {'MiB':>8} | {'math ms':>9} {'cpu':>9} "
           f"{'MiB':>8} | {'torch ms':>9} {'cpu':>9} | fused/torch")
    print(hdr)
    print("-" * len(hdr))
    tv = None
    cases = [(L, False) for L in a.sizes] + [(L, True) for L in a.big_sizes]
    for L, big in cases:
        for causal in (False, True):
            for backward in ((False,) if a.fwd_only or big else (False, True)):
                rep = a.repeat if L <= 2048 else 1
                fw, fc, fm = ours(L, causal, backward, SDPBackend.FLASH_ATTENTION, a.device, rep)
                mw = mc = mm = None
                if not a.no_math:
                    mw, mc, mm = ours(L, causal, backward, SDPBackend.MATH, a.device, rep)
                tw = tc = None
                if not a.no_torch:
                    r = torch_time(L, causal, backward, rep, a.torch_python)
                    if r is not None:
                        tw, tc, tv = r
                ratio = f"{fw / tw:5.2f}x (cpu {fc / tc:4.2f}x)" if fw and tw else ""
                print(f"{L:5d} {str(causal):>6} {'fwd+bwd' if backward else 'fwd':>7} | {fmt_ms(fw)} {fmt_ms(fc)} "
                      f"{fmt_mib(fm)} | {fmt_ms(mw) if mm is not None or a.no_math else '      OOM'} {fmt_ms(mc)} "
                      f"{'—' if a.no_math else fmt_mib(mm):>8} | {fmt_ms(tw)} {fmt_ms(tc)} | {ratio}", flush=True)
    if tv:
        print(f"torch {tv} (CPU SDPA)")


if __name__ == "__main__":
    main()
