"""The recurrent layers: nn.LSTM (2 layers x 256 hidden, input 256, seq 64, batch 32), cltorch against PyTorch
CPU's nn.LSTM, side by side in one process.

- train step: ``zero_grad; out, _ = lstm(x); (out * out).mean().backward()`` (forward + backward, no optimizer);
- forward: the same under ``no_grad``.

Both libraries start from the same weights (torch's state_dict loaded into ours). Steps are queued back to back
with one device sync per timed batch; the sides alternate in rounds; medians are printed. Ours runs on ``--device``
(cl:0) and, for reference, on "cpu" (named in the note).

    python benchmarks/bench_rnn.py [--device cl:0] [--rounds 5] [--quick] [--profile]

Bar (issue 14): the LSTM training step <= 1.5x torch CPU's time (forward reported too).
"""
import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _anchors as A  # noqa: E402

FULL = dict(layers=2, hidden=256, inp=256, seq=64, batch=32)
QUICK = dict(layers=1, hidden=32, inp=32, seq=8, batch=4)


def _state(cfg):
    """torch's initial weights as numpy arrays (or our own init where torch is absent)."""
    t = A.torch()
    if t is not None:
        t.manual_seed(0)
        m = t.nn.LSTM(cfg["inp"], cfg["hidden"], cfg["layers"])
        return {k: v.detach().numpy().copy() for k, v in m.state_dict().items()}
    import cltorch
    cltorch.manual_seed(0)
    m = cltorch.nn.LSTM(cfg["inp"], cfg["hidden"], cfg["layers"])
    return {k: v.numpy().copy() for k, v in m.state_dict().items()}


def make_steps(lib_name, cfg, state, xn, device="cpu"):
    """{"train": step, "forward": step}, sync for one library ("cltorch" or "torch")."""
    lib = A.torch() if lib_name == "torch" else __import__("cltorch")
    m = lib.nn.LSTM(cfg["inp"], cfg["hidden"], cfg["layers"])
    m.load_state_dict({k: lib.from_numpy(v.copy()) for k, v in state.items()})
    m = m.to(device)
    x = lib.from_numpy(xn).to(device)

    def train():
        m.zero_grad(set_to_none=True)
        out, _ = m(x)
        loss = (out * out).mean()
        loss.backward()
        return loss

    def forward():
        with lib.no_grad():
            return m(x)[0]
    sync = __import__("cltorch").cl.synchronize if lib_name == "cltorch" else None
    return {"train": train, "forward": forward}, sync


def run(quick=False, device="cl:0", rounds=None, profile=False, out=print):
    cfg = QUICK if quick else FULL
    rounds = rounds or (1 if quick else 5)
    target = 0.05 if quick else 0.5
    state = _state(cfg)
    xn = np.random.default_rng(0).standard_normal((cfg["seq"], cfg["batch"], cfg["inp"])).astype(np.float32)
    ours, sync = make_steps("cltorch", cfg, state, xn, device)
    ours_cpu, sync_cpu = make_steps("cltorch", cfg, state, xn, "cpu") if device != "cpu" else (None, None)
    name = (f"LSTM {cfg['layers']}x{cfg['hidden']} in {cfg['inp']} seq {cfg['seq']} b{cfg['batch']}")
    rows = []
    load = A.load_avg()
    for kind, desc in (("train", "train step (fwd+bwd)"), ("forward", "forward (no_grad)")):
        sides = {"ours": (ours[kind], sync)}
        if ours_cpu is not None:
            sides["ours cpu"] = (ours_cpu[kind], sync_cpu)
        sides.update(A.torch_sides(lambda kind=kind: make_steps("torch", cfg, state, xn)[0][kind]))
        res = A.interleaved(sides, rounds=rounds, target_s=target, warmup=2)
        A.restore_torch_threads()
        med = {k: A.median(v) * 1e3 for k, v in res.items()}
        anchors = {k: v for k, v in med.items() if k not in ("ours", "ours cpu")}
        bt = A.best_torch(res)
        r = A.round_ratio(res["ours"], res.get(bt))
        bar = "<= 1.5x torch's time" if kind == "train" else "- (reported)"
        met = (None if r is None else r <= 1.5) if kind == "train" else None
        note = f"ours on {device}"
        if "ours cpu" in med:
            note += f"; ours on cpu {med['ours cpu']:.1f} ms"
        rows.append(A.case(f"{name} {desc}", "ms", med["ours"], anchors, r, f"ours/{bt} time", bar, met,
                           note=f"{note}; load {load:.1f}; {A.cpu_note()}"))
    if profile:
        A.profile_host(ours["train"], sync, n=5, out=out)
    return rows


def suite(quick=False, device="cl:0"):
    """Rows for benchmarks/run.py."""
    return run(quick=quick, device=device)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cl:0")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args(argv)
    print(A.describe(with_tinygrad=False))
    for r in run(a.quick, a.device, a.rounds, a.profile):
        anc = ", ".join(f"{k} {v:.2f}" for k, v in r["anchors"].items())
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f} ({r['ratio_desc']})"
        print(f"{r['case']}: ours {r['ours']:.2f} ms; {anc}; ratio {ratio}; bar {r['bar']}: "
              f"{ {True: 'met', False: 'MISSED', None: '-'}[r['met']]}; {r['note']}")


if __name__ == "__main__":
    main()
