"""Advanced indexing, gather/scatter, index_* ops, masks, nonzero, take, embedding: values against numpy
references on every device, result shapes against numpy's (Hypothesis), gradients by finite differences
(float64), and IndexError on host and device."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import cltorch as torch
from cltorch.ops import indexing as I
from cltorch.ops.indexing import launch as IL, scatter_gather as ISG

DEVICES = ["cpu"] + [f"cl:{i}" for i in range(torch.cl.device_count())]
on_devices = pytest.mark.parametrize("device", DEVICES)
rng = np.random.default_rng(1234)


def T(a, device, **kw):
    return torch.tensor(a, device=device, **kw)


def same(t, a):
    got = np.asarray(t.detach().cpu().numpy() if t.dtype is not torch.bool else t.cpu().numpy())
    assert tuple(t.shape) == a.shape, (tuple(t.shape), a.shape)
    np.testing.assert_array_equal(got, a)


# ------------------------------------------------------------------------------------------ getitem / setitem
@on_devices
@pytest.mark.parametrize("make", [
    lambda a: ([1, 0, -1],),
    lambda a: (slice(None), [1, 1, 0]),
    lambda a: ([1, 0], slice(None), [3, 1]),           # non-adjacent: broadcast dims go first
    lambda a: (slice(None), [[0, 1], [2, 2]], [1, 3]),  # adjacent: replaced in place
    lambda a: (Ellipsis, [0, 3]),
    lambda a: (None, [1, 0], slice(1, 3)),
    lambda a: (a > 10,),
    lambda a: (a[:, 0, 0] > 5,),
    lambda a: (slice(None), a[0] % 2 == 0),
    lambda a: (1, [2, 0], [0, 3]),
    lambda a: (np.array(1), slice(None), np.array([0, 2])),
    lambda a: ([],),
])
def test_getitem_matches_numpy(device, make):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = T(a, device)
    idx = make(a)
    tidx = tuple(T(i, device) if isinstance(i, np.ndarray) and i.dtype == bool else
                 (T(i, device) if isinstance(i, np.ndarray) else i) for i in idx)
    want = a[tuple(np.asarray(i, dtype=np.int64) if isinstance(i, list) else i for i in idx)]
    same(x[tidx if len(tidx) > 1 else tidx[0]], want)


@on_devices
def test_getitem_zero_dim_and_bool_scalar_index(device):
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    x = T(a, device)
    same(x[T(1, device)], a[1])
    same(x[T(True, device)], a[None])
    same(x[T(False, device)], a[None][:0])
    same(x[:, T([True, False, True], device)], a[:, [0, 2]])
    # uint8 masks are masks (PyTorch's legacy rule)
    same(x[T(np.array([[1, 0, 0], [0, 0, 1]], np.uint8), device)], np.array([0, 5]))


@on_devices
def test_getitem_strided_source(device):
    a = np.arange(60, dtype=np.float64).reshape(3, 4, 5)
    x = T(a, device).permute(2, 0, 1)[1:, :, ::2]
    an = a.transpose(2, 0, 1)[1:, :, ::2]
    same(x[[3, 0, 1], :, [1, 0, 1]], an[[3, 0, 1], :, [1, 0, 1]])
    same(x[an > 30], an[an > 30])


_idx_el = st.one_of(st.just("slice"), st.just("none"), st.just("int"), st.just("list"), st.just("list2"),
                    st.just("mask"), st.just("ellipsis"))


@settings(deadline=None, derandomize=True, max_examples=30)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=4), kinds=st.lists(_idx_el, min_size=1, max_size=4),
       seed=st.integers(0, 10 ** 6))
def test_hypothesis_index_shapes_and_values(shape, kinds, seed):
    r = np.random.default_rng(seed)
    a = r.standard_normal(shape).astype(np.float32)
    idx, d, used_ell = [], 0, False
    for k in kinds:
        if k == "ellipsis":
            if used_ell:
                continue
            used_ell = True
            idx.append(Ellipsis)
            after = sum(1 for i in kinds[kinds.index("ellipsis") + 1:] if i not in ("none", "ellipsis"))
            d = max(d, len(shape) - after)
            continue
        if k == "none":
            idx.append(None)
            continue
        if d >= len(shape) or d < 0:
            break
        n = shape[d]
        if k == "slice":
            idx.append(slice(int(r.integers(0, n)), None, int(r.integers(1, 3))))
        elif k == "int":
            idx.append(int(r.integers(-n, n)))
        elif k == "list":
            idx.append(r.integers(-n, n, size=int(r.integers(1, 4))).tolist())
        elif k == "list2":
            idx.append(r.integers(0, n, size=(2, 1)).tolist())
        else:
            idx.append(r.random(n) > 0.4)
        d += 1
    if not idx:
        return
    lists = [i for i in idx if isinstance(i, list)]
    try:
        np.broadcast_shapes(*[np.shape(i) for i in lists]) if lists else None
    except ValueError:
        return
    want = a[tuple(np.asarray(i) if isinstance(i, list) else i for i in idx)]
    for device in DEVICES:
        x = T(a, device)
        tidx = tuple(T(i, device) if isinstance(i, np.ndarray) else i for i in idx)
        got = x[tidx]
        assert tuple(got.shape) == want.shape, (idx, tuple(got.shape), want.shape)
        np.testing.assert_array_equal(got.cpu().numpy(), want)


@on_devices
def test_setitem_values_broadcast_cast_and_masks(device):
    a = np.zeros((3, 4), np.float32)
    x = T(a, device)
    x[[0, 2], 1:3] = T([[1, 2], [3, 4]], device)          # int64 values are cast, as PyTorch's setitem does
    a[[0, 2], 1:3] = [[1, 2], [3, 4]]
    x[x == 0] = -1.5
    a[a == 0] = -1.5
    x[:, [0, 3]] = 7
    a[:, [0, 3]] = 7
    x[T([True, False, True], device)] = T([9., 8., 7., 6.], device)
    a[[True, False, True]] = [9, 8, 7, 6]
    same(x, a)
    with pytest.raises(RuntimeError, match=r"shape mismatch: value tensor of shape \[3\]"):
        x[[0, 1]] = T([1., 2., 3.], device)


@on_devices
def test_setitem_on_strided_view_writes_through(device):
    a = np.arange(20, dtype=np.float32).reshape(4, 5)
    x = T(a, device)
    v = x.t()[1:]
    v[[0, 2], [1, 3]] = 100.
    a.T[1:][[0, 2], [1, 3]] = 100.
    same(x, a)


@on_devices
@pytest.mark.parametrize("dt", ["float32", "float64", "int64", "int32", "int8", "uint8", "int16"])
def test_index_put_accumulate_duplicates(device, dt):
    dtype = getattr(torch, dt)
    a = np.zeros((5, 3), dtype=np.dtype(dt))
    x = T(a, device, dtype=dtype)
    i = np.array([0, 1, 1, 4, 1, 0])
    v = np.arange(18).reshape(6, 3).astype(np.dtype(dt)) % 7
    x.index_put_((T(i, device),), T(v, device, dtype=dtype), accumulate=True)
    np.add.at(a, i, v)
    same(x, a)
    # without accumulate: a plain put
    y = torch.zeros(5, dtype=dtype, device=device)
    y.index_put_((T([3, 1], device),), T(np.array([2, 5], np.dtype(dt)), device, dtype=dtype))
    same(y, np.array([0, 5, 0, 2, 0], np.dtype(dt)))


@on_devices
def test_index_put_bool_accumulate_and_dtype_mismatch(device):
    x = torch.zeros(4, dtype=torch.bool, device=device)
    x.index_put_((T([1, 1, 3], device),), T([True, False, True], device), accumulate=True)
    assert x.tolist() == [False, True, False, True]
    with pytest.raises(RuntimeError, match="Index put requires the source and destination dtypes match"):
        torch.zeros(3, device=device).index_put_((T([0], device),), T([1], device))


@on_devices
def test_index_put_functional_and_mask_index(device):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = T(a, device)
    m = a > 6
    r = torch.index_put(x, (T(m, device),), T(0.5, device))
    b = a.copy()
    b[m] = 0.5
    same(r, b)
    same(x, a)


# ------------------------------------------------------------------------------------------ dim-wise ops
@on_devices
def test_index_select(device):
    a = rng.standard_normal((4, 5, 6)).astype(np.float32)
    x = T(a, device)
    for dim in range(3):
        i = rng.integers(0, a.shape[dim], size=7)
        same(torch.index_select(x, dim, T(i, device)), np.take(a, i, axis=dim))
        same(x.index_select(dim - 3, T(i.astype(np.int32), device, dtype=torch.int32)), np.take(a, i, axis=dim))
    same(x.transpose(0, 2).index_select(1, T([4, 0], device)), a.transpose(2, 1, 0)[:, [4, 0]])


@on_devices
def test_gather_and_take_along_dim(device):
    a = rng.standard_normal((3, 4, 5)).astype(np.float32)
    x = T(a, device)
    for dim in range(3):
        ishape = [2, 3, 4]
        i = rng.integers(0, a.shape[dim], size=ishape)
        sl = tuple(slice(0, s) if d != dim else slice(None) for d, s in enumerate(ishape))
        same(torch.gather(x, dim, T(i, device)), np.take_along_axis(a[sl], i, axis=dim))
    i = rng.integers(0, 5, size=(3, 4, 2))
    same(torch.take_along_dim(x, T(i, device), dim=2), np.take_along_axis(a, i, axis=2))
    j = rng.integers(0, 60, size=(7,))
    same(torch.take_along_dim(x, T(j, device)), a.reshape(-1)[j])
    same(torch.take(x, T([[0, -1], [17, 3]], device)), a.reshape(-1)[[[0, -1], [17, 3]]])
    # broadcasting in take_along_dim
    k = rng.integers(0, 3, size=(2, 1, 5))
    same(torch.take_along_dim(x, T(k, device), dim=0), np.take_along_axis(a, k, axis=0))


def _np_scatter(a, dim, idx, src, op):
    out = a.copy()
    for pos in np.ndindex(*idx.shape):
        tgt = list(pos)
        tgt[dim] = idx[pos]
        v = src[pos] if isinstance(src, np.ndarray) else src
        tgt = tuple(tgt)
        if op == "assign":
            out[tgt] = v
        elif op == "add":
            out[tgt] += v
        elif op == "mul":
            out[tgt] *= v
    return out


@on_devices
def test_scatter_variants(device):
    a = rng.standard_normal((4, 5)).astype(np.float32)
    x = T(a, device)
    src = rng.standard_normal((3, 5)).astype(np.float32)
    # distinct targets per column for the plain scatter
    idx = np.stack([rng.permutation(4)[:3] for _ in range(5)], 1)
    same(torch.scatter(x, 0, T(idx, device), T(src, device)), _np_scatter(a, 0, idx, src, "assign"))
    same(x.scatter(0, T(idx, device), 2.5), _np_scatter(a, 0, idx, 2.5, "assign"))
    dup = rng.integers(0, 4, size=(3, 5))
    np.testing.assert_allclose(torch.scatter_add(x, 0, T(dup, device), T(src, device)).cpu().numpy(),
                               _np_scatter(a, 0, dup, src, "add"), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(x.scatter(0, T(dup, device), T(src, device), reduce="multiply").cpu().numpy(),
                               _np_scatter(a, 0, dup, src, "mul"), rtol=1e-6, atol=1e-6)
    y = x.clone()
    y.scatter_add_(1, T(dup[:, :2], device), T(src, device))
    np.testing.assert_allclose(y.cpu().numpy(), _np_scatter(a, 1, dup[:, :2], src, "add"), rtol=1e-6)
    # src larger than index: only index's extent is read
    same(torch.zeros(2, 3, device=device).scatter_(1, T([[2], [0]], device), T(src, device)),
         _np_scatter(np.zeros((2, 3), np.float32), 1, np.array([[2], [0]]), src, "assign"))


@on_devices
def test_scatter_add_int_dtypes(device):
    for dt in (torch.int64, torch.int32, torch.int8):
        x = torch.zeros(3, dtype=dt, device=device)
        x.scatter_add_(0, T([0, 2, 2, 2], device), T([1, 2, 3, 4], device, dtype=dt))
        assert x.tolist() == [1, 0, 9], dt


def _np_scatter_reduce(a, dim, idx, src, reduce, include_self):
    out = a.astype(np.float64).copy()
    groups = {}
    for pos in np.ndindex(*idx.shape):
        tgt = list(pos)
        tgt[dim] = idx[pos]
        groups.setdefault(tuple(tgt), []).append(float(src[pos]))
    for tgt, vals in groups.items():
        vs = ([float(a[tgt])] if include_self else []) + vals
        f = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}[reduce]
        out[tgt] = f(vs)
    return out


@on_devices
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(device, reduce, include_self):
    a = rng.standard_normal((4, 3)).astype(np.float32)
    src = rng.standard_normal((6, 3)).astype(np.float32)
    idx = rng.integers(0, 3, size=(6, 3))   # row 3 never receives anything
    got = torch.scatter_reduce(T(a, device), 0, T(idx, device), T(src, device), reduce, include_self=include_self)
    np.testing.assert_allclose(got.cpu().numpy(), _np_scatter_reduce(a, 0, idx, src, reduce, include_self),
                               rtol=1e-5, atol=1e-6)


@on_devices
def test_scatter_reduce_int_mean_floors_and_nan_amax(device):
    x = T([10, 0, 5], device)
    r = x.scatter_reduce(0, T([0, 0, 1], device), T([1, 2, -3], device), "mean")
    assert r.tolist() == [4, -2, 5]         # (10+1+2)/3 = 4.33 -> 4; (0-3)/2 = -1.5 -> floor -2
    y = T([0., 0.], device).scatter_reduce(0, T([0, 0, 1], device), T([1., float("nan"), 2.], device), "amax")
    assert np.isnan(y[0].item()) and y[1].item() == 2.0


@on_devices
def test_index_add_copy_fill(device):
    a = rng.standard_normal((5, 4)).astype(np.float32)
    x = T(a, device)
    i = np.array([4, 0, 4, 2])
    s = rng.standard_normal((4, 4)).astype(np.float32)
    want = a.copy()
    np.add.at(want, i, 2.0 * s)
    np.testing.assert_allclose(torch.index_add(x, 0, T(i, device), T(s, device), alpha=2.0).cpu().numpy(), want,
                               rtol=1e-6, atol=1e-6)
    s2 = rng.standard_normal((5, 2)).astype(np.float32)
    want = a.copy()
    want[:, [3, 1]] = s2
    same(x.index_copy(1, T([3, 1], device), T(s2, device)), want)
    want = a.copy()
    want[:, [0, 2]] = -4
    same(x.index_fill(1, T([0, 2], device), -4), want)
    y = x.clone()
    y.index_fill_(0, T([1], device), torch.tensor(3.0))
    want = a.copy()
    want[1] = 3
    same(y, want)
    with pytest.raises(RuntimeError, match="source tensor shape must match self tensor shape"):
        x.index_add(0, T([0, 1], device), T(s, device))


@on_devices
def test_masked_select_scatter_nonzero_where(device):
    a = rng.standard_normal((3, 4, 5)).astype(np.float32)
    x = T(a, device)
    m = a > 0.3
    same(torch.masked_select(x, T(m, device)), a[m])
    mrow = a[0] > 0            # broadcasts over dim 0
    same(x.masked_select(T(mrow, device)), np.broadcast_to(a, a.shape)[np.broadcast_to(mrow, a.shape)])
    src = np.arange(60, dtype=np.float32)
    want = a.copy()
    want[m] = src[:m.sum()]
    same(x.masked_scatter(T(m, device), T(src, device)), want)
    y = x.clone()
    y.masked_scatter_(T(mrow, device), T(src, device))
    want = a.copy()
    mb = np.broadcast_to(mrow, a.shape)
    want[mb] = src[:mb.sum()]
    same(y, want)
    same(torch.nonzero(x > 0.5), np.argwhere(a > 0.5))
    same(torch.argwhere(x > 0.5), np.argwhere(a > 0.5))
    for got, want in zip(torch.nonzero(x > 0.5, as_tuple=True), np.nonzero(a > 0.5)):
        same(got, want)
    for got, want in zip(torch.where(x > 0.5), np.nonzero(a > 0.5)):
        same(got, want)
    assert torch.nonzero(T(3.0, device)).shape == (1, 0)
    assert torch.nonzero(T(0, device)).shape == (0, 0)
    assert torch.nonzero(torch.zeros(2, 3, device=device)).shape == (0, 2)
    assert [t.tolist() for t in torch.nonzero(T(5, device), as_tuple=True)] == [[0]]
    with pytest.raises(RuntimeError, match="at least as many elements as ones in mask"):
        x.masked_scatter(T(m, device), torch.zeros(2, device=device))


@on_devices
def test_nonzero_long_input_uses_many_chunks(device):
    a = rng.random(50001) > 0.7
    same(torch.nonzero(T(a, device)).reshape(-1), np.flatnonzero(a))
    b = rng.standard_normal((3, 20000)).astype(np.float32)
    same(T(b, device)[T(b > 1, device)], b[b > 1])


@on_devices
def test_embedding_forward_and_padding_grad(device):
    w = rng.standard_normal((6, 3)).astype(np.float32)
    W = T(w, device, requires_grad=True)
    idx = np.array([[0, 2, 2], [5, 1, 2]])
    out = I.embedding(T(idx, device), W, padding_idx=2)
    same(out.detach(), w[idx])
    (out * 3).sum().backward()
    want = np.zeros_like(w)
    np.add.at(want, idx.reshape(-1), 3.0)
    want[2] = 0
    np.testing.assert_allclose(W.grad.cpu().numpy(), want)


# ------------------------------------------------------------------------------------------ bounds errors
@on_devices
def test_index_errors_name_index_and_size(device):
    x = torch.zeros(3, 4, device=device)
    cases = [
        (lambda: x[T([0, 5], device)], "index 5 is out of bounds for dimension 0 with size 3"),
        (lambda: x[:, T([-5], device)], "index -5 is out of bounds for dimension 1 with size 4"),
        (lambda: x[[1, 3]], "index 3 is out of bounds for dimension 0 with size 3"),
        (lambda: x.gather(1, T([[0, 4]], device)), "index 4 is out of bounds for dimension 1 with size 4"),
        (lambda: x.gather(0, T([[-1]], device)), "index -1 is out of bounds for dimension 0 with size 3"),
        (lambda: x.scatter(0, T([[7]], device), 1.0), "index 7 is out of bounds for dimension 0 with size 3"),
        (lambda: x.scatter_add(1, T([[9]], device), torch.ones(1, 1, device=device)),
         "index 9 is out of bounds for dimension 1 with size 4"),
        (lambda: x.index_select(0, T([2, 3], device)), "index 3 is out of bounds for dimension 0 with size 3"),
        (lambda: x.index_add(1, T([4], device), torch.ones(3, 1, device=device)),
         "index 4 is out of bounds for dimension 1 with size 4"),
        (lambda: x.index_put_((T([0, 3], device),), torch.tensor(1.0), accumulate=True),
         "index 3 is out of bounds for dimension 0 with size 3"),
        (lambda: torch.take(x, T([12], device)), "index 12 is out of bounds for dimension 0 with size 12"),
        (lambda: I.embedding(T([[1, 6]], device), torch.zeros(6, 2, device=device)),
         "index 6 is out of bounds for dimension 0 with size 6"),
    ]
    for fn, msg in cases:
        with pytest.raises(IndexError, match=msg):
            fn()
            torch.cl.synchronize()     # a device-side bounds flag is reported at the next synchronization
    x.zero_()
    x[T([1], device)] = 2.0          # the tensor and the device stay usable
    assert x.sum().item() == 8.0


@on_devices
def test_setitem_out_of_range_leaves_no_partial_garbage(device):
    x = torch.zeros(4, device=device)
    with pytest.raises(IndexError, match="index 4 is out of bounds for dimension 0 with size 4"):
        x[T([1, 4], device)] = 1.0
        torch.cl.synchronize()
    assert x.tolist()[0] == 0 and x.tolist()[2:] == [0, 0]


def test_index_errors_argument_checks():
    x = torch.zeros(3, 4)
    with pytest.raises(RuntimeError, match="Expected dtype int32/int64 for index"):   # torch 2.13 takes int32
        x.gather(0, torch.tensor([[0.0]]))
    with pytest.raises(RuntimeError, match="Index tensor must have the same number of dimensions"):
        x.gather(0, torch.tensor([0]))
    with pytest.raises(RuntimeError, match="Size does not match at dimension 1"):
        x.gather(0, torch.zeros(1, 5, dtype=torch.int64))
    with pytest.raises(IndexError, match="tensors used as indices must be long"):
        x[torch.tensor([0.0])]
    with pytest.raises(IndexError, match="The shape of the mask"):
        x[torch.tensor([True, False])]
    with pytest.raises(IndexError, match="shape mismatch: indexing tensors could not be broadcast"):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(RuntimeError, match="scatter\\(\\): Expected self.dtype to be equal to src.dtype"):
        x.scatter(0, torch.tensor([[0]]), torch.tensor([[1]]))


# ------------------------------------------------------------------------------------------ gradients
def _dev64():
    return [d for d in DEVICES if d == "cpu" or torch.cl.get_device_properties(d).fp64] \
        if hasattr(torch.cl, "get_device_properties") else DEVICES


@on_devices
def test_gradcheck_gather_scatter_index_select(device):
    gc = torch.autograd.gradcheck
    x = T(rng.standard_normal((3, 4)), device, requires_grad=True)
    s = T(rng.standard_normal((2, 4)), device, requires_grad=True)
    idx = T([[0, 2, 1, 0], [2, 2, 0, 1]], device)
    assert gc(lambda a: torch.gather(a, 0, idx), (x,))
    assert gc(lambda a, b: torch.scatter(a, 0, T([[0, 2, 1, 0], [1, 0, 2, 2]], device), b), (x, s))
    assert gc(lambda a, b: torch.scatter_add(a, 0, idx, b), (x, s))
    assert gc(lambda a: torch.index_select(a, 1, T([3, 0, 3], device)), (x,))
    assert gc(lambda a, b: torch.index_add(a, 0, T([2, 2], device), b, alpha=1.5), (x, s))
    assert gc(lambda a, b: torch.scatter_reduce(a, 0, idx, b, "mean", include_self=False), (x, s))
    assert gc(lambda a, b: torch.scatter_reduce(a, 0, idx, b, "amax"), (x, s))


@on_devices
def test_gradcheck_advanced_index_and_index_put(device):
    gc = torch.autograd.gradcheck
    x = T(rng.standard_normal((3, 4)), device, requires_grad=True)
    v = T(rng.standard_normal((3,)), device, requires_grad=True)
    assert gc(lambda a: a[[2, 0, 2], 1:], (x,))
    assert gc(lambda a: a[:, [[1, 1], [3, 0]]], (x,))
    assert gc(lambda a: a[a.detach() > 0], (x,))
    assert gc(lambda a, b: torch.index_put(a, (T([0, 2, 0], device), T([1, 1, 1], device)), b, accumulate=True),
              (x, v))
    assert gc(lambda a, b: torch.index_put(a, (T([0, 2, 1], device),), b.reshape(3, 1)), (x, v))
    assert gc(lambda a: torch.masked_select(a, T(np.array([True, False, True, True]), device)), (x,))
    assert gc(lambda a, b: a.masked_scatter(T(np.eye(3, 4, dtype=bool), device), b), (x, v))


@on_devices
def test_setitem_records_gradient_on_non_leaf(device):
    x = T(rng.standard_normal((3, 4)), device, requires_grad=True)
    v = T([1.0, 2.0], device, requires_grad=True)
    y = x * 2
    y[[0, 2], [1, 3]] = v
    (y * T(np.arange(12.).reshape(3, 4), device)).sum().backward()
    g = np.full((3, 4), 2.0) * np.arange(12.).reshape(3, 4)
    g[0, 1] = g[2, 3] = 0
    np.testing.assert_allclose(x.grad.cpu().numpy(), g)
    np.testing.assert_allclose(v.grad.cpu().numpy(), [1.0, 11.0])


def test_max_dim_backward_uses_scatter_into_zeros():
    x = torch.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]], requires_grad=True)
    x.max(dim=1).values.sum().backward()
    assert x.grad.tolist() == [[0, 1, 0], [1, 0, 0]]
    z = ISG._scatter_into_zeros(x, 1, torch.tensor([[2], [0]]), torch.tensor([[3.0], [4.0]]))
    assert z.tolist() == [[0, 0, 3], [4, 0, 0]]


def test_cpu_data_movement_needs_no_opencl(tmp_path):
    """Indexing and cat/stack of cpu tensors run without any OpenCL call (DataLoader workers)."""
    import subprocess
    import sys
    code = (
        "import cltorch as torch\n"
        "import sys; R = sys.modules['cltorch.backend.runtime']\n"
        "def boom(*a, **k):\n    raise SystemExit('OpenCL touched')\n"
        "R.Runtime.launch = boom\nR.runtime = boom\nR.cpu_runtime = boom\n"
        "import cltorch.backend as B\nB.runtime = boom\nB.cpu_runtime = boom\n"
        "x = torch.arange(12).reshape(3, 4)\n"
        "import numpy as np\nmk = torch.tensor(np.arange(12).reshape(3, 4) > 4)\n"
        "y = x[[2, 0]]; z = x[mk]; w = x[:, torch.tensor([True, False, True, False])]\n"
        "x[[0, 1], [1, 2]] = torch.tensor([-1, -2])\n"
        "s = torch.stack([x, x]); c = torch.cat([x, x.float()], 1)\n"
        "g = x.gather(1, torch.tensor([[0], [3], [1]])); i = x.index_select(1, torch.tensor([3, 0]))\n"
        "m = x.masked_select(mk); f = torch.flip(x, [0]); nz = torch.nonzero(mk)\n"
        "print(y.tolist(), z.tolist(), w.shape, s.shape, c.dtype, g.tolist(), i.shape, m.shape, f[0].tolist())\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=str(__import__("pathlib").Path(__file__).resolve().parents[1]))
    assert r.returncode == 0, r.stderr + r.stdout
    assert "[[8, 9, 10, 11], [0, 1, 2, 3]]" in r.stdout


@on_devices
def test_zero_size_and_zero_dim_shapes(device):
    s = T(2.5, device)
    e = torch.zeros(0, 3, device=device)
    none = torch.zeros(0, dtype=torch.int64, device=device)
    x = torch.zeros(3, 4, device=device)
    assert x.index_select(0, none).shape == (0, 4)
    assert x[none].shape == (0, 4) and x[:, none].shape == (3, 0)
    assert s.index_select(0, T(0, device)).shape == ()
    assert s.gather(0, T(0, device)).shape == () and s.gather(0, T(0, device)).item() == 2.5
    assert torch.take(s, T(0, device)).shape == ()
    assert s.scatter(0, T(0, device), T(1.0, device)).item() == 1.0
    assert e.gather(0, torch.zeros(0, 3, dtype=torch.int64, device=device)).shape == (0, 3)
    assert e[e > 0].shape == (0,) and torch.masked_select(e, e > 0).shape == (0,)
    assert torch.nonzero(e).shape == (0, 2)
    z = torch.zeros(3, device=device)
    z.index_put_((none,), torch.zeros(0, device=device), accumulate=True)
    z.scatter_add_(0, none, torch.zeros(0, device=device))
    z[z > 5] = 1.0
    assert z.tolist() == [0, 0, 0]


@settings(deadline=None, derandomize=True, max_examples=15)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), seed=st.integers(0, 10 ** 6))
def test_hypothesis_setitem_matches_numpy(shape, seed):
    r = np.random.default_rng(seed)
    a = r.standard_normal(shape).astype(np.float32)
    d = int(r.integers(0, len(shape)))
    idx = [slice(None)] * len(shape)
    idx[d] = r.integers(-shape[d], shape[d], size=int(r.integers(1, 4))).tolist()
    if len(shape) > 1 and r.random() < 0.5:
        d2 = (d + 1 + int(r.integers(0, len(shape) - 1))) % len(shape)
        idx[d2] = r.random(shape[d2]) > 0.5 if r.random() < 0.5 else r.integers(0, shape[d2], size=1).tolist()
    npidx = tuple(np.asarray(i) if isinstance(i, list) else i for i in idx)
    try:
        want = a.copy()
        want[npidx] = 7.0
    except IndexError:
        return
    for device in DEVICES:
        x = T(a, device)
        x[tuple(T(i, device) if isinstance(i, np.ndarray) else i for i in npidx)] = 7.0
        np.testing.assert_array_equal(x.cpu().numpy(), want)


@on_devices
def test_trusted_indices_skip_the_bounds_read_back(device, monkeypatch):
    """Indices made by our kernels (max/sort/cummax, mask coordinates) need no read-back; user indices do,
    and so do ours once modified in place."""
    reads = []
    orig = IL._check_err
    monkeypatch.setattr(IL, "_check_err", lambda *a: (reads.append(1), orig(*a))[1])
    x = T(rng.standard_normal((4, 5)), device, requires_grad=True)
    x.max(dim=1).values.sum().backward()
    torch.sort(x, 1).values.sum().backward()
    torch.cummax(x, 1).values.sum().backward()
    x.detach()[T(np.array([True, False, True, True]), device)]
    assert reads == []
    x.detach()[T([0, 3], device)]
    torch.cl.synchronize()                                  # deferred checks run at the synchronization
    assert len(reads) == (0 if device == "cpu" else 1)     # cpu: checked on the host, in numpy
    idx = torch.sort(x.detach(), 1).indices
    idx[0, 0] = 9
    with pytest.raises(IndexError, match="index 9 is out of bounds for dimension 1 with size 5"):
        x.detach().gather(1, idx)
        torch.cl.synchronize()


@on_devices
def test_embedding_gradient_is_the_same_on_every_run(device):
    """Repeated ids add up in a fixed order (a GEMM with the one-hot matrix for small tables), so two backward
    passes give bit-identical gradients, equal to numpy's np.add.at up to float32 rounding."""
    r = np.random.default_rng(3)
    idx = r.integers(0, 97, size=(32, 64))           # the char-LM's batch: 2,048 tokens over 97 ids
    g = r.standard_normal((32, 64, 128)).astype(np.float32)
    W0 = r.standard_normal((97, 128)).astype(np.float32)
    grads = []
    for _ in range(4):
        W = torch.tensor(W0, device=device, requires_grad=True)
        (I.embedding(T(idx, device), W) * T(g, device)).sum().backward()
        grads.append(W.grad.cpu().numpy())
    want = np.zeros((97, 128), np.float64)
    np.add.at(want, idx.reshape(-1), g.reshape(-1, 128).astype(np.float64))
    assert all(np.array_equal(grads[0], x) for x in grads[1:])
    np.testing.assert_allclose(grads[0], want, rtol=1e-5, atol=1e-5)
