"""Pooling, pad and interpolate against numpy references on every device; gradients against numpy
scatters and finite differences (float64 gradcheck / gradgradcheck); PyTorch's literal results and errors."""
import math

import numpy as np
import pytest

import cltorch as torch
from cltorch.autograd import gradcheck, gradgradcheck
from cltorch.ops import pool as P
from cltorch.ops import padding as Pd

DEVICES = ["cpu"] + [f"cl:{i}" for i in range(torch.cl.device_count())]
on_devices = pytest.mark.parametrize("device", DEVICES)


def T(a, device, requires_grad=False):
    a = np.asarray(a)
    dtype = torch.float64 if a.dtype == np.float64 else torch.float32
    return torch.tensor(a, dtype=dtype, device=device, requires_grad=requires_grad)


def N(t):
    return np.asarray(t.detach().cpu().tolist(), dtype=np.float64)


# ------------------------------------------------------------------------------------------- references
def ref_out(L, k, s, p, d, ceil):
    """Output length from PyTorch's documentation: floor or ceil of (L + 2p - d(k-1) - 1)/s, plus 1; with
    ceil_mode the last window must start inside the input or the left padding."""
    f = (L + 2 * p - d * (k - 1) - 1) / s
    o = (math.ceil(f) if ceil else math.floor(f)) + 1
    if ceil and (o - 1) * s >= L + p:
        o -= 1
    return o


def ref_max_pool2d(x, k, s, p, d, ceil):
    """Values and plane-local indices; a tap wins when larger than the running max or NaN (PyTorch's rule)."""
    n, c, h, w = x.shape
    oh, ow = ref_out(h, k[0], s[0], p[0], d[0], ceil), ref_out(w, k[1], s[1], p[1], d[1], ceil)
    y = np.zeros((n, c, oh, ow))
    ind = np.zeros((n, c, oh, ow), np.int64)
    for a in range(n):
        for b in range(c):
            for i in range(oh):
                for j in range(ow):
                    taps = [(i * s[0] - p[0] + u * d[0], j * s[1] - p[1] + v * d[1])
                            for u in range(k[0]) for v in range(k[1])]
                    taps = [(hh, ww) for hh, ww in taps if 0 <= hh < h and 0 <= ww < w]
                    best, bi = -np.inf, taps[0][0] * w + taps[0][1]
                    for hh, ww in taps:
                        val = x[a, b, hh, ww]
                        if val > best or np.isnan(val):
                            best, bi = val, hh * w + ww
                    y[a, b, i, j], ind[a, b, i, j] = best, bi
    return y, ind


def ref_avg_pool2d(x, k, s, p, ceil, include_pad, divisor=None):
    n, c, h, w = x.shape
    oh, ow = ref_out(h, k[0], s[0], p[0], 1, ceil), ref_out(w, k[1], s[1], p[1], 1, ceil)
    y = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            h0, w0 = i * s[0] - p[0], j * s[1] - p[1]
            h1, w1 = min(h0 + k[0], h + p[0]), min(w0 + k[1], w + p[1])
            size = (h1 - h0) * (w1 - w0)
            h0, w0, h1, w1 = max(h0, 0), max(w0, 0), min(h1, h), min(w1, w)
            if h0 >= h1 or w0 >= w1:
                continue
            div = divisor if divisor else (size if include_pad else (h1 - h0) * (w1 - w0))
            y[:, :, i, j] = x[:, :, h0:h1, w0:w1].sum((2, 3)) / div
    return y


def ref_adaptive(x, out, kind):
    n, c, h, w = x.shape
    y = np.zeros((n, c) + out)
    ind = np.zeros((n, c) + out, np.int64)
    for i in range(out[0]):
        h0, h1 = (i * h) // out[0], -(-((i + 1) * h) // out[0])
        for j in range(out[1]):
            w0, w1 = (j * w) // out[1], -(-((j + 1) * w) // out[1])
            win = x[:, :, h0:h1, w0:w1].reshape(n, c, -1)
            if kind == "avg":
                y[:, :, i, j] = win.mean(-1)
            else:
                a = win.argmax(-1)
                y[:, :, i, j] = win.max(-1)
                ind[:, :, i, j] = (h0 + a // (w1 - w0)) * w + w0 + a % (w1 - w0)
    return y, ind


# ------------------------------------------------------------------------------------------- max pooling
MAX_CASES = [
    # H, W, k, s, p, d, ceil
    (5, 5, (2, 2), (2, 2), (0, 0), (1, 1), False),
    (5, 5, (2, 2), (2, 2), (0, 0), (1, 1), True),
    (6, 7, (3, 3), (2, 2), (1, 1), (1, 1), True),
    (7, 6, (3, 2), (1, 2), (1, 1), (1, 1), False),     # overlapping windows
    (8, 9, (2, 3), (2, 2), (1, 0), (2, 3), True),      # dilation
    (4, 4, (4, 4), (4, 4), (2, 2), (1, 1), True),
    (6, 8, (2, 2), (2, 2), (0, 0), (1, 1), False),     # windows tile the input (the fast kernels)
    (7, 9, (3, 2), (3, 2), (0, 0), (1, 1), False),     # tiling with uncovered last rows/columns
]


@on_devices
@pytest.mark.parametrize("case", MAX_CASES)
def test_max_pool2d_values_and_indices(device, case):
    h, w, k, s, p, d, ceil = case
    rng = np.random.default_rng(abs(hash(case)) % 2 ** 32)
    x = rng.standard_normal((2, 3, h, w)).astype(np.float32)
    y, ind = P.max_pool2d(T(x, device), k, s, p, d, ceil, return_indices=True)
    ry, ri = ref_max_pool2d(x, k, s, p, d, ceil)
    assert tuple(y.shape) == ry.shape and ind.dtype == torch.int64
    np.testing.assert_array_equal(N(y), ry)
    np.testing.assert_array_equal(np.asarray(ind.cpu().tolist()), ri)


@on_devices
def test_max_pool2d_ceil_mode_literals(device):
    # values from PyTorch 2.13 (the handed case)
    x = torch.arange(25, dtype=torch.float32, device=device).reshape(1, 1, 5, 5)
    assert tuple(P.max_pool2d(x, 2, stride=2).shape) == (1, 1, 2, 2)
    assert N(P.max_pool2d(x, 2, stride=2, ceil_mode=True)).tolist() == [[[[6, 8, 9], [16, 18, 19], [21, 23, 24]]]]
    assert tuple(P.max_pool2d(x, 2, stride=2, padding=1, ceil_mode=True).shape) == (1, 1, 3, 3)
    y = -torch.arange(36, dtype=torch.float32, device=device).reshape(1, 1, 6, 6)
    assert N(P.max_pool2d(y, 3, stride=2, padding=1, ceil_mode=True)).tolist() == \
        [[[[0, -1, -3, -5], [-6, -7, -9, -11], [-18, -19, -21, -23], [-30, -31, -33, -35]]]]
    assert tuple(P.max_pool2d(x, 2, ceil_mode=True).shape) == (1, 1, 3, 3)


@on_devices
def test_max_pool_nan_inf_and_unbatched(device):
    x = np.array([[[1.0, np.nan, 3.0, 2.0], [-np.inf, -np.inf, 0.5, np.nan]]], np.float32)   # (1, 2, 4)
    y, ind = P.max_pool1d(T(x, device), 2, return_indices=True)
    got = N(y)
    assert np.isnan(got[0, 0, 0]) and got[0, 0, 1] == 3.0 and got[0, 1, 0] == -np.inf and np.isnan(got[0, 1, 1])
    assert ind.cpu().tolist() == [[[1, 2], [0, 3]]]
    x3 = np.random.default_rng(0).standard_normal((2, 5, 6)).astype(np.float32)
    y3 = P.max_pool2d(T(x3, device), 2)
    assert tuple(y3.shape) == (2, 2, 3)
    np.testing.assert_array_equal(N(y3), ref_max_pool2d(x3[None], (2, 2), (2, 2), (0, 0), (1, 1), False)[0][0])


@on_devices
def test_max_pool1d_matches_2d_reference(device):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 11)).astype(np.float32)
    y, ind = P.max_pool1d(T(x, device), 3, 2, 1, 2, True, True)
    ry, ri = ref_max_pool2d(x[:, :, None], (1, 3), (1, 2), (0, 1), (1, 2), True)
    np.testing.assert_array_equal(N(y), ry[:, :, 0])
    np.testing.assert_array_equal(np.asarray(ind.cpu().tolist()), ri[:, :, 0])


@on_devices
@pytest.mark.parametrize("case", [MAX_CASES[2], MAX_CASES[3], MAX_CASES[4], MAX_CASES[6], MAX_CASES[7]])
def test_max_pool2d_backward(device, case):
    h, w, k, s, p, d, ceil = case
    rng = np.random.default_rng(5)
    x = rng.permutation(2 * 2 * h * w).reshape(2, 2, h, w).astype(np.float32)    # distinct: no ties
    xt = T(x, device, requires_grad=True)
    y = P.max_pool2d(xt, k, s, p, d, ceil)
    g = rng.standard_normal(tuple(y.shape)).astype(np.float32)
    y.backward(T(g, device))
    _, ri = ref_max_pool2d(x, k, s, p, d, ceil)
    ref = np.zeros((2, 2, h * w))
    for a in range(2):
        for b in range(2):
            np.add.at(ref[a, b], ri[a, b].reshape(-1), g[a, b].reshape(-1))
    np.testing.assert_allclose(N(xt.grad), ref.reshape(x.shape), rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------------------------------- avg pooling
AVG_CASES = [
    # H, W, k, s, p, ceil, include_pad, divisor
    (5, 5, (3, 3), (2, 2), (1, 1), False, True, None),
    (5, 5, (3, 3), (2, 2), (1, 1), False, False, None),
    (6, 7, (3, 2), (2, 3), (1, 1), True, True, None),
    (6, 7, (3, 2), (2, 3), (1, 1), True, False, None),
    (7, 5, (2, 2), (1, 1), (0, 1), False, True, 3),
    (5, 5, (2, 2), (2, 2), (0, 0), True, False, None),
]


@on_devices
@pytest.mark.parametrize("case", AVG_CASES)
def test_avg_pool2d_values(device, case):
    h, w, k, s, p, ceil, inc, div = case
    rng = np.random.default_rng(abs(hash(case)) % 2 ** 32)
    x = rng.standard_normal((2, 3, h, w)).astype(np.float32)
    y = P.avg_pool2d(T(x, device), k, s, p, ceil, inc, div)
    ref = ref_avg_pool2d(x, k, s, p, ceil, inc, div)
    assert tuple(y.shape) == ref.shape
    np.testing.assert_allclose(N(y), ref, rtol=1e-5, atol=1e-6)


@on_devices
def test_avg_pool1d_and_backward(device):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 9)).astype(np.float32)
    xt = T(x, device, requires_grad=True)
    y = P.avg_pool1d(xt, 3, 2, 1, True, False)
    ref = ref_avg_pool2d(x[:, :, None], (1, 3), (1, 2), (0, 1), True, False)[:, :, 0]
    np.testing.assert_allclose(N(y), ref, rtol=1e-5, atol=1e-6)
    g = rng.standard_normal(tuple(y.shape)).astype(np.float32)
    y.backward(T(g, device))
    # adjoint: d/dx <avg(x), g>, by finite structure: a column of the (linear) pooling matrix per element
    eye = np.eye(9, dtype=np.float64).reshape(9, 1, 1, 9)
    cols = ref_avg_pool2d(eye[:, :, :, :], (1, 3), (1, 2), (0, 1), True, False)[:, 0, 0]   # (9, out)
    ref_g = np.einsum("ncl,il->nci", g.astype(np.float64), cols)
    np.testing.assert_allclose(N(xt.grad), ref_g, rtol=1e-5, atol=1e-6)


@on_devices
def test_adaptive_pools(device):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 7, 10)).astype(np.float32)
    for out in [(3, 4), (1, 1), (7, 10), (5, 3)]:
        ra, _ = ref_adaptive(x, out, "avg")
        np.testing.assert_allclose(N(P.adaptive_avg_pool2d(T(x, device), out)), ra, rtol=1e-5, atol=1e-6)
        rm, ri = ref_adaptive(x, out, "max")
        y, ind = P.adaptive_max_pool2d(T(x, device), out, return_indices=True)
        np.testing.assert_array_equal(N(y), rm)
        np.testing.assert_array_equal(np.asarray(ind.cpu().tolist()), ri)
    assert tuple(P.adaptive_avg_pool2d(T(x, device), (None, 2)).shape) == (2, 3, 7, 2)
    assert tuple(P.adaptive_avg_pool2d(T(x[0], device), 2).shape) == (3, 2, 2)
    x1 = x[:, :, 0]
    np.testing.assert_allclose(N(P.adaptive_avg_pool1d(T(x1, device), 4)),
                               ref_adaptive(x1[:, :, None], (1, 4), "avg")[0][:, :, 0], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(N(P.adaptive_max_pool1d(T(x1, device), 3)),
                                  ref_adaptive(x1[:, :, None], (1, 3), "max")[0][:, :, 0])


@on_devices
def test_pool_gradcheck(device):
    rng = np.random.default_rng(8)
    x = T(rng.permutation(2 * 5 * 6).reshape(1, 2, 5, 6) / 7.0, device, requires_grad=True)
    assert gradcheck(lambda x: P.max_pool2d(x, 3, 2, 1, ceil_mode=True), (x,))
    assert gradgradcheck(lambda x: P.max_pool2d(x, 2, 1), (x,))
    assert gradgradcheck(lambda x: P.max_pool2d(x, 2), (x,))        # tiling windows, last row uncovered
    assert gradcheck(lambda x: P.avg_pool2d(x, 3, 2, 1, True, False), (x,))
    assert gradgradcheck(lambda x: P.avg_pool2d(x, 2, 1, 1, False, True, 3), (x,))
    assert gradcheck(lambda x: P.adaptive_avg_pool2d(x, (3, 4)), (x,))
    assert gradcheck(lambda x: P.adaptive_max_pool2d(x, (2, 4)), (x,))
    assert gradgradcheck(lambda x: P.adaptive_max_pool2d(x, (2, 4)), (x,))


@on_devices
def test_pool_errors(device):
    x = torch.zeros(1, 1, 4, 4, device=device)
    with pytest.raises(RuntimeError):      # pad more than half the kernel
        P.max_pool2d(x, 2, padding=2)
    with pytest.raises(RuntimeError):
        P.avg_pool2d(x, 3, padding=2)
    with pytest.raises(RuntimeError):      # output too small
        P.max_pool2d(torch.zeros(1, 1, 2, 2, device=device), 3)
    with pytest.raises(RuntimeError):
        P.max_pool2d(x, 0)
    with pytest.raises(RuntimeError):
        P.max_pool2d(x, 2, stride=0)
    with pytest.raises(RuntimeError):
        P.max_pool2d(torch.zeros(4, 4, device=device), 2)
    with pytest.raises(RuntimeError):
        P.avg_pool2d(x, 2, divisor_override=0)
    with pytest.raises(RuntimeError):
        P.max_pool2d(torch.zeros(1, 1, 4, 4, dtype=torch.int64, device=device), 2)


# ------------------------------------------------------------------------------------------- pad
def _np_pad(x, pads, mode, value=0.0):
    width = [(0, 0)] * x.ndim
    for i in range(len(pads) // 2):
        width[x.ndim - 1 - i] = (pads[2 * i], pads[2 * i + 1])
    m = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}
    if mode == "constant":
        return np.pad(x, width, mode="constant", constant_values=value)
    return np.pad(x, width, mode=m[mode])


@on_devices
def test_pad_literals(device):
    # values from PyTorch 2.13 (the handed case)
    x = torch.arange(5, dtype=torch.float32, device=device).reshape(1, 1, 5)
    assert N(Pd.pad(x, (2, 1), mode="reflect")).tolist() == [[[2, 1, 0, 1, 2, 3, 4, 3]]]
    assert N(Pd.pad(x, (2, 1), mode="replicate")).tolist() == [[[0, 0, 0, 1, 2, 3, 4, 4]]]
    assert N(Pd.pad(x, (1, 2), value=-1.0)).tolist() == [[[-1, 0, 1, 2, 3, 4, -1, -1]]]
    img = torch.arange(12, dtype=torch.float32, device=device).reshape(1, 1, 3, 4)
    assert N(Pd.pad(img, (1, 0, 0, 2), mode="reflect")).tolist() == \
        [[[[1, 0, 1, 2, 3], [5, 4, 5, 6, 7], [9, 8, 9, 10, 11], [5, 4, 5, 6, 7], [1, 0, 1, 2, 3]]]]
    with pytest.raises(RuntimeError):
        Pd.pad(torch.arange(3.0, device=device).reshape(1, 1, 3), (3, 0), mode="reflect")


@on_devices
@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_modes_against_numpy(device, mode):
    rng = np.random.default_rng(9)
    for shape, pads in [((2, 7), (3, 2)), ((2, 3, 6), (2, 0)), ((1, 2, 4, 5), (1, 3, 2, 1)),
                        ((2, 3, 4, 5), (0, 4, 3, 0)), ((1, 2, 3, 4, 5), (1, 2, 2, 1, 0, 2))]:
        x = rng.standard_normal(shape).astype(np.float32)
        y = Pd.pad(T(x, device), pads, mode=mode, value=None if mode != "constant" else 1.5)
        np.testing.assert_array_equal(N(y), _np_pad(x, pads, mode, 1.5))


@on_devices
def test_pad_constant_negative_and_many_dims(device):
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    y = Pd.pad(T(x, device), (-1, 2, 1, -1, 1, 0), value=7)
    ref = np.pad(x[:, :2, 1:], ((1, 0), (1, 0), (0, 2)), constant_values=7)
    np.testing.assert_array_equal(N(y), ref)
    yi = Pd.pad(torch.tensor([[1, 2]], device=device), (1, 1))
    assert yi.dtype == torch.int64 and yi.cpu().tolist() == [[0, 1, 2, 0]]


@on_devices
def test_pad_gradients(device):
    rng = np.random.default_rng(10)
    x = T(rng.standard_normal((1, 2, 3, 4)), device, requires_grad=True)
    for mode in ["reflect", "replicate", "circular"]:
        assert gradcheck(lambda x: Pd.pad(x, (2, 3, 2, 1), mode=mode), (x,))
        assert gradgradcheck(lambda x: Pd.pad(x, (1, 2, 0, 1), mode=mode), (x,))
    assert gradcheck(lambda x: Pd.pad(x, (1, -1, 2, 0), value=3.0), (x,))
    # replicate with a pad wider than the input: the edge gathers a long run
    x1 = T(rng.standard_normal((1, 1, 2)), device, requires_grad=True)
    Pd.pad(x1, (5, 4), mode="replicate").sum().backward()
    assert N(x1.grad).tolist() == [[[6.0, 5.0]]]


@on_devices
def test_pad_errors(device):
    x = torch.zeros(1, 2, 3, device=device)
    with pytest.raises(RuntimeError):
        Pd.pad(x, (1,))
    with pytest.raises(RuntimeError):
        Pd.pad(x, (1, 1, 1, 1, 1, 1, 1, 1))
    with pytest.raises(RuntimeError):
        Pd.pad(x, (4, 0), mode="circular")
    with pytest.raises(RuntimeError):
        Pd.pad(x, (1, 1), mode="reflect", value=2.0)
    with pytest.raises(NotImplementedError):
        Pd.pad(torch.zeros(3, device=device), (1, 1), mode="reflect")


# ------------------------------------------------------------------------------------------- interpolate
def ref_nearest(x, out, scales=None, exact=False):
    """floor(o * scale) in float32, clamped; 2-d 'nearest' copies an unchanged dim and halves a doubled one
    (PyTorch's nearest_idx), 1-d/3-d 'nearest' and 'nearest-exact' do not."""
    y = x
    two_d = len(out) == 2 and not exact
    for ax, (L, Lo) in enumerate(zip(x.shape[2:], out)):
        s = scales[ax] if scales else None
        scale = np.float32(1.0 / s) if s else np.float32(L) / np.float32(Lo)
        if two_d and Lo == L:
            continue
        if two_d and Lo == 2 * L:
            scale = np.float32(0.5)
        o = np.arange(Lo, dtype=np.float32)
        src = np.minimum(np.floor(((o + np.float32(0.5)) if exact else o) * scale).astype(np.int64), L - 1)
        y = np.take(y, src, axis=ax + 2)
    return y


def ref_linear(x, out, align, scales=None):
    """PyTorch's separable linear interpolation written per output element in float64."""
    x = x.astype(np.float64)
    y = x
    for ax in reversed(range(len(out))):
        L, Lo = x.shape[ax + 2], out[ax]
        s = scales[ax] if scales else None
        if L == Lo:            # an unchanged dim is copied (PyTorch's compute_source_index_and_lambda)
            continue
        if align:
            scale = (L - 1) / (Lo - 1) if Lo > 1 else 0.0
        else:
            scale = 1.0 / s if s else L / Lo
        res = np.zeros(y.shape[:ax + 2] + (Lo,) + y.shape[ax + 3:])
        for o in range(Lo):
            src = o * scale if align else max(scale * (o + 0.5) - 0.5, 0.0)
            i0 = int(src)
            i1 = i0 + (1 if i0 < L - 1 else 0)
            l1 = src - i0
            sl = [slice(None)] * y.ndim
            sl[ax + 2] = o
            a = np.take(y, i0, axis=ax + 2)
            b = np.take(y, i1, axis=ax + 2)
            res[tuple(sl)] = a * (1 - l1) + b * l1
        y = res
    return y


@on_devices
def test_interpolate_nearest(device):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    for kw, out, scales in [({"size": (10, 14)}, (10, 14), None), ({"size": (3, 4)}, (3, 4), None),
                            ({"scale_factor": 2}, (10, 14), (2.0, 2.0)),
                            ({"scale_factor": (1.5, 0.6)}, (7, 4), (1.5, 0.6)),
                            ({"size": (8, 7)}, (8, 7), None)]:
        y = Pd.interpolate(T(x, device), mode="nearest", **kw)
        np.testing.assert_array_equal(N(y), ref_nearest(x, out, scales))
    y = Pd.interpolate(T(x, device), size=(9, 4), mode="nearest-exact")
    np.testing.assert_array_equal(N(y), ref_nearest(x, (9, 4), None, exact=True))
    x1 = x[:, :, 0]
    np.testing.assert_array_equal(N(Pd.interpolate(T(x1, device), scale_factor=3)),
                                  ref_nearest(x1, (21,), (3.0,)))
    np.testing.assert_array_equal(N(Pd.interpolate(T(x, device), scale_factor=(2.05, 1.02))),
                                  ref_nearest(x, (10, 7), (2.05, 1.02)))


@on_devices
def test_interpolate_size_preserving_literals(device):
    # values from PyTorch 2.13: with a scale_factor that keeps a size, 2-d nearest and the linear modes copy
    # that dim, 1-d nearest does not; 2-d nearest maps a doubled dim by o // 2
    x1 = torch.arange(5, dtype=torch.float32, device=device).reshape(1, 1, 5)
    assert N(Pd.interpolate(x1, scale_factor=1.08)).tolist() == [[[0, 0, 1, 2, 3]]]
    assert N(Pd.interpolate(x1, scale_factor=1.08, mode="linear")).tolist() == [[[0, 1, 2, 3, 4]]]
    x = torch.arange(15, dtype=torch.float32, device=device).reshape(1, 1, 3, 5)
    assert N(Pd.interpolate(x, scale_factor=(2.3, 1.08)))[0, 0].tolist() == \
        [[0, 1, 2, 3, 4], [0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [5, 6, 7, 8, 9], [10, 11, 12, 13, 14], [10, 11, 12, 13, 14]]
    yb = N(Pd.interpolate(x, scale_factor=(2.3, 1.08), mode="bilinear"))[0, 0]
    np.testing.assert_allclose(yb[:, 0], [0.0, 0.7608695652173916, 2.934782608695653, 5.108695652173913,
                                          7.282608695652176, 9.456521739130435], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(yb[1], yb[1, 0] + np.arange(5), rtol=1e-5, atol=1e-5)


@on_devices
@pytest.mark.parametrize("align", [False, True])
def test_interpolate_linear_modes(device, align):
    rng = np.random.default_rng(12)
    x = rng.standard_normal((2, 2, 4, 5)).astype(np.float32)
    for kw, out, scales in [({"size": (7, 9)}, (7, 9), None), ({"size": (3, 2)}, (3, 2), None),
                            ({"scale_factor": 2.5}, (10, 12), (2.5, 2.5)), ({"size": (1, 6)}, (1, 6), None)]:
        y = Pd.interpolate(T(x, device), mode="bilinear", align_corners=align, **kw)
        sc = None if align else scales
        np.testing.assert_allclose(N(y), ref_linear(x, out, align, sc), rtol=1e-5, atol=1e-5)
    x1 = x[:, :, 0]
    np.testing.assert_allclose(N(Pd.interpolate(T(x1, device), size=11, mode="linear", align_corners=align)),
                               ref_linear(x1, (11,), align), rtol=1e-5, atol=1e-5)
    x3 = rng.standard_normal((1, 2, 3, 4, 2)).astype(np.float32)
    np.testing.assert_allclose(N(Pd.interpolate(T(x3, device), size=(5, 3, 4), mode="trilinear",
                                                align_corners=align)),
                               ref_linear(x3, (5, 3, 4), align), rtol=1e-5, atol=1e-5)


@on_devices
def test_interpolate_gradients_and_area(device):
    rng = np.random.default_rng(13)
    x = T(rng.standard_normal((1, 2, 3, 4)), device, requires_grad=True)
    assert gradcheck(lambda x: Pd.interpolate(x, size=(5, 7), mode="bilinear"), (x,))
    assert gradcheck(lambda x: Pd.interpolate(x, size=(2, 3), mode="bilinear", align_corners=True), (x,))
    assert gradgradcheck(lambda x: Pd.interpolate(x, scale_factor=2, mode="bilinear"), (x,))
    assert gradcheck(lambda x: Pd.interpolate(x, scale_factor=(2.5, 1.5), mode="nearest"), (x,))
    assert gradcheck(lambda x: Pd.interpolate(x, size=(2, 3), mode="nearest"), (x,))
    xa = rng.standard_normal((1, 2, 6, 4)).astype(np.float32)
    np.testing.assert_allclose(N(Pd.interpolate(T(xa, device), size=(3, 2), mode="area")),
                               ref_adaptive(xa, (3, 2), "avg")[0], rtol=1e-5, atol=1e-6)


@on_devices
def test_interpolate_errors(device):
    x = torch.zeros(1, 1, 4, 4, device=device)
    with pytest.raises(ValueError):
        Pd.interpolate(x, size=2, scale_factor=2)
    with pytest.raises(ValueError):
        Pd.interpolate(x)
    with pytest.raises(ValueError):
        Pd.interpolate(x, size=2, mode="nearest", align_corners=True)
    with pytest.raises(ValueError):
        Pd.interpolate(x, size=(2, 2, 2))
    with pytest.raises(NotImplementedError):
        Pd.interpolate(torch.zeros(1, 1, 4, device=device), size=2, mode="bilinear")
