"""softmax / log_softmax over every row shape against torch (1, 7, 65, 1000 and 5000 columns; dim not last;
empty; float64; gradients) on cpu and cl:0, and the fixed summation order: every lanes-per-row choice, vector
and scalar loads give the same bits (cl_kernels/softmax.cl.mako)."""
import numpy as np
import pytest
import torch

import cltorch as ct
from cltorch.ops import softmax as S
from cltorch.ops.softmax import cpu as S_cpu

DEVICES = ["cpu", "cl:0"]
COLS = [1, 7, 65, 1000, 5000]


def _tol(dt, grad=False):
    if dt == np.float32:     # gradients: g - sum(g * y) cancels, so float32 gets a looser bound there
        return dict(rtol=1e-4, atol=1e-5) if grad else dict(rtol=1e-5, atol=1e-5)
    return dict(rtol=1e-12, atol=1e-14)


def _check(a, dim, log, dev, transpose=False):
    rng = np.random.default_rng(a.size)
    tx = torch.from_numpy(a)
    cx = ct.from_numpy(a.copy()).to(dev)
    if transpose:
        tx, cx = tx.t(), cx.t()
    tx.requires_grad_()
    cx.requires_grad_()
    f_t, f_c = (torch.log_softmax, ct.log_softmax) if log else (torch.softmax, ct.softmax)
    ty, cy = f_t(tx, dim), f_c(cx, dim)
    np.testing.assert_allclose(cy.detach().cpu().numpy(), ty.detach().numpy(), **_tol(a.dtype))
    g = rng.standard_normal(tuple(ty.shape)).astype(a.dtype)
    ty.backward(torch.from_numpy(g))
    cy.backward(ct.from_numpy(g.copy()).to(dev))
    np.testing.assert_allclose(cx.grad.cpu().numpy(), tx.grad.numpy(), **_tol(a.dtype, grad=True))


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("cols", COLS)
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("log", [False, True])
def test_last_dim_rows(dev, cols, dt, log):
    rows = 16640 // cols if cols == 65 else max(2, 3000 // cols)   # the ViT attention shape for 65
    a = (np.random.default_rng(cols).standard_normal((rows, cols)) * 4).astype(dt)
    _check(a, -1, log, dev)


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("cols", [7, 65, 1000])
@pytest.mark.parametrize("log", [False, True])
def test_dim_not_last_and_strided_rows(dev, cols, log):
    rng = np.random.default_rng(cols)
    a = (rng.standard_normal((cols, 33)) * 4).astype(np.float32)
    _check(a, 0, log, dev)                                  # rows along dim 0: neighbouring rows adjacent
    _check(a, -1, log, dev, transpose=True)                 # last dim, element stride 33 (scalar loads)
    b = (rng.standard_normal((3, cols, 5)) * 4).astype(np.float64)
    _check(b, 1, log, dev)


@pytest.mark.parametrize("dev", DEVICES)
def test_empty_and_scalar(dev):
    for shape, dim in (((0, 5), 1), ((4, 0), 1), ((2, 0, 3), 0)):
        x = ct.empty(*shape, device=dev)
        assert tuple(ct.softmax(x, dim).shape) == shape and tuple(ct.log_softmax(x, dim).shape) == shape
    x = ct.tensor(3.0, device=dev)
    assert float(ct.softmax(x, 0)) == 1.0 and float(ct.log_softmax(x, 0)) == 0.0


@pytest.mark.parametrize("dev", DEVICES)
def test_special_values_rows(dev):
    a = np.array([[0.0, -np.inf, 1.0] + [0.5] * 62, [np.nan] + [0.0] * 64, [np.inf] + [0.0] * 64,
                  [-np.inf] * 65, [80.0] * 65], np.float32)
    for log in (False, True):
        f_t, f_c = (torch.log_softmax, ct.log_softmax) if log else (torch.softmax, ct.softmax)
        np.testing.assert_allclose(f_c(ct.from_numpy(a.copy()).to(dev), 1).cpu().numpy(),
                                   f_t(torch.from_numpy(a), 1).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cols", COLS + [32, 33, 64, 96])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_same_bits_for_every_lanes_choice(monkeypatch, cols, dt):
    """The sums add in one order (32 stripes, then a balanced tree) whatever the lanes per row, work-group size
    and loads (float8 vectors for contiguous rows, scalars for strided ones)."""
    rng = np.random.default_rng(cols)
    a = (rng.standard_normal((37, cols)) * 4).astype(dt)
    g = rng.standard_normal((37, cols)).astype(dt)
    x = ct.from_numpy(a.copy()).to("cl:0")
    xs = ct.from_numpy(np.ascontiguousarray(a.T)).to("cl:0").t()     # the same values, element stride 37
    gc = ct.from_numpy(g.copy()).to("cl:0")
    real = S_cpu._shape
    results = {}
    for tpr in (1, 2, 4, 8, 16, 32):
        for ls in ((64, 128) if tpr > 1 else (16,)):
            def shape(rt, R, inner, nrows, tpr=tpr, ls=ls):
                if tpr == 1:
                    return 1, ls, nrows
                return tpr, ls, (nrows + ls // tpr - 1) // (ls // tpr) * ls
            monkeypatch.setattr(S_cpu, "_shape", shape)
            for name, inp in (("contiguous", x), ("strided", xs)):
                for log in (False, True):
                    y = S._softmax_raw(inp, 1, log)
                    gi = S._softmax_bwd_raw(gc, y, 1, log)
                    results[(tpr, ls, name, log)] = (y.cpu().numpy().tobytes(), gi.cpu().numpy().tobytes())
    monkeypatch.setattr(S_cpu, "_shape", real)
    for log in (False, True):
        ref = results[(1, 16, "contiguous", log)]
        for key, val in results.items():
            if key[3] == log:
                assert val[0] == ref[0], ("forward bits differ", key)
                assert val[1] == ref[1], ("backward bits differ", key)
        y = S._softmax_raw(x, 1, log)
        f = torch.log_softmax if log else torch.softmax
        np.testing.assert_allclose(y.cpu().numpy(), f(torch.from_numpy(a), 1).numpy(), **_tol(dt))


def test_profile_lanes_rows_are_checked(monkeypatch):
    x = ct.randn(4, 9, device="cl:0")
    prof = x._runtime().profile
    monkeypatch.setitem(prof, "softmax", dict(prof.get("softmax", {}), lanes=[{"lanes": 3}]))
    with pytest.raises(ValueError, match="power of two"):
        ct.softmax(x, 1)


@pytest.mark.parametrize("cols", [1, 7, 65, 1000])
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("log", [False, True])
def test_rows_along_dim0_as_vector_lanes_same_bits(cols, dt, log):
    """Rows along dim 0 with 40 of them side by side (the CPU tables run 8 rows per work-item as vector lanes)
    give the bits of the same rows laid out contiguously, forward and backward, and torch's values."""
    rng = np.random.default_rng(cols)
    a = (rng.standard_normal((cols, 40)) * 4).astype(dt)
    g = rng.standard_normal((cols, 40)).astype(dt)
    x = ct.from_numpy(a.copy()).to("cl:0")
    xt = ct.from_numpy(np.ascontiguousarray(a.T)).to("cl:0")
    y0, y1 = S._softmax_raw(x, 0, log), S._softmax_raw(xt, 1, log)
    assert y0.cpu().numpy().T.tobytes() == y1.cpu().numpy().tobytes()
    g0 = S._softmax_bwd_raw(ct.from_numpy(g.copy()).to("cl:0"), y0, 0, log)
    g1 = S._softmax_bwd_raw(ct.from_numpy(np.ascontiguousarray(g.T)).to("cl:0"), y1, 1, log)
    assert g0.cpu().numpy().T.tobytes() == g1.cpu().numpy().tobytes()
    _check(a, 0, log, "cl:0")
