"""Reductions against numpy on every device: any dims, keepdim, two-stage, dtypes, ties, errors, Hypothesis."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import cltorch as torch
from conftest import DEVICES, assert_close, to_np

RNG = np.random.default_rng(1)


def test_basic_reductions(device):
    a = RNG.standard_normal((4, 5, 6)).astype(np.float32)
    t = torch.tensor(a, device=device)
    for dims in [None, 0, 1, -1, (0, 2), (1, 2)]:
        nd = dims
        assert_close(t.sum(dims) if dims is not None else t.sum(), a.sum(axis=nd), rtol=1e-5, atol=1e-5)
        assert_close(t.mean(dims) if dims is not None else t.mean(), a.mean(axis=nd), rtol=1e-5, atol=1e-6)
        assert_close(t.amax(dims if dims is not None else ()), a.max(axis=nd))
        assert_close(t.amin(dims if dims is not None else ()), a.min(axis=nd))
        assert_close(t.std(dims) if dims is not None else t.std(), a.std(axis=nd, ddof=1), rtol=1e-4, atol=1e-5)
        assert_close(t.var(dims, correction=0) if dims is not None else t.var(correction=0), a.var(axis=nd),
                     rtol=1e-4, atol=1e-5)
    assert_close(t.sum((0, 2), keepdim=True), a.sum(axis=(0, 2), keepdims=True), rtol=1e-5, atol=1e-5)
    assert_close(t.prod(1), a.prod(axis=1), rtol=1e-4)
    assert_close(t.norm(), np.linalg.norm(a.reshape(-1)), rtol=1e-5)
    assert_close(t.norm(p=1, dim=1), np.abs(a).sum(1), rtol=1e-5)
    assert_close(t.norm(p=float("inf"), dim=2), np.abs(a).max(2))
    assert_close(torch.logsumexp(t, dim=1), np.log(np.exp(a.astype(np.float64)).sum(1)), rtol=1e-5, atol=1e-5)


def test_large_two_stage(device):
    a = RNG.standard_normal((3, 70001)).astype(np.float32)
    t = torch.tensor(a, device=device)
    assert_close(t.sum(), a.astype(np.float64).sum(), rtol=1e-4, atol=1e-2)
    assert_close(t.sum(1), a.astype(np.float64).sum(1), rtol=1e-4, atol=1e-2)
    assert_close(t.amax(), a.max())
    flat = a.reshape(-1)
    assert t.argmax().item() == int(flat.argmax()) and t.argmin().item() == int(flat.argmin())
    # first index on ties across the two-stage split
    z = torch.zeros(100000, device=device)
    z[77777] = 1.0
    z[99999] = 1.0
    assert z.argmax().item() == 77777 and z.argmin().item() == 0


def test_max_min_dim_first_index_and_nan(device):
    x = torch.tensor([[1.0, 3.0, 3.0], [2.0, float("nan"), 0.0]], device=device)
    v, i = x.max(dim=1)
    assert to_np(i).tolist() == [1, 1] and np.isnan(to_np(v)[1])
    assert np.isnan(x.max().item()) and np.isnan(x.amin().item())
    assert to_np(torch.tensor([[2, 7, 7]], device=device).argmax(1)).tolist() == [1]


def test_logical_and_count(device):
    a = torch.tensor([[0, 1, 2], [0, 0, 0]], device=device)
    assert to_np(a.any(1)).tolist() == [True, False] and to_np(a.all(0)).tolist() == [False, False, False]
    assert torch.count_nonzero(a).item() == 2 and to_np(torch.count_nonzero(a, 1)).tolist() == [2, 0]
    assert torch.tensor([0.5, 0.0], device=device).any().item() is True


def test_dtypes_and_errors(device):
    u = torch.tensor([200, 100], dtype=torch.uint8, device=device)
    assert u.sum().dtype == torch.int64 and u.sum().item() == 300
    assert torch.tensor([1, 2], device=device).sum(dtype=torch.float32).dtype == torch.float32
    with pytest.raises(RuntimeError, match="mean"):
        torch.tensor([1, 2], device=device).mean()
    with pytest.raises(IndexError):
        torch.zeros(2, 3, device=device).sum(2)
    with pytest.raises(RuntimeError, match="multiple times"):
        torch.zeros(2, 3, device=device).sum((1, -1))
    e = torch.zeros(0, 3, device=device)
    assert to_np(e.sum(0)).tolist() == [0, 0, 0] and np.isnan(e.mean().item())
    with pytest.raises(IndexError):
        e.max(0)
    assert torch.logsumexp(torch.full((3,), float("-inf"), device=device), 0).item() == float("-inf")


@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=4), data=st.data(),
       dev=st.sampled_from(DEVICES), transpose=st.booleans())
def test_hypothesis_sum_amax_any_dims(shape, data, dev, transpose):
    a = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
    t = torch.tensor(a, device=dev)
    if transpose and len(shape) > 1:
        t, a = t.transpose(0, -1), a.swapaxes(0, -1)
    dims = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True, max_size=len(shape)))
    keep = data.draw(st.booleans())
    d = tuple(dims) if dims else None
    assert_close(t.sum(d, keepdim=keep) if d else t.sum(), a.sum(axis=d, keepdims=keep) if d else a.sum(),
                 rtol=1e-5, atol=1e-5)
    assert_close(t.amax(d if d else (), keepdim=keep), a.max(axis=d, keepdims=keep))


def test_reduction_out_argument_against_torch(device):
    """sum/mean/prod/amax/amin take ``out=`` as torch does: an empty out is resized, a non-empty wrong-shaped one
    too (UserWarning), sum/prod compute in out's dtype, and the errors are torch's (autograd, dtype mismatch)."""
    import warnings
    T = pytest.importorskip("torch")
    a = (RNG.standard_normal((3, 4)) * 3).astype(np.float32)
    x, xt = torch.tensor(a, device=device), T.tensor(a)
    cases = [("sum", (1,), "float32"), ("sum", (0,), "int64"), ("sum", (0,), "float64"), ("mean", (1,), "float32"),
             ("mean", (0,), "float64"), ("prod", (1,), "float32"), ("amax", (0,), "float32"),
             ("amin", (1,), "float32")]
    for name, dims, dt in cases:
        for shape in ((0,), (2, 2)):
            o = torch.empty(shape, dtype=getattr(torch, dt), device=device)
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                r = getattr(torch, name)(x, *dims, keepdim=False, out=o)
            w = [m for m in w if "resized" in str(m.message)]     # not a cold kernel build's compiler output
            assert r is o and (len(w) == 1) == (shape != (0,)), (name, shape, [str(m.message) for m in w])
            ref = getattr(T, name)(xt, *dims, out=T.empty(0, dtype=getattr(T, dt)))
            assert o.dtype is getattr(torch, dt) and tuple(o.shape) == tuple(ref.shape)
            np.testing.assert_allclose(to_np(o), ref.numpy(), rtol=1e-5, atol=1e-5)
    xi = torch.arange(4, device=device)
    assert to_np(torch.sum(xi, 0, out=torch.empty(0, device=device))).item() == 6.0    # torch: tensor(6.)
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        torch.sum(x.clone().requires_grad_(), 0, out=torch.empty(0, device=device))
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype"):
        torch.sum(x, 0, dtype=torch.float64, out=torch.empty(0, device=device))
    with pytest.raises(RuntimeError, match="Expected the dtype for input and out to match"):
        torch.amax(x, 0, out=torch.empty(0, dtype=torch.int64, device=device))
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.mean(x, 0, out=torch.empty(0, dtype=torch.int64, device=device))
