"""The Tensor methods (and their top-level functions) that cltorch lacked against PyTorch 2.13: values against
torch (float32, and int64 where meaningful), in-place semantics (self returned, version counter, dtype rules),
autograd (leaf error, gradcheck on a non-leaf), in-place metadata ops, set_, host callables, and the clear
NotImplementedError for sparse / quantized / other-device methods."""
import numpy as np
import pytest

import cltorch
from conftest import IS_PINNED_TORCH, assert_close, to_np

torch = pytest.importorskip("torch")

DEV = "cl"

BRIEF_INPLACE = ("absolute_ addbmm_ addmm_ addmv_ apply_ arccos_ arccosh_ arcsin_ arcsinh_ arctan_ arctanh_ "
                 "as_strided_ baddbmm_ clamp_max_ conj_physical_ divide_ fill_diagonal_ fix_ float_power_ greater_ "
                 "greater_equal_ heaviside_ hypot_ less_ less_equal_ logical_and_ logical_not_ logical_or_ "
                 "logical_xor_ map2_ map_ multiply_ mvlgamma_ nan_to_num_ negative_ nextafter_ not_equal_ set_ sgn_ "
                 "squeeze_ subtract_ swapaxes_ swapdims_ t_ transpose_ unsqueeze_ resize_as_sparse_ sparse_resize_ "
                 "sparse_resize_and_clear_").split()
BRIEF_OTHERS = ("absolute addbmm addmv arccos arccosh arcsin arcsinh arctan arctanh fix float_power ger hardshrink "
                "histogram is_neg is_nonzero is_same_size is_signed narrow_copy new prelu resize resize_as "
                "as_subclass dim_order output_nr is_set_to const_data_ptr storage untyped_storage record_stream "
                "module_load to_sparse to_sparse_csr indices values q_scale int_repr dequantize to_mkldnn xpu ipu "
                "mtia").split()


def ours(a, dtype=None):
    return cltorch.tensor(np.asarray(a), dtype=dtype, device=DEV)


def theirs(a, dtype=None):
    return torch.tensor(np.asarray(a), dtype=dtype)


def rnd(*shape, lo=-0.9, hi=0.9, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)


NEWER = {"const_data_ptr"}       # Tensor methods new in the pinned torch (2.13)


@pytest.mark.parametrize("name", BRIEF_INPLACE + BRIEF_OTHERS)
def test_name_exists(name):
    assert hasattr(torch.Tensor, name) or (not IS_PINNED_TORCH and name in NEWER), name
    assert hasattr(cltorch.Tensor, name), name


@pytest.mark.parametrize("name", ["absolute", "addmv_", "arccos_", "arccosh", "arccosh_", "arcsinh", "arcsinh_",
                                  "arctanh", "arctanh_", "arctan_", "arcsin_", "as_strided_", "clamp_max_",
                                  "conj_physical_", "fix_", "nan_to_num_", "negative_", "hardshrink", "prelu",
                                  "is_neg", "is_same_size", "is_signed", "addbmm", "addmv", "fix", "float_power",
                                  "ger", "is_nonzero", "dequantize", "int_repr"])
def test_top_level_exists(name):
    assert hasattr(torch, name)
    assert callable(getattr(cltorch, name)), name


# ----------------------------------------------------------------------------- unary/binary aliases, in place
UNARY = [  # (name, low, high) of the input range
    ("absolute", -2, 2), ("arccos", -0.9, 0.9), ("arcsin", -0.9, 0.9), ("arctan", -3, 3), ("arccosh", 1.1, 3),
    ("arcsinh", -3, 3), ("arctanh", -0.9, 0.9), ("fix", -3, 3), ("negative", -2, 2), ("sgn", -2, 2),
    ("logical_not", -1, 1), ("nan_to_num", -2, 2)]


@pytest.mark.parametrize("name,lo,hi", UNARY)
def test_unary_inplace_values(name, lo, hi):
    x = rnd(3, 4, lo=lo, hi=hi)
    x[0, 0] = 0.0
    a, ta = ours(x), theirs(x)
    v = a._version
    r = getattr(a, name + "_")()
    getattr(ta, name + "_")()
    assert r is a and a._version > v and a.dtype is cltorch.float32
    assert_close(a, ta.numpy(), rtol=1e-5, atol=1e-6)
    if hasattr(cltorch.Tensor, name) and name not in ("negative", "sgn", "logical_not", "nan_to_num"):
        assert_close(getattr(ours(x), name)(), getattr(theirs(x), name)().numpy(), rtol=1e-5, atol=1e-6)


def test_nan_to_num_inplace_args():
    x = np.array([np.nan, np.inf, -np.inf, 1.5], np.float32)
    a, ta = ours(x), theirs(x)
    a.nan_to_num_(nan=2.0, posinf=9.0, neginf=-7.0)
    ta.nan_to_num_(nan=2.0, posinf=9.0, neginf=-7.0)
    assert_close(a, ta.numpy())


@pytest.mark.parametrize("name", ["absolute", "negative", "fix", "sgn", "logical_not"])
def test_unary_inplace_int(name):
    x = np.array([[-3, 0, 2], [5, -1, 7]], np.int64)
    a, ta = ours(x), theirs(x)
    getattr(a, name + "_")()
    getattr(ta, name + "_")()
    assert a.dtype is cltorch.int64
    np.testing.assert_array_equal(to_np(a), ta.numpy())


BINARY = ["divide", "multiply", "subtract", "greater", "greater_equal", "less", "less_equal", "not_equal",
          "logical_and", "logical_or", "logical_xor", "hypot", "heaviside", "nextafter", "clamp_max"]


@pytest.mark.parametrize("name", BINARY)
def test_binary_inplace_values(name):
    x, y = rnd(3, 4, seed=1), rnd(4, seed=2)
    x[0, :2] = 0.0
    y[1] = 0.0
    a, ta = ours(x), theirs(x)
    r = getattr(a, name + "_")(ours(y))
    getattr(ta, name + "_")(theirs(y))
    assert r is a and a.dtype is cltorch.float32
    assert_close(a, ta.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["multiply", "subtract", "greater", "less_equal", "not_equal", "logical_and",
                                  "logical_xor"])
def test_binary_inplace_int(name):
    x, y = np.array([[3, 0, -2], [1, 1, 0]], np.int64), np.array([1, 0, -2], np.int64)
    a, ta = ours(x), theirs(x)
    getattr(a, name + "_")(ours(y))
    getattr(ta, name + "_")(theirs(y))
    assert a.dtype is cltorch.int64
    np.testing.assert_array_equal(to_np(a), ta.numpy())


def test_divide_rounding_and_subtract_alpha():
    x, y = rnd(5, seed=3) * 5, rnd(5, seed=4) + 2
    for kw in ({}, {"rounding_mode": "floor"}, {"rounding_mode": "trunc"}):
        a, ta = ours(x), theirs(x)
        a.divide_(ours(y), **kw)
        ta.divide_(theirs(y), **kw)
        assert_close(a, ta.numpy(), rtol=1e-5, atol=1e-6)
    a, ta = ours(x), theirs(x)
    a.subtract_(ours(y), alpha=2.5)
    ta.subtract_(theirs(y), alpha=2.5)
    assert_close(a, ta.numpy(), rtol=1e-5, atol=1e-6)


def test_inplace_dtype_errors_like_torch():
    cases = [lambda m, t: t([1, 2, 3]).divide_(2),
             lambda m, t: t([1, 2, 3]).float_power_(2),
             lambda m, t: t([1.0, 2.0]).float_power_(2),
             lambda m, t: t([1.0, 2.0]).float_power_(t([1.0, 2.0]).double()),
             lambda m, t: t([1, 2]).hypot_(t([0.5, 0.5])),
             lambda m, t: t([True, False]).multiply_(t([2, 3])),
             lambda m, t: t([1, 2]).arccos_(),
             lambda m, t: t([[1.0, 2.0]]).multiply_(t([[1.0], [2.0]]))]
    for c in cases:
        with pytest.raises(RuntimeError):
            c(torch, lambda v: torch.tensor(v))
        with pytest.raises(RuntimeError):
            c(cltorch, lambda v: cltorch.tensor(v, device=DEV))


def test_float_power():
    x, e = np.abs(rnd(4, seed=5)) + 0.5, rnd(4, seed=6)
    r, tr = ours(x).float_power(ours(e)), theirs(x).float_power(theirs(e))
    assert r.dtype is cltorch.float64
    assert_close(r, tr.numpy(), rtol=1e-12, atol=1e-12)
    a, ta = ours(x, cltorch.float64), theirs(x, torch.float64)
    a.float_power_(2.5)
    ta.float_power_(2.5)
    assert a.dtype is cltorch.float64
    assert_close(a, ta.numpy(), rtol=1e-12, atol=1e-12)
    assert_close(ours([1, 2, 3]).float_power(2), torch.tensor([1, 2, 3]).float_power(2).numpy())


def test_mvlgamma_inplace():
    x = rnd(6, lo=1.5, hi=4, seed=7)
    a, ta = ours(x), theirs(x)
    a.mvlgamma_(3)
    ta.mvlgamma_(3)
    assert_close(a, ta.numpy(), rtol=1e-5, atol=1e-5)


def test_conj_physical_inplace():
    a = ours(rnd(3))
    assert a.conj_physical_() is a
    z = np.array([1 + 2j, -3 - 1j], np.complex64)
    c = cltorch.tensor(z, device=DEV)
    c.conj_physical_()
    np.testing.assert_allclose(to_np(c), np.conj(z))


# ----------------------------------------------------------------------------- matrix forms
def _mats():
    return dict(inp=rnd(3, 5, seed=10), m1=rnd(3, 4, seed=11), m2=rnd(4, 5, seed=12), v_in=rnd(3, seed=13),
                vec=rnd(4, seed=14), b1=rnd(2, 3, 4, seed=15), b2=rnd(2, 4, 5, seed=16), bin=rnd(2, 3, 5, seed=17))


MATRIX = [("addmm_", ("inp", "m1", "m2")), ("addmv_", ("v_in", "m1", "vec")), ("addbmm_", ("inp", "b1", "b2")),
          ("baddbmm_", ("bin", "b1", "b2"))]


@pytest.mark.parametrize("name,keys", MATRIX)
@pytest.mark.parametrize("kw", [{}, {"beta": 0.5, "alpha": 2.0}])
def test_matrix_inplace(name, keys, kw):
    m = _mats()
    a = ours(m[keys[0]])
    ta = theirs(m[keys[0]])
    r = getattr(a, name)(*[ours(m[k]) for k in keys[1:]], **kw)
    getattr(ta, name)(*[theirs(m[k]) for k in keys[1:]], **kw)
    assert r is a
    assert_close(a, ta.numpy(), rtol=1e-5, atol=1e-5)
    if name in ("addmv_", "addbmm_"):
        out = getattr(ours(m[keys[0]]), name[:-1])(*[ours(m[k]) for k in keys[1:]], **kw)
        assert_close(out, ta.numpy(), rtol=1e-5, atol=1e-5)


def test_matrix_inplace_shape_error():
    m = _mats()
    for mod, mk in ((torch, theirs), (cltorch, ours)):
        with pytest.raises(RuntimeError):
            mk(m["v_in"][:2]).addmv_(mk(m["m1"]), mk(m["vec"]))


def test_ger():
    x, y = rnd(3, seed=20), rnd(4, seed=21)
    assert_close(ours(x).ger(ours(y)), theirs(x).ger(theirs(y)).numpy())
    assert_close(cltorch.ger(ours(x), ours(y)), torch.ger(theirs(x), theirs(y)).numpy())


# ----------------------------------------------------------------------------- autograd
GRAD_CASES = [  # (name, args builder over (module, make) -> args, input range)
    ("absolute_", lambda mk: (), (-2, 2)), ("arccos_", lambda mk: (), (-0.6, 0.6)),
    ("arcsinh_", lambda mk: (), (-2, 2)), ("arctanh_", lambda mk: (), (-0.6, 0.6)),
    ("arccosh_", lambda mk: (), (1.2, 3)), ("fix_", lambda mk: (), (-2, 2)),
    ("negative_", lambda mk: (), (-2, 2)), ("sgn_", lambda mk: (), (-2, 2)),
    ("nan_to_num_", lambda mk: (), (-2, 2)),
    ("multiply_", lambda mk: (mk(rnd(3, 4, seed=30)),), (-1, 1)),
    ("divide_", lambda mk: (mk(rnd(3, 4, lo=1, hi=2, seed=31)),), (-1, 1)),
    ("subtract_", lambda mk: (mk(rnd(4, seed=32)),), (-1, 1)),
    ("hypot_", lambda mk: (mk(rnd(3, 4, lo=0.5, hi=1, seed=33)),), (0.5, 1)),
    ("clamp_max_", lambda mk: (0.1,), (-1, 1)),
    ("addmm_", lambda mk: (mk(rnd(3, 2, seed=34)), mk(rnd(2, 4, seed=35))), (-1, 1)),
    ("addbmm_", lambda mk: (mk(rnd(2, 3, 2, seed=36)), mk(rnd(2, 2, 4, seed=37))), (-1, 1)),
    ("fill_diagonal_", lambda mk: (0.5,), (-1, 1)),
    ("squeeze_", lambda mk: (), (-1, 1)), ("unsqueeze_", lambda mk: (1,), (-1, 1)), ("t_", lambda mk: (), (-1, 1)),
    ("transpose_", lambda mk: (0, 1), (-1, 1)), ("swapdims_", lambda mk: (1, 0), (-1, 1)),
    ("swapaxes_", lambda mk: (0, 1), (-1, 1)), ("as_strided_", lambda mk: ((2, 3), (1, 2), 1), (-1, 1))]


@pytest.mark.parametrize("name,args,rng", GRAD_CASES)
def test_inplace_autograd(name, args, rng):
    x = rnd(3, 4, lo=rng[0], hi=rng[1], seed=40)
    # leaf requiring grad: PyTorch's RuntimeError
    for mk in (theirs, ours):
        leaf = mk(x).requires_grad_(True)
        with pytest.raises(RuntimeError, match="leaf Variable"):
            getattr(leaf, name)(*args(mk))
    # non-leaf: values and gradient against torch, float64
    xd = x.astype(np.float64)
    ta = torch.tensor(xd, requires_grad=True)
    targs = args(lambda v: torch.tensor(v.astype(np.float64)))
    # torch 2.13 has no derivative for asinh_, acosh_, atanh_: its out-of-place form gives the reference there
    tname = name[:-1] if name in ("arcsinh_", "arccosh_", "arctanh_") else name
    tout = getattr(ta * 1.5, tname)(*targs)
    w = np.random.default_rng(41).standard_normal(tuple(tout.shape))
    (tout * torch.tensor(w)).sum().backward()
    a = cltorch.tensor(xd, device=DEV, requires_grad=True)
    y = a * 1.5
    out = getattr(y, name)(*args(lambda v: cltorch.tensor(v.astype(np.float64), device=DEV)))
    assert out is y and tuple(out.shape) == tuple(tout.shape)
    assert_close(out, tout.detach().numpy(), rtol=1e-10, atol=1e-10)
    (out * cltorch.tensor(w, device=DEV)).sum().backward()
    assert_close(a.grad, ta.grad.numpy(force=True), rtol=1e-10, atol=1e-10)
    if name not in ("fix_", "sgn_"):   # piecewise constant: a zero gradient, finite differences agree anyway
        ok = cltorch.autograd.gradcheck(
            lambda t: getattr(t * 1.5, name)(*args(lambda v: cltorch.tensor(v.astype(np.float64), device=DEV))),
            (cltorch.tensor(xd, device=DEV, requires_grad=True),), eps=1e-6, atol=1e-5)
        assert ok


def test_float_power_inplace_autograd():
    x = np.abs(rnd(5, seed=42)).astype(np.float64) + 0.5
    ok = cltorch.autograd.gradcheck(lambda t: (t * 1.0).float_power_(1.7),
                                    (cltorch.tensor(x, device=DEV, requires_grad=True),))
    assert ok


def test_inplace_under_no_grad_on_leaf():
    a = cltorch.tensor(rnd(2, 1, 3), device=DEV, requires_grad=True)
    with cltorch.no_grad():
        a.squeeze_(1)
        a.absolute_()
    assert tuple(a.shape) == (2, 3) and a.grad_fn is None
    assert_close(a, np.abs(rnd(2, 1, 3)).reshape(2, 3))


# ----------------------------------------------------------------------------- metadata in place
META = [("squeeze_", ()), ("squeeze_", (1,)), ("squeeze_", ((1, 3),)), ("unsqueeze_", (0,)), ("unsqueeze_", (-1,)),
        ("t_", None), ("transpose_", (0, 2)), ("swapdims_", (-1, 0)), ("swapaxes_", (1, 2)),
        ("as_strided_", ((2, 2), (2, 1), 1)), ("as_strided_", ((2, 2), (1, 2)))]


@pytest.mark.parametrize("name,args", META)
def test_metadata_inplace(name, args):
    x = rnd(3, 4) if name == "t_" else rnd(2, 1, 3, 1)
    args = () if args is None else args
    a, ta = ours(x), theirs(x)
    st = a.untyped_storage()
    v = a._version
    r = getattr(a, name)(*args)
    getattr(ta, name)(*args)
    assert r is a and a._version > v and a.untyped_storage() is st
    assert tuple(a.shape) == tuple(ta.shape) and a.stride() == ta.stride()
    assert a.storage_offset() == ta.storage_offset()
    assert_close(a, ta.numpy())


def test_metadata_inplace_errors():
    for mk in (theirs, ours):
        with pytest.raises(IndexError):
            mk(rnd(2, 3)).transpose_(0, 2)
        with pytest.raises(IndexError):
            mk(rnd(2, 3)).unsqueeze_(4)
        with pytest.raises(RuntimeError):
            mk(rnd(2, 3, 4)).t_()
        with pytest.raises(RuntimeError):
            mk(rnd(6)).as_strided_((2, 2), (1, 2), 10)


def test_metadata_inplace_on_view_writes_through():
    a = ours(np.arange(12, dtype=np.float32).reshape(3, 4))
    v = a[1:]
    v.t_()
    v[0].fill_(-1.0)   # column 0 of a's rows 1..2
    t = torch.arange(12.0).reshape(3, 4)
    tv = t[1:]
    tv.t_()
    tv[0].fill_(-1.0)
    assert_close(a, t.numpy())


def test_fill_diagonal():
    for shape, wrap in (((3, 4), False), ((4, 3), False), ((7, 3), False), ((7, 3), True), ((8, 2), True),
                        ((3, 3, 3), False), ((5, 4), True)):
        x = rnd(*shape, seed=50)
        a, ta = ours(x), theirs(x)
        assert a.fill_diagonal_(2.5, wrap=wrap) is a
        ta.fill_diagonal_(2.5, wrap=wrap)
        assert_close(a, ta.numpy())
    ai, ti = ours(np.zeros((3, 3), np.int64)), torch.zeros(3, 3, dtype=torch.int64)
    ai.fill_diagonal_(7)
    ti.fill_diagonal_(7)
    np.testing.assert_array_equal(to_np(ai), ti.numpy())
    for mk in (theirs, ours):
        with pytest.raises(RuntimeError):
            mk(rnd(3)).fill_diagonal_(1.0)
        with pytest.raises(RuntimeError):
            mk(rnd(3, 3, 4)).fill_diagonal_(1.0)


# ----------------------------------------------------------------------------- set_
def test_set_variants():
    src = ours(np.arange(6, dtype=np.float32))
    a = ours(rnd(3))
    assert a.set_(src) is a
    assert a.is_set_to(src) and src.is_set_to(a)
    a[0] = 10.0
    assert float(src[0]) == 10.0
    b = ours(rnd(3))
    b.set_(src.untyped_storage(), 1, (2, 2), (2, 1))
    tb = torch.ones(3).set_(torch.tensor([10.0, 1, 2, 3, 4, 5]).untyped_storage(), 1, (2, 2), (2, 1))
    assert_close(b, tb.numpy())
    c = ours(rnd(3)).set_()
    assert tuple(c.shape) == (0,)
    d = ours(rnd(2)).set_(src.untyped_storage())
    assert_close(d, to_np(src))
    with pytest.raises(RuntimeError):
        ours(rnd(3)).set_(ours([1, 2]))
    with pytest.raises(RuntimeError):
        torch.ones(3).set_(torch.tensor([1, 2]))
    with pytest.raises(RuntimeError):
        ours(rnd(3)).set_(src.untyped_storage(), 4, (3,), (1,))
    with pytest.raises(RuntimeError, match="leaf Variable"):
        cltorch.tensor(rnd(3), device=DEV, requires_grad=True).set_(src)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        torch.tensor(rnd(3), requires_grad=True).set_(torch.ones(3))


# ----------------------------------------------------------------------------- host callables
def test_apply_map_map2():
    x, y, z = rnd(2, 3, seed=60), rnd(3, seed=61), rnd(2, 1, seed=62)
    for f in (lambda v: v * v + 1.0, lambda v: 1.0 if v > 0 else -2.0):
        a, ta = ours(x), theirs(x)
        assert a.apply_(f) is a
        ta.apply_(f)
        assert_close(a, ta.numpy())
    a, ta = ours(x), theirs(x)
    a.map_(ours(y), lambda p, q: p * 2 - q)
    ta.map_(theirs(y), lambda p, q: p * 2 - q)
    assert_close(a, ta.numpy())
    a, ta = ours(x), theirs(x)
    a.map2_(ours(y), ours(z), lambda p, q, r: p + q * r)
    ta.map2_(theirs(y), theirs(z), lambda p, q, r: p + q * r)
    assert_close(a, ta.numpy())
    i, ti = ours(np.arange(5)), torch.arange(5)
    i.apply_(lambda v: v / 2)
    ti.apply_(lambda v: v / 2)
    assert i.dtype is cltorch.int64
    np.testing.assert_array_equal(to_np(i), ti.numpy())
    t_strided = ours(np.arange(6, dtype=np.float32).reshape(2, 3)).t()
    t_strided.apply_(lambda v: v + 100)
    assert_close(t_strided, np.arange(6, dtype=np.float32).reshape(2, 3).T + 100)


def test_apply_map_errors():
    for mk in (lambda v, **k: torch.tensor(v, **k), lambda v, **k: cltorch.tensor(v, device=DEV, **k)):
        with pytest.raises(RuntimeError, match="requires grad"):
            mk(rnd(3), requires_grad=True).apply_(lambda v: v)
        with pytest.raises(RuntimeError, match="requires grad"):
            (mk(rnd(3), requires_grad=True) * 1).map_(mk(rnd(3)), lambda p, q: p)
        with pytest.raises(RuntimeError):
            mk(rnd(3)).map_(mk(rnd(2)), lambda p, q: p)
        with pytest.raises(TypeError):
            mk(rnd(3)).apply_(lambda v: "x")


# ----------------------------------------------------------------------------- other dense methods
def test_hardshrink_prelu():
    x = rnd(2, 3, 4, lo=-1.5, hi=1.5, seed=70)
    x[0, 0, :2] = [0.5, -0.5]
    assert_close(ours(x).hardshrink(), theirs(x).hardshrink().numpy())
    assert_close(cltorch.hardshrink(ours(x), 0.8), torch.hardshrink(theirs(x), 0.8).numpy())
    w = np.array([0.25, -0.5, 2.0], np.float32)
    assert_close(ours(x).prelu(ours(w)), theirs(x).prelu(theirs(w)).numpy(), rtol=1e-6)
    w1 = np.float32([0.1])
    assert_close(cltorch.prelu(ours(x), ours(w1)), torch.prelu(theirs(x), theirs(w1)).numpy(), rtol=1e-6)
    for mk in (theirs, ours):
        with pytest.raises(RuntimeError):
            mk(x).prelu(mk(np.float32([0.1, 0.2])))
        with pytest.raises(RuntimeError):
            mk(x).prelu(mk([0.1]))      # float64 weight, float32 input
    xd = x.astype(np.float64)
    wd = cltorch.tensor(w.astype(np.float64), device=DEV, requires_grad=True)
    assert cltorch.autograd.gradcheck(lambda t, u: t.prelu(u),
                                      (cltorch.tensor(xd, device=DEV, requires_grad=True), wd))


def test_histogram_narrow_copy_resize():
    x = rnd(50, seed=71)
    h, e = ours(x).histogram(7, range=(-1.0, 1.0))
    th, te = theirs(x).histogram(7, range=(-1.0, 1.0))
    assert_close(h, th.numpy())
    assert_close(e, te.numpy())
    m = ours(rnd(4, 5, seed=72))
    n = m.narrow_copy(1, 1, 3)
    assert n.is_contiguous() and n.untyped_storage() is not m.untyped_storage()
    assert_close(n, theirs(to_np(m)).narrow_copy(1, 1, 3).numpy())
    with pytest.warns(UserWarning):
        r = m.resize(5, 4)
    assert_close(r, to_np(m).reshape(5, 4))
    with pytest.warns(UserWarning):
        r2 = m.resize_as(ours(np.zeros((2, 10))))
    assert tuple(r2.shape) == (2, 10)
    with pytest.raises(RuntimeError), pytest.warns(UserWarning):
        m.resize(3, 3)
    with pytest.raises(RuntimeError), pytest.warns(UserWarning):
        torch.ones(4, 5).resize(3, 3)


def test_new():
    a, ta = ours(rnd(2, 3)), theirs(rnd(2, 3))
    assert tuple(a.new().shape) == (0,) and a.new().dtype is cltorch.float32
    assert tuple(a.new(4, 2).shape) == tuple(ta.new(4, 2).shape)
    assert tuple(a.new(cltorch.Size([3, 1])).shape) == (3, 1)
    assert_close(a.new([2, 3]), ta.new([2, 3]).numpy())
    assert_close(a.new((1.5, 2)), ta.new((1.5, 2)).numpy())
    assert a.new([2, 3]).device == a.device
    assert ours([1, 2]).new([3.7]).dtype is cltorch.int64
    assert a.new(a) is a
    for t, mk in ((ta, theirs), (a, ours)):
        with pytest.raises(TypeError):
            t.new(2.5)
        with pytest.raises(TypeError):
            t.new(mk([1, 2]))


def test_predicates_and_metadata():
    a, ta = ours(rnd(2, 3)), theirs(rnd(2, 3))
    assert a.is_neg() is False and ta.is_neg() is False
    for dt, tdt in ((cltorch.float32, torch.float32), (cltorch.int64, torch.int64), (cltorch.uint8, torch.uint8),
                    (cltorch.bool, torch.bool)):
        assert cltorch.zeros(2, dtype=dt, device=DEV).is_signed() == torch.zeros(2, dtype=tdt).is_signed()
    assert cltorch.is_signed(a) and not cltorch.is_signed(ours([1], cltorch.uint8))
    assert a.is_same_size(ours(rnd(2, 3))) and not a.is_same_size(ours(rnd(3, 2)))
    assert cltorch.is_same_size(a, a)
    assert ours([2.0]).is_nonzero() and not ours([0.0]).is_nonzero()
    for mk in (theirs, ours):
        with pytest.raises(RuntimeError):
            mk(rnd(2)).is_nonzero()
        with pytest.raises(RuntimeError):
            mk(np.zeros(0, np.float32)).is_nonzero()
    for shape, perm in (((2, 3, 4), (0, 1, 2)), ((2, 3, 4), (2, 0, 1)), ((2, 1, 3), (0, 1, 2))):
        x = rnd(*shape)
        assert ours(x).permute(*perm).dim_order() == theirs(x).permute(*perm).dim_order()
    with pytest.raises(RuntimeError):
        ours(rnd(2, 1, 3)).dim_order(ambiguity_check=True)
    with pytest.raises(RuntimeError):
        ours(rnd(1, 3)).dim_order(ambiguity_check=True)
    assert ours(rnd(2, 3)).t().dim_order(ambiguity_check=True) == (1, 0)
    assert a.output_nr == 0
    m = rnd(3, 3, seed=73).astype(np.float64)
    parts = cltorch.linalg.svd(cltorch.tensor(m, device=DEV, requires_grad=True))
    tparts = torch.linalg.svd(torch.tensor(m, requires_grad=True))
    assert [p.output_nr for p in parts] == [p.output_nr for p in tparts] == [0, 1, 2]
    assert not a.is_set_to(ours(to_np(a))) and a.is_set_to(a) and not a.is_set_to(a.t())
    assert a.const_data_ptr() == a.data_ptr()
    v = ours(np.arange(6, dtype=np.float32))[2:]
    tv = torch.arange(6.0)[2:]
    st, tst = v.storage(), tv.storage()
    assert st.size() == len(st) == tst.size() == 6 and st.nbytes() == tst.nbytes() and st.dtype is cltorch.float32
    assert st.tolist() == tst.tolist() and st[3] == tst[3] and st.untyped() is v.untyped_storage()
    assert st.data_ptr() == v.data_ptr() - 2 * 4
    w = ours(rnd(2)).set_(st, 1, (2,), (2,))
    assert_close(w, torch.ones(2).set_(tst, 1, (2,), (2,)).numpy())
    assert a.record_stream(None) is None
    assert a.is_xla is False and a.is_distributed() is False


def test_as_subclass_and_module_load():
    class Sub(cltorch.Tensor):
        pass
    g = cltorch.tensor(rnd(3), device=DEV, requires_grad=True)
    s = (g * 2).as_subclass(Sub)
    assert type(s) is Sub and s.requires_grad
    s.sum().backward()
    assert_close(g.grad, np.full(3, 2.0, np.float32))
    with pytest.raises(TypeError):
        g.as_subclass(int)
    p = ours(np.zeros(3, np.float32))
    src = ours(rnd(3))
    r = p.module_load(src)
    assert r.untyped_storage() is p.untyped_storage()
    assert_close(p, to_np(src))
    r2 = p.module_load(src, assign=True)
    assert r2.untyped_storage() is src.untyped_storage() and not r2.requires_grad


UNSUPPORTED = [("to_sparse", "sparse"), ("to_sparse_csr", "sparse"), ("to_sparse_coo", "sparse"),
               ("indices", "sparse"), ("values", "sparse"), ("coalesce", "sparse"), ("crow_indices", "sparse"),
               ("sparse_resize_", "sparse"), ("sparse_resize_and_clear_", "sparse"), ("resize_as_sparse_", "sparse"),
               ("int_repr", "quantized"), ("q_scale", "quantized"), ("q_per_channel_axis", "quantized"),
               ("qscheme", "quantized"), ("to_mkldnn", "MKL-DNN"), ("xpu", "XPU"), ("ipu", "IPU"),
               ("mtia", "MTIA"), ("to_padded_tensor", "nested")]


@pytest.mark.parametrize("name,feature", UNSUPPORTED)
def test_unsupported_raise_clearly(name, feature):
    with pytest.raises(NotImplementedError, match=feature):
        getattr(ours(rnd(2, 2)), name)()


def test_dense_answers_for_layout_queries():
    a, ta = ours(rnd(2, 3)), theirs(rnd(2, 3))
    assert a.to_dense() is a
    assert a.sparse_dim() == ta.sparse_dim() and a.dense_dim() == ta.dense_dim()
    assert_close(a.dequantize(), to_np(a))
    with pytest.raises(NotImplementedError, match="quantized"):
        cltorch.int_repr(a)


def test_top_level_inplace_functions():
    x = rnd(3, 4, seed=80)
    a, ta = ours(x), theirs(x)
    assert cltorch.arcsin_(a) is a
    torch.arcsin_(ta)
    assert_close(a, ta.numpy(), rtol=1e-6)
    a, ta = ours(x), theirs(x)
    cltorch.clamp_max_(a, 0.2)
    torch.clamp_max_(ta, 0.2)
    assert_close(a, ta.numpy())
    v, tv = ours(rnd(3, seed=81)), theirs(rnd(3, seed=81))
    cltorch.addmv_(v, ours(x), ours(rnd(4, seed=82)), alpha=0.5)
    torch.addmv_(tv, theirs(x), theirs(rnd(4, seed=82)), alpha=0.5)
    assert_close(v, tv.numpy(), rtol=1e-5, atol=1e-6)
    b, tb = ours(np.arange(6, dtype=np.float32)), torch.arange(6.0)
    cltorch.as_strided_(b, (2, 2), (1, 2), 1)
    torch.as_strided_(tb, (2, 2), (1, 2), 1)
    assert_close(b, tb.numpy())
    for n in ("arccosh", "arcsinh", "arctanh"):
        y = rnd(5, lo=1.1, hi=2) if n == "arccosh" else rnd(5)
        assert_close(getattr(cltorch, n)(ours(y)), getattr(torch, n)(theirs(y)).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["gt_", "ge_", "lt_", "le_", "eq_", "ne_", "greater_", "less_equal_",
                                  "not_equal_"])
@pytest.mark.parametrize("dev", ["cpu", DEV])
def test_comparison_inplace_into_non_bool(name, dev):
    """The comparison kernel writes bool: in place into a float or int tensor the values are cast, not the
    bytes reinterpreted (on an OpenCL device the bytes were written raw before)."""
    x = np.array([[1.0, 2.0, 3.0], [0.0, 5.0, -1.0]], np.float32)
    for other in (2.0, np.array([2.0, 5.0, 0.0], np.float32)):
        for dt, tdt in ((cltorch.float32, torch.float32), (cltorch.int64, torch.int64)):
            a = cltorch.tensor(x, device=dev).to(dt)
            ta = torch.tensor(x).to(tdt)
            o = other if isinstance(other, float) else cltorch.tensor(other, device=dev).to(dt)
            to = other if isinstance(other, float) else torch.tensor(other).to(tdt)
            assert getattr(a, name)(o) is a
            getattr(ta, name)(to)
            assert a.dtype is dt
            np.testing.assert_array_equal(to_np(a), ta.numpy())


def test_inplace_on_view_of_non_leaf_autograd():
    x = rnd(3, 4, seed=90).astype(np.float64)
    w = np.random.default_rng(91).standard_normal((3, 4))
    grads = []
    for mod, mk in ((torch, lambda v, **k: torch.tensor(v, **k)),
                    (cltorch, lambda v, **k: cltorch.tensor(v, device=DEV, **k))):
        a = mk(x, requires_grad=True)
        y = a * 1.5
        y[1].multiply_(mk(x[0]))
        y[:, 2].arctan_()
        y.t()[0].clamp_max_(0.2)
        (y * mk(w)).sum().backward()
        grads.append((to_np(y) if mod is cltorch else y.detach().numpy(),
                      to_np(a.grad) if mod is cltorch else a.grad.numpy()))
    np.testing.assert_allclose(grads[1][0], grads[0][0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grads[1][1], grads[0][1], rtol=1e-12, atol=1e-12)
