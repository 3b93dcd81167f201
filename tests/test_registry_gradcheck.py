"""Table-driven gradient checks over the op registry (issue 4, "Tests"), in the spirit of PyTorch's OpInfo.

Every op registered in ``cltorch._dispatch.REGISTRY`` with a derivative (``op.backward is not None``) needs an
entry in ``SAMPLES``: one or more small float64 sample calls, each a function built from the public API plus
the inputs to call it with. Each sample runs ``cltorch.autograd.gradcheck`` (central finite differences in
float64) on every device. Before the check, the sample is run once under a tracer that records which registered
ops autograd saw, and the op under test must be among them: a sample that silently takes another path (a math
fallback, a composed backward) fails rather than passing without testing the op.

Ops that exist only as the derivative of another op (``max_pool2d_scatter``, ``avg_pool2d_backward``,
``convolution_weight``, ``view_scatter`` ...) are reached through their public parent: the sample is the first
(or second) derivative of the public op as a function of its grad_output, built with ``create_graph=True``.

A registered differentiable op without a sample fails ``test_every_differentiable_op_has_a_sample`` (naming the
ops); a sample whose op is no longer registered fails too.

``gradgradcheck`` (second derivatives) runs for the pointwise ops, matmul, sum/mean/amax, softmax/log_softmax,
cross_entropy and layer_norm.
"""
import contextlib
import math

import numpy as np
import pytest

import cltorch as torch
import cltorch.nn.functional as F
from cltorch import _dispatch, autograd
from cltorch._dispatch import REGISTRY
from cltorch.autograd import gradcheck, gradgradcheck
from conftest import DEVICES
from cltorch.ops import rnn as _rnn


# ------------------------------------------------------------------------------------------ input specs
class U:
    """A float64 input drawn uniformly from [lo, hi]; ``away``: |x| is at least ``away`` (random sign);
    ``frac``: x = integer + u with u in ``frac`` (keeps floor/round/remainder away from their jumps)."""

    def __init__(self, *shape, lo=-1.0, hi=1.0, away=None, frac=None, grad=True):
        self.shape, self.lo, self.hi, self.away, self.frac, self.grad = shape, lo, hi, away, frac, grad

    def make(self, device, rng):
        if self.away is not None:
            x = rng.uniform(self.away, self.hi, self.shape) * rng.choice([-1.0, 1.0], self.shape)
        elif self.frac is not None:
            x = rng.integers(-2, 3, self.shape) + rng.uniform(*self.frac, self.shape)
        else:
            x = rng.uniform(self.lo, self.hi, self.shape)
        return torch.tensor(x, dtype=torch.float64, device=device, requires_grad=self.grad)


class P(U):
    """Distinct values (a permutation of a spread grid): no ties for max/sort/pool."""

    def make(self, device, rng):
        n = int(np.prod(self.shape))
        x = (rng.permutation(n) - n / 2) * 0.37 + rng.uniform(-0.05, 0.05, n)
        return torch.tensor(x.reshape(self.shape), dtype=torch.float64, device=device, requires_grad=self.grad)


class K:
    """A constant (non-differentiable) tensor: indices, masks, targets."""

    def __init__(self, value, dtype):
        self.value, self.dtype = value, dtype

    def make(self, device, rng):
        return torch.tensor(self.value, dtype=self.dtype, device=device)


class V:
    """Fixed float64 values that require grad (zeros and ties on purpose)."""

    def __init__(self, value):
        self.value = value

    def make(self, device, rng):
        return torch.tensor(self.value, dtype=torch.float64, device=device, requires_grad=True)


def _i(v):
    return K(v, torch.int64)


def _b(v):
    return K(v, torch.bool)


# ------------------------------------------------------------------------------------------ derivative helpers
def _d1(f, wrt=0):
    """(inputs..., g) -> d<f(inputs)>/d<inputs[wrt]> . g, with a graph: reaches the ops in f's backward."""
    def fn(*args):
        ins, g = args[:-1], args[-1]
        return autograd.grad(f(*ins), ins[wrt], g, create_graph=True)[0]
    return fn


def _d1_all(f):
    """(inputs..., g) -> every input's gradient (tuple), with a graph."""
    def fn(*args):
        ins, g = args[:-1], args[-1]
        return autograd.grad(f(*ins), ins, g, create_graph=True)
    return fn


def _d2(f):
    """(x, g, gg) -> d/dg <d f(x)/dx . g, gg>: reaches the ops in the backward of f's backward."""
    def fn(x, g, gg):
        gx = autograd.grad(f(x), x, g, create_graph=True)[0]
        return autograd.grad(gx, g, gg, create_graph=True)[0]
    return fn


def _setitem_nonleaf(x, v):
    y = x * 1
    y[0, 1:] = v * 2
    return y


def _I3(x):
    """3 I in x's dtype and device (keeps linalg samples well-conditioned)."""
    return 3 * torch.eye(3, dtype=x.dtype, device=x.device)


def _other_device(x):
    return x.to("cl:0" if x.device.type == "cpu" else "cpu")


# ------------------------------------------------------------------------------------------ the table
S = (2, 3)
POS = dict(lo=0.3, hi=2.0)
UNIT = dict(lo=-0.8, hi=0.8)
I23 = [[0, 2, 1], [1, 1, 0]]          # an index into dim 1 of a (2, 3) tensor (repeats: accumulation)
PERM = [[2, 0, 1], [1, 2, 0]]         # distinct positions per row (scatter without collisions)

SAMPLES = {
    # --- pointwise, binary (the second operand broadcasts: the engine reduces its gradient)
    "add": [(lambda a, b: torch.add(a, b, alpha=2.0), [U(*S), U(3)])],
    "sub": [(lambda a, b: a - b, [U(*S), U(2, 1)])],
    "mul": [(lambda a, b: a * b, [U(*S), U(3)]), (lambda a: 3.0 * a, [U(*S)])],
    "true_divide": [(lambda a, b: a / b, [U(*S), U(3, away=0.5)]), (lambda b: 2.0 / b, [U(*S, away=0.5)])],
    "atan2": [(torch.atan2, [U(*S), U(*S, away=0.3)])],
    "maximum": [(torch.maximum, [P(*S), P(*S)])],
    "minimum": [(torch.minimum, [P(*S), P(*S)])],
    "fmax": [(torch.fmax, [P(*S), P(*S)])],
    "fmin": [(torch.fmin, [P(*S), P(*S)])],
    "nan_to_num": [(lambda x: torch.nan_to_num(x + torch.tensor([[math.inf, 0, math.nan], [0, -math.inf, 0]],
                                                                 dtype=x.dtype, device=x.device), posinf=3.0),
                    [U(*S)])],
    "linalg_vector_norm": [(lambda x: torch.linalg.vector_norm(x, 2, 1), [U(*S, away=0.1)]),
                           (lambda x: torch.linalg.vector_norm(x, 3.5), [U(*S, away=0.1)]),
                           (lambda x: torch.linalg.vector_norm(x, 0.5, (0,)), [U(*S, away=0.1)]),
                           (lambda x: torch.linalg.vector_norm(x, 1, 0), [U(*S, away=0.1)]),
                           (lambda x: torch.linalg.vector_norm(x, float("inf"), 1), [P(*S)])],
    "remainder": [(torch.remainder, [U(*S, lo=-3, hi=3), U(*S, lo=0.7, hi=1.9)])],
    "fmod": [(torch.fmod, [U(*S, lo=-3, hi=3), U(*S, lo=0.7, hi=1.9)])],
    "floor_divide": [(torch.floor_divide, [U(*S, frac=(0.2, 0.8)), U(*S, lo=1.5, hi=1.5)])],
    "hypot": [(torch.hypot, [U(*S, away=0.2), U(*S, away=0.2)])],
    "pow": [(torch.pow, [U(*S, **POS), U(*S)]), (lambda a: a ** 3, [U(*S)]), (lambda b: 2.0 ** b, [U(*S)])],
    # --- pointwise, unary
    "neg": [(torch.neg, [U(*S)])],
    "abs": [(torch.abs, [U(*S, away=0.2)])],
    "sign": [(torch.sign, [U(*S, away=0.2)])],
    "reciprocal": [(torch.reciprocal, [U(*S, away=0.4)])],
    "exp": [(torch.exp, [U(*S)])],
    "exp2": [(torch.exp2, [U(*S)])],
    "expm1": [(torch.expm1, [U(*S)])],
    "log": [(torch.log, [U(*S, **POS)])],
    "log2": [(torch.log2, [U(*S, **POS)])],
    "log10": [(torch.log10, [U(*S, **POS)])],
    "log1p": [(torch.log1p, [U(*S, lo=-0.5, hi=2.0)])],
    "sqrt": [(torch.sqrt, [U(*S, **POS)])],
    "rsqrt": [(torch.rsqrt, [U(*S, **POS)])],
    "sin": [(torch.sin, [U(*S)])],
    "cos": [(torch.cos, [U(*S)])],
    "tan": [(torch.tan, [U(*S)])],
    "asin": [(torch.asin, [U(*S, **UNIT)])],
    "acos": [(torch.acos, [U(*S, **UNIT)])],
    "atan": [(torch.atan, [U(*S, lo=-2, hi=2)])],
    "sinh": [(torch.sinh, [U(*S)])],
    "cosh": [(torch.cosh, [U(*S)])],
    "tanh": [(torch.tanh, [U(*S, lo=-2, hi=2)])],
    "asinh": [(torch.asinh, [U(*S, lo=-2, hi=2)])],
    "acosh": [(torch.acosh, [U(*S, lo=1.2, hi=3.0)])],
    "atanh": [(torch.atanh, [U(*S, **UNIT)])],
    "sigmoid": [(torch.sigmoid, [U(*S, lo=-3, hi=3)])],
    "relu": [(torch.relu, [U(*S, away=0.2)])],
    "erf": [(torch.erf, [U(*S)])],
    "erfc": [(torch.erfc, [U(*S)])],
    "floor": [(torch.floor, [U(*S, frac=(0.2, 0.8))])],
    "ceil": [(torch.ceil, [U(*S, frac=(0.2, 0.8))])],
    "trunc": [(torch.trunc, [U(*S, frac=(0.2, 0.8))])],
    "frac": [(torch.frac, [U(*S, frac=(0.2, 0.8))])],
    "round": [(torch.round, [U(*S, frac=(0.1, 0.4))])],
    "silu": [(F.silu, [U(*S, lo=-3, hi=3)])],
    "mish": [(F.mish, [U(*S, lo=-3, hi=3)])],
    "gelu": [(F.gelu, [U(*S, lo=-3, hi=3)])],
    "gelu_tanh": [(lambda a: F.gelu(a, approximate="tanh"), [U(*S, lo=-3, hi=3)])],
    "softplus": [(lambda a: F.softplus(a, beta=2.0), [U(*S, lo=-3, hi=3)])],
    # activations (cltorch.ops.activations); the in-place forms on a non-leaf copy
    "leaky_relu": [(lambda a: F.leaky_relu(a, 0.2), [U(*S, away=0.2)])],
    "leaky_relu_": [(lambda a: F.leaky_relu_(a * 1.0, 0.2), [U(*S, away=0.2)])],
    "elu": [(lambda a: F.elu(a, 0.7), [U(*S, away=0.2)]), (F.selu, [U(*S, away=0.2)]),
            (lambda a: F.celu(a, 0.5), [U(*S, away=0.2)])],
    "elu_": [(lambda a: F.elu_(a * 1.0, 0.7), [U(*S, away=0.2)]), (lambda a: F.selu_(a * 1.0), [U(*S, away=0.2)])],
    "relu_": [(lambda a: torch.relu_(a * 1.0), [U(*S, away=0.2)])],
    "rrelu_with_noise_": [(lambda a: (torch.manual_seed(0), F.rrelu_(a * 1.0, training=True))[1],
                           [U(*S, away=0.2)])],
    "threshold": [(lambda a: F.threshold(a, 0.1, -2.0), [U(*S, frac=(0.2, 0.8))])],
    "hardtanh": [(lambda a: F.hardtanh(a, -0.5, 0.5), [U(*S, frac=(0.1, 0.4))])],
    "hardsigmoid": [(F.hardsigmoid, [U(*S, lo=-4, hi=4, away=0.1)])],
    "hardswish": [(F.hardswish, [U(*S, lo=-4, hi=4, away=0.1)])],
    "clamp": [(lambda a: torch.clamp(a, -0.5, 0.5), [U(*S, frac=(0.1, 0.4))]),
              (lambda a, lo, hi: torch.clamp(a, lo, hi), [P(*S), U(3, lo=-1.0, hi=-0.5), U(2, 1, lo=0.2, hi=0.6)])],
    "where": [(lambda a, b: torch.where(torch.tensor([[True, False, True], [False, False, True]], device=a.device),
                                        a, b), [U(*S), U(3)])],
    "lerp": [(torch.lerp, [U(*S), U(*S), U(*S)]), (lambda a, b: torch.lerp(a, b, 0.3), [U(*S), U(3)])],
    "addcmul": [(lambda a, b, c: torch.addcmul(a, b, c, value=0.5), [U(*S), U(*S), U(3)])],
    "addcdiv": [(lambda a, b, c: torch.addcdiv(a, b, c, value=0.5), [U(*S), U(*S), U(3, away=0.5)])],
    "masked_fill": [(lambda a, m: a.masked_fill(m, 0.25), [U(*S), _b([[True, False, False], [False, True, False]])])],
    # --- reductions
    "sum": [(lambda x: x.sum(1), [U(*S)]), (lambda x: x.sum(), [U(*S)]),
            (lambda x: x.sum((0, 2), keepdim=True), [U(2, 2, 2)])],
    "mean": [(lambda x: x.mean(0, keepdim=True), [U(*S)]), (lambda x: x.mean(), [U(*S)])],
    "prod": [(lambda x: x.prod(1), [U(*S, away=0.3)]), (lambda x: x.prod(), [U(*S, away=0.3)]),
             (lambda x: x.prod(1), [V([[0.5, 0.0, 2.0], [0.0, 0.0, 3.0]])])],
    "max_dim": [(lambda x: x.max(1)[0], [P(*S)]), (lambda x: torch.max(x, 0, keepdim=True).values, [P(*S)])],
    "min_dim": [(lambda x: x.min(1)[0], [P(*S)])],
    "amax": [(lambda x: x.amax(1), [P(*S)]), (lambda x: x.max(), [P(*S)]),
             (lambda x: x.amax(1), [V([[1.0, 2.0, 2.0], [0.5, -1.0, 0.5]])])],
    "amin": [(lambda x: x.amin(0), [P(*S)]), (lambda x: x.min(), [P(*S)])],
    # --- views and copies
    "view": [(lambda x: x.view(3, 2), [U(*S)]), (lambda x: x.reshape(-1), [U(*S)])],
    "permute": [(lambda x: x.permute(2, 0, 1), [U(2, 3, 2)]), (lambda x: x.t(), [U(*S)])],
    "expand": [(lambda x: x.expand(2, 2, 3), [U(1, 3)])],
    "squeeze": [(lambda x: x.squeeze(1), [U(2, 1, 3)]), (lambda x: x.unsqueeze(0), [U(*S)])],
    "strided_view": [(lambda x: x[:, 1:], [U(*S)]), (lambda x: x.diagonal(), [U(3, 3)]),
                     (lambda x: x.unfold(1, 2, 1), [U(2, 4)]), (lambda x: x.select(0, 1), [U(*S)])],
    "view_scatter": [(_d1(lambda x: x[:, ::2]), [U(*S), U(2, 2)]),
                     (_d1(lambda x: x.unfold(1, 2, 1)), [U(2, 4), U(2, 3, 2)])],
    "clone": [(torch.clone, [U(*S)]), (lambda x: x.t().contiguous(), [U(*S)])],
    "to_copy": [(_other_device, [U(*S)])],
    "as_strided_scatter": [(_setitem_nonleaf, [U(3, 3), U(2)])],
    "as_strided": [(lambda x: x.as_strided((2, 2), (1, 1), 1), [U(*S)]),           # overlapping windows
                   (lambda x: x.as_strided((2, 2), (1, 2)), [U(*S)]),
                   (lambda x: x[1:].as_strided((2,), (1,), 4), [U(*S)])],     # an offset inside a view
    # --- softmax, norms, losses, attention
    "softmax": [(lambda x: F.softmax(x, 1), [U(*S)]), (lambda x: F.log_softmax(x, 0), [U(*S)])],
    "layer_norm": [(lambda x, w, b: F.layer_norm(x, (3,), w, b), [U(*S), U(3), U(3)]),
                   (lambda x: F.layer_norm(x, (2, 2)), [U(2, 2, 2)]),
                   (lambda x, w: F.rms_norm(x, (3,), w), [U(*S), U(3)])],
    "group_norm": [(lambda x, w, b: F.group_norm(x, 2, w, b), [U(2, 4, 2), U(4), U(4)])],
    "batch_norm": [(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), [U(3, 2), U(2), U(2)]),
                   (lambda x: F.batch_norm(x, None, None, training=True), [U(2, 2, 2)])],
    "cross_entropy": [(lambda x: F.cross_entropy(x, torch.tensor([0, 3, 1], device=x.device)), [U(3, 4)]),
                      (lambda x, w: F.cross_entropy(x, torch.tensor([2, 0, 1], device=x.device), w,
                                                    reduction="sum", label_smoothing=0.1),
                       [U(3, 4), K([0.5, 2.0, 1.0, 1.5], torch.float64)]),
                      (lambda x, w: F.cross_entropy(x, torch.tensor([2, 0, 2], device=x.device), w),
                       [U(3, 4), K([0.5, 2.0, 1.0, 1.5], torch.float64)]),
                      (lambda x: F.nll_loss(x, torch.tensor([1, -100, 2], device=x.device), reduction="none"),
                       [U(3, 3)])],
    "cross_entropy_prob": [(lambda x, t: F.cross_entropy(x, t), [U(2, 3), U(2, 3, lo=0.1, hi=0.9)])],
    "binary_cross_entropy": [(lambda x, t: F.binary_cross_entropy(x, t), [U(*S, lo=0.1, hi=0.9),
                                                                          U(*S, lo=0.0, hi=1.0)]),
                             (lambda x, t, w: F.binary_cross_entropy(x, t, w, reduction="sum"),
                              [U(*S, lo=0.1, hi=0.9), U(*S, lo=0.0, hi=1.0), U(3, **POS)])],
    "binary_cross_entropy_with_logits": [
        (lambda x, t: F.binary_cross_entropy_with_logits(x, t), [U(*S, lo=-3, hi=3), U(*S, lo=0.0, hi=1.0)]),
        (lambda x, t, pw: F.binary_cross_entropy_with_logits(x, t, pos_weight=pw, reduction="sum"),
         [U(*S, lo=-3, hi=3), U(*S, lo=0.0, hi=1.0), U(3, **POS)])],
    "scaled_dot_product_flash_attention": [
        (F.scaled_dot_product_attention, [U(1, 3, 2), U(1, 2, 2), U(1, 2, 2)]),
        (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), [U(2, 2, 2), U(2, 2, 2),
                                                                                  U(2, 2, 1)])],
    # --- indexing
    "index": [(lambda x: x[torch.tensor([2, 0, 2], device=x.device)], [U(3, 2)]),
              (lambda x: x[:, torch.tensor([1, 1], device=x.device)], [U(*S)])],
    "index_put": [(lambda x, v: torch.index_put(x, (torch.tensor([0, 2, 0], device=x.device),), v, accumulate=True),
                   [U(3, 2), U(3, 2)]),
                  (lambda x, v: torch.index_put(x, (torch.tensor([1, 0], device=x.device),), v), [U(3, 2), U(2)])],
    "index_select": [(lambda x: torch.index_select(x, 1, torch.tensor([2, 0, 2], device=x.device)), [U(*S)])],
    "gather": [(lambda x, i: torch.gather(x, 1, i), [U(*S), _i(I23)])],
    "scatter": [(lambda x, s, i: torch.scatter(x, 1, i, s), [U(*S), U(2, 2), _i([[2, 0], [1, 2]])]),
                (lambda x, i: torch.scatter(x, 1, i, 0.5), [U(*S), _i([[2], [0]])])],
    "scatter_add": [(lambda x, s, i: torch.scatter_add(x, 1, i, s), [U(*S), U(*S), _i(I23)])],
    "scatter_reduce": [(lambda x, s, i: torch.scatter_reduce(x, 1, i, s, "sum"), [U(*S), U(*S), _i(I23)]),
                       (lambda x, s, i: torch.scatter_reduce(x, 1, i, s, "mean", include_self=False),
                        [U(*S), U(*S), _i(I23)]),
                       (lambda x, s, i: torch.scatter_reduce(x, 1, i, s, "prod"), [U(*S, away=0.3),
                                                                                    U(*S, away=0.3), _i(I23)]),
                       (lambda x, s, i: torch.scatter_reduce(x, 1, i, s, "amax"), [P(*S), P(*S), _i(PERM)])],
    "scatter_into_zeros": [(_d1(lambda x: x.max(1)[0]), [P(*S), U(2)]),
                           (_d1(lambda x: torch.sort(x, 1)[0]), [P(*S), U(*S)])],
    "index_add": [(lambda x, s: torch.index_add(x, 0, torch.tensor([1, 0, 1], device=x.device), s, alpha=2.0),
                   [U(*S), U(3, 3)])],
    "index_copy": [(lambda x, s: torch.index_copy(x, 1, torch.tensor([2, 0], device=x.device), s),
                    [U(*S), U(2, 2)])],
    "index_fill": [(lambda x: torch.index_fill(x, 1, torch.tensor([1], device=x.device), -0.5), [U(*S)])],
    "masked_select": [(lambda x, m: torch.masked_select(x, m),
                       [U(*S), _b([[True, False, True], [False, True, True]])])],
    "masked_scatter": [(lambda x, s, m: torch.masked_scatter(x, m, s),
                        [U(*S), U(5), _b([[True, False, True], [False, True, True]])])],
    "embedding": [(lambda w: F.embedding(torch.tensor([[1, 3], [1, 0]], device=w.device), w), [U(4, 2)]),
                  # rows at padding_idx get no gradient (PyTorch's rule): the mask takes them out of the value too
                  (lambda w: F.embedding(torch.tensor([2, 0, 2], device=w.device), w, padding_idx=0)
                   * torch.tensor([[1.0], [0.0], [1.0]], dtype=torch.float64, device=w.device), [U(3, 2)])],
    # --- matmul, joins, scans, sort
    "mm": [(torch.matmul, [U(*S), U(3, 2)]), (torch.matmul, [U(2, 2, 3), U(3, 2)]),
           (torch.matmul, [U(3), U(3, 2)]), (torch.bmm, [U(2, 1, 3), U(2, 3, 2)]),
           (F.linear, [U(2, 3), U(4, 3), U(4)]), (lambda a, b: a.t() @ b, [U(3, 2), U(3, 3)])],
    "cat": [(lambda a, b: torch.cat([a, b], 1), [U(*S), U(2, 1)]), (lambda a, b: torch.stack([a, b]), [U(3), U(3)])],
    "flip": [(lambda x: torch.flip(x, (0, 1)), [U(*S)])],
    "cumsum": [(lambda x: torch.cumsum(x, 1), [U(*S)])],
    "cumprod": [(lambda x: torch.cumprod(x, 1), [U(2, 4, away=0.3)]),
                (lambda x: torch.cumprod(x, 1), [V([[0.5, 0.0, 2.0, 1.5], [0.0, 3.0, 0.0, 2.0]])])],
    "cummax": [(lambda x: torch.cummax(x, 1)[0], [P(*S)])],
    "cummin": [(lambda x: torch.cummin(x, 0).values, [P(3, 2)])],
    "sort": [(lambda x: torch.sort(x, 1, descending=True)[0], [P(*S)]), (lambda x: torch.topk(x, 2)[0], [P(*S)])],
    # --- convolution, pooling, padding, resampling
    "convolution": [(lambda x, w, b: F.conv2d(x, w, b, padding=1), [U(1, 2, 3, 3), U(2, 2, 2, 2), U(2)]),
                    (lambda x, w: F.conv1d(x, w, stride=2), [U(2, 1, 5), U(2, 1, 3)])],
    "convolution_transpose": [(lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2), [U(1, 2, 2, 2), U(2, 1, 2, 2),
                                                                                       U(1)])],
    "convolution_weight": [(_d1(lambda x, w: F.conv2d(x, w), wrt=1), [U(1, 2, 3, 3), U(2, 2, 2, 2), U(1, 2, 2, 2)])],
    "convolution_weight_bias": [(_d1_all(lambda x, w, b: F.conv2d(x, w, b)), [U(1, 1, 3, 3), U(2, 1, 2, 2), U(2),
                                                                              U(1, 2, 2, 2)])],
    "max_pool2d_with_indices": [(lambda x: F.max_pool2d(x, 2), [P(1, 1, 4, 4)]),
                                (lambda x: F.max_pool2d(x, 3, stride=2, padding=1), [P(1, 2, 3, 3)])],
    "max_pool2d_scatter": [(_d1(lambda x: F.max_pool2d(x, 2)), [P(1, 1, 4, 4), U(1, 1, 2, 2)])],
    "max_pool2d_gather": [(_d2(lambda x: F.max_pool2d(x, 2)), [P(1, 1, 4, 4), U(1, 1, 2, 2), U(1, 1, 4, 4)])],
    "avg_pool2d": [(lambda x: F.avg_pool2d(x, 2), [U(1, 1, 4, 4)]),
                   (lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False), [U(1, 2, 3, 3)]),
                   (lambda x: F.adaptive_avg_pool2d(x, (2, 1)), [U(1, 1, 3, 3)])],
    "avg_pool2d_backward": [(_d1(lambda x: F.avg_pool2d(x, 2, stride=1)), [U(1, 1, 3, 3), U(1, 1, 2, 2)])],
    "constant_pad_nd": [(lambda x: F.pad(x, (1, 2)), [U(*S)]), (lambda x: F.pad(x, (-1, 1, 1, 0)), [U(*S)])],
    "pad1d": [(lambda x: F.pad(x, (2, 1), mode="reflect"), [U(1, 2, 4)]),
              (lambda x: F.pad(x, (1, 2), mode="replicate"), [U(1, 1, 3)]),
              (lambda x: F.pad(x, (1, 1, 2, 0), mode="circular"), [U(1, 1, 3, 3)])],
    "pad1d_backward": [(_d1(lambda x: F.pad(x, (2, 1), mode="reflect")), [U(1, 1, 4), U(1, 1, 7)])],
    "resample1d": [(lambda x: F.interpolate(x, scale_factor=2, mode="linear"), [U(1, 2, 3)]),
                   (lambda x: F.interpolate(x, size=(3, 2), mode="bilinear", align_corners=True), [U(1, 1, 2, 3)]),
                   (lambda x: F.interpolate(x, size=5, mode="nearest"), [U(1, 1, 3)])],
    "resample1d_backward": [(_d1(lambda x: F.interpolate(x, size=5, mode="linear")), [U(1, 1, 3), U(1, 1, 5)])],
    # --- recurrences (tests/test_rnn.py checks them in depth: every mode, packed, reverse)
    "_thnn_fused_lstm_cell": [(lambda ig, hg, cx: torch.cat([o.reshape(-1) for o in _rnn.fused_lstm_cell(ig, hg, cx)]),
                               [U(2, 8), U(2, 8), U(2, 2)])],
    "_thnn_fused_gru_cell": [(lambda ig, hg, hx: _rnn.fused_gru_cell(ig, hg, hx), [U(2, 6), U(2, 6), U(2, 2)])],
    "rnn_layer": [(lambda ig, hx, cx, w: _rnn.rnn_layer("LSTM", ig, hx, cx, w)[0],
                   [U(6, 8), U(2, 2), U(2, 2), U(8, 2)])],
    # --- special functions (tests/test_special_and_misc_ops.py checks tails and edge cases against torch)
    "copysign": [(torch.copysign, [U(*S, away=0.2), U(*S, away=0.2)])],
    "deg2rad": [(torch.deg2rad, [U(*S)])],
    "rad2deg": [(torch.rad2deg, [U(*S)])],
    "digamma": [(torch.digamma, [U(*S, **POS)])],
    "lgamma": [(torch.lgamma, [U(*S, **POS)])],
    "erfinv": [(torch.erfinv, [U(*S, **UNIT)])],
    "i0": [(torch.i0, [U(*S)])],
    "igamma": [(lambda x: torch.igamma(x.detach() * 0 + 1.5, x), [U(*S, **POS)])],
    "igammac": [(lambda x: torch.igammac(x.detach() * 0 + 1.5, x), [U(*S, **POS)])],
    "logaddexp": [(torch.logaddexp, [U(*S), U(*S)])],
    "logaddexp2": [(torch.logaddexp2, [U(*S), U(*S)])],
    "logit": [(torch.logit, [U(*S, lo=0.2, hi=0.8)])],
    "nextafter": [(lambda a: torch.nextafter(a, a.detach() * 0 + 10.0), [U(*S)])],
    "sinc": [(torch.sinc, [U(*S, away=0.2)])],
    "xlogy": [(torch.xlogy, [U(*S), U(*S, **POS)])],
    "special_entr": [(torch.special.entr, [U(*S, **POS)])],
    "special_erfcx": [(torch.special.erfcx, [U(*S)])],
    "special_i0e": [(torch.special.i0e, [U(*S, away=0.1)])],
    "special_i1": [(torch.special.i1, [U(*S)])],
    "special_i1e": [(torch.special.i1e, [U(*S, away=0.1)])],
    "special_log_ndtr": [(torch.special.log_ndtr, [U(*S)])],
    "special_ndtr": [(torch.special.ndtr, [U(*S)])],
    "special_ndtri": [(torch.special.ndtri, [U(*S, lo=0.1, hi=0.9)])],
    "special_spherical_bessel_j0": [(torch.special.spherical_bessel_j0, [U(*S, away=0.2)])],
    "special_xlog1py": [(torch.special.xlog1py, [U(*S), U(*S, **POS)])],
    # --- linalg factorizations and solves (host LAPACK ops; inputs shifted by 3 I to keep them well-conditioned)
    "linalg_solve_matrix": [(lambda a, b: torch.linalg.solve(a + _I3(a), b), [U(3, 3), U(3, 2)]),
                            (lambda a, b: torch.linalg.solve(a + _I3(a), b, left=False), [U(3, 3), U(2, 3)])],
    "linalg_solve_triangular": [
        (lambda a, b: torch.linalg.solve_triangular(a + _I3(a), b, upper=True), [U(3, 3), U(3, 2)]),
        (lambda a, b: torch.linalg.solve_triangular(a, b, upper=False, left=False, unitriangular=True),
         [U(3, 3), U(2, 3)])],
    "linalg_slogdet": [(lambda a: torch.linalg.slogdet(a + _I3(a)).logabsdet, [U(2, 3, 3)])],
    "linalg_det": [(torch.linalg.det, [U(2, 3, 3)])],
    "linalg_cholesky_ex": [(lambda a: torch.linalg.cholesky(a @ a.mT + _I3(a)), [U(3, 3)]),
                           (lambda a: torch.linalg.cholesky(a @ a.mT + _I3(a), upper=True), [U(3, 3)])],
    "linalg_lu_factor_ex": [(lambda a: torch.linalg.lu_factor(a + _I3(a)).LU, [U(3, 3)]),
                            (lambda a: torch.linalg.lu(a).U, [U(3, 5)]), (lambda a: torch.linalg.lu(a).L, [U(5, 3)])],
    "linalg_qr": [(lambda a: torch.linalg.qr(a).Q, [U(4, 3)]), (lambda a: torch.linalg.qr(a).R, [U(3, 5)])],
    "linalg_svd": [(lambda a: torch.linalg.svdvals(a), [U(4, 3)]),
                   (lambda a: (lambda u, s, vh: u @ vh)(*torch.linalg.svd(a, full_matrices=False)), [U(3, 4)])],
    "linalg_eigh": [(lambda a: torch.linalg.eigvalsh(a + a.mT), [U(3, 3)]),
                    (lambda a: torch.linalg.eigh(a + a.mT).eigenvectors ** 2, [U(3, 3)])],
    "linalg_eig": [(lambda a: torch.linalg.eigvals(a + a.mT + 2 * _I3(a)).abs().sum(-1), [U(3, 3)])],
    "linalg_pinv": [(torch.linalg.pinv, [U(4, 3)]), (lambda a: torch.linalg.pinv(a + a.mT, hermitian=True),
                                                     [U(3, 3)])],
    "linalg_lstsq": [(lambda a, b: torch.linalg.lstsq(a, b).solution, [U(4, 3), U(4, 2)])],
    "cholesky_solve": [(lambda b, l: torch.cholesky_solve(b, l.tril() + _I3(l)), [U(3, 2), U(3, 3)])],
    "matrix_exp": [(torch.matrix_exp, [U(3, 3)])],
    # complex64/128 and fft: real inputs and real outputs through the zero-copy real views
    "view_as_real": [(lambda x, y: torch.view_as_real(torch.complex(x, y)) * 1.5, [U(4), U(4)])],
    "view_as_complex": [(lambda x: torch.view_as_real(torch.view_as_complex(x) * torch.view_as_complex(x)),
                         [U(3, 2)])],
    "complex_abs": [(lambda x: torch.view_as_complex(x).abs(), [U(5, 2, away=0.2)])],
    "fft_c2c": [(lambda x: torch.view_as_real(torch.fft.fft(torch.view_as_complex(x))), [U(8, 2)]),
                (lambda x: torch.view_as_real(torch.fft.ifft(torch.view_as_complex(x), norm="ortho")), [U(7, 2)])],
    "rfft_last": [(lambda x: torch.view_as_real(torch.fft.rfft(x)), [U(3, 8)])],
}

# second derivatives: (op name, sample index) pairs to run gradgradcheck on (issue 4: elementwise ops, matmul,
# sum/mean/amax, softmax and log_softmax, the losses, layer_norm and rms_norm)
_POINTWISE = sorted(n for n, op in REGISTRY.items()
                    if op.backward is not None and op.forward.__module__ == "cltorch.ops.pointwise")
GRADGRAD = [(n, 0) for n in _POINTWISE] + [
    ("mm", 0), ("mm", 1), ("sum", 0), ("mean", 0), ("amax", 0), ("amax", 1), ("softmax", 0), ("softmax", 1),
    ("cross_entropy", 0), ("cross_entropy", 1), ("cross_entropy_prob", 0), ("layer_norm", 0), ("layer_norm", 2)]


# ------------------------------------------------------------------------------------------ machinery
@contextlib.contextmanager
def _trace():
    """Names of the registered ops that autograd records while the block runs."""
    seen = set()
    rec = _dispatch._recorder[0]

    def wrapped(op, ctx, args, out):
        seen.add(op.name)
        return rec(op, ctx, args, out)
    _dispatch._recorder[0] = wrapped
    try:
        yield seen
    finally:
        _dispatch._recorder[0] = rec


def _inputs(specs, device, seed):
    rng = np.random.default_rng(seed)
    return tuple(s.make(device, rng) for s in specs)


def _cases(names):
    return [pytest.param(n, k, id=f"{n}-{k}") for n in names if n in SAMPLES for k in range(len(SAMPLES[n]))]


def _on_demand(name):
    """Ops registered on first use, one per integer order (``polygamma_<n>``): present or not depending on
    what ran before; their derivative is checked through ``polygamma`` in tests/test_special_and_misc_ops.py."""
    return name.startswith("polygamma_") and name[len("polygamma_"):].isdigit()


def test_every_differentiable_op_has_a_sample():
    differentiable = {n for n, op in REGISTRY.items() if op.backward is not None and not _on_demand(n)}
    missing = sorted(differentiable - set(SAMPLES))
    assert not missing, f"registered ops with a derivative but no gradcheck sample in SAMPLES: {missing}"
    stale = sorted(set(SAMPLES) - differentiable)
    assert not stale, f"SAMPLES entries for ops that are not registered with a derivative: {stale}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,k", _cases(sorted(REGISTRY)))
def test_gradcheck(name, k, device):
    fn, specs = SAMPLES[name][k]
    inputs = _inputs(specs, device, seed=k)
    with _trace() as seen:
        fn(*inputs)
    assert name in seen, f"sample {k} of {name!r} does not reach the op (recorded: {sorted(seen)})"
    assert gradcheck(fn, inputs, eps=1e-6, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,k", [pytest.param(n, k, id=f"{n}-{k}") for n, k in GRADGRAD])
def test_gradgradcheck(name, k, device):
    fn, specs = SAMPLES[name][k]
    inputs = _inputs(specs, device, seed=100 + k)
    assert gradgradcheck(fn, inputs, eps=1e-6, atol=1e-6, rtol=1e-4)


def test_gradcheck_catches_a_wrong_derivative():
    """The harness itself: a deliberately wrong backward (2x instead of cos) must fail gradcheck."""
    class BadSin(autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x * 2

    x = torch.tensor([0.3, -0.7], dtype=torch.float64, requires_grad=True)
    assert not gradcheck(BadSin.apply, (x,), raise_exception=False)
    with pytest.raises(RuntimeError, match="Jacobian mismatch"):
        gradcheck(BadSin.apply, (x,))
