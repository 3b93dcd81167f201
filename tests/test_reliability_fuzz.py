"""Reliability (issue 10): property and fuzz tests.

- Hypothesis draws seeds for random op chains (views, elementwise, reductions, matmul, indexing) on random
  shapes (size 0 included) and dtypes (float32, float64, int32, int64, bool). Each chain runs on every device and
  is compared step by step with numpy (each op on the device's own input): values, shape and PyTorch's result
  dtype (written out per op below, not taken from numpy's promotion). Float64 chains of differentiable ops are
  gradchecked against finite differences.
- Size-zero and 0-d tensors go through every op family with PyTorch's result shapes and values.

CI runs a bounded number of examples; ``benchmarks/fuzz.py`` runs the same chains for N minutes.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

import cltorch as torch
import cltorch.nn.functional as F
from cltorch.autograd import gradcheck
from conftest import DEVICES, to_np

NP = {torch.float32: np.float32, torch.float64: np.float64, torch.int32: np.int32, torch.int64: np.int64,
      torch.bool: np.bool_}
TORCH = {np.dtype(v): k for k, v in NP.items()}
DTYPES = list(NP)


def _is_float(a):
    return a.dtype.kind == "f"


def _float_of(a):
    """PyTorch's float result dtype for a: float inputs keep theirs, ints and bool become float32."""
    return a.dtype if _is_float(a) else np.dtype(np.float32)


def _int_sum(a):
    """sum of bool/int tensors is int64 in PyTorch."""
    return np.int64 if a.dtype.kind in "biu" else a.dtype


# ------------------------------------------------------------------------------------------ the ops
# each op: (name, applicable(array) -> bool, draw(data, array) -> params, torch_fn(t, p), numpy_fn(a, p))
def _nd(k):
    return lambda a: a.ndim >= k


OPS = [
    # views
    ("transpose", _nd(2), None, lambda t, p: t.transpose(0, -1), lambda a, p: np.swapaxes(a, 0, -1)),
    ("reshape", lambda a: True, None, lambda t, p: t.reshape(-1), lambda a, p: a.reshape(-1)),
    ("step-slice", _nd(1), None, lambda t, p: t[::2], lambda a, p: a[::2]),
    ("unsqueeze", lambda a: a.ndim < 4, None, lambda t, p: t.unsqueeze(1 if t.dim() else 0),
     lambda a, p: np.expand_dims(a, 1 if a.ndim else 0)),
    ("flip", _nd(1), None, lambda t, p: torch.flip(t, (0,)), lambda a, p: np.flip(a, 0)),
    ("permute", lambda a: a.ndim == 3, None, lambda t, p: t.permute(2, 0, 1),
     lambda a, p: np.transpose(a, (2, 0, 1))),
    ("select-last", lambda a: a.ndim >= 1 and a.shape[0] > 0, None, lambda t, p: t[-1], lambda a, p: a[-1]),
    ("expand", lambda a: a.ndim >= 1 and a.shape[0] == 1 and a.ndim < 4, None,
     lambda t, p: t.expand(3, *t.shape[1:]), lambda a, p: np.broadcast_to(a, (3,) + a.shape[1:])),
    ("contiguous", lambda a: True, None, lambda t, p: t.contiguous(), lambda a, p: a),
    # elementwise
    ("add-int", lambda a: True, None, lambda t, p: t + 3,
     lambda a, p: a.astype(np.int64) + 3 if a.dtype == np.bool_ else a + a.dtype.type(3)),
    ("mul-half", lambda a: True, None, lambda t, p: t * 0.5,
     lambda a, p: a.astype(_float_of(a)) * _float_of(a).type(0.5)),
    ("square", lambda a: _is_float(a) or a.dtype == np.bool_, None, lambda t, p: t * t, lambda a, p: a * a),
    ("neg", lambda a: a.dtype != np.bool_, None, lambda t, p: -t, lambda a, p: -a),
    ("abs", lambda a: a.dtype != np.bool_, None, lambda t, p: t.abs(), lambda a, p: np.abs(a)),
    ("tanh", lambda a: True, None, lambda t, p: torch.tanh(t), lambda a, p: np.tanh(a.astype(_float_of(a)))),
    ("exp", lambda a: _is_float(a), None, lambda t, p: (t * 0.1).exp(),
     lambda a, p: np.exp(a * a.dtype.type(0.1))),
    ("maximum-flip", lambda a: a.ndim >= 1 and a.dtype != np.bool_, None,
     lambda t, p: torch.maximum(t, torch.flip(t, (-1,))), lambda a, p: np.maximum(a, np.flip(a, -1))),
    ("where", lambda a: a.dtype != np.bool_, None, lambda t, p: torch.where(t > 0, t, -t),
     lambda a, p: np.where(a > 0, a, -a)),
    ("gt", lambda a: True, None, lambda t, p: t > 1, lambda a, p: a > 1),
    ("to-float64", lambda a: True, None, lambda t, p: t.double(), lambda a, p: a.astype(np.float64)),
    ("to-int64", lambda a: not _is_float(a), None, lambda t, p: t.long(), lambda a, p: a.astype(np.int64)),
    # reductions
    ("sum0", _nd(1), None, lambda t, p: t.sum(0), lambda a, p: a.sum(0, dtype=_int_sum(a))),
    ("sum-all", lambda a: True, None, lambda t, p: t.sum(), lambda a, p: np.asarray(a.sum(dtype=_int_sum(a)))),
    ("amax-last", lambda a: a.ndim >= 1 and a.shape[-1] > 0 and a.dtype != np.bool_, None,
     lambda t, p: t.amax(-1), lambda a, p: a.max(-1)),
    ("mean0", lambda a: a.ndim >= 1 and a.shape[0] > 0 and _is_float(a), None, lambda t, p: t.mean(0),
     lambda a, p: a.mean(0, dtype=np.float64).astype(a.dtype)),
    ("max-dim-values", lambda a: a.ndim >= 1 and a.shape[-1] > 0 and a.dtype != np.bool_, None,
     lambda t, p: t.max(-1)[0], lambda a, p: a.max(-1)),
    # matmul
    ("gram", lambda a: a.ndim in (2, 3) and _is_float(a), None, lambda t, p: t @ t.transpose(-1, -2),
     lambda a, p: a @ np.swapaxes(a, -1, -2)),
    # indexing
    ("index", lambda a: a.ndim >= 1 and a.shape[0] > 0,
     lambda rng, a: [int(v) for v in rng.integers(-a.shape[0], a.shape[0], size=rng.integers(0, 6))],
     lambda t, p: t[torch.tensor(p, dtype=torch.int64, device=t.device)], lambda a, p: a[np.asarray(p, np.int64)]),
    ("gather-last", lambda a: a.ndim >= 1 and a.shape[-1] > 0,
     lambda rng, a: int(rng.integers(2 ** 31)),
     lambda t, p: torch.gather(t, -1, torch.tensor(_gather_idx(t.shape, p), device=t.device)),
     lambda a, p: np.take_along_axis(a, _gather_idx(a.shape, p), -1)),
    ("mask", lambda a: a.dtype != np.bool_, None, lambda t, p: t[t > 0], lambda a, p: a[a > 0]),
]
OP_NAMES = [o[0] for o in OPS]


def _gather_idx(shape, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, shape[-1], size=tuple(shape[:-1]) + (max(shape[-1] - 1, 1),)).astype(np.int64)


def _tol(dtype):
    return {np.float32: (2e-4, 1e-4), np.float64: (1e-10, 1e-12)}.get(dtype.type, (0, 0))


def _check(t, a, where):
    got = to_np(t)
    assert t.dtype == TORCH[np.dtype(a.dtype)], f"{where}: dtype {t.dtype}, PyTorch gives {a.dtype}"
    assert got.shape == a.shape, f"{where}: shape {got.shape} != {a.shape}"
    rtol, atol = _tol(a.dtype)
    if rtol:
        np.testing.assert_allclose(got, a, rtol=rtol, atol=atol * max(1.0, float(np.abs(a).max(initial=0))),
                                   equal_nan=True, err_msg=where)
    else:
        np.testing.assert_array_equal(got, a, err_msg=where)


def make_start(rng):
    """A random start tensor: dtype, 0-3 dims of size 0-4 each (a zero in about a fifth of the dims), values."""
    dtype = DTYPES[rng.integers(len(DTYPES))]
    shape = tuple(int(v) for v in rng.integers(0, 5, size=rng.integers(0, 4)))
    n = int(np.prod(shape))
    if dtype is torch.bool:
        a = rng.random(n) > 0.5
    elif dtype.is_floating_point:
        a = rng.uniform(-3, 3, n)
    else:
        a = rng.integers(-5, 6, n)
    return a.astype(NP[dtype]).reshape(shape)


def run_chain(seed, max_ops=5):
    """Draw a start tensor and a chain of up to ``max_ops`` ops from ``seed`` (uniform choices: Hypothesis's own
    draws lean towards the first and smallest options), run it on every device and compare each step with numpy.
    Returns the op names."""
    rng = np.random.default_rng(seed)
    a0 = a = make_start(rng)
    steps = []
    for _ in range(rng.integers(1, max_ops + 1)):
        choices = [o for o in OPS if o[1](a)]
        name, _, drawp, tf, nf = choices[rng.integers(len(choices))]
        p = drawp(rng, a) if drawp else None
        a = np.asarray(nf(a, p))
        steps.append((name, p, tf, a))
    for dev in DEVICES:
        t = torch.tensor(a0, device=dev)
        trail = []
        for name, p, tf, _ in steps:
            trail.append(name)
            nf = OPS[OP_NAMES.index(name)][4]
            ref = np.asarray(nf(to_np(t), p))     # numpy on the device's own input: float32 ulps do not pile up
            t = tf(t, p)
            _check(t, ref, f"seed {seed} on {dev}: {a0.dtype}{list(a0.shape)} -> {' -> '.join(trail)}")
    return [s[0] for s in steps]


@settings(deadline=None, derandomize=True, max_examples=150, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2 ** 63 - 1))
def test_random_op_chains_match_numpy(seed):
    run_chain(seed)


# differentiable float64 chains for gradcheck (tiny shapes: gradcheck costs 2 forwards per input element)
GRAD_OPS = [
    ("transpose", lambda s: len(s) >= 2, lambda t, p: t.transpose(0, -1)),
    ("reshape", lambda s: True, lambda t, p: t.reshape(-1)),
    ("step-slice", lambda s: len(s) >= 1, lambda t, p: t[::2]),
    ("flip", lambda s: len(s) >= 1, lambda t, p: torch.flip(t, (0,))),
    ("expand-mul", lambda s: True, lambda t, p: t.unsqueeze(0).expand(2, *t.shape) * torch.tensor(
        [[1.0], [-0.5]] if t.dim() else [1.0, -0.5], dtype=torch.float64, device=t.device).reshape(
        (2,) + (1,) * t.dim())),
    ("tanh", lambda s: True, lambda t, p: torch.tanh(t)),
    ("sin-mul", lambda s: True, lambda t, p: t.sin() * t),
    ("exp", lambda s: True, lambda t, p: (t * 0.3).exp()),
    ("square", lambda s: True, lambda t, p: t * t + 1),
    ("sum0", lambda s: len(s) >= 1, lambda t, p: t.sum(0)),
    ("mean-last", lambda s: len(s) >= 1 and s[-1] > 0, lambda t, p: t.mean(-1)),
    ("amax-last", lambda s: len(s) >= 1 and s[-1] > 0, lambda t, p: t.amax(-1)),
    ("softmax", lambda s: len(s) >= 1 and s[-1] > 0, lambda t, p: torch.softmax(t, -1)),
    ("gram", lambda s: len(s) == 2, lambda t, p: t @ t.t()),
    ("index", lambda s: len(s) >= 1 and s[0] > 0, lambda t, p: t[torch.tensor(p, device=t.device)]),
]


def run_grad_chain(seed, max_ops=3):
    """A random float64 chain of differentiable ops on a tiny random shape (distinct values: no amax ties),
    gradchecked on every device. Returns the op names."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(v) for v in rng.integers(1, 4, size=rng.integers(0, 3)))
    steps, s = [], shape
    for _ in range(rng.integers(1, max_ops + 1)):
        choices = [o for o in GRAD_OPS if o[1](s)]
        name, _, fn = choices[rng.integers(len(choices))]
        p = [int(v) for v in rng.integers(0, s[0], size=rng.integers(1, 4))] if name == "index" else None
        steps.append((name, fn, p))
        s = tuple(fn(torch.zeros(s, dtype=torch.float64), p).shape)
    n = int(np.prod(shape))
    x0 = (rng.permutation(n) * 0.23 - 0.4 + rng.uniform(-0.05, 0.05, n)).reshape(shape)

    def chain(t):
        for _, fn, p in steps:
            t = fn(t, p)
        return t
    for dev in DEVICES:
        x = torch.tensor(x0, dtype=torch.float64, device=dev, requires_grad=True)
        try:
            gradcheck(chain, (x,), eps=1e-6, atol=1e-6, rtol=1e-4)
        except RuntimeError as e:
            raise AssertionError(f"seed {seed} on {dev}: {list(shape)} -> {' -> '.join(st[0] for st in steps)}: "
                                 f"{e}") from None
    return [st[0] for st in steps]


@settings(deadline=None, derandomize=True, max_examples=25, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2 ** 63 - 1))
def test_random_chain_gradients_match_finite_differences(seed):
    run_grad_chain(seed)


# ------------------------------------------------------------------------------------------ size 0 and 0-d
def _z(dev, *shape):
    return torch.zeros(*shape, device=dev)


def _o(dev, *shape):
    return torch.ones(*shape, device=dev)


def _e(dev):
    return torch.tensor([], dtype=torch.int64, device=dev)


NAN, INF = float("nan"), float("inf")
# (family, label, fn(dev), PyTorch's result shape, expected values or None)
ZERO = [
    ("elementwise", "x + 1", lambda d: _z(d, 0, 3) + 1, (0, 3), None),
    ("elementwise", "x * ones(3)", lambda d: _z(d, 0, 3) * _o(d, 3), (0, 3), None),
    ("elementwise", "broadcast (2,0,1)+(0,3)", lambda d: _z(d, 2, 0, 1) + _z(d, 0, 3), (2, 0, 3), None),
    ("elementwise", "exp", lambda d: torch.exp(_z(d, 0, 3)), (0, 3), None),
    ("elementwise", "where", lambda d: torch.where(_z(d, 0, 3) > 0, _z(d, 0, 3), 1.0), (0, 3), None),
    ("elementwise", "in-place", lambda d: _z(d, 0, 3).add_(1).mul_(2), (0, 3), None),
    ("reduction", "sum(0)", lambda d: _z(d, 0, 3).sum(0), (3,), [0.0, 0.0, 0.0]),
    ("reduction", "sum(1)", lambda d: _z(d, 0, 3).sum(1), (0,), None),
    ("reduction", "sum()", lambda d: _z(d, 0, 3).sum(), (), 0.0),
    ("reduction", "mean(0)", lambda d: _z(d, 0, 3).mean(0), (3,), [NAN, NAN, NAN]),
    ("reduction", "prod(0)", lambda d: _z(d, 0, 3).prod(0), (3,), [1.0, 1.0, 1.0]),
    ("reduction", "amax(1)", lambda d: _z(d, 0, 3).amax(1), (0,), None),
    ("reduction", "max(1).indices", lambda d: _z(d, 0, 3).max(1)[1], (0,), None),
    ("reduction", "any(0)", lambda d: _z(d, 0, 3).any(0), (3,), [False] * 3),
    ("reduction", "all(0)", lambda d: _z(d, 0, 3).all(0), (3,), [True] * 3),
    ("reduction", "logsumexp(0)", lambda d: torch.logsumexp(_z(d, 0, 3), 0), (3,), [-INF] * 3),
    ("view", "t()", lambda d: _z(d, 0, 3).t(), (3, 0), None),
    ("view", "reshape(3, 0)", lambda d: _z(d, 0, 3).reshape(3, 0), (3, 0), None),
    ("view", "reshape(-1)", lambda d: _z(d, 0, 3).reshape(-1), (0,), None),
    ("view", "unsqueeze(1)", lambda d: _z(d, 0, 3).unsqueeze(1), (0, 1, 3), None),
    ("view", "slice", lambda d: _z(d, 0, 3)[:, 1:], (0, 2), None),
    ("view", "expand", lambda d: _z(d, 0, 3).expand(2, 0, 3), (2, 0, 3), None),
    ("view", "flip", lambda d: torch.flip(_z(d, 0, 3), (0,)), (0, 3), None),
    ("matmul", "(0,3)@(3,2)", lambda d: _z(d, 0, 3) @ _o(d, 3, 2), (0, 2), None),
    ("matmul", "(2,0)@(0,3)", lambda d: _o(d, 2, 0) @ _o(d, 0, 3), (2, 3), [[0.0] * 3] * 2),
    ("matmul", "bmm batch 0", lambda d: torch.bmm(_z(d, 0, 2, 3), _z(d, 0, 3, 4)), (0, 2, 4), None),
    ("matmul", "linear", lambda d: F.linear(_z(d, 0, 3), _o(d, 4, 3), _o(d, 4)), (0, 4), None),
    ("indexing", "x[empty]", lambda d: _o(d, 4, 3)[_e(d)], (0, 3), None),
    ("indexing", "x[mask none]", lambda d: _o(d, 3)[_z(d, 3) > 0], (0,), None),
    ("indexing", "gather empty", lambda d: torch.gather(_o(d, 2, 3), 1, _e(d).reshape(2, 0)), (2, 0), None),
    ("indexing", "index_select empty", lambda d: torch.index_select(_o(d, 4, 3), 0, _e(d)), (0, 3), None),
    ("indexing", "nonzero", lambda d: _z(d, 0, 3).nonzero(), (0, 2), None),
    ("indexing", "scatter_add empty", lambda d: _o(d, 3).scatter_add(0, _e(d), _z(d, 0)), (3,), [1.0] * 3),
    ("joins", "cat with empty", lambda d: torch.cat([_z(d, 0, 3), _o(d, 2, 3)]), (2, 3), [[1.0] * 3] * 2),
    ("joins", "cat dim 1", lambda d: torch.cat([_z(d, 0, 3), _z(d, 0, 3)], 1), (0, 6), None),
    ("joins", "stack", lambda d: torch.stack([_z(d, 0, 3), _z(d, 0, 3)]), (2, 0, 3), None),
    ("sort/scan", "sort", lambda d: torch.sort(_z(d, 0, 3), 1)[0], (0, 3), None),
    ("sort/scan", "cumsum", lambda d: torch.cumsum(_z(d, 3, 0), 1), (3, 0), None),
    ("sort/scan", "topk 0", lambda d: torch.topk(_o(d, 2, 3), 0)[0], (2, 0), None),
    ("softmax/norm", "softmax", lambda d: F.softmax(_z(d, 0, 3), 1), (0, 3), None),
    ("softmax/norm", "log_softmax dim 0", lambda d: F.log_softmax(_z(d, 0, 3), 0), (0, 3), None),
    ("softmax/norm", "layer_norm", lambda d: F.layer_norm(_z(d, 0, 3), (3,)), (0, 3), None),
    ("loss", "cross_entropy mean", lambda d: F.cross_entropy(_z(d, 0, 3), _e(d)), (), NAN),
    ("loss", "cross_entropy sum", lambda d: F.cross_entropy(_z(d, 0, 3), _e(d), reduction="sum"), (), 0.0),
    ("loss", "mse", lambda d: F.mse_loss(_z(d, 0, 3), _z(d, 0, 3)), (), NAN),
    ("conv/pool", "conv2d N=0", lambda d: F.conv2d(_z(d, 0, 1, 4, 4), _o(d, 2, 1, 3, 3)), (0, 2, 2, 2), None),
    ("conv/pool", "max_pool2d N=0", lambda d: F.max_pool2d(_z(d, 0, 1, 4, 4), 2), (0, 1, 2, 2), None),
    ("conv/pool", "avg_pool2d N=0", lambda d: F.avg_pool2d(_z(d, 0, 1, 4, 4), 2), (0, 1, 2, 2), None),
    ("embedding", "no indices", lambda d: F.embedding(_e(d), _o(d, 4, 2)), (0, 2), None),
    ("creation", "arange(0)", lambda d: torch.arange(0, device=d), (0,), None),
    ("creation", "randn(0, 2)", lambda d: torch.randn(0, 2, device=d), (0, 2), None),
]


def _s(dev, v=2.0):
    return torch.tensor(v, device=dev)


SCALAR = [
    ("elementwise", "s + 1", lambda d: _s(d) + 1, (), 3.0),
    ("elementwise", "s * ones(3)", lambda d: _s(d) * _o(d, 3), (3,), [2.0] * 3),
    ("elementwise", "exp", lambda d: torch.exp(_s(d, 0.0)), (), 1.0),
    ("elementwise", "clamp", lambda d: _s(d).clamp(0, 1), (), 1.0),
    ("elementwise", "where", lambda d: torch.where(_s(d) > 0, _s(d), 0.0), (), 2.0),
    ("elementwise", "in-place", lambda d: _s(d).mul_(3), (), 6.0),
    ("reduction", "sum()", lambda d: _s(d).sum(), (), 2.0),
    ("reduction", "sum(0)", lambda d: _s(d).sum(0), (), 2.0),
    ("reduction", "mean(-1)", lambda d: _s(d).mean(-1), (), 2.0),
    ("reduction", "amax()", lambda d: _s(d).amax(), (), 2.0),
    ("reduction", "max(0).values", lambda d: _s(d).max(0)[0], (), 2.0),
    ("reduction", "max(0).indices", lambda d: _s(d).max(0)[1], (), 0),
    ("reduction", "argmax()", lambda d: _s(d).argmax(), (), 0),
    ("view", "reshape(1)", lambda d: _s(d).reshape(1), (1,), [2.0]),
    ("view", "unsqueeze(0)", lambda d: _s(d).unsqueeze(0), (1,), [2.0]),
    ("view", "expand(2, 3)", lambda d: _s(d).expand(2, 3), (2, 3), [[2.0] * 3] * 2),
    ("view", "s[None]", lambda d: _s(d)[None], (1,), [2.0]),
    ("view", "s[()]", lambda d: _s(d)[()], (), 2.0),
    ("view", "t()", lambda d: _s(d).t(), (), 2.0),
    ("matmul", "(3,)@(3,) is 0-d", lambda d: _o(d, 3) @ _o(d, 3), (), 3.0),
    ("indexing", "vector[0-d index]", lambda d: _o(d, 3)[torch.tensor(1, device=d)], (), 1.0),
    ("indexing", "gather 0-d", lambda d: torch.gather(_s(d), 0, torch.tensor(0, device=d)), (), 2.0),
    ("joins", "stack", lambda d: torch.stack([_s(d), _s(d, 3.0)]), (2,), [2.0, 3.0]),
    ("sort/scan", "sort", lambda d: torch.sort(_s(d))[0], (), 2.0),
    ("sort/scan", "cumsum", lambda d: torch.cumsum(_s(d), 0), (), 2.0),
    ("softmax/norm", "softmax", lambda d: F.softmax(_s(d), 0), (), 1.0),
    ("softmax/norm", "log_softmax", lambda d: F.log_softmax(_s(d), 0), (), 0.0),
    ("loss", "unbatched cross_entropy", lambda d: F.cross_entropy(_z(d, 3), torch.tensor(1, device=d)), (),
     float(np.log(3))),
    ("loss", "mse 0-d", lambda d: F.mse_loss(_s(d), _s(d, 1.0)), (), 1.0),
    ("embedding", "0-d index", lambda d: F.embedding(torch.tensor(1, device=d), _o(d, 4, 2)), (2,), [1.0, 1.0]),
    ("creation", "full(())", lambda d: torch.full((), 7.0, device=d), (), 7.0),
]


def _case_ids(cases, prefix):
    return [f"{prefix}-{c[0]}:{c[1]}" for c in cases]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", ZERO + SCALAR, ids=_case_ids(ZERO, "size0") + _case_ids(SCALAR, "0d"))
def test_size_zero_and_scalar_shapes(case, device):
    _, label, fn, shape, values = case
    r = fn(device)
    assert tuple(r.shape) == shape, f"{label}: {tuple(r.shape)}, PyTorch gives {shape}"
    if values is not None:
        np.testing.assert_array_equal(to_np(r), np.asarray(values, dtype=to_np(r).dtype))


@pytest.mark.parametrize("device", DEVICES)
def test_size_zero_and_scalar_errors_and_gradients(device):
    s = _s(device)
    with pytest.raises(RuntimeError, match="zero-dimensional tensor .*cannot be concatenated"):
        torch.cat([s, s])
    with pytest.raises((RuntimeError, IndexError), match="non-zero size|empty"):
        _z(device, 0, 3).amax(0)
    with pytest.raises((RuntimeError, IndexError)):
        _z(device, 0, 3).max(0)
    # gradients keep the shapes
    x = torch.zeros(0, 3, device=device, requires_grad=True)
    (x * 2).sum().backward()
    assert tuple(x.grad.shape) == (0, 3)
    w = torch.ones(3, 2, device=device, requires_grad=True)
    (torch.zeros(0, 3, device=device) @ w).sum().backward()
    assert to_np(w.grad).tolist() == [[0.0, 0.0]] * 3
    v = torch.tensor(3.0, device=device, requires_grad=True)
    (v * v).backward()
    assert tuple(v.grad.shape) == () and v.grad.item() == 6.0
