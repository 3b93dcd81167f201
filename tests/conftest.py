"""Shared test setup: the device list, a Hypothesis CI profile, helpers to compare with numpy."""
import os

import numpy as np
import pytest

try:
    from hypothesis import settings
    settings.register_profile("ci", deadline=None, derandomize=True, max_examples=25, print_blob=True)
    settings.register_profile("dev", deadline=None, max_examples=50)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
except ImportError:  # pragma: no cover
    pass

import cltorch



def _test_devices():
    """The devices that device-parametrized tests run on: 'cpu' and the default OpenCL device, cl:0 (README's
    vendor matrix runs the suite once per runtime by putting its platform first, CLTORCH_PLATFORM).
    CLTORCH_TEST_DEVICES=all adds every other device except simulators (Oclgrind, which
    tests/test_kernel_configs.py covers at small shapes); a comma-separated list (``cl:0,cl:2``) names them."""
    from cltorch.backend.devices import list_devices
    infos = list_devices()
    want = os.environ.get("CLTORCH_TEST_DEVICES", "").strip()
    if want == "all":
        return ["cpu"] + [f"cl:{i.index}" for i in infos if "oclgrind" not in i.platform.lower()]
    if want:
        return [d.strip() for d in want.split(",") if d.strip()]
    return ["cpu"] + (["cl:0"] if infos else [])


DEVICES = _test_devices()


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(autouse=True)
def _report_deferred_device_errors():
    """A device-side error (a bounds flag) surfaces at the next synchronization: synchronize after each test, so
    an unreported one fails the test that caused it and not a later one."""
    yield
    cltorch.cl.synchronize()


def to_np(t):
    """A tensor's values as a numpy array (any device)."""
    return np.asarray(t.detach().cpu().numpy())


def assert_close(t, ref, rtol=1e-5, atol=1e-6):
    got = to_np(t) if isinstance(t, cltorch.Tensor) else np.asarray(t)
    ref = np.asarray(ref)
    assert got.shape == ref.shape, f"shape {got.shape} != {ref.shape}"
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol, equal_nan=True)
