"""Focused checks of the special functions and misc ops where OpInfo's samples are thin (tails, poles,
interpolation modes, options), against torch; and float64 gradchecks of the new differentiable pointwise ops."""
import math

import numpy as np
import pytest

import cltorch
from cltorch.autograd import gradcheck

torch = pytest.importorskip("torch")


def _cl(a, device, dtype=np.float32):
    return cltorch.from_numpy(np.asarray(a, dtype=dtype)).to(device)


def _close(got, ref, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(got.cpu().numpy().astype(np.float64), ref.numpy().astype(np.float64),
                               rtol=rtol, atol=atol, equal_nan=True)


UNARY = {
    "erfinv": ([-1, -0.999999, -0.9999, -0.5, 0, 1e-4, 0.3, 0.99, 0.9999, 1, 1.5], "erfinv"),
    "digamma": ([-2.5, -1.5, -0.5, -1e-3, 0, 1e-3, 0.5, 1, 3.7, 25, 1e4, -3], "digamma"),
    "lgamma": ([-2.5, -0.5, 0.1, 1, 2, 7.5, 100], "lgamma"),
    "i0e": ([-1e4, -50, -21, -20, -3, 0, 0.1, 3.75, 19.9, 20.1, 200, 1e5], "special.i0e"),
    "i1e": ([-1e4, -50, -21, -3, 0, 0.1, 3.75, 19.9, 20.1, 200, 1e5], "special.i1e"),
    "i0": ([-30, -5, 0, 0.5, 10, 25, 80], "i0"),
    "i1": ([-30, -5, 0, 0.5, 10, 25, 80], "special.i1"),
    "ndtri": ([0, 1e-30, 1e-7, 0.01, 0.3, 0.5, 0.9, 1 - 1e-6, 1, -0.1], "special.ndtri"),
    "log_ndtr": ([-30, -10, -1.5, -1, 0, 2, 8], "special.log_ndtr"),
    "erfcx": ([-8, -1, 0, 1, 3.9, 4.1, 9.9, 10.1, 30, 1e4], "special.erfcx"),
    "sinc": ([-2.5, -1, 0, 1e-4, 0.5, 3], "sinc"),
    "entr": ([-1, 0, 1e-3, 0.5, 2], "special.entr"),
}


def _torch_fn(path):
    obj = torch
    for p in path.split("."):
        obj = getattr(obj, p)
    return obj


def _cl_fn(path):
    obj = cltorch
    for p in path.split("."):
        obj = getattr(obj, p)
    return obj


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_unary_special_tails(name, dt, device):
    xs, path = UNARY[name]
    x = np.array(xs, dtype=dt)
    ref = _torch_fn(path)(torch.from_numpy(x))
    got = _cl_fn(path)(_cl(x, device, dt))
    tol = dict(rtol=2e-5, atol=1e-6) if dt == "float32" else dict(rtol=1e-9, atol=1e-12)
    if name in ("ndtri", "erfinv") and dt == "float32":
        tol = dict(rtol=1e-4, atol=1e-6)          # Giles' single-precision polynomial
    _close(got, ref, **tol)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_polygamma_and_zeta(n, device):
    x = np.array([-2.5, -0.5, 0.25, 1, 4.5, 30], dtype=np.float64)
    _close(cltorch.polygamma(n, _cl(x, device, np.float64)), torch.polygamma(n, torch.from_numpy(x)),
           rtol=1e-9, atol=1e-9)
    s = np.array([1.5, 2, 3, 0.5, 1], dtype=np.float64)
    q = np.array([0.5, 1, 2.5, 1, 1], dtype=np.float64)
    _close(cltorch.special.zeta(_cl(s, device, np.float64), _cl(q, device, np.float64)),
           torch.special.zeta(torch.from_numpy(s), torch.from_numpy(q)), rtol=1e-10)


def test_xlogy_logaddexp_edges(device):
    x = np.array([0, 0, 1, 2, -1, 0], dtype=np.float32)
    y = np.array([0, np.nan, 0, 3, np.inf, -1], dtype=np.float32)
    for name in ("xlogy", "special.xlog1py"):
        _close(_cl_fn(name)(_cl(x, device), _cl(y, device)), _torch_fn(name)(torch.from_numpy(x), torch.from_numpy(y)))
    a = np.array([-np.inf, np.inf, 1e30, -3, 0], dtype=np.float32)
    b = np.array([-np.inf, np.inf, 1e30, 100, 0], dtype=np.float32)
    for name in ("logaddexp", "logaddexp2"):
        _close(_cl_fn(name)(_cl(a, device), _cl(b, device)), _torch_fn(name)(torch.from_numpy(a), torch.from_numpy(b)))


@pytest.mark.parametrize("interp", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile_interpolation(interp, device):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 7)).astype(np.float32)
    x[1, 3] = np.nan
    q = np.array([0, 0.1, 0.5, 0.75, 1], dtype=np.float32)
    for fn in ("quantile", "nanquantile"):
        for dim, keep in ((1, False), (0, True), (None, False), (None, True)):
            ref = getattr(torch, fn)(torch.from_numpy(x), torch.from_numpy(q), dim=dim, keepdim=keep,
                                     interpolation=interp)
            got = getattr(cltorch, fn)(_cl(x, device), _cl(q, device), dim=dim, keepdim=keep, interpolation=interp)
            assert tuple(got.shape) == tuple(ref.shape)
            _close(got, ref)
    assert float(cltorch.quantile(_cl([1, 2, 3, 4], device), 0.5)) == 2.5
    with pytest.raises(RuntimeError):
        cltorch.quantile(_cl([1, 2], device), 1.5)


def test_searchsorted_bucketize(device):
    seq = np.array([1, 3, 3, 5, 7], dtype=np.float32)
    v = np.array([[0, 3, 4], [7, 8, 5]], dtype=np.float32)
    for kw in ({}, {"right": True}, {"side": "right"}, {"side": "left"}, {"out_int32": True}):
        ref = torch.searchsorted(torch.from_numpy(seq), torch.from_numpy(v), **kw)
        got = cltorch.searchsorted(_cl(seq, device), _cl(v, device), **kw)
        assert str(got.dtype).split(".")[1] == str(ref.dtype).split(".")[1]
        np.testing.assert_array_equal(got.cpu().numpy(), ref.numpy())
    seq2 = np.sort(np.random.default_rng(1).standard_normal((2, 6)).astype(np.float32), -1)
    v2 = np.random.default_rng(2).standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_array_equal(cltorch.searchsorted(_cl(seq2, device), _cl(v2, device)).cpu().numpy(),
                                  torch.searchsorted(torch.from_numpy(seq2), torch.from_numpy(v2)).numpy())
    np.testing.assert_array_equal(
        cltorch.bucketize(_cl(v, device), _cl(seq, device), right=True).cpu().numpy(),
        torch.bucketize(torch.from_numpy(v), torch.from_numpy(seq), right=True).numpy())
    with pytest.raises(RuntimeError):
        cltorch.searchsorted(_cl(seq, device), _cl(v, device), right=True, side="left")


def test_bincount_histc(device):
    x = np.array([0, 2, 2, 5, 1], dtype=np.int64)
    w = np.array([0.5, 1, 2, -1, 3], dtype=np.float32)
    for kw in ({}, {"minlength": 9}):
        ref = torch.bincount(torch.from_numpy(x), **kw)
        got = cltorch.bincount(cltorch.from_numpy(x).to(device), **kw)
        np.testing.assert_array_equal(got.cpu().numpy(), ref.numpy())
        assert got.dtype == cltorch.int64
    ref = torch.bincount(torch.from_numpy(x), weights=torch.from_numpy(w), minlength=7)
    got = cltorch.bincount(cltorch.from_numpy(x).to(device), weights=_cl(w, device), minlength=7)
    assert got.dtype == cltorch.float32
    _close(got, ref)
    with pytest.raises(RuntimeError):
        cltorch.bincount(cltorch.from_numpy(np.array([-1, 2])).to(device))
    y = np.array([0.0, 0.5, 1.0, 2.5, 3.0, -1.0, 7.0], dtype=np.float32)
    for kw in ({"bins": 4}, {"bins": 3, "min": 0, "max": 3}, {"bins": 5, "min": 1, "max": 2}):
        _close(cltorch.histc(_cl(y, device), **kw), torch.histc(torch.from_numpy(y), **kw))


def test_compare_and_shapes(device):
    a = _cl([1.0, np.nan, np.inf, 2.0], device)
    b = _cl([1.0 + 1e-6, np.nan, np.inf, 2.1], device)
    ta, tb = torch.tensor([1.0, np.nan, np.inf, 2.0]), torch.tensor([1.0 + 1e-6, np.nan, np.inf, 2.1])
    for kw in ({}, {"equal_nan": True}, {"rtol": 0.1}):
        np.testing.assert_array_equal(cltorch.isclose(a, b, **kw).cpu().numpy(), torch.isclose(ta, tb, **kw).numpy())
        assert cltorch.allclose(a, b, **kw) == torch.allclose(ta, tb, **kw)
    assert cltorch.equal(a[:1], b[:1].clone() * 0 + 1.0) and not cltorch.equal(a, a)
    np.testing.assert_array_equal(cltorch.isin(_cl([1, 2, 3, 4], device), _cl([2, 4], device), invert=True)
                                  .cpu().numpy(), [True, False, True, False])
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for fn, args in (("rot90", (3, [1, 2])), ("tensor_split", ([1, 5], 2)), ("diag_embed", (1, 0, 2)),
                     ("diff", (2, 1)), ("kron", (torch.ones(2, 1),))):
        targs = args
        cargs = tuple(cltorch.ones(2, 1).to(device) if isinstance(v, torch.Tensor) else v for v in args)
        ref = getattr(torch, fn)(torch.from_numpy(x), *targs)
        got = getattr(cltorch, fn)(_cl(x, device), *cargs)
        for r, g in zip(ref if isinstance(ref, tuple) else [ref], got if isinstance(got, tuple) else [got]):
            _close(g, r)


def test_cdist_pdist_zero_distance_gradient(device):
    x = np.array([[0.0, 1.0], [0.0, 1.0], [2.0, -1.0]], dtype=np.float64)
    tx = torch.from_numpy(x).requires_grad_(True)
    cx = _cl(x, device, np.float64).requires_grad_(True)
    for p in (1.0, 2.0, 3.0, math.inf):
        tg, = torch.autograd.grad(torch.cdist(tx, tx, p=p).sum() + torch.pdist(tx, p=p).sum(), [tx])
        cg, = cltorch.autograd.grad(cltorch.cdist(cx, cx, p=p).sum() + cltorch.pdist(cx, p=p).sum(), [cx])
        _close(cg, tg, rtol=1e-9, atol=1e-12)


GRAD_CASES = [
    ("digamma", lambda t: t.digamma(), [0.7, 2.3, 5.0, -0.4]),
    ("lgamma", lambda t: t.lgamma(), [0.7, 2.3, -1.5]),
    ("polygamma2", lambda t: cltorch.polygamma(2, t), [0.7, 2.3, 5.0]),
    ("erfinv", lambda t: t.erfinv(), [-0.9, 0.1, 0.6]),
    ("i0", lambda t: t.i0(), [-3.0, 0.5, 25.0]),
    ("i1", lambda t: cltorch.special.i1(t), [-3.0, 0.5, 25.0]),
    ("i0e", lambda t: cltorch.special.i0e(t), [-3.0, 0.5, 25.0]),
    ("i1e", lambda t: cltorch.special.i1e(t), [-3.0, 0.5, 25.0]),
    ("ndtri", lambda t: cltorch.special.ndtri(t), [0.01, 0.4, 0.95]),
    ("log_ndtr", lambda t: cltorch.special.log_ndtr(t), [-5.0, -0.5, 2.0]),
    ("erfcx", lambda t: cltorch.special.erfcx(t), [-1.0, 0.5, 5.0, 12.0]),
    ("sinc", lambda t: t.sinc(), [-1.3, 0.2, 2.5]),
    ("entr", lambda t: cltorch.special.entr(t), [0.2, 1.5]),
    ("logit", lambda t: t.logit(), [0.2, 0.7]),
    ("logcumsumexp", lambda t: cltorch.logcumsumexp(t, 0), [0.2, -1.0, 3.0]),
]


@pytest.mark.parametrize("name,fn,xs", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_gradcheck_unary(name, fn, xs, device):
    x = _cl(xs, device, np.float64).requires_grad_(True)
    assert gradcheck(fn, (x,), eps=1e-6, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("name", ["xlogy", "special.xlog1py", "logaddexp", "logaddexp2"])
def test_gradcheck_binary(name, device):
    a = _cl([0.3, -1.2, 2.0], device, np.float64).requires_grad_(True)
    b = _cl([0.5, 1.7, 3.0], device, np.float64).requires_grad_(True)
    assert gradcheck(_cl_fn(name), (a, b), eps=1e-6, atol=1e-6, rtol=1e-4)


def test_igamma_and_polynomials(device):
    a = np.array([0.5, 1, 3, 10, 40, 0, 2], dtype=np.float64)
    x = np.array([0.1, 2, 3, 12, 35, 1, 0], dtype=np.float64)
    for name in ("igamma", "igammac"):
        _close(_cl_fn(name)(_cl(a, device, np.float64), _cl(x, device, np.float64)),
               _torch_fn(name)(torch.from_numpy(a), torch.from_numpy(x)), rtol=1e-9, atol=1e-12)
    xs = np.array([-1, -0.7, 0, 0.3, 1, 1.5], dtype=np.float64)
    ns = np.array([0, 1, 2, 5, 9, 12], dtype=np.float64)
    for name in ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_w",
                 "shifted_chebyshev_polynomial_v", "hermite_polynomial_h", "hermite_polynomial_he",
                 "laguerre_polynomial_l", "legendre_polynomial_p"):
        ref = getattr(torch.special, name)(torch.from_numpy(xs), torch.from_numpy(ns))
        got = getattr(cltorch.special, name)(_cl(xs, device, np.float64), _cl(ns, device, np.float64))
        _close(got, ref, rtol=1e-9, atol=1e-9)


def test_shifts_and_frexp_and_mode(device):
    a = cltorch.tensor([-5, 3, 7, 1], dtype=cltorch.int32).to(device)
    b = cltorch.tensor([1, 2, 40, 0], dtype=cltorch.int32).to(device)
    assert (a << b).tolist() == [-10, 12, 0, 1] and (a >> b).tolist() == [-3, 0, 0, 1]
    x = np.array([0.0, -3.5, 1e-40, 8, np.inf], dtype=np.float32)
    m, e = cltorch.frexp(_cl(x, device))
    tm, te = torch.frexp(torch.from_numpy(x))
    _close(m, tm)
    assert e.dtype == cltorch.int32 and e.tolist() == te.tolist()
    y = np.array([[1, 2, 2, 1, 3], [5, 5, 4, 4, 4]], dtype=np.float32)
    v, i = cltorch.mode(_cl(y, device), 1)
    tv, ti = torch.mode(torch.from_numpy(y), 1)
    assert v.tolist() == tv.tolist() and i.tolist() == ti.tolist()
