"""Per-signature launch plans kept by the pointwise ops and their derivatives (ops/pointwise.py ``_launch``).

- A plan kept for an operand signature holds the kernel of the mode it was made in: after
  ``use_deterministic_algorithms`` switches, a repeated call must run the other mode's kernel, bit for bit what a
  signature seen for the first time in that mode gives.
- The derivatives that run mul's forward or a fused derivative kernel directly (no create_graph) give the bits of
  the composed formula, on the first call and on repeated ones, and torch's values.
"""
import numpy as np
import pytest
import torch

import cltorch
from conftest import DEVICES


def _bits(t):
    return t.detach().cpu().numpy().view(np.uint32).copy()


@pytest.mark.parametrize("device", DEVICES)
def test_binary_plan_follows_deterministic_switch(device):
    rng = np.random.default_rng(1)
    a = cltorch.tensor(rng.uniform(0.1, 3, 4096).astype(np.float32), device=device)
    b = cltorch.tensor(rng.uniform(-3, 3, 4096).astype(np.float32), device=device)
    x = cltorch.tensor(rng.uniform(-3, 3, 4096).astype(np.float32), device=device, requires_grad=True)
    before = [_bits(cltorch.pow(a, b)) for _ in range(2)]       # the signature's plan is kept in the default mode
    x.tanh().sum().backward()                                    # and the fused tanh derivative's
    x.grad = None
    cltorch.use_deterministic_algorithms(True)
    try:
        det = _bits(cltorch.pow(a, b))
        fresh = _bits(cltorch.pow(a.reshape(64, 64), b.reshape(64, 64)).reshape(-1))   # a signature new to the mode
        x.tanh().sum().backward()
        g_det = _bits(x.grad)
        x2 = x.detach().reshape(64, 64).requires_grad_()
        x2.tanh().sum().backward()
        g_fresh = _bits(x2.grad.reshape(-1))
    finally:
        cltorch.use_deterministic_algorithms(False)
    assert np.array_equal(det, fresh)
    assert np.array_equal(g_det, g_fresh)
    assert np.array_equal(before[0], before[1])
    again = _bits(cltorch.pow(a, b))          # back in the default mode: the default kernel again
    assert np.array_equal(again, before[0])
    ref = torch.pow(torch.from_numpy(a.cpu().numpy()), torch.from_numpy(b.cpu().numpy())).numpy()
    np.testing.assert_allclose(det.view(np.float32), ref, rtol=2e-6, atol=1e-30)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["tanh", "sigmoid", "relu", "sin", "sqrt"])
def test_direct_derivatives_match_composed_formula(device, op):
    rng = np.random.default_rng(2)
    sign = 1 if op == "sqrt" else rng.choice([-1, 1], 3000)
    xn = (rng.uniform(0.05, 2, 3000) * sign).astype(np.float32)
    wn = rng.standard_normal(3000).astype(np.float32)
    x = cltorch.tensor(xn, device=device, requires_grad=True)
    w = cltorch.tensor(wn, device=device, requires_grad=True)
    grads = []
    for _ in range(3):      # the first call makes the plans, the next ones run them
        x.grad = w.grad = None
        (getattr(x * w, op)()).sum().backward()
        grads.append((_bits(x.grad), _bits(w.grad)))
    for gx, gw in grads[1:]:
        assert np.array_equal(gx, grads[0][0]) and np.array_equal(gw, grads[0][1])
    # the composed formula, recorded (create_graph) so it takes the differentiable ops
    x.grad = w.grad = None
    y = getattr(x * w, op)()
    gx, gw = cltorch.autograd.grad(y.sum(), (x, w), create_graph=True)
    assert np.array_equal(_bits(gx), grads[0][0]) and np.array_equal(_bits(gw), grads[0][1])
    xt = torch.tensor(xn, requires_grad=True)
    wt = torch.tensor(wn, requires_grad=True)
    getattr(xt * wt, op)().sum().backward()
    np.testing.assert_allclose(grads[0][0].view(np.float32), xt.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grads[0][1].view(np.float32), wt.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_mul_backward_scalar_and_one_sided(device):
    rng = np.random.default_rng(3)
    an = rng.standard_normal(500).astype(np.float32)
    bn = rng.standard_normal(500).astype(np.float32)
    a = cltorch.tensor(an, device=device, requires_grad=True)
    b = cltorch.tensor(bn, device=device)
    (a * b * 2.5).sum().backward()            # a tensor operand needing no gradient, and a Python scalar
    assert b.grad is None
    at = torch.tensor(an, requires_grad=True)
    (at * torch.tensor(bn) * 2.5).sum().backward()
    np.testing.assert_allclose(a.grad.cpu().numpy(), at.grad.numpy(), rtol=1e-6, atol=1e-7)
    # double backward still records through mul's derivative
    a.grad = None
    (g,) = cltorch.autograd.grad((a * a * b).sum(), (a,), create_graph=True)
    (gg,) = cltorch.autograd.grad(g.sum(), (a,))
    np.testing.assert_allclose(gg.cpu().numpy(), 2 * bn, rtol=1e-6, atol=1e-7)
