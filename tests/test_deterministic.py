"""Deterministic mode (cltorch.use_deterministic_algorithms(True)): the digits CNN and a tiny char-LM trained on
two OpenCL platforms (any two present: PoCL and Intel's CPU runtime here, NVIDIA and PoCL on a GPU machine) give
bit-identical losses and parameters at every step; PoCL dressed as an NVIDIA H200 (its device class, compute-unit
count and launch limits, the NVIDIA profile files) does too, so no GPU-only plan or fitted work-group size reaches
the mode's summation orders; the mode's math functions are within a few ulp of torch's; the mode switches back to
the default kernels."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import cltorch
from conftest import child_env, two_platforms_or_skip

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
import compare_devices as cd  # noqa: E402

STEPS = 100
CFG = {"digits": {"batch_size": 32, "lr": 3e-3, "block": 16, "d_model": 16, "heads": 2, "layers": 1},
       "charlm": {"batch_size": 4, "lr": 3e-3, "block": 16, "d_model": 16, "heads": 2, "layers": 1}}


@pytest.fixture
def deterministic():
    cltorch.use_deterministic_algorithms(True)
    yield
    cltorch.use_deterministic_algorithms(False)


def _pocl():
    for i in range(cltorch.cl.device_count()):
        p = cltorch.cl.get_device_properties(i)
        if "Portable Computing Language" in getattr(p, "platform", ""):
            return f"cl:{i}"
    return None


def _setup(model):
    batches, cfg = cd.make_batches(model, STEPS, 0, dict(CFG[model]))
    return batches, cfg, cd.initial_state(model, cfg, 0)


def _assert_identical(ra, rb):
    assert len(ra) == len(rb) == STEPS
    for step, ((la, sa), (lb, sb)) in enumerate(zip(ra, rb), 1):
        assert np.float32(la).view(np.uint32) == np.float32(lb).view(np.uint32), (step, la, lb)
        for k in sa:
            a, b = np.ascontiguousarray(sa[k]), np.ascontiguousarray(sb[k])
            assert a.tobytes() == b.tobytes(), (step, k, float(np.abs(a.astype(np.float64) - b).max()))


@pytest.mark.parametrize("model", ["digits", "charlm"])
def test_two_platforms_bit_identical(model, deterministic):
    a, b = two_platforms_or_skip()
    batches, cfg, init = _setup(model)
    ra = cd.run_side("cltorch", a, model, cfg, init, batches, 0, True)
    rb = cd.run_side("cltorch", b, model, cfg, init, batches, 0, True)
    _assert_identical(ra, rb)


# Side B: a fresh process (profiles load once per process) on PoCL dressed as an NVIDIA H200 before cltorch opens
# a device: class "nvidia", a GPU, 132 compute units, NVIDIA's work-item limits and 48 KiB of local memory, and the
# NVIDIA profile files as its own profile (their [limits]: at most 65,535 groups in dimensions 1-2). The kernels
# still run on PoCL. Whatever a plan reads from the device (its class, its size, its limits through
# backend/geometry.py's fitted local sizes) must not change what deterministic mode adds in which order.
_DRESSED = """
import sys
sys.path.insert(0, {ex!r})
import numpy as np
from cltorch.backend import devices
for info in devices.list_devices():
    if info.index == {index}:
        info.cls, info.is_gpu, info.compute_units = "nvidia", True, 132
        info.max_work_group_size, info.max_work_item_sizes, info.local_mem = 1024, (1024, 1024, 64), 48 * 1024
import cltorch
import compare_devices as cd
cltorch.use_deterministic_algorithms(True)
assert cltorch.backend.runtime({index}).info.cls == "nvidia"
batches, cfg = cd.make_batches("digits", {steps}, 0, dict({cfg!r}))
init = dict(np.load({init!r}))
rec = cd.run_side("cltorch", "cl:{index}", "digits", cfg, init, batches, 0, True)
cd._save_records({out!r}, rec)
"""


def test_pocl_dressed_as_an_h200_bit_identical(tmp_path, deterministic):
    dev = _pocl()
    if dev is None:
        pytest.skip("needs PoCL")
    batches, cfg, init = _setup("digits")
    ra = cd.run_side("cltorch", dev, "digits", cfg, init, batches, 0, True)
    out, init_path = str(tmp_path / "b.npz"), str(tmp_path / "init.npz")
    np.savez(init_path, **init)
    prof = os.pathsep.join(str(ROOT / "devices" / f) for f in ("default.toml", "gpu.toml", "nvidia.toml"))
    env = child_env(CLTORCH_PROFILE=prof, CLTORCH_PROFILE_ONLY="1")
    code = _DRESSED.format(ex=str(ROOT / "examples"), steps=STEPS, cfg=CFG["digits"], index=int(dev.split(":")[1]),
                           init=init_path, out=out)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    _assert_identical(ra, cd._load_records(out))


def test_arithmetic_is_ieee_on_every_device(deterministic):
    """What bit identity across vendors rests on, checked on each device (on the GPU run: NVIDIA's compiler too):
    products are not fused into a * b + c (a = 1 + 2^-12: a * a + (-(1 + 2^-11)) is 0 rounded, 2^-24 fused), in
    the elementwise kernels and in GEMM; subnormal inputs and results are kept, not flushed to zero (NVIDIA's
    OpenCL flushes only under -cl-denorms-are-zero, which cltorch never passes); / and sqrt are correctly rounded
    (the mode builds with -cl-fp32-correctly-rounded-divide-sqrt). Against numpy's float32, which rounds each
    operation."""
    a, c = np.float32(1 + 2 ** -12), np.float32(-(1 + 2 ** -11))
    x = np.array([a, 3e-20, 1e-39, 1.5, -2.5e-39], np.float32)
    y = np.array([a, 5e-20, 3.0, 1e-38, 0.5], np.float32)
    z = np.array([c, 0.0, 0.0, 0.0, 1e-45], np.float32)
    assert np.float32(a * a) + c == 0 and (z + x * y)[1:].min() < 0 < np.abs(z + x * y)[1:].min()
    rng = np.random.default_rng(3)
    p, q = rng.uniform(0.5, 2, 4096).astype(np.float32), rng.uniform(0.5, 2, 4096).astype(np.float32)
    for i in range(cltorch.cl.device_count()):
        dev = f"cl:{i}"
        t = [cltorch.from_numpy(v.copy()).to(dev) for v in (x, y, z)]
        got = cltorch.addcmul(t[2], t[0], t[1]).cpu().numpy()
        assert got.tobytes() == (z + x * y).tobytes(), (dev, got, z + x * y)
        # GEMM adds c first, then a * a: fused, fma(a, a, c) = 2^-24 (the default mode gives that on x86 and GPUs)
        A, B = np.zeros((64, 64), np.float32), np.zeros((64, 64), np.float32)
        A[:, 0], B[0, :], A[:, 1], B[1, :] = 1, c, a, a
        mm = (cltorch.from_numpy(A).to(dev) @ cltorch.from_numpy(B).to(dev)).cpu().numpy()
        assert not mm.any(), (dev, "GEMM fused a product", np.unique(mm))
        tp, tq = cltorch.from_numpy(p).to(dev), cltorch.from_numpy(q).to(dev)
        assert (tp / tq).cpu().numpy().tobytes() == (p / q).tobytes(), dev
        assert tp.sqrt().cpu().numpy().tobytes() == np.sqrt(p).tobytes(), dev



def test_accumulating_puts_fold_in_source_order(deterministic):
    """scatter_add, index_add, index_put(accumulate=True) and scatter_reduce("sum") update floats with atomics by
    default (in whatever order the device runs them); in the mode each destination folds its sources in their
    row-major order, as a sequential loop does (numpy's unbuffered ``np.add.at``; torch's CPU loop), so the bits
    match that loop on every device. Many duplicates of large, mixed-sign values make any other order show; the
    million sources into three rows race across a CPU runtime's threads too (atomics gave other bits each run)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((5, 7)).astype(np.float32)
    idx = rng.integers(0, 5, (300, 7))
    src = (rng.standard_normal((300, 7)) * 1e3).astype(np.float32)
    want_scatter = x.copy()
    np.add.at(want_scatter, (idx, np.arange(7)[None, :].repeat(300, 0)), src)
    rows = rng.integers(-4, 4, 400)                      # negative ids count from the end (index_put)
    vals = (rng.standard_normal((400, 3)) * 1e3).astype(np.float32)
    want_rows = np.zeros((4, 3), np.float32)
    np.add.at(want_rows, rows, vals)
    half = rng.integers(0, 4, 400)
    hv = (rng.standard_normal(400) * 10).astype(np.float16)
    want_half = np.zeros(4, np.float32)                  # float16 accumulates in a float32 temporary
    np.add.at(want_half, half, hv.astype(np.float32))
    many = rng.integers(0, 3, 1 << 20)
    mv = (rng.standard_normal(1 << 20) * 1e3).astype(np.float32)
    want_many = np.zeros(3, np.float32)
    np.add.at(want_many, many, mv)
    for i in range(cltorch.cl.device_count()):
        dev = f"cl:{i}"
        t = lambda a: cltorch.from_numpy(np.ascontiguousarray(a)).to(dev)  # noqa: E731
        got = t(x).scatter_add(0, t(idx), t(src)).cpu().numpy()
        assert got.tobytes() == want_scatter.tobytes(), (dev, "scatter_add", np.abs(got - want_scatter).max())
        got = t(x).scatter_reduce(0, t(idx), t(src), "sum").cpu().numpy()
        assert got.tobytes() == want_scatter.tobytes(), (dev, "scatter_reduce")
        got = cltorch.zeros(4, 3, device=dev).index_add_(0, t(rows % 4), t(vals)).cpu().numpy()
        assert got.tobytes() == want_rows.tobytes(), (dev, "index_add", np.abs(got - want_rows).max())
        got = cltorch.zeros(4, 3, device=dev).index_put_((t(rows),), t(vals), accumulate=True).cpu().numpy()
        assert got.tobytes() == want_rows.tobytes(), (dev, "index_put")
        got = cltorch.zeros(4, dtype=cltorch.float16, device=dev).index_add_(0, t(half), t(hv)).cpu().numpy()
        assert got.tobytes() == want_half.astype(np.float16).tobytes(), (dev, "float16 index_add")
        for _ in range(2):
            got = cltorch.zeros(3, device=dev).index_add_(0, t(many), t(mv)).cpu().numpy()
            assert got.tobytes() == want_many.tobytes(), (dev, "index_add, 2^20 sources", got - want_many)
        with pytest.raises(IndexError, match="out of bounds"):
            cltorch.zeros(4, device=dev).index_put_((t(np.array([9])),), t(np.ones(1, np.float32)),
                                                    accumulate=True).tolist()

def test_math_within_a_few_ulp_of_torch(deterministic):
    import torch
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(4000) * 4, rng.standard_normal(1000) * 1e-3, [0.0, -0.0, 1e-40, 80.0,
                                                                                         -100.0]]).astype(np.float32)
    t, c = torch.from_numpy(x), cltorch.from_numpy(x.copy()).to("cl:0")
    pos = np.abs(x) + np.float32(1e-30)
    cases = [("exp", c.exp(), t.exp(), 2), ("tanh", c.tanh(), t.tanh(), 3), ("erf", c.erf(), t.erf(), 4),
             ("sigmoid", c.sigmoid(), t.sigmoid(), 3), ("expm1", c.expm1(), t.expm1(), 4),
             ("log", cltorch.from_numpy(pos.copy()).to("cl:0").log(), torch.from_numpy(pos).log(), 2),
             ("log1p", cltorch.from_numpy(pos.copy()).to("cl:0").log1p(), torch.from_numpy(pos).log1p(), 3),
             ("rsqrt", cltorch.from_numpy(pos.copy()).to("cl:0").rsqrt(), torch.from_numpy(pos).rsqrt(), 1),
             ("pow", c.pow(3), t.pow(3), 2),
             ("powf", cltorch.from_numpy(pos.copy()).to("cl:0").pow(0.37), torch.from_numpy(pos).pow(0.37), 8)]
    for name, ours, ref, ulps in cases:
        o, r = ours.cpu().numpy(), ref.numpy()
        assert np.array_equal(np.isnan(o), np.isnan(r)), name
        fin = np.isfinite(r) & (np.abs(r) > 1e-37)
        assert np.array_equal(o[~fin & ~np.isnan(r)], r[~fin & ~np.isnan(r)]) or name in ("log", "log1p"), name
        d = np.abs(o[fin].view(np.int32).astype(np.int64) - r[fin].view(np.int32).astype(np.int64)).max()
        assert d <= ulps, (name, d)


def test_mode_switch_and_queries():
    assert cltorch.are_deterministic_algorithms_enabled() is False
    x = cltorch.randn(1000, device="cl:0")
    default = x.exp().cpu().numpy()
    cltorch.use_deterministic_algorithms(True, warn_only=True)
    try:
        assert cltorch.are_deterministic_algorithms_enabled()
        assert cltorch.is_deterministic_algorithms_warn_only_enabled()
        assert cltorch.get_deterministic_debug_mode() == 1
        rt = x._storage.runtime()
        assert rt.profile.sources[-1] == "deterministic" and rt.native_profile is not rt.profile
        det = x.exp().cpu().numpy()
        np.testing.assert_allclose(det, default, rtol=3e-7)
    finally:
        cltorch.use_deterministic_algorithms(False)
    assert not cltorch.are_deterministic_algorithms_enabled() and cltorch.get_deterministic_debug_mode() == 0
    assert x._storage.runtime().profile is x._storage.runtime().native_profile
    assert np.array_equal(x.exp().cpu().numpy(), default)
    with pytest.raises(TypeError):
        cltorch.use_deterministic_algorithms(1)
    cltorch.set_deterministic_debug_mode("error")
    assert cltorch.are_deterministic_algorithms_enabled() and not cltorch.is_deterministic_algorithms_warn_only_enabled()
    cltorch.set_deterministic_debug_mode(0)
    assert not cltorch.are_deterministic_algorithms_enabled()
