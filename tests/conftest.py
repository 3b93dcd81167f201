"""Shared test setup: the device list, a Hypothesis CI profile, helpers to compare with numpy, fake GPUs for plan
tests."""
import contextlib
import os

# Under pytest-xdist (the GPU run: -n 14 on 16 cores) every worker's torch, numpy BLAS and OpenMP would start a
# thread per core: 14 x 16 threads on 16 cores made torch-heavy tests (float64 references) run past their time
# limit. Each worker gets its share of the cores, set before numpy or torch is imported.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT") and "OMP_NUM_THREADS" not in os.environ:
    os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))

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


def pytest_configure(config):
    # pytest-timeout's marker (registered here too, so a run without the plugin does not warn): a test that starts a
    # child with a longer time limit of its own declares that limit, which overrides the run's --timeout
    config.addinivalue_line("markers", "timeout(seconds): this test's own time limit (pytest-timeout)")


# ------------------------------------------------------------------------------------------------ the torch oracle
def _pinned_torch():
    """The torch version pyproject.toml's test extra pins (``"torch==X"``): the oracle whose exact API and
    behaviour some tests record (reprs, new classes, tests/opinfo_expected.json)."""
    import pathlib
    import re
    text = (pathlib.Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    m = re.search(r'"torch==([0-9][^"; ]*)', text)
    return m.group(1) if m else None


def _installed_torch():
    """The installed torch's version string (``2.11.0+cu130``), read without importing torch; None if absent."""
    from importlib import metadata
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


PINNED_TORCH = _pinned_torch()
TORCH_FOUND = _installed_torch()
# a local build tag (+cpu, +cu130) changes no Python-level behaviour the tests record
IS_PINNED_TORCH = TORCH_FOUND is not None and TORCH_FOUND.split("+")[0] == PINNED_TORCH


def pinned_torch_reason(why):
    """The skip reason of a test that needs the pinned torch: what it needs, and what was found."""
    return f"needs torch {PINNED_TORCH} ({why}); found torch {TORCH_FOUND or '(none)'}"


def requires_pinned_torch(why):
    """Marker for a test that holds cltorch to the pinned torch's exact API or behaviour (``why`` says which:
    it appeared or changed in that version). With another torch installed (a GPU machine's CUDA build, say) the
    test skips with that reason instead of failing on the version difference."""
    return pytest.mark.skipif(not IS_PINNED_TORCH, reason=pinned_torch_reason(why))


def skip_unless_pinned_torch(why):
    """The same, inside a test (for one parametrized case, or one part that needs the pinned torch)."""
    if not IS_PINNED_TORCH:
        pytest.skip(pinned_torch_reason(why))


def child_env(**extra):
    """The environment for a child Python (a script, ``python -m cltorch ...``): this one's, with the project
    root first on PYTHONPATH and what was there kept after it (a machine that installs the dependencies with
    ``pip --target`` and PYTHONPATH, as the GPU run does, needs them in the child too), plus ``extra``."""
    import pathlib
    root = str(pathlib.Path(__file__).resolve().parents[1])
    env = dict(os.environ, **{k: str(v) for k, v in extra.items()})
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                                  if p and p != root])
    return env


def two_platforms():
    """Two OpenCL devices on different platforms as ("cl:N", "cl:M"), the default device's platform first
    (CLTORCH_PLATFORM chooses it: NVIDIA on a GPU machine, PoCL here), or None; and the platforms found. For the
    tests that hold two vendors' runs to each other. Simulators are not listed (Oclgrind: too slow to train on)."""
    from cltorch.backend.devices import list_devices
    first = {}
    for info in list_devices():
        first.setdefault(info.platform, f"cl:{info.index}")
    devs = tuple(first.values())
    return (devs[:2] if len(devs) >= 2 else None), sorted(first)


def two_platforms_or_skip():
    """:func:`two_platforms`'s pair, or a skip that says what it needs and what was found."""
    pair, found = two_platforms()
    if pair is None:
        pytest.skip(f"needs two OpenCL platforms (a GPU's and a CPU's, or PoCL and Intel's CPU runtime: pip install "
                    f"intel-opencl-rt); found {found}")
    return pair


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


@pytest.fixture(scope="module")
def rt():
    """The runtime of cl:0 (raw-buffer kernel tests), or a skip where no OpenCL device works. A module may define
    its own ``rt`` (test_philox.py parametrizes it over devices)."""
    from cltorch.backend import runtime
    try:
        return runtime(0)
    except Exception as e:  # pragma: no cover - no OpenCL device
        pytest.skip(f"no OpenCL device: {e}")


@pytest.fixture(autouse=True)
def _report_deferred_device_errors():
    """A device-side error (a bounds flag) surfaces at the next synchronization: synchronize after each test, so
    an unreported one fails the test that caused it and not a later one."""
    yield
    cltorch.cl.synchronize()


# A fake NVIDIA H200 for plan tests (pure Python, no kernel runs): 132 compute units, 48 KiB local memory,
# work-items (1024, 1024, 64), fp64; device_info_from_props reads it, the shipped nvidia profile applies.
H200 = dict(name="NVIDIA H200", vendor="NVIDIA Corporation", vendor_id=0x10DE, is_cpu=False, platform="NVIDIA CUDA",
            max_compute_units=132, local_mem_size=49152, max_work_group_size=1024,
            max_work_item_sizes=(1024, 1024, 64), global_mem_size=141 << 30, extensions="cl_khr_fp64")


def shipped_profile(device):
    """The profile cltorch ships for ``device`` (a DeviceInfo, or the properties dict device_info_from_props
    reads), whatever CLTORCH_PROFILE / CLTORCH_PROFILE_ONLY say in this process (the GPU-configuration passes set
    them)."""
    from cltorch.backend.devices import device_info_from_props
    from cltorch.backend.profile import load_profile
    info = device_info_from_props(0, device) if isinstance(device, dict) else device
    saved = {k: os.environ.pop(k) for k in ("CLTORCH_PROFILE", "CLTORCH_PROFILE_ONLY") if k in os.environ}
    try:
        return load_profile(info)
    finally:
        os.environ.update(saved)


def fake_runtime(props, profile=None, index=0):
    """A stand-in runtime for plan tests, what launch plans and ``backend/geometry`` read of one: ``info`` (the
    DeviceInfo of ``props``), ``profile`` (``profile``, else the shipped one), ``native_profile`` (the shipped
    one), ``index``."""
    import types
    from cltorch.backend.devices import device_info_from_props
    info = device_info_from_props(index, props)
    native = shipped_profile(info)
    return types.SimpleNamespace(info=info, profile=native if profile is None else profile, native_profile=native,
                                 index=index)


@contextlib.contextmanager
def gpu_configuration(props):
    """The 'cpu' device's runtime under the shipped profile of the GPU ``props`` describes (its tables and its
    [limits], emulated on this device), every launch plan cache (and the lane-exchange choice) cleared on the way
    in and out: plans made under one profile are never reused under the other. Yields the runtime."""
    from cltorch import _deterministic, backend
    from cltorch.ops.reduction import exchange
    rt = backend.runtime(backend.cpu_index())
    saved = rt.profile, rt.native_profile, getattr(rt, "_limits", None)

    def clear():
        _deterministic.clear_plans()
        exchange._modes.clear()
        rt._limits = None
    cltorch.cl.synchronize()
    clear()
    rt.profile = rt.native_profile = shipped_profile(props)
    try:
        yield rt
    finally:
        cltorch.cl.synchronize()
        rt.profile, rt.native_profile = saved[0], saved[1]
        clear()
        rt._limits = saved[2]


def to_np(t):
    """A tensor's values as a numpy array (any device)."""
    return np.asarray(t.detach().cpu().numpy())


def assert_close(t, ref, rtol=1e-5, atol=1e-6):
    got = to_np(t) if isinstance(t, cltorch.Tensor) else np.asarray(t)
    ref = np.asarray(ref)
    assert got.shape == ref.shape, f"shape {got.shape} != {ref.shape}"
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol, equal_nan=True)
