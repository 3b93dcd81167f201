"""Depthwise convolutions (groups == in_channels, channel multiplier M = out_channels / in_channels) through the
depthwise kernels of cltorch/ops/conv/depthwise.py: forward values, input/weight/bias gradients (torch autograd
is the oracle) for 1-d, 2-d and 3-d, strides, padding, dilation, multiplier 2 and 3, non-contiguous and
channels_last inputs, float64, float16, conv_transpose with a depthwise geometry; the weight gradient is
bit-identical across devices in deterministic mode and does not depend on the profile's work-group sizes."""
import numpy as np
import pytest
import torch as T

import cltorch as torch
from cltorch.ops import conv as C
from cltorch.ops.conv import depthwise as DW


def _ct(a, device, grad=False):
    return torch.tensor(a, device=device, requires_grad=grad)


def _np(t):
    return t.detach().cpu().numpy()


def _uses_depthwise(device, groups, cin_per_group, mult, nd=2):
    rt = torch.empty(1, device=device)._runtime()
    geom = C.Geom.make(groups, (1,) * nd, (0,) * nd, (1,) * nd, (8,) * nd, (8,) * nd, (3,) * nd)
    return C._depthwise(rt, geom, cin_per_group, mult)


def _check(device, nd, n, c, sp, mult, ks, stride, padding, dilation, bias, dtype=np.float32, xform=None,
           rtol=1e-4, atol=1e-5):
    """conv{nd}d forward and backward (random output gradient) on device against torch."""
    rng = np.random.default_rng(nd * 100 + c * 10 + mult)
    x = rng.standard_normal((n, c) + sp).astype(dtype)
    w = rng.standard_normal((c * mult, 1) + ks).astype(dtype)
    b = rng.standard_normal(c * mult).astype(dtype) if bias else None
    tf = getattr(T.nn.functional, f"conv{nd}d")
    cf = getattr(torch.nn.functional, f"conv{nd}d")
    tx, tw = T.tensor(x, requires_grad=True), T.tensor(w, requires_grad=True)
    tb = T.tensor(b, requires_grad=True) if bias else None
    ref = tf(tx, tw, tb, stride, padding, dilation, c)
    g = rng.standard_normal(tuple(ref.shape)).astype(dtype)
    ref.backward(T.tensor(g))
    cx, cw = _ct(x, device, True), _ct(w, device, True)
    cb = _ct(b, device, True) if bias else None
    xin = xform(cx) if xform else cx
    y = cf(xin, cw, cb, stride, padding, dilation, c)
    assert tuple(y.shape) == tuple(ref.shape)
    np.testing.assert_allclose(_np(y), ref.detach().numpy(), rtol=rtol, atol=atol)
    y.backward(_ct(g, device))
    np.testing.assert_allclose(_np(cx.grad), tx.grad.numpy(), rtol=rtol, atol=atol)
    np.testing.assert_allclose(_np(cw.grad), tw.grad.numpy(), rtol=rtol, atol=atol * 10)
    if bias:
        np.testing.assert_allclose(_np(cb.grad), tb.grad.numpy(), rtol=rtol, atol=atol * 10)


CASES_2D = [
    # n, c, (h, w), mult, ks, stride, padding, dilation, bias
    (2, 4, (9, 13), 1, (3, 3), 1, 1, 1, True),          # MobileNet's: 3x3, pad 1
    (3, 5, (10, 11), 1, (3, 3), 2, 1, 1, False),        # stride 2, odd sizes (partial row blocks)
    (2, 3, (12, 17), 2, (3, 3), 1, 0, 1, True),         # multiplier 2
    (1, 6, (11, 9), 3, (5, 3), (2, 1), (2, 0), 1, True),  # rectangular kernel, mixed stride and padding
    (2, 4, (14, 20), 1, (3, 3), 1, 2, 2, True),         # dilation 2
    (2, 3, (7, 7), 2, (2, 4), (1, 3), (1, 2), (2, 1), False),
    (1, 2, (4, 4), 1, (3, 3), 1, 1, 1, True),           # 4x4 maps (MobileNet's last stage)
    (2, 3, (5, 40), 1, (1, 3), 1, (0, 1), 1, True),     # rows longer than a vector, tail of 5
]


@pytest.mark.parametrize("case", CASES_2D, ids=lambda c: "x".join(map(str, c[2])) + f"_m{c[3]}_s{c[5]}_d{c[7]}")
def test_conv2d_depthwise(device, case):
    n, c, sp, mult, ks, stride, padding, dilation, bias = case
    assert _uses_depthwise(device, c, 1, mult)
    _check(device, 2, n, c, sp, mult, ks, stride, padding, dilation, bias)


def test_conv1d_depthwise(device):
    _check(device, 1, 3, 4, (29,), 2, (3,), 2, 1, 1, True)
    _check(device, 1, 2, 3, (30,), 1, (5,), 1, 4, 2, False)


def test_conv3d_depthwise(device):
    _check(device, 3, 2, 3, (5, 6, 7), 1, (3, 3, 3), 1, 1, 1, True)
    _check(device, 3, 1, 2, (6, 5, 9), 2, (2, 3, 3), (2, 1, 2), (1, 0, 1), (1, 2, 1), False)


def test_padding_same_and_float64(device):
    _check(device, 2, 2, 3, (8, 10), 1, (3, 3), 1, "same", 1, True, dtype=np.float64, rtol=1e-10, atol=1e-11)
    _check(device, 2, 2, 3, (9, 9), 2, (4, 4), 1, "same", 1, False, dtype=np.float64, rtol=1e-10, atol=1e-11)


def test_non_contiguous_and_channels_last(device):
    # a transposed view (non-unit width stride) and channels_last (strides (HWC, 1, WC, C))
    _check(device, 2, 2, 3, (9, 11), 1, (3, 3), 1, 1, 1, True,
           xform=lambda t: t.transpose(2, 3).contiguous().transpose(2, 3))
    _check(device, 2, 2, 4, (10, 12), 2, (3, 3), 2, 1, 1, True,
           xform=lambda t: t.contiguous(memory_format=torch.channels_last))
    # a non-contiguous weight (a slice of a larger one) and output gradient
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    wb = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    ref = T.nn.functional.conv2d(T.tensor(x), T.tensor(wb)[:, :1], None, 1, 1, 1, 3)
    got = torch.nn.functional.conv2d(_ct(x, device), _ct(wb, device)[:, :1], None, 1, 1, 1, 3)
    np.testing.assert_allclose(_np(got), ref.numpy(), rtol=1e-4, atol=1e-5)


def test_float16(device):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 4, 9, 9)).astype(np.float16)
    w = rng.standard_normal((4, 1, 3, 3)).astype(np.float16)
    ref = T.nn.functional.conv2d(T.tensor(x).float(), T.tensor(w).float(), None, 1, 1, 1, 4)
    got = torch.nn.functional.conv2d(_ct(x, device), _ct(w, device), None, 1, 1, 1, 4)
    assert got.dtype is torch.float16
    np.testing.assert_allclose(_np(got).astype(np.float32), ref.numpy(), rtol=2e-3, atol=2e-3)


def test_conv_transpose_depthwise(device):
    """conv_transpose2d with groups == in_channels and one output channel per group is the depthwise adjoint."""
    rng = np.random.default_rng(9)
    for mult, stride, padding, opad, dil in ((1, 2, 1, 1, 1), (2, 1, 0, 0, 2), (3, 3, 2, 2, 1)):
        c = 3
        u = rng.standard_normal((2, c * mult, 6, 7)).astype(np.float32)
        w = rng.standard_normal((c * mult, 1, 3, 3)).astype(np.float32)
        b = rng.standard_normal(c).astype(np.float32)
        tu, tw, tb = (T.tensor(a, requires_grad=True) for a in (u, w, b))
        ref = T.nn.functional.conv_transpose2d(tu, tw, tb, stride, padding, opad, c, dil)
        g = rng.standard_normal(tuple(ref.shape)).astype(np.float32)
        ref.backward(T.tensor(g))
        cu, cw, cb = (_ct(a, device, True) for a in (u, w, b))
        y = torch.nn.functional.conv_transpose2d(cu, cw, cb, stride, padding, opad, c, dil)
        np.testing.assert_allclose(_np(y), ref.detach().numpy(), rtol=1e-4, atol=1e-5)
        y.backward(_ct(g, device))
        for got, want in ((cu, tu), (cw, tw), (cb, tb)):
            np.testing.assert_allclose(_np(got.grad), want.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_second_order_gradient(device):
    """The derivative of the input gradient in w runs the depthwise weight-gradient kernel (float64)."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 3, 7, 8))
    w = rng.standard_normal((6, 1, 3, 3))
    tx, tw = T.tensor(x, requires_grad=True), T.tensor(w, requires_grad=True)
    cx, cw = _ct(x, device, True), _ct(w, device, True)
    outs = []
    for lib, a, b in ((T, tx, tw), (torch, cx, cw)):
        y = lib.nn.functional.conv2d(a, b, None, 2, 1, 1, 3)
        (gx,) = lib.autograd.grad((y * y).sum(), a, create_graph=True)
        (gw,) = lib.autograd.grad((gx * gx).sum(), b)
        outs.append(gw)
    np.testing.assert_allclose(_np(outs[1]), outs[0].numpy(), rtol=1e-9, atol=1e-9)


def test_forced_algorithms_and_large_multipliers_take_other_paths(device):
    rt = torch.empty(1, device=device)._runtime()
    geom = C.Geom.make(4, (1, 1), (1, 1), (1, 1), (8, 8), (8, 8), (3, 3))
    assert DW.eligible(rt, geom, 1, 2)
    assert not DW.eligible(rt, geom, 2, 1)          # two input channels per group: grouped, not depthwise
    assert not DW.eligible(rt, C.Geom.make(1, (1, 1), (1, 1), (1, 1), (8, 8), (8, 8), (3, 3)), 1, 4)
    big = int(rt.profile.get_value("conv", "depthwise_max_mult", 8)) + 1
    assert not DW.eligible(rt, geom, 1, big)
    prev = C.set_algorithm("gemm")
    try:
        assert not C._depthwise(rt, geom, 1, 1)
    finally:
        C.set_algorithm(prev)
    # a multiplier above the limit still computes correctly (on the direct / GEMM path)
    _check(device, 2, 1, 2, (6, 6), big, (3, 3), 1, 1, 1, True)


@pytest.fixture
def deterministic():
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(False)


def _wgrad(device):
    rng = np.random.default_rng(13)
    # 16 x 24 x 24 rows of 24: many partial-sum blocks, several chunks of 256 in the second pass
    x = rng.standard_normal((16, 8, 24, 24)).astype(np.float32)
    w = rng.standard_normal((8, 1, 3, 3)).astype(np.float32)
    b = np.zeros(8, np.float32)
    g = rng.standard_normal((16, 8, 24, 24)).astype(np.float32)
    cw, cb = _ct(w, device, True), _ct(b, device, True)
    y = torch.nn.functional.conv2d(_ct(x, device), cw, cb, 1, 1, 1, 8)
    y.backward(_ct(g, device))
    return _np(cw.grad).copy(), _np(cb.grad).copy()


def test_weight_gradient_bit_identical_across_devices_in_deterministic_mode():
    devs = ["cpu"] + [f"cl:{i}" for i in range(torch.cl.device_count())]
    torch.use_deterministic_algorithms(True)
    try:
        res = [_wgrad(d) for d in devs]
    finally:
        torch.use_deterministic_algorithms(False)
    for d, (gw, gb) in zip(devs[1:], res[1:]):
        assert gw.tobytes() == res[0][0].tobytes(), d
        assert gb.tobytes() == res[0][1].tobytes(), d


def test_weight_gradient_does_not_depend_on_work_group_sizes(device, monkeypatch, deterministic):
    """Other work-group sizes and outputs per work-item leave the weight gradient's bits as they are. Checked in
    deterministic mode: by default Intel's CPU compiler may vectorise (reassociate) a work-item's sum loop,
    and whether it does depends on the work-group size (measured: a few ulp apart)."""
    gw0, gb0 = _wgrad(device)
    rt = torch.empty(1, device=device)._runtime()
    orig = rt.profile.get_value

    def other(section, key, default=None):
        if section == "conv" and key in ("dw_local", "dw_wgrad_local", "dw_mr"):
            return {"dw_local": 7, "dw_wgrad_local": 3, "dw_mr": 1}[key]
        return orig(section, key, default)
    monkeypatch.setattr(rt.profile, "get_value", other)
    gw1, gb1 = _wgrad(device)
    assert gw1.tobytes() == gw0.tobytes() and gb1.tobytes() == gb0.tobytes()
    # and the sums are as accurate as torch's (float64 reference)
    rng = np.random.default_rng(13)
    x = rng.standard_normal((16, 8, 24, 24))
    rng.standard_normal((8, 1, 3, 3))
    g = rng.standard_normal((16, 8, 24, 24)).astype(np.float32).astype(np.float64)
    x = x.astype(np.float32).astype(np.float64)
    tw = T.zeros((8, 1, 3, 3), dtype=T.float64, requires_grad=True)
    T.nn.functional.conv2d(T.tensor(x), tw, None, 1, 1, 1, 8).backward(T.tensor(g))
    np.testing.assert_allclose(gw0, tw.grad.numpy(), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("stride", [1, 2])
def test_forward_and_input_gradient_bits_do_not_depend_on_path_or_blocking(device, monkeypatch, stride):
    """The compiled row path (unit-stride rows) and the general path (rows read through a stride), and other
    outputs / rows per work-item and work-group sizes, give the same bits for the output and the input
    gradient (every lane adds its taps in one order)."""
    rng = np.random.default_rng(21 + stride)
    xn = rng.standard_normal((3, 5, 11, 13)).astype(np.float32)
    wn = rng.standard_normal((5, 1, 3, 3)).astype(np.float32)
    oh, ow = (11 - 1) // stride + 1, (13 - 1) // stride + 1
    gn = rng.standard_normal((3, 5, oh, ow)).astype(np.float32)

    def run(strided):
        def spread(a):        # the same values with W stride 2 (a view of a wider tensor): the general path
            big = np.zeros(a.shape[:3] + (2 * a.shape[3],), np.float32)
            big[..., ::2] = a
            return _ct(big, device)[..., ::2]
        x = (spread(xn) if strided else _ct(xn, device)).detach().requires_grad_(True)
        g = spread(gn) if strided else _ct(gn, device)
        y = torch.nn.functional.conv2d(x, _ct(wn, device), None, stride, 1, 1, 5)
        y.backward(g)
        return _np(y).copy(), _np(x.grad).copy()
    y0, gx0 = run(False)
    ty = T.nn.functional.conv2d(T.tensor(xn, dtype=T.float64), T.tensor(wn, dtype=T.float64), None, stride, 1, 1, 5)
    np.testing.assert_allclose(y0, ty.numpy(), rtol=1e-5, atol=1e-5)
    y1, gx1 = run(True)
    assert y1.tobytes() == y0.tobytes() and gx1.tobytes() == gx0.tobytes()
    rt = torch.empty(1, device=device)._runtime()
    orig = rt.profile.get_value

    def other(section, key, default=None):
        if section == "conv" and key in ("dw_local", "dw_mr", "dw_rows"):
            return {"dw_local": 5, "dw_mr": 2, "dw_rows": 3}[key]
        return orig(section, key, default)
    monkeypatch.setattr(rt.profile, "get_value", other)
    y2, gx2 = run(False)
    assert y2.tobytes() == y0.tobytes() and gx2.tobytes() == gx0.tobytes()


TILE_CASES = [
    # nd, n, c, spatial, mult, ks, stride, padding, dilation
    (2, 2, 4, (9, 13), 1, (3, 3), 1, 1, 1),
    (2, 3, 5, (10, 11), 1, (3, 3), 2, 1, 1),
    (2, 1, 6, (11, 9), 3, (5, 3), (2, 1), (2, 0), 1),
    (2, 2, 3, (7, 7), 2, (2, 4), (1, 3), (1, 2), (2, 1)),
    (2, 1, 2, (40, 70), 1, (3, 3), 1, 1, 1),            # several tiles in both directions
    (1, 3, 4, (29,), 2, (3,), 2, 1, 1),
    (3, 2, 3, (5, 6, 7), 1, (3, 3, 3), (1, 2, 1), 1, 1),
]


@pytest.mark.parametrize("case", TILE_CASES, ids=lambda c: f"{c[0]}d_" + "x".join(map(str, c[3])) + f"_m{c[4]}")
def test_gpu_tile_design_gives_the_same_bits(device, monkeypatch, case):
    """The GPU design (``[conv] dw_design = "tile"``, ops/conv/depthwise_tile.py: patches staged in local memory)
    runs forward, input and weight gradient here and gives the bits of the row kernels (the same terms in the same
    order), which the tests above hold to torch."""
    from cltorch.ops.conv import depthwise_tile as DT
    nd, n, c, sp, mult, ks, stride, padding, dilation = case
    rng = np.random.default_rng(31)
    x = rng.standard_normal((n, c) + sp).astype(np.float32)
    w = rng.standard_normal((c * mult, 1) + ks).astype(np.float32)
    b = rng.standard_normal(c * mult).astype(np.float32)
    rt = torch.empty(1, device=device)._runtime()
    orig = rt.profile.get_value
    ran = []

    def spy(name, fn):
        def call(*a):
            r = fn(*a)
            ran.append((name, r is not None and r is not False))      # None / False: the tile did not fit
            return r
        return call
    for name in ("forward", "transposed", "wgrad_part"):
        monkeypatch.setattr(DT, name, spy(name, getattr(DT, name)))
    outs = []
    for design in ("", "tile"):
        monkeypatch.setattr(rt.profile, "get_value",
                            lambda s, k, d=None, _v=design: _v if (s, k) == ("conv", "dw_design") else orig(s, k, d))
        cx, cw, cb = (_ct(a, device, True) for a in (x, w, b))
        y = getattr(torch.nn.functional, f"conv{nd}d")(cx, cw, cb, stride, padding, dilation, c)
        y.backward(_ct(np.random.default_rng(1).standard_normal(tuple(y.shape)).astype(np.float32), device))
        outs.append([_np(t).tobytes() for t in (y, cx.grad, cw.grad, cb.grad)])
    assert ran == [("forward", True), ("transposed", True), ("wgrad_part", True)]
    assert outs[1] == outs[0]
