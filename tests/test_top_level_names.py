"""Top-level names PyTorch scripts call: window functions, runtime settings, print options, the default
device, thin aliases (clamp_min/max, arctan2, from_dlpack, frombuffer, in-place forms), checked against torch."""
import numpy as np
import pytest
import torch

import cltorch


def _np(t):
    return t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t)


WINDOWS = [("hann_window", {}), ("hamming_window", {}), ("hamming_window", {"alpha": 0.5, "beta": 0.3}),
           ("bartlett_window", {}), ("blackman_window", {}), ("kaiser_window", {}),
           ("kaiser_window", {"beta": 5.0})]


@pytest.mark.parametrize("name,kw", WINDOWS)
@pytest.mark.parametrize("n", [0, 1, 2, 7, 16])
@pytest.mark.parametrize("periodic", [True, False])
def test_windows_match_torch(name, kw, n, periodic):
    want = getattr(torch, name)(n, periodic, dtype=torch.float64, **kw)
    got = getattr(cltorch, name)(n, periodic, dtype=cltorch.float64, **kw)
    assert got.dtype is cltorch.float64 and tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(_np(got), want.numpy(), rtol=0, atol=1e-6)


def test_window_defaults_dtype_device_grad():
    w = cltorch.hann_window(8)
    assert w.dtype is cltorch.float32 and w.device.type == "cpu"
    np.testing.assert_allclose(_np(w), torch.hann_window(8).numpy(), atol=1e-6)
    w = cltorch.kaiser_window(9, device="cl:0", requires_grad=True)
    assert w.device.type == "cl" and w.requires_grad
    np.testing.assert_allclose(_np(w), torch.kaiser_window(9).numpy(), atol=1e-6)
    with pytest.raises(RuntimeError):
        cltorch.hann_window(-1)
    with pytest.raises(RuntimeError):
        cltorch.hann_window(4, dtype=cltorch.int64)


def test_threads_and_matmul_precision():
    import os
    assert cltorch.get_num_threads() >= 1
    old = cltorch.get_num_threads()
    cltorch.set_num_threads(3)
    assert cltorch.get_num_threads() == 3
    cltorch.set_num_threads(old)
    with pytest.raises(RuntimeError):
        cltorch.set_num_threads(0)
    assert cltorch.get_num_interop_threads() >= 1 or os.cpu_count() is None
    assert cltorch.get_float32_matmul_precision() == torch.get_float32_matmul_precision() == "highest"
    cltorch.set_float32_matmul_precision("high")
    assert cltorch.get_float32_matmul_precision() == "high"
    cltorch.set_float32_matmul_precision("highest")
    with pytest.raises(RuntimeError):
        cltorch.set_float32_matmul_precision("low")


@pytest.fixture
def printopts():
    yield
    cltorch.set_printoptions(profile="default", sci_mode=None)
    torch.set_printoptions(profile="default", sci_mode=None)


def _squash(r):
    return "".join(r.split())   # line wrapping and column padding differ from torch's (README); the tokens not


@pytest.mark.parametrize("opts", [dict(precision=2), dict(precision=6), dict(sci_mode=True),
                                  dict(sci_mode=False), dict(threshold=5, edgeitems=2), dict(profile="short"),
                                  dict(profile="full")])
def test_printoptions_match_torch(opts, printopts):
    data = [[0.123456789, 1.5, -2.25, 3.0, 4.125, 5.0, 6.5, 7.75]] * 3
    cltorch.set_printoptions(**opts)
    torch.set_printoptions(**opts)
    assert _squash(repr(cltorch.tensor(data))) == _squash(repr(torch.tensor(data)))
    assert _squash(repr(cltorch.arange(20))) == _squash(repr(torch.arange(20)))
    assert _squash(repr(cltorch.tensor([1e-6, 2.5]))) == _squash(repr(torch.tensor([1e-6, 2.5])))
    big = np.linspace(0, 1, 1200).astype(np.float32)
    assert _squash(repr(cltorch.tensor(big))) == _squash(repr(torch.tensor(big)))


def test_printoptions_reset_restores_default(printopts):
    x = [0.5, 1.25]
    before = repr(cltorch.tensor(x))
    cltorch.set_printoptions(precision=1)
    assert repr(cltorch.tensor(x)) != before
    cltorch.set_printoptions(profile="default")
    assert repr(cltorch.tensor(x)) == before == repr(torch.tensor(x))


def test_default_device():
    assert str(cltorch.get_default_device()) == "cpu"
    try:
        cltorch.set_default_device("cl:0")
        assert cltorch.get_default_device().type == "cl"
        for t in (cltorch.zeros(2), cltorch.tensor([1.0]), cltorch.arange(3), cltorch.hann_window(4)):
            assert t.device.type == "cl", t
        assert cltorch.zeros(2, device="cpu").device.type == "cpu"
    finally:
        cltorch.set_default_device(None)
    assert cltorch.zeros(2).device.type == "cpu"


def test_nn_functional_reexports():
    a = np.random.RandomState(0).randn(3, 8, 4, 4).astype(np.float32)
    b = np.random.RandomState(1).randn(3, 8, 4, 4).astype(np.float32)
    np.testing.assert_allclose(_np(cltorch.cosine_similarity(cltorch.tensor(a), cltorch.tensor(b))),
                               torch.cosine_similarity(torch.tensor(a), torch.tensor(b)).numpy(), atol=1e-5)
    np.testing.assert_array_equal(_np(cltorch.pixel_shuffle(cltorch.tensor(a), 2)),
                                  torch.pixel_shuffle(torch.tensor(a), 2).numpy())
    np.testing.assert_array_equal(_np(cltorch.pixel_unshuffle(cltorch.tensor(a), 2)),
                                  torch.pixel_unshuffle(torch.tensor(a), 2).numpy())


def test_clamp_min_max_arctan2():
    a = np.array([-2.0, -0.5, 0.0, 0.7, 3.0], np.float32)
    b = np.array([1.0, -1.0, 2.0, -0.3, 0.5], np.float32)
    ca, ta = cltorch.tensor(a), torch.tensor(a)
    np.testing.assert_array_equal(_np(cltorch.clamp_min(ca, 0.1)), torch.clamp_min(ta, 0.1).numpy())
    np.testing.assert_array_equal(_np(cltorch.clamp_max(ca, 0.1)), torch.clamp_max(ta, 0.1).numpy())
    np.testing.assert_array_equal(_np(ca.clamp_max(cltorch.tensor(b))), ta.clamp_max(torch.tensor(b)).numpy())
    want = torch.arctan2(ta, torch.tensor(b)).numpy()
    np.testing.assert_allclose(_np(cltorch.arctan2(ca, cltorch.tensor(b))), want, atol=1e-6)
    np.testing.assert_allclose(_np(ca.arctan2(cltorch.tensor(b))), want, atol=1e-6)


def test_from_dlpack_and_frombuffer():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = cltorch.from_dlpack(a)
    np.testing.assert_array_equal(_np(t), a)
    t[0, 0] = 42.0
    assert a[0, 0] == 42.0                       # shares memory, as torch
    tt = torch.arange(4, dtype=torch.int32)
    np.testing.assert_array_equal(_np(cltorch.from_dlpack(tt)), tt.numpy())

    class Dev:
        def __dlpack_device__(self):
            return (2, 0)                        # kDLCUDA

        def __dlpack__(self, **k):
            raise AssertionError("not reached")
    with pytest.raises(NotImplementedError):
        cltorch.from_dlpack(Dev())

    buf = bytearray(np.arange(8, dtype=np.int16).tobytes())
    got = cltorch.frombuffer(buf, dtype=cltorch.int16, count=5, offset=4)
    want = torch.frombuffer(bytearray(buf), dtype=torch.int16, count=5, offset=4)
    np.testing.assert_array_equal(_np(got), want.numpy())
    got[0] = 100
    assert np.frombuffer(buf, np.int16)[2] == 100
    np.testing.assert_array_equal(_np(cltorch.frombuffer(buf, dtype=cltorch.float32)),
                                  torch.frombuffer(bytearray(buf), dtype=torch.float32).numpy())
    with pytest.raises(ValueError):
        cltorch.frombuffer(bytearray(6), dtype=cltorch.float32)


@pytest.mark.parametrize("name,args", [("exp_", ()), ("relu_", ()), ("sigmoid_", ()), ("tanh_", ()),
                                       ("abs_", ()), ("neg_", ()), ("sqrt_", ()), ("zero_", ()),
                                       ("fill_", (2.5,)), ("clamp_min_", (0.2,)), ("square_", ())])
def test_inplace_top_level(name, args):
    a = np.array([0.25, 1.0, 2.0, 0.5], np.float32)
    c, t = cltorch.tensor(a), torch.tensor(a)
    r = getattr(cltorch, name)(c, *args)
    getattr(torch, name)(t, *args)
    assert r is c
    np.testing.assert_allclose(_np(c), t.numpy(), rtol=1e-6, atol=1e-6)


def test_is_inference_and_testing_reachable():
    import subprocess
    import sys
    assert cltorch.tensor([1.0]).is_inference() is False
    with cltorch.inference_mode():
        assert cltorch.ones(2).is_inference() is True
    out = subprocess.run([sys.executable, "-c", "import cltorch; print(hasattr(cltorch, 'testing') and "
                          "callable(cltorch.testing.assert_close))"], capture_output=True, text=True)
    assert out.stdout.strip() == "True", out.stderr
