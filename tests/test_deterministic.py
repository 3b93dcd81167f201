"""Deterministic mode (cltorch.use_deterministic_algorithms(True)): the digits CNN and a tiny char-LM trained on
PoCL and on Intel's OpenCL CPU runtime give bit-identical losses and parameters at every step; PoCL under its own
profile and PoCL under the GPU-style tables (other work-group sizes and tiles) do too; the mode's math functions
are within a few ulp of torch's; the mode switches back to the default kernels."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import cltorch

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


def _intel():
    for i in range(cltorch.cl.device_count()):
        p = cltorch.cl.get_device_properties(i)
        if "Intel(R) OpenCL" in getattr(p, "platform", ""):
            return f"cl:{i}"
    return None


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
def test_pocl_and_intel_bit_identical(model, deterministic):
    a, b = _pocl(), _intel()
    if a is None or b is None:
        pytest.skip("needs PoCL and Intel's OpenCL CPU runtime (pip install intel-opencl-rt)")
    batches, cfg, init = _setup(model)
    ra = cd.run_side("cltorch", a, model, cfg, init, batches, 0, True)
    rb = cd.run_side("cltorch", b, model, cfg, init, batches, 0, True)
    _assert_identical(ra, rb)


_SIDE = """
import sys, json
sys.path.insert(0, {ex!r})
import numpy as np, cltorch
import compare_devices as cd
cltorch.use_deterministic_algorithms(True)
prof = cltorch.cl.get_device_properties(0)
batches, cfg = cd.make_batches("digits", {steps}, 0, dict({cfg!r}))
init = cd.initial_state("digits", cfg, 0)
rec = cd.run_side("cltorch", {dev!r}, "digits", cfg, init, batches, 0, True)
cd._save_records({out!r}, rec)
"""


def test_pocl_under_gpu_profile_bit_identical(tmp_path, deterministic):
    """Side B runs in a process whose device profile is default.toml alone (the GPU-style tables: work-group
    reductions of 256, local-memory GEMM tiles): deterministic mode runs both under its one profile."""
    dev = _pocl()
    if dev is None:
        pytest.skip("needs PoCL")
    batches, cfg, init = _setup("digits")
    ra = cd.run_side("cltorch", dev, "digits", cfg, init, batches, 0, True)
    out = str(tmp_path / "b.npz")
    env = dict(os.environ, CLTORCH_PROFILE=str(ROOT / "devices" / "default.toml"), CLTORCH_PROFILE_ONLY="1")
    code = _SIDE.format(ex=str(ROOT / "examples"), steps=STEPS, cfg=CFG["digits"], dev=dev, out=out)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    _assert_identical(ra, cd._load_records(out))


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
