"""``cltorch.compile`` (issue 16, item 2): training steps compiled against the same steps eager, and PyTorch CPU
eager, side by side in one run; and the kernel count of a compiled 30-op pointwise chain.

- MLP 784-256-256-10 (ReLU), batch 128, SGD: ``benchmarks/bench_mlp.py``'s step (``zero_grad; cross_entropy;
  backward; step``), eager, compiled (``cltorch.compile(step)``), and torch eager.
- digits CNN (``examples/train_digits.py``, batch 64 of random 8x8 images, AdamW) and char-LM
  (``examples/train_charlm.py``'s CharTransformer, d128 L3 T128 b32 as ``bench_train.py``, clip, AdamW): eager
  and compiled. The digits model keeps its dropout (0.25): the masks' Philox offsets are re-derived per replay
  from the generator, as eager draws them.
- a 30-op pointwise chain on 1,000 floats (``sin, *1.01, +0.25`` ten times) under ``no_grad``: kernels per
  compiled call against 30 eager launches, and the time per call; and the same chain's forward and backward.

Steps are queued back to back with one device sync per timed batch; the sides alternate in rounds (medians).
The compiled sides are warmed up past their captures (an eager call, two captured calls) before timing.

    python benchmarks/bench_compile.py [--device cl:0] [--rounds 5] [--quick]

Bars (issue 16): compiled MLP step >= 1.4x the eager step's speed and >= 1.5x torch eager's; compiled char-LM
and digits steps <= 0.8x the eager time; the compiled chain <= 3 kernels.
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _anchors as A  # noqa: E402

WARM = 5          # calls before timing: eager warm-up, two captures, and a margin


def _compiled(step, sync):
    import cltorch
    c = cltorch.compile(step)
    for _ in range(WARM):
        c()
    sync()
    if c.fallbacks() or not c.graphs():
        raise RuntimeError(f"the step did not reach replay: {c.fallbacks()}")
    return c


def mlp_sides(device):
    import bench_mlp
    step, sync = bench_mlp.ours_step(device)
    cstep, _ = bench_mlp.ours_step(device)
    return {"eager": (step, sync), "compiled": (_compiled(cstep, sync), sync)}, lambda: bench_mlp.torch_step()[0]


def digits_sides(device, quick):
    import cltorch
    import cltorch.nn.functional as F
    ex = A.load_example("train_digits", "cltorch")
    rng = np.random.default_rng(0)
    b = 16 if quick else 64
    xn = rng.standard_normal((b, 1, 8, 8)).astype(np.float32)
    yn = rng.integers(0, 10, b).astype(np.int64)

    def make():
        cltorch.manual_seed(0)
        model = ex.DigitsCNN().to(device).train()
        opt = cltorch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-2)
        x, y = cltorch.from_numpy(xn).to(device), cltorch.from_numpy(yn).to(device)

        def step():
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            return loss
        return step

    sync = cltorch.cl.synchronize
    return {"eager": (make(), sync), "compiled": (_compiled(make(), sync), sync)}


def charlm_sides(device, quick):
    import cltorch
    import bench_train
    cfg = bench_train.CHARLM_QUICK if quick else bench_train.CHARLM
    data = bench_train._charlm_data(cfg)
    step, sync, _ = bench_train.charlm_step("cltorch", device, cfg, data)
    cstep, _, _ = bench_train.charlm_step("cltorch", device, cfg, data)
    return {"eager": (step, sync), "compiled": (_compiled(cstep, sync), sync)}, cfg


def chain(x):
    import cltorch
    for _ in range(10):
        x = cltorch.sin(x)
        x = x * 1.01
        x = x + 0.25
    return x


def run(quick=False, device="cl:0", rounds=None, out=print):
    import cltorch
    rounds = rounds or (1 if quick else 5)
    target = 0.05 if quick else 0.5
    rows = []
    # MLP: eager, compiled, torch
    sides, make_torch = mlp_sides(device)
    sides.update(A.torch_sides(make_torch))
    load = A.load_avg()
    res = A.interleaved(sides, rounds=rounds, target_s=target, warmup=2)
    A.restore_torch_threads()
    med = {k: A.median(v) * 1e3 for k, v in res.items()}
    speed = A.round_ratio(res["eager"], res["compiled"])          # eager time / compiled time = speed ratio
    rows.append(A.case("compiled MLP step (784-256-256-10 b128, SGD) vs eager", "ms", med["compiled"],
                       {"eager": med["eager"]}, speed, "compiled/eager speed", ">= 1.4x eager's speed",
                       speed >= 1.4, note=f"load {load:.1f}; {A.cpu_note()}"))
    bt = A.best_torch(res)
    if bt:
        st = A.round_ratio(res[bt], res["compiled"])
        rows.append(A.case("compiled MLP step vs torch eager", "ms", med["compiled"],
                           {k: v for k, v in med.items() if k.startswith("torch")}, st, f"compiled/{bt} speed",
                           ">= 1.5x torch eager's speed", st >= 1.5, note=f"load {load:.1f}"))
    for name, make in ((f"digits CNN step (b{16 if quick else 64}, AdamW, dropout 0.25)", lambda: digits_sides(device, quick)),
                       ("char-LM step", lambda: charlm_sides(device, quick))):
        got = make()
        if isinstance(got, tuple):
            sides, cfg = got
            name = (f"char-LM step (d{cfg['d']} L{cfg['layers']} T{cfg['block']} b{cfg['batch']}, clip, AdamW)")
        else:
            sides = got
        load = A.load_avg()
        res = A.interleaved(sides, rounds=rounds, target_s=target, warmup=1)
        med = {k: A.median(v) * 1e3 for k, v in res.items()}
        r = A.round_ratio(res["compiled"], res["eager"])
        launches = sides["compiled"][0].graphs()[0].launch_count
        eager_n = next(iter(e for e in sides["compiled"][0].cache.values() if e.graph is not None)).launches_eager
        rows.append(A.case(f"compiled {name} vs eager", "ms", med["compiled"], {"eager": med["eager"]}, r,
                           "compiled/eager time", "<= 0.8x eager's time", r <= 0.8,
                           note=f"{launches} kernels per replay (eager {eager_n}); load {load:.1f}; {A.cpu_note()}"))
    # the chain
    x = cltorch.randn(1000, device=device)
    cf = cltorch.compile(chain)
    with cltorch.no_grad():
        for _ in range(WARM):
            cf(x)
        sync = cltorch.cl.synchronize
        res = A.interleaved({"eager": (lambda: chain(x), sync), "compiled": (lambda: cf(x), sync)},
                            rounds=rounds, target_s=target / 2, warmup=1)
    n = cf.graphs()[0].launch_count
    med = {k: A.median(v) * 1e6 for k, v in res.items()}
    rows.append(A.case("compiled 30-op pointwise chain (1,000 floats, no_grad): kernels per call", "kernels", n,
                       {"eager": 30}, None, "", "<= 3 kernels", n <= 3,
                       note=f"per call: compiled {med['compiled']:.0f} us, eager {med['eager']:.0f} us "
                            f"({med['eager'] / med['compiled']:.1f}x)"))
    # forward + backward of the same chain (x requires grad): dead scalar gradients dropped, chains fused
    xg = cltorch.randn(1000, device=device).requires_grad_()

    def fb():
        xg.grad = None
        chain(xg).sum().backward()
    cfb = cltorch.compile(fb)
    for _ in range(WARM):
        cfb()
    entry = next(e for e in cfb.cache.values() if e.graph is not None)
    res = A.interleaved({"eager": (fb, cltorch.cl.synchronize), "compiled": (cfb, cltorch.cl.synchronize)},
                        rounds=rounds, target_s=target / 2, warmup=1)
    med = {k: A.median(v) * 1e6 for k, v in res.items()}
    rows.append(A.case("compiled 30-op chain forward + backward: kernels per call", "kernels", entry.graph.launch_count,
                       {"eager": entry.launches_eager}, None, "", "print", None,
                       note=f"per call: compiled {med['compiled']:.0f} us, eager {med['eager']:.0f} us "
                            f"({med['eager'] / med['compiled']:.1f}x)"))
    return rows


def suite(quick=False, device="cl:0"):
    """Rows for benchmarks/run.py."""
    return run(quick=quick, device=device)


def main(argv=None):
    A.command_line(run, __doc__, argv)


if __name__ == "__main__":
    main()
