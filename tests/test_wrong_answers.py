"""Issue 15's "wrong answers found" list: each class of mismatch checked against torch (the oracle)."""
import numpy as np
import pytest
import torch

import cltorch as c


def _pair(arr, requires_grad=False):
    return (c.tensor(arr, requires_grad=requires_grad), torch.tensor(arr, requires_grad=requires_grad))


def _close(a, b, **kw):
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6, equal_nan=True, **kw)


def _grads(fn, *arrs, seed=0, device="cpu"):
    """Run fn on cltorch (on ``device``) and torch copies of arrs, backward sum(out * w); return (out, grads) of
    each side, cltorch's moved to cpu."""
    res = []
    for T, dev in ((c, device), (torch, "cpu")):
        xs = [T.tensor(a, requires_grad=True, device=dev) for a in arrs]
        out = fn(T, *xs)
        w = np.random.default_rng(seed).standard_normal(tuple(out.shape)).astype(np.float32)
        (out * T.tensor(w, device=dev)).sum().backward()
        res.append((out.cpu(), [None if x.grad is None else x.grad.cpu() for x in xs]))
    return res


# ------------------------------------------------------------------------------------------------ var / std
@pytest.mark.parametrize("name", ["var", "std", "var_mean", "std_mean"])
@pytest.mark.parametrize("unbiased", [True, False])
def test_positional_bool_is_unbiased(name, unbiased):
    a = np.random.default_rng(1).standard_normal((4, 5)).astype(np.float32)
    x, t = _pair(a)
    got, ref = getattr(c, name)(x, unbiased), getattr(torch, name)(t, unbiased)
    if name.endswith("_mean"):
        for g, r in zip(got, ref):
            assert tuple(g.shape) == tuple(r.shape) == ()
            _close(g, r)
    else:
        assert tuple(got.shape) == ()
        _close(got, ref)
    m, tm = getattr(x, name.split("_")[0])(unbiased), getattr(t, name.split("_")[0])(unbiased)   # the method too
    _close(m, tm)


# ------------------------------------------------------------------------------------------------ cosine_similarity
def test_cosine_similarity_broadcasts_before_the_norms():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 1, 3)).astype(np.float32)
    b = rng.standard_normal((1, 5, 3)).astype(np.float32)
    (got, gg), (ref, tg) = _grads(lambda T, x, y: T.nn.functional.cosine_similarity(x, y, dim=1), a, b)
    assert tuple(got.shape) == tuple(ref.shape)
    _close(got, ref)
    for g, r in zip(gg, tg):
        _close(g, r)


def test_cosine_similarity_eps_clamp_and_dtypes():
    z = np.zeros((2, 3), np.float32)
    o = np.ones((2, 3), np.float32)
    _close(c.nn.functional.cosine_similarity(c.tensor(z), c.tensor(o)),
           torch.nn.functional.cosine_similarity(torch.tensor(z), torch.tensor(o)))
    i1, i2 = np.arange(6).reshape(2, 3), np.arange(6)[::-1].reshape(2, 3).copy()
    with pytest.raises(RuntimeError, match="expected common dtype to be floating point, yet common dtype is Long"):
        torch.nn.functional.cosine_similarity(torch.tensor(i1), torch.tensor(i2))
    with pytest.raises(RuntimeError, match="expected common dtype to be floating point, yet common dtype is Long"):
        c.nn.functional.cosine_similarity(c.tensor(i1), c.tensor(i2))
    got = c.nn.functional.cosine_similarity(c.tensor(i1), c.tensor(i2, dtype=c.float64))
    assert got.dtype is c.float64


# ------------------------------------------------------------------------------------------------ index_select
def test_index_select_of_a_0d_tensor_is_0d():
    for idx in ([0], 0):
        got = c.index_select(c.tensor(5.0), 0, c.tensor(idx))
        ref = torch.index_select(torch.tensor(5.0), 0, torch.tensor(idx))
        assert tuple(got.shape) == tuple(ref.shape) == ()
        assert got.item() == ref.item()
    assert tuple(c.index_select(c.tensor([5.0, 6.0]), 0, c.tensor(1)).shape) == (1,)
    with pytest.raises(RuntimeError, match="Index to scalar can have only 1 value, got 2"):
        c.index_select(c.tensor(5.0), 0, c.tensor([0, 0]))
    x = c.tensor(3.0, requires_grad=True)
    c.index_select(x, 0, c.tensor([0])).backward()
    assert x.grad.item() == 1.0


# ------------------------------------------------------------------------------------------------ avg_pool2d
@pytest.mark.parametrize("divisor", [3, -2, 7])
def test_avg_pool2d_divisor_override_as_given(divisor, device):
    a = np.random.default_rng(3).standard_normal((1, 2, 5, 5)).astype(np.float32)
    (got, gg), (ref, tg) = _grads(lambda T, x: T.nn.functional.avg_pool2d(x, 3, 2, 1, divisor_override=divisor), a,
                                  device=device)
    _close(got, ref)
    _close(gg[0], tg[0])


# ------------------------------------------------------------------------------------------------ hinge_embedding_loss
def test_hinge_embedding_loss_targets_other_than_pm1():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    y = np.array([[1, -1, 0, 2], [-1, 1, 0.5, -3], [0, 0, 1, -1]], np.float32)
    for red in ("none", "mean", "sum"):
        got = c.nn.functional.hinge_embedding_loss(c.tensor(a), c.tensor(y), margin=0.7, reduction=red)
        ref = torch.nn.functional.hinge_embedding_loss(torch.tensor(a), torch.tensor(y), margin=0.7, reduction=red)
        _close(got, ref)


# ------------------------------------------------------------------------------------------------ gradients
def test_clamp_tensor_bounds_min_above_max(device):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((3, 4)) * 2).astype(np.float32)
    lo = rng.standard_normal((3, 4)).astype(np.float32)
    hi = rng.standard_normal((3, 4)).astype(np.float32)
    assert (lo > hi).any() and (lo < hi).any()
    (got, gg), (ref, tg) = _grads(lambda T, a, l, h: T.clamp(a, l, h), x, lo, hi, device=device)
    _close(got, ref)
    for g, r in zip(gg, tg):
        _close(g, r)
    (got, gg), (ref, tg) = _grads(lambda T, a, l: T.clamp(a, min=l), x, lo)
    _close(got, ref)
    for g, r in zip(gg, tg):
        _close(g, r)


def test_index_fill_with_a_0d_tensor_value_gets_its_gradient():
    a = np.random.default_rng(6).standard_normal((3, 4)).astype(np.float32)
    v = np.array(2.5, np.float32)
    (got, gg), (ref, tg) = _grads(lambda T, x, val: x.index_fill(1, T.tensor([0, 2]), val), a, v)
    _close(got, ref)
    for g, r in zip(gg, tg):
        _close(g, r)


def test_index_fill_inplace_with_a_0d_tensor_value_gets_its_gradient():
    a = np.random.default_rng(6).standard_normal((3, 4)).astype(np.float32)

    def f(T, x, val):
        y = x * 1
        y.index_fill_(0, T.tensor([1]), val)
        return y

    (got, gg), (ref, tg) = _grads(f, a, np.array(-1.5, np.float32))
    _close(got, ref)
    for g, r in zip(gg, tg):
        _close(g, r)


@pytest.mark.parametrize("name", ["fmax", "fmin"])
def test_fmax_fmin_are_differentiable(name, device):
    rng = np.random.default_rng(7)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    a[0, 0], b[1, 1], b[2, 2] = np.nan, np.nan, a[2, 2]
    (got, gg), (ref, tg) = _grads(lambda T, x, y: getattr(T, name)(x, y), a, b, device=device)
    assert got.grad_fn is not None
    _close(got, ref)
    for g, r in zip(gg, tg):
        _close(g, r)


def test_nan_to_num_is_differentiable(device):
    a = np.array([1.0, np.nan, np.inf, -np.inf, -2.0], np.float32)
    (got, gg), (ref, tg) = _grads(lambda T, x: T.nan_to_num(x, nan=0.5, posinf=9.0), a, device=device)
    assert got.grad_fn is not None
    _close(got, ref)
    _close(gg[0], tg[0])


# ------------------------------------------------------------------------------------------------ strides, contiguity
_STRIDE_CASES = [
    lambda T: T.zeros(2, 3)[None],
    lambda T: T.zeros(2, 3)[:, None],
    lambda T: T.zeros(2, 3)[..., None],
    lambda T: T.zeros(2, 3).t()[:, None],
    lambda T: T.zeros(2, 3, 4)[None, 1, None, :, None],
    lambda T: T.zeros(4, 6)[::2, None, 1::3],
    lambda T: T.zeros(2, 3, 4)[None, ..., None],
    lambda T: T.zeros(2, 3)[None, None, :, None, :, None],
    lambda T: T.zeros(2, 3)[:, 1, None],
    lambda T: T.tensor(1.0)[None, None],
    lambda T: T.zeros(0, 3)[:, None],
    lambda T: T.zeros(2, 3).t().unsqueeze(1),
    lambda T: T.zeros(4, 6)[::2, 1::3].unsqueeze(2),
    lambda T: T.zeros(3).expand(2, 3).unsqueeze(1),
    lambda T: T.zeros(3, 0).unsqueeze(2),
]


@pytest.mark.parametrize("k", range(len(_STRIDE_CASES)))
def test_size1_dim_strides_follow_pytorch(k):
    f = _STRIDE_CASES[k]
    got, ref = f(c), f(torch)
    assert tuple(got.shape) == tuple(ref.shape)
    assert tuple(got.stride()) == tuple(ref.stride())
    assert got.is_contiguous() == ref.is_contiguous()


def test_none_index_is_still_a_view():
    x = c.zeros(2, 3)
    x[:, None][1, 0, 2] = 5.0
    assert x[1, 2].item() == 5.0


@pytest.mark.parametrize("shape", [(0,), (0, 3), (3, 0), (2, 0, 4)])
def test_empty_tensors_are_contiguous(shape):
    strides = tuple(7 for _ in shape)
    for T in (c, torch):
        assert T.empty_strided(shape, strides).is_contiguous()
        assert T.zeros(*shape).permute(*reversed(range(len(shape)))).is_contiguous()
    for s4 in [(0, 3, 2, 2), (2, 3, 0, 2)]:
        a = c.empty_strided(s4, (5, 5, 5, 5))
        t = torch.empty_strided(s4, (5, 5, 5, 5))
        assert a.is_contiguous() == t.is_contiguous()
        assert a.is_contiguous(memory_format=c.channels_last) == t.is_contiguous(memory_format=torch.channels_last)


# ------------------------------------------------------------------------------------------------ retain_grad
def test_retain_grad_accumulates_over_backward_calls():
    for T in (c, torch):
        x = T.ones(3, requires_grad=True)
        y = x * 2
        y.retain_grad()
        z = (y * y).sum()
        z.backward(retain_graph=True)
        first = y.grad.clone()
        z.backward(retain_graph=True)
        np.testing.assert_allclose(y.grad.numpy(), 2 * first.numpy())
        y.grad = None
        z.backward()
        np.testing.assert_allclose(y.grad.numpy(), first.numpy())


def test_retained_grad_is_a_copy():
    x = c.ones(3, requires_grad=True)
    y = x + 1                           # add's backward hands the same gradient on to x
    y.retain_grad()
    y.sum().backward()
    y.grad.mul_(10)                     # the retained grad is y's own copy, as in PyTorch
    assert x.grad.tolist() == [1.0, 1.0, 1.0]
