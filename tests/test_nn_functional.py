"""nn.init, nn.utils, dropout and the functional pieces not covered by the golden files, against numpy and
the formulas in PyTorch's documentation, on every device."""
import math

import numpy as np
import pytest

import cltorch as torch
import cltorch.nn as nn
import cltorch.nn.functional as F
from cltorch.nn import init
from cltorch.nn.utils import (clip_grad_norm_, clip_grad_value_, parameters_to_vector, vector_to_parameters,
                              get_total_norm)

from conftest import DEVICES, to_np


# ------------------------------------------------------------------------------------------------ init
def test_calculate_gain():
    assert init.calculate_gain("linear") == 1 and init.calculate_gain("conv2d") == 1
    assert init.calculate_gain("sigmoid") == 1
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert init.calculate_gain("leaky_relu") == pytest.approx(math.sqrt(2 / (1 + 0.01 ** 2)))
    assert init.calculate_gain("leaky_relu", 0.2) == pytest.approx(math.sqrt(2 / 1.04))
    assert init.calculate_gain("selu") == 0.75
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        init.calculate_gain("swish")
    with pytest.raises(ValueError, match="not a valid number"):
        init.calculate_gain("leaky_relu", "x")


def _stats(t):
    a = to_np(t).astype(np.float64).ravel()
    return a, a.mean(), a.std()


def test_xavier_and_kaiming_bounds_and_std():
    torch.manual_seed(1)
    w = torch.empty(200, 300)
    fan_in, fan_out = 300, 200
    a, mean, std = _stats(init.xavier_uniform_(w, gain=2.0))
    bound = 2.0 * math.sqrt(6 / (fan_in + fan_out))
    assert np.abs(a).max() <= bound and np.abs(a).max() > 0.99 * bound
    assert abs(std / (bound / math.sqrt(3)) - 1) < 0.02 and abs(mean) < 0.01
    a, mean, std = _stats(init.xavier_normal_(w))
    assert abs(std / math.sqrt(2 / (fan_in + fan_out)) - 1) < 0.02
    a, mean, std = _stats(init.kaiming_uniform_(w, a=0, mode="fan_out", nonlinearity="relu"))
    bound = math.sqrt(2) * math.sqrt(3 / fan_out)
    assert np.abs(a).max() <= bound and abs(std / (bound / math.sqrt(3)) - 1) < 0.02
    a, mean, std = _stats(init.kaiming_normal_(w, nonlinearity="relu"))
    assert abs(std / (math.sqrt(2) / math.sqrt(fan_in)) - 1) < 0.02
    conv = torch.empty(8, 4, 3, 3)
    assert init._calculate_fan_in_and_fan_out(conv) == (36, 72)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(torch.empty(5))
    with pytest.raises(ValueError, match="Mode"):
        init.kaiming_uniform_(w, mode="fan_avg")
    with pytest.warns(UserWarning):
        init.kaiming_uniform_(torch.empty(0, 3))


def test_constant_eye_dirac_zeros_ones():
    t = torch.empty(2, 3)
    np.testing.assert_array_equal(to_np(init.constant_(t, 0.5)), np.full((2, 3), 0.5))
    np.testing.assert_array_equal(to_np(init.zeros_(t)), np.zeros((2, 3)))
    np.testing.assert_array_equal(to_np(init.ones_(t)), np.ones((2, 3)))
    np.testing.assert_array_equal(to_np(init.eye_(t)), np.eye(2, 3))
    with pytest.raises(ValueError):
        init.eye_(torch.empty(2, 2, 2))
    w = init.dirac_(torch.empty(4, 2, 3))
    ref = np.zeros((4, 2, 3))
    ref[0, 0, 1] = ref[1, 1, 1] = 1
    np.testing.assert_array_equal(to_np(w), ref)
    # an identity convolution: conv1d with a Dirac weight returns the input channels
    x = torch.randn(1, 2, 5)
    np.testing.assert_allclose(to_np(F.conv1d(x, init.dirac_(torch.empty(2, 2, 3)), padding=1)), to_np(x),
                               rtol=1e-6)


def test_erfinv_against_math_erf():
    y = np.linspace(-0.999999, 0.999999, 2001)
    for newton, tol in ((0, 2e-6), (2, 1e-12)):
        x = init._erfinv(y, newton)
        back = np.array([math.erf(v) for v in x])
        assert np.abs(back - y).max() < tol * max(1.0, 1.0), newton


def test_trunc_normal_range_and_moments():
    torch.manual_seed(3)
    t = init.trunc_normal_(torch.empty(100000), mean=1.0, std=2.0, a=-1.0, b=4.0)
    a = to_np(t).astype(np.float64)
    assert a.min() >= -1.0 and a.max() <= 4.0
    # moments of N(1, 2^2) truncated to [-1, 4]: alpha = -1, beta = 1.5
    phi = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    Phi = lambda z: 0.5 * (1 + math.erf(z / math.sqrt(2)))  # noqa: E731
    al, be = -1.0, 1.5
    Z = Phi(be) - Phi(al)
    mean = 1.0 + 2.0 * (phi(al) - phi(be)) / Z
    var = 4.0 * (1 + (al * phi(al) - be * phi(be)) / Z - ((phi(al) - phi(be)) / Z) ** 2)
    assert abs(a.mean() - mean) < 0.02 and abs(a.var() / var - 1) < 0.02


def test_orthogonal_is_orthogonal():
    torch.manual_seed(0)
    for shape in ((6, 4), (3, 8), (4, 2, 3)):
        q = to_np(init.orthogonal_(torch.empty(*shape), gain=2.0)).reshape(shape[0], -1).astype(np.float64)
        if q.shape[0] >= q.shape[1]:
            np.testing.assert_allclose(q.T @ q, 4 * np.eye(q.shape[1]), atol=1e-5)
        else:
            np.testing.assert_allclose(q @ q.T, 4 * np.eye(q.shape[0]), atol=1e-5)
    with pytest.raises(ValueError):
        init.orthogonal_(torch.empty(3))


@pytest.mark.parametrize("shape,dtype", [((6, 4), "float32"), ((3, 8), "float32"), ((4, 2, 3), "float32"),
                                         ((5, 5), "float64"), ((2, 7), "float64")])
def test_orthogonal_matches_torch_construction(shape, dtype):
    """Given the same normal matrix, orthogonal_ gives torch.nn.init.orthogonal_'s matrix: torch's own steps
    (torch.linalg.qr, signs of diag(R), transposes when rows < cols, gain) run by the oracle on the draws
    orthogonal_ makes (reproduced with the same seed), in the tensor's dtype."""
    ref = pytest.importorskip("torch")
    rows = shape[0]
    cols = int(np.prod(shape[1:]))
    torch.manual_seed(5)
    normals = to_np(torch.empty((rows, cols)).normal_(0.0, 1.0)).astype(dtype)
    torch.manual_seed(5)
    got = init.orthogonal_(torch.empty(*shape, dtype=getattr(torch, dtype)), gain=1.5)
    assert tuple(got.shape) == shape and got.dtype == getattr(torch, dtype) and not got.requires_grad
    m = ref.tensor(normals)
    if rows < cols:
        m = m.t()
    q, r = ref.linalg.qr(m)
    q = q * ref.diag(r, 0).sign()
    if rows < cols:
        q = q.t()
    expect = (q * 1.5).reshape(shape).numpy()
    np.testing.assert_allclose(to_np(got), expect, rtol=0, atol=1e-5 if dtype == "float32" else 1e-12)


def test_orthogonal_keeps_autograd_leaf():
    w = torch.empty(4, 3, requires_grad=True)
    assert init.orthogonal_(w) is w and w.is_leaf and w.grad_fn is None


def test_same_seed_same_weights_on_every_device():
    """Initialisers draw with Philox: the same seed gives bit-identical weights on every device."""
    results = []
    for device in DEVICES:
        torch.manual_seed(42)
        net = nn.Sequential(nn.Linear(7, 5), nn.Conv2d(2, 3, 3), nn.Embedding(6, 4), nn.MultiheadAttention(4, 2))
        net.to(device)
        w = init.trunc_normal_(torch.empty(3, 4, device=device), std=0.02)
        o = init.orthogonal_(torch.empty(3, 5, device=device))
        results.append([to_np(p) for p in net.parameters()] + [to_np(w), to_np(o)])
        # constructing directly on the device draws the same numbers too
        torch.manual_seed(42)
        direct = nn.Linear(7, 5, device=device)
        np.testing.assert_array_equal(to_np(direct.weight), results[-1][0])
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a, b)


def test_default_initialisations():
    torch.manual_seed(0)
    conv = nn.Conv2d(4, 8, 3)
    bound = 1 / math.sqrt(4 * 9)
    w, b = to_np(conv.weight), to_np(conv.bias)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound and np.abs(b).max() <= bound
    ct = nn.ConvTranspose2d(4, 6, 3, groups=2)
    assert ct.weight.shape == (4, 3, 3, 3)
    assert np.abs(to_np(ct.bias)).max() <= 1 / math.sqrt(3 * 9)
    emb = nn.Embedding(1000, 20, padding_idx=-1)
    e = to_np(emb.weight)
    assert emb.padding_idx == 999 and np.all(e[999] == 0)
    assert abs(e[:999].std() - 1) < 0.03 and abs(e[:999].mean()) < 0.03
    bn = nn.BatchNorm1d(3)
    np.testing.assert_array_equal(to_np(bn.weight), np.ones(3))
    np.testing.assert_array_equal(to_np(bn.bias), np.zeros(3))
    assert bn.num_batches_tracked.dtype is torch.int64 and bn.num_batches_tracked.item() == 0
    mha = nn.MultiheadAttention(16, 4)
    xb = math.sqrt(6 / (16 + 48))
    assert np.abs(to_np(mha.in_proj_weight)).max() <= xb
    assert np.all(to_np(mha.in_proj_bias) == 0) and np.all(to_np(mha.out_proj.bias) == 0)
    assert [n for n, _ in mha.named_parameters()] == ["in_proj_weight", "in_proj_bias", "out_proj.weight",
                                                      "out_proj.bias"]
    bil = nn.Bilinear(9, 2, 3)
    assert np.abs(to_np(bil.weight)).max() <= 1 / 3
    assert to_np(nn.PReLU(3).weight).tolist() == [0.25, 0.25, 0.25]


def test_layer_constructor_errors():
    with pytest.raises(ValueError, match="strided"):
        nn.Conv2d(1, 1, 3, padding="same", stride=2)
    with pytest.raises(ValueError, match="padding_mode"):
        nn.Conv2d(1, 1, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="Invalid padding string"):
        nn.Conv1d(1, 1, 3, padding="full")
    with pytest.raises(ValueError, match="zeros"):
        nn.ConvTranspose2d(1, 1, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="divisible by num_groups"):
        nn.GroupNorm(4, 6)
    with pytest.raises(ValueError, match="dropout probability"):
        nn.Dropout(1.5)
    with pytest.raises(AssertionError):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(AssertionError):
        nn.Embedding(3, 2, padding_idx=3)
    with pytest.raises(ValueError, match="expected 4D input"):
        nn.BatchNorm2d(3)(torch.ones(2, 3))


# ------------------------------------------------------------------------------------------------ dropout
@pytest.mark.parametrize("device", DEVICES)
def test_dropout_mask_scale_gradient_and_modes(device):
    torch.manual_seed(5)
    x = torch.ones(20000, device=device, requires_grad=True)
    y = F.dropout(x, p=0.3)
    a = to_np(y)
    kept = a != 0
    assert abs(kept.mean() - 0.7) < 0.015
    np.testing.assert_allclose(a[kept], 1 / 0.7, rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(to_np(x.grad), a, rtol=1e-6)  # gradient = mask / (1 - p)
    # same seed, same mask on every device
    torch.manual_seed(5)
    ref = to_np(F.dropout(torch.ones(20000), p=0.3))
    np.testing.assert_array_equal(ref, a)
    # eval / p = 0 return the input; p = 1 gives zeros
    d = nn.Dropout(0.5).to(device)
    z = torch.arange(4.0, device=device)
    assert d.eval()(z) is z
    assert F.dropout(z, 0.0) is z
    np.testing.assert_array_equal(to_np(F.dropout(z, 1.0)), np.zeros(4))
    with pytest.raises(ValueError):
        F.dropout(z, -0.1)
    # inplace
    w = torch.ones(1000, device=device)
    assert F.dropout(w, 0.5, inplace=True) is w and (to_np(w) == 0).any()


@pytest.mark.parametrize("device", DEVICES)
def test_dropout2d_zeroes_whole_channels(device):
    torch.manual_seed(2)
    x = torch.ones(8, 16, 3, 3, device=device)
    y = to_np(nn.Dropout2d(0.5)(x))
    per_channel = y.reshape(8, 16, 9)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2).all(-1))
    assert 0.3 < (per_channel[..., 0] == 0).mean() < 0.7
    with pytest.warns(UserWarning):
        F.dropout2d(torch.ones(2, 3, 4, device=device))


# ------------------------------------------------------------------------------------------------ utils
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("norm_type", [1.0, 2.0, 3.5, math.inf])
def test_clip_grad_norm_against_numpy(device, norm_type):
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (5,), (2, 2, 2))]
    ps = [nn.Parameter(torch.zeros(*g.shape, device=device)) for g in grads]
    for p, g in zip(ps, grads):
        p.grad = torch.from_numpy(g.copy()).to(device)
    flat = np.concatenate([g.ravel() for g in grads]).astype(np.float64)
    want = np.abs(flat).max() if norm_type == math.inf else (np.abs(flat) ** norm_type).sum() ** (1 / norm_type)
    total = clip_grad_norm_(ps + [nn.Parameter(torch.zeros(2, device=device))], max_norm=0.5, norm_type=norm_type,
                            foreach=True)
    assert total.dim() == 0 and total.device == torch.device(device)
    assert total.item() == pytest.approx(want, rel=1e-5)
    coef = 0.5 / (want + 1e-6)
    for p, g in zip(ps, grads):
        np.testing.assert_allclose(to_np(p.grad), g * coef, rtol=1e-5, atol=1e-7)
    assert get_total_norm([p.grad for p in ps], norm_type).item() == pytest.approx(0.5, rel=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_clip_grad_norm_nonfinite_and_edge_cases(device):
    p = nn.Parameter(torch.zeros(3, device=device))
    p.grad = torch.tensor([1.0, float("nan"), 2.0], device=device)
    with pytest.raises(RuntimeError, match="non-finite"):
        clip_grad_norm_(p, 1.0, error_if_nonfinite=True)
    p.grad = torch.tensor([1.0, float("inf"), 2.0], device=device)
    with pytest.raises(RuntimeError, match="non-finite"):
        clip_grad_norm_([p], 1.0, norm_type="inf", error_if_nonfinite=True)
    total = clip_grad_norm_([p], 1.0)  # without the flag: returns inf, scales by 0 (as PyTorch)
    assert math.isinf(total.item())
    q = nn.Parameter(torch.zeros(2, device=device))
    assert clip_grad_norm_([q], 1.0).item() == 0.0  # no gradients at all
    r = nn.Parameter(torch.zeros(2, device=device))
    r.grad = torch.tensor([0.3, 0.4], device=device)
    assert clip_grad_norm_(r, 1.0).item() == pytest.approx(0.5)  # a single tensor; below max_norm: unchanged
    np.testing.assert_allclose(to_np(r.grad), [0.3, 0.4], rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_clip_grad_value(device):
    p = nn.Parameter(torch.zeros(4, device=device))
    p.grad = torch.tensor([-3.0, -0.5, 0.5, 3.0], device=device)
    clip_grad_value_([p], 1.0)
    np.testing.assert_array_equal(to_np(p.grad), [-1, -0.5, 0.5, 1])


@pytest.mark.parametrize("device", DEVICES)
def test_parameters_to_vector_and_back(device):
    lin = nn.Linear(3, 2).to(device)
    vec = parameters_to_vector(lin.parameters())
    np.testing.assert_array_equal(to_np(vec), np.concatenate([to_np(lin.weight).ravel(), to_np(lin.bias)]))
    new = torch.arange(8.0, device=device)
    w_obj = lin.weight
    vector_to_parameters(new, lin.parameters())
    assert lin.weight is w_obj
    np.testing.assert_array_equal(to_np(lin.weight), np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(to_np(lin.bias), [6, 7])
    new.add_(1.0)  # shares storage, as in PyTorch
    assert to_np(lin.bias).tolist() == [7, 8]
    with pytest.raises(TypeError):
        vector_to_parameters([1, 2], lin.parameters())
    # gradients flow from the vector back to the parameters
    (parameters_to_vector(lin.parameters()) * 2).sum().backward()
    np.testing.assert_array_equal(to_np(lin.weight.grad), np.full((2, 3), 2.0))


# ------------------------------------------------------------------------------------------------ functional extras
@pytest.mark.parametrize("device", DEVICES)
def test_normalize_cosine_pairwise(device):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 5)).astype(np.float32)
    b = rng.standard_normal((4, 5)).astype(np.float32)
    ta, tb = torch.from_numpy(a).to(device), torch.from_numpy(b).to(device)
    np.testing.assert_allclose(to_np(F.normalize(ta, dim=1)), a / np.linalg.norm(a, axis=1, keepdims=True),
                               rtol=1e-5)
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    np.testing.assert_allclose(to_np(F.cosine_similarity(ta, tb)), cos, rtol=1e-5)
    np.testing.assert_allclose(to_np(nn.PairwiseDistance(p=1.0)(ta, tb)), np.abs(a - b + 1e-6).sum(1), rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_embedding_from_pretrained_and_max_norm(device):
    w = torch.tensor([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]], device=device)
    emb = nn.Embedding.from_pretrained(w)
    assert not emb.weight.requires_grad
    w.mul_(1.0)  # storage is shared
    np.testing.assert_array_equal(to_np(emb(torch.tensor([2, 0], device=device))), [[6, 8], [3, 4]])
    emb2 = nn.Embedding.from_pretrained(w.clone(), freeze=False, max_norm=1.0)
    assert emb2.weight.requires_grad
    out = emb2(torch.tensor([0, 1], device=device))
    # rows 0 and 1 referenced: row 0 (norm 5) renormalised to 1, row 1 (norm 0.5) kept, row 2 untouched
    np.testing.assert_allclose(to_np(out), [[0.6, 0.8], [0.3, 0.4]], rtol=1e-5)
    np.testing.assert_allclose(to_np(emb2.weight)[2], [6, 8])


@pytest.mark.parametrize("device", DEVICES)
def test_mha_need_weights_paths_agree_and_masks(device):
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True).to(device)
    x = torch.randn(2, 5, 8, device=device)
    kpm = torch.tensor([[False] * 5, [False, False, False, True, True]], device=device)
    causal = nn.Transformer.generate_square_subsequent_mask(5, device=device)
    a, w = mha(x, x, x, key_padding_mask=kpm, attn_mask=causal)
    b, none = mha(x, x, x, key_padding_mask=kpm, attn_mask=causal, need_weights=False)
    assert none is None and w.shape == (2, 5, 5)
    np.testing.assert_allclose(to_np(a), to_np(b), rtol=1e-4, atol=1e-5)
    wn = to_np(w)
    np.testing.assert_allclose(wn.sum(-1), 1.0, rtol=1e-5)
    assert np.all(wn[1, :, 3:] == 0) and np.all(np.triu(wn[0], 1) == 0)
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        mha(x, x, x, is_causal=True)
    m = to_np(causal)
    assert np.all(m[np.triu_indices(5, 1)] == -np.inf) and np.all(m[np.tril_indices(5)] == 0)


def test_sdpa_math_fallback_matches_numpy():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 4), (2, 5, 4), (2, 5, 6)))
    mask = rng.random((3, 5)) < 0.7
    mask[1] = False  # a fully masked row gives zeros
    out = F._sdpa_math(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v), torch.from_numpy(mask),
                       is_causal=True)
    s = q @ k.transpose(0, 2, 1) / 2.0
    allowed = mask & (np.arange(5)[None, :] <= np.arange(3)[:, None])
    s = np.where(allowed, s, -np.inf)
    with np.errstate(invalid="ignore"):
        p = np.exp(s - s.max(-1, keepdims=True))
        p = p / p.sum(-1, keepdims=True)
    p = np.nan_to_num(p)
    np.testing.assert_allclose(to_np(out), p @ v, rtol=1e-5, atol=1e-6)
    assert np.all(to_np(out)[:, 1] == 0)


def test_loss_legacy_reduction_flags():
    with pytest.warns(UserWarning, match="reduction='sum'"):
        assert nn.MSELoss(size_average=False).reduction == "sum"
    with pytest.warns(UserWarning, match="reduction='none'"):
        assert nn.L1Loss(reduce=False).reduction == "none"
    assert nn.CrossEntropyLoss().reduction == "mean"
    loss = nn.CrossEntropyLoss(weight=torch.ones(3))
    assert [n for n, _ in loss.named_buffers()] == ["weight"]
    with pytest.raises(ValueError):
        F._apply_reduction(torch.ones(2), "avg")


@pytest.mark.parametrize("device", DEVICES)
def test_small_mlp_trains_and_matches_across_devices(device):
    """An end-to-end step: the same seed gives the same model and the same loss curve on every device."""
    rng = np.random.default_rng(0)
    X = torch.from_numpy(rng.standard_normal((64, 4)).astype(np.float32)).to(device)
    y = torch.from_numpy((rng.random(64) < 0.5).astype(np.int64)).to(device)
    torch.manual_seed(7)
    net = nn.Sequential(nn.Linear(4, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 2)).to(device)
    losses = []
    for _ in range(15):
        net.zero_grad()
        loss = F.cross_entropy(net(X), y)
        loss.backward()
        clip_grad_norm_(net.parameters(), 5.0)
        with torch.no_grad():
            for p in net.parameters():
                p.sub_(p.grad * 0.1)
        losses.append(loss.item())
    assert losses[-1] < losses[0] * 0.9
    torch.manual_seed(7)
    ref = nn.Sequential(nn.Linear(4, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 2))
    np.testing.assert_allclose(F.cross_entropy(ref(X.cpu()), y.cpu()).item(), losses[0], rtol=1e-5)


# ------------------------------------------------------------------------------------------------ shape and padding
@pytest.mark.parametrize("device", DEVICES)
def test_identity_flatten_unflatten_and_padding_layers(device):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = torch.from_numpy(a.copy()).to(device)
    assert nn.Identity(3, foo=1)(x) is x
    np.testing.assert_array_equal(to_np(nn.Flatten()(x)), a.reshape(2, 12))
    np.testing.assert_array_equal(to_np(nn.Flatten(0, 1)(x)), a.reshape(6, 4))
    np.testing.assert_array_equal(to_np(nn.Unflatten(2, (2, -1))(x)), a.reshape(2, 3, 2, 2))
    with pytest.raises(TypeError):
        nn.Unflatten(1, 3)
    img = a.reshape(1, 2, 3, 4)
    t = torch.from_numpy(img.copy()).to(device)
    np.testing.assert_array_equal(to_np(nn.ZeroPad2d((1, 0, 2, 1))(t)),
                                  np.pad(img, ((0, 0), (0, 0), (2, 1), (1, 0))))
    np.testing.assert_array_equal(to_np(nn.ConstantPad1d(2, -1.0)(x)),
                                  np.pad(a, ((0, 0), (0, 0), (2, 2)), constant_values=-1))
    np.testing.assert_array_equal(to_np(nn.ReflectionPad2d(1)(t)),
                                  np.pad(img, ((0, 0), (0, 0), (1, 1), (1, 1)), mode="reflect"))
    np.testing.assert_array_equal(to_np(nn.ReplicationPad1d((1, 2))(x)),
                                  np.pad(a, ((0, 0), (0, 0), (1, 2)), mode="edge"))
    assert repr(nn.ZeroPad2d(1)) == "ZeroPad2d((1, 1, 1, 1))"


def test_attention_backend_names_reexported():
    from cltorch.nn.attention import SDPBackend, sdpa_kernel
    assert hasattr(SDPBackend, "FLASH_ATTENTION") and hasattr(SDPBackend, "MATH")
    with sdpa_kernel(SDPBackend.MATH):
        q = torch.randn(1, 2, 3, 4, device=DEVICES[-1])
        out = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert out.shape == (1, 2, 3, 4)
