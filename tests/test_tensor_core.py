"""Tensor metadata, views, copies, dtype promotion, factories and the host/numpy contract, on every device."""
import math
import re

import numpy as np
import pytest

import cltorch as torch
from conftest import assert_close, to_np


def test_issue_example(device):
    x = torch.arange(12.0, device=device).view(3, 4).t()
    assert x.is_contiguous() is False and x.stride() == (1, 4)
    assert_close((x * 2 + 1).sum(dim=0), (np.arange(12.0).reshape(3, 4).T * 2 + 1).sum(0))


def test_metadata_and_protocols(device):
    x = torch.zeros(2, 3, 4, device=device)
    assert isinstance(x, torch.Tensor) and isinstance(x.shape, torch.Size) and x.shape == (2, 3, 4)
    assert x.size() == (2, 3, 4) and x.size(-1) == 4 and x.dim() == 3 and x.numel() == 24
    assert x.stride() == (12, 4, 1) and x.storage_offset() == 0 and x.element_size() == 4
    assert len(x) == 2 and [t.shape for t in x] == [(3, 4), (3, 4)]
    one = torch.tensor([2.5], device=device)
    assert float(one) == 2.5 and int(torch.tensor(3, device=device)) == 3 and bool(one)
    assert f"{torch.tensor(1.23456, device=device):.3f}" == "1.235"
    assert [0, 1, 2][torch.tensor(1, device=device)] == 1
    assert np.asarray(torch.arange(3, device=device)).tolist() == [0, 1, 2]
    with pytest.raises(RuntimeError):
        bool(torch.zeros(2, device=device))
    assert x.T.shape == (4, 3, 2) and x.mT.shape == (2, 4, 3)
    assert "device='cl" in repr(torch.ones(2, device=device)) or device == "cpu"


def test_views_share_storage(device):
    base = torch.arange(24.0, device=device).reshape(2, 3, 4)
    ref = np.arange(24.0).reshape(2, 3, 4)
    cases = [
        (lambda t: t.transpose(0, 2), lambda a: a.transpose(2, 1, 0)),
        (lambda t: t.permute(1, 2, 0), lambda a: a.transpose(1, 2, 0)),
        (lambda t: t[:, 1:, ::2], lambda a: a[:, 1:, ::2]),
        (lambda t: t[..., -1], lambda a: a[..., -1]),
        (lambda t: t[None, 1, :, None], lambda a: a[None, 1, :, None]),
        (lambda t: t.narrow(2, 1, 2), lambda a: a[:, :, 1:3]),
        (lambda t: t.select(1, 2), lambda a: a[:, 2]),
        (lambda t: t.unsqueeze(1).squeeze(1), lambda a: a),
        (lambda t: t.flatten(1), lambda a: a.reshape(2, 12)),
        (lambda t: t.unflatten(2, (2, 2)), lambda a: a.reshape(2, 3, 2, 2)),
        (lambda t: t.movedim(0, -1), lambda a: np.moveaxis(a, 0, -1)),
        (lambda t: t[0].diagonal(), lambda a: np.diagonal(a[0])),
        (lambda t: t[0, 0].unfold(0, 2, 1), lambda a: np.lib.stride_tricks.sliding_window_view(a[0, 0], 2)),
        (lambda t: t.as_strided((3, 2), (4, 1), 1), lambda a: np.lib.stride_tricks.as_strided(
            a.reshape(-1)[1:], (3, 2), (32, 8))),
        (lambda t: t[:, :1].expand(2, 5, 4), lambda a: np.broadcast_to(a[:, :1], (2, 5, 4))),
    ]
    for f, g in cases:
        v = f(base)
        assert v._storage is base._storage
        assert_close(v, g(ref))
    parts = base.split(2, dim=2)
    assert [p.shape for p in parts] == [(2, 3, 2), (2, 3, 2)]
    assert [c.shape for c in base.chunk(3, 1)] == [(2, 1, 4)] * 3
    assert_close(base.unbind(0)[1], ref[1])


def test_view_errors_and_reshape_copy(device):
    t = torch.arange(6.0, device=device).reshape(2, 3).t()
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        t.view(6)
    r = t.reshape(6)
    assert r._storage is not t._storage and to_np(r).tolist() == [0, 3, 1, 4, 2, 5]
    with pytest.raises(RuntimeError, match="invalid for input of size 6"):
        t.reshape(4, 2)
    with pytest.raises(IndexError, match="out of range"):
        t.transpose(0, 5)
    with pytest.raises(RuntimeError, match="must match the existing size"):
        torch.zeros(2, 3, device=device).expand(4, 3)


def test_inplace_on_view_writes_base(device):
    x = torch.zeros(3, 4, device=device)
    x[1].add_(2)
    x[:, 2] = 5.0
    x[0, 0] = torch.tensor(7.0, device=device)
    ref = np.zeros((3, 4))
    ref[1] += 2
    ref[:, 2] = 5
    ref[0, 0] = 7
    assert_close(x, ref)
    assert x._version >= 3


def test_inplace_rules(device):
    e = torch.zeros(1, 3, device=device).expand(2, 3)
    with pytest.raises(RuntimeError, match="single memory location"):
        e.add_(1)
    e.fill_(2.0)  # allowed on overlapping memory
    assert to_np(e).tolist() == [[2, 2, 2], [2, 2, 2]]
    i = torch.tensor([1, 2], device=device)
    with pytest.raises(RuntimeError, match="can't be cast"):
        i += torch.tensor([0.5, 0.5], device=device)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        torch.zeros(3, device=device).add_(torch.zeros(2, 3, device=device))
    v0 = i._version
    i.add_(1)
    assert i._version == v0 + 1


def test_type_promotion(device):
    i = torch.tensor([1, 2], device=device)
    f = torch.tensor([1.0, 2.0], device=device)
    assert (i * 2.5).dtype == torch.float32
    assert (f * np.float64(2.0)).dtype == torch.float32 and (f * 2.0).dtype == torch.float32
    assert (i + i).dtype == torch.int64 and (i / i).dtype == torch.float32
    assert (torch.tensor([1], dtype=torch.uint8, device=device) + torch.tensor([1], dtype=torch.int8,
                                                                               device=device)).dtype == torch.int16
    assert (i + torch.tensor(1.5, dtype=torch.float64, device=device)).dtype == torch.float64
    assert (f + torch.tensor(1.5, dtype=torch.float64, device=device)).dtype == torch.float32
    assert (torch.tensor([True], device=device) + 1).dtype == torch.int64
    assert torch.promote_types(torch.int32, torch.float16) == torch.float16
    with pytest.raises(RuntimeError, match="bool tensors is not supported"):
        torch.tensor([True], device=device) - torch.tensor([False], device=device)


def test_mixed_devices_and_zero_dim_cpu():
    if torch.cl.device_count() == 0:
        pytest.skip("no OpenCL device")
    a = torch.ones(3, device="cl:0")
    with pytest.raises(RuntimeError, match="cl:0 and cpu|cpu and cl:0"):
        a + torch.ones(3)
    r = a + torch.tensor(2.0)  # 0-d cpu tensor mixes with any device
    assert r.device == torch.device("cl:0") and to_np(r).tolist() == [3, 3, 3]


def test_factories(device):
    assert to_np(torch.full((2, 2), 3, device=device)).tolist() == [[3, 3], [3, 3]]
    assert torch.full((1,), True, device=device).dtype == torch.bool
    assert torch.zeros_like(torch.ones(2, 3, dtype=torch.int32, device=device)).dtype == torch.int32
    assert_close(torch.eye(3, 2, device=device), np.eye(3, 2))
    assert_close(torch.linspace(-1, 1, 5, device=device), np.linspace(-1, 1, 5))
    assert torch.arange(0, 1, 0.1, device=device).shape == (10,)
    x = torch.ones(2, device=device)
    assert x.new_zeros(3).dtype == torch.float32 and x.new_full((2,), 4.0).tolist() == [4.0, 4.0]
    assert torch.tensor([[1, 2], [3, 4]], device=device).dtype == torch.int64
    assert torch.tensor([1, 2.0], device=device).dtype == torch.float32
    assert torch.tensor(3.0, device=device).dim() == 0
    with pytest.raises(RuntimeError, match="requires grad"):
        torch.ones(2).requires_grad_().numpy()
    torch.set_default_dtype(torch.float64)
    try:
        assert torch.tensor([1.0], device=device).dtype == torch.float64
        assert (torch.tensor([1], device=device) * 0.5).dtype == torch.float64
    finally:
        torch.set_default_dtype(torch.float32)


def test_numpy_sharing_is_never_stale():
    t = torch.zeros(4)
    n = t.numpy()
    t.add_(1)
    assert n.tolist() == [1, 1, 1, 1]
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    s = torch.from_numpy(a)
    s.mul_(2)
    assert a.tolist() == [[0, 2, 4], [6, 8, 10]]
    a[0, 0] = 100
    assert s[0, 0].item() == 100
    assert torch.from_numpy(a.T).stride() == (1, 3)


def test_copy_and_to_across_devices_and_dtypes(device):
    src = torch.arange(6, device=device).reshape(2, 3)
    dst = torch.zeros(2, 3, dtype=torch.float32, device=device)
    dst.copy_(src)
    assert to_np(dst).tolist() == [[0, 1, 2], [3, 4, 5]]
    row = torch.tensor([1.5, -2.5, 3.0], device=device)
    dst.copy_(row)  # broadcasting
    assert to_np(dst).tolist() == [[1.5, -2.5, 3], [1.5, -2.5, 3]]
    assert to_np(row.to(torch.int64)).tolist() == [1, -2, 3]
    assert to_np(row.to(torch.bool)).tolist() == [True, True, True]
    c = row.cpu()
    assert c.device == torch.device("cpu") and c.tolist() == [1.5, -2.5, 3.0]
    for other in ["cpu"] + [f"cl:{i}" for i in range(torch.cl.device_count())]:
        m = row.to(other)
        assert m.device == torch.device(other) and m.tolist() == row.tolist()
    assert row.to(device) is row


def test_opencl_builtin_pitfalls(device):
    # round: halves to even (OpenCL's round goes away from zero)
    assert to_np(torch.tensor([0.5, 1.5, 2.5, -0.5], device=device).round()).tolist() == [0, 2, 2, -0.0]
    # maximum/minimum/clamp/relu propagate NaN (fmax/fmin drop it)
    nan = float("nan")
    a = torch.tensor([nan, 1.0], device=device)
    b = torch.tensor([0.0, nan], device=device)
    assert np.isnan(to_np(torch.maximum(a, b))).all() and np.isnan(to_np(torch.minimum(a, b))).all()
    assert np.isnan(to_np(a.clamp(0, 1))[0]) and np.isnan(to_np(a.relu())[0])
    # integer division by zero raises instead of returning an undefined value
    with pytest.raises(ZeroDivisionError):
        torch.tensor([4, 2], device=device) // torch.tensor([0, 1], device=device)
    with pytest.raises(ZeroDivisionError):
        torch.tensor([4], device=device) % 0


def test_fp64_masked_device_raises(monkeypatch):
    import cltorch.backend.devices as devs
    import cltorch._storage as st
    if torch.cl.device_count() == 0:
        pytest.skip("no OpenCL device")
    info = devs.list_devices()[0]
    monkeypatch.setattr(info, "fp64", False)
    with pytest.raises(TypeError, match=re.escape(info.name) + ".*cl_khr_fp64"):
        torch.zeros(2, dtype=torch.float64, device="cl:0")
    monkeypatch.setattr(info, "fp16", False)   # without cl_khr_fp16, float16 is a storage dtype (fp32 compute)
    h = torch.full((2,), 1 / 3, dtype=torch.float16, device="cl:0")
    assert h.dtype is torch.float16 and h.tolist() == [float(np.float16(1 / 3))] * 2
    assert st is not None


def test_finfo_iinfo():
    assert torch.finfo(torch.float32).eps == float(np.finfo(np.float32).eps)
    assert torch.iinfo(torch.int8).min == -128 and torch.iinfo(torch.uint8).max == 255
    assert math.isinf(torch.finfo().max * 1e300)


def test_host_arithmetic_results_are_plain_contiguous_tensors():
    """Small cpu ops run in numpy and keep numpy's fresh result as the storage only when its layout is the
    tensor's own: a transposed operand (numpy answers in its order) still gives a contiguous result."""
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = torch.from_numpy(a.copy())
    for t, want in ((x - 1.5, a - 1.5), (x.t() * 2.0, a.T * 2.0), (x.t() / torch.tensor(4.0), a.T / 4.0),
                    (x > 5, a > 5)):
        w = np.ascontiguousarray(want)
        assert t.is_contiguous() and t.stride() == tuple(s // w.itemsize for s in w.strides)
        np.testing.assert_array_equal(t.numpy(), want)
    r = x[2]
    assert r.tolist() == a[2].tolist() and x[-1].tolist() == a[-1].tolist()
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        x[3]


def test_cpu_storage_is_aligned_for_kernels_without_losing_numpy_sharing():
    """A cpu result made in numpy may sit anywhere in memory; the first kernel that uses it moves it to aligned
    memory, unless numpy already shares it (then the kernel works on that memory in place)."""
    from cltorch._storage import HOST_ALIGN, host_address
    a = np.linspace(-1, 1, 70001, dtype=np.float32)
    t = torch.from_numpy(a[:5]) - 0.25                   # a small host result
    u = t.exp()                                           # a kernel reads it
    np.testing.assert_allclose(u.numpy(), np.exp(a[:5] - 0.25), rtol=1e-6)
    assert host_address(t._storage.host) % HOST_ALIGN == 0
    shared = torch.from_numpy(a[1:])                      # 4 bytes past an aligned start: numpy owns this memory
    shared.exp_()                                         # a kernel (70,000 elements) writes it in place
    np.testing.assert_allclose(a[1:], np.exp(np.linspace(-1, 1, 70001, dtype=np.float32)[1:]), rtol=1e-6)
    v = torch.from_numpy(a[:3].copy()) * 3.0
    n = v.numpy()                                         # exposed: never moved
    v.mul_(2.0)
    np.testing.assert_array_equal(n, v.numpy())
