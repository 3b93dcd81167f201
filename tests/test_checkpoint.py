"""cltorch.utils.checkpoint: gradients equal the non-checkpointed ones; the function really runs again in backward."""
import numpy as np
import pytest

import cltorch
import cltorch.nn as nn
from cltorch.utils.checkpoint import checkpoint, checkpoint_sequential


def _net(device):
    cltorch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Dropout(0.5), nn.Linear(8, 8), nn.GELU(),
                         nn.Linear(8, 3)).to(device)


def _grads(net):
    return [p.grad.cpu().numpy().copy() for p in net.parameters()]


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_grads_match_plain(device, use_reentrant):
    net = _net(device)
    x = cltorch.randn(5, 4, device=device, requires_grad=True)
    cltorch.manual_seed(1)
    net(x).pow(2).sum().backward()
    ref, ref_x = _grads(net), x.grad.cpu().numpy().copy()
    net.zero_grad()
    x.grad = None
    calls = []

    def fn(t):
        calls.append(1)
        return net(t)

    cltorch.manual_seed(1)
    out = checkpoint(fn, x, use_reentrant=use_reentrant)
    assert out.requires_grad and len(calls) == 1
    out.pow(2).sum().backward()
    assert len(calls) == 2, "the function runs again in backward"
    for g, r in zip(_grads(net), ref):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)   # same dropout mask: the rng state was restored
    np.testing.assert_allclose(x.grad.cpu().numpy(), ref_x, rtol=1e-5, atol=1e-6)


def test_non_reentrant_reaches_parameters_without_input_grad(device):
    net = _net(device).eval()
    x = cltorch.randn(5, 4, device=device)
    net(x).sum().backward()
    ref = _grads(net)
    net.zero_grad()
    checkpoint(net, x, use_reentrant=False).sum().backward()
    for g, r in zip(_grads(net), ref):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)


def test_checkpoint_sequential_matches(device):
    net = _net(device).eval()
    x = cltorch.randn(5, 4, device=device, requires_grad=True)
    net(x).sum().backward()
    ref = _grads(net) + [x.grad.cpu().numpy().copy()]
    net.zero_grad()
    x.grad = None
    checkpoint_sequential(net, 3, x, use_reentrant=True).sum().backward()
    for g, r in zip(_grads(net) + [x.grad.cpu().numpy()], ref):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)


def test_torch_reference_and_errors():
    torch = pytest.importorskip("torch")
    w = np.random.default_rng(0).normal(size=(3, 3)).astype(np.float32)
    xs = np.random.default_rng(1).normal(size=(2, 3)).astype(np.float32)
    tx = torch.tensor(xs, requires_grad=True)
    torch.utils.checkpoint.checkpoint(lambda a: (a @ torch.tensor(w)).sin(), tx, use_reentrant=False).sum().backward()
    cx = cltorch.tensor(xs, requires_grad=True)
    checkpoint(lambda a: (a @ cltorch.tensor(w)).sin(), cx, use_reentrant=False).sum().backward()
    np.testing.assert_allclose(cx.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    with pytest.warns(UserWarning, match="use_reentrant"):
        checkpoint(lambda a: a * 2, cx)
    with pytest.raises(ValueError, match="Unexpected keyword"):
        checkpoint(lambda a, k=1: a * k, cx, k=2, use_reentrant=True)
    with pytest.raises(ValueError, match="segments"):
        checkpoint_sequential([lambda a: a], 2, cx, use_reentrant=True)
