"""sort/argsort/topk/kthvalue/median/unique and cumsum/cumprod/cummax/cummin: values against numpy (or
plain Python) references on every device, over short and long rows (several merge passes, the chunked
scan), any dim and strided inputs; gradients by finite differences (float64)."""
import math

import numpy as np
import pytest

import cltorch as torch

DEVICES = ["cpu"] + [f"cl:{i}" for i in range(torch.cl.device_count())]
on_devices = pytest.mark.parametrize("device", DEVICES)
rng = np.random.default_rng(7)


def T(a, device, **kw):
    return torch.tensor(a, device=device, **kw)


def ref_sort(a, axis, descending):
    """Stable sort along axis with NaN as the largest value: (values, indices)."""
    a = np.moveaxis(np.asarray(a), axis, -1)
    idx = np.empty(a.shape, np.int64)
    for pos in np.ndindex(*a.shape[:-1]):
        row = a[pos]
        key = (lambda i: (math.isnan(row[i]), row[i]) if not math.isnan(row[i]) else (True, 0)) \
            if row.dtype.kind == "f" else (lambda i: row[i])
        idx[pos] = sorted(range(len(row)), key=key, reverse=descending)
    vals = np.take_along_axis(a, idx, -1)
    return np.moveaxis(vals, -1, axis), np.moveaxis(idx, -1, axis)


def check_sort(res, a, axis, descending):
    v, i = ref_sort(a, axis, descending)
    np.testing.assert_array_equal(res.values.cpu().numpy(), v)
    np.testing.assert_array_equal(res.indices.cpu().numpy(), i)
    assert res.indices.dtype == torch.int64


@on_devices
@pytest.mark.parametrize("n", [1, 5, 33, 100, 1000, 4099])
def test_sort_float_with_ties_and_nan(device, n):
    a = rng.integers(-5, 5, size=(3, n)).astype(np.float32)     # many ties: checks stability
    a[rng.random(a.shape) < 0.05] = np.nan
    a[0, 0] = -np.inf
    for desc in (False, True):
        check_sort(torch.sort(T(a, device), dim=1, descending=desc, stable=True), a, 1, desc)


@on_devices
def test_sort_any_dim_strided_and_dtypes(device):
    a = rng.standard_normal((5, 70, 3)).astype(np.float64)
    x = T(a, device)
    for d in range(3):
        check_sort(torch.sort(x, d), a, d, False)
    check_sort(x.transpose(0, 1).sort(dim=0, descending=True), a.transpose(1, 0, 2), 0, True)
    for dt in (np.int64, np.int32, np.int8, np.uint8, np.int16):
        b = rng.integers(0, 100, size=(4, 50)).astype(dt)
        check_sort(torch.sort(T(b, device), descending=True), b, 1, True)
    c = rng.random((3, 40)) > 0.5
    check_sort(torch.sort(T(c, device)), c, 1, False)
    np.testing.assert_array_equal(torch.argsort(x, 1).cpu().numpy(), ref_sort(a, 1, False)[1])
    np.testing.assert_array_equal(torch.msort(x).cpu().numpy(), np.sort(a, 0))
    s0 = torch.sort(T(3.0, device))
    assert s0.values.item() == 3.0 and s0.indices.item() == 0 and s0.values.shape == ()
    e = torch.sort(torch.zeros(0, 3, device=device), 0)
    assert e.values.shape == (0, 3)


@on_devices
def test_topk_kthvalue_median(device):
    a = rng.integers(0, 20, size=(4, 300)).astype(np.float32)
    x = T(a, device)
    for largest in (True, False):
        r = torch.topk(x, 7, dim=1, largest=largest)
        v, i = ref_sort(a, 1, largest)
        np.testing.assert_array_equal(r.values.cpu().numpy(), v[:, :7])
        np.testing.assert_array_equal(r.indices.cpu().numpy(), i[:, :7])
    r = x.topk(2, dim=0)
    v, i = ref_sort(a, 0, True)
    np.testing.assert_array_equal(r.values.cpu().numpy(), v[:2])
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        x.topk(301)
    k = torch.kthvalue(x, 5, 1)
    np.testing.assert_array_equal(k.values.cpu().numpy(), np.sort(a, 1)[:, 4])
    np.testing.assert_array_equal(np.take_along_axis(a, k.indices.cpu().numpy()[:, None], 1)[:, 0],
                                  np.sort(a, 1)[:, 4])
    assert torch.kthvalue(x, 3, 0, keepdim=True).values.shape == (1, 300)
    m = torch.median(x, 1)
    want = np.sort(a, 1)[:, (300 - 1) // 2]
    np.testing.assert_array_equal(m.values.cpu().numpy(), want)
    np.testing.assert_array_equal(a[np.arange(4), m.indices.cpu().numpy()], want)
    assert torch.median(T([3.0, 1.0, 2.0, 4.0], device)).item() == 2.0
    nan = T([1.0, float("nan"), 3.0, 0.0], device)
    assert math.isnan(torch.median(nan).item())
    mm = torch.median(nan, 0)
    assert math.isnan(mm.values.item()) and mm.indices.item() == 1
    assert torch.nanmedian(nan).item() == 1.0


@on_devices
def test_unique(device):
    a = rng.integers(0, 6, size=(4, 7))
    u, inv, cnt = torch.unique(T(a, device), return_inverse=True, return_counts=True)
    wu, winv, wcnt = np.unique(a, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(u.cpu().numpy(), wu)
    np.testing.assert_array_equal(inv.cpu().numpy(), winv.reshape(a.shape))
    np.testing.assert_array_equal(cnt.cpu().numpy(), wcnt)
    uc, cc = torch.unique_consecutive(T([1, 1, 2, 2, 3, 1, 1], device), return_counts=True)
    assert uc.tolist() == [1, 2, 3, 1] and cc.tolist() == [2, 2, 1, 2]


# ------------------------------------------------------------------------------------------ scans
@on_devices
@pytest.mark.parametrize("shape,dim", [((7,), 0), ((3, 50), 1), ((50, 3), 0), ((2, 5, 4), 1), ((1, 20000), 1),
                                       ((3, 9000), 1), ((20000,), 0)])
def test_cumsum_cumprod(device, shape, dim):
    a = rng.standard_normal(shape)
    x = T(a, device)
    np.testing.assert_allclose(torch.cumsum(x, dim).cpu().numpy(), np.cumsum(a, dim), rtol=1e-9, atol=1e-9)
    b = 1 + 0.001 * rng.standard_normal(shape)
    np.testing.assert_allclose(torch.cumprod(T(b, device), dim).cpu().numpy(), np.cumprod(b, dim), rtol=1e-9)
    i = rng.integers(-3, 4, size=shape)
    r = torch.cumsum(T(i, device), dim)
    assert r.dtype == torch.int64
    np.testing.assert_array_equal(r.cpu().numpy(), np.cumsum(i, dim))


@on_devices
def test_cumsum_dtypes_and_strided(device):
    a = rng.standard_normal((6, 5)).astype(np.float32)
    x = T(a, device)
    np.testing.assert_allclose(x.t().cumsum(0).cpu().numpy(), np.cumsum(a.T, 0), rtol=1e-5)
    np.testing.assert_allclose(x[::2, 1:].cumsum(-1).cpu().numpy(), np.cumsum(a[::2, 1:], -1), rtol=1e-5)
    assert torch.cumsum(T([1, 2], device), 0, dtype=torch.float64).dtype == torch.float64
    for dt in (torch.bool, torch.uint8, torch.int8, torch.int32):
        r = torch.cumsum(T([1, 1, 0, 1], device, dtype=dt), 0)
        assert r.dtype == torch.int64 and r.tolist() == [1, 2, 2, 3]
        assert torch.cumprod(T([1, 2, 3], device, dtype=dt if dt is not torch.bool else torch.int8), 0).tolist() \
            == [1, 2, 6]
    s = T(5.0, device)
    assert torch.cumsum(s, 0).item() == 5.0 and torch.cumsum(s, 0).shape == ()
    assert torch.cumsum(torch.zeros(0, 3, device=device), 0).shape == (0, 3)
    y = x.clone()
    y.cumsum_(1)
    np.testing.assert_allclose(y.cpu().numpy(), np.cumsum(a, 1), rtol=1e-5)


def ref_cum(a, dim, is_max):
    a = np.moveaxis(a, dim, -1)
    v, ix = np.empty_like(a), np.empty(a.shape, np.int64)
    for pos in np.ndindex(*a.shape[:-1]):
        row, best, bi = a[pos], None, 0
        for j, e in enumerate(row):
            if j == 0 or (np.isnan(e) or (not np.isnan(best) and (e >= best if is_max else e <= best))):
                best, bi = e, j
            v[pos + (j,)], ix[pos + (j,)] = best, bi
    return np.moveaxis(v, -1, dim), np.moveaxis(ix, -1, dim)


@on_devices
@pytest.mark.parametrize("shape,dim", [((4, 30), 1), ((30, 4), 0), ((1, 20000), 1)])
def test_cummax_cummin(device, shape, dim):
    a = rng.integers(0, 8, size=shape).astype(np.float32)
    a[rng.random(shape) < 0.01] = np.nan
    for fn, is_max in ((torch.cummax, True), (torch.cummin, False)):
        r = fn(T(a, device), dim)
        v, i = ref_cum(a, dim, is_max)
        np.testing.assert_array_equal(r.values.cpu().numpy(), v)
        np.testing.assert_array_equal(r.indices.cpu().numpy(), i)
    b = rng.integers(-50, 50, size=shape)
    r = torch.cummax(T(b, device), dim)
    v, i = ref_cum(b, dim, True)
    np.testing.assert_array_equal(r.values.cpu().numpy(), v)
    np.testing.assert_array_equal(r.indices.cpu().numpy(), i)


# ------------------------------------------------------------------------------------------ gradients
@on_devices
def test_gradcheck_sort_topk_cum(device):
    gc = torch.autograd.gradcheck
    x = T(rng.permutation(12).reshape(3, 4) + 0.1 * rng.standard_normal((3, 4)), device, requires_grad=True)
    assert gc(lambda a: torch.sort(a, 1).values, (x,))
    assert gc(lambda a: torch.sort(a, 0, descending=True).values, (x,))
    assert gc(lambda a: torch.topk(a, 2, 1).values, (x,))
    assert gc(lambda a: torch.kthvalue(a, 2, 0).values, (x,))
    assert gc(lambda a: torch.cumsum(a, 1), (x,))
    assert gc(lambda a: torch.cumsum(a, 0), (x,))
    assert gc(lambda a: torch.cumprod(a, 1), (x,))
    assert gc(lambda a: torch.cummax(a, 1).values, (x,))
    assert gc(lambda a: torch.cummin(a, 0).values, (x,))
    z = T([[2.0, 0.0, 3.0, 0.0, 1.5], [1.0, 2.0, 0.0, 4.0, 5.0]], device, dtype=torch.float64,
          requires_grad=True)
    assert gc(lambda a: torch.cumprod(a, 1), (z,))     # zeros: the exact formula


@on_devices
def test_gradgradcheck_cumsum(device):
    x = T(rng.standard_normal((2, 3)), device, requires_grad=True)
    assert torch.autograd.gradgradcheck(lambda a: torch.cumsum(a, 1) ** 2, (x,))


@on_devices
def test_zero_size_and_zero_dim(device):
    s = T(2.5, device)
    assert torch.topk(T([1.0, 2.0], device), 0).values.shape == (0,)
    assert torch.cummax(s, 0).values.shape == () and torch.cummax(s, 0).indices.item() == 0
    assert torch.argsort(s).shape == () and torch.kthvalue(s, 1).values.item() == 2.5
    e = torch.zeros(2, 0, device=device)
    assert torch.cumsum(e, 1).shape == (2, 0) and torch.cumprod(e, 0).shape == (2, 0)
    assert torch.sort(e, 1).indices.shape == (2, 0) and torch.cummin(e, 1).indices.shape == (2, 0)
    assert torch.unique(torch.zeros(0, device=device)).shape == (0,)
