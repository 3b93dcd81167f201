"""cpu tensors on a machine whose only OpenCL device is a GPU (issue 28).

A GPU user creates, loads, initialises and copies cpu tensors, then moves the model to the GPU: none of that needs
an OpenCL CPU device (random fills come from the numpy Philox reference, exact pointwise ops from numpy, copies
from the host); arithmetic that does need one raises NoDeviceError naming what to install. The worker
(``_gpu_only_worker.py``) runs the same script with this machine's devices as they are and with a device list
whose only device reports itself as a GPU, and the two must agree: the same seed gives the same initial weights
bit for bit, and training on the same device the same losses.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import cltorch as torch
from cltorch.ops import random as R

WORKER = Path(__file__).with_name("_gpu_only_worker.py")


def _run(mode, tmp_path):
    folder = tmp_path / mode
    folder.mkdir()
    r = subprocess.run([sys.executable, str(WORKER), mode, str(folder)], capture_output=True, text=True,
                       timeout=600, env=os.environ.copy())
    assert r.returncode == 0, f"{mode} worker failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_gpu_user_script_without_an_opencl_cpu_device(tmp_path):
    normal, gpu = _run("normal", tmp_path), _run("gpu-only", tmp_path)
    assert normal["cpu_device"] and not gpu["cpu_device"]
    assert not gpu["cpu_runtime_made"], "something on the cpu-tensor path opened an OpenCL CPU device"
    # creation and initialisation on the host give the kernels' bits; saving and loading keep them
    assert gpu["init"] == normal["init"]
    assert gpu["loaded"] == gpu["init"] and normal["loaded"] == normal["init"]
    assert gpu["data"] == normal["data"]
    # the same training on the same device (the GPU-only list's device is this machine's cl:0)
    np.testing.assert_allclose(gpu["losses"], normal["losses"], rtol=1e-5)
    for k, v in normal["final"].items():
        np.testing.assert_allclose(np.asarray(gpu["final"][k]), np.asarray(v), rtol=1e-4, atol=1e-5, err_msg=k)
    # arithmetic that needs an OpenCL CPU device says what to install
    err = gpu["arith_error"]
    assert err and err.startswith("NoDeviceError") and "pip install intel-opencl-rt" in err, err
    assert "no OpenCL CPU device" in gpu["devices_text"] and "pip install" in gpu["devices_text"]


@pytest.mark.parametrize("kind,kw,dtype", [
    ("uniform", dict(low=-2.0, high=3.0), torch.float32), ("uniform", {}, torch.float64),
    ("normal", dict(mean=1.0, std=2.0), torch.float32), ("normal", {}, torch.float64),
    ("exponential", dict(lambd=1.5), torch.float32), ("randint", dict(low=-5, high=7), torch.int64),
    ("randint", dict(low=0, high=3), torch.uint8), ("bernoulli", dict(p=0.3), torch.float32),
    ("bernoulli", dict(p=0.7), torch.bool)])
def test_host_fill_matches_the_kernel(kind, kw, dtype, monkeypatch):
    """The host fill (machines without an OpenCL CPU device) writes the Philox kernel's bits, across its chunk
    boundaries (3 blocks a chunk here) and at a storage offset, and advances the generator as the kernel does."""
    n = 203
    base = torch.zeros(n + 5, dtype=dtype)
    g = torch.Generator().manual_seed(1234)
    g._offset = 17
    R._fill(base[5:], kind, g, **kw)                    # the OpenCL CPU device's kernel
    monkeypatch.setattr(R, "_HOST_BLOCKS", 3)
    host = torch.zeros(n + 5, dtype=dtype)
    h = torch.Generator().manual_seed(1234)
    h._offset = 17
    R._host_fill(host._storage, 5, n, kind, h._seed, h._offset, **kw)
    assert host.numpy().tobytes() == base.numpy().tobytes()
    assert g._offset == 17 + R.REF.counters_used("bits" if kind == "bernoulli" else kind, n, dtype.np)


def test_host_bernoulli_with_probability_tensor():
    p = torch.linspace(0, 1, 97)
    base = torch.zeros(97)
    g = torch.Generator().manual_seed(5)
    R._fill(base, "bernoulli", g, p_tensor=p)
    host = torch.zeros(97)
    R._host_fill(host._storage, 0, 97, "bernoulli", 5, 0, p_tensor=p)
    assert host.numpy().tobytes() == base.numpy().tobytes()
