"""The torch.nn classes and functions that cltorch composes from its existing ops: Fold, LPPool*, FeatureAlphaDropout,
CrossMapLRN2d, NLLLoss2d, the Lazy* modules, SyncBatchNorm (one process here; two ranks in
tests/test_nn_missing_dist.py), AdaptiveLogSoftmaxWithLoss, and F.fold / lp_pool* / feature_alpha_dropout /
gumbel_softmax / conv_tbc. Values and gradients are checked against torch (the CPU build installed as the oracle)
with the same weights and inputs; state-dict keys must be torch's."""
import copy
import inspect
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
import torch as T

import cltorch as torch
import cltorch.nn as nn
import cltorch.nn.functional as F

from conftest import requires_pinned_torch, to_np

ROOT = pathlib.Path(__file__).resolve().parents[1]
NEW_LOSS = "nn.LinearCrossEntropyLoss and F.linear_cross_entropy are new in it"
# torch 2.13 added ``bias=`` to the norm modules (an affine weight without a bias); their repr names it after
# ``affine=``. An older torch's norms have neither the keyword nor the field.
NORM_BIAS_IN_TORCH = "bias" in inspect.signature(T.nn.BatchNorm1d.__init__).parameters


def torch_repr(m):
    """``repr(m)`` as the installed torch writes the same module (see NORM_BIAS_IN_TORCH): compared with torch's
    own repr, everything but the field that torch version lacks is checked."""
    r = repr(m)
    return r if NORM_BIAS_IN_TORCH else re.sub(r"(affine=(?:True|False)), bias=(?:True|False)", r"\1", r)


def c(a, device, grad=False):
    """A cltorch tensor with the values of numpy/torch ``a`` on ``device``."""
    a = a.detach().numpy() if isinstance(a, T.Tensor) else np.asarray(a)
    t = torch.from_numpy(np.array(a, copy=True)).to(device)
    return t.requires_grad_() if grad else t


def tt(a, grad=False):
    t = T.from_numpy(np.array(a, copy=True))
    return t.requires_grad_() if grad else t


def close(got, ref, rtol=1e-5, atol=1e-5):
    ref = ref.detach().numpy() if isinstance(ref, T.Tensor) else np.asarray(ref)
    got = to_np(got)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol)


def copy_state(cm, tm):
    """Load torch module ``tm``'s state into cltorch module ``cm`` (same keys required)."""
    sd = tm.state_dict()
    assert list(cm.state_dict().keys()) == list(sd.keys())
    cm.load_state_dict({k: torch.from_numpy(v.detach().numpy().copy()) for k, v in sd.items()})


def compare(cm, tm, inputs, device, rtol=1e-5, atol=1e-5, out=lambda o: o):
    """Same state, same inputs: outputs, input gradients and parameter gradients agree."""
    copy_state(cm, tm)
    cm.to(device)
    ti = [tt(a, grad=np.issubdtype(np.asarray(a).dtype, np.floating)) for a in inputs]
    ci = [c(a, device, grad=np.issubdtype(np.asarray(a).dtype, np.floating)) for a in inputs]
    to, co = out(tm(*ti)), out(cm(*ci))
    close(co, to, rtol, atol)
    w = np.asarray(np.random.RandomState(1).randn(*to.shape), dtype=np.float32)
    (to * tt(w)).sum().backward()
    (co * c(w, device)).sum().backward()
    for a, b in zip(ci, ti):
        if b.requires_grad:
            close(a.grad, b.grad, rtol, atol)
    tp = dict(tm.named_parameters())
    for name, p in cm.named_parameters():
        close(p.grad, tp[name].grad, rtol, atol)
    return co, to


def rnd(*shape, seed=0, lo=None):
    a = np.random.RandomState(seed).randn(*shape).astype(np.float32)
    return np.abs(a) + lo if lo is not None else a


# ------------------------------------------------------------------------------------------------ fold
@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=(2, 3), stride=(2, 1), padding=(1, 2)),
                                dict(kernel_size=3, dilation=2, padding=1, stride=2)])
def test_fold_matches_torch(device, kw):
    out_size = (7, 6)
    L = T.nn.functional.unfold(T.zeros(1, 1, *out_size), **kw).shape[-1]
    k = kw["kernel_size"] if isinstance(kw["kernel_size"], tuple) else (kw["kernel_size"],) * 2
    x = rnd(2, 3 * k[0] * k[1], L)
    tm, cm = T.nn.Fold(out_size, **kw), nn.Fold(out_size, **kw)
    assert repr(cm) == repr(tm) and cm.state_dict() == {} and tm.state_dict() == {}
    compare(cm, tm, [x], device)
    close(F.fold(c(x[0], device), out_size, **kw), T.nn.functional.fold(tt(x[0]), out_size, **kw))  # unbatched


def test_fold_errors():
    with pytest.raises(RuntimeError, match="match the calculated number of sliding blocks"):
        F.fold(torch.zeros(1, 4, 5), (3, 3), 2)
    with pytest.raises(RuntimeError, match="divisible by the product of kernel_size"):
        F.fold(torch.zeros(1, 5, 4), (3, 3), 2)
    with pytest.raises(RuntimeError, match="Only unbatched"):
        F.fold(torch.zeros(1, 1, 4, 4), (3, 3), 2)


# ------------------------------------------------------------------------------------------------ LPPool
@pytest.mark.parametrize("p", [2, 1.5, 3])
def test_lppool_matches_torch(device, p):
    for cls, shape, kw in [("LPPool1d", (2, 3, 9), dict(kernel_size=3, stride=2)),
                           ("LPPool2d", (2, 3, 7, 6), dict(kernel_size=(2, 3), ceil_mode=True)),
                           ("LPPool3d", (1, 2, 5, 4, 6), dict(kernel_size=2, stride=(1, 2, 2)))]:
        tm, cm = getattr(T.nn, cls)(p, **kw), getattr(nn, cls)(p, **kw)
        assert torch_repr(cm) == repr(tm)
        compare(cm, tm, [rnd(*shape, lo=0.1)], device, rtol=1e-4, atol=1e-5)
    close(F.lp_pool2d(c(rnd(3, 4, 4, lo=0.1), device), 2, 2), T.nn.functional.lp_pool2d(tt(rnd(3, 4, 4, lo=0.1)), 2, 2),
          rtol=1e-5)


# ------------------------------------------------------------------------------------------------ dropout
def test_feature_alpha_dropout(device):
    torch.manual_seed(0)
    p = 0.4
    x = c(rnd(8, 16, 5, 3), device, grad=True)
    m = nn.FeatureAlphaDropout(p)
    assert repr(m) == repr(T.nn.FeatureAlphaDropout(p)) and m.state_dict() == {}
    y = m(x)
    alpha = 1.7580993408473766
    a = 1.0 / np.sqrt((alpha * alpha * p + 1) * (1 - p))
    xn, yn = to_np(x), to_np(y)
    kept = np.isclose(yn, xn * a + alpha * a * p, rtol=1e-5, atol=1e-5).all(axis=(2, 3))
    dropped = np.isclose(yn, -alpha * a * (1 - p), rtol=1e-5, atol=1e-5).all(axis=(2, 3))
    assert (kept ^ dropped).all(), "each (n, c) channel is wholly kept or wholly dropped"
    assert 0.2 < dropped.mean() < 0.6
    y.sum().backward()
    np.testing.assert_allclose(to_np(x.grad), np.broadcast_to((kept * a)[:, :, None, None], xn.shape), rtol=1e-6)
    m.eval()
    assert m(x) is x
    assert (to_np(F.feature_alpha_dropout(x, 1.0, True)) == 0).all()
    with pytest.raises(ValueError):
        F.feature_alpha_dropout(x, 1.5, True)
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        F.feature_alpha_dropout(torch.ones(4, device=device), 0.5, True)


# ------------------------------------------------------------------------------------------------ CrossMapLRN2d
@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_cross_map_lrn2d_values_torch_and_gradient(device, size):
    x = rnd(2, 7, 3, 4, seed=size)
    tm = T.nn.CrossMapLRN2d(size, alpha=0.3, beta=0.75, k=1.5)
    cm = nn.CrossMapLRN2d(size, alpha=0.3, beta=0.75, k=1.5)
    assert repr(cm) == repr(tm) and cm.state_dict() == {}
    xc = c(x, device, grad=True)
    y = cm(xc)
    close(y, tm(tt(x)), rtol=1e-5, atol=1e-6)
    # PyTorch's own backward is not its forward's gradient (and fails for size 1): check against central
    # differences of torch's forward in float64
    w = rnd(*x.shape, seed=9)
    (y * c(w, device)).sum().backward()
    x64, w64, h = x.astype(np.float64), w.astype(np.float64), 1e-6
    num = np.zeros_like(x64)
    f = T.nn.CrossMapLRN2d(size, alpha=0.3, beta=0.75, k=1.5)
    for i in np.ndindex(*x.shape):
        d = np.zeros_like(x64)
        d[i] = h
        num[i] = ((f(T.from_numpy(x64 + d)).numpy() - f(T.from_numpy(x64 - d)).numpy()) * w64).sum() / (2 * h)
    np.testing.assert_allclose(to_np(xc.grad), num, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="Expected input to be 4D"):
        cm(torch.zeros(2, 3, 4))


def test_nllloss2d_warns_and_is_nllloss(device):
    with pytest.warns(UserWarning, match="NLLLoss2d` has been deprecated"):
        cm = nn.NLLLoss2d(ignore_index=1)
    tm = T.nn.NLLLoss(ignore_index=1)
    x = np.log(np.random.RandomState(0).dirichlet(np.ones(4), size=(6,)).astype(np.float32))
    y = np.array([0, 1, 2, 3, 1, 0])
    close(cm(c(x, device), c(y, device)), tm(tt(x), tt(y)), rtol=1e-6)


# ------------------------------------------------------------------------------------------------ lazy modules
LAZY = [("LazyLinear", (5,), {}, (3, 4, 7)),
        ("LazyConv1d", (4, 3), dict(padding=1), (2, 3, 8)),
        ("LazyConv2d", (4, 3), dict(stride=2, groups=2), (2, 6, 7, 7)),
        ("LazyConv3d", (2, 2), {}, (1, 3, 4, 4, 4)),
        ("LazyConvTranspose1d", (4, 3), dict(stride=2), (2, 3, 5)),
        ("LazyConvTranspose2d", (4, 3), dict(output_padding=1, stride=2), (2, 3, 4, 4)),
        ("LazyConvTranspose3d", (2, 2), dict(groups=1), (1, 2, 3, 3, 3)),
        ("LazyBatchNorm1d", (), {}, (6, 4)),
        ("LazyBatchNorm2d", (), dict(momentum=0.3), (3, 4, 5, 5)),
        ("LazyBatchNorm3d", (), dict(affine=False), (2, 3, 3, 3, 3)),
        ("LazyInstanceNorm1d", (), {}, (2, 3, 6)),
        ("LazyInstanceNorm2d", (), dict(affine=False, track_running_stats=False), (2, 3, 4, 4)),
        ("LazyInstanceNorm3d", (), {}, (2, 2, 3, 3, 3))]


@pytest.mark.parametrize("name,args,kw,shape", LAZY, ids=[x[0] for x in LAZY])
def test_lazy_module_materializes_like_torch(device, name, args, kw, shape):
    tm, cm = getattr(T.nn, name)(*args, **kw), getattr(nn, name)(*args, **kw, device=device)
    assert torch_repr(cm) == repr(tm)
    assert list(cm.state_dict().keys()) == list(tm.state_dict().keys())
    assert cm.has_uninitialized_params() == tm.has_uninitialized_params() == (kw.get("affine", True) or
                                                                             kw.get("track_running_stats", True))
    params_before = list(cm.parameters())
    x = rnd(*shape)
    tm(tt(x))                                   # materialize torch's with a dummy batch
    with torch.no_grad():
        cm(c(x, device))
    eager = getattr(T.nn, name[4:])
    assert type(tm) is eager and type(cm) is getattr(nn, name[4:])
    assert all(a is b for a, b in zip(cm.parameters(), params_before)), "materialized in place"
    assert [tuple(p.shape) for p in cm.parameters()] == [tuple(p.shape) for p in tm.parameters()]
    assert torch_repr(cm) == repr(tm)
    if "Conv" in name or "Linear" in name:      # the eager layer's init: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
        fan_in = np.prod(cm.weight.shape[1:])
        assert np.abs(to_np(cm.weight)).max() <= 1 / np.sqrt(fan_in) + 1e-6
    compare(cm, tm, [rnd(*shape, seed=3)], device, rtol=1e-4, atol=1e-5)


def test_lazy_state_dict_load_optimizer_and_errors(device):
    # loading an eager checkpoint materializes the placeholders to its shapes
    ref = T.nn.Sequential(T.nn.Linear(7, 5), T.nn.ReLU(), T.nn.Linear(5, 2))
    m = nn.Sequential(nn.LazyLinear(5), nn.ReLU(), nn.LazyLinear(2))
    m.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in ref.state_dict().items()})
    m.to(device)
    x = rnd(4, 7)
    close(m(c(x, device)), ref(tt(x)), rtol=1e-5)
    # an optimizer built on the placeholders trains the materialized parameters (the same objects)
    torch.manual_seed(0)
    net = nn.Sequential(nn.LazyLinear(3), nn.LazyBatchNorm1d()).to(device)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    loss = net(c(x, device)).square().sum()
    loss.backward()
    w0 = to_np(net[0].weight).copy()
    opt.step()
    np.testing.assert_allclose(to_np(net[0].weight), w0 - 0.1 * to_np(net[0].weight.grad), rtol=1e-6)
    # placeholders refuse their shape, copy as placeholders, and keep a dtype/device change
    lz = nn.LazyLinear(3)
    with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized"):
        lz.weight.shape
    from cltorch.nn.modules.lazy import LazyModuleMixin
    from cltorch.nn._uninitialized import is_lazy
    assert isinstance(lz, LazyModuleMixin) and is_lazy(copy.deepcopy(lz).weight)
    lz = lz.double()
    assert is_lazy(lz.weight) and lz.weight.dtype == torch.float64
    lz(torch.zeros(2, 4, dtype=torch.float64))
    assert lz.weight.dtype == torch.float64 and tuple(lz.weight.shape) == (3, 4)
    assert repr(nn.UninitializedParameter()) == "<UninitializedParameter>"
    bn = nn.LazyBatchNorm2d().to(device)
    assert is_lazy(bn.running_mean) and bn.running_mean.device == torch.device(device)
    with pytest.raises(RuntimeError, match=r"Expected 3D \(unbatched\) or 4D \(batched\) input to LazyConv2d"):
        nn.LazyConv2d(2, 3)(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.LazyConv2d(4, 3, groups=2)(torch.zeros(1, 3, 5, 5))


def test_lazy_uninitialized_state_dict_loads_into_lazy():
    a, b = nn.LazyLinear(3), nn.LazyLinear(3)
    b.load_state_dict(a.state_dict())
    assert b.has_uninitialized_params()


# ------------------------------------------------------------------------------------------------ SyncBatchNorm
def test_sync_batchnorm_single_process_is_batchnorm(device):
    tm, cm = T.nn.SyncBatchNorm(4, momentum=0.2), nn.SyncBatchNorm(4, momentum=0.2)
    assert torch_repr(cm) == repr(tm)
    T.nn.init.uniform_(tm.weight)
    T.nn.init.uniform_(tm.bias)
    compare(cm, tm, [rnd(5, 4, 3, 2)], device)
    close(cm.running_mean, tm.running_mean, rtol=1e-5, atol=1e-6)
    close(cm.running_var, tm.running_var, rtol=1e-5, atol=1e-6)
    assert int(cm.num_batches_tracked.item()) == 1
    cm.eval()
    tm.eval()
    x = rnd(3, 4, 6, seed=4)
    close(cm(c(x, device)), tm(tt(x)), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="expected at least 2D input"):
        cm(torch.zeros(3, device=device))
    with pytest.raises(ValueError, match="channels should be non-zero"):
        nn.SyncBatchNorm(0)(torch.zeros(2, 0, 3))


def test_sync_batchnorm_process_group_needs_distributed():
    m = nn.SyncBatchNorm(3, process_group=object())
    with pytest.raises(RuntimeError, match="cltorch.distributed is not initialized"):
        m(torch.zeros(4, 3))
    m.eval()
    m(torch.zeros(4, 3))  # eval mode never synchronises


def test_convert_sync_batchnorm_keeps_tensors():
    net = nn.Sequential(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4), nn.Sequential(nn.BatchNorm1d(2, affine=False)))
    net.eval()
    w, rm = net[1].weight, net[1].running_mean
    ref = T.nn.SyncBatchNorm.convert_sync_batchnorm(
        T.nn.Sequential(T.nn.Conv2d(3, 4, 1), T.nn.BatchNorm2d(4), T.nn.Sequential(T.nn.BatchNorm1d(2, affine=False))))
    out = nn.SyncBatchNorm.convert_sync_batchnorm(net)
    assert type(out[1]) is nn.SyncBatchNorm and type(out[2][0]) is nn.SyncBatchNorm
    assert out[1].weight is w and out[1].running_mean is rm and not out[1].training
    assert out[2][0].weight is None and not out[2][0].affine
    assert list(out.state_dict().keys()) == list(ref.state_dict().keys())
    assert torch_repr(out) == repr(ref)
    bn = nn.BatchNorm1d(5)
    assert type(nn.SyncBatchNorm.convert_sync_batchnorm(bn)) is nn.SyncBatchNorm


# ------------------------------------------------------------------------------------------------ adaptive softmax
def test_adaptive_log_softmax_matches_torch(device):
    T.manual_seed(0)
    tm = T.nn.AdaptiveLogSoftmaxWithLoss(16, 30, [5, 12, 20], div_value=2.0, head_bias=True)
    cm = nn.AdaptiveLogSoftmaxWithLoss(16, 30, [5, 12, 20], div_value=2.0, head_bias=True)
    assert torch_repr(cm) == repr(tm)
    x = rnd(9, 16)
    y = np.array([0, 4, 5, 11, 12, 19, 20, 29, 3], dtype=np.int64)
    compare(cm, tm, [x, y], device, rtol=1e-5, atol=1e-5, out=lambda o: o.output)
    xc = c(x, device)
    close(cm(xc, c(y, device)).loss, tm(tt(x), tt(y)).loss, rtol=1e-5)
    close(cm.log_prob(xc), tm.log_prob(tt(x)), rtol=1e-5, atol=1e-5)
    xb = rnd(40, 16, seed=5) * 3
    np.testing.assert_array_equal(to_np(cm.predict(c(xb, device))), tm.predict(tt(xb)).numpy())
    o = cm(xc[0], c(y, device)[3])          # unbatched
    close(o.output, tm(tt(x[0]), tt(y)[3]).output, rtol=1e-5)
    with pytest.raises(RuntimeError, match=r"Target values should be in \[0, 29\]"):
        cm(xc, c(np.full(9, 30), device))
    with pytest.raises(RuntimeError, match="same size in the batch dimension"):
        cm(xc, c(y[:3], device))
    with pytest.raises(ValueError, match="cutoffs should be a sequence of unique"):
        nn.AdaptiveLogSoftmaxWithLoss(16, 30, [5, 5])


# ------------------------------------------------------------------------------------------------ functional extras
def test_gumbel_softmax(device):
    torch.manual_seed(0)
    logits = c(rnd(64, 5), device, grad=True)
    y = F.gumbel_softmax(logits, tau=0.5)
    np.testing.assert_allclose(to_np(y.sum(-1)), np.ones(64), rtol=1e-5)
    h = F.gumbel_softmax(logits, tau=0.5, hard=True)
    hn = to_np(h)
    assert set(np.unique(hn)) <= {0.0, 1.0} and (hn.sum(-1) == 1).all()
    (h * c(np.arange(5.0, dtype=np.float32), device)).sum().backward()   # straight-through: the soft sample's grad
    assert np.abs(to_np(logits.grad)).sum() > 0
    counts = np.bincount(hn.argmax(-1), minlength=5)
    assert counts.max() < 64


def test_conv_tbc_and_aliases(device):
    x, w, b = rnd(7, 2, 3), rnd(3, 3, 4, seed=1), rnd(4, seed=2)
    ti, ci = [tt(a, True) for a in (x, w, b)], [c(a, device, True) for a in (x, w, b)]
    to, co = T.conv_tbc(*ti, 1), F.conv_tbc(*ci, 1)
    close(co, to, rtol=1e-5)
    to.sum().backward()
    co.sum().backward()
    for a, r in zip(ci, ti):
        close(a.grad, r.grad, rtol=1e-5, atol=1e-5)
    v, i = F.max_pool1d_with_indices(c(rnd(2, 3, 8), device), 2)
    tv, ti_ = T.nn.functional.max_pool1d_with_indices(tt(rnd(2, 3, 8)), 2, return_indices=True)
    close(v, tv)
    np.testing.assert_array_equal(to_np(i), ti_.numpy())
    x = rnd(2, 6, 3, 2)
    close(F.native_channel_shuffle(c(x, device), 3), T.nn.functional.native_channel_shuffle(tt(x), 3), rtol=0, atol=0)
    v, i = F.adaptive_max_pool2d_with_indices(c(rnd(2, 3, 6, 6), device), 3)
    tv, ti_ = T.nn.functional.adaptive_max_pool2d_with_indices(tt(rnd(2, 3, 6, 6)), 3, return_indices=True)
    close(v, tv)
    np.testing.assert_array_equal(to_np(i), ti_.numpy())


# ------------------------------------------------------------------------------------------------ linear + cross entropy
@requires_pinned_torch(NEW_LOSS)
@pytest.mark.parametrize("kw,tshape", [(dict(bias=True), (6,)), (dict(out_features=(3,), label_smoothing=0.1), (6, 3)),
                                       (dict(reduction="none", ignore_index=2), (6,))])
def test_linear_cross_entropy_loss_matches_torch(device, kw, tshape):
    T.manual_seed(0)
    tm, cm = T.nn.LinearCrossEntropyLoss(8, 5, **kw), nn.LinearCrossEntropyLoss(8, 5, **kw)
    assert torch_repr(cm) == repr(tm)
    y = np.random.RandomState(2).randint(0, 5, size=tshape).astype(np.int64)
    compare(cm, tm, [rnd(6, 8), y], device, rtol=1e-5, atol=1e-6)


@requires_pinned_torch(NEW_LOSS)
def test_linear_cross_entropy_options_validate_like_torch():
    assert repr(nn.LinearCrossEntropyOptions(batch_chunk_size=4)) == repr(T.nn.LinearCrossEntropyOptions(
        batch_chunk_size=4))
    for bad in [dict(acc_policy="fast"), dict(chunking_method="rows"), dict(batch_chunk_size=0),
                dict(acc_dtype=torch.int32)]:
        with pytest.raises(ValueError):
            nn.LinearCrossEntropyOptions(**bad)
    with pytest.raises(RuntimeError, match="expected weight shape"):
        nn.LinearCrossEntropyLoss(8, 5, weight=torch.ones(4))
    m = nn.LinearCrossEntropyLoss(8, 5, options=nn.LinearCrossEntropyOptions(batch_chunk_size=2))
    ref = nn.LinearCrossEntropyLoss(8, 5)
    ref.load_state_dict(m.state_dict())
    x, y = torch.randn(6, 8), torch.tensor([0, 1, 2, 3, 4, 0])
    assert float(m(x, y).item()) == float(ref(x, y).item())     # options choose a schedule, not a result


# ------------------------------------------------------------------------------------------------ nn.grad
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_nn_grad_conv_input_and_weight_match_torch(device, nd):
    kw = dict(stride=2, padding=1, dilation=1, groups=2) if nd != 3 else dict(stride=1, padding=0, dilation=2, groups=1)
    x = rnd(2, 4, *([7, 6, 5][:nd]))
    w = rnd(6, 4 // kw["groups"], *([3, 2, 2][:nd]), seed=1)
    conv = getattr(T.nn.functional, f"conv{nd}d")
    go = rnd(*conv(tt(x), tt(w), **kw).shape, seed=2)
    ri = getattr(T.nn.grad, f"conv{nd}d_input")(x.shape, tt(w), tt(go), **kw)
    rw = getattr(T.nn.grad, f"conv{nd}d_weight")(tt(x), w.shape, tt(go), **kw)
    wc, goc = c(w, device, grad=True), c(go, device)
    ci = getattr(nn.grad, f"conv{nd}d_input")(x.shape, wc, goc, **kw)
    cw = getattr(nn.grad, f"conv{nd}d_weight")(c(x, device), w.shape, goc, **kw)
    close(ci, ri, rtol=1e-4, atol=1e-5)
    close(cw, rw, rtol=1e-4, atol=1e-5)
    # differentiable w.r.t. the other operand: d(sum(ci * v))/dw against torch's double backward
    v = rnd(*x.shape, seed=4)
    tw = tt(w, grad=True)
    (getattr(T.nn.grad, f"conv{nd}d_input")(x.shape, tw, tt(go), **kw) * tt(v)).sum().backward()
    (ci * c(v, device)).sum().backward()
    close(wc.grad, tw.grad, rtol=1e-4, atol=1e-4)
    with pytest.raises(RuntimeError, match="grad_output has shape"):
        getattr(nn.grad, f"conv{nd}d_input")(x.shape, wc, c(go, device)[:1], **kw)


# ------------------------------------------------------------------------------------------------ names and a script
NOT_YET = { "intrinsic", "qat", "quantizable",
           "quantized", "common_types", "factory_kwargs"}


def test_every_torch_nn_name_exists_but_the_listed_ones():
    missing = {n for n in dir(T.nn) if not n.startswith("_") and not hasattr(nn, n)}
    assert missing <= NOT_YET, sorted(missing - NOT_YET)
    for name in ["fold", "lp_pool1d", "lp_pool2d", "lp_pool3d", "feature_alpha_dropout", "gumbel_softmax",
                 "conv_tbc"]:
        assert getattr(F, name).__module__ == "cltorch.nn.functional"


def test_torch_style_script_under_cltorch(tmp_path):
    script = pathlib.Path(__file__).parent / "nn_missing_scripts" / "lazy_sync_adaptive.py"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    p = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "done" in p.stdout


def test_whole_module_pickles_cross_between_torch_and_cltorch(tmp_path):
    """A whole torch module saved with torch.save loads in cltorch as the cltorch class (and back)."""
    T.manual_seed(0)
    mods = [T.nn.SyncBatchNorm(3), T.nn.Fold((3, 3), 2), T.nn.LPPool2d(2, 2), T.nn.CrossMapLRN2d(3),
            T.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [4]), T.nn.FeatureAlphaDropout()]
    if hasattr(T.nn, "LinearCrossEntropyLoss"):           # new in torch 2.13
        mods.append(T.nn.LinearCrossEntropyLoss(4, 5))
    for tm in mods:
        path = tmp_path / "m.pt"
        T.save(tm, path)
        cm = torch.load(path, weights_only=False)
        assert type(cm) is getattr(nn, type(tm).__name__) and torch_repr(cm) == repr(tm)
        assert list(cm.state_dict().keys()) == list(tm.state_dict().keys())
        for k, v in tm.state_dict().items():
            np.testing.assert_array_equal(to_np(cm.state_dict()[k]), v.numpy())
        torch.save(cm, path)
        assert type(T.load(path, weights_only=False)) is type(tm)
    lz = nn.LazyLinear(3)
    lz(torch.zeros(2, 4))
    torch.save(lz, tmp_path / "l.pt")
    assert type(T.load(tmp_path / "l.pt", weights_only=False)) is T.nn.Linear
