"""3-d convolution and pooling, unpooling, fractional pooling, the margin/CTC losses, embedding_bag, grid
sampling, bicubic/area interpolation and the other nn.functional entries of issue 15: values and gradients
against torch (the oracle), modules' parameter names and shapes against torch's, and PyTorch's errors."""
import numpy as np
import pytest
import torch as T

import cltorch as torch
from cltorch.ops import conv as C
from conftest import requires_pinned_torch

F = torch.nn.functional
TF = T.nn.functional
DEVICES = ["cpu", "cl:0"]


def _np(t):
    return t.detach().cpu().numpy()


def _pair(rng, *arrays, grad=True, device="cpu"):
    """(torch leaves, cltorch leaves) of the same float arrays."""
    ts = [T.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    cs = [torch.tensor(a, device=device, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    return ts, cs


_cur = ["cpu"]


def ct(a):
    """A cltorch tensor of ``a`` on the device of the running :func:`_check` (for index/target arguments)."""
    return torch.tensor(a, device=_cur[0])


def _check(tfn, cfn, arrays, device, rtol=1e-4, atol=1e-5, grad=True, seed=0):
    """Compare outputs, then the gradients of sum(out * w) for every float input."""
    _cur[0] = device
    rng = np.random.default_rng(seed)
    ts, cs = _pair(rng, *arrays, grad=grad, device=device)
    to, co = tfn(*ts), cfn(*cs)
    to = to if isinstance(to, tuple) else (to,)
    co = co if isinstance(co, tuple) else (co,)
    assert len(to) == len(co)
    for a, b in zip(to, co):
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(_np(b).astype(np.float64), a.detach().numpy().astype(np.float64), rtol=rtol,
                                   atol=atol)
    if not grad:
        return
    w = rng.standard_normal(tuple(to[0].shape)).astype(np.float32)
    (to[0] * T.tensor(w)).sum().backward()
    (co[0] * torch.tensor(w, device=device)).sum().backward()
    for a, b in zip(ts, cs):
        if a.grad is not None:      # no gradient at all (None) means zero, as the OpInfo runner reads it
            got = _np(b.grad) if b.grad is not None else np.zeros(tuple(a.shape), np.float32)
            np.testing.assert_allclose(got, a.grad.numpy(), rtol=rtol, atol=atol)


# ------------------------------------------------------------------------------------------------ convolution
@pytest.fixture(params=["direct", "gemm"])
def algo(request):
    prev = C.set_algorithm(request.param)
    yield request.param
    C.set_algorithm(prev)


@pytest.mark.parametrize("device", DEVICES)
def test_conv3d_values_and_grads(algo, device):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4, 5, 6, 7)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 2, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    kw = dict(stride=(1, 2, 1), padding=(1, 0, 2), dilation=(2, 1, 1), groups=2)
    _check(lambda x, w, b: TF.conv3d(x, w, b, **kw), lambda x, w, b: F.conv3d(x, w, b, **kw), (x, w, b), device)


@pytest.mark.parametrize("device", DEVICES)
def test_conv_transpose3d_values_and_grads(algo, device):
    rng = np.random.default_rng(2)
    u = rng.standard_normal((2, 4, 3, 4, 3)).astype(np.float32)
    w = rng.standard_normal((4, 3, 2, 3, 2)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    kw = dict(stride=(2, 1, 2), padding=(0, 1, 1), output_padding=(1, 0, 1), groups=2)
    _check(lambda u, w, b: TF.conv_transpose3d(u, w, b, **kw), lambda u, w, b: F.conv_transpose3d(u, w, b, **kw),
           (u, w, b), device)


def test_conv3d_same_padding_unbatched_and_double_backward():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 4, 5, 4)).astype(np.float64)
    w = rng.standard_normal((2, 3, 2, 3, 2)).astype(np.float64)
    _check(lambda x, w: TF.conv3d(x, w, padding="same"), lambda x, w: F.conv3d(x, w, padding="same"), (x, w), "cpu",
           rtol=1e-10, atol=1e-10)
    xc = torch.tensor(x[None], requires_grad=True)
    wc = torch.tensor(w, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda a, b: F.conv3d(a, b, padding=1), (xc, wc))


def test_conv3d_errors():
    x = torch.zeros(1, 4, 3, 3, 3)
    with pytest.raises(RuntimeError, match=r"5 dimensions .*\[2, 4, 3, 3\]"):
        F.conv3d(x, torch.zeros(2, 4, 3, 3))
    with pytest.raises(RuntimeError, match=r"Expected 4D \(unbatched\) or 5D \(batched\) input to conv3d.*\[4, 3, 3\]"):
        F.conv3d(torch.zeros(4, 3, 3), torch.zeros(2, 4, 3, 3, 3))
    with pytest.raises(RuntimeError, match="expected input.*to have 8 channels"):
        F.conv3d(x, torch.zeros(2, 8, 1, 1, 1))
    with pytest.raises(RuntimeError, match="Kernel size can't be greater"):
        F.conv3d(x, torch.zeros(2, 4, 4, 1, 1))


def test_conv3d_modules_match_torch_parameters():
    for cls, args in (("Conv3d", (4, 6, (3, 2, 1))), ("ConvTranspose3d", (4, 6, 3))):
        ours = getattr(torch.nn, cls)(*args, groups=2)
        theirs = getattr(T.nn, cls)(*args, groups=2)
        assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == \
               [(n, tuple(p.shape)) for n, p in theirs.named_parameters()]
        assert repr(ours) == repr(theirs)
        bound = 1 / np.sqrt(np.prod(ours.weight.shape[1:]))       # kaiming_uniform(a=sqrt(5)) = U(+-1/sqrt(fan_in))
        assert float(ours.weight.abs().max()) <= bound + 1e-6
    m = torch.nn.ConvTranspose3d(2, 3, 3, stride=2)
    y = m(torch.zeros(1, 2, 3, 3, 3), output_size=(8, 7, 8))
    assert tuple(y.shape) == (1, 3, 8, 7, 8)
    m = torch.nn.Conv3d(2, 3, 3, padding=1, padding_mode="replicate")
    assert tuple(m(torch.zeros(1, 2, 4, 4, 4)).shape) == (1, 3, 4, 4, 4)


# ------------------------------------------------------------------------------------------------ pooling
@pytest.mark.parametrize("device", DEVICES)
def test_pool3d_values_and_grads(device):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 5, 6, 7)).astype(np.float32)
    args = ((2, 3, 2), (1, 2, 2), (1, 1, 0), (1, 1, 2), True, True)
    _check(lambda x: TF.max_pool3d(x, *args), lambda x: F.max_pool3d(x, *args), (x,), device)
    _check(lambda x: TF.avg_pool3d(x, (2, 3, 2), (1, 2, 2), (1, 1, 0), True, False),
           lambda x: F.avg_pool3d(x, (2, 3, 2), (1, 2, 2), (1, 1, 0), True, False), (x,), device)
    _check(lambda x: TF.avg_pool3d(x, 3, 2, 1, divisor_override=5), lambda x: F.avg_pool3d(x, 3, 2, 1,
                                                                                           divisor_override=5),
           (x,), device)
    _check(lambda x: TF.adaptive_avg_pool3d(x, (3, None, 4)), lambda x: F.adaptive_avg_pool3d(x, (3, None, 4)),
           (x,), device)
    _check(lambda x: TF.adaptive_max_pool3d(x, (3, 2, 4), True), lambda x: F.adaptive_max_pool3d(x, (3, 2, 4), True),
           (x,), device)
    x1 = rng.standard_normal((2, 3, 9)).astype(np.float32)
    _check(lambda x: TF.adaptive_max_pool1d(x, 4, True), lambda x: F.adaptive_max_pool1d(x, 4, True), (x1,), device)


def test_max_pool3d_ties_and_nan_follow_torch():
    x = np.zeros((1, 1, 4, 4, 4), np.float32)        # all ties: the first tap of each window wins
    _check(lambda x: TF.max_pool3d(x, 2, return_indices=True), lambda x: F.max_pool3d(x, 2, return_indices=True),
           (x,), "cpu")
    x = np.random.default_rng(5).standard_normal((1, 2, 4, 4, 4)).astype(np.float32)
    x[0, 0, 1, 0, 1] = x[0, 0, 0, 1, 1] = np.nan     # the last NaN in (d, h, w) order wins
    t = TF.max_pool3d(T.tensor(x), 2, return_indices=True)
    c = F.max_pool3d(torch.tensor(x), 2, return_indices=True)
    np.testing.assert_array_equal(_np(c[1]), t[1].numpy())
    np.testing.assert_allclose(_np(c[0]), t[0].numpy())


def test_pool3d_errors():
    with pytest.raises(RuntimeError, match=r"Expected 4D or 5D.*\[2, 3, 4\]"):
        F.max_pool3d(torch.zeros(2, 3, 4), 2)
    with pytest.raises(RuntimeError, match="pad should be smaller than or equal to half"):
        F.max_pool3d(torch.zeros(1, 1, 4, 4, 4), 2, padding=(2, 0, 0))
    with pytest.raises(RuntimeError, match="Output size is too small"):
        F.avg_pool3d(torch.zeros(1, 1, 2, 4, 4), 3)


def test_pool3d_modules():
    x = np.random.default_rng(6).standard_normal((2, 3, 4, 6, 5)).astype(np.float32)
    for name, args in (("MaxPool3d", (2,)), ("AvgPool3d", ((2, 3, 1), 1)), ("AdaptiveAvgPool3d", ((2, 3, 2),)),
                       ("AdaptiveMaxPool3d", (2,))):
        ours, theirs = getattr(torch.nn, name)(*args), getattr(T.nn, name)(*args)
        np.testing.assert_allclose(_np(ours(torch.tensor(x))), theirs(T.tensor(x)).numpy(), rtol=1e-5, atol=1e-6)
    x1 = x.reshape(2, 3, -1)
    np.testing.assert_allclose(_np(torch.nn.AdaptiveMaxPool1d(7)(torch.tensor(x1))),
                               T.nn.AdaptiveMaxPool1d(7)(T.tensor(x1)).numpy())


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_max_unpool_roundtrip_and_grad(nd):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3) + (6,) * nd).astype(np.float32)
    y, ind = getattr(TF, f"max_pool{nd}d")(T.tensor(x), 2, return_indices=True)
    cind = torch.tensor(ind.numpy())
    osz = (7,) * nd
    _check(lambda v: getattr(TF, f"max_unpool{nd}d")(v, ind, 2, output_size=osz),
           lambda v: getattr(F, f"max_unpool{nd}d")(v, cind, 2, output_size=osz), (y.numpy(),), "cpu")
    m, tm = getattr(torch.nn, f"MaxUnpool{nd}d")(2), getattr(T.nn, f"MaxUnpool{nd}d")(2)
    np.testing.assert_allclose(_np(m(torch.tensor(y.numpy()), cind)), tm(y, ind).numpy())
    with pytest.raises(ValueError, match="invalid output_size"):
        getattr(F, f"max_unpool{nd}d")(torch.tensor(y.numpy()), cind, 2, output_size=(9,) * nd)
    bad = cind.clone()
    bad.view(-1)[0] = 10 ** 6
    with pytest.raises(RuntimeError, match="Found an invalid max index"):
        getattr(F, f"max_unpool{nd}d")(torch.tensor(y.numpy()), bad, 2)


@pytest.mark.parametrize("nd", [2, 3])
def test_fractional_max_pool_matches_torch_given_samples(nd):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 3) + (9, 11, 8)[3 - nd:]).astype(np.float32)
    s = rng.random((2, 3, nd)).astype(np.float32)
    k = (2, 3, 2)[:nd]
    _check(lambda x: getattr(TF, f"fractional_max_pool{nd}d")(x, k, output_ratio=(0.5,) * nd, return_indices=True,
                                                                _random_samples=T.tensor(s)),
           lambda x: getattr(F, f"fractional_max_pool{nd}d")(x, k, output_ratio=(0.5,) * nd, return_indices=True,
                                                               _random_samples=torch.tensor(s)), (x,), "cpu")
    y = getattr(torch.nn, f"FractionalMaxPool{nd}d")(k, output_size=(4,) * nd)(torch.tensor(x))
    assert tuple(y.shape) == (2, 3) + (4,) * nd
    with pytest.raises(RuntimeError, match="too large relative to input"):
        getattr(F, f"fractional_max_pool{nd}d")(torch.tensor(x), 5, output_size=(8,) * nd)
    with pytest.raises(ValueError, match="output_size or an output_ratio"):
        getattr(F, f"fractional_max_pool{nd}d")(torch.tensor(x), 2)


# ------------------------------------------------------------------------------------------------ losses
def test_margin_losses():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    y = np.array([0, 3, 1, 1, 2])
    wt = rng.random(4).astype(np.float32)
    for p, red in ((1, "mean"), (2, "none"), (1, "sum")):
        _check(lambda x: TF.multi_margin_loss(x, T.tensor(y), p=p, margin=0.7, weight=T.tensor(wt), reduction=red),
               lambda x: F.multi_margin_loss(x, torch.tensor(y), p=p, margin=0.7, weight=torch.tensor(wt),
                                             reduction=red), (x,), "cpu")
    yl = np.array([[3, 0, -1, 1], [0, 1, 2, 3], [1, -1, 2, 0], [2, 2, -1, 0], [-1, 0, 0, 0]])
    for red in ("mean", "none"):
        _check(lambda x: TF.multilabel_margin_loss(x, T.tensor(yl), reduction=red),
               lambda x: F.multilabel_margin_loss(x, ct(yl), reduction=red), (x,), "cl:0")
    a, p_, n = (rng.standard_normal((4, 6)).astype(np.float32) for _ in range(3))
    _check(lambda a, p, n: TF.triplet_margin_with_distance_loss(a, p, n, swap=True, margin=0.5),
           lambda a, p, n: F.triplet_margin_with_distance_loss(a, p, n, swap=True, margin=0.5), (a, p_, n), "cpu")
    _check(lambda a, p, n: T.nn.TripletMarginWithDistanceLoss(distance_function=lambda u, v: (u - v).abs().sum(1))(
        a, p, n), lambda a, p, n: torch.nn.TripletMarginWithDistanceLoss(
        distance_function=lambda u, v: (u - v).abs().sum(1))(a, p, n), (a, p_, n), "cpu")
    np.testing.assert_allclose(float(torch.nn.MultiMarginLoss(p=2)(torch.tensor(x), torch.tensor(y))),
                               float(T.nn.MultiMarginLoss(p=2)(T.tensor(x), T.tensor(y))), rtol=1e-5)
    np.testing.assert_allclose(float(torch.nn.MultiLabelMarginLoss()(torch.tensor(x), torch.tensor(yl))),
                               float(T.nn.MultiLabelMarginLoss()(T.tensor(x), T.tensor(yl))), rtol=1e-5)
    with pytest.raises(ValueError, match="only p == 1 and p == 2"):
        F.multi_margin_loss(torch.tensor(x), torch.tensor(y), p=3)
    with pytest.raises(RuntimeError, match="inconsistent target size"):
        F.multilabel_margin_loss(torch.tensor(x), torch.tensor(yl[:2]))
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        F.triplet_margin_with_distance_loss(torch.tensor(a), torch.tensor(p_), torch.tensor(n[0]))


@pytest.mark.parametrize("reduction,zero_inf", [("mean", False), ("none", True), ("sum", False)])
def test_ctc_loss(reduction, zero_inf):
    rng = np.random.default_rng(10)
    Tn, N, Cn = 12, 3, 5
    lp = T.tensor(rng.standard_normal((Tn, N, Cn))).log_softmax(2).numpy()     # float64: exact comparison
    tg = np.array([[1, 2, 2, 0], [3, 1, 4, 4], [2, 2, 2, 2]])
    il, tl = [12, 9, 5], [3, 4, 4]                                              # sample 2 is impossible
    _check(lambda x: TF.ctc_loss(x, T.tensor(tg), il, tl, reduction=reduction, zero_infinity=zero_inf),
           lambda x: F.ctc_loss(x, torch.tensor(tg), il, tl, reduction=reduction, zero_infinity=zero_inf),
           (lp,), "cpu", rtol=1e-9, atol=1e-9, grad=zero_inf)
    flat = np.concatenate([tg[n, :tl[n]] for n in range(N)])
    il2 = [12, 11, 10]
    _check(lambda x: T.nn.CTCLoss(blank=0)(x, T.tensor(flat), T.tensor(il2), T.tensor(tl)),
           lambda x: torch.nn.CTCLoss(blank=0)(x, torch.tensor(flat), torch.tensor(il2), torch.tensor(tl)),
           (lp,), "cl:0", rtol=1e-9, atol=1e-9)


@requires_pinned_torch("F.linear_cross_entropy is new in it")
def test_linear_cross_entropy():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    w = rng.standard_normal((2, 3, 3)).astype(np.float32)
    t = rng.integers(0, 2, (4, 3))
    _check(lambda x, w: TF.linear_cross_entropy(x, w, T.tensor(t), reduction="none"),
           lambda x, w: F.linear_cross_entropy(x, w, torch.tensor(t), reduction="none"), (x, w), "cpu")
    w2 = rng.standard_normal((5, 3)).astype(np.float32)
    b2 = rng.standard_normal(5).astype(np.float32)
    t2 = rng.integers(0, 5, 4)
    _check(lambda x, w, b: TF.linear_cross_entropy(x, w, T.tensor(t2), linear_bias=b, label_smoothing=0.1),
           lambda x, w, b: F.linear_cross_entropy(x, w, torch.tensor(t2), linear_bias=b, label_smoothing=0.1),
           (x, w2, b2), "cpu")


def test_local_response_norm():
    rng = np.random.default_rng(12)
    xs = rng.standard_normal((2, 6, 3, 4)).astype(np.float32)
    _check(lambda x: TF.local_response_norm(x, 3, 1e-2, 0.7, 1.5), lambda x: F.local_response_norm(x, 3, 1e-2, 0.7,
                                                                                                     1.5),
           (xs,), "cl:0")
    _check(lambda x: TF.local_response_norm(x, 4), lambda x: F.local_response_norm(x, 4), (xs[:, :, 0],), "cpu")
    with pytest.raises(ValueError, match="Expected 3D or higher"):
        F.local_response_norm(torch.zeros(2, 3), 2)


# ------------------------------------------------------------------------------------------------ embeddings
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag(mode):
    rng = np.random.default_rng(12)
    w = rng.standard_normal((10, 4)).astype(np.float32)
    idx = np.array([1, 2, 4, 5, 4, 3, 2, 9, 0])
    offs = np.array([0, 2, 2, 6])                                    # bag 1 is empty
    psw = rng.random(9).astype(np.float32) if mode == "sum" else None

    def tf(w):
        return TF.embedding_bag(T.tensor(idx), w, T.tensor(offs), mode=mode, padding_idx=3,
                                per_sample_weights=None if psw is None else T.tensor(psw))

    def cf(w):
        return F.embedding_bag(ct(idx), w, ct(offs), mode=mode, padding_idx=3,
                               per_sample_weights=None if psw is None else ct(psw))
    _check(tf, cf, (w,), "cl:0")
    idx2 = rng.integers(0, 10, (3, 4))
    _check(lambda w: TF.embedding_bag(T.tensor(idx2), w, mode=mode),
           lambda w: F.embedding_bag(torch.tensor(idx2), w, mode=mode), (w,), "cpu")
    _check(lambda w: TF.embedding_bag(T.tensor(idx), w, T.tensor(np.array([0, 3, 9])), mode=mode,
                                      include_last_offset=True),
           lambda w: F.embedding_bag(torch.tensor(idx), w, torch.tensor(np.array([0, 3, 9])), mode=mode,
                                     include_last_offset=True), (w,), "cpu")


def test_embedding_bag_module_and_errors():
    ours, theirs = torch.nn.EmbeddingBag(10, 3, mode="max"), T.nn.EmbeddingBag(10, 3, mode="max")
    assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == \
           [(n, tuple(p.shape)) for n, p in theirs.named_parameters()]
    assert repr(ours) == repr(theirs)
    w = torch.zeros(5, 2)
    with pytest.raises(NotImplementedError, match="only supported for mode='sum'"):
        F.embedding_bag(torch.tensor([0, 1]), w, torch.tensor([0]), mode="mean",
                        per_sample_weights=torch.ones(2))
    with pytest.raises(ValueError, match="offsets has to be None"):
        F.embedding_bag(torch.zeros(2, 2, dtype=torch.int64), w, torch.tensor([0]))


def test_embedding_scale_grad_by_freq():
    rng = np.random.default_rng(13)
    w = rng.standard_normal((6, 3)).astype(np.float32)
    idx = np.array([[0, 2, 2], [5, 2, 0]])
    _check(lambda w: TF.embedding(T.tensor(idx), w, scale_grad_by_freq=True),
           lambda w: F.embedding(ct(idx), w, scale_grad_by_freq=True), (w,), "cl:0")


def test_feature_alpha_dropout():
    x = torch.ones(4, 5, 3, 2)
    torch.manual_seed(0)
    y = F.feature_alpha_dropout(x, 0.5, training=True)
    per_channel = y.reshape(4, 5, -1)
    assert bool((per_channel.max(2)[0] == per_channel.min(2)[0]).all())       # whole channels share the mask
    alpha = 1.7580993408473766
    a = 1.0 / np.sqrt((alpha * alpha * 0.5 + 1) * 0.5)
    kept = 1.0 * a + alpha * a * 0.5            # x = 1 kept: x*a + alpha*a*p
    dropped = -alpha * a + alpha * a * 0.5      # dropped: SELU's saturation through the same affine map
    v = _np(y).ravel().astype(np.float64)
    assert np.all(np.isclose(v, kept, atol=1e-5) | np.isclose(v, dropped, atol=1e-5))
    assert np.isclose(v, kept, atol=1e-5).any() and np.isclose(v, dropped, atol=1e-5).any()
    assert F.feature_alpha_dropout(x, 0.5, training=False) is x


# ------------------------------------------------------------------------------------------------ sampling
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("pad", ["zeros", "border", "reflection"])
def test_grid_sample_2d(mode, pad):
    rng = np.random.default_rng(14)
    x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    g = (rng.random((2, 4, 7, 2)) * 2.6 - 1.3).astype(np.float32)
    for align in (False, True):
        _check(lambda x, g: TF.grid_sample(x, g, mode, pad, align), lambda x, g: F.grid_sample(x, g, mode, pad, align),
               (x, g), "cpu", rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_3d_and_affine_grid(mode):
    rng = np.random.default_rng(15)
    x = rng.standard_normal((2, 2, 4, 5, 3)).astype(np.float32)
    g = (rng.random((2, 3, 2, 4, 3)) * 2.4 - 1.2).astype(np.float32)
    _check(lambda x, g: TF.grid_sample(x, g, mode, "border", False),
           lambda x, g: F.grid_sample(x, g, mode, "border", False), (x, g), "cl:0")
    _check(lambda x, g: T.grid_sampler_3d(x, g, 0 if mode == "bilinear" else 1, 2, True),
           lambda x, g: torch.grid_sampler_3d(x, g, 0 if mode == "bilinear" else 1, 2, True), (x, g), "cpu")
    th = rng.standard_normal((2, 2, 3)).astype(np.float32)
    th3 = rng.standard_normal((2, 3, 4)).astype(np.float32)
    for align in (False, True):
        _check(lambda t: TF.affine_grid(t, (2, 3, 4, 5), align), lambda t: F.affine_grid(t, (2, 3, 4, 5), align),
               (th,), "cpu")
        _check(lambda t: TF.affine_grid(t, (2, 3, 2, 4, 5), align),
               lambda t: F.affine_grid(t, (2, 3, 2, 4, 5), align), (th3,), "cpu")
    with pytest.raises(ValueError, match="expected mode"):
        F.grid_sample(torch.zeros(1, 1, 2, 2), torch.zeros(1, 1, 1, 2), mode="cubic")
    with pytest.raises(ValueError, match="Nx2x3"):
        F.affine_grid(torch.zeros(1, 3, 3), (1, 1, 2, 2))


def test_interpolate_bicubic_and_area3d():
    rng = np.random.default_rng(16)
    x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    for kw in (dict(size=(7, 4), align_corners=True), dict(size=(3, 9), align_corners=False),
               dict(scale_factor=1.7, align_corners=False), dict(scale_factor=(0.6, 2.0), align_corners=False,
                                                                 recompute_scale_factor=True)):
        _check(lambda x: TF.interpolate(x, mode="bicubic", **kw), lambda x: F.interpolate(x, mode="bicubic", **kw),
               (x,), "cpu")
    x5 = rng.standard_normal((2, 2, 5, 6, 4)).astype(np.float32)
    for mode, kw in (("area", dict(size=(3, 4, 2))), ("trilinear", dict(size=(3, 7, 5), align_corners=False)),
                     ("nearest", dict(scale_factor=1.5))):
        _check(lambda x: TF.interpolate(x, mode=mode, **kw), lambda x: F.interpolate(x, mode=mode, **kw), (x5,),
               "cl:0")


@pytest.mark.parametrize("nd", [2, 3])
def test_weight_gradient_as_convolution(monkeypatch, nd):
    """The large-image weight gradient path (a forward convolution with batch and channels swapped), forced on
    small shapes, with stride, dilation and asymmetric sizes."""
    from cltorch.ops.conv import direct
    monkeypatch.setattr(direct, "_wgrad_as_conv_pays", lambda x, u, geom: geom.G == 1)
    prev = C.set_algorithm("direct")
    try:
        rng = np.random.default_rng(17)
        x = rng.standard_normal((3, 4) + (7, 9, 8)[3 - nd:]).astype(np.float32)
        w = rng.standard_normal((5, 4) + (2, 3, 2)[3 - nd:]).astype(np.float32)
        b = rng.standard_normal(5).astype(np.float32)
        kw = dict(stride=(2, 1, 2)[3 - nd:], padding=(1, 2, 0)[3 - nd:], dilation=(1, 2, 2)[3 - nd:])
        fn = f"conv{nd}d"
        for dev in DEVICES:
            _check(lambda x, w, b: getattr(TF, fn)(x, w, b, **kw), lambda x, w, b: getattr(F, fn)(x, w, b, **kw),
                   (x, w, b), dev)
    finally:
        C.set_algorithm(prev)


def test_new_modules_repr_and_state_dict_match_torch():
    cases = [("MaxPool3d", (2,), {}), ("AvgPool3d", (2,), {}), ("AdaptiveAvgPool3d", ((2, 3, 4),), {}),
             ("AdaptiveMaxPool1d", (3,), {}), ("AdaptiveMaxPool3d", (2,), {}), ("MaxUnpool1d", (2,), {}),
             ("MaxUnpool2d", (2,), {}), ("MaxUnpool3d", (2,), {}), ("FractionalMaxPool2d", (2,), {"output_size": 3}),
             ("FractionalMaxPool3d", (2,), {"output_ratio": 0.5}), ("CTCLoss", (), {}), ("MultiMarginLoss", (), {}),
             ("MultiLabelMarginLoss", (), {}), ("TripletMarginWithDistanceLoss", (), {}),
             ("LocalResponseNorm", (3,), {}), ("EmbeddingBag", (5, 3), {}), ("Conv3d", (2, 3, 3), {}),
             ("ConvTranspose3d", (2, 3, 3), {"stride": 2})]
    for name, args, kw in cases:
        ours, theirs = getattr(torch.nn, name)(*args, **kw), getattr(T.nn, name)(*args, **kw)
        assert repr(ours) == repr(theirs), name
        assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == \
               {k: tuple(v.shape) for k, v in theirs.state_dict().items()}, name
    with pytest.raises(ValueError, match="output size, or a pooling ratio"):
        torch.nn.FractionalMaxPool2d(2)
    with pytest.raises(ValueError, match="expected margin to be greater than 0"):
        torch.nn.TripletMarginWithDistanceLoss(margin=0)


def test_double_backward_of_3d_pooling_and_sampling():
    rng = np.random.default_rng(18)
    x = torch.tensor(rng.standard_normal((1, 1, 3, 4, 3)), requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda t: F.max_pool3d(t, 2, 1, 1), (x,))
    assert torch.autograd.gradgradcheck(lambda t: F.avg_pool3d(t, (2, 3, 2), 1, (1, 1, 0), count_include_pad=False),
                                        (x,))
    w = torch.tensor(rng.standard_normal((1, 2, 2, 2, 2)), requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda a, b: F.conv_transpose3d(a, b, stride=2), (x, w))
    x2 = torch.tensor(rng.standard_normal((1, 1, 3, 4)), requires_grad=True)
    g2 = torch.tensor(rng.random((1, 2, 2, 2)) * 1.6 - 0.8, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: F.grid_sample(a, b, "bilinear", "reflection", False), (x2, g2))


@pytest.mark.parametrize("device", DEVICES)
def test_instance_norm3d_and_pad3d_modules_match_torch(device):
    """nn.InstanceNorm3d and the five 3-d padding modules exist as in torch: values, gradients, reprs, errors."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 3, 4, 5, 6)).astype(np.float32)
    pairs = [(torch.nn.InstanceNorm3d(3, affine=True, track_running_stats=True),
              T.nn.InstanceNorm3d(3, affine=True, track_running_stats=True)),
             (torch.nn.ConstantPad3d((1, 2, 0, 1, 2, 0), 1.5), T.nn.ConstantPad3d((1, 2, 0, 1, 2, 0), 1.5)),
             (torch.nn.ZeroPad3d(1), T.nn.ZeroPad3d(1)),
             (torch.nn.ReflectionPad3d((1, 2, 2, 1, 1, 3)), T.nn.ReflectionPad3d((1, 2, 2, 1, 1, 3))),
             (torch.nn.ReplicationPad3d(2), T.nn.ReplicationPad3d(2)),
             (torch.nn.CircularPad3d((1, 0, 2, 1, 0, 3)), T.nn.CircularPad3d((1, 0, 2, 1, 0, 3)))]
    for ours, ref in pairs:
        ours = ours.to(device)
        if not isinstance(ref, T.nn.InstanceNorm3d):   # torch 2.13's norm reprs add bias=, which cltorch lacks
            assert repr(ours) == repr(ref)
        for inp in (a, a[0]):                        # batched and unbatched
            x, xt = torch.tensor(inp, device=device, requires_grad=True), T.tensor(inp, requires_grad=True)
            y, yt = ours(x), ref(xt)
            g = rng.standard_normal(tuple(yt.shape)).astype(np.float32)
            y.backward(torch.tensor(g, device=device))
            yt.backward(T.tensor(g))
            np.testing.assert_allclose(_np(y), _np(yt), rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(_np(x.grad), _np(xt.grad), rtol=1e-4, atol=1e-5)
    ours, ref = pairs[0]                             # running statistics update (they were ignored) and serve in eval
    np.testing.assert_allclose(_np(ours.running_mean), _np(ref.running_mean), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(ours.running_var), _np(ref.running_var), rtol=1e-5, atol=1e-6)
    ours.eval(), ref.eval()
    np.testing.assert_allclose(_np(ours(torch.tensor(a + 1, device=device))), _np(ref(T.tensor(a + 1))), rtol=1e-5,
                               atol=1e-5)
    for nd in (1, 2):                                # the same for InstanceNorm1d/2d, functional form too
        b = a.reshape(2, 3, -1) if nd == 1 else a.reshape(2, 3, 20, 6)
        rm, rmt = torch.zeros(3, device=device), T.zeros(3)
        rv, rvt = torch.ones(3, device=device), T.ones(3)
        y = F.instance_norm(torch.tensor(b, device=device), rm, rv, momentum=0.3)
        yt = TF.instance_norm(T.tensor(b), rmt, rvt, momentum=0.3)
        np.testing.assert_allclose(_np(y), _np(yt), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(_np(rm), _np(rmt), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(_np(rv), _np(rvt), rtol=1e-5, atol=1e-6)
        y = F.instance_norm(torch.tensor(b, device=device), rm, rv, use_input_stats=False)
        np.testing.assert_allclose(_np(y), _np(TF.instance_norm(T.tensor(b), rmt, rvt, use_input_stats=False)),
                                   rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="expected 4D or 5D input"):
        torch.nn.InstanceNorm3d(3)(torch.zeros(3, 4, 5, device=device))


@requires_pinned_torch("the norm modules' bias= keyword is new in it")
def test_norm_modules_bias_keyword_matches_torch():
    """torch 2.13's ``bias=`` of BatchNorm/InstanceNorm/GroupNorm (affine weight without a bias): parameters,
    state_dict keys, reprs, values and gradients."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((4, 6, 5, 3)).astype(np.float32)
    for name, args in (("BatchNorm2d", (6,)), ("InstanceNorm2d", (6,)), ("GroupNorm", (3, 6))):
        for bias in (True, False):
            kw = {"affine": True} if name == "InstanceNorm2d" else {}
            ours, ref = getattr(torch.nn, name)(*args, bias=bias, **kw), getattr(T.nn, name)(*args, bias=bias, **kw)
            assert repr(ours) == repr(ref)
            assert list(ours.state_dict()) == list(ref.state_dict())
            assert [n for n, _ in ours.named_parameters()] == [n for n, _ in ref.named_parameters()]
            x, xt = torch.tensor(a, requires_grad=True), T.tensor(a, requires_grad=True)
            y, yt = ours(x), ref(xt)
            (y * y.detach()).sum().backward()
            (yt * yt.detach()).sum().backward()
            np.testing.assert_allclose(_np(y), _np(yt), rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(_np(x.grad), _np(xt.grad), rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(_np(ours.weight.grad), _np(ref.weight.grad), rtol=1e-4, atol=1e-4)
