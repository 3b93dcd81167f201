"""Training steps of the two example models, cltorch against PyTorch CPU, side by side in one run; and the peak
memory of digits training in each library.

- digits CNN (``examples/train_digits.py``'s DigitsCNN, batch 64 of scikit-learn's digit scans, train mode with
  dropout): ``zero_grad; cross_entropy; backward; AdamW step``;
- char-LM (``examples/train_charlm.py``'s CharTransformer at its defaults: d=128, 4 heads, 3 layers, block 128,
  batch 32 windows of Python's documentation text, causal SDPA): the same plus ``clip_grad_norm_(1.0)`` and
  AdamW with the example's param groups.

Both libraries build the model from the example's own source (for torch its import lines are pointed at torch,
see ``_anchors.load_example``). Steps are queued back to back with one device sync per timed batch; the sides
alternate in rounds; medians are printed.

Peak memory: each library trains the digits CNN for 30 steps in a fresh subprocess; printed are the growth of
the process's peak resident memory over its size after setup (import, data), and for cltorch also its
allocator's peak (``cltorch.cl.max_memory_allocated``). On PoCL's CPU device, device memory is host memory, so
resident memory counts it.

    python benchmarks/bench_train.py [--device cl:0] [--rounds 5] [--quick] [--profile digits|charlm]

Bars (issue 9): each step <= 2x torch CPU's time.
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _anchors as A  # noqa: E402

DIGITS_BATCH = 64
CHARLM = dict(d=128, heads=4, layers=3, block=128, batch=32)
CHARLM_QUICK = dict(d=64, heads=2, layers=1, block=32, batch=8)


def _digits_batch():
    ex = A.load_example("train_digits", "cltorch")
    xtr, _, ytr, _ = ex.load_digits_split(0)
    return xtr[:DIGITS_BATCH], ytr[:DIGITS_BATCH]


def digits_step(lib_name, device="cpu", xy=None):
    """(step, sync, model) for one library ("cltorch" or "torch")."""
    lib = A.torch() if lib_name == "torch" else __import__("cltorch")
    ex = A.load_example("train_digits", lib_name)
    F = ex.F
    xn, yn = xy if xy is not None else _digits_batch()
    lib.manual_seed(0)
    model = ex.DigitsCNN().to(device)
    model.train()
    opt = lib.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-2)
    x, y = lib.from_numpy(xn).to(device), lib.from_numpy(yn).to(device)

    def step():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
    sync = __import__("cltorch").cl.synchronize if lib_name == "cltorch" else None
    return step, sync, model


def _charlm_data(cfg):
    ex = A.load_example("train_charlm", "cltorch")
    text = ex.load_text()
    vocab = sorted(set(text))
    stoi = {c: i for i, c in enumerate(vocab)}
    data = np.array([stoi[c] for c in text[:200_000]], dtype=np.int64)
    rng = np.random.default_rng(0)
    starts = rng.integers(0, len(data) - cfg["block"] - 1, cfg["batch"])
    x = np.stack([data[s:s + cfg["block"]] for s in starts])
    y = np.stack([data[s + 1:s + 1 + cfg["block"]] for s in starts])
    return len(vocab), x, y


def charlm_step(lib_name, device="cpu", cfg=CHARLM, data=None):
    lib = A.torch() if lib_name == "torch" else __import__("cltorch")
    ex = A.load_example("train_charlm", lib_name)
    F, nn = ex.F, ex.nn
    V, xn, yn = data if data is not None else _charlm_data(cfg)
    lib.manual_seed(0)
    model = ex.CharTransformer(V, cfg["d"], cfg["heads"], cfg["layers"], cfg["block"]).to(device)
    model.train()
    opt = lib.optim.AdamW(ex.param_groups(model, 0.1), lr=3e-3, betas=(0.9, 0.99))
    x, y = lib.from_numpy(xn).to(device), lib.from_numpy(yn).to(device)

    def step():
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss
    sync = __import__("cltorch").cl.synchronize if lib_name == "cltorch" else None
    return step, sync, model


# ------------------------------------------------------------------------------------------------ memory
def _status_bytes(field):
    """VmRSS / VmHWM of this process from /proc (VmHWM is the peak since exec; ru_maxrss would include the
    parent's size from before the exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return None


def _mem_child(lib_name, device, steps):
    """Runs in a fresh process: digits training steps; prints one JSON line."""
    xy = _digits_batch()
    if lib_name == "torch":
        A.torch()
    else:
        import cltorch  # noqa: F401
        cltorch.ones(1, device=device).sum().item()  # the runtime exists before the baseline is read
    base = _status_bytes("VmRSS")
    step, sync, _ = digits_step(lib_name, device, xy)
    for _ in range(steps):
        loss = step()
    float(loss.item())
    peak = _status_bytes("VmHWM")
    out = {"rss_after_setup": base, "peak_rss": peak, "growth": max(0, peak - base)}
    if lib_name == "cltorch":
        import cltorch
        out["allocator_peak"] = cltorch.cl.max_memory_allocated(device) if device != "cpu" else None
    print(json.dumps(out))


def peak_memory(device="cl:0", steps=30):
    """{"cltorch": {...}, "torch": {...} or None} from fresh subprocesses (see the module docstring)."""
    res = {}
    for lib in ("cltorch", "torch"):
        if lib == "torch" and A.torch() is None:
            res[lib] = None
            continue
        r = subprocess.run([sys.executable, __file__, "--mem-child", lib, "--device", device, "--steps", str(steps)],
                           capture_output=True, text=True, timeout=600)
        try:
            res[lib] = json.loads(r.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            res[lib] = {"error": (r.stderr or r.stdout)[-500:]}
    return res


# ------------------------------------------------------------------------------------------------ suite
def run(quick=False, device="cl:0", rounds=None, profile=None, out=print):
    rounds = rounds or (1 if quick else 5)
    target = 0.05 if quick else 0.6
    rows = []
    cfg = CHARLM_QUICK if quick else CHARLM
    for name, make, bar in (("digits CNN train step (b64, AdamW)", lambda lib, dev: digits_step(lib, dev), 2.0),
                            (f"char-LM train step (d{cfg['d']} L{cfg['layers']} T{cfg['block']} b{cfg['batch']}, "
                             "causal SDPA, clip, AdamW)", lambda lib, dev: charlm_step(lib, dev, cfg), 2.0)):
        ours, sync, _ = make("cltorch", device)
        sides = {"ours": (ours, sync)}
        sides.update(A.torch_sides(lambda: make("torch", "cpu")[0]))
        load = A.load_avg()
        res = A.interleaved(sides, rounds=rounds, target_s=target, warmup=2)
        A.restore_torch_threads()
        med = {k: A.median(v) * 1e3 for k, v in res.items()}
        bt = A.best_torch(res)
        r = A.round_ratio(res["ours"], res.get(bt))
        rows.append(A.case(name, "ms", med["ours"], {k: v for k, v in med.items() if k != "ours"}, r,
                           f"ours/{bt} time", f"<= {bar}x torch's time", None if r is None else r <= bar,
                           note=f"load {load:.1f}; {A.cpu_note()}"))
        if profile and profile in name.lower().replace("-", ""):
            A.profile_host(ours, sync, n=10, out=out)
    if not quick:
        mem = peak_memory(device)
        o, t = mem.get("cltorch") or {}, mem.get("torch") or {}
        mib = lambda b: None if b is None else b / 2 ** 20  # noqa: E731
        note = (f"cltorch allocator peak {mib(o.get('allocator_peak')):.1f} MiB; " if o.get("allocator_peak") else "") + \
               f"peak RSS: cltorch {mib(o.get('peak_rss')) or float('nan'):.0f} MiB, " \
               f"torch {mib(t.get('peak_rss')) or float('nan'):.0f} MiB"
        rows.append(A.case("peak memory, digits training (growth of peak RSS over setup)", "MiB",
                           mib(o.get("growth")), {"torch": mib(t.get("growth"))} if t.get("growth") is not None else {},
                           None, "", "print both", None, note=note))
    return rows


def suite(quick=False, device="cl:0"):
    """Rows for benchmarks/run.py."""
    return run(quick=quick, device=device)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cl:0")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--profile", choices=["digits", "charlm"], default=None)
    ap.add_argument("--mem-child", choices=["cltorch", "torch"], default=None, help=argparse.SUPPRESS)
    ap.add_argument("--steps", type=int, default=30, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.mem_child:
        return _mem_child(a.mem_child, a.device if a.mem_child == "cltorch" else "cpu", a.steps)
    print(A.describe())
    for r in run(a.quick, a.device, a.rounds, a.profile):
        anc = ", ".join(f"{k} {v:.2f}" for k, v in r["anchors"].items())
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f} ({r['ratio_desc']})"
        ours = "-" if r["ours"] is None else f"{r['ours']:.2f}"
        print(f"{r['case']}: ours {ours} {r['unit']}; {anc}; ratio {ratio}; bar {r['bar']}: "
              f"{ {True: 'met', False: 'MISSED', None: '-'}[r['met']]}; {r['note']}")


if __name__ == "__main__":
    main()
