"""Run the same training steps of an example model on two devices and print how far they drift apart.

Both sides start from the same initial weights (made once, from ``--seed``), see the same batches in the same
order (drawn with numpy from ``--seed``) and draw dropout masks from the same seed (cltorch's Philox streams do
not depend on the device or its work-group sizes). After every step the script prints the largest difference in
the loss and in each parameter and buffer (BatchNorm running statistics included).

    python examples/compare_devices.py [--model digits|charlm] [--steps 20] [--devices cpu cl:0]
    python examples/compare_devices.py --profile               # side B under a deliberately different profile
    python examples/compare_devices.py --profile my.toml       # ... or under this profile file
    python examples/compare_devices.py --vs-torch              # cltorch against PyTorch (dropout off)
    python examples/compare_devices.py --devices cl:0 cl:1 --f64-reference --steps 100   # vs float32 rounding

- ``--devices A B``: any two of ``cpu``, ``cl``, ``cl:N`` (on a multi-GPU machine, e.g. ``cl:0 cl:1``).
- ``--profile [PATH]``: device profiles are read once per process, so side B runs in a subprocess with
  ``CLTORCH_PROFILE=PATH``; without PATH the script writes a temporary profile whose elementwise and reduction
  work-group sizes, reduction chunking, GEMM, convolution and attention tiles all differ from the device's own
  (hence other reduction orders). On a machine whose ``cpu`` and ``cl:0`` are one and the same PoCL device this is
  what makes the comparison test something.
- ``--vs-torch`` (where torch is importable): loads the same initial weights into the same model written in
  PyTorch (the example's source with its imports pointed at torch), turns dropout off on both sides, and prints
  the per-step relative loss difference against PyTorch on its CPU. Wanted: <= 1e-5 at step 1 and <= 1e-3 at
  step 20; the script exits 1 when a step it ran misses those. ``--f64`` also runs PyTorch in float64 and prints
  how far each float32 side is from it (on the digits CNN both float32 runs leave float64 by about 3e-4 at step 8
  and 2e-3 by step 20: a ReLU/max-pool decision flips on a last-bit difference, and AdamW carries it on).
- ``--f64-reference``: runs both sides a second time in float64 on the same devices (the same initial weights
  and batches, widened; the same dropout masks, since a Philox Bernoulli draw compares one 32-bit word per element
  whatever the dtype) and, where torch is importable, PyTorch in float32 and float64 with cltorch's masks injected
  into its ``nn.Dropout``. Per step it prints the A-vs-B float32 loss difference next to each side's
  float32-vs-float64 distance, then the running maxima at steps 1, 10, 20, 50, 100. It exits 1 unless (1) the
  float64 runs (A, B and PyTorch) agree to 1e-10 relative at every step and (2) at step 1 each float32 loss is
  within 4 float32 ulps of its float64 loss. Given (1), the A-vs-B difference is at most the sum of the two
  sides' float32 drifts at every step: as large as float32 rounding makes it and no larger. A ratio to one side's
  drift is no criterion: the drift grows by discrete flips (on the digits CNN a max-pool near-tie, two values
  3e-8 apart, decided the other way by last-bit differences of the size PyTorch's float32 has too), and which
  float32 run flips first is chance. Dropout stays on unless ``--no-dropout``.

The optimizer is the example's AdamW (the char-LM with its param groups and ``clip_grad_norm_(1.0)``), at a
constant learning rate.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))


# ------------------------------------------------------------------------------------------------ models
def example_module(name, lib):
    """``examples/<name>.py`` as a module; for ``lib == "torch"`` with its imports pointed at torch."""
    key = f"_compare_{lib}_{name}"
    if key in sys.modules:
        return sys.modules[key]
    path = HERE / f"{name}.py"
    src = path.read_text()
    if lib == "torch":
        for a, b in (("import cltorch as torch", "import torch"), ("import cltorch.nn as nn", "import torch.nn as nn"),
                     ("import cltorch.nn.functional as F", "import torch.nn.functional as F"),
                     ("from cltorch.", "from torch.")):
            src = src.replace(a, b)
    mod = types.ModuleType(key)
    mod.__file__ = str(path)
    sys.modules[key] = mod
    exec(compile(src, str(path), "exec"), mod.__dict__)
    return mod


def _lib(lib):
    if lib == "torch":
        import torch
        return torch
    import cltorch
    return cltorch


def build(model_name, lib, cfg):
    ex = example_module("train_digits" if model_name == "digits" else "train_charlm", lib)
    if model_name == "digits":
        return ex, ex.DigitsCNN()
    return ex, ex.CharTransformer(cfg["vocab"], cfg["d_model"], cfg["heads"], cfg["layers"], cfg["block"])


def make_batches(model_name, steps, seed, cfg):
    """``steps`` (x, y) numpy batches, and the config completed with data-dependent fields (vocab)."""
    rng = np.random.default_rng(seed)
    if model_name == "digits":
        ex = example_module("train_digits", "cltorch")
        xtr, _, ytr, _ = ex.load_digits_split(seed)
        bs = cfg["batch_size"]
        epochs = -(-steps * bs // len(xtr))
        perm = np.concatenate([rng.permutation(len(xtr)) for _ in range(epochs)])
        out = []
        for s in range(steps):
            idx = perm[s * bs:(s + 1) * bs]
            out.append((np.ascontiguousarray(xtr[idx]), np.ascontiguousarray(ytr[idx])))
        return out, cfg
    ex = example_module("train_charlm", "cltorch")
    text = ex.load_text()
    vocab = sorted(set(text))
    stoi = {c: i for i, c in enumerate(vocab)}
    data = np.array([stoi[c] for c in text[: int(0.9 * len(text))]], dtype=np.int64)
    cfg = dict(cfg, vocab=len(vocab))
    out = []
    for _ in range(steps):
        st = rng.integers(0, len(data) - cfg["block"] - 1, cfg["batch_size"])
        out.append((np.stack([data[s:s + cfg["block"]] for s in st]), np.stack([data[s + 1:s + 1 + cfg["block"]]
                                                                                 for s in st])))
    return out, cfg


def initial_state(model_name, cfg, seed):
    """The initial weights, made once with cltorch on the cpu from ``seed``: {name: numpy array}."""
    import cltorch
    cltorch.manual_seed(seed)
    _, model = build(model_name, "cltorch", cfg)
    return {k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()}


def _as_f64(v):
    return v.astype(np.float64) if v.dtype == np.float32 else v


def run_side(lib, device, model_name, cfg, init, batches, seed, dropout, f64=False):
    """Train ``len(batches)`` steps; returns [(loss, {name: numpy array}) after each step]. ``f64``: weights,
    optimizer state and inputs in float64 (the same initial weights and batches, widened; dropout masks are the
    same, since a Philox Bernoulli draw compares one 32-bit word per element whatever the dtype)."""
    L = _lib(lib)
    ex, model = build(model_name, lib, cfg)
    if f64:
        init = {k: _as_f64(v) for k, v in init.items()}
        batches = [(_as_f64(x), y) for x, y in batches]
        model = model.to(dtype=L.float64)
    model.load_state_dict({k: L.from_numpy(np.array(v)) for k, v in init.items()})
    for m in model.modules():
        if isinstance(m, ex.nn.Dropout):
            if dropout and lib == "torch":
                _inject_cltorch_masks(m)
            elif not dropout:
                m.p = 0.0
    dev = L.device(device)
    model = model.to(dev)
    model.train()
    F = ex.F
    if model_name == "digits":
        opt = L.optim.AdamW(model.parameters(), lr=cfg["lr"], weight_decay=1e-2)
    else:
        opt = L.optim.AdamW(ex.param_groups(model, 0.1), lr=cfg["lr"], betas=(0.9, 0.99))
    L.manual_seed(seed)
    if lib == "torch" and dropout:
        import cltorch
        cltorch.manual_seed(seed)             # the injected masks: cltorch's own Philox stream from the same seed
    records = []
    for xn, yn in batches:
        x, y = L.from_numpy(xn).to(dev), L.from_numpy(yn).to(dev)
        out = model(x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if model_name == "charlm":
            ex.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        state = {k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()}
        records.append((float(loss.item()), state))
    return records


def _inject_cltorch_masks(module):
    """Makes a torch ``nn.Dropout`` apply cltorch's masks: each call draws ``bernoulli_(1 - p)`` of the input's
    shape from cltorch's global Philox generator (on the host, in float32; the draw does not depend on the dtype
    or device) and multiplies by ``mask * (1 / (1 - p))`` in the input's dtype, as ``cltorch.nn.functional.dropout``
    does. The caller seeds cltorch before the run, so torch sees the masks a cltorch run from that seed sees."""
    import cltorch
    import torch
    p = float(module.p)
    module.p = 0.0                            # torch's own dropout off; the hook applies cltorch's mask instead

    def hook(mod, args, out):
        if not mod.training or p == 0.0:
            return out
        x = args[0]
        mask = cltorch.empty(tuple(x.shape), dtype=cltorch.float32).bernoulli_(1.0 - p).numpy()
        return x * (torch.from_numpy(mask).to(x.dtype) * (1.0 / (1.0 - p)))

    module.register_forward_hook(hook)


def _torch_f64(model_name, cfg, init, batches, seed, dropout=False):
    """The same run in PyTorch with float64 weights and inputs (a reference for rounding); with ``dropout``,
    cltorch's masks are injected (see ``_inject_cltorch_masks``)."""
    import torch
    prev = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return run_side("torch", "cpu", model_name, cfg, init, batches, seed, dropout, f64=True)
    finally:
        torch.set_default_dtype(prev)


# ------------------------------------------------------------------------------------------------ profiles
def _runtime_of(device):
    """The OpenCL runtime that runs ``device``'s kernels ("cpu": the host's OpenCL CPU device)."""
    import cltorch
    from cltorch.backend import cpu_index, default_index, runtime
    d = cltorch.device(device)
    if d.type == "cpu":
        return runtime(cpu_index())
    return runtime(default_index() if d.index is None else d.index)


def _other(v, choices):
    """A value from ``choices`` different from ``v`` (the first one that differs)."""
    for c in choices:
        if c != v:
            return c
    return v


def _toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return repr(v)


def different_profile(device):
    """TOML text of a profile for ``device`` whose launch geometry differs from the device's merged profile:
    elementwise/reduction local sizes and vector widths; reductions, loss sums and norm weight-gradients split into
    small chunks (so partial sums add up in another order); GEMM, convolution and attention tiles (still valid
    choices for the same kernels)."""
    prof = _runtime_of(device).profile
    g = lambda t, k, dflt: prof.get_value(t, k, dflt)  # noqa: E731
    t = {}
    t["elementwise"] = {"local_size": _other(g("elementwise", "local_size", 64), [64, 32]),
                        "elems_per_item": _other(g("elementwise", "elems_per_item", 1), [4, 1]),
                        "vector_width": _other(g("elementwise", "vector_width", 1), [4, 1])}
    # small chunks and a high one-pass threshold split reductions into partial sums (another summation order)
    t["reduction"] = {"local_size": _other(g("reduction", "local_size", 64), [64, 32]),
                      "chunk": _other(g("reduction", "chunk", 4096), [64, 128]),
                      "min_outputs_one_pass": _other(g("reduction", "min_outputs_one_pass", 256), [1 << 16, 1 << 15])}
    t["loss"] = {"reduce_chunk": _other(g("loss", "reduce_chunk", 4096), [16, 32])}
    t["norm"] = {"wgrad_rows": _other(g("norm", "wgrad_rows", 256), [16, 32])}
    gm = dict(prof.get("gemm", {}))
    if gm.get("design", "gpu") == "gpu":          # the GPU GEMM design: a small tile (cltorch/ops/gemm/plan.py)
        rows = [{"bm": 32, "bn": 32, "bk": 8, "tm": 4, "tn": 4, "vw": 4}]
    else:
        vw = (gm.get("sizes") or [{}])[0].get("vw", 8)
        rows = [{"mr": 4, "nv": 1, "vw": vw, "lx": 4, "ly": 4, "a_mode": "packed", "b_mode": "packed"}]
    t["gemm"] = {"sizes": rows, "sizes_f64": [dict(r, vw=max(1, r.get("vw", 2) // 2)) if "vw" in r else r
                                             for r in rows]}
    t["conv"] = {"mr": _other(g("conv", "mr", 4), [2, 4]), "local_size": _other(g("conv", "local_size", 16), [8, 16]),
                 "wgrad_mr": _other(g("conv", "wgrad_mr", 4), [2, 4])}
    svw = int(g("sdpa", "vector_width", 4))
    t["sdpa"] = {"block_m": _other(g("sdpa", "block_m", 1), [1, 2]),
                 "block_n": _other(g("sdpa", "block_n", 16), [2 * svw, 4 * svw]),
                 "bwd_block_n": _other(g("sdpa", "bwd_block_n", 4), [svw, 2 * svw]),
                 "local_size": _other(g("sdpa", "local_size", 64), [8, 16])}
    t["optim"] = {"local_size": _other(g("optim", "local_size", g("elementwise", "local_size", 64)), [32, 64])}
    lines = ["# written by examples/compare_devices.py: a deliberately different launch geometry"]
    for name, vals in t.items():
        lines.append(f"\n[{name}]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in vals.items()]
    return "\n".join(lines) + "\n"


def _save_records(path, records):
    arrs = {"__loss__": np.array([r[0] for r in records])}
    for i, (_, st) in enumerate(records):
        for k, v in st.items():
            arrs[f"{i}/{k}"] = v
    np.savez(path, **arrs)


def _load_records(path):
    z = np.load(path)
    losses = z["__loss__"]
    recs = [(float(loss), {}) for loss in losses]
    for key in z.files:
        if key != "__loss__":
            i, name = key.split("/", 1)
            recs[int(i)][1][name] = z[key]
    return recs


def run_side_subprocess(device, model_name, cfg, init, batches, seed, dropout, profile_path):
    """Side B in a fresh process under ``CLTORCH_PROFILE=profile_path`` (profiles load once per process)."""
    with tempfile.TemporaryDirectory(prefix="cltorch-compare-") as tmp:
        inp, outp = os.path.join(tmp, "in.npz"), os.path.join(tmp, "out.npz")
        arrs = {f"init/{k}": v for k, v in init.items()}
        for i, (x, y) in enumerate(batches):
            arrs[f"x/{i}"], arrs[f"y/{i}"] = x, y
        np.savez(inp, **arrs)
        spec = json.dumps({"device": device, "model": model_name, "cfg": cfg, "seed": seed, "dropout": dropout,
                           "n": len(batches), "in": inp, "out": outp})
        env = dict(os.environ, CLTORCH_PROFILE=str(profile_path))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE.parent), env.get("PYTHONPATH")) if p)
        r = subprocess.run([sys.executable, __file__, "--side-b", spec], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"side B failed:\n{r.stderr[-3000:]}")
        info = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
        return _load_records(outp), info


def _side_b_main(spec):
    s = json.loads(spec)
    z = np.load(s["in"])
    init = {k[5:]: z[k] for k in z.files if k.startswith("init/")}
    batches = [(z[f"x/{i}"], z[f"y/{i}"]) for i in range(s["n"])]
    recs = run_side("cltorch", s["device"], s["model"], s["cfg"], init, batches, s["seed"], s["dropout"])
    _save_records(s["out"], recs)
    rt = _runtime_of(s["device"])
    print(f"side B ran with profile {rt.profile.name} (sources: {', '.join(rt.profile.sources)})")


# ------------------------------------------------------------------------------------------------ report
def _maxdiff(a, b):
    if a.shape != b.shape:
        return float("inf")
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))


def report(recs_a, recs_b, label_a, label_b, per_param=True, out=print):
    """Prints one block per step; returns [(abs loss diff, rel loss diff, max param diff)] per step."""
    rows = []
    for i, ((la, sa), (lb, sb)) in enumerate(zip(recs_a, recs_b), 1):
        dl = abs(la - lb)
        rel = dl / max(abs(lb), 1e-30)
        diffs = {k: _maxdiff(sa[k], sb[k]) for k in sa if k in sb}
        worst = max(diffs.items(), key=lambda kv: kv[1]) if diffs else ("-", 0.0)
        out(f"step {i:3d}  loss {label_a} {la:.7f}  {label_b} {lb:.7f}  |diff| {dl:.2e} (rel {rel:.2e})  "
            f"max |param diff| {worst[1]:.2e} ({worst[0]})")
        if per_param:
            items = [f"{k} {v:.1e}" for k, v in diffs.items()]
            for j in range(0, len(items), 4):
                out("          " + ", ".join(items[j:j + 4]))
        rows.append((dl, rel, worst[1]))
    return rows


F64_AGREE = 1e-10          # float64 runs of the two sides: relative loss difference allowed at any step
LOCAL_ULPS = 4             # step 1 (before any max-pool/ReLU decision can flip): float32 loss within 4 ulps of f64


def _rel(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def f64_reference(ra, rb, ra64, rb64, rt=None, rt64=None, labels=("A", "B"), out=print):
    """Per-step float32 reference for an A-vs-B comparison. ``ra``/``rb``: the float32 runs, ``ra64``/``rb64``
    the same runs in float64 on the same devices, ``rt``/``rt64`` optionally PyTorch float32/float64 (same masks).
    Prints one line per step and returns (ok, rows) with rows[i] = dict of the relative loss differences.

    Criterion (``ok``): (1) the two float64 runs (and PyTorch's, where given) agree to ``F64_AGREE`` relative at
    every step: the devices compute the same float64 trajectory, so no kernel differs by more than rounding;
    (2) at step 1 each float32 loss is within ``LOCAL_ULPS`` float32 ulps of its float64 loss (a local bound,
    before training can amplify anything).
    Given (1), A-vs-B (float32) is at most A's plus B's float32-vs-float64 distance at every step (the triangle
    inequality through the common float64 run): the cross-device difference is as large as float32 rounding of
    each side makes it, no larger. The per-step ratio to either side alone is not a criterion: a single max-pool
    near-tie or ReLU decided by a last-bit difference sends a float32 run away from float64 at a step no rounding
    analysis predicts, after which AdamW carries the difference on (digits CNN with dropout: a max-pool near-tie
    at step 18, two values 3e-8 apart, flipped both vendors' float32 runs and not PyTorch's on one state of the
    code; on the next only Intel's float32 run left float64, at step 19)."""
    la, lb = labels
    rows = []
    ok = True
    for i, (xa, xb, ya, yb) in enumerate(zip(ra, rb, ra64, rb64)):
        row = {"cross": _rel(xa[0], xb[0]), "a": _rel(xa[0], ya[0]), "b": _rel(xb[0], yb[0]),
               "f64": _rel(ya[0], yb[0])}
        if rt is not None:
            row["torch"] = _rel(rt[i][0], rt64[i][0])
            row["torch64"] = _rel(ya[0], rt64[i][0])
        rows.append(row)
        line = (f"step {i + 1:3d}  loss f64 {ya[0]:.8f}  {la} vs {lb} (f32) {row['cross']:.2e}  "
                f"{la} f32-vs-f64 {row['a']:.2e}  {lb} f32-vs-f64 {row['b']:.2e}  {la} vs {lb} (f64) {row['f64']:.1e}")
        if "torch" in row:
            line += f"  torch f32-vs-f64 {row['torch']:.2e}  {la} vs torch (f64) {row['torch64']:.1e}"
        out(line)
        ok &= row["f64"] <= F64_AGREE and row.get("torch64", 0.0) <= F64_AGREE
    ulp = LOCAL_ULPS * 2.0 ** -23
    ok &= rows[0]["a"] <= ulp and rows[0]["b"] <= ulp
    env = {k: np.maximum.accumulate([r[k] for r in rows]) for k in rows[0]}
    out("largest relative loss difference up to step s (float32 differences grow by discrete flips, so the running "
        "maximum, not one step's value):")
    for s_ in sorted({s_ for s_ in (1, 10, 20, 50, 100) if s_ <= len(rows)} | {len(rows)}):
        t = (f"  torch f32-vs-f64 {env['torch'][s_ - 1]:.2e}  {la} vs torch (f64) {env['torch64'][s_ - 1]:.1e}"
             if "torch" in env else "")
        out(f"  up to step {s_:3d}: {la} vs {lb} {env['cross'][s_ - 1]:.2e}  {la} f32-vs-f64 {env['a'][s_ - 1]:.2e}  "
            f"{lb} f32-vs-f64 {env['b'][s_ - 1]:.2e}  {la} vs {lb} (f64) {env['f64'][s_ - 1]:.1e}{t}")
    worst64 = max(max(r["f64"], r.get("torch64", 0.0)) for r in rows)
    out(f"float64 {la} vs {lb}" + (" vs torch" if rt is not None else "") +
        f": largest relative loss difference {worst64:.1e} (want <= {F64_AGREE:.0e}); step 1 "
        f"float32-vs-float64: {la} {rows[0]['a']:.1e}, {lb} {rows[0]['b']:.1e} (want <= {ulp:.1e}, "
        f"{LOCAL_ULPS} ulps): {'OK' if ok else 'NOT MET'}")
    return ok, rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=["digits", "charlm"], default="digits")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--devices", nargs=2, default=["cpu", "cl:0"], metavar=("A", "B"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", nargs="?", const="auto", default=None,
                    help="run side B under this profile file (no value: a generated, deliberately different one)")
    ap.add_argument("--vs-torch", action="store_true", help="compare side B (cltorch) against PyTorch on its CPU")
    ap.add_argument("--f64", action="store_true",
                    help="with --vs-torch: also run torch in float64 and print each float32 side's distance to it")
    ap.add_argument("--f64-reference", action="store_true",
                    help="also run both sides in float64 and print the cross-device difference next to each side's "
                         "float32-vs-float64 distance (exit 1 when the float64 runs disagree)")
    ap.add_argument("--no-dropout", action="store_true", help="turn dropout off (always off with --vs-torch)")
    ap.add_argument("--quiet-params", action="store_true", help="print only the per-step summary line")
    ap.add_argument("--batch-size", type=int, default=None, help="default: 64 (digits), 32 (charlm)")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--side-b", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.side_b:
        return _side_b_main(a.side_b)

    cfg = {"batch_size": a.batch_size or (64 if a.model == "digits" else 32), "lr": a.lr, "block": a.block,
           "d_model": a.d_model, "heads": a.heads, "layers": a.layers}
    batches, cfg = make_batches(a.model, a.steps, a.seed, cfg)
    init = initial_state(a.model, cfg, a.seed)
    dropout = not (a.no_dropout or a.vs_torch)
    dev_a, dev_b = a.devices
    import cltorch
    print(f"model {a.model}, {a.steps} steps, seed {a.seed}, dropout {'on' if dropout else 'off'}; "
          f"{sum(v.size for k, v in init.items() if 'running' not in k and 'num_batches' not in k):,} values in "
          f"the state dict")

    if a.vs_torch:
        try:
            import torch  # noqa: F401
        except ImportError:
            print("--vs-torch needs torch importable in this Python (pip install torch==2.13.0)")
            return 2
        print(f"A = torch {torch.__version__} on cpu, B = cltorch on {dev_b} "
              f"({cltorch.cl.get_device_name(dev_b) if dev_b != 'cpu' else 'host'})")
        ra = run_side("torch", "cpu", a.model, cfg, init, batches, a.seed, False)
        rb = run_side("cltorch", dev_b, a.model, cfg, init, batches, a.seed, False)
        rows = report(ra, rb, "torch", "cltorch", per_param=not a.quiet_params)
        s1 = rows[0][1]
        s20 = rows[19][1] if len(rows) >= 20 else None
        ok = s1 <= 1e-5 and (s20 is None or s20 <= 1e-3)
        if a.f64:
            r64 = [r[0] for r in _torch_f64(a.model, cfg, init, batches, a.seed)]
            print("relative loss difference to torch in float64 (how far float32 rounding alone moves each side):")
            for i, (x64, x32, xcl) in enumerate(zip(r64, ra, rb), 1):
                print(f"step {i:3d}  torch float64 {x64:.8f}  torch float32 {abs(x32[0] - x64) / abs(x64):.2e}  "
                      f"cltorch float32 {abs(xcl[0] - x64) / abs(x64):.2e}")
        print(f"relative loss difference: step 1 {s1:.2e} (want <= 1e-5)" +
              (f", step 20 {s20:.2e} (want <= 1e-3)" if s20 is not None else "") +
              f": {'OK' if ok else 'NOT MET'}")
        return 0 if ok else 1

    print(f"A = cltorch on {dev_a}, B = cltorch on {dev_b}")
    ra = run_side("cltorch", dev_a, a.model, cfg, init, batches, a.seed, dropout)
    if a.f64_reference:
        if a.profile:
            print("--f64-reference runs both sides in this process: leave out --profile")
            return 2
        rb = run_side("cltorch", dev_b, a.model, cfg, init, batches, a.seed, dropout)
        ra64 = run_side("cltorch", dev_a, a.model, cfg, init, batches, a.seed, dropout, f64=True)
        rb64 = run_side("cltorch", dev_b, a.model, cfg, init, batches, a.seed, dropout, f64=True)
        rt = rt64 = None
        try:
            import torch
        except ImportError:
            print("(torch not importable: no PyTorch float32 column)")
        else:
            rt = run_side("torch", "cpu", a.model, cfg, init, batches, a.seed, dropout)
            rt64 = _torch_f64(a.model, cfg, init, batches, a.seed, dropout)
            print(f"PyTorch {torch.__version__} float32 against cltorch on {dev_a} (float32), step 1: relative loss "
                  f"difference {_rel(rt[0][0], ra[0][0]):.1e} (the same masks: {'yes' if dropout else 'no dropout'})")
        ok, _ = f64_reference(ra, rb, ra64, rb64, rt, rt64, labels=(dev_a, dev_b))
        return 0 if ok else 1
    if a.profile:
        path = a.profile
        tmpf = None
        if path == "auto":
            tmpf = tempfile.NamedTemporaryFile("w", suffix=".toml", prefix="cltorch-other-profile-", delete=False)
            tmpf.write(different_profile(dev_b))
            tmpf.close()
            path = tmpf.name
            print(f"side B runs under a generated profile ({path}):")
            print("    " + Path(path).read_text().strip().replace("\n", "\n    "))
        try:
            rb, info = run_side_subprocess(dev_b, a.model, cfg, init, batches, a.seed, dropout, path)
        finally:
            if tmpf is not None:
                os.unlink(tmpf.name)
        print(info)
    else:
        rb = run_side("cltorch", dev_b, a.model, cfg, init, batches, a.seed, dropout)
    rows = report(ra, rb, dev_a, dev_b + (" (other profile)" if a.profile else ""), per_param=not a.quiet_params)
    worst = max(r[2] for r in rows)
    bad = [i for i, r in enumerate(rows, 1) if not math.isfinite(r[0])]
    print(f"largest parameter difference over {len(rows)} steps: {worst:.2e}; loss difference at the last step "
          f"{rows[-1][0]:.2e}" + (f"; non-finite at steps {bad}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
