"""conv1d / conv2d / conv_transpose1d / conv_transpose2d against straightforward numpy references, on every
device and through both algorithms (direct implicit-GEMM kernels and im2col + GEMM); gradients against
numpy adjoints and finite differences (float64 gradcheck / gradgradcheck); PyTorch's errors."""
import numpy as np
import pytest

import cltorch as torch
from cltorch.autograd import gradcheck, gradgradcheck
from cltorch.ops import conv as C

DEVICES = ["cpu"] + [f"cl:{i}" for i in range(torch.cl.device_count())]
ALGOS = ["direct", "gemm"]


@pytest.fixture(params=ALGOS)
def algo(request):
    prev = C.set_algorithm(request.param)
    yield request.param
    C.set_algorithm(prev)


def T(a, device, dtype=None, requires_grad=False):
    dtype = dtype or (torch.float64 if a.dtype == np.float64 else torch.float32)
    return torch.tensor(a, dtype=dtype, device=device, requires_grad=requires_grad)


def N(t):
    return np.asarray(t.detach().cpu().tolist(), dtype=np.float64)


# ------------------------------------------------------------------------------------------- references
def ref_conv2d(x, w, b=None, stride=(1, 1), pad=((0, 0), (0, 0)), dil=(1, 1), groups=1):
    """Direct definition: y[n,o,p,q] = sum_{c,i,j} w[o,c,i,j] * xpad[n, g*Cg+c, p*s+i*d, q*s+j*d]."""
    x = x.astype(np.float64)
    w = w.astype(np.float64)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (pt, pb), (pl, pr) = pad
    xp = np.zeros((n, c, h + pt + pb, wd + pl + pr))
    xp[:, :, pt:pt + h, pl:pl + wd] = x
    oh = (h + pt + pb - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + pl + pr - dil[1] * (kw - 1) - 1) // stride[1] + 1
    y = np.zeros((n, o, oh, ow))
    og = o // groups
    for oc in range(o):
        g = oc // og
        for p in range(oh):
            for q in range(ow):
                for i in range(kh):
                    for j in range(kw):
                        hh, ww = p * stride[0] + i * dil[0], q * stride[1] + j * dil[1]
                        y[:, oc, p, q] += xp[:, g * cg:(g + 1) * cg, hh, ww] @ w[oc, :, i, j]
    if b is not None:
        y += b.astype(np.float64)[None, :, None, None]
    return y


def ref_conv_transpose2d(u, w, b=None, stride=(1, 1), padding=(0, 0), output_padding=(0, 0), dil=(1, 1),
                         groups=1):
    """Scatter definition: every u[n, o, p, q] adds u * w[o, c, i, j] at (p*s - pad + i*d, q*s - pad + j*d)."""
    u = u.astype(np.float64)
    w = w.astype(np.float64)
    n, cin, h, wd = u.shape
    _, cg, kh, kw = w.shape
    og = cin // groups
    H = (h - 1) * stride[0] - 2 * padding[0] + dil[0] * (kh - 1) + output_padding[0] + 1
    W = (wd - 1) * stride[1] - 2 * padding[1] + dil[1] * (kw - 1) + output_padding[1] + 1
    z = np.zeros((n, cg * groups, H, W))
    for oc in range(cin):
        g = oc // og
        for p in range(h):
            for q in range(wd):
                for i in range(kh):
                    for j in range(kw):
                        hh = p * stride[0] - padding[0] + i * dil[0]
                        ww = q * stride[1] - padding[1] + j * dil[1]
                        if 0 <= hh < H and 0 <= ww < W:
                            z[:, g * cg:(g + 1) * cg, hh, ww] += u[:, oc, p, q][:, None] * w[oc, :, i, j][None, :]
    if b is not None:
        z += b.astype(np.float64)[None, :, None, None]
    return z


def ref_conv_weight_grad(x, g, wshape, stride, pad, dil, groups):
    """dL/dw[o,c,i,j] = sum_{n,p,q} g[n,o,p,q] * xpad[n, grp*Cg + c, p*s + i*d, q*s + j*d]."""
    x = x.astype(np.float64)
    n, c, h, wd = x.shape
    o, cg, kh, kw = wshape
    (pt, pb), (pl, pr) = pad
    xp = np.zeros((n, c, h + pt + pb, wd + pl + pr))
    xp[:, :, pt:pt + h, pl:pl + wd] = x
    oh, ow = g.shape[2], g.shape[3]
    gw = np.zeros(wshape)
    og = o // groups
    for oc in range(o):
        grp = oc // og
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, grp * cg:(grp + 1) * cg, i * dil[0]:i * dil[0] + stride[0] * (oh - 1) + 1:stride[0],
                           j * dil[1]:j * dil[1] + stride[1] * (ow - 1) + 1:stride[1]]
                gw[oc, :, i, j] = np.einsum("nchw,nhw->c", patch, g[:, oc])
    return gw


# ------------------------------------------------------------------------------------------- forward values
CONV2D_CASES = [
    # N, C, H, W, O, kh, kw, stride, padding, dilation, groups, bias
    (2, 3, 7, 6, 5, 3, 3, 1, 1, 1, 1, True),
    (2, 4, 9, 8, 6, 3, 2, (2, 1), (0, 1), 1, 2, True),
    (1, 2, 8, 8, 17, 2, 2, 1, 2, 2, 1, False),
    (3, 6, 5, 5, 6, 1, 1, 1, 0, 1, 3, True),          # 1x1, depthwise-ish
    (2, 3, 6, 7, 4, 1, 1, 2, 0, 1, 1, False),         # strided 1x1
    (2, 1, 8, 8, 16, 3, 3, 1, 1, 1, 1, True),         # the CNN's first layer
    (1, 3, 5, 6, 4, 3, 3, 1, "same", (2, 1), 1, True),
    (1, 2, 5, 6, 3, 2, 4, 1, "same", 1, 1, False),    # even kernels: extra pad bottom/right
    (2, 2, 6, 6, 2, 3, 3, 1, "valid", 2, 1, True),
]


def _pads(padding, kh, kw, dil):
    if padding == "valid":
        return ((0, 0), (0, 0))
    if padding == "same":
        out = []
        for k, d in zip((kh, kw), dil):
            t = d * (k - 1)
            out.append((t // 2, t - t // 2))
        return tuple(out)
    p = padding if isinstance(padding, tuple) else (padding, padding)
    return ((p[0], p[0]), (p[1], p[1]))


def _pair(v):
    return v if isinstance(v, tuple) else (v, v)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CONV2D_CASES)
def test_conv2d_forward(device, case, algo):
    n, c, h, w_, o, kh, kw, stride, padding, dil, groups, bias = case
    rng = np.random.default_rng(hash(case) % 2 ** 32)
    x = rng.standard_normal((n, c, h, w_)).astype(np.float32)
    w = rng.standard_normal((o, c // groups, kh, kw)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32) if bias else None
    y = C.conv2d(T(x, device), T(w, device), T(b, device) if bias else None, stride, padding, dil, groups)
    ref = ref_conv2d(x, w, b, _pair(stride), _pads(padding, kh, kw, _pair(dil)), _pair(dil), groups)
    assert tuple(y.shape) == ref.shape
    assert y.device == torch.device(device)
    np.testing.assert_allclose(N(y), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_conv2d_float64_and_noncontiguous_input(device, algo):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 2, 6, 5))
    w = rng.standard_normal((4, 2, 3, 3))
    xt = T(x.transpose(0, 1, 3, 2).copy(), device).transpose(2, 3)     # non-contiguous view with x's values
    assert not xt.is_contiguous()
    y = C.conv2d(xt, T(w, device), None, 1, 1)
    assert y.dtype == torch.float64
    np.testing.assert_allclose(N(y), ref_conv2d(x, w, None, (1, 1), ((1, 1), (1, 1))), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("device", DEVICES)
def test_conv2d_unbatched_and_conv1d(device, algo):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 5, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 2, 3)).astype(np.float32)
    y = C.conv2d(T(x, device), T(w, device), padding=1)
    assert tuple(y.shape) == (4, 6, 6)
    np.testing.assert_allclose(N(y), ref_conv2d(x[None], w, None, (1, 1), ((1, 1), (1, 1)))[0], rtol=1e-4,
                               atol=1e-4)
    x1 = rng.standard_normal((2, 4, 11)).astype(np.float32)
    w1 = rng.standard_normal((6, 2, 3)).astype(np.float32)
    b1 = rng.standard_normal(6).astype(np.float32)
    for stride, padding, dil in [(1, 0, 1), (2, 2, 1), (1, "same", 3), (3, 1, 2)]:
        y1 = C.conv1d(T(x1, device), T(w1, device), T(b1, device), stride, padding, dil, 2)
        p = (dil * 2 // 2, dil * 2 - dil * 2 // 2) if padding == "same" else (padding, padding)
        ref = ref_conv2d(x1[:, :, None], w1[:, :, None], b1, (1, stride), ((0, 0), p), (1, dil), 2)[:, :, 0]
        assert tuple(y1.shape) == ref.shape
        np.testing.assert_allclose(N(y1), ref, rtol=1e-4, atol=1e-4)
    y1u = C.conv1d(T(x1[0], device), T(w1, device), None, groups=2)
    assert tuple(y1u.shape) == (6, 9)


@pytest.mark.parametrize("device", DEVICES)
def test_conv2d_padding_same_literals(device, algo):
    # values from PyTorch 2.13 (the handed case): dilated 'same', even-kernel 'same', dilated 'valid'
    x = torch.arange(30, dtype=torch.float32, device=device).reshape(1, 1, 5, 6)
    w3 = torch.ones(1, 1, 3, 3, device=device)
    assert N(C.conv2d(x, w3, padding="same", dilation=2)).tolist() == \
        [[[[28, 32, 48, 54, 36, 40], [52, 56, 84, 90, 60, 64], [78, 84, 126, 135, 90, 96],
           [52, 56, 84, 90, 60, 64], [76, 80, 120, 126, 84, 88]]]]
    assert N(C.conv2d(x, torch.ones(1, 1, 2, 2, device=device), padding="same")).tolist() == \
        [[[[14, 18, 22, 26, 30, 16], [38, 42, 46, 50, 54, 28], [62, 66, 70, 74, 78, 40],
           [86, 90, 94, 98, 102, 52], [49, 51, 53, 55, 57, 29]]]]
    assert N(C.conv2d(x, w3, padding="valid", dilation=2)).tolist() == [[[[126, 135]]]]
    with pytest.raises(RuntimeError):
        C.conv2d(x, w3, padding="same", stride=2)


TRANSPOSE_CASES = [
    # N, Cin, H, W, Cout, kh, kw, stride, padding, output_padding, groups, dilation, bias
    (2, 3, 4, 5, 2, 3, 3, 1, 0, 0, 1, 1, True),
    (2, 4, 3, 3, 6, 3, 2, 2, 1, 1, 2, 1, True),
    (1, 2, 4, 3, 3, 2, 2, (2, 3), (0, 1), (1, 2), 1, 1, False),
    (1, 2, 3, 4, 2, 3, 3, 1, 1, (1, 0), 1, (2, 1), True),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", TRANSPOSE_CASES)
def test_conv_transpose2d_forward(device, case, algo):
    n, cin, h, w_, cout, kh, kw, stride, padding, opad, groups, dil, bias = case
    rng = np.random.default_rng(hash(case) % 2 ** 32)
    u = rng.standard_normal((n, cin, h, w_)).astype(np.float32)
    w = rng.standard_normal((cin, cout // groups, kh, kw)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32) if bias else None
    z = C.conv_transpose2d(T(u, device), T(w, device), T(b, device) if bias else None, stride, padding, opad,
                           groups, dil)
    ref = ref_conv_transpose2d(u, w, b, _pair(stride), _pair(padding), _pair(opad), _pair(dil), groups)
    assert tuple(z.shape) == ref.shape
    np.testing.assert_allclose(N(z), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_conv_transpose1d_forward(device, algo):
    rng = np.random.default_rng(3)
    u = rng.standard_normal((2, 4, 5)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3)).astype(np.float32)
    z = C.conv_transpose1d(T(u, device), T(w, device), None, stride=2, padding=1, output_padding=1, groups=2)
    ref = ref_conv_transpose2d(u[:, :, None], w[:, :, None], None, (1, 2), (0, 1), (0, 1), (1, 1), 2)[:, :, 0]
    assert tuple(z.shape) == ref.shape == (2, 6, 10)
    np.testing.assert_allclose(N(z), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", [CONV2D_CASES[0], CONV2D_CASES[1], CONV2D_CASES[2], CONV2D_CASES[7]])
def test_conv2d_backward_values(device, case, algo):
    n, c, h, w_, o, kh, kw, stride, padding, dil, groups, bias = case
    rng = np.random.default_rng(7)
    x = rng.standard_normal((n, c, h, w_)).astype(np.float32)
    w = rng.standard_normal((o, c // groups, kh, kw)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    xt, wt, bt = T(x, device, requires_grad=True), T(w, device, requires_grad=True), T(b, device, requires_grad=True)
    y = C.conv2d(xt, wt, bt, stride, padding, dil, groups)
    g = rng.standard_normal(tuple(y.shape)).astype(np.float32)
    y.backward(T(g, device))
    pads = _pads(padding, kh, kw, _pair(dil))
    # grad_input: the transposed convolution of g, cut to x's size (right/bottom rows no window reached get 0)
    s, d = _pair(stride), _pair(dil)
    gx_full = ref_conv_transpose2d(g, w, None, s, (0, 0), (0, 0), d, groups)
    gx_pad = np.zeros((n, c, h + pads[0][0] + pads[0][1], w_ + pads[1][0] + pads[1][1]))
    hh, ww = min(gx_full.shape[2], gx_pad.shape[2]), min(gx_full.shape[3], gx_pad.shape[3])
    gx_pad[:, :, :hh, :ww] = gx_full[:, :, :hh, :ww]
    gx_ref = gx_pad[:, :, pads[0][0]:pads[0][0] + h, pads[1][0]:pads[1][0] + w_]
    np.testing.assert_allclose(N(xt.grad), gx_ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(N(wt.grad), ref_conv_weight_grad(x, g, w.shape, s, pads, d, groups), rtol=1e-4,
                               atol=1e-4)
    np.testing.assert_allclose(N(bt.grad), g.astype(np.float64).sum((0, 2, 3)), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_conv_adjoint_identities(device, algo):
    # <conv(x, w), u> == <x, conv_t(u, w)>: the transposed convolution is the adjoint, in both algorithms
    rng = np.random.default_rng(11)
    x = T(rng.standard_normal((2, 4, 7, 6)), device)
    w = T(rng.standard_normal((6, 2, 3, 2)), device)
    y = C.conv2d(x, w, None, (2, 1), (1, 0), (1, 2), 2)
    u = T(rng.standard_normal(tuple(y.shape)), device)
    z = C.conv_transpose2d(u, w, None, (2, 1), (1, 0), (0, 0), 2, (1, 2))
    assert tuple(z.shape) == tuple(x.shape)
    assert abs(float((y * u).sum()) - float((x * z).sum())) < 1e-9 * max(1.0, abs(float((y * u).sum())))


# ------------------------------------------------------------------------------------------- gradcheck
@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck_conv2d(device, algo):
    rng = np.random.default_rng(4)
    x = T(rng.standard_normal((1, 2, 4, 3)), device, requires_grad=True)
    w = T(rng.standard_normal((2, 1, 2, 2)), device, requires_grad=True)
    b = T(rng.standard_normal(2), device, requires_grad=True)
    f = lambda x, w, b: C.conv2d(x, w, b, stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2)  # noqa: E731
    assert gradcheck(f, (x, w, b))
    assert gradgradcheck(lambda x, w: C.conv2d(x, w, None, padding="same", groups=2), (x, w))
    # weight and bias gradients together (one fused op), and the bias alone
    assert gradgradcheck(lambda x, w, b: C.conv2d(x, w, b, padding=1, groups=2), (x, w, b))
    w.requires_grad_(False)
    assert gradgradcheck(lambda x, b: C.conv2d(x, w, b, stride=2, groups=2), (x, b))


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck_conv1d_and_transpose(device, algo):
    rng = np.random.default_rng(5)
    x = T(rng.standard_normal((1, 2, 5)), device, requires_grad=True)
    w = T(rng.standard_normal((2, 2, 2)), device, requires_grad=True)
    assert gradcheck(lambda x, w: C.conv1d(x, w, None, stride=2, padding=1), (x, w))
    u = T(rng.standard_normal((1, 2, 2, 2)), device, requires_grad=True)
    wt = T(rng.standard_normal((2, 1, 2, 2)), device, requires_grad=True)
    bt = T(rng.standard_normal(2), device, requires_grad=True)
    f = lambda u, w, b: C.conv_transpose2d(u, w, b, stride=2, padding=1, output_padding=1, groups=2)  # noqa: E731
    assert gradcheck(f, (u, wt, bt))
    assert gradgradcheck(lambda u, w: C.conv_transpose2d(u, w, None, stride=2, groups=2), (u, wt))


@pytest.mark.parametrize("device", DEVICES)
def test_double_backward_grad_input_wrt_weight(device, algo):
    # d/dw of sum(grad_x * v) where grad_x = dL/dx: exercises convolution_transpose's backward
    rng = np.random.default_rng(6)
    x = T(rng.standard_normal((2, 2, 5, 5)), device, requires_grad=True)
    w = T(rng.standard_normal((3, 2, 3, 3)), device, requires_grad=True)
    y = C.conv2d(x, w, None, 1, 1)
    g = T(rng.standard_normal(tuple(y.shape)), device)
    (gx,) = torch.autograd.grad(y, [x], g, create_graph=True)
    v = rng.standard_normal(tuple(x.shape))
    (gw,) = torch.autograd.grad((gx * T(v, device)).sum(), [w])
    # sum(gx * v) = <conv_t(g, w), v> = <w, conv_w(v, g)>  -> gradient = weight grad of conv(v) with output grad g
    ref = ref_conv_weight_grad(v, N(g), (3, 2, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 1)
    np.testing.assert_allclose(N(gw), ref, rtol=1e-9, atol=1e-9)


# ------------------------------------------------------------------------------------------- misc paths
@pytest.mark.parametrize("device", DEVICES)
def test_gemm_path_chunks_the_batch(device, monkeypatch):
    prev = C.set_algorithm("gemm")
    try:
        from cltorch.ops.conv import im2col
        monkeypatch.setattr(im2col, "_col_chunk", lambda rt, n, per: 2)
        rng = np.random.default_rng(8)
        x = rng.standard_normal((5, 3, 6, 6)).astype(np.float32)
        w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
        xt, wt = T(x, device, requires_grad=True), T(w, device, requires_grad=True)
        y = C.conv2d(xt, wt, None, 1, 1)
        np.testing.assert_allclose(N(y), ref_conv2d(x, w, None, (1, 1), ((1, 1), (1, 1))), rtol=1e-4, atol=1e-4)
        g = np.ones(tuple(y.shape), np.float32)
        y.backward(T(g, device))
        np.testing.assert_allclose(N(wt.grad), ref_conv_weight_grad(x, g, w.shape, (1, 1), ((1, 1), (1, 1)), (1, 1), 1),
                                   rtol=1e-4, atol=1e-3)
    finally:
        C.set_algorithm(prev)


def test_cpu_misaligned_host_memory_gemm_path():
    # numpy memory that is only 4-byte aligned must not reach the GEMM's aligned vector accesses
    prev = C.set_algorithm("gemm")
    try:
        rng = np.random.default_rng(9)
        raw = rng.standard_normal(1 + 2 * 16 * 8 * 8 + 64).astype(np.float32)
        for shift in range(1, 5):
            xa = raw[shift:shift + 2 * 16 * 8 * 8].reshape(2, 16, 8, 8)
            x = torch.from_numpy(xa)
            w = rng.standard_normal((16, 16, 1, 1)).astype(np.float32)
            y = C.conv2d(x, T(w, "cpu"))
            np.testing.assert_allclose(N(y), ref_conv2d(xa, w), rtol=1e-4, atol=1e-4)
    finally:
        C.set_algorithm(prev)


@pytest.mark.parametrize("device", DEVICES)
def test_empty_batch_and_zero_channels(device):
    x = torch.zeros(0, 3, 5, 5, device=device)
    w = torch.ones(2, 3, 3, 3, device=device)
    assert tuple(C.conv2d(x, w).shape) == (0, 2, 3, 3)


# ------------------------------------------------------------------------------------------- errors
@pytest.mark.parametrize("device", DEVICES)
def test_conv_errors(device):
    x = torch.zeros(1, 4, 5, 5, device=device)
    w = torch.zeros(2, 4, 3, 3, device=device)
    with pytest.raises(RuntimeError):
        C.conv2d(x, w, padding="same", stride=(1, 2))
    with pytest.raises(RuntimeError):
        C.conv2d(x, w, padding="full")
    with pytest.raises(RuntimeError):        # channels
        C.conv2d(x, torch.zeros(2, 3, 3, 3, device=device))
    with pytest.raises(RuntimeError):        # groups must divide the output channels
        C.conv2d(x, torch.zeros(3, 2, 3, 3, device=device), groups=2)
    with pytest.raises(RuntimeError):        # kernel larger than the padded input
        C.conv2d(x, torch.zeros(2, 4, 6, 6, device=device))
    with pytest.raises(RuntimeError):
        C.conv2d(x, w, stride=0)
    with pytest.raises(RuntimeError):
        C.conv2d(x, w, padding=-1)
    with pytest.raises(RuntimeError):
        C.conv2d(torch.zeros(4, 5, device=device), w)
    with pytest.raises(RuntimeError):        # dtype mismatch
        C.conv2d(x, w.double())
    with pytest.raises(RuntimeError):        # integer input
        C.conv2d(torch.zeros(1, 4, 5, 5, dtype=torch.int64, device=device), w.long())
    with pytest.raises(RuntimeError):        # bias size
        C.conv2d(x, w, torch.zeros(3, device=device))
    with pytest.raises(RuntimeError):        # output_padding must be < stride or dilation
        C.conv_transpose2d(torch.zeros(1, 2, 3, 3, device=device), torch.zeros(2, 2, 3, 3, device=device),
                           output_padding=1)
    with pytest.raises(RuntimeError):
        C.conv_transpose2d(torch.zeros(1, 3, 3, 3, device=device), torch.zeros(2, 2, 3, 3, device=device))
