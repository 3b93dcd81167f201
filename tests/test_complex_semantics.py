"""complex64 semantics that used to be silently wrong or crash with a kernel build error: isclose/allclose with the
complex modulus, vdot/vecdot conjugation, mH/H/adjoint, complex -> bool, cumsum and nonzero on complex input
(values against torch), and clear NotImplementedError for what cltorch does not support for complex."""
import warnings

import numpy as np
import pytest
import torch

import cltorch
from conftest import DEVICES

NAN, INF = float("nan"), float("inf")


def _pair(vals, device):
    a = np.asarray(vals, dtype=np.complex64)
    return cltorch.tensor(a, device=device), torch.tensor(a)


def _rand(shape, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("equal_nan", [False, True])
def test_isclose_uses_imaginary_part(device, equal_nan):
    av = [1 + 2j, 3 - 1j, NAN, 0j, 1j, complex(INF, 1), complex(0, NAN), 2 + 0j, complex(NAN, 1)]
    bv = [1 + 2.00001j, 3 - 1.5j, complex(0, NAN), 0j, 1.0000001j, complex(INF, 1), complex(0, NAN), 2 + 1e-3j, 1j]
    a, ta = _pair(av, device)
    b, tb = _pair(bv, device)
    got = cltorch.isclose(a, b, equal_nan=equal_nan).cpu().numpy()
    want = torch.isclose(ta, tb, equal_nan=equal_nan).numpy()
    np.testing.assert_array_equal(got, want)
    assert not want[1]          # the case the real-part-only comparison got wrong
    for rtol, atol in ((1e-3, 0.0), (0.0, 1e-3), (0.0, 0.0)):
        np.testing.assert_array_equal(cltorch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan).cpu().numpy(),
                                      torch.isclose(ta, tb, rtol=rtol, atol=atol, equal_nan=equal_nan).numpy())
    x, tx = _pair([1 + 1j, 2 - 2j], device)
    y, ty = _pair([1 + 1j, 2 - 2.5j], device)
    assert cltorch.allclose(x, y) is torch.allclose(tx, ty) is False
    assert cltorch.allclose(x, x) is torch.allclose(tx, tx) is True


@pytest.mark.parametrize("device", DEVICES)
def test_vdot_and_vecdot_conjugate_first(device):
    a, ta = _pair(_rand((5,), 1), device)
    b, tb = _pair(_rand((5,), 2), device)
    np.testing.assert_allclose(cltorch.vdot(a, b).cpu().numpy(), torch.vdot(ta, tb).numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(cltorch.dot(a, b).cpu().numpy(), torch.dot(ta, tb).numpy(), rtol=1e-5, atol=1e-5)
    x, tx = _pair(_rand((3, 4), 3), device)
    y, ty = _pair(_rand((3, 4), 4), device)
    for dim in (-1, 0):
        np.testing.assert_allclose(cltorch.linalg.vecdot(x, y, dim=dim).cpu().numpy(),
                                   torch.linalg.vecdot(tx, ty, dim=dim).numpy(), rtol=1e-5, atol=1e-5)
    r = cltorch.tensor([1.0, 2.0, 3.0], device=device)
    assert cltorch.vdot(r, r).item() == 14.0


@pytest.mark.parametrize("device", DEVICES)
def test_conjugate_transposes(device):
    z, tz = _pair(_rand((2, 3, 4), 5), device)
    np.testing.assert_array_equal(z.mH.cpu().numpy(), tz.mH.resolve_conj().numpy())
    np.testing.assert_array_equal(z.adjoint().cpu().numpy(), tz.adjoint().resolve_conj().numpy())
    np.testing.assert_array_equal(cltorch.adjoint(z).cpu().numpy(), torch.adjoint(tz).resolve_conj().numpy())
    m, tm = _pair(_rand((3, 4), 6), device)
    np.testing.assert_array_equal(m.H.cpu().numpy(), tm.H.resolve_conj().numpy())
    r = cltorch.tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device=device)
    for v in (r.mH, r.H, r.adjoint()):       # real: the plain transpose, still a view
        assert v.data_ptr() == r.data_ptr() and v.shape == (4, 3)
        np.testing.assert_array_equal(v.cpu().numpy(), r.cpu().numpy().T)


@pytest.mark.parametrize("device", DEVICES)
def test_complex_to_bool_uses_both_parts(device):
    vals = [0j, 1j, 1 + 0j, complex(0, NAN), -2 - 3j, complex(0, -0.0)]
    z, tz = _pair(vals, device)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*imaginary part")   # no such warning for bool
        got = z.to(cltorch.bool).cpu().numpy()
        got2 = z.bool().cpu().numpy()
    want = tz.to(torch.bool).numpy()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got2, want)
    with pytest.warns(UserWarning):             # a real target still warns, as PyTorch does
        z.to(cltorch.float32)


@pytest.mark.parametrize("device", DEVICES)
def test_cumsum_and_nonzero(device):
    z, tz = _pair(_rand((3, 4), 7), device)
    for dim in (0, 1, -1):
        np.testing.assert_allclose(z.cumsum(dim).cpu().numpy(), tz.cumsum(dim).numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(cltorch.cumsum(z, 0).cpu().numpy(), torch.cumsum(tz, 0).numpy(), rtol=1e-5, atol=1e-5)
    s, ts = _pair(_rand((), 8), device)
    np.testing.assert_array_equal(s.cumsum(0).cpu().numpy(), ts.cumsum(0).numpy())
    r = cltorch.tensor([1.0, 2.0], device=device)
    np.testing.assert_array_equal(r.cumsum(0, dtype=cltorch.complex64).cpu().numpy(),
                                  torch.tensor([1.0, 2.0]).cumsum(0, dtype=torch.complex64).numpy())
    n, tn = _pair([[0j, 1j, 0j], [2 + 0j, 0j, 3 - 1j]], device)
    np.testing.assert_array_equal(n.nonzero().cpu().numpy(), tn.nonzero().numpy())
    for g, w in zip(cltorch.nonzero(n, as_tuple=True), torch.nonzero(tn, as_tuple=True)):
        np.testing.assert_array_equal(g.cpu().numpy(), w.numpy())


_UNSUPPORTED = {
    "cumprod": lambda z: z.cumprod(0), "cummax": lambda z: z.cummax(0), "cummin": lambda z: z.cummin(0),
    "sort": lambda z: z.sort(), "argsort": lambda z: z.argsort(), "msort": lambda z: cltorch.msort(z),
    "topk": lambda z: z.topk(1), "kthvalue": lambda z: z.kthvalue(1), "median": lambda z: z.median(),
    "unique": lambda z: cltorch.unique(z), "max": lambda z: z.max(), "min": lambda z: z.min(),
    "amax": lambda z: z.amax(), "amin": lambda z: z.amin(),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", sorted(_UNSUPPORTED))
def test_unsupported_ops_name_op_and_dtype(device, op):
    z = cltorch.tensor(_rand((4,), 9), device=device)
    with pytest.raises(NotImplementedError, match=f"{op}: complex64 is not supported"):
        _UNSUPPORTED[op](z)


@pytest.mark.parametrize("op", ["max", "min", "sort"])
def test_unsupported_is_a_runtime_error_as_in_torch(op):
    with pytest.raises(RuntimeError):           # torch raises RuntimeError; NotImplementedError is one
        getattr(torch.tensor([1j, 2 + 0j]), op)()
    with pytest.raises(RuntimeError):
        getattr(cltorch.tensor([1j, 2 + 0j]), op)()


@pytest.mark.parametrize("device", DEVICES)
def test_linalg_and_stats_say_complex_unsupported(device):
    z = cltorch.tensor(_rand((3,), 10), device=device)
    A = cltorch.eye(3, dtype=cltorch.complex64, device=device)
    with pytest.raises(NotImplementedError, match="complex64 inputs are not supported by cltorch.linalg.solve yet"):
        cltorch.linalg.solve(A, z)
    for f in (cltorch.linalg.vector_norm, cltorch.linalg.norm):
        with pytest.raises(NotImplementedError,
                           match="complex64 inputs are not supported by cltorch.linalg.vector_norm yet"):
            f(z)
    for f in (cltorch.std, cltorch.var):
        with pytest.raises(NotImplementedError, match="complex64 is not supported"):
            f(z)
    with pytest.raises(TypeError):
        cltorch.iinfo(cltorch.complex64)
