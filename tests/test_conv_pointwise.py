"""1x1 convolutions (one tap, stride 1, no padding): conv.py runs their forward, input gradient and weight
gradient as GEMMs over the positions (no im2col / col2im). Values and gradients against numpy einsum references
in float64, with groups, bias, a batch of one, channels_last and sliced inputs, conv3d and conv_transpose2d."""
import numpy as np
import pytest

import cltorch as torch
from cltorch.ops import conv as C

DEVICES = ["cpu", "cl:0"]


def N(t):
    return np.asarray(t.detach().cpu().tolist(), dtype=np.float64)


def ref(x, w, b, groups):
    """y[n, g*Og+o, p] = sum_c w[g*Og+o, c] x[n, g*Cg+c, p] (+ b), in float64; x [N, C, *sp], w [O, Cg, 1..]."""
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    og = o // groups
    xs = x.reshape(n, groups, cg, -1).astype(np.float64)
    ws = w.reshape(groups, og, cg).astype(np.float64)
    y = np.einsum("goc,ngcp->ngop", ws, xs).reshape((n, o) + x.shape[2:])
    if b is not None:
        y = y + b.astype(np.float64).reshape((1, o) + (1,) * (x.ndim - 2))
    return y


def grads(x, w, g, groups):
    """(dx, dw, db) of sum(y * g) for y = ref(x, w, b, groups), in float64."""
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    og = o // groups
    xs = x.reshape(n, groups, cg, -1).astype(np.float64)
    ws = w.reshape(groups, og, cg).astype(np.float64)
    gs = g.reshape(n, groups, og, -1).astype(np.float64)
    dx = np.einsum("goc,ngop->ngcp", ws, gs).reshape(x.shape)
    dw = np.einsum("ngop,ngcp->goc", gs, xs).reshape(w.shape)
    return dx, dw, gs.sum(axis=(0, 3)).reshape(-1)


CASES = [  # (N, C, O, spatial, groups, bias, dtype)
    (3, 5, 7, (4, 6), 1, True, np.float32),
    (2, 6, 9, (5, 3), 3, False, np.float64),
    (1, 8, 4, (3, 3), 1, True, np.float32),
    (4, 16, 24, (8, 8), 1, False, np.float32),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CASES)
def test_pointwise_conv2d_values_and_grads(device, case):
    n, c, o, sp, groups, has_b, dt = case
    rng = np.random.default_rng(len(sp) + c + o)
    xn = rng.standard_normal((n, c) + sp).astype(dt)
    wn = rng.standard_normal((o, c // groups, 1, 1)).astype(dt)
    bn = rng.standard_normal(o).astype(dt) if has_b else None
    gn = rng.standard_normal((n, o) + sp).astype(dt)
    x = torch.tensor(xn, device=device, requires_grad=True)
    w = torch.tensor(wn, device=device, requires_grad=True)
    b = torch.tensor(bn, device=device, requires_grad=True) if has_b else None
    y = torch.nn.functional.conv2d(x, w, b, groups=groups)
    tol = 1e-12 if dt == np.float64 else 2e-5
    np.testing.assert_allclose(N(y), ref(xn, wn, bn, groups), rtol=tol, atol=tol)
    y.backward(torch.tensor(gn, device=device))
    dx, dw, db = grads(xn, wn, gn, groups)
    np.testing.assert_allclose(N(x.grad), dx, rtol=tol, atol=tol * 10)
    np.testing.assert_allclose(N(w.grad), dw, rtol=tol, atol=tol * 10)
    if has_b:
        np.testing.assert_allclose(N(b.grad), db, rtol=tol, atol=tol * 10)


@pytest.mark.parametrize("device", DEVICES)
def test_pointwise_strided_layouts_and_dilation(device):
    """channels_last and sliced inputs and gradients (read through strides or copied), dilation (no effect on
    one tap), and the same values through the forced direct kernels."""
    rng = np.random.default_rng(1)
    xn = rng.standard_normal((2, 6, 5, 9)).astype(np.float32)
    wn = rng.standard_normal((4, 6, 1, 1)).astype(np.float32)
    gn = rng.standard_normal((2, 4, 5, 9)).astype(np.float32)
    base = torch.tensor(xn, device=device)
    xcl = base.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)        # channels_last strides
    xsl = base[:, :, :, 1:9:2]                                             # a strided slice of W
    for x0, xref in ((xcl, xn), (xsl, xn[:, :, :, 1:9:2])):
        x = x0.detach().requires_grad_(True)
        w = torch.tensor(wn, device=device, requires_grad=True)
        y = torch.nn.functional.conv2d(x, w, dilation=2)
        np.testing.assert_allclose(N(y), ref(xref, wn, None, 1), rtol=2e-5, atol=2e-5)
        g = torch.tensor(gn[:, :, :, :xref.shape[3]].copy(), device=device).permute(0, 2, 3, 1).contiguous()
        y.backward(g.permute(0, 3, 1, 2))
        dx, dw, _ = grads(xref, wn, gn[:, :, :, :xref.shape[3]], 1)
        np.testing.assert_allclose(N(x.grad), dx, rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(N(w.grad), dw, rtol=2e-5, atol=2e-4)
        prev = C.set_algorithm("direct")
        try:
            np.testing.assert_allclose(N(torch.nn.functional.conv2d(x, w, dilation=2)), N(y), rtol=2e-5, atol=2e-5)
        finally:
            C.set_algorithm(prev)


@pytest.mark.parametrize("device", DEVICES)
def test_pointwise_conv3d_and_transpose(device):
    rng = np.random.default_rng(2)
    xn = rng.standard_normal((2, 3, 2, 3, 4)).astype(np.float64)
    wn = rng.standard_normal((5, 3, 1, 1, 1)).astype(np.float64)
    bn = rng.standard_normal(5).astype(np.float64)
    x = torch.tensor(xn, device=device, requires_grad=True)
    w = torch.tensor(wn, device=device, requires_grad=True)
    y = torch.nn.functional.conv3d(x, w, torch.tensor(bn, device=device))
    np.testing.assert_allclose(N(y), ref(xn, wn, bn, 1), rtol=1e-12, atol=1e-12)
    gn = rng.standard_normal(y.shape).astype(np.float64)
    y.backward(torch.tensor(gn, device=device))
    dx, dw, _ = grads(xn, wn, gn, 1)
    np.testing.assert_allclose(N(x.grad), dx, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(N(w.grad), dw, rtol=1e-12, atol=1e-12)
    # conv_transpose2d with a 1x1 kernel: z = W^T u + b (weight [Cin, Cout, 1, 1]); its weight gradient too
    un = rng.standard_normal((3, 4, 2, 5)).astype(np.float64)
    wtn = rng.standard_normal((4, 6, 1, 1)).astype(np.float64)
    btn = rng.standard_normal(6).astype(np.float64)
    u = torch.tensor(un, device=device, requires_grad=True)
    wt = torch.tensor(wtn, device=device, requires_grad=True)
    z = torch.nn.functional.conv_transpose2d(u, wt, torch.tensor(btn, device=device))
    zref = np.einsum("io,nip->nop", wtn[:, :, 0, 0], un.reshape(3, 4, -1)).reshape(3, 6, 2, 5) \
        + btn[None, :, None, None]
    np.testing.assert_allclose(N(z), zref, rtol=1e-12, atol=1e-12)
    hz = rng.standard_normal(z.shape).astype(np.float64)
    z.backward(torch.tensor(hz, device=device))
    np.testing.assert_allclose(N(wt.grad), np.einsum("nip,nop->io", un.reshape(3, 4, -1),
                                                     hz.reshape(3, 6, -1))[:, :, None, None], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(N(u.grad), np.einsum("io,nop->nip", wtn[:, :, 0, 0], hz.reshape(3, 6, -1))
                               .reshape(un.shape), rtol=1e-12, atol=1e-12)
