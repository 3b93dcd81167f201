"""cltorch on an OpenCL GPU against torch on the same GPU (issue 26): the bars' rows, side by side in one process.

The rows and sizes are those of the first H200 run (``../shared/gpu/bench.py``, figures in
``../shared/gpu/README.md``): the launch floor (a 1-element add), bandwidth (a + b, sums, softmax, LayerNorm), GEMM in
float32 / float16 / bfloat16, attention (forward, causal forward + backward, float16), a 3x3 convolution (forward,
forward + backward) and whole training steps (an MLP, a Transformer encoder in float32 and under bfloat16 autocast,
a small CNN). Each row gives both sides the same inputs (from numpy) and the same initial weights. The 16-bit rows'
bars (2.5, issue 27) are for matrix units: run with CLTORCH_MATRIX_UNITS=auto to use them (off in every shipped
profile until measured; ``cltorch devices`` says which GEMM design each dtype took and why).

Timing rule: after one untimed call per side (ours compiles its kernels there: the note gives that first call's
seconds), the sides alternate batches of ``iters`` calls, each batch between two synchronizations
(``cltorch.cl.synchronize()``, ``torch.cuda.synchronize()``), ``--reps`` batches per side. The table gives the best
batch's time per call (what the issue's bars read, as the H200 run did), the note the medians, the rate (GB/s,
TFLOP/s) and the largest relative difference of the results. torch runs with TF32 off (matmul and cuDNN).

torch's GPU is whatever ``torch.cuda.is_available()`` reports (CUDA, or ROCm's build of torch); without one the rows
still time ours and say "no GPU torch". On a device that is not a GPU the full-size run is skipped with a one-line
reason; ``--small`` runs every row at tiny sizes on any device (a dry run of the benchmark itself:
``benchmarks/run.py --quick`` and tests/test_benchmarks_smoke.py use it), with small models.

    python benchmarks/bench_gpu.py [--device cl:0] [--small] [--reps 7] [--only softmax,GEMM] [--json out.json]
"""
import argparse
import json
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _anchors as A  # noqa: E402


# ------------------------------------------------------------------------------------------------ sides
class Side:
    """One library on one device: ``lib`` (cltorch or torch), the device string, its synchronize, and ``put``
    (a numpy array onto the device, as a tensor of ``dtype`` when given)."""

    def __init__(self, name, lib, device, sync):
        self.name, self.lib, self.device, self.sync = name, lib, device, sync

    def put(self, a, dtype=None):
        t = self.lib.from_numpy(np.ascontiguousarray(a)).to(self.device)
        return t if dtype is None else t.to(getattr(self.lib, dtype))


def _ours(device):
    import cltorch
    return Side("ours", cltorch, device, cltorch.cl.synchronize)


def _torch_gpu(device="cuda"):
    """(torch on its GPU (CUDA or ROCm), TF32 off, the GPU's name), or (None, why). ``device="cpu"`` gives torch on
    the CPU instead (``--torch-device cpu``: a dry run of the two-sided code where no GPU torch exists)."""
    torch = A.torch()
    if torch is None:
        return None, "no torch here"
    if device == "cpu":
        return Side("torch", torch, "cpu", lambda: None), "torch on the CPU (--torch-device cpu: not a GPU figure)"
    try:
        if not torch.cuda.is_available():
            return None, "no GPU torch (torch.cuda.is_available() is False)"
    except Exception as e:  # noqa: BLE001 - a broken CUDA install is 'no GPU torch' too
        return None, f"no GPU torch ({type(e).__name__})"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return Side("torch", torch, "cuda", torch.cuda.synchronize), torch.cuda.get_device_name()


def device_kind(device):
    """("gpu" or "cpu", the device's name) of a cltorch device string."""
    import cltorch
    from cltorch import backend
    d = cltorch.device(device)
    if d.type == "cpu":
        return "cpu", "host memory (the OpenCL CPU device)"
    info = backend.list_devices()[d.index if d.index is not None else backend.default_index()]
    return ("gpu" if info.is_gpu else "cpu"), info.name


# ------------------------------------------------------------------------------------------------ rows
class Row:
    """A benchmark row: ``make(side, small) -> (fn, result)`` (``fn`` is timed; ``result()`` returns a numpy array to
    compare), ``work(small)``: units of ``rate`` per call (bytes for GB/s, flops for TFLOP/s) or None; ``bar``: the
    issue's bar on ours/torch time (None: no bar); ``iters``: calls per batch."""

    def __init__(self, name, small_name, make, iters, bar=None, rate=None, work=None, unit="ms", smoke=True):
        self.name, self.small_name, self.make, self.iters, self.bar = name, small_name, make, iters, bar
        self.rate, self.work, self.unit = rate, work, unit
        self.smoke = smoke      # False: left out of benchmarks/run.py --quick (its 16-bit kernels build for 8-40 s on a
                                # cold PoCL cache); --small runs it


_rng = np.random.default_rng(0)
_arrays = {}


def arr(shape, scale=1.0):
    """A fixed standard-normal float32 array of ``shape`` (the same object for both sides)."""
    key = (tuple(shape), scale)
    if key not in _arrays:
        _arrays[key] = (_rng.standard_normal(shape) * scale).astype(np.float32)
    return _arrays[key]


def _fresh_grad(step, t, others=()):
    for u in (t, *others):
        u.grad = None
    step()
    return t.grad.float().cpu().numpy()


def _tiny(s, small):
    x = s.put(arr((1,)))
    return (lambda: x + x), (lambda: (x + x).cpu().numpy())


def _n(small):
    return 1 << 16 if small else 1 << 26


def _pair(op):
    def make(s, small):
        a, b = s.put(arr((_n(small),))), s.put(arr((_n(small),), 0.5))
        return (lambda: op(a, b)), (lambda: op(a, b).cpu().numpy()[:4096])
    return make


def _sum(s, small):
    a = s.put(arr((_n(small),)))
    return (lambda: a.sum()), (lambda: np.array([float(a.sum())]))


def _mat(small):
    return (256, 512) if small else (8192, 4096)


def _sum_dim(dim):
    def make(s, small):
        m = s.put(arr(_mat(small)))
        return (lambda: m.sum(dim)), (lambda: m.sum(dim).cpu().numpy())
    return make


def _softmax(s, small):
    m = s.put(arr(_mat(small)))
    return (lambda: s.lib.softmax(m, dim=-1)), (lambda: s.lib.softmax(m, dim=-1).cpu().numpy()[:64])


def _layernorm(s, small):
    shape = (64, 256) if small else (32768, 1024)
    x, g = s.put(arr(shape)), s.put(arr(shape, 0.1))
    w = s.put(np.ones(shape[-1], np.float32))
    x.requires_grad_(True)
    w.requires_grad_(True)
    F = s.lib.nn.functional

    def step():
        x.grad = w.grad = None
        F.layer_norm(x, (shape[-1],), w).backward(g)
    return step, (lambda: _fresh_grad(step, x, [w])[:8])


def _gemm(n, dtype):
    def make(s, small):
        k = 128 if small else n
        a, b = s.put(arr((k, k)), dtype), s.put(arr((k, k), 0.5), dtype)
        return (lambda: a @ b), (lambda: (a @ b).float().cpu().numpy()[:256])
    return make


def _bhsd(small):
    return (1, 2, 128, 64) if small else (8, 16, 1024, 64)


def _sdpa(causal, dtype=None):
    def make(s, small):
        q, k, v = (s.put(arr(_bhsd(small), 0.5 + 0.1 * i), dtype) for i in range(3))
        F = s.lib.nn.functional
        f = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
        return f, (lambda: f().float().cpu().numpy()[0, 0])
    return make


def _sdpa_bwd(s, small):
    q, k, v = (s.put(arr(_bhsd(small), 0.5 + 0.1 * i)) for i in range(3))
    g = s.put(arr(_bhsd(small), 0.1))
    for t in (q, k, v):
        t.requires_grad_(True)
    F = s.lib.nn.functional

    def step():
        q.grad = k.grad = v.grad = None
        F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(g)
    return step, (lambda: _fresh_grad(step, k, [q, v])[0, 0])


def _nchw(small):
    return (2, 64, 8, 8) if small else (32, 64, 56, 56)


def _conv(s, small):
    x, w = s.put(arr(_nchw(small))), s.put(arr((64, 64, 3, 3), 0.05))
    f = lambda: s.lib.nn.functional.conv2d(x, w, padding=1)  # noqa: E731
    return f, (lambda: f().cpu().numpy()[0, :4])


def _conv_bwd(s, small):
    x, w, g = s.put(arr(_nchw(small))), s.put(arr((64, 64, 3, 3), 0.05)), s.put(arr(_nchw(small), 0.1))
    x.requires_grad_(True)
    w.requires_grad_(True)

    def step():
        x.grad = w.grad = None
        s.lib.nn.functional.conv2d(x, w, padding=1).backward(g)
    return step, (lambda: _fresh_grad(step, w, [x])[0, :2])


def mlp(lib, small):
    nn = lib.nn
    d, h = (64, 256) if small else (1024, 4096)
    return nn.Sequential(nn.Linear(d, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 10))


def encoder(lib, small):
    nn = lib.nn
    d, heads, ff, layers = (64, 4, 128, 2) if small else (512, 8, 2048, 4)
    return nn.TransformerEncoder(nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True), layers)


def cnn(lib, small):
    nn = lib.nn
    c = (8, 16, 32) if small else (64, 128, 256)
    return nn.Sequential(nn.Conv2d(3, c[0], 3, padding=1), nn.BatchNorm2d(c[0]), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(c[0], c[1], 3, padding=1), nn.BatchNorm2d(c[1]), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(c[1], c[2], 3, padding=1), nn.BatchNorm2d(c[2]), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c[2], 10))


def _train(build, inputs, loss="ce", autocast=None):
    """A training step (zero_grad, forward, loss, backward, AdamW step) of ``build(lib, small)``, both sides starting
    from torch's initial weights (seed 0, copied through numpy; without torch, ours from its own seed 0)."""
    def make(s, small):
        torch = A.torch()
        lib = s.lib
        ref = None
        if torch is not None:
            torch.manual_seed(0)
            ref = build(torch, small)
        if lib is torch:
            model = ref.to(s.device)
        else:           # built on the device (its initialisation needs no OpenCL CPU device), then torch's weights
            lib.manual_seed(0)
            lib.set_default_device(s.device)
            try:
                model = build(lib, small)
            finally:
                lib.set_default_device("cpu")
            if ref is not None:
                model.load_state_dict({k: lib.from_numpy(v.detach().cpu().numpy().copy())
                                       for k, v in ref.state_dict().items()})
        opt = lib.optim.AdamW(model.parameters(), lr=1e-4)
        xa, ya = inputs(small)
        X, Y = s.put(xa), s.put(ya)
        F = lib.nn.functional
        lf = F.cross_entropy if loss == "ce" else F.mse_loss
        dev_type = ("cuda" if s.device == "cuda" else "cpu") if lib is torch else "cl"
        losses = []

        def step():
            opt.zero_grad(set_to_none=True)
            if autocast is None:
                out = lf(model(X), Y)
            else:
                with lib.autocast(dev_type, dtype=getattr(lib, autocast)):
                    out = lf(model(X), Y)
            out.backward()
            opt.step()
            losses.append(out.detach())
        return step, (lambda: np.array([float(losses[0]), float(losses[-1])]))
    return make


def _labels(n):
    return np.random.default_rng(1).integers(0, 10, n).astype(np.int64)


def _mlp_inputs(small):
    b, d = (16, 64) if small else (1024, 1024)
    return arr((b, d)), _labels(b)


def _seq_inputs(small):
    shape = (2, 16, 64) if small else (32, 256, 512)
    return arr(shape), arr(shape, 0.1)


def _img_inputs(small):
    b = 4 if small else 128
    return arr((b, 3, 32, 32)), _labels(b)


N26 = 1 << 26
ROWS = [
    Row("add, 1 element (launch overhead)", None, _tiny, 2000, bar=1.5, unit="us"),
    Row(f"a + b, {N26} float32", "a + b, 65536 float32", _pair(lambda a, b: a + b), 20, bar=1.1, rate="GB/s",
        work=lambda small: 12 * _n(small)),
    Row(f"a * b + a (two ops), {N26} float32", "a * b + a (two ops), 65536 float32", _pair(lambda a, b: a * b + a), 20,
        rate="GB/s", work=lambda small: 12 * _n(small)),
    Row(f"sum, {N26} float32", "sum, 65536 float32", _sum, 20, bar=1.3, rate="GB/s", work=lambda small: 4 * _n(small)),
    Row("sum over dim 0 (columns), 8192 x 4096", "sum over dim 0 (columns), 256 x 512", _sum_dim(0), 20, bar=1.5,
        rate="GB/s", work=lambda small: 4 * np.prod(_mat(small))),
    Row("sum over dim 1 (rows), 8192 x 4096", "sum over dim 1 (rows), 256 x 512", _sum_dim(1), 20, bar=1.5,
        rate="GB/s", work=lambda small: 4 * np.prod(_mat(small))),
    Row("softmax rows, 8192 x 4096", "softmax rows, 256 x 512", _softmax, 20, bar=1.5, rate="GB/s",
        work=lambda small: 8 * np.prod(_mat(small))),
    Row("LayerNorm fwd+bwd 32768 x 1024", "LayerNorm fwd+bwd 64 x 256", _layernorm, 10, bar=1.5),
    Row("GEMM float32 4096^3 (torch: no TF32)", "GEMM float32 128^3", _gemm(4096, None), 10, bar=1.5, rate="TFLOP/s",
        work=lambda small: 2 * (128 if small else 4096) ** 3),
    Row("GEMM float32 1024^3 (torch: no TF32)", "GEMM float32 128^3 (the 1024 row)", _gemm(1024, None), 30, bar=2.0,
        rate="TFLOP/s", work=lambda small: 2 * (128 if small else 1024) ** 3),
    Row("GEMM float16 4096^3", "GEMM float16 128^3", _gemm(4096, "float16"), 10, bar=2.5, rate="TFLOP/s",
        work=lambda small: 2 * (128 if small else 4096) ** 3, smoke=False),
    Row("GEMM bfloat16 4096^3", "GEMM bfloat16 128^3", _gemm(4096, "bfloat16"), 10, bar=2.5, rate="TFLOP/s",
        work=lambda small: 2 * (128 if small else 4096) ** 3),
    Row("SDPA fwd float32 B8 H16 S1024 D64", "SDPA fwd float32 B1 H2 S128 D64", _sdpa(False), 10, bar=1.5,
        rate="TFLOP/s", work=lambda small: 4 * np.prod(_bhsd(small)) * _bhsd(small)[2]),
    Row("SDPA fwd float32 causal B8 H16 S1024 D64", "SDPA fwd float32 causal B1 H2 S128 D64", _sdpa(True), 10,
        rate="TFLOP/s", work=lambda small: 2 * np.prod(_bhsd(small)) * _bhsd(small)[2]),
    Row("SDPA fwd+bwd float32 causal B8 H16 S1024 D64", "SDPA fwd+bwd float32 causal B1 H2 S128 D64", _sdpa_bwd, 5,
        bar=2.0, rate="TFLOP/s", work=lambda small: 7 * np.prod(_bhsd(small)) * _bhsd(small)[2]),
    Row("SDPA fwd float16 B8 H16 S1024 D64", "SDPA fwd float16 B1 H2 S128 D64", _sdpa(False, "float16"), 10, bar=2.5,
        rate="TFLOP/s", work=lambda small: 4 * np.prod(_bhsd(small)) * _bhsd(small)[2], smoke=False),
    Row("conv2d fwd float32 32x64x56x56, 3x3, 64->64", "conv2d fwd float32 2x64x8x8, 3x3, 64->64", _conv, 10, bar=2.0,
        rate="TFLOP/s", work=lambda small: 2 * np.prod(_nchw(small)) * 64 * 9),
    Row("conv2d fwd+bwd float32 32x64x56x56, 3x3, 64->64", "conv2d fwd+bwd float32 2x64x8x8, 3x3, 64->64", _conv_bwd, 5,
        bar=2.0, rate="TFLOP/s", work=lambda small: 6 * np.prod(_nchw(small)) * 64 * 9),
    Row("MLP train step 1024-4096-4096-10, batch 1024, AdamW", "MLP train step 64-256-256-10, batch 16, AdamW",
        _train(mlp, _mlp_inputs), 10, bar=1.5),
    Row("Transformer encoder 4x(d512 h8 ff2048) train step, batch 32 x seq 256, MSE",
        "Transformer encoder 2x(d64 h4 ff128) train step, batch 2 x seq 16, MSE", _train(encoder, _seq_inputs, "mse"),
        5, bar=2.0),
    Row("Transformer bf16 autocast train step, same model and batch",
        "Transformer bf16 autocast train step (the small model)", _train(encoder, _seq_inputs, "mse", "bfloat16"), 5,
        bar=2.5, smoke=False),
    Row("CNN (3 conv+BN) train step, batch 128 x 3x32x32", "CNN (3 conv+BN, 8-16-32 channels) train step, batch 4",
        _train(cnn, _img_inputs), 10, bar=2.0),
]


# ------------------------------------------------------------------------------------------------ timing
def batches(fn, sync, iters, reps, between=None):
    """Seconds per call of each of ``reps`` batches of ``iters`` calls, each between two ``sync()``; ``between()``
    runs before each batch (the other side's batch, so both see the same conditions)."""
    out = []
    for _ in range(reps):
        if between is not None:
            between()
        sync()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        out.append((time.perf_counter() - t0) / iters)
    return out


def _rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / (np.max(np.abs(b)) + 1e-30))


def measure(row, ours, theirs, small, reps):
    """{"ours": [s per call per batch], "torch": [...] or None, "first_s", "rel"}; raises what a side raises."""
    iters = max(1, row.iters // (10 if small else 1)) if row.unit != "us" else (200 if small else row.iters)
    fo, ro = row.make(ours, small)
    t0 = time.perf_counter()
    fo()
    ours.sync()
    first = time.perf_counter() - t0
    res = {"first_s": first, "torch": None, "rel": None}
    if theirs is None:
        res["ours"] = batches(fo, ours.sync, iters, reps)
        return res
    ft, rt = row.make(theirs, small)
    ft()
    theirs.sync()
    got_t = []
    res["ours"] = batches(fo, ours.sync, iters, reps,
                          between=lambda: got_t.extend(batches(ft, theirs.sync, iters, 1)))
    res["torch"] = got_t
    res["rel"] = _rel(ro(), rt())
    return res


def run(device="cl:0", small=False, reps=7, only=None, out=print, smoke=False, torch_device="cuda"):
    """The rows as ``_anchors.case`` dicts (see the module docstring). Full size only on a GPU (else one row saying
    why); ``small``: every row at tiny sizes on any device; ``smoke``: without the rows kept out of the smoke run."""
    kind, name = device_kind(device)
    if kind != "gpu" and not small:
        why = f"skipped: {device} is {name}, not a GPU (--small runs the rows at tiny sizes on any device)"
        out(why)
        return [A.case("GPU rows (issue 26)", "ms", None, note=why)]
    theirs, tname = _torch_gpu(torch_device)
    why_torch = None
    if theirs is None:
        tname, why_torch = None, tname
    out(f"ours: {name} ({device}); torch: {tname or why_torch}; reps {reps}{'; small sizes' if small else ''}")
    ours = _ours(device)
    rows = []
    for row in ROWS:
        label = (row.small_name or row.name) if small else row.name
        if only and not any(o.lower() in label.lower() for o in only) or smoke and not row.smoke:
            continue
        try:
            m = measure(row, ours, theirs, small, reps)
        except Exception as e:  # noqa: BLE001 - a row's failure is its result
            note = f"ERROR {type(e).__name__}: {str(e)[:300]}"
            out(f"{label}: {note}\n{traceback.format_exc()[-1500:]}")
            rows.append(A.case(label, row.unit, None, note=note))
            continue
        scale = 1e6 if row.unit == "us" else 1e3
        ob, om = min(m["ours"]) * scale, statistics.median(m["ours"]) * scale
        notes = [f"median ours {om:.4g}"]
        anchors, ratio, met = {}, None, None
        if m["torch"]:
            tb, tm = min(m["torch"]) * scale, statistics.median(m["torch"]) * scale
            anchors["torch"] = tb
            ratio = ob / tb
            notes[0] += f", torch {tm:.4g} {row.unit} (ratio {om / tm:.2f})"
            met = None if row.bar is None or theirs.device == "cpu" else ratio <= row.bar    # bars read a GPU
            notes.append(f"max rel diff {m['rel']:.1e}")
        else:
            notes.append(why_torch)
        if row.work is not None:
            w = float(row.work(small))
            div = 1e9 if row.rate == "GB/s" else 1e12
            notes.append(f"{w / (ob / scale) / div:.4g} {row.rate}" +
                         (f" vs {w / (anchors['torch'] / scale) / div:.4g}" if anchors else ""))
        notes.append(f"first call {m['first_s']:.2f} s")
        case = A.case(label, row.unit, ob, anchors, ratio, "ours/torch time, best batch",
                      None if row.bar is None else f"<= {row.bar}x torch", met, "; ".join(notes))
        out(A.format_row(case))
        rows.append(case)
    return rows


def suite(quick=False, device="cl:0"):
    """Rows for benchmarks/run.py: the full-size rows on a GPU (one row saying why elsewhere); ``quick`` is the
    small dry run, on any device, one batch each, without the three 16-bit rows whose kernels build slowly on PoCL."""
    return run(device, small=quick, reps=1 if quick else 7, out=lambda *a: None, smoke=quick)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cl:0")
    ap.add_argument("--small", action="store_true", help="every row at tiny sizes, on any device (a dry run)")
    ap.add_argument("--quick", action="store_true",
                    help="run.py's smoke mode: --small, one batch, without the slow-building 16-bit rows")
    ap.add_argument("--reps", type=int, default=7, help="batches per side (the table's figure is the best)")
    ap.add_argument("--only", default=None, help="comma-separated substrings of row names")
    ap.add_argument("--json", default=None, help="also write the rows as JSON to this file")
    ap.add_argument("--torch-device", default="cuda", help="cpu: torch on the CPU (a dry run of the comparison)")
    a = ap.parse_args(argv)
    small = a.small or a.quick
    reps = 1 if a.quick else a.reps
    only = [s.strip() for s in a.only.split(",")] if a.only else None
    print(A.describe(with_tinygrad=False), f"| load {A.load_avg():.1f}")
    rows = run(a.device, small, reps, only, smoke=a.quick, torch_device=a.torch_device)
    for r in rows:
        r["bench"] = "gpu"
    from run import table
    print(table(rows))
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
