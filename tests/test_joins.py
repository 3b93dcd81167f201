"""cat/stack and friends, flip, roll, repeat, repeat_interleave, tile, tril/triu, one_hot, meshgrid,
cartesian_prod: values against numpy on every device, PyTorch's errors, and gradients (float64)."""
import numpy as np
import pytest

import cltorch as torch

DEVICES = ["cpu"] + [f"cl:{i}" for i in range(torch.cl.device_count())]
on_devices = pytest.mark.parametrize("device", DEVICES)
rng = np.random.default_rng(99)


def T(a, device, **kw):
    return torch.tensor(a, device=device, **kw)


def same(t, a):
    assert tuple(t.shape) == np.shape(a), (tuple(t.shape), np.shape(a))
    np.testing.assert_array_equal(t.detach().cpu().numpy(), a)


@on_devices
def test_cat_values_dims_and_promotion(device):
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((2, 1, 4)).astype(np.float32)
    same(torch.cat([T(a, device), T(b, device)], 1), np.concatenate([a, b], 1))
    same(torch.cat([T(a, device), T(a, device)], -1), np.concatenate([a, a], -1))
    same(torch.concat((T(a, device).transpose(0, 2), T(a, device).transpose(0, 2)), 0),
         np.concatenate([a.transpose(2, 1, 0)] * 2, 0))
    i = np.arange(6, dtype=np.int64).reshape(2, 3)
    r = torch.cat([T(i, device), T(i.astype(np.float64), device)], 0)
    assert r.dtype == torch.float64
    same(r, np.concatenate([i, i]).astype(np.float64))
    rb = torch.concatenate([T(np.array([True, False]), device), T(np.array([3], np.uint8), device, dtype=torch.uint8)])
    assert rb.dtype == torch.uint8 and rb.tolist() == [1, 0, 3]
    # legacy: 1-D empty tensors are skipped
    same(torch.cat([T(a, device), torch.zeros(0, device=device)], 1), a)
    same(torch.cat([torch.zeros(2, 0, 4, device=device), T(b, device)], 1), b)


@on_devices
def test_cat_errors_name_shapes(device):
    x = torch.zeros(2, 3, device=device)
    with pytest.raises(RuntimeError, match=r"Sizes of tensors must match except in dimension 0. Expected size 3 but "
                                           r"got size 4 for tensor number 1 in the list \(shapes \[2, 3\] and \[1, 4\]"):
        torch.cat([x, torch.zeros(1, 4, device=device)])
    with pytest.raises(RuntimeError, match="Tensors must have same number of dimensions: got 2 and 3"):
        torch.cat([x, torch.zeros(1, 2, 3, device=device)])
    with pytest.raises(RuntimeError, match="zero-dimensional tensor \\(at position 1\\) cannot be concatenated"):
        torch.cat([x, torch.tensor(1.0, device=device)])
    with pytest.raises(RuntimeError, match="expected a non-empty list of Tensors"):
        torch.cat([])
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.cat([x, x], 2)
    with pytest.raises(RuntimeError, match=r"stack expects each tensor to be equal size, but got \[2, 3\] at entry 0 "
                                           r"and \[3, 2\] at entry 1"):
        torch.stack([x, x.t()])


@pytest.mark.skipif(torch.cl.device_count() == 0, reason="needs an OpenCL device")
def test_cat_mixed_devices_raises():
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, but found at least two "
                                           "devices, cpu and cl:0"):
        torch.cat([torch.zeros(2), torch.zeros(2, device="cl:0")])


@on_devices
def test_stack_family(device):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    x, y = T(a, device), T(b, device)
    for d in (0, 1, 2, -1):
        same(torch.stack([x, y], d), np.stack([a, b], d))
    same(torch.hstack([x, y]), np.hstack([a, b]))
    same(torch.vstack([x, y]), np.vstack([a, b]))
    same(torch.dstack([x, y]), np.dstack([a, b]))
    v = np.arange(3.0, dtype=np.float32)
    same(torch.hstack([T(v, device), T(v, device)]), np.hstack([v, v]))
    same(torch.vstack([T(v, device), T(v, device)]), np.vstack([v, v]))
    same(torch.dstack([T(v, device), T(v, device)]), np.dstack([v, v]))
    same(torch.column_stack([T(v, device), x]), np.column_stack([v, a]))


@on_devices
def test_flip_roll(device):
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    x = T(a, device)
    same(torch.flip(x, [0, 2]), np.flip(a, (0, 2)))
    same(x.flip(1), np.flip(a, 1))
    same(x.transpose(0, 2).flip(-1), np.flip(a.transpose(2, 1, 0), -1))
    same(torch.fliplr(x), np.fliplr(a))
    same(torch.flipud(x), np.flipud(a))
    same(torch.roll(x, 1, 2), np.roll(a, 1, 2))
    same(torch.roll(x, (-1, 5), (0, 1)), np.roll(a, (-1, 5), (0, 1)))
    same(torch.roll(x, 7), np.roll(a, 7))
    with pytest.raises(RuntimeError, match="dims has duplicates"):
        torch.flip(x, [0, 0])
    with pytest.raises(RuntimeError, match="shifts and dimensions must align"):
        torch.roll(x, (1, 2), 0)


@on_devices
def test_repeat_tile_repeat_interleave(device):
    a = rng.standard_normal((2, 3)).astype(np.float32)
    x = T(a, device)
    same(x.repeat(2, 3), np.tile(a, (2, 3)))
    same(x.repeat(2, 1, 2), np.tile(a, (2, 1, 2)))
    same(x.t().repeat(1, 2), np.tile(a.T, (1, 2)))
    same(torch.tile(x, (2,)), np.tile(a, (2,)))
    same(x.tile((3, 1, 1)), np.tile(a, (3, 1, 1)))
    same(torch.repeat_interleave(x, 2), np.repeat(a, 2))
    same(x.repeat_interleave(3, dim=1), np.repeat(a, 3, 1))
    same(torch.repeat_interleave(x, T([1, 0, 2], device), dim=1), np.repeat(a, [1, 0, 2], 1))
    same(torch.repeat_interleave(T([2, 0, 3], device)), np.repeat([0, 1, 2], [2, 0, 3]))
    with pytest.raises(RuntimeError, match="Number of dimensions of repeat dims can not be smaller"):
        x.repeat(2)
    with pytest.raises(RuntimeError, match="repeats can not be negative"):
        torch.repeat_interleave(x, T([1, -1], device), dim=0)


@on_devices
def test_tril_triu(device):
    a = rng.standard_normal((2, 4, 5)).astype(np.float32)
    x = T(a, device)
    for k in (-2, 0, 1, 3):
        same(torch.tril(x, k), np.tril(a, k))
        same(torch.triu(x, k), np.triu(a, k))
    b = np.arange(12).reshape(3, 4) % 2 == 0
    same(T(b, device).tril(), np.tril(b))
    y = x.clone()
    y.triu_(1)
    same(y, np.triu(a, 1))
    with pytest.raises(RuntimeError, match="tril: input tensor must have at least 2 dimensions"):
        torch.tril(torch.zeros(3, device=device))


@on_devices
def test_one_hot(device):
    from cltorch.ops.joins import one_hot
    t = T([[0, 2], [1, 2]], device)
    r = one_hot(t)
    assert r.dtype == torch.int64
    same(r, np.eye(3, dtype=np.int64)[[[0, 2], [1, 2]]])
    same(one_hot(T([1, 0], device), 4), np.eye(4, dtype=np.int64)[[1, 0]])
    with pytest.raises(RuntimeError, match="Class values must be smaller than num_classes"):
        one_hot(T([1, 5], device), 3)
    with pytest.raises(RuntimeError, match="Class values must be non-negative"):
        one_hot(T([1, -1], device), 3)
    with pytest.raises(RuntimeError, match="one_hot is only applicable to index tensor"):
        one_hot(T([1.0], device))


@on_devices
def test_meshgrid_cartesian_prod(device):
    a, b = np.arange(3.0, dtype=np.float32), np.arange(4.0, dtype=np.float32) * 10
    for ix in ("ij", "xy"):
        for g, w in zip(torch.meshgrid(T(a, device), T(b, device), indexing=ix), np.meshgrid(a, b, indexing=ix)):
            same(g, w)
    g3 = torch.meshgrid([T(a, device), T(b, device), T(a, device)], indexing="xy")
    for g, w in zip(g3, np.meshgrid(a, b, a, indexing="xy")):
        same(g, w)
    cp = torch.cartesian_prod(T(a, device), T(b, device))
    same(cp, np.array([[i, j] for i in a for j in b], dtype=np.float32))


@on_devices
def test_gradcheck_cat_stack_flip_roll_repeat(device):
    gc = torch.autograd.gradcheck
    x = T(rng.standard_normal((2, 3)), device, requires_grad=True)
    y = T(rng.standard_normal((2, 2)), device, requires_grad=True)
    assert gc(lambda a, b: torch.cat([a, b, a], 1), (x, y))
    assert gc(lambda a: torch.stack([a, a * 2], 1), (x,))
    assert gc(lambda a: torch.flip(a, [1]), (x,))
    assert gc(lambda a: torch.roll(a, 1, 1), (x,))
    assert gc(lambda a: a.repeat(2, 2), (x,))
    assert gc(lambda a: torch.repeat_interleave(a, T([2, 0, 1], device), dim=1), (x,))
    assert gc(lambda a: torch.tril(a, 1), (x,))


@on_devices
def test_cat_gradient_skips_integer_inputs(device):
    x = T([1.0, 2.0], device, requires_grad=True)
    r = torch.cat([x, T([3], device)])
    (r * T([1.0, 2.0, 3.0], device)).sum().backward()
    assert x.grad.tolist() == [1.0, 2.0]


@on_devices
def test_zero_size_and_zero_dim(device):
    s = T(2.5, device)
    e = torch.zeros(0, 3, device=device)
    assert torch.cat([e, e]).shape == (0, 3) and torch.cat([e, e], 1).shape == (0, 6)
    assert torch.stack([s, s]).tolist() == [2.5, 2.5]
    assert s.repeat(3).tolist() == [2.5] * 3 and s.repeat(2, 1).shape == (2, 1)
    assert torch.flip(s, []).item() == 2.5 and torch.roll(s, 1).item() == 2.5
    assert torch.flip(e, [0, 1]).shape == (0, 3) and torch.roll(e, 2, 1).shape == (0, 3)
    assert torch.tril(e).shape == (0, 3) and e.repeat(2, 2).shape == (0, 6)
    assert torch.repeat_interleave(s, 2).tolist() == [2.5, 2.5]
