"""The GPU (flash) design of scaled_dot_product_attention (cltorch/ops/attention/flash.py, flash_backward.py,
cl_kernels/sdpa_flash.cl.mako), run here on the CPU OpenCL device by giving its runtime the GPU profile's [sdpa]
table (devices/gpu.toml), against torch in float64: values and gradients for odd lengths, L != S, head dims 7..128,
causal, bool/float masks, fully masked rows, transposed views of (B, S, H, D) and of a fused qkv projection, GQA,
float16/bfloat16 storage, float64 gradcheck, in-kernel dropout against the CPU design's draws; which kernels run
(no pack kernel); and the launch plans on a (fake) H200: enough work-groups to fill it, local tiles that fit
every vendor's limits and are read as vectors. tests/test_kernel_configs.py runs the same kernels under each GPU
vendor's profile and emulated limits, and under Oclgrind."""
import contextlib
import copy
import re

import numpy as np
import pytest
import torch

import cltorch as ct
from cltorch import _dtype as D
from cltorch.backend import cpu_index, geometry, program, runtime
from cltorch.backend.paths import profiles_dir
from cltorch.ops.attention import flash as F
from cltorch.ops.attention import plan as P
from conftest import H200, fake_runtime

sdpa = ct.nn.functional.scaled_dot_product_attention

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

GPU_SDPA = tomllib.load(open(profiles_dir() / "gpu.toml", "rb"))["sdpa"]


def _rt(device):
    idx = ct.device(device).index
    return runtime(cpu_index() if device == "cpu" or idx is None else idx)


@contextlib.contextmanager
def flash_design(device):
    """The device's runtime with the GPU profile's [sdpa] table merged over its own (then restored)."""
    rt = _rt(device)
    old = rt.profile.get("sdpa")
    rt.profile["sdpa"] = dict(copy.deepcopy(old or {}), **GPU_SDPA)
    P._plans.clear()
    try:
        yield rt
    finally:
        rt.profile["sdpa"] = old
        P._plans.clear()


def _np(t):
    return t.detach().cpu().float().numpy() if t.dtype in (torch.float16, torch.bfloat16) else t.detach().cpu().numpy()


def _check(got, want, rtol, atol, what):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    err = np.abs(got - want).max() if got.size else 0.0
    assert np.allclose(got, want, rtol=rtol, atol=atol), f"{what}: max abs error {err:.3g}"


def ran_flash(L, S=None):
    """Whether the flash design planned a forward of L queries (and S keys), i.e. ran it."""
    return any(key[:2] == ("flash", "fwd") and key[8] == L and S in (None, key[9]) for key in P._plans)


def run_both(device, q, k, v, g, dtype=ct.float32, tol=(2e-5, 2e-5), prep=None, **kw):
    """The flash design on ``device`` and torch float64 on the same inputs (numpy arrays); compares the output and
    the gradients of q, k, v. ``prep`` maps (q, k, v) leaves to the tensors given to sdpa (views), on both sides."""
    prep = prep or (lambda *t: t)
    xs = [ct.tensor(a, device=device).to(dtype).requires_grad_() for a in (q, k, v)]
    ys = [torch.tensor(a, dtype=torch.float64).requires_grad_() for a in (q, k, v)]
    kw_t = dict(kw)
    if kw.get("attn_mask") is not None:
        m = kw["attn_mask"]
        mt = ct.tensor(m, device=device)
        kw = dict(kw, attn_mask=mt.to(dtype) if m.dtype != bool else mt)
        kw_t["attn_mask"] = torch.tensor(m, dtype=torch.float64) if m.dtype != bool else torch.tensor(m)
        if kw.get("is_causal"):          # torch refuses a mask with is_causal; cltorch combines them, so the oracle too
            tril = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
            m_t = kw_t["attn_mask"]
            m_t = m_t & tril if m.dtype == bool else m_t.masked_fill(~tril, -np.inf)
            kw_t.update(is_causal=False, attn_mask=m_t)
    ins = prep(*xs)
    o = sdpa(*ins, **kw)
    assert "Flash" in o.grad_fn.name() and ran_flash(ins[0].shape[-2], ins[1].shape[-2])
    o.backward(ct.tensor(g, device=device).to(dtype))
    r = torch.nn.functional.scaled_dot_product_attention(*prep(*ys), **kw_t)
    r.backward(torch.tensor(g, dtype=torch.float64))
    for name, a, b in (("output", o, r), ("dq", xs[0].grad, ys[0].grad), ("dk", xs[1].grad, ys[1].grad),
                       ("dv", xs[2].grad, ys[2].grad)):
        _check(a.detach().float().cpu().numpy() if dtype in (ct.float16, ct.bfloat16) else a.detach().cpu().numpy(),
               b.detach().numpy(), *tol, name)


CASES = [
    # batch shape, L, S, E, EV, causal, mask kind
    ((2, 3), 7, 65, 16, 16, False, None),           # S not a multiple of the key block; partial query block
    ((1, 2), 130, 65, 64, 64, True, None),          # L > S, causal top-left, several blocks both ways
    ((1, 2), 65, 130, 80, 80, False, "bool"),       # head dim 80 (column guards), a fully masked row
    ((2, 1), 1, 7, 128, 128, True, "float"),        # one query, head dim 128, a per-batch float mask
    ((1, 1), 65, 1, 7, 5, True, "bool"),            # head dims 7, 5 (scalar loads, zero fill), one key
]


@pytest.mark.parametrize("case", CASES, ids=[f"L{c[1]}-S{c[2]}-E{c[3]}-{c[6]}{'-causal' if c[5] else ''}"
                                             for c in CASES])
def test_values_and_gradients_match_torch(case):
    bshape, L, S, E, EV, causal, mk = case
    rng = np.random.default_rng(CASES.index(case))
    q, k = rng.standard_normal(bshape + (L, E)), rng.standard_normal(bshape + (S, E))
    v, g = rng.standard_normal(bshape + (S, EV)), rng.standard_normal(bshape + (L, EV))
    mask = None
    if mk == "bool":
        mask = rng.random((L, S)) > 0.3
        mask[min(3, L - 1)] = False                              # a row with no key: zeros, zero gradients
    elif mk == "float":
        mask = rng.standard_normal((bshape[0], 1, L, S))
        mask[..., 0, :2] = -np.inf
    devices = ["cl:0", "cpu"] if E % 4 else ["cl:0"]              # cpu: host memory, so scalar loads too
    for device in devices:
        with flash_design(device):
            run_both(device, q, k, v, g, attn_mask=mask, is_causal=causal)


def test_views_of_fused_projections_and_gqa():
    """q, k, v as transposed views of (B, S, H, D) tensors and of one (B, S, 3, H, D) qkv projection (read from
    their strides, no copy or pack), and grouped-query attention (enable_gqa)."""
    rng = np.random.default_rng(11)
    B, H, L, S, E = 2, 3, 7, 65, 16
    with flash_design("cl:0"):
        q, k, v = (rng.standard_normal((B, n, H, E)) for n in (L, S, S))
        g = rng.standard_normal((B, H, L, E))
        run_both("cl:0", q, k, v, g, prep=lambda q, k, v: (q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)))
        qkv = rng.standard_normal((B, S, 3, H, E))
        g2 = rng.standard_normal((B, H, S, E))
        x = ct.tensor(qkv, device="cl:0").requires_grad_()
        y = torch.tensor(qkv).requires_grad_()
        outs = []
        for t, lib in ((x, ct), (y, torch)):
            qq, kk, vv = (t[:, :, i].transpose(1, 2) for i in range(3))
            o = lib.nn.functional.scaled_dot_product_attention(qq, kk, vv, scale=0.3)
            o.backward(lib.tensor(g2, device="cl:0") if lib is ct else torch.tensor(g2))
            outs.append(o)
        assert "Flash" in outs[0].grad_fn.name()
        _check(outs[0].detach().cpu().numpy(), outs[1].detach().numpy(), 2e-5, 2e-5, "qkv output")
        _check(x.grad.cpu().numpy(), y.grad.numpy(), 2e-5, 2e-5, "qkv grad")
        Hk = 1
        q, g = rng.standard_normal((B, H, L, E)), rng.standard_normal((B, H, L, E))
        k, v = rng.standard_normal((B, Hk, S, E)), rng.standard_normal((B, Hk, S, E))
        run_both("cl:0", q, k, v, g, enable_gqa=True)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_storage_computes_in_float(dtype):
    """16-bit storage, float arithmetic: the result is torch float64's on the same (rounded) inputs, rounded once."""
    rng = np.random.default_rng(12)
    B, H, L, S, E = 1, 2, 7, 65, 16
    cd, td = getattr(ct, dtype), getattr(torch, dtype)
    q, k, v, g = (torch.tensor(rng.standard_normal(s)).to(td).double().numpy()
                  for s in ((B, H, L, E), (B, H, S, E), (B, H, S, E), (B, H, L, E)))
    eps = 2e-3 if dtype == "float16" else 1.6e-2
    with flash_design("cl:0"):
        run_both("cl:0", q, k, v, g, dtype=cd, tol=(eps, eps), is_causal=True)


def test_float64_gradcheck():
    from cltorch.autograd import gradcheck
    rng = np.random.default_rng(13)
    with flash_design("cl:0"):
        if not _rt("cl:0").info.fp64:
            pytest.skip("the device has no float64")
        q = ct.tensor(rng.standard_normal((1, 2, 5, 8)), device="cl:0", requires_grad=True)
        k = ct.tensor(rng.standard_normal((1, 2, 9, 8)), device="cl:0", requires_grad=True)
        v = ct.tensor(rng.standard_normal((1, 2, 9, 8)), device="cl:0", requires_grad=True)
        assert "Flash" in sdpa(q, k, v, is_causal=True).grad_fn.name() and ran_flash(5, 9)
        assert gradcheck(lambda q, k, v: sdpa(q, k, v, is_causal=True), (q, k, v))


def test_dropout_draws_the_cpu_designs_mask():
    """The same seed gives the same kept weights in both designs (one Philox word per weight): equal outputs and
    gradients, so eager results stay reproducible whichever design a device runs."""
    from cltorch.ops import random as R
    rng = np.random.default_rng(7)
    bshape, L, S, E, p = (2, 3), 13, 22, 8, 0.3         # test_sdpa's dropout shape: the CPU design's programs
    q, k, v, g = (rng.standard_normal(bshape + (n, E)).astype(np.float32) for n in (L, S, S, L))
    res = []
    for design in ("cpu", "flash"):
        ctx = flash_design("cl:0") if design == "flash" else contextlib.nullcontext()
        with ctx:
            xs = [ct.tensor(a, device="cl:0", requires_grad=True) for a in (q, k, v)]
            R.manual_seed(1234)
            o = sdpa(*xs, dropout_p=p, is_causal=True)
            o.backward(ct.tensor(g, device="cl:0"))
            res.append([t.detach().cpu().numpy() for t in (o, *(x.grad for x in xs))])
    with flash_design("cl:0"):
        plain = sdpa(*(ct.tensor(a, device="cl:0") for a in (q, k, v)), is_causal=True).cpu().numpy()
    assert np.abs(res[1][0] - plain).max() > 0.1           # the mask did drop weights
    for a, b, name in zip(res[0], res[1], ("output", "dq", "dk", "dv")):
        _check(b, a, 1e-5, 1e-6, name)


def test_kernels_launched(monkeypatch):
    """The forward launches one kernel, the backward three (Dlt, dQ, dK/dV); nothing packs K or V."""
    rng = np.random.default_rng(14)
    with flash_design("cl:0") as rt:
        names = []
        real = rt.launch
        monkeypatch.setattr(rt, "launch", lambda k, *a: (names.append(k.function_name), real(k, *a))[1])
        xs = [ct.tensor(rng.standard_normal((2, 3, n, 16)).astype(np.float32), device="cl:0", requires_grad=True)
              for n in (7, 65, 65)]
        o = sdpa(*xs)
        assert [n for n in names if "sdpa" in n] == ["sdpa_flash_fwd"]
        names.clear()
        o.sum().backward()
        assert [n for n in names if "sdpa" in n] == ["sdpa_flash_dlt", "sdpa_flash_dq", "sdpa_flash_dkv"]


def test_deterministic_mode_runs_the_cpu_design():
    """Deterministic mode runs every device under the CPU tables: the CPU design, whose order is the same on every
    device, even where the profile asks for the flash design."""
    x = ct.zeros((1, 2, 4, 8), device="cl:0")
    with flash_design("cl:0"):
        assert P.fused_config(x, x, x, None, 0.0, False, 1.0, False)[0].design == "flash"
        ct.use_deterministic_algorithms(True)
        try:
            assert P.fused_config(x, x, x, None, 0.0, False, 1.0, False)[0].design == "cpu"
        finally:
            ct.use_deterministic_algorithms(False)
        assert P.fused_config(x, x, x, None, 0.0, False, 1.0, False)[0].design == "flash"


# --------------------------------------------------------------------------------- plans on the GPUs (no kernels run)
VENDORS = {
    "nvidia": H200,
    "amd": dict(name="gfx90a", vendor="Advanced Micro Devices, Inc.", vendor_id=0x1002,
                platform="AMD Accelerated Parallel Processing", max_compute_units=104, local_mem_size=65536,
                max_work_group_size=1024, max_work_item_sizes=(1024, 1024, 1024)),
    "intel-gpu": dict(name="Intel(R) Data Center GPU Max 1100", vendor="Intel(R) Corporation", vendor_id=0x8086,
                      platform="Intel(R) OpenCL Graphics", max_compute_units=448, local_mem_size=131072,
                      max_work_group_size=1024, max_work_item_sizes=(1024, 1024, 1024)),
    "apple": dict(name="Apple M2", vendor="Apple", vendor_id=0x1027F00, platform="Apple", max_compute_units=10,
                  local_mem_size=32768, max_work_group_size=256, max_work_item_sizes=(256, 256, 256)),
}


def fake_rt(vendor, index):
    return fake_runtime(dict(VENDORS[vendor], is_cpu=False), index=index)


def cfg_of(B, H, L, S, E, EV=None, Hk=None, causal=False, mask="none", dropout=False):
    c = P.Cfg()
    c.nbatch, c.B0, c.H, c.Hk, c.L, c.S, c.E, c.EV = 2, B, H, Hk or H, L, S, E, EV or E
    c.mask_kind, c.causal, c.scale, c.qbatch, c.design = mask, causal, E ** -0.5, (B, H), "flash"
    c.dropout = 0.1 if dropout else None
    c.drop_args = c.drop_seed = None
    return c


@pytest.fixture
def h200():
    rt = fake_rt("nvidia", 9001)
    yield rt
    P._plans.clear()


def test_h200_forward_fills_the_device_and_stages_vectors(h200):
    """Issue 26's SDPA row (B8 H16 S1024 D64): at least 2 work-groups per SM, in dimension 0, local memory within
    NVIDIA's 48 KiB; the staged Q, K, V, P tiles are 4-vector arrays, the score and P V loops read only them, and
    the one scalar view of local memory is the row-max/row-sum exchange (written once per row and block)."""
    assert P.design(h200) == "flash"
    for causal in (False, True):
        cfg = cfg_of(8, 16, 1024, 1024, 64, causal=causal)
        p = P.flash_plan(h200, cfg, "fwd", D.float32)
        assert p.groups >= 2 * 132 and p.groups == 8 * 16 * (1024 // p.block_rows)
        assert p.local_bytes <= 49152 and p.wg <= 1024 and p.block_keys % 4 == 0
        src = program.render(F.TEMPLATE, **F.tparams("fwd", D.float32, D.float32, cfg, p, vec=True))
        body = src[src.index("__kernel"):]
        local_decls = re.findall(r"__local\s+(\w+)\s+(\w+)\[", body)
        assert {n for _, n in local_decls} == {"Qs", "KPs", "Vs", "red"}
        assert all(t == "float4" for t, _ in local_decls)
        assert "sdpa_pack" not in src
        assert "(__global const float4*)" in body          # K and V staged with 16-byte loads
        scalar_views = [ln for ln in body.splitlines() if "(__local float*)" in ln]
        assert len(scalar_views) == 1 and "reds" in scalar_views[0]
        assert all(re.search(r"reds\[[^]]*\] = ", ln) for ln in body.splitlines() if "reds[" in ln)


def test_transformer_row_backward_fills_the_device(h200):
    """The Transformer row (batch 32, 8 heads, seq 256, head dim 64): dK/dV and dQ each at least 1,024
    work-groups; their local tiles are vectors with no scalar view."""
    cfg = cfg_of(32, 8, 256, 256, 64, causal=False)
    for kind in ("dq", "dkv"):
        p = P.flash_plan(h200, cfg, kind, D.float32)
        assert p.groups >= 1024, (kind, p)
        assert p.local_bytes <= 49152
        src = program.render(F.TEMPLATE, **F.tparams(kind, D.float32, D.float32, cfg, p, vec=True))
        body = src[src.index("__kernel"):]
        assert all(t == "float4" for t, _ in re.findall(r"__local\s+(\w+)\s+(\w+)\[", body))
        assert "(__local float*)" not in body
    fwd = P.flash_plan(h200, cfg, "fwd", D.float32)
    assert fwd.groups >= 2 * 132


@pytest.mark.parametrize("vendor", list(VENDORS))
def test_plans_fit_each_vendors_limits(vendor):
    """Every kind, head dims 16..128, float32 and float64, with dropout's extra tile: within the vendor's local
    memory and work-group size, and small problems still spread over the compute units."""
    rt = fake_rt(vendor, 9100 + list(VENDORS).index(vendor))
    lim = geometry.limits(rt)
    try:
        for E in (16, 64, 80, 128):
            for dt in (D.float32, D.float64):
                for drop in (False, True):
                    cfg = cfg_of(2, 4, 300, 200, E, dropout=drop)
                    for kind in ("fwd", "dq", "dkv"):
                        p = P.flash_plan(rt, cfg, kind, dt)
                        assert p.local_bytes <= lim.local_mem_size, (vendor, E, dt, kind, p)
                        assert p.wg <= lim.max_work_group_size and p.wg <= lim.max_work_item_sizes[0]
                        rows, keys = p.block_rows, p.block_keys
                        assert keys % 4 == 0 and rows >= 1
        for kind in ("fwd", "dq", "dkv"):          # 2 heads of 256: blocks halved until 2 groups per unit, or 1 row
            small = P.flash_plan(rt, cfg_of(1, 2, 256, 256, 64), kind, D.float32)
            assert small.groups >= 2 * rt.info.compute_units or small.tiles["tk" if kind == "dkv" else "tm"] == 1
            assert small.groups > 2 * 256 // 64, small
    finally:
        P._plans.clear()
