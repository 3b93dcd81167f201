"""torch.special's Bessel J0/J1/Y0/Y1, modified Bessel K0/K1 (plain and scaled) and Airy Ai (cl_kernels/
special_math.cl.mako): float32 against torch (the oracle) at OpInfo's tolerance, float64 against scipy's
double-precision values, and the special values (0, +-inf, NaN, negative arguments) as torch's."""
import numpy as np
import pytest

import cltorch
from conftest import DEVICES

torch = pytest.importorskip("torch", reason="torch is the test-only oracle: pip install torch==2.13.0")

NAMES = ["bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_k0", "modified_bessel_k1",
         "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "airy_ai"]
# every branch: the small-x series, Miller's recurrence, Hankel's expansion, Airy's Taylor steps and asymptotics
X = np.concatenate([np.linspace(-25, 25, 401), np.geomspace(1e-7, 80, 60), -np.geomspace(1e-7, 80, 30),
                    [0.999, 1.0, 1.001, 7.999, 8.0, 8.001, 19.99, 20.01, -7.999, -8.001, -11.99, -12.01]])


def _scipy(name):
    sp = pytest.importorskip("scipy.special")
    return {"bessel_j0": sp.j0, "bessel_j1": sp.j1, "bessel_y0": sp.y0, "bessel_y1": sp.y1,
            "modified_bessel_k0": sp.k0, "modified_bessel_k1": sp.k1, "scaled_modified_bessel_k0": sp.k0e,
            "scaled_modified_bessel_k1": sp.k1e, "airy_ai": lambda v: sp.airy(v)[0]}[name]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", NAMES)
def test_float32_against_torch(name, device):
    x = X.astype(np.float32)
    ref = getattr(torch.special, name)(torch.from_numpy(x)).numpy()
    got = np.asarray(getattr(cltorch.special, name)(cltorch.tensor(x, device=device)).cpu().numpy())
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("name", NAMES)
def test_float64_against_scipy(name):
    x = X.astype(np.float64)
    ref = _scipy(name)(x)
    got = np.asarray(getattr(cltorch.special, name)(cltorch.tensor(x)).numpy())
    assert got.dtype == np.float64
    fin = np.isfinite(ref)
    np.testing.assert_allclose(got[fin], ref[fin], rtol=1e-9, atol=1e-13)


@pytest.mark.parametrize("name", NAMES)
def test_special_values_as_torch(name):
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.5, 1e-30, 1e4], dtype=np.float32)
    ref = getattr(torch.special, name)(torch.from_numpy(x)).numpy()
    got = np.asarray(getattr(cltorch.special, name)(cltorch.tensor(x)).numpy())
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5, equal_nan=True)
    with np.errstate(all="ignore"):
        i = cltorch.arange(-3, 4)                        # integers compute in the default float dtype
        r = getattr(torch.special, name)(torch.arange(-3, 4))
    same = getattr(cltorch.special, name)(i)
    assert same.dtype == cltorch.float32
    np.testing.assert_allclose(np.asarray(same.numpy()), r.numpy(), rtol=1e-4, atol=1e-5, equal_nan=True)
