"""Attention's forward on matrix units (cltorch/ops/attention/mma.py, cl_kernels/sdpa_mma.cl.mako).

As for the GEMM (tests/test_gemm_mma.py): the kernel runs emulated on this machine's device (ldmatrix, mma.sync and
the row max/sum's warp shuffles replaced by plain OpenCL C through local memory) against numpy in float64, through
its probe's check and through F.scaled_dot_product_attention (forward on the unit, backward the flash design's,
reading the logsumexp the unit's forward saved) against torch; calls it does not take (a mask) run the flash design;
the real kernel assembles with ptxas for sm_90 where clang-15 and CUDA's ptxas exist.
"""
import math

import numpy as np
import pytest

cl = pytest.importorskip("pyopencl")

import cltorch  # noqa: E402
from cltorch.backend import probes, program, runtime  # noqa: E402
from cltorch.ops import gemm as G  # noqa: E402
from cltorch.ops.attention import mma as AM  # noqa: E402
from cltorch.ops.gemm import mma  # noqa: E402
from test_gemm_mma import _tools, ptxas_check  # noqa: E402

SMALL = ((16, 37, 45, True),)            # (head dim, L, S, causal): one small kernel


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("CLTORCH_NO_DISK_CACHE", "1")      # PoCL's own cache serves a second run
    monkeypatch.setattr(probes, "_path", lambda file: tmp_path / file)
    monkeypatch.setattr(probes, "_memo", {})
    mma.clear_cache()
    yield
    mma.clear_cache()


@pytest.mark.parametrize("dts,shapes", [("half", ((16, 37, 45, True), (32, 20, 70, False))), ("bf16", SMALL)])
def test_emulated_attention_kernel(rt, dts, shapes):
    """The probe's check, emulated: edge query and key blocks, causal and not, two query heads per key head."""
    ok, detail = AM.check(rt, "nv_mma", True, dts, {"ldm": "r32"}, shapes)
    assert ok, detail


def test_sdpa_runs_on_the_emulated_unit(rt, monkeypatch):
    """float16 attention as a user calls it, under the GPU design with the (emulated) unit on: the forward runs
    the unit's kernel, the backward the flash design's; values and gradients against torch in float64 of the same
    inputs (causal, grouped-query); with a mask the flash design's forward runs."""
    import torch
    saved_g, saved_s = rt.profile.get("gemm"), rt.profile.get("sdpa")
    monkeypatch.setenv(mma.ENV, "nv_mma:emulated")
    orig = AM.check
    monkeypatch.setattr(AM, "check", lambda rt, unit, emu, dts, variant: orig(rt, unit, emu, dts, variant, SMALL))
    try:
        rt.profile["gemm"] = dict(saved_g or {}, design="gpu",
                                  mma_sizes=[dict(bm=32, bn=24, bk=16, wm=2, wn=1)])
        rt.profile["sdpa"] = dict(saved_s or {}, design="flash")
        G.clear_cache()
        rng = np.random.default_rng(0)
        q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((2, 4, 37, 16), (2, 2, 45, 16), (2, 2, 45, 16)))
        g = rng.standard_normal((2, 4, 37, 16)).astype(np.float32)
        launched = []
        run = AM._run
        monkeypatch.setattr(AM, "_run", lambda *a: launched.append(1) or run(*a))
        cq, ck, cv = (cltorch.tensor(x, device="cl:0").half().requires_grad_() for x in (q, k, v))
        assert AM._choice(rt, "half").label == "nv_mma:emulated"       # the probes ran (their launches counted)
        launched.clear()
        out = cltorch.nn.functional.scaled_dot_product_attention(cq, ck, cv, is_causal=True, enable_gqa=True)
        out.backward(cltorch.tensor(g, device="cl:0").half())
        assert launched == [1]
        tq, tk, tv = (torch.tensor(x).half().double().requires_grad_() for x in (q, k, v))
        tout = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True, enable_gqa=True)
        tout.backward(torch.tensor(g).half().double())
        ref = tout.detach().numpy()
        assert out.dtype is cltorch.float16
        assert np.abs(out.detach().float().cpu().numpy() - ref).max() / np.abs(ref).max() < 4e-3
        for a, b in ((cq, tq), (ck, tk), (cv, tv)):
            r = b.grad.numpy()
            assert np.abs(a.grad.float().cpu().numpy() - r).max() / np.abs(r).max() < 1e-2
        mask = cltorch.ones(37, 45, dtype=cltorch.bool, device="cl:0").tril()
        with cltorch.no_grad():
            y = cltorch.nn.functional.scaled_dot_product_attention(cq, ck, cv, attn_mask=mask, enable_gqa=True)
        assert launched == [1]                             # a mask: the flash design's forward
        np.testing.assert_allclose(y.float().cpu().numpy(), ref, rtol=4e-3, atol=4e-3)
    finally:
        rt.profile["gemm"], rt.profile["sdpa"] = saved_g, saved_s
        G.clear_cache()


def test_ptx_attention_is_never_built_off_nvidia(rt):
    ok, why = AM.check(rt, "nv_mma", False, "half", {"ldm": "r32"}, SMALL)
    assert not ok and why.startswith("not built: inline PTX")


def test_attention_kernel_assembles_with_ptxas(tmp_path):
    """The real kernel (ldmatrix, mma.sync, shfl.sync.bfly) compiles to PTX and ptxas assembles it for sm_90: head
    dim 64 causal float16, head dim 128 bfloat16."""
    _tools("clang-15", "llvm-link-15", "llc-15", "ptxas")
    for name, dts, D_, causal in (("f16", "half", 64, True), ("bf16", "bf16", 128, False)):
        WG, BN = AM._tiles(D_)
        src = program.render("sdpa_mma.cl.mako", unit="nv_mma", emu=0, dt=dts, D=D_, WG=WG, BN=BN, causal=causal,
                             G=8, nat=1, asm_kw="__asm__", ldm="r32")
        ptx = ptxas_check(tmp_path, name, src)
        ty = "f16" if dts == "half" else "bf16"
        assert f"mma.sync.aligned.m16n8k16.row.col.f32.{ty}.{ty}.f32" in ptx and "shfl.sync.bfly.b32" in ptx
        assert "ldmatrix.sync.aligned.m8n8.x4.trans" in ptx


def test_applicable():
    class C:
        E = EV = 64
        dropout = None
    x16 = cltorch.zeros(1, 2, 3, 64, dtype=cltorch.float16)
    assert AM.applicable(x16, x16, x16, None, C) is None
    assert "dtype" in AM.applicable(x16.float(), x16, x16, None, C)
    assert "mask" in AM.applicable(x16, x16, x16, object(), C)
    C.E = C.EV = 72
    assert "head dims" in AM.applicable(x16, x16, x16, None, C)
    assert math.isfinite(AM.LOG2E)


def test_real_attention_on_this_gpu(monkeypatch):
    """On an NVIDIA GPU (skipped elsewhere, with the reason): with CLTORCH_MATRIX_UNITS=auto the forward's probe
    passes and B2 H8 S1024 D64 / D128 float16 and bfloat16 attention (causal and not) runs on the tensor cores,
    within the storage type's rounding of float64."""
    r = next((runtime(i) for i in range(cltorch.cl.device_count()) if "nv_mma" in mma.auto_units(runtime(i).info)),
             None)
    if r is None:
        pytest.skip("no NVIDIA GPU here: the emulated kernel above stands in for the tensor cores")
    monkeypatch.setenv(mma.ENV, "auto")
    G.clear_cache()
    dev = f"cl:{r.index}"
    rng = np.random.default_rng(1)
    for dt, tol in (("float16", 4e-3), ("bfloat16", 2e-2)):
        dts = "half" if dt == "float16" else "bf16"
        assert AM._choice(r, dts) is not None, mma.choose(r, dts)[1]
        for D_, causal in ((64, False), (128, True)):
            x = [rng.standard_normal((2, 8, 1024, D_)).astype(np.float32) for _ in range(3)]
            q, k, v = (cltorch.tensor(a, device=dev).to(getattr(cltorch, dt)) for a in x)
            launched = []
            run = AM._run
            monkeypatch.setattr(AM, "_run", lambda *a: launched.append(1) or run(*a))
            y = cltorch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
            monkeypatch.setattr(AM, "_run", run)
            assert launched == [1]
            f = [t.float().cpu().numpy().astype(np.float64) for t in (q, k, v)]
            ref, _ = AM._reference(f[0], f[1], f[2], causal, 1.0 / math.sqrt(D_))
            assert np.abs(y.float().cpu().numpy() - ref).max() / np.abs(ref).max() < tol, (dt, D_, causal)
