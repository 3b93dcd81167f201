"""Every pointwise op against numpy, on every device, including random views (Hypothesis)."""
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

import cltorch as torch
from conftest import DEVICES, assert_close, to_np

RNG = np.random.default_rng(0)


def _erf(x):
    return np.vectorize(math.erf)(x)


UNARY = {
    "neg": np.negative, "abs": np.abs, "sign": np.sign, "reciprocal": lambda x: 1 / x, "exp": np.exp,
    "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
    "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "relu": lambda x: np.maximum(x, 0), "erf": _erf,
    "floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc, "frac": lambda x: x - np.trunc(x),
    "silu": lambda x: x / (1 + np.exp(-x)), "gelu": lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))),
    "softplus": lambda x: np.log1p(np.exp(x)),
}
POSITIVE = {"log", "log2", "log10", "sqrt", "rsqrt", "log1p"}
UNIT = {"asin", "acos"}

BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "maximum": np.maximum,
    "minimum": np.minimum, "atan2": np.arctan2, "pow": np.power, "remainder": np.remainder, "fmod": np.fmod,
    "floor_divide": np.floor_divide, "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal,
}


def _input(name, shape):
    x = RNG.standard_normal(shape).astype(np.float32) * 2
    if name in POSITIVE:
        x = np.abs(x) + 0.1
    if name in UNIT:
        x = np.tanh(x) * 0.9
    return x


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, device):
    x = _input(name, (3, 5))
    t = torch.tensor(x, device=device)
    fn = getattr(torch, name) if hasattr(torch, name) else getattr(torch.Tensor, name)
    assert_close(fn(t), UNARY[name](x.astype(np.float64)).astype(np.float32), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_broadcast_and_scalars(name, device):
    a = RNG.standard_normal((4, 1, 3)).astype(np.float32)
    b = RNG.standard_normal((5, 1)).astype(np.float32) + 0.5
    if name == "pow":
        a = np.abs(a) + 0.5
    ta, tb = torch.tensor(a, device=device), torch.tensor(b, device=device)
    fn = getattr(torch, name)
    ref = BINARY[name](a, b)
    assert_close(fn(ta, tb), ref, rtol=2e-5, atol=2e-6)
    assert_close(fn(ta, 1.5), BINARY[name](a, np.float32(1.5)), rtol=2e-5, atol=2e-6)


def test_integer_ops_exact(device):
    a = np.array([-7, 7, -7, 7, 0, 123456789012], dtype=np.int64)
    b = np.array([3, -3, -3, 3, 5, 7], dtype=np.int64)
    ta, tb = torch.tensor(a, device=device), torch.tensor(b, device=device)
    assert to_np(ta // tb).tolist() == (a // b).tolist()
    assert to_np(ta % tb).tolist() == (a % b).tolist()
    assert to_np(torch.fmod(ta, tb)).tolist() == np.fmod(a, b).tolist()
    assert to_np(ta * tb).tolist() == (a * b).tolist()
    assert to_np(ta & tb).tolist() == (a & b).tolist() and to_np(ta ^ tb).tolist() == (a ^ b).tolist()
    assert to_np(~ta).tolist() == (~a).tolist()
    assert to_np(ta.pow(2)).tolist() == (a ** 2).tolist()


def test_where_clamp_lerp_addc_masked_fill_nan_to_num(device):
    a = RNG.standard_normal((3, 4)).astype(np.float32)
    b = RNG.standard_normal((3, 4)).astype(np.float32)
    c = RNG.standard_normal((4,)).astype(np.float32) + 2
    ta, tb, tc = (torch.tensor(v, device=device) for v in (a, b, c))
    assert_close(torch.where(ta > 0, ta, tb), np.where(a > 0, a, b))
    assert_close(torch.where(ta > 0, ta, 0.0), np.where(a > 0, a, 0))
    assert_close(ta.clamp(-0.5, 0.5), np.clip(a, -0.5, 0.5))
    assert_close(ta.clamp(min=tb), np.maximum(a, b))
    assert_close(torch.lerp(ta, tb, 0.3), a + 0.3 * (b - a), rtol=1e-5)
    assert_close(torch.addcmul(ta, tb, tc, value=0.5), a + 0.5 * b * c, rtol=1e-5)
    assert_close(torch.addcdiv(ta, tb, tc, value=2), a + 2 * b / c, rtol=1e-5)
    assert_close(ta.masked_fill(ta < 0, -1.0), np.where(a < 0, -1, a))
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), 1.0], device=device)
    assert_close(torch.nan_to_num(x), [0, np.finfo(np.float32).max, np.finfo(np.float32).min, 1])
    assert to_np(torch.isnan(x)).tolist() == [True, False, False, False]
    assert to_np(torch.isinf(x)).tolist() == [False, True, True, False]
    assert to_np(torch.isfinite(x)).tolist() == [False, False, False, True]
    assert_close(torch.gelu(ta, approximate="tanh"),
                 0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a ** 3))), rtol=1e-5, atol=1e-6)


def test_inplace_and_reflected_forms(device):
    a = RNG.standard_normal((2, 3)).astype(np.float32)
    t = torch.tensor(a, device=device)
    assert_close(2 - t, 2 - a)
    assert_close(2 / t, 2 / a, rtol=1e-5)
    assert_close(2 ** t, 2 ** a, rtol=1e-5)
    t2 = t.clone()
    t2 *= 3
    t2 -= 1
    t2 /= 2
    assert_close(t2, (a * 3 - 1) / 2, rtol=1e-6)
    t3 = t.clone()
    t3.exp_().sqrt_()
    assert_close(t3, np.sqrt(np.exp(a)), rtol=1e-5)


def test_casts(device):
    x = torch.tensor([-1.7, -0.2, 0.0, 0.6, 2.5], device=device)
    assert to_np(x.long()).tolist() == [-1, 0, 0, 0, 2]
    assert to_np(x.bool()).tolist() == [True, True, False, True, True]
    assert to_np(x.to(torch.float64)).dtype == np.float64
    assert to_np(torch.tensor([True, False], device=device).float()).tolist() == [1.0, 0.0]


def _view_of(data, kind, device):
    t = torch.tensor(data, device=device)
    if kind == "t":
        return t.t(), data.T
    if kind == "step":
        return t[::2], data[::2]
    if kind == "narrow":
        return t[1:], data[1:]
    if kind == "expand":
        return t[:1].expand(data.shape[0], data.shape[1]), np.broadcast_to(data[:1], data.shape)
    return t, data


@given(rows=st.integers(1, 9), cols=st.integers(1, 9),
       ka=st.sampled_from(["plain", "t", "step", "narrow", "expand"]),
       kb=st.sampled_from(["plain", "t", "step", "narrow", "expand"]),
       op=st.sampled_from(["add", "mul", "sub", "maximum"]), dev=st.sampled_from(DEVICES))
def test_hypothesis_views_elementwise(rows, cols, ka, kb, op, dev):
    rng = np.random.default_rng(rows * 31 + cols)
    n = 2 * max(rows, cols) + 2
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    ta, na = _view_of(a, ka, dev)
    tb, nb = _view_of(b, kb, dev)
    ta, na = ta[:rows, :cols], na[:rows, :cols]
    tb, nb = tb[:rows, :cols], nb[:rows, :cols]
    assert_close(getattr(torch, op)(ta, tb), getattr(np, {"add": "add", "mul": "multiply", "sub": "subtract",
                                                             "maximum": "maximum"}[op])(na, nb))
