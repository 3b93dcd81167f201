"""Fused softmax/log_softmax and the normalisation layers against numpy references, on every device;
gradients against numpy formulas and finite differences (gradcheck / gradgradcheck in float64)."""
import numpy as np
import pytest

import cltorch as torch
from cltorch.autograd import gradcheck, gradgradcheck
from cltorch.ops.softmax import softmax, log_softmax, safe_softmax
from cltorch.ops.norms import layer_norm, rms_norm, group_norm, batch_norm

DEVICES = ["cpu"] + [f"cl:{i}" for i in range(torch.cl.device_count())]
on_devices = pytest.mark.parametrize("device", DEVICES)


def T(a, device, dtype=None, rg=False):
    a = np.asarray(a)
    return torch.tensor(a, device=device, dtype=dtype, requires_grad=rg)


def A(t):
    return np.array(t.detach().cpu().tolist(), dtype=np.float64)


def np_softmax(a, d):
    e = np.exp(a - a.max(d, keepdims=True))
    return e / e.sum(d, keepdims=True)


def np_log_softmax(a, d):
    m = a.max(d, keepdims=True)
    return a - m - np.log(np.exp(a - m).sum(d, keepdims=True))


# ---------------------------------------------------------------------------------------------- softmax
@on_devices
@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_softmax_log_softmax_values_any_dim(device, dim):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((3, 5, 7)) * 30).astype(np.float32)
    x = T(a, device)
    np.testing.assert_allclose(A(softmax(x, dim)), np_softmax(a.astype(np.float64), dim), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(A(log_softmax(x, dim)), np_log_softmax(a.astype(np.float64), dim), rtol=1e-5,
                               atol=1e-4)
    # a non-contiguous (transposed) input
    xt = x.transpose(0, 2)
    np.testing.assert_allclose(A(xt.softmax(dim)), np_softmax(a.transpose(2, 1, 0).astype(np.float64), dim),
                               rtol=1e-5, atol=1e-6)


@on_devices
def test_softmax_large_logits_and_special_rows(device):
    a = np.array([[1e4, 1e4 + 1, -1e4], [88.0, 89.0, 90.0], [-np.inf, 0.0, 1.0], [-np.inf, -np.inf, -np.inf]],
                 np.float32)
    y = A(softmax(T(a, device), 1))
    np.testing.assert_allclose(y[:3], np_softmax(np.where(np.isinf(a[:3]), -1e30, a[:3]).astype(np.float64), 1),
                               rtol=1e-5, atol=1e-7)
    assert np.isnan(y[3]).all()                                   # PyTorch: a row of -inf gives NaN
    ls = A(log_softmax(T(a, device), 1))
    np.testing.assert_allclose(ls[0], [-1 - np.log1p(np.exp(-1)), -np.log1p(np.exp(-1)), -2e4 - 1
                                       - np.log1p(np.exp(-1))], rtol=1e-6)
    assert ls[2, 0] == -np.inf
    # the safe variant (SDPA's math path) gives zeros for the all -inf row
    ys = A(safe_softmax(T(a, device), 1))
    np.testing.assert_allclose(ys[3], 0.0)
    np.testing.assert_allclose(ys[:3], y[:3], rtol=1e-6)


@on_devices
def test_softmax_dtype_arg_scalar_and_errors(device):
    x = T(np.arange(6).reshape(2, 3), device)   # int64
    with pytest.raises(RuntimeError):
        softmax(x, 1)
    y = softmax(x, 1, dtype=torch.float64)
    assert y.dtype is torch.float64
    np.testing.assert_allclose(A(y), np_softmax(np.arange(6.0).reshape(2, 3), 1), rtol=1e-12)
    with pytest.raises(IndexError):
        softmax(T(np.ones((2, 3), np.float32), device), 2)
    s = softmax(T(np.float32(3.0), device), 0)
    assert s.shape == () and s.item() == 1.0
    e = softmax(torch.empty(0, 4, device=device), 1)
    assert e.shape == (0, 4)


@on_devices
@pytest.mark.parametrize("log", [False, True])
def test_softmax_backward_matches_numpy(device, log):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 6)).astype(np.float32)
    g = rng.standard_normal((4, 6)).astype(np.float32)
    x = T(a, device, rg=True)
    y = (log_softmax if log else softmax)(x, 0)
    y.backward(T(g, device))
    a64, g64 = a.astype(np.float64), g.astype(np.float64)
    if log:
        ref = g64 - np.exp(np_log_softmax(a64, 0)) * g64.sum(0, keepdims=True)
    else:
        p = np_softmax(a64, 0)
        ref = p * (g64 - (g64 * p).sum(0, keepdims=True))
    np.testing.assert_allclose(A(x.grad), ref, rtol=1e-5, atol=1e-6)


@on_devices
@pytest.mark.parametrize("log", [False, True])
def test_softmax_gradcheck_and_gradgradcheck(device, log):
    rng = np.random.default_rng(2)
    x = T(rng.standard_normal((2, 3, 2)), device, torch.float64, rg=True)
    f = (lambda t: log_softmax(t, 1)) if log else (lambda t: softmax(t, 1))
    assert gradcheck(f, (x,))
    assert gradgradcheck(f, (x,))


# ------------------------------------------------------------------------------------------------ layer norm
def np_layer_norm(a, k, w=None, b=None, eps=1e-5, center=True):
    axes = tuple(range(a.ndim - k, a.ndim))
    mu = a.mean(axes, keepdims=True) if center else 0.0
    var = ((a - mu) ** 2).mean(axes, keepdims=True)
    y = (a - mu) / np.sqrt(var + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y


@on_devices
@pytest.mark.parametrize("affine", [False, True])
def test_layer_norm_forward_backward(device, affine):
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((3, 4, 5)) * 3 + 2).astype(np.float32)
    w = rng.standard_normal((4, 5)).astype(np.float32) if affine else None
    b = rng.standard_normal((4, 5)).astype(np.float32) if affine else None
    g = rng.standard_normal((3, 4, 5)).astype(np.float32)
    x = T(a, device, rg=True)
    wt = T(w, device, rg=True) if affine else None
    bt = T(b, device, rg=True) if affine else None
    y = layer_norm(x, (4, 5), wt, bt, eps=1e-3)
    np.testing.assert_allclose(A(y), np_layer_norm(a.astype(np.float64), 2, w, b, 1e-3), rtol=1e-4, atol=1e-5)
    y.backward(T(g, device))
    # numpy reference of the gradients (the standard formulas, in float64)
    a2, g2 = a.reshape(3, 20).astype(np.float64), g.reshape(3, 20).astype(np.float64)
    mu = a2.mean(1, keepdims=True)
    rstd = 1 / np.sqrt(((a2 - mu) ** 2).mean(1, keepdims=True) + 1e-3)
    xh = (a2 - mu) * rstd
    gh = g2 * (w.reshape(1, 20) if affine else 1.0)
    gi = rstd * (gh - gh.mean(1, keepdims=True) - xh * (gh * xh).mean(1, keepdims=True))
    np.testing.assert_allclose(A(x.grad).reshape(3, 20), gi, rtol=1e-4, atol=1e-5)
    if affine:
        np.testing.assert_allclose(A(wt.grad).reshape(20), (g2 * xh).sum(0), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(A(bt.grad).reshape(20), g2.sum(0), rtol=1e-5, atol=1e-5)


@on_devices
def test_layer_norm_handed_eps_and_errors(device):
    x = T([[1.0, 2.0, 3.0, 4.0], [2.0, 2.0, 2.0, 2.0]], device, torch.float32)
    np.testing.assert_allclose(A(layer_norm(x, (4,), eps=1.0)), [[-1.0, -0.33333334, 0.33333334, 1.0], [0] * 4],
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="normalized_shape"):
        layer_norm(x, (3,))
    with pytest.raises(RuntimeError):
        layer_norm(x, 4, weight=T(np.ones(3, np.float32), device))


@on_devices
def test_layer_norm_gradcheck_and_double_backward(device):
    rng = np.random.default_rng(4)
    x = T(rng.standard_normal((2, 4)), device, torch.float64, rg=True)
    w = T(rng.standard_normal(4), device, torch.float64, rg=True)
    b = T(rng.standard_normal(4), device, torch.float64, rg=True)
    f = lambda x, w, b: layer_norm(x, (4,), w, b, 1e-5)   # noqa: E731
    assert gradcheck(f, (x, w, b))
    assert gradgradcheck(f, (x, w, b))


@on_devices
def test_rms_norm(device):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 6)).astype(np.float32)
    w = rng.standard_normal(6).astype(np.float32)
    x, wt = T(a, device, rg=True), T(w, device, rg=True)
    y = rms_norm(x, (6,), wt)
    eps = np.finfo(np.float32).eps
    a64 = a.astype(np.float64)
    rstd = 1 / np.sqrt((a64 ** 2).mean(1, keepdims=True) + eps)
    np.testing.assert_allclose(A(y), a64 * rstd * w, rtol=1e-5, atol=1e-6)
    g = rng.standard_normal((3, 6))
    y.backward(T(g.astype(np.float32), device))
    xh = a64 * rstd
    gh = g * w
    np.testing.assert_allclose(A(x.grad), rstd * (gh - xh * (gh * xh).mean(1, keepdims=True)), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(A(wt.grad), (g * xh).sum(0), rtol=1e-4, atol=1e-5)
    x64 = T(rng.standard_normal((2, 3)), device, torch.float64, rg=True)
    w64 = T(rng.standard_normal(3), device, torch.float64, rg=True)
    assert gradcheck(lambda x, w: rms_norm(x, 3, w, eps=1e-6), (x64, w64))
    assert gradgradcheck(lambda x, w: rms_norm(x, 3, w, eps=1e-6), (x64, w64))


# ------------------------------------------------------------------------------------------------ group norm
@on_devices
def test_group_norm(device):
    rng = np.random.default_rng(6)
    a = rng.standard_normal((2, 6, 3, 2)).astype(np.float32)
    w = rng.standard_normal(6).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    x, wt, bt = T(a, device, rg=True), T(w, device, rg=True), T(b, device, rg=True)
    y = group_norm(x, 3, wt, bt, eps=1e-5)
    a64 = a.astype(np.float64).reshape(2, 3, -1)
    mu = a64.mean(2, keepdims=True)
    rstd = 1 / np.sqrt(((a64 - mu) ** 2).mean(2, keepdims=True) + 1e-5)
    xh = ((a64 - mu) * rstd).reshape(2, 6, 6)
    np.testing.assert_allclose(A(y).reshape(2, 6, 6), xh * w[None, :, None] + b[None, :, None], rtol=1e-4,
                               atol=1e-5)
    g = rng.standard_normal((2, 6, 3, 2))
    y.backward(T(g.astype(np.float32), device))
    g3 = g.reshape(2, 6, 6)
    gh = (g3 * w[None, :, None]).reshape(2, 3, 12)
    xg = xh.reshape(2, 3, 12)
    gi = rstd * (gh - gh.mean(2, keepdims=True) - xg * (gh * xg).mean(2, keepdims=True))
    np.testing.assert_allclose(A(x.grad).reshape(2, 3, 12), gi, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(A(wt.grad), (g3 * xh).sum((0, 2)), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(A(bt.grad), g3.sum((0, 2)), rtol=1e-4, atol=1e-5)
    with pytest.raises(RuntimeError, match="divisible"):
        group_norm(x, 4)
    x64 = T(rng.standard_normal((1, 4, 2)), device, torch.float64, rg=True)
    w64 = T(rng.standard_normal(4), device, torch.float64, rg=True)
    b64 = T(rng.standard_normal(4), device, torch.float64, rg=True)
    assert gradcheck(lambda x, w, b: group_norm(x, 2, w, b), (x64, w64, b64))
    assert gradgradcheck(lambda x, w, b: group_norm(x, 2, w, b), (x64, w64, b64))


# ------------------------------------------------------------------------------------------------ batch norm
@on_devices
def test_batch_norm_training_running_stats_and_grads(device):
    rng = np.random.default_rng(7)
    a = (rng.standard_normal((4, 3, 5)) * 2 + 1).astype(np.float32)
    w = rng.standard_normal(3).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    rm0, rv0 = rng.standard_normal(3).astype(np.float32), rng.random(3).astype(np.float32) + 0.5
    x, wt, bt = T(a, device, rg=True), T(w, device, rg=True), T(b, device, rg=True)
    rm, rv = T(rm0, device), T(rv0, device)
    y = batch_norm(x, rm, rv, wt, bt, training=True, momentum=0.2, eps=1e-5)
    a64 = a.astype(np.float64)
    mu = a64.mean((0, 2), keepdims=True)
    var = a64.var((0, 2), keepdims=True)
    rstd = 1 / np.sqrt(var + 1e-5)
    xh = (a64 - mu) * rstd
    np.testing.assert_allclose(A(y), xh * w[None, :, None] + b[None, :, None], rtol=1e-4, atol=1e-5)
    n = 20
    np.testing.assert_allclose(A(rm), 0.8 * rm0 + 0.2 * mu.reshape(3), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(A(rv), 0.8 * rv0 + 0.2 * var.reshape(3) * n / (n - 1), rtol=1e-5, atol=1e-6)
    g = rng.standard_normal((4, 3, 5))
    y.backward(T(g.astype(np.float32), device))
    gh = g * w[None, :, None]
    gi = rstd * (gh - gh.mean((0, 2), keepdims=True) - xh * (gh * xh).mean((0, 2), keepdims=True))
    np.testing.assert_allclose(A(x.grad), gi, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(A(wt.grad), (g * xh).sum((0, 2)), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(A(bt.grad), g.sum((0, 2)), rtol=1e-4, atol=1e-5)
    # eval uses the running statistics
    ye = batch_norm(x, rm, rv, wt, bt, training=False, eps=1e-5)
    rmn, rvn = A(rm), A(rv)
    np.testing.assert_allclose(A(ye), (a64 - rmn[None, :, None]) / np.sqrt(rvn[None, :, None] + 1e-5)
                               * w[None, :, None] + b[None, :, None], rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="more than 1 value"):
        batch_norm(T(np.ones((1, 3), np.float32), device), None, None, training=True)
    with pytest.raises(RuntimeError, match="running_mean"):
        batch_norm(x, None, None, training=False)


@on_devices
def test_batch_norm_gradcheck(device):
    rng = np.random.default_rng(8)
    x = T(rng.standard_normal((3, 2, 2)), device, torch.float64, rg=True)
    w = T(rng.standard_normal(2), device, torch.float64, rg=True)
    b = T(rng.standard_normal(2), device, torch.float64, rg=True)
    f = lambda x, w, b: batch_norm(x, None, None, w, b, training=True)  # noqa: E731
    assert gradcheck(f, (x, w, b))
    assert gradgradcheck(f, (x, w, b))
