"""nn sub-paths of the newer classes and nn.utils extras (weight_norm, spectral_norm, parametrize, fusion, ...),
checked against torch: the same weights copied across, then values, gradients and state-dict keys compared."""
import copy
import importlib

import numpy as np
import pytest
import torch

import cltorch
import cltorch.nn as cnn
from conftest import IS_PINNED_TORCH

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")  # torch deprecates the hook weight_norm

PATHS = {
    "": "LazyLinear Fold LPPool1d LPPool2d LPPool3d SyncBatchNorm FeatureAlphaDropout CrossMapLRN2d NLLLoss2d "
        "AdaptiveLogSoftmaxWithLoss LazyConv2d LazyBatchNorm1d LazyInstanceNorm2d LinearCrossEntropyLoss",
    "fold": "Fold Unfold", "batchnorm": "SyncBatchNorm LazyBatchNorm1d LazyBatchNorm2d LazyBatchNorm3d",
    "instancenorm": "LazyInstanceNorm1d LazyInstanceNorm2d LazyInstanceNorm3d", "linear": "LazyLinear",
    "conv": "LazyConv1d LazyConv2d LazyConv3d LazyConvTranspose1d LazyConvTranspose2d LazyConvTranspose3d",
    "pooling": "LPPool1d LPPool2d LPPool3d", "dropout": "FeatureAlphaDropout", "normalization": "CrossMapLRN2d",
    "loss": "NLLLoss2d LinearCrossEntropyLoss",
}
NEWER = {"LinearCrossEntropyLoss"}      # new in torch 2.13


@pytest.mark.parametrize("sub", sorted(PATHS))
def test_module_subpaths_match_torch(sub):
    tm = importlib.import_module("torch.nn.modules" + ("." + sub if sub else ""))
    cm = importlib.import_module("cltorch.nn.modules" + ("." + sub if sub else ""))
    for name in PATHS[sub].split():
        # every listed name is the pinned torch's (there it must exist); another torch may predate some of them
        assert hasattr(tm, name) or (not IS_PINNED_TORCH and name in NEWER), (sub, name)
        cls = getattr(cm, name)
        assert cls is getattr(cnn, name) and cls.__name__ == name
    if sub:
        assert set(tm.__all__) <= set(cm.__all__)
        ns = {}
        exec(f"from cltorch.nn.modules.{sub} import *", ns)
        assert all(n in ns for n in cm.__all__)
    with pytest.raises(AttributeError):
        cm.NoSuchLayer


def test_parameter_path_uninitialized():
    import cltorch.nn.parameter as P
    import torch.nn.parameter as TP
    assert set(TP.__all__) <= set(P.__all__)
    u = P.UninitializedParameter()
    assert P.is_lazy(u) and P.is_lazy(P.UninitializedBuffer())
    assert not P.is_lazy(cnn.Parameter(cltorch.ones(2))) and not P.is_lazy(cltorch.ones(2))
    assert isinstance(u, P.UninitializedTensorMixin) and P.UninitializedParameter is cnn.UninitializedParameter
    lin = cnn.LazyLinear(3)
    assert P.is_lazy(lin.weight)
    lin(cltorch.ones(2, 5))
    assert not P.is_lazy(lin.weight) and tuple(lin.weight.shape) == (3, 5)


def _c(t):
    return cltorch.tensor(t.detach().numpy())


def _close(c, t, tol=1e-5):
    np.testing.assert_allclose(c.detach().numpy() if hasattr(c, "detach") else np.asarray(c), t.detach().numpy(),
                               rtol=tol, atol=tol)


def _pair(tcls, ccls, *args, **kw):
    """The same layer in torch and cltorch, cltorch's weights copied from torch's."""
    torch.manual_seed(0)
    tm = tcls(*args, **kw)
    cm = ccls(*args, **kw)
    cm.load_state_dict({k: _c(v) for k, v in tm.state_dict().items()})
    return tm, cm


def _check_grads(tm, cm, x, tol=1e-4):
    tx = torch.tensor(x, requires_grad=True)
    cx = cltorch.tensor(x, requires_grad=True)
    ty, cy = tm(tx), cm(cx)
    _close(cy, ty, tol)
    (ty * ty).sum().backward()
    (cy * cy).sum().backward()
    _close(cx.grad, tx.grad, tol)
    tp, cp = dict(tm.named_parameters()), dict(cm.named_parameters())
    assert sorted(tp) == sorted(cp)
    for k in tp:
        _close(cp[k].grad, tp[k].grad, tol)


@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_hook(dim):
    tm, cm = _pair(torch.nn.Conv2d, cnn.Conv2d, 3, 4, 3)
    torch.nn.utils.weight_norm(tm, dim=dim)
    cnn.utils.weight_norm(cm, dim=dim)
    assert list(cm.state_dict()) == list(tm.state_dict())
    for k, v in tm.state_dict().items():
        _close(cm.state_dict()[k], v)
    x = np.random.RandomState(1).randn(2, 3, 6, 6).astype(np.float32)
    _check_grads(tm, cm, x)
    with pytest.raises(RuntimeError):
        cnn.utils.weight_norm(cm, dim=dim)
    torch.nn.utils.remove_weight_norm(tm)
    cnn.utils.remove_weight_norm(cm)
    assert list(cm.state_dict()) == list(tm.state_dict()) and sorted(tm.state_dict()) == ["bias", "weight"]
    _close(cm.weight, tm.weight)
    with pytest.raises(ValueError):
        cnn.utils.remove_weight_norm(cm)


@pytest.mark.parametrize("layer", ["linear", "convT"])
def test_spectral_norm_hook(layer):
    if layer == "linear":
        tm, cm = _pair(torch.nn.Linear, cnn.Linear, 5, 4)
        x = np.random.RandomState(2).randn(3, 5).astype(np.float32)
    else:
        tm, cm = _pair(torch.nn.ConvTranspose2d, cnn.ConvTranspose2d, 3, 4, 2)
        x = np.random.RandomState(2).randn(2, 3, 4, 4).astype(np.float32)
    torch.nn.utils.spectral_norm(tm, n_power_iterations=2)
    cnn.utils.spectral_norm(cm, n_power_iterations=2)
    assert sorted(cm.state_dict()) == sorted(tm.state_dict())
    assert {"weight_orig", "weight_u", "weight_v"} <= set(tm.state_dict())
    cm.load_state_dict({k: _c(v) for k, v in tm.state_dict().items()})
    _check_grads(tm, cm, x)              # training: a power iteration updates u, v
    _close(cm.weight_u, tm.weight_u)
    _close(cm.weight_v, tm.weight_v)
    tm.eval(), cm.eval()
    _close(cm(cltorch.tensor(x)), tm(torch.tensor(x)))
    torch.nn.utils.remove_spectral_norm(tm)
    cnn.utils.remove_spectral_norm(cm)
    assert sorted(cm.state_dict()) == sorted(tm.state_dict())
    _close(cm.weight, tm.weight)


def test_parametrizations_weight_norm_and_spectral_norm():
    P, CP = torch.nn.utils.parametrizations, cnn.utils.parametrizations
    tm, cm = _pair(torch.nn.Linear, cnn.Linear, 6, 4)
    P.weight_norm(tm)
    CP.weight_norm(cm)
    assert list(cm.state_dict()) == list(tm.state_dict())
    assert "parametrizations.weight.original0" in tm.state_dict()
    x = np.random.RandomState(3).randn(5, 6).astype(np.float32)
    _check_grads(tm, cm, x)
    assert type(cm).__name__ == "ParametrizedLinear" and cnn.utils.parametrize.is_parametrized(cm, "weight")
    torch.manual_seed(1)
    ts = torch.nn.Conv1d(3, 4, 3)
    cs = cnn.Conv1d(3, 4, 3)
    cs.load_state_dict({k: _c(v) for k, v in ts.state_dict().items()})
    P.spectral_norm(ts)
    CP.spectral_norm(cs)
    assert list(cs.state_dict()) == list(ts.state_dict())
    cs.load_state_dict({k: _c(v) for k, v in ts.state_dict().items()})
    _check_grads(ts, cs, np.random.RandomState(4).randn(2, 3, 7).astype(np.float32))
    _close(cs.parametrizations.weight[0]._u, ts.parametrizations.weight[0]._u)


class _Sym(torch.nn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).transpose(-1, -2)


class _CSym(cnn.Module):
    def forward(self, x):
        return x.triu() + x.triu(1).transpose(-1, -2)


def test_parametrize_register_cached_assign_remove():
    R, CR = torch.nn.utils.parametrize, cnn.utils.parametrize
    tm, cm = _pair(torch.nn.Linear, cnn.Linear, 3, 3)
    R.register_parametrization(tm, "weight", _Sym())
    CR.register_parametrization(cm, "weight", _CSym())
    assert list(cm.state_dict()) == list(tm.state_dict())
    _close(cm.weight, tm.weight)
    _check_grads(tm, cm, np.random.RandomState(5).randn(4, 3).astype(np.float32))
    with CR.cached():
        assert cm.weight is cm.weight
    assert cm.weight is not cm.weight
    with pytest.raises(ValueError):        # no parameter or buffer of that name
        CR.register_parametrization(cm, "nope", _CSym())
    R.remove_parametrizations(tm, "weight")
    CR.remove_parametrizations(cm, "weight")
    assert type(cm) is cnn.Linear and not CR.is_parametrized(cm)
    assert list(cm.state_dict()) == list(tm.state_dict()) and sorted(tm.state_dict()) == ["bias", "weight"]
    _close(cm.weight, tm.weight)
    assert isinstance(cm.weight, cnn.Parameter)


def test_parametrize_right_inverse_assignment():
    class Scale(cnn.Module):
        def forward(self, x):
            return 2 * x

        def right_inverse(self, x):
            return x / 2
    m = cnn.Linear(2, 2)
    cnn.utils.parametrize.register_parametrization(m, "weight", Scale())
    w = cltorch.tensor([[1.0, 2.0], [3.0, 4.0]])
    m.weight = w
    _close(m.weight, torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    _close(m.parametrizations.weight.original, torch.tensor([[0.5, 1.0], [1.5, 2.0]]))


@pytest.mark.parametrize("kind", ["conv", "convT", "linear"])
def test_fuse_bn_eval(kind):
    torch.manual_seed(2)
    if kind == "linear":
        tl, tb = torch.nn.Linear(4, 5), torch.nn.BatchNorm1d(5)
        cl, cb = cnn.Linear(4, 5), cnn.BatchNorm1d(5)
        x = np.random.RandomState(6).randn(3, 4).astype(np.float32)
    elif kind == "conv":
        tl, tb = torch.nn.Conv2d(3, 4, 3, bias=False), torch.nn.BatchNorm2d(4)
        cl, cb = cnn.Conv2d(3, 4, 3, bias=False), cnn.BatchNorm2d(4)
        x = np.random.RandomState(6).randn(2, 3, 5, 5).astype(np.float32)
    else:
        tl, tb = torch.nn.ConvTranspose2d(3, 4, 2), torch.nn.BatchNorm2d(4)
        cl, cb = cnn.ConvTranspose2d(3, 4, 2), cnn.BatchNorm2d(4)
        x = np.random.RandomState(6).randn(2, 3, 4, 4).astype(np.float32)
    with torch.no_grad():
        tb.running_mean.uniform_(-1, 1), tb.running_var.uniform_(0.5, 2), tb.weight.uniform_(0.5, 2)
        tb.bias.uniform_(-1, 1)
    for t, c in ((tl, cl), (tb, cb)):
        c.load_state_dict({k: _c(v) for k, v in t.state_dict().items()})
        t.eval(), c.eval()
    U, CU = torch.nn.utils, cnn.utils
    if kind == "linear":
        tf, cf = U.fuse_linear_bn_eval(tl, tb), CU.fuse_linear_bn_eval(cl, cb)
    else:
        tf, cf = U.fuse_conv_bn_eval(tl, tb, kind == "convT"), CU.fuse_conv_bn_eval(cl, cb, kind == "convT")
    _close(cf.weight, tf.weight)
    _close(cf.bias, tf.bias)
    _close(cf(cltorch.tensor(x)), tb(tl(torch.tensor(x))).detach())
    assert cl.bias is None or cf.bias is not cl.bias
    cl.train()
    with pytest.raises(AssertionError):
        CU.fuse_conv_bn_eval(cl, cb) if kind != "linear" else CU.fuse_linear_bn_eval(cl, cb)


def test_functional_call_and_skip_init():
    torch.manual_seed(3)
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    cm = cnn.Sequential(cnn.Linear(3, 4), cnn.ReLU(), cnn.Linear(4, 2))
    cm.load_state_dict({k: _c(v) for k, v in tm.state_dict().items()})
    w = np.random.RandomState(7).randn(2, 4).astype(np.float32)
    tw, cw = torch.tensor(w, requires_grad=True), cltorch.tensor(w, requires_grad=True)
    x = np.random.RandomState(8).randn(5, 3).astype(np.float32)
    ty = torch.nn.utils.stateless.functional_call(tm, {"2.weight": tw}, (torch.tensor(x),))
    cy = cnn.utils.stateless.functional_call(cm, {"2.weight": cw}, (cltorch.tensor(x),))
    _close(cy, ty)
    ty.sum().backward()
    cy.sum().backward()
    _close(cw.grad, tw.grad)
    assert cm[2].weight.grad is None and isinstance(cm[2].weight, cnn.Parameter)
    _close(cm[2].weight, tm[2].weight)
    with pytest.raises(RuntimeError):
        cnn.utils.stateless.functional_call(cm, {"2.weight": cw}, (cltorch.tensor(x),), strict=True)
    m = cnn.utils.skip_init(cnn.Linear, 3, 4)
    assert isinstance(m, cnn.Linear) and tuple(m.weight.shape) == (4, 3)
    with pytest.raises(RuntimeError):
        cnn.utils.skip_init(cnn.ReLU)
