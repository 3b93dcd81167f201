"""Autograd semantics (issue 4) on every device: graph recording, backward, grad, modes, hooks, in-place rules,
Function, anomaly mode, deep graphs, and finite-difference gradchecks of the core ops."""
import threading

import numpy as np
import pytest

import cltorch as torch
from cltorch.autograd import gradcheck, gradgradcheck
from conftest import DEVICES, assert_close, to_np


def _x(device, shape=(3,), seed=0, dtype=None):
    rng = np.random.default_rng(seed)
    return torch.tensor(rng.standard_normal(shape), dtype=dtype or torch.float32, device=device, requires_grad=True)


def test_recording_flags(device):
    x = _x(device)
    y = x * 2
    assert x.is_leaf and not y.is_leaf and y.requires_grad and y.grad_fn.name() == "MulBackward0"
    assert y.grad_fn.next_functions[0][0].name() == "AccumulateGrad"
    assert not (torch.ones(2, device=device) * 2).requires_grad
    with pytest.raises(RuntimeError, match="floating point"):
        torch.tensor([1, 2], device=device, requires_grad=True)
    i = (x > 0)
    assert not i.requires_grad


def test_backward_accumulates_and_errors(device):
    x = _x(device)
    (x * x).sum().backward()
    g1 = to_np(x.grad).copy()
    (x * x).sum().backward()
    assert_close(x.grad, 2 * g1)
    y = x * 3
    with pytest.raises(RuntimeError, match="implicitly created only for scalar"):
        y.backward()
    y.backward(torch.ones(3, device=device))
    z = (x.exp() * 2).sum()
    z.backward(retain_graph=True)
    z.backward()
    w = (x.exp() * 2).sum()
    w.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        w.backward()


def test_grad_function_and_create_graph(device):
    x = _x(device, dtype=torch.float64)
    y = (x ** 3).sum()
    (g,) = torch.autograd.grad(y, x, create_graph=True)
    assert_close(g, 3 * to_np(x) ** 2, rtol=1e-10)
    (gg,) = torch.autograd.grad(g.sum(), x)
    assert_close(gg, 6 * to_np(x), rtol=1e-10)
    assert x.grad is None
    a, b = _x(device), _x(device, seed=1)
    with pytest.raises(RuntimeError, match="allow_unused"):
        torch.autograd.grad((a * 2).sum(), [a, b])
    ga, gb = torch.autograd.grad((a * 2).sum(), [a, b], allow_unused=True)
    assert gb is None and to_np(ga).tolist() == [2, 2, 2]


def test_backward_inputs_only(device):
    a, b = _x(device), _x(device, seed=1)
    (a * b).sum().backward(inputs=[a])
    assert a.grad is not None and b.grad is None


def test_broadcast_gradients_reduce_to_input_shape(device):
    a = _x(device, (3, 1))
    b = _x(device, (4,), seed=2)
    (a * b).sum().backward()
    assert a.grad.shape == (3, 1) and b.grad.shape == (4,)
    assert_close(a.grad, np.full((3, 1), to_np(b).sum()), rtol=1e-5)
    assert_close(b.grad, np.full(4, to_np(a).sum()), rtol=1e-5)


def test_grad_modes(device):
    x = _x(device)
    with torch.no_grad():
        assert not (x * 2).requires_grad
        with torch.enable_grad():
            assert (x * 2).requires_grad
    with torch.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    with torch.inference_mode():
        assert not (x * 2).requires_grad

    @torch.no_grad()
    def f(t):
        return t * 2
    assert not f(x).requires_grad
    seen = []

    def other():
        seen.append(torch.is_grad_enabled())
    with torch.no_grad():
        th = threading.Thread(target=other)
        th.start()
        th.join()
    assert seen == [True]  # grad mode is thread-local


def test_hooks_retain_grad_detach(device):
    x = _x(device)
    y = x * 2
    y.retain_grad()
    h = y.register_hook(lambda g: g * 10)
    y.sum().backward()
    assert to_np(y.grad).tolist() == [10, 10, 10]  # torch >= 2.0: .grad is the gradient after the tensor's hooks
    assert to_np(x.grad).tolist() == [20, 20, 20]
    h.remove()
    x.grad = None
    (x * 2).sum().backward()
    assert to_np(x.grad).tolist() == [2, 2, 2]
    d = y.detach()
    assert not d.requires_grad and d._storage is y._storage
    z = x * 1
    z.detach_()
    assert z.grad_fn is None and not z.requires_grad
    leaf_hook = []
    x.register_hook(lambda g: leaf_hook.append(g.shape))
    (x * 3).sum().backward()
    assert leaf_hook == [(3,)]


def test_inplace_rules(device):
    x = _x(device)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        x.add_(1)
    y = x.exp()
    y.mul_(2)  # exp saved its output: backward must see the modification
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    # in-place on a non-leaf, and on a view of a non-leaf
    x.grad = None
    y = x * 1
    y[0] = 0
    y.sum().backward()
    assert to_np(x.grad).tolist() == [0, 1, 1]
    x.grad = None
    y = x * 1
    y.relu_()
    y.sum().backward()
    assert_close(x.grad, (to_np(x) > 0).astype(np.float32))
    x.grad = None
    y = x * 2
    y[1:].mul_(3)
    y.sum().backward()
    assert to_np(x.grad).tolist() == [2, 6, 6]


def test_function(device):
    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t, k):
            ctx.save_for_backward(t)
            ctx.k = k
            return t ** 3 * k

        @staticmethod
        def backward(ctx, g):
            (t,) = ctx.saved_tensors
            assert ctx.needs_input_grad == (True, False)
            return g * 3 * t * t * ctx.k, None

    x = _x(device)
    y = Cube.apply(x, 2.0)
    assert y.grad_fn is not None
    y.sum().backward()
    assert_close(x.grad, 6 * to_np(x) ** 2, rtol=1e-5)

    class Split(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            ctx.set_materialize_grads(False)
            idx = (t > 0).long()
            ctx.mark_non_differentiable(idx)
            return t * 2, idx

        @staticmethod
        def backward(ctx, g, gi):
            return g * 2

    v, idx = Split.apply(x)
    assert not idx.requires_grad
    x.grad = None
    v.sum().backward()
    assert to_np(x.grad).tolist() == [2, 2, 2]


def test_anomaly_mode_names_op(device):
    x = torch.tensor([0.0, 1.0], device=device, requires_grad=True)
    with torch.autograd.detect_anomaly():
        y = x.sqrt() * 0  # sqrt's derivative at 0 times 0 gives nan
        with pytest.raises(RuntimeError, match="SqrtBackward0"):
            y.sum().backward()


def test_deep_graph_no_recursion(device):
    x = _x(device, (1,))
    y = x
    for _ in range(10000):
        y = y + 1
    y.sum().backward()
    assert x.grad.tolist() == [1.0]


def test_saved_tensors_freed(device):
    x = _x(device)
    y = x.exp()
    node = y.grad_fn
    y.sum().backward()
    assert node.ctx._saved is None


GRADCHECK_CASES = {
    "mul": (lambda a, b: a * b, 2), "div": (lambda a, b: a / (b.abs() + 1), 2), "pow": (lambda a, b: a.abs() ** b, 2),
    "exp": (lambda a: a.exp(), 1), "log": (lambda a: (a.abs() + 0.5).log(), 1), "tanh": (lambda a: a.tanh(), 1),
    "sigmoid": (lambda a: a.sigmoid(), 1), "sin": (lambda a: a.sin(), 1), "sqrt": (lambda a: (a * a + 1).sqrt(), 1),
    "gelu": (lambda a: torch.gelu(a), 1), "silu": (lambda a: torch.silu(a), 1), "where": (
        lambda a, b: torch.where(a > 0, a, b), 2), "clamp": (lambda a: a.clamp(-0.5, 0.5), 1),
    "sum_dim": (lambda a: a.sum(1), 1), "mean": (lambda a: a.mean(0, keepdim=True), 1),
    "amax": (lambda a: a.amax(1), 1), "max_dim": (lambda a: a.max(1).values, 1), "var": (lambda a: a.var(1), 1),
    "prod": (lambda a: a.prod(1), 1), "norm": (lambda a: a.norm(), 1),
    "logsumexp": (lambda a: torch.logsumexp(a, 1), 1), "matmul": (lambda a, b: a @ b.t(), 2),
    "view_ops": (lambda a: a.t().reshape(-1)[1:5].unsqueeze(0).expand(2, 4), 1),
    "getitem": (lambda a: a[1:, ::2], 1), "as_strided": (lambda a: a.as_strided((2, 2), (1, 3)), 1),
    "diagonal": (lambda a: a.diagonal(), 1), "lerp": (lambda a, b: torch.lerp(a, b, 0.3), 2),
    "addcmul": (lambda a, b: torch.addcmul(a, a, b, value=0.5), 2), "to": (lambda a: a.to(torch.float64) * 2, 1),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(GRADCHECK_CASES))
def test_gradcheck_core_ops(name, device):
    fn, n = GRADCHECK_CASES[name]
    rng = np.random.default_rng(3)
    args = [torch.tensor(rng.standard_normal((3, 3)) + (0.1 if i else 0), dtype=torch.float64, device=device,
                         requires_grad=True) for i in range(n)]
    assert gradcheck(fn, args, eps=1e-6, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_gradgradcheck_elementwise_and_matmul(device):
    rng = np.random.default_rng(4)
    a = torch.tensor(rng.standard_normal((2, 3)), dtype=torch.float64, device=device, requires_grad=True)
    b = torch.tensor(rng.standard_normal((3, 2)), dtype=torch.float64, device=device, requires_grad=True)
    assert gradgradcheck(lambda x, y: (x.tanh() @ y).exp(), (a, b))
    assert gradgradcheck(lambda x: x.sum(0) * x.mean(), (a,))


@pytest.mark.parametrize("device", DEVICES)
def test_leaf_grad_memory_is_never_shared(device):
    """A leaf keeps its first gradient without a copy only when nothing else can see that memory."""
    # add's backward hands one gradient object to both leaves: they must not alias
    a = torch.ones(4, device=device, requires_grad=True)
    b = torch.ones(4, device=device, requires_grad=True)
    (a + b).sum().backward()
    a.grad.add_(1.0)
    assert to_np(b.grad).tolist() == [1.0] * 4
    # a hook that keeps the gradient: later accumulation must not change what the hook kept
    kept = []
    w = torch.ones(3, 2, device=device, requires_grad=True)
    w.register_hook(lambda g: kept.append(g))
    x = torch.arange(6.0, device=device).reshape(2, 3)
    torch.nn.functional.linear(x, w.t()).sum().backward()
    before = to_np(kept[0]).copy()
    torch.nn.functional.linear(x, w.t()).sum().backward()
    assert np.array_equal(to_np(kept[0]), before)
    assert np.array_equal(to_np(w.grad), 2 * before)
    # a gradient the caller still holds (backward's gradient argument) is copied; an engine-made one is kept
    leaf = torch.ones(2, 3, device=device, requires_grad=True)
    seed = torch.full((2, 3), 2.0, device=device)
    (leaf * 1.0).backward(seed)
    seed.add_(5.0)
    assert to_np(leaf.grad).tolist() == [[2.0] * 3] * 2
    v = torch.ones(1, 5, device=device, requires_grad=True)
    (v * 3.0).sum().backward()
    assert v.grad.stride() == (5, 1) and v.grad.grad_fn is None and not v.grad.requires_grad
    assert to_np(v.grad).tolist() == [[3.0] * 5]


@pytest.mark.parametrize("device", DEVICES)
def test_linear_weight_grad_is_contiguous_without_a_copy(device):
    """linear's weight gradient is computed in the weight's layout, so the leaf keeps the product itself."""
    lin = torch.nn.Linear(5, 3).to(device)
    x = torch.randn(4, 5, device=device)
    lin(x).sum().backward()
    g = lin.weight.grad
    assert g.is_contiguous() and g._base is None and g.shape == (3, 5)
    np.testing.assert_allclose(to_np(g), np.tile(to_np(x).sum(0), (3, 1)), rtol=1e-5, atol=1e-5)
