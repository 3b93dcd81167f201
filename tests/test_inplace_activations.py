"""In-place activations (``inplace=True`` modules, ``F.*_``, ``torch.*_``, ``Tensor.relu_``) against PyTorch 2.13:
values and input gradients on a non-leaf input (as in a network, ``act(lin(x))``), the errors PyTorch raises
(leaf, a value a prior op saved, a negative slope), and the version counter."""
import numpy as np
import pytest

import cltorch
import cltorch.nn as nn
import cltorch.nn.functional as F
from conftest import assert_close, to_np

torch = pytest.importorskip("torch")

# (name, ours, torch's): each applies an in-place activation to x and returns its result
MODULES = [
    ("ReLU", lambda m: m.ReLU(inplace=True)),
    ("ReLU6", lambda m: m.ReLU6(inplace=True)),
    ("LeakyReLU", lambda m: m.LeakyReLU(0.2, inplace=True)),
    ("LeakyReLU0", lambda m: m.LeakyReLU(0.0, inplace=True)),
    ("ELU", lambda m: m.ELU(inplace=True)),
    ("ELU_a", lambda m: m.ELU(0.7, inplace=True)),
    ("CELU", lambda m: m.CELU(0.5, inplace=True)),
    ("SELU", lambda m: m.SELU(inplace=True)),
    ("Hardswish", lambda m: m.Hardswish(inplace=True)),
    ("Hardsigmoid", lambda m: m.Hardsigmoid(inplace=True)),
    ("Hardtanh", lambda m: m.Hardtanh(-0.5, 1.5, inplace=True)),
    ("Threshold", lambda m: m.Threshold(0.3, -2.0, inplace=True)),
    ("SiLU", lambda m: m.SiLU(inplace=True)),
    ("Mish", lambda m: m.Mish(inplace=True)),
    ("RReLU_eval", lambda m: m.RReLU(0.1, 0.3, inplace=True).eval()),
]

FUNCTIONS = [
    ("relu_", lambda F_, x: F_.relu_(x)),
    ("relu_inplace", lambda F_, x: F_.relu(x, inplace=True)),
    ("elu_", lambda F_, x: F_.elu_(x, 0.8)),
    ("leaky_relu_", lambda F_, x: F_.leaky_relu_(x, 0.1)),
    ("rrelu_eval", lambda F_, x: F_.rrelu_(x, 0.2, 0.4, training=False)),
    ("hardtanh_", lambda F_, x: F_.hardtanh_(x, -1.0, 2.0)),
    ("threshold_", lambda F_, x: F_.threshold_(x, 0.5, 2.0)),
    ("celu_", lambda F_, x: F_.celu_(x, 1.5)),
    ("selu_", lambda F_, x: F_.selu_(x)),
    ("relu6_inplace", lambda F_, x: F_.relu6(x, inplace=True)),
    ("hardswish_inplace", lambda F_, x: F_.hardswish(x, inplace=True)),
    ("hardsigmoid_inplace", lambda F_, x: F_.hardsigmoid(x, inplace=True)),
    ("silu_inplace", lambda F_, x: F_.silu(x, inplace=True)),
    ("mish_inplace", lambda F_, x: F_.mish(x, inplace=True)),
]

TOP = [  # torch.*_ and Tensor methods
    ("torch.relu_", lambda t, x: t.relu_(x)),
    ("torch.celu_", lambda t, x: t.celu_(x, 0.9)),
    ("torch.selu_", lambda t, x: t.selu_(x)),
    ("torch.threshold_", lambda t, x: t.threshold_(x, 0.1, 5.0)),
    ("torch.rrelu_", lambda t, x: t.rrelu_(x)),
    ("Tensor.relu_", lambda t, x: x.relu_()),
]


def _data(seed=0, n=6, k=7):
    """Inputs with values at the kinks (0, +-3, the thresholds) and beyond, through a linear layer's weights."""
    rng = np.random.default_rng(seed)
    inp = rng.standard_normal((n, k)).astype(np.float32)
    w = (rng.standard_normal((k, k)) * 1.5).astype(np.float32)
    kinks = np.array([0.0, -3.0, 3.0, 0.5, 0.3, -0.5, 1.5, 6.0, -1.0, 2.0, -7.0, 7.0, 0.1, -0.0], np.float32)
    return inp, w, kinks


def _run(lib, fn, inp, w, kinks, dev=None):
    """x = inp @ w (non-leaf), concatenated with the kink values (times a leaf scale, so they are non-leaf too);
    y = act(x) in place; returns (y, grads of inp, w, scale, and the version step of x)."""
    kw = {} if dev is None else {"device": dev}
    ti = lib.tensor(inp, requires_grad=True, **kw)
    tw = lib.tensor(w, requires_grad=True, **kw)
    ts = lib.tensor(1.0, requires_grad=True, **kw)
    tk = lib.tensor(kinks, **kw)
    x = lib.cat([(ti @ tw).reshape(-1), tk * ts])
    v0 = x._version
    y = fn(x)
    assert y is x
    dv = x._version - v0
    g = lib.tensor(np.linspace(-1, 2, y.numel()).astype(np.float32), **kw)
    (y * g).sum().backward()
    return y, ti.grad, tw.grad, ts.grad, dv


def _compare(ours_fn, ref_fn, device):
    inp, w, kinks = _data()
    ours = _run(cltorch, ours_fn, inp, w, kinks, device)
    ref = _run(torch, ref_fn, inp, w, kinks)
    for a, b in zip(ours[:4], ref[:4]):
        assert_close(a, b.detach().numpy(), rtol=2e-5, atol=2e-5)
    assert ours[4] == ref[4] == 1


@pytest.mark.parametrize("name,make", MODULES, ids=[m[0] for m in MODULES])
def test_module_inplace_matches_torch(name, make, device):
    m, tm = make(nn), make(torch.nn)
    assert repr(m) == repr(tm)
    _compare(m, tm, device)


@pytest.mark.parametrize("name,fn", FUNCTIONS, ids=[f[0] for f in FUNCTIONS])
def test_functional_inplace_matches_torch(name, fn, device):
    _compare(lambda x: fn(F, x), lambda x: fn(torch.nn.functional, x), device)


@pytest.mark.parametrize("name,fn", TOP[:4] + TOP[5:], ids=[f[0] for f in TOP[:4] + TOP[5:]])
def test_torch_namespace_inplace_matches_torch(name, fn, device):
    _compare(lambda x: fn(cltorch, x), lambda x: fn(torch, x), device)


def test_out_of_place_forms_match_torch(device):
    inp = _data(1)[0]
    for name in ("leaky_relu", "elu", "celu", "selu", "hardtanh", "relu6", "hardswish", "hardsigmoid", "threshold"):
        args = {"threshold": (0.5, -1.0)}.get(name, ())
        ti = cltorch.tensor(inp, requires_grad=True, device=device)
        ri = torch.tensor(inp, requires_grad=True)
        y = getattr(F, name)(ti * 3, *args)
        ry = getattr(torch.nn.functional, name)(ri * 3, *args)
        (y * y).sum().backward()
        (ry * ry).sum().backward()
        assert_close(y, ry.detach().numpy(), rtol=2e-5, atol=2e-6)
        assert_close(ti.grad, ri.grad.numpy(), rtol=2e-5, atol=2e-5)


def test_rrelu_training_inplace_uses_its_noise(device):
    cltorch.manual_seed(3)
    inp = cltorch.randn(64, requires_grad=True, device=device)
    x = inp * 2
    xs = to_np(x).copy()   # .numpy() shares the storage that rrelu_ writes
    y = F.rrelu_(x, 0.1, 0.3, training=True)
    assert y is x
    y.sum().backward()
    r = to_np(y) / np.where(xs == 0, 1, xs)
    neg = xs < 0
    assert neg.any() and (~neg).any()
    assert np.all((r[neg] >= 0.1) & (r[neg] <= 0.3)) and np.allclose(r[~neg & (xs != 0)], 1)
    assert_close(inp.grad, 2 * np.where(neg, r, 1.0), rtol=1e-5, atol=1e-6)   # d(x * r)/dx = r, through x = 2 inp
    mod = nn.RReLU(inplace=True)
    z = inp * 1
    assert mod(z) is z


@pytest.mark.parametrize("lib_fn", [
    lambda F_, x: F_.leaky_relu_(x, 0.2), lambda F_, x: F_.elu_(x), lambda F_, x: F_.selu_(x),
    lambda F_, x: F_.celu_(x), lambda F_, x: F_.hardswish(x, True), lambda F_, x: F_.relu_(x),
    lambda F_, x: F_.threshold_(x, 0.0, 1.0), lambda F_, x: F_.hardtanh_(x)])
def test_errors_as_torch(lib_fn, device):
    # a leaf that requires grad, and a view of one
    for lib, F_, kw in ((cltorch, F, {"device": device}), (torch, torch.nn.functional, {})):
        leaf = lib.ones(4, requires_grad=True, **kw)
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            lib_fn(F_, leaf)
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            lib_fn(F_, leaf[:2])
        with lib.no_grad():          # allowed without grad mode, and bumps the version
            v = leaf._version
            lib_fn(F_, leaf)
            assert leaf._version == v + 1
        # a value a prior op saved
        a = lib.linspace(-2, 2, 5, requires_grad=True, **kw)
        x = a * 1
        z = x * x                    # saves x
        lib_fn(F_, x)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            z.sum().backward()


@pytest.mark.parametrize("fn,match", [(lambda F_, x: F_.leaky_relu_(x, -0.5), "leakyReLu"),
                                      (lambda F_, x: F_.elu_(x, -0.5), "elu"),
                                      (lambda F_, x: F_.celu_(x, -0.5), "elu")])
def test_negative_slope_inplace_backward_raises(fn, match, device):
    for lib, F_, kw in ((cltorch, F, {"device": device}), (torch, torch.nn.functional, {})):
        a = lib.linspace(-2, 2, 5, requires_grad=True, **kw)
        y = fn(F_, a * 1)            # the forward is allowed
        with pytest.raises(RuntimeError, match=f"In-place {match} backward calculation is triggered with a "
                                               "negative slope"):
            y.sum().backward()
    with cltorch.no_grad():
        assert_close(F.leaky_relu_(cltorch.tensor([-1.0, 2.0], device=device), -0.5), [0.5, 2.0])


def test_inplace_on_view_of_non_leaf(device):
    inp = np.linspace(-2, 2, 12).astype(np.float32).reshape(3, 4)
    out = []
    for lib, F_, kw in ((cltorch, F, {"device": device}), (torch, torch.nn.functional, {})):
        a = lib.tensor(inp, requires_grad=True, **kw)
        x = a * 2
        F_.elu_(x[1:, :2], 0.5)   # (a second in-place op on x would make torch's saved result stale)
        (x * x).sum().backward()
        out.append((to_np(x) if lib is cltorch else x.detach().numpy(), to_np(a.grad) if lib is cltorch
                    else a.grad.numpy()))
    assert_close(out[0][0], out[1][0], rtol=1e-5, atol=1e-6)
    assert_close(out[0][1], out[1][1], rtol=1e-5, atol=1e-5)


def test_inplace_keeps_only_the_result(device):
    """The result-based forms write the input's own storage and save no copy of it."""
    a = cltorch.linspace(-2, 2, 8, requires_grad=True, device=device)
    x = a * 1
    storage = x._storage
    for fn in (F.relu_, lambda t: F.leaky_relu_(t, 0.1), F.elu_, F.selu_, F.celu_):
        y = fn(x)
        assert y is x and y._storage is storage
        saved = y.grad_fn.ctx._saved
        assert len(saved) == 1 and saved[0]._storage is storage


def test_integer_input_raises(device):
    t = cltorch.tensor([1, -2], device=device)
    for fn in (F.leaky_relu_, F.elu_, F.elu, F.hardswish):
        with pytest.raises(RuntimeError, match="not implemented for 'Int64'"):
            fn(t)


def test_double_backward_through_out_of_place(device):
    a = cltorch.tensor([-1.5, -0.2, 0.4, 2.0], dtype=cltorch.float64, requires_grad=True, device=device)
    assert cltorch.autograd.gradcheck(lambda t: F.elu(t, 0.7), (a,))
    assert cltorch.autograd.gradgradcheck(lambda t: F.elu(t, 0.7), (a,))
    assert cltorch.autograd.gradcheck(lambda t: F.elu_(t * 1, 0.7), (a,))
    assert cltorch.autograd.gradcheck(lambda t: F.leaky_relu_(t * 1, 0.3), (a,))
