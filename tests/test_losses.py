"""Losses against numpy references on every device; gradients against numpy formulas and finite differences
(gradcheck / gradgradcheck in float64), including double backward through cross_entropy."""
import warnings

import numpy as np
import pytest

import cltorch as torch
from cltorch.autograd import gradcheck, gradgradcheck
from cltorch.ops.losses import (cross_entropy, nll_loss, mse_loss, l1_loss, smooth_l1_loss, huber_loss,
                                binary_cross_entropy, binary_cross_entropy_with_logits, kl_div)
from cltorch.ops.softmax import log_softmax

DEVICES = ["cpu"] + [f"cl:{i}" for i in range(torch.cl.device_count())]
on_devices = pytest.mark.parametrize("device", DEVICES)


def T(a, device, dtype=None, rg=False):
    return torch.tensor(np.asarray(a), device=device, dtype=dtype, requires_grad=rg)


def A(t):
    return np.array(t.detach().cpu().tolist(), dtype=np.float64)


def np_log_softmax(a, axis):
    m = a.max(axis, keepdims=True)
    return a - m - np.log(np.exp(a - m).sum(axis, keepdims=True))


def np_ce(x, t, w=None, ignore_index=-100, reduction="mean", eps=0.0, nll=False):
    """Reference cross entropy / nll for class-index targets; x (N, C, *), t (N, *). Returns (value, dvalue/dx)."""
    x = np.moveaxis(x.astype(np.float64), 1, -1)
    C = x.shape[-1]
    xs = x.reshape(-1, C)
    ts = t.reshape(-1)
    lp = xs if nll else np_log_softmax(xs, 1)
    wv = np.ones(C) if w is None else w.astype(np.float64)
    valid = ts != ignore_index
    tc = np.where(valid, ts, 0)
    wt = wv[tc] * valid
    loss = -wt * lp[np.arange(len(ts)), tc]
    if eps > 0:
        loss = (1 - eps) * loss + eps / C * (-(lp * wv).sum(1)) * valid
    # gradient of each row's loss w.r.t. its logits
    onehot = np.eye(C)[tc]
    if nll:
        dl = -wt[:, None] * onehot
    else:
        p = np.exp(lp)
        dl = (1 - eps) * wt[:, None] * (p - onehot) + eps / C * (wv.sum() * p - wv) * valid[:, None]
    if reduction == "none":
        val, scale = loss.reshape(t.shape), np.ones(len(ts))
    elif reduction == "sum":
        val, scale = loss.sum(), np.ones(len(ts))
    else:
        val, scale = loss.sum() / wt.sum(), np.ones(len(ts)) / wt.sum()
    grad = (dl * scale[:, None]).reshape(x.shape)
    return val, np.moveaxis(grad, -1, 1)


# ------------------------------------------------------------------------------------------ cross entropy
@on_devices
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("eps", [0.0, 0.2])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_class_indices(device, reduction, eps, weighted):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((6, 5)) * 3).astype(np.float32)
    t = rng.integers(0, 5, 6)
    t[2] = -100
    w = rng.random(5).astype(np.float32) + 0.5 if weighted else None
    xt = T(x, device, rg=True)
    out = cross_entropy(xt, T(t, device), T(w, device) if weighted else None, reduction=reduction,
                        label_smoothing=eps)
    ref, dref = np_ce(x, t, w, reduction=reduction, eps=eps)
    np.testing.assert_allclose(A(out), ref, rtol=1e-5, atol=1e-6)
    g = rng.standard_normal(np.shape(ref))
    out.backward(T(g.astype(np.float32), device) if reduction == "none" else None)
    gref = dref * (g.reshape(-1)[:, None] if reduction == "none" else 1.0)
    np.testing.assert_allclose(A(xt.grad), gref, rtol=1e-5, atol=1e-6)


@on_devices
def test_cross_entropy_spatial_dims_and_unbatched(device):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4, 3, 2)).astype(np.float32)
    t = rng.integers(0, 4, (2, 3, 2))
    xt = T(x, device, rg=True)
    out = cross_entropy(xt, T(t, device), ignore_index=1)
    ref, dref = np_ce(x, t, ignore_index=1)
    np.testing.assert_allclose(A(out), ref, rtol=1e-5)
    out.backward()
    np.testing.assert_allclose(A(xt.grad), dref, rtol=1e-5, atol=1e-7)
    none = cross_entropy(xt, T(t, device), reduction="none")
    assert none.shape == (2, 3, 2)
    np.testing.assert_allclose(A(none), np_ce(x, t, reduction="none")[0], rtol=1e-5)
    # unbatched (C,) input with a 0-d target
    u = cross_entropy(T(x[0, :, 0, 0], device), T(np.int64(2), device), reduction="none")
    assert u.shape == ()
    np.testing.assert_allclose(u.item(), -np_log_softmax(x[0, :, 0, 0].astype(np.float64), 0)[2], rtol=1e-5)


@on_devices
def test_cross_entropy_large_logits_all_ignored_and_errors(device):
    x = np.array([[1e4, 0.0, -1e4], [50.0, 60.0, 70.0]], np.float32)
    out = cross_entropy(T(x, device), T([0, 2], device), reduction="none")
    np.testing.assert_allclose(A(out), [0.0, np_ce(x[1:], np.array([2]), reduction="sum")[0]], atol=1e-5)
    allign = cross_entropy(T(x, device), T([-100, -100], device))
    assert np.isnan(allign.item())
    with pytest.raises(IndexError, match="Target 3 is out of bounds"):
        cross_entropy(T(x, device), T([0, 3], device)).item()   # device-side checks report at a sync point
    with pytest.raises(IndexError, match="out of bounds"):
        cross_entropy(T(x, device), T([-1, 0], device)).item()
    with pytest.raises(ValueError, match="batch_size"):
        cross_entropy(T(x, device), T([0, 1, 2], device))
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        cross_entropy(T(x, device), T([0, 1], device), reduction="avg")
    # the error flag is cleared: a good call after a bad one works
    assert np.isfinite(cross_entropy(T(x, device), T([0, 1], device)).item())


@on_devices
@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_cross_entropy_probability_targets(device, eps):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    p = rng.random((4, 3)).astype(np.float32)
    p /= p.sum(1, keepdims=True)
    w = rng.random(3).astype(np.float32) + 0.5
    xt = T(x, device, rg=True)
    out = cross_entropy(xt, T(p, device), weight=T(w, device), label_smoothing=eps)
    lp = np_log_softmax(x.astype(np.float64), 1)
    tp = p * (1 - eps) + eps / 3
    rows = -(lp * tp * w).sum(1)
    np.testing.assert_allclose(out.item(), rows.mean(), rtol=1e-5)
    out.backward()
    wtp = tp * w
    np.testing.assert_allclose(A(xt.grad), (np.exp(lp) * wtp.sum(1, keepdims=True) - wtp) / 4, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(A(cross_entropy(xt, T(p, device), reduction="none")), -(lp * p).sum(1), rtol=1e-5)


@on_devices
def test_cross_entropy_gradcheck_and_double_backward(device):
    rng = np.random.default_rng(3)
    x = T(rng.standard_normal((3, 4)), device, torch.float64, rg=True)
    t = T([1, 3, 0], device)
    w = T(rng.random(4) + 0.5, device, torch.float64)
    f = lambda x: cross_entropy(x, t, w, label_smoothing=0.1)   # noqa: E731
    assert gradcheck(f, (x,))
    assert gradgradcheck(f, (x,))
    fn = lambda x: cross_entropy(x, t, reduction="none")   # noqa: E731
    assert gradcheck(fn, (x,))
    assert gradgradcheck(fn, (x,))
    # probability targets: gradients for input and target
    p = T(rng.random((3, 4)), device, torch.float64, rg=True)
    assert gradcheck(lambda x, p: cross_entropy(x, p), (x, p))
    assert gradgradcheck(lambda x, p: cross_entropy(x, p, reduction="sum"), (x, p))
    # a hand-checked double backward: d/dx of sum(grad * v) equals the Hessian-vector product
    x2 = T(rng.standard_normal((1, 3)), device, torch.float64, rg=True)
    loss = cross_entropy(x2, T([0], device))
    (gx,) = torch.autograd.grad(loss, x2, create_graph=True)
    v = rng.standard_normal(3)
    (hv,) = torch.autograd.grad((gx * T(v, device, torch.float64)).sum(), x2)
    s = np.exp(np_log_softmax(A(x2), 1))[0]
    H = np.diag(s) - np.outer(s, s)
    np.testing.assert_allclose(A(hv)[0], H @ v, rtol=1e-10, atol=1e-12)


@on_devices
def test_nll_loss(device):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    t = np.array([0, 3, 1, -100, 2])
    w = (rng.random(4) + 0.5).astype(np.float32)
    xt = T(x, device, rg=True)
    out = nll_loss(xt, T(t, device), T(w, device))
    ref, dref = np_ce(x, t, w, nll=True)
    np.testing.assert_allclose(out.item(), ref, rtol=1e-5)
    out.backward()
    np.testing.assert_allclose(A(xt.grad), dref, rtol=1e-5, atol=1e-7)
    x64 = T(rng.standard_normal((3, 4)), device, torch.float64, rg=True)
    assert gradcheck(lambda a: nll_loss(a, T([0, 1, 3], device), reduction="sum"), (x64,))
    assert gradgradcheck(lambda a: nll_loss(log_softmax(a, 1), T([0, 1, 3], device)), (x64,))
    with pytest.raises(IndexError, match="Target 4 is out of bounds"):
        nll_loss(xt, T([0, 1, 2, 4, 0], device)).item()


# -------------------------------------------------------------------------------------- pointwise losses
@on_devices
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_losses(device, reduction):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 4)).astype(np.float32) * 2
    b = rng.standard_normal((3, 4)).astype(np.float32) * 2
    wt = rng.random((3, 4)).astype(np.float32)
    d = a.astype(np.float64) - b
    red = {"mean": np.mean, "sum": np.sum, "none": lambda v: v}[reduction]
    x, y, w = T(a, device), T(b, device), T(wt, device)
    np.testing.assert_allclose(A(mse_loss(x, y, reduction=reduction)), red(d * d), rtol=1e-5)
    np.testing.assert_allclose(A(l1_loss(x, y, reduction=reduction)), red(np.abs(d)), rtol=1e-5)
    for beta in (0.0, 0.5, 2.0):
        ref = np.abs(d) if beta == 0 else np.where(np.abs(d) < beta, 0.5 * d * d / beta, np.abs(d) - 0.5 * beta)
        np.testing.assert_allclose(A(smooth_l1_loss(x, y, reduction=reduction, beta=beta)), red(ref), rtol=1e-5)
    for delta in (0.5, 1.0, 3.0):
        ref = np.where(np.abs(d) < delta, 0.5 * d * d, delta * (np.abs(d) - 0.5 * delta))
        np.testing.assert_allclose(A(huber_loss(x, y, reduction=reduction, delta=delta)), red(ref), rtol=1e-5)
    # weighted variants (PyTorch 2.13): mse/l1 'mean' divide by weight.sum(), huber's 'mean' is a plain mean
    wref = {"mean": lambda v: v.sum() / wt.sum(), "sum": np.sum, "none": lambda v: v}[reduction]
    np.testing.assert_allclose(A(mse_loss(x, y, reduction=reduction, weight=w)), wref(d * d * wt), rtol=1e-5)
    np.testing.assert_allclose(A(l1_loss(x, y, reduction=reduction, weight=w)), wref(np.abs(d) * wt), rtol=1e-5)
    href = np.where(np.abs(d) < 1.0, 0.5 * d * d, np.abs(d) - 0.5) * wt
    np.testing.assert_allclose(A(huber_loss(x, y, reduction=reduction, weight=w)), red(href), rtol=1e-5)


@on_devices
def test_regression_losses_gradcheck_and_warnings(device):
    rng = np.random.default_rng(6)
    x = T(rng.standard_normal((2, 3)) * 2, device, torch.float64, rg=True)
    y = T(rng.standard_normal((2, 3)) * 2, device, torch.float64, rg=True)
    for f in (mse_loss, l1_loss, lambda a, b: smooth_l1_loss(a, b, beta=0.7), lambda a, b: huber_loss(a, b, delta=1.3)):
        assert gradcheck(f, (x, y))
    with pytest.warns(UserWarning, match="different to the input size"):
        mse_loss(x, y[0])
    with pytest.raises(ValueError):
        l1_loss(x, y, reduction="bad")
    with warnings.catch_warnings(record=True):
        assert l1_loss(x, y, size_average=False).shape == ()   # legacy flags: reduction='sum'
        np.testing.assert_allclose(A(l1_loss(x, y, reduce=False)), np.abs(A(x) - A(y)))


@on_devices
def test_binary_cross_entropy(device):
    rng = np.random.default_rng(7)
    p = rng.random((3, 4)).astype(np.float32) * 0.98 + 0.01
    p[0, 0], p[0, 1] = 0.0, 1.0                        # exercises the -100 log clamp
    t = rng.random((3, 4)).astype(np.float32)
    w = rng.random(4).astype(np.float32)
    pt = T(p, device, rg=True)
    out = binary_cross_entropy(pt, T(t, device), weight=T(w, device), reduction="sum")
    with np.errstate(divide="ignore"):
        lp, l1p = np.maximum(np.log(p.astype(np.float64)), -100), np.maximum(np.log1p(-p.astype(np.float64)), -100)
    np.testing.assert_allclose(out.item(), (-w * (t * lp + (1 - t) * l1p)).sum(), rtol=1e-5)
    out.backward()
    pd = p.astype(np.float64)
    np.testing.assert_allclose(A(pt.grad), w * (pd - t) / np.maximum((1 - pd) * pd, 1e-12), rtol=1e-4)
    x64 = T(rng.random((2, 3)) * 0.8 + 0.1, device, torch.float64, rg=True)
    t64 = T(rng.random((2, 3)), device, torch.float64, rg=True)
    assert gradcheck(lambda a, b: binary_cross_entropy(a, b), (x64, t64))
    assert gradgradcheck(lambda a, b: binary_cross_entropy(a, b), (x64, t64))
    with pytest.raises(ValueError):
        binary_cross_entropy(pt, T(t[0], device))


@on_devices
def test_binary_cross_entropy_with_logits(device):
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((3, 4)) * 4).astype(np.float32)
    x[0, 0] = 0.0
    x[0, 1] = 200.0
    t = rng.random((3, 4)).astype(np.float32)
    w = rng.random((3, 4)).astype(np.float32)
    pw = (rng.random(4) * 3).astype(np.float32)
    xt = T(x, device, rg=True)
    out = binary_cross_entropy_with_logits(xt, T(t, device), T(w, device), pos_weight=T(pw, device))
    xd = x.astype(np.float64)
    logsig = -np.logaddexp(0, -xd)
    log1msig = -np.logaddexp(0, xd)
    ref = -w * (pw * t * logsig + (1 - t) * log1msig)
    np.testing.assert_allclose(out.item(), ref.mean(), rtol=1e-5)
    out.backward()
    sig = 1 / (1 + np.exp(-xd))
    np.testing.assert_allclose(A(xt.grad), w * (sig * (1 - t + pw * t) - pw * t) / 12, rtol=1e-5, atol=1e-7)
    plain = binary_cross_entropy_with_logits(T(x, device), T(t, device), reduction="none")
    np.testing.assert_allclose(A(plain), -(t * logsig + (1 - t) * log1msig), rtol=1e-5, atol=1e-6)
    x64 = T(rng.standard_normal((2, 3)), device, torch.float64, rg=True)
    t64 = T(rng.random((2, 3)), device, torch.float64, rg=True)
    p64 = T(rng.random(3) + 0.5, device, torch.float64, rg=True)
    w64 = T(rng.random((2, 3)), device, torch.float64, rg=True)
    f = lambda a, b, c, d: binary_cross_entropy_with_logits(a, b, c, pos_weight=d)  # noqa: E731
    assert gradcheck(f, (x64, t64, w64, p64))
    assert gradgradcheck(lambda a, b: binary_cross_entropy_with_logits(a, b), (x64, t64))


@on_devices
def test_kl_div(device):
    rng = np.random.default_rng(9)
    q = rng.random((3, 4))
    q /= q.sum(1, keepdims=True)
    p = rng.random((3, 4))
    p[0, 0] = 0.0
    p /= p.sum(1, keepdims=True)
    lq = np.log(q)
    x = T(lq, device, torch.float32)
    pt = T(p, device, torch.float32)
    pointwise = np.where(p > 0, p * np.log(np.where(p > 0, p, 1)), 0) - p * lq
    np.testing.assert_allclose(A(kl_div(x, pt, reduction="batchmean")), pointwise.sum() / 3, rtol=1e-5)
    np.testing.assert_allclose(A(kl_div(x, pt, reduction="sum")), pointwise.sum(), rtol=1e-5)
    np.testing.assert_allclose(A(kl_div(x, pt, reduction="none")), pointwise, rtol=1e-5, atol=1e-7)
    with pytest.warns(UserWarning, match="batchmean"):
        np.testing.assert_allclose(A(kl_div(x, pt)), pointwise.mean(), rtol=1e-5)
    lt = np.log(p + 0.1)
    np.testing.assert_allclose(A(kl_div(x, T(lt, device, torch.float32), reduction="sum", log_target=True)),
                               (np.exp(lt) * (lt - lq)).sum(), rtol=1e-5)
    x64 = T(lq, device, torch.float64, rg=True)
    p64 = T(q[::-1].copy(), device, torch.float64, rg=True)      # no zero targets: t log t is not smooth at 0
    assert gradcheck(lambda a, b: kl_div(a, b, reduction="batchmean"), (x64, p64))
