"""The GPU design of the convolutions (implicit GEMM, ``cltorch/ops/conv/igemm.py``): values and gradients against
torch 2.13 with the design forced on this machine's devices, for strides 1-3, padding (incl. 'same'), dilation,
groups, odd sizes (1x1, 7x7, 57x57 images), channel counts that are not a multiple of the tile, batch 1,
channels_last input, conv1d / conv3d and conv_transpose (the phase-decomposed input gradient); each tile row of the
GPU profile; sums whose bits do not depend on the tiles. Plan tests state what a GPU gets: the H200 bench's conv2d
launches no im2col and fills the device, and the rendered inner loop reads local memory as vectors only."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch as T

import cltorch as torch
from cltorch.backend import program
from cltorch.ops import conv as C
from cltorch.ops.conv import igemm, plan
from conftest import H200, fake_runtime, shipped_profile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def forced():
    prev = C.set_algorithm("igemm")
    yield
    C.set_algorithm(prev)


def _check(device, nd, n, c, sp, o, ks, stride=1, padding=0, dilation=1, groups=1, bias=True, dtype=np.float32,
           xform=None, rtol=1e-4, atol=1e-4, seed=0):
    """conv{nd}d forward and backward (random output gradient) on ``device`` against torch."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c) + sp).astype(dtype)
    w = rng.standard_normal((o, c // groups) + ks).astype(dtype)
    b = rng.standard_normal(o).astype(dtype) if bias else None
    tf, cf = getattr(T.nn.functional, f"conv{nd}d"), getattr(torch.nn.functional, f"conv{nd}d")
    tx, tw = T.tensor(x, requires_grad=True), T.tensor(w, requires_grad=True)
    tb = T.tensor(b, requires_grad=True) if bias else None
    ref = tf(tx, tw, tb, stride, padding, dilation, groups)
    g = rng.standard_normal(tuple(ref.shape)).astype(dtype)
    ref.backward(T.tensor(g))
    cx, cw = torch.tensor(x, device=device, requires_grad=True), torch.tensor(w, device=device, requires_grad=True)
    cb = torch.tensor(b, device=device, requires_grad=True) if bias else None
    y = cf(xform(cx) if xform else cx, cw, cb, stride, padding, dilation, groups)
    assert tuple(y.shape) == tuple(ref.shape)
    np.testing.assert_allclose(y.detach().cpu().numpy(), ref.detach().numpy(), rtol=rtol, atol=atol)
    y.backward(torch.tensor(g, device=device))
    np.testing.assert_allclose(cx.grad.cpu().numpy(), tx.grad.numpy(), rtol=rtol, atol=atol)
    np.testing.assert_allclose(cw.grad.cpu().numpy(), tw.grad.numpy(), rtol=rtol, atol=atol * 10)
    if bias:
        np.testing.assert_allclose(cb.grad.cpu().numpy(), tb.grad.numpy(), rtol=rtol, atol=atol * 10)


CASES_2D = [
    # n, c, (h, w), o, ks, stride, padding, dilation, groups
    (2, 3, (7, 7), 5, (3, 3), 1, 1, 1, 1),          # 7x7 images, 3 channels (slice depth 4)
    (1, 20, (9, 11), 70, (3, 3), 2, 1, 1, 1),       # batch 1, 20 channels (16 + 4), 70 outputs (two row tiles)
    (2, 8, (12, 10), 6, (3, 3), 1, "same", 2, 1),   # dilated 'same'
    (2, 6, (8, 9), 4, (2, 4), (2, 3), (1, 2), 1, 2),  # groups, rectangular kernel and strides
    (1, 3, (57, 57), 4, (3, 3), 1, 1, 1, 1),        # 57x57: partial position tiles
    (3, 4, (1, 1), 5, (1, 1), 2, 0, 1, 1),          # 1x1 images, strided (not a pointwise GEMM)
    (2, 2, (6, 6), 3, (3, 3), 1, 2, 1, 1),          # padding wider than the image's edge taps
    (1, 5, (10, 7), 4, (5, 3), 3, (2, 1), 1, 1),    # stride 3: nine phases of the input gradient
]


@pytest.mark.parametrize("case", CASES_2D, ids=lambda c: "x".join(map(str, c[2])) + f"_c{c[1]}_o{c[3]}_s{c[5]}")
def test_conv2d_values_and_gradients(device, forced, case):
    n, c, sp, o, ks, stride, padding, dilation, groups = case
    _check(device, 2, n, c, sp, o, ks, stride, padding, dilation, groups)


def test_conv1d_conv3d_float64_and_channels_last(device, forced):
    _check(device, 1, 2, 5, (13,), 4, (3,), 2, 1, 2, 1, seed=1)
    _check(device, 3, 1, 3, (5, 6, 4), 4, (3, 2, 3), (1, 2, 1), 1, 1, 1, seed=2)
    _check(device, 2, 2, 3, (6, 5), 4, (3, 3), 1, 1, 1, 1, dtype=np.float64, rtol=1e-10, atol=1e-10, seed=3)
    _check(device, 2, 2, 6, (7, 8), 5, (3, 3), 2, 1, 1, 1, seed=4,
           xform=lambda t: t.contiguous(memory_format=torch.channels_last))


@pytest.mark.parametrize("stride,padding,opad,dilation", [(1, 0, 0, 1), (2, 1, 1, 1), ((3, 2), (1, 0), (2, 1), 2)])
def test_conv_transpose2d(device, forced, stride, padding, opad, dilation):
    rng = np.random.default_rng(5)
    u = rng.standard_normal((2, 6, 4, 5)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 2)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    tu, tw, tb = (T.tensor(a, requires_grad=True) for a in (u, w, b))
    ref = T.nn.functional.conv_transpose2d(tu, tw, tb, stride, padding, opad, 2, dilation)
    g = rng.standard_normal(tuple(ref.shape)).astype(np.float32)
    ref.backward(T.tensor(g))
    cu, cw, cb = (torch.tensor(a, device=device, requires_grad=True) for a in (u, w, b))
    z = torch.nn.functional.conv_transpose2d(cu, cw, cb, stride, padding, opad, 2, dilation)
    z.backward(torch.tensor(g, device=device))
    for got, want in ((z, ref), (cu.grad, tu.grad), (cw.grad, tw.grad), (cb.grad, tb.grad)):
        np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(), rtol=1e-4, atol=1e-4)


def test_the_design_runs(device, forced, monkeypatch):
    """Forward, input and weight gradient all go through igemm (not a silent fallback)."""
    calls = []
    for name in ("conv", "weight_grad"):
        fn = getattr(igemm, name)
        monkeypatch.setattr(igemm, name, lambda *a, _f=fn, _n=name: (calls.append(_n), _f(*a))[1])
    x = torch.randn(2, 3, 5, 5, device=device, requires_grad=True)
    w = torch.randn(4, 3, 3, 3, device=device, requires_grad=True)
    torch.nn.functional.conv2d(x, w, padding=1).sum().backward()
    assert calls == ["conv", "conv", "weight_grad"]


def test_every_gpu_tile_row(device, forced, monkeypatch):
    """Each row of gpu.toml's ``[conv] igemm`` table (and its weight-gradient row) on this device, at a shape that
    leaves partial tiles in every dimension; the bits do not depend on the row (one summation order)."""
    gpu = shipped_profile(H200)
    rows = gpu.get_value("conv", "igemm")
    assert len(rows) >= 3 and gpu.get_value("conv", "design") == "igemm"
    rt = torch.empty(1, device=device)._runtime()
    orig = rt.profile.get_value
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 19, 9, 7)).astype(np.float32)
    w = rng.standard_normal((37, 19, 3, 3)).astype(np.float32)
    g = rng.standard_normal((2, 37, 9, 7)).astype(np.float32)
    tx, tw = T.tensor(x, requires_grad=True), T.tensor(w, requires_grad=True)
    T.nn.functional.conv2d(tx, tw, padding=1).backward(T.tensor(g))
    ref = T.nn.functional.conv2d(tx, tw, padding=1).detach().numpy()
    got = []
    for row in rows:
        wrow = dict(gpu.get_value("conv", "igemm_wgrad"), tm=row["tm"], rm=row["rm"])

        def other(section, key, default=None, _row=row, _w=wrow):
            if section == "conv" and key in ("igemm", "igemm_wgrad", "igemm_wgrad_groups"):
                return {"igemm": [_row], "igemm_wgrad": _w, "igemm_wgrad_groups": 4}[key]
            return orig(section, key, default)
        monkeypatch.setattr(rt.profile, "get_value", other)
        monkeypatch.setattr(igemm, "_plans", {})          # plans are memoised per profile: plan this row afresh
        cx = torch.tensor(x, device=device, requires_grad=True)
        cw = torch.tensor(w, device=device, requires_grad=True)
        y = torch.nn.functional.conv2d(cx, cw, padding=1)
        y.backward(torch.tensor(g, device=device))
        np.testing.assert_allclose(y.detach().cpu().numpy(), ref, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(cx.grad.cpu().numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(cw.grad.cpu().numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-3)
        got.append([t.cpu().numpy().tobytes() for t in (y.detach(), cx.grad, cw.grad)])
    assert all(r == got[0] for r in got[1:])


def test_deterministic_mode_bits_across_devices_and_designs():
    """In deterministic mode (multiply and add apart, one summation order) the forced GPU design gives the same
    bits on every device here (PoCL, Intel's runtime), and the same bits as the CPU design: bias first, then taps,
    then channels, as conv.cl.mako's direct kernels; the weight gradient's one split is the sequential sum."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 19, 9, 8)).astype(np.float32)
    w = rng.standard_normal((21, 19, 3, 3)).astype(np.float32)
    b = rng.standard_normal(21).astype(np.float32)
    g = rng.standard_normal((2, 21, 5, 4)).astype(np.float32)

    def run(dev, algo):
        prev = C.set_algorithm(algo)
        try:
            cx, cw, cb = (torch.tensor(a, device=dev, requires_grad=True) for a in (x, w, b))
            y = torch.nn.functional.conv2d(cx, cw, cb, 2, 1)
            y.backward(torch.tensor(g, device=dev))
            return [t.detach().cpu().numpy().tobytes() for t in (y, cx.grad, cw.grad)]
        finally:
            C.set_algorithm(prev)
    devs = ["cpu"] + [f"cl:{i}" for i in range(torch.cl.device_count())]
    torch.use_deterministic_algorithms(True)
    try:
        got = [run(d, "igemm") for d in devs]
        direct = run("cpu", "direct")
    finally:
        torch.use_deterministic_algorithms(False)
    assert all(r == got[0] for r in got[1:]), devs
    assert got[0] == direct


# ------------------------------------------------------------------------------------------------ plans
def test_h200_bench_conv_plan_fills_the_device_without_im2col():
    """The bench's conv2d (32x64x56x56, 3x3, 64 -> 64, padding 1) on an H200 with the nvidia profile: implicit GEMM
    in every direction (no im2col, no column matrix) with at least 2 work-groups per compute unit, and work-groups
    within NVIDIA's limits."""
    rt = fake_runtime(H200)
    geom = C.Geom.make(1, (1, 1), (1, 1), (1, 1), (56, 56), (56, 56), (3, 3))
    assert plan._algo(rt, 64, 64, geom) == "igemm"
    cu = 132
    fwd = igemm.conv_plan(rt, "float", 64, 64, 32, (1, 56, 56), 1)
    bwd = igemm.conv_plan(rt, "float", 64, 64, 32, (1, 56, 56), 1, 1)
    wg = igemm.wgrad_plan(rt, "float", 64, 64 * 9, 32 * 56 * 56, 1)
    for p in (fwd, bwd, wg):
        assert p.work_groups >= 2 * cu, p
        gs, ls = p.launch_sizes()
        assert ls[0] * ls[1] * ls[2] <= 1024 and ls[2] <= 64 and all(g % l == 0 for g, l in zip(gs, ls))
        assert gs[1] // ls[1] <= 65535 and gs[2] // ls[2] <= 65535
        assert p.tiles.local_bytes(4, p is wg) <= 48 * 1024
    # every output is computed once: the forward tiles cover the 64 channels and 100,352 positions exactly
    assert fwd.channel_tiles * fwd.tiles.tm == 64 and fwd.tiles_per_phase * fwd.tiles.tn == 32 * 56 * 56
    # register blocks of at least 8 x 8 for this shape (16 multiply-adds per 16-byte local load)
    assert fwd.tiles.rm * fwd.tiles.rn >= 64 and fwd.tiles.vw == 4
    # the weight gradient's splits follow from the shapes and the profile (not the device): the same on a smaller GPU
    small = fake_runtime(dict(H200, max_compute_units=16))
    assert igemm.wgrad_plan(small, "float", 64, 576, 100352, 1) == wg


def test_small_layers_still_fill_the_device():
    """The CNN step's layers (batch 128: 3 -> 64 at 32x32, 64 -> 128 at 16x16, 128 -> 256 at 8x8) get >= 2
    work-groups per compute unit in each direction on the H200; the 3-channel layer's slices are 4 deep."""
    rt = fake_runtime(H200)
    for co, ci, hw in ((64, 3, 32), (128, 64, 16), (256, 128, 8)):
        f = igemm.conv_plan(rt, "float", co, ci, 128, (1, hw, hw), 1)
        t = igemm.conv_plan(rt, "float", ci, co, 128, (1, hw, hw), 1)
        w = igemm.wgrad_plan(rt, "float", co, ci * 9, 128 * hw * hw, 1)
        assert min(f.work_groups, t.work_groups, w.work_groups) >= 264, (co, ci, hw)
        if ci == 3:
            assert f.tiles.tk == 4


def test_vendor_limits_hold():
    """Each GPU vendor's profile gives tiles within its [limits] (Apple: 256 work-items, 32 KiB local memory)."""
    for props in (dict(H200), dict(name="Apple M2", vendor="Apple", vendor_id=0x1027F00, is_cpu=False,
                                   platform="Apple", max_compute_units=10, local_mem_size=65536,
                                   max_work_group_size=1024, max_work_item_sizes=(1024, 1024, 1024)),
                  dict(name="Intel(R) Iris(R) Xe Graphics", vendor="Intel(R) Corporation", vendor_id=0x8086,
                       is_cpu=False, platform="Intel(R) OpenCL Graphics", max_compute_units=96,
                       local_mem_size=65536, max_work_group_size=1024, max_work_item_sizes=(1024, 1024, 1024))):
        rt = fake_runtime(props)
        from cltorch.backend import geometry
        lim = geometry.limits(rt)
        for co in (16, 64, 256):
            for p in (igemm.conv_plan(rt, "float", co, 64, 8, (1, 14, 14), 1),
                      igemm.wgrad_plan(rt, "float", co, 576, 8 * 196, 1)):
                assert p.tiles.threads <= lim.max_work_group_size, (props["name"], p)
                assert p.tiles.local_bytes(4, isinstance(p, igemm.WgradPlan)) <= lim.local_mem_size


def test_cpu_profiles_keep_their_designs():
    """The CPU profiles never choose igemm: the bench shape and a small CNN layer stay direct / im2col + GEMM."""
    rt = fake_runtime(dict(name="pthread-x86-64", vendor="GenuineIntel", vendor_id=0x8086, is_cpu=True,
                       platform="Portable Computing Language", max_compute_units=2, max_work_group_size=4096))
    for geom, cin, cout in ((C.Geom.make(1, (1, 1), (1, 1), (1, 1), (56, 56), (56, 56), (3, 3)), 64, 64),
                            (C.Geom.make(1, (1, 1), (1, 1), (1, 1), (8, 8), (8, 8), (3, 3)), 16, 32)):
        assert plan._algo(rt, cin, cout, geom) in ("direct", "gemm")


def test_inner_loop_reads_local_memory_as_vectors():
    """The rendered kernels of the H200 plans: inside the inner loop every local-memory read is a float4 vector
    (the profile's igemm_vw), and each of them feeds at least 8 scalar multiply-adds."""
    rt = fake_runtime(H200)
    for p, wgrad in ((igemm.conv_plan(rt, "float", 64, 64, 32, (1, 56, 56), 1), False),
                     (igemm.wgrad_plan(rt, "float", 64, 576, 100352, 1), True)):
        src = program.render("conv_igemm.cl.mako", **p.tiles.params("float", "int", wgrad))
        name = "void igemm_wgrad" if wgrad else "void igemm_conv"
        body = src[src.index(name):]
        start = body.index("// inner loop")
        loop = body[start:body.index("barrier(", start)]
        loads = re.findall(r"^\s*(\w+) \w+ = (As|Bs)\[", loop, re.M)
        assert loads and all(t == "float4" for t, _ in loads), loads
        fmas = len(re.findall(r"MAC\(", loop)) * p.tiles.vw      # each MAC is a float4 multiply-add
        assert fmas >= 8 * len(loads), (fmas, len(loads))
        assert "__local float*" not in loop and not re.search(r"(Asc|Bsc)\[", loop)


# ------------------------------------------------------------------------------------------------ as a GPU runs it
_SCRIPT = r"""
import json, numpy as np
import cltorch as ct
from cltorch.backend import runtime
x = ct.randn(2, 8, 9, 9, device="cl:0", requires_grad=True)
w = ct.randn(6, 8, 3, 3, device="cl:0", requires_grad=True)
b = ct.randn(6, device="cl:0", requires_grad=True)
rt = runtime(0)
rt.kernel_profile()
ct.nn.functional.conv2d(x, w, b, padding=1).sum().backward()
ct.cl.synchronize()
print(json.dumps(sorted(rt.kernel_profile())))
"""


def test_nvidia_profile_launches_implicit_gemm_only():
    """A conv2d forward and backward under the NVIDIA configuration (on the cpu device, its limits emulated)
    launches the implicit-GEMM kernels and the bias gradient's reduction: no im2col, col2im or GEMM."""
    files = [os.path.join(ROOT, "devices", f) for f in ("default.toml", "gpu.toml", "nvidia.toml")]
    env = dict(os.environ, CLTORCH_PROFILE=os.pathsep.join(files), CLTORCH_PROFILE_ONLY="1",
               CLTORCH_PROFILE_KERNELS="1", PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    names = json.loads(r.stdout.strip().splitlines()[-1])
    assert {"igemm_prep", "igemm_conv", "igemm_wgrad"} <= set(names), names
    assert not [n for n in names if "im2col" in n or "col2im" in n or n.startswith(("gemm", "conv_"))], names
