"""Fixes of docs/OPS.md's mismatch list (issue 15), each checked against torch (the test-only oracle)."""
import numpy as np
import pytest

import cltorch
from conftest import DEVICES

torch = pytest.importorskip("torch", reason="torch is the test-only oracle: pip install torch==2.13.0")


def C(t, device="cpu"):
    """A torch tensor as a cltorch tensor on ``device``."""
    return cltorch.tensor(t.detach().numpy(), device=device)


def same(got, ref, rtol=1e-5, atol=1e-6):
    assert tuple(got.shape) == tuple(ref.shape), (tuple(got.shape), tuple(ref.shape))
    assert str(got.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1], (got.dtype, ref.dtype)
    g = np.asarray(got.detach().cpu().float().numpy() if got.dtype == cltorch.bfloat16 else got.detach().cpu().numpy())
    np.testing.assert_allclose(g.astype(np.float64), ref.detach().float().numpy().astype(np.float64), rtol=rtol, atol=atol)


# ------------------------------------------------------------------------------------------ views and conversions
def test_atleast_with_lists_and_several_tensors():
    ts = [torch.tensor(1.5), torch.arange(3.0), torch.ones(2, 2)]
    for name in ("atleast_1d", "atleast_2d", "atleast_3d"):
        for args in ((ts,), tuple(ts), (tuple(ts),)):
            ref = getattr(torch, name)(*args)
            cargs = tuple([C(t) for t in a] if isinstance(a, list) else
                          tuple(C(t) for t in a) if isinstance(a, tuple) else C(a) for a in args)
            got = getattr(cltorch, name)(*cargs)
            assert isinstance(got, tuple) and len(got) == len(ref)
            for g, r in zip(got, ref):
                same(g, r)
        same(getattr(cltorch, name)(C(ts[0])), getattr(torch, name)(ts[0]))


@pytest.mark.parametrize("name", ["bool", "byte", "char", "int", "long", "short", "float", "double", "bfloat16"])
def test_conversion_methods_take_memory_format(name):
    x = torch.randn(2, 3, 2, 3)
    for mf in ("contiguous_format", "channels_last", "preserve_format"):
        ref = getattr(x, name)(memory_format=getattr(torch, mf))
        got = getattr(C(x), name)(memory_format=getattr(cltorch, mf))
        same(got, ref)
        assert tuple(got.stride()) == tuple(ref.stride()), (mf, got.stride(), ref.stride())


def test_to_with_positional_non_blocking_and_copy():
    x = torch.randn(2, 3)
    for nb in (True, False):
        for cp in (True, False):
            ref = x.to("cpu", torch.float64, nb, cp)
            c = C(x)
            got = c.to("cpu", cltorch.float64, nb, cp)
            same(got, ref)
    c = C(x)
    assert c.to("cpu", cltorch.float32, False, False) is c         # nothing changes, no copy: self
    assert c.to("cpu", cltorch.float32, False, True) is not c      # copy=True (4th positional) copies


def test_unfold_of_a_0d_tensor():
    x = torch.tensor(2.5)
    for size in (0, 1):
        same(C(x).unfold(0, size, 1), x.unfold(0, size, 1))
    with pytest.raises(RuntimeError):
        C(x).unfold(0, 2, 1)


# ------------------------------------------------------------------------------------------ index dtypes
@pytest.mark.parametrize("device", DEVICES)
def test_gather_scatter_take_int32_and_empty_indices(device):
    x = torch.randn(4, 5)
    idx = torch.tensor([[0, 3, 1], [2, 2, 0]], dtype=torch.int32)
    same(cltorch.gather(C(x, device), 0, C(idx, device)), torch.gather(x, 0, idx))
    src = torch.randn(2, 3)
    same(cltorch.scatter(C(x, device), 1, C(idx, device), C(src, device)), torch.scatter(x, 1, idx, src))
    same(cltorch.scatter_add(C(x, device), 1, C(idx, device), C(src, device)), torch.scatter_add(x, 1, idx, src))
    same(C(x, device).scatter(1, C(idx, device), 2.0, reduce="add"), x.scatter(1, idx, 2.0, reduce="add"))
    for e in (torch.zeros(0, dtype=torch.uint8), torch.zeros(2, 0, dtype=torch.uint8)):
        v = torch.randn(5)
        same(cltorch.gather(C(v, device), 0, C(e, device)), torch.gather(v, 0, e))
    with pytest.raises(RuntimeError, match="int32/int64"):
        cltorch.gather(C(x, device), 0, C(idx, device).to(cltorch.uint8))


@pytest.mark.parametrize("device", DEVICES)
def test_gather_int32_gradient(device):
    x = torch.randn(4, 5, requires_grad=True)
    idx = torch.tensor([[0, 3, 3], [2, 2, 0]], dtype=torch.int32)
    torch.gather(x, 0, idx).sum().backward()
    cx = C(x, device).requires_grad_()
    cltorch.gather(cx, 0, C(idx, device)).sum().backward()
    same(cx.grad, x.grad)


@pytest.mark.parametrize("device", DEVICES)
def test_take_along_dim_negative_indices(device):
    x = torch.randn(5, 5)
    idx = torch.tensor([[-1, 0, -5, 2, -3], [4, -2, 1, 0, -1]])
    for dim, i in ((0, idx), (1, idx.T)):
        same(cltorch.take_along_dim(C(x, device), C(i, device), dim), torch.take_along_dim(x, i, dim))
    pos = idx.abs()
    same(cltorch.take_along_dim(C(x, device), C(pos, device)), torch.take_along_dim(x, pos))
    with pytest.raises(RuntimeError):          # flattened (dim=None), torch does not wrap negative entries
        torch.take_along_dim(x, idx)
    with pytest.raises((RuntimeError, IndexError)):
        cltorch.take_along_dim(C(x, device), C(idx, device))
        cltorch.cl.synchronize()
    with pytest.raises(IndexError):
        cltorch.take_along_dim(C(x), C(torch.tensor([[-6]])), 1)


# ------------------------------------------------------------------------------------------ products
def test_tensordot_with_size_one_contracted_dims():
    a, b = torch.randn(1, 1, 3), torch.randn(2, 1, 2)
    same(cltorch.tensordot(C(a), C(b), dims=([0, 1], [2, 0])), torch.tensordot(a, b, dims=([0, 1], [2, 0])),
         rtol=1e-5, atol=1e-5)
    a, b = torch.randn(2, 3, 4), torch.randn(3, 4, 5)
    same(cltorch.tensordot(C(a), C(b), dims=2), torch.tensordot(a, b, dims=2), rtol=1e-4, atol=1e-5)
    with pytest.raises(RuntimeError, match="contracted dimensions need to match"):
        cltorch.tensordot(C(a), C(torch.randn(2, 4)), dims=([1], [0]))


@pytest.mark.parametrize("device", DEVICES)
def test_matmul_with_empty_operands(device):
    for sa, sb in (((5, 5, 0), (0, 5)), ((0, 3), (3, 4)), ((2, 0, 3), (3,)), ((4, 0), (0, 2))):
        a = torch.randn(*sa, requires_grad=True)
        b = torch.randn(*sb, requires_grad=True)
        ref = torch.matmul(a, b)
        ca, cb = C(a, device).requires_grad_(), C(b, device).requires_grad_()
        got = cltorch.matmul(ca, cb)
        same(got, ref)
        ref.sum().backward()
        got.sum().backward()
        same(ca.grad, a.grad)
        same(cb.grad, b.grad)
