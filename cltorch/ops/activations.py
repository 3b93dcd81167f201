"""Activations with a kernel of their own, their PyTorch derivative formulas, and their in-place forms.

One mechanism (:func:`_defact`): an activation is one elementwise expression over the input ``x0`` and its
scalar parameters ``x1, x2, ...``, a derivative written from the input, and, where PyTorch 2.13 has one, a
derivative written from the result. Where the result determines the derivative (relu, leaky_relu, elu and its
celu/selu forms, rrelu), the in-place form is truly in place: it writes the input's storage, bumps its version,
and keeps only the result for its backward, as PyTorch's ``*_backward(..., is_result=True)`` formulas do.
Where it does not (hardtanh, threshold, hardsigmoid, hardswish: several inputs give one result), PyTorch keeps
the original input, and so does the in-place form here: under autograd it runs the op on a copy of the input
(``run_inplace``) and writes the result back.

Formulas (PyTorch 2.13's ``Activation.cpp`` kernels and ``derivatives.yaml``, checked against torch):
  leaky_relu  ``x > 0 ? x : s x``;               d = ``x > 0 ? 1 : s`` (from the result: ``y > 0 ? 1 : s``)
  elu         ``x > 0 ? c x : a c expm1(k x)``;  d = ``x > 0 ? c : k a c exp(k x)`` (from y: ``k (y + a c)``)
              (celu: c = 1, k = 1/a; selu: Klambauer et al. 2017's a, c, k = 1)
  rrelu       ``x * r`` with r = 1 where x > 0, else r ~ U(lower, upper) (training); d = r
  threshold   ``x > t ? x : v``;                 d = ``x > t``
  hardtanh    ``min(max(x, lo), hi)``;           d = ``lo < x < hi``
  hardsigmoid ``min(max(x + 3, 0), 6) / 6``;     d = ``-3 < x < 3 ? 1/6 : 0``
  hardswish   ``x min(max(x + 3, 0), 6) / 6``;   d = ``x <= -3 ? 0 : (x < 3 ? x / 3 + 1/2 : 1)``
An in-place leaky_relu or elu with a negative slope cannot recover its derivative from its result; its
backward raises RuntimeError, as PyTorch's does. In-place on a leaf that requires grad raises RuntimeError.
All need floating-point tensors (RuntimeError otherwise).
"""
from .._dispatch import REGISTRY, call, register, is_grad_enabled
from ._util import method
from .elementwise import pointwise
from .pointwise import _ct, _render, check_inplace, run_inplace, where

__all__ = ["threshold", "threshold_", "hardtanh", "hardtanh_", "leaky_relu", "leaky_relu_", "elu", "elu_",
           "celu", "celu_", "selu", "selu_", "rrelu", "rrelu_", "hardsigmoid", "hardsigmoid_", "hardswish",
           "hardswish_", "relu_"]

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946

_NEG_SLOPE = ("In-place {} backward calculation is triggered with a negative slope which is not supported. This is "
              "caused by calling in-place forward function with a negative slope, please call out-of-place version "
              "instead.")


def _check_float(name, a):
    if not a.dtype.is_floating_point:
        raise RuntimeError(f"\"{name}\" not implemented for '{a.dtype.name.capitalize()}': {name} needs a "
                           "floating-point tensor")


def _defact(name, expr, grad_from_input, grad_from_result=None, op=None):
    """Register activation ``name``: ``expr`` over x0 (input) and x1.. (the scalar parameters), its derivative
    from the input ``grad_from_input(a, g, *params)`` and, if given, from the result
    ``grad_from_result(y, g, *params)`` (which makes the in-place form ``name_`` truly in place). ``op``: an
    out-of-place op registered elsewhere to use instead of registering one. Returns (f, f_)."""
    def fwd(ctx, a, *params):
        cdt = _ct(a.dtype)
        if ctx is not None:
            ctx.save_for_backward(a)
            ctx.params = params
        return pointwise(_render(expr, cdt), [a, *params], a.dtype, cdt)

    def bwd(ctx, g):
        (a,) = ctx.saved_tensors
        return (grad_from_input(a, g, *ctx.params),) + (None,) * len(ctx.params)

    op = op or register(name, fwd, bwd)

    def f(a, *params):
        _check_float(name, a)
        return call(op, a, *params)

    if grad_from_result is None:
        def f_(a, *params):
            _check_float(name + "_", a)
            check_inplace(a, None, None)
            r = run_inplace(a, name + "_", lambda s: call(op, s, *params))
            if r is not None:
                return r
            pointwise(_render(expr, _ct(a.dtype)), [a, *params], a.dtype, _ct(a.dtype), out=a)
            a._storage.version += 1
            return a
        return f, f_

    def fwd_(ctx, a, *params):
        cdt = _ct(a.dtype)
        pointwise(_render(expr, cdt), [a, *params], a.dtype, cdt, out=a)
        a._storage.version += 1
        if ctx is not None:
            ctx.save_for_backward(a.detach())   # the result, saved after the write: its version is the new one
            ctx.params = params
        return a

    def bwd_(ctx, g):
        (y,) = ctx.saved_tensors
        return (grad_from_result(y, g, *ctx.params),) + (None,) * len(ctx.params)

    op_ = register(name + "_", fwd_, bwd_)

    def f_(a, *params):
        _check_float(name + "_", a)
        return _in_place(a, op_, lambda s: call(op, s, *params), *params)
    return f, f_


def _in_place(a, op_, outplace, *args):
    """Run the truly in-place ``op_`` on ``a`` (recorded as a's new grad_fn when a requires grad). A leaf that
    requires grad raises, as in PyTorch; a view that requires grad goes through ``run_inplace`` (the op on a
    copy, written back through the view), so its base's graph sees the write."""
    check_inplace(a, None, None)
    if a.requires_grad and is_grad_enabled():
        if a.is_leaf:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        if a._base is not None:
            return run_inplace(a, op_.name, outplace)
    return call(op_, a, *args)


def _neg_slope_checked(kind, formula):
    def grad(y, g, *params):
        if params[0] < 0:
            raise RuntimeError(_NEG_SLOPE.format(kind))
        return formula(y, g, *params)
    return grad


# leaky_relu(x, slope)
_leaky, _leaky_ = _defact("leaky_relu", "(x0 > 0 ? x0 : x0 * x1)",
                          lambda a, g, s: where(a > 0, g, g * s),
                          _neg_slope_checked("leakyReLu", lambda y, g, s: where(y > 0, g, g * s)))
# elu(x, alpha * scale, scale, input_scale): PyTorch's (negcoef, poscoef, negiptcoef)
_elu, _elu_ = _defact("elu", "(x0 > 0 ? x0 * x2 : expm1(x0 * x3) * x1)",
                      lambda a, g, nc, pc, k: where(a > 0, g * pc, g * ((a * k).exp() * (k * nc))),
                      _neg_slope_checked("elu", lambda y, g, nc, pc, k: where(y > 0, g * pc, g * ((y + nc) * k))))
_relu, _relu_ = _defact("relu", "(x0 < 0 ? 0.0f : x0)", None, lambda y, g: g * (y > 0), op=REGISTRY["relu"])
_threshold, _threshold_ = _defact("threshold", "(x0 > x1 ? x0 : x2)",
                                  lambda a, g, t, v: where(a > t, g, g * 0))
_hardtanh, _hardtanh_ = _defact("hardtanh", "(x0 < x1 ? x1 : (x0 > x2 ? x2 : x0))",
                                lambda a, g, lo, hi: where((a > lo) & (a < hi), g, g * 0))
_HS6 = "((x0 + 3.0f) < 0.0f ? 0.0f : ((x0 + 3.0f) > 6.0f ? 6.0f : (x0 + 3.0f)))"
_hardsigmoid, _hardsigmoid_ = _defact("hardsigmoid", _HS6 + " / 6.0f",
                                      lambda a, g: where((a > -3.0) & (a < 3.0), g / 6.0, g * 0))
_hardswish, _hardswish_ = _defact("hardswish", "x0 * " + _HS6 + " / 6.0f",
                                  lambda a, g: where(a <= -3.0, g * 0, where(a < 3.0, g * (a / 3.0 + 0.5), g)))


def threshold(input, threshold, value):  # noqa: A002
    """``x if x > threshold else value`` (elementwise, any shape, floating dtypes); gradient 1 where x > threshold."""
    return _threshold(input, float(threshold), float(value))


def threshold_(input, threshold, value):  # noqa: A002
    """In-place :func:`threshold` (keeps a copy of the input for its backward, as PyTorch)."""
    return _threshold_(input, float(threshold), float(value))


def hardtanh(input, min_val=-1.0, max_val=1.0):  # noqa: A002
    """Clamp to [min_val, max_val]; gradient 1 strictly inside, 0 at and beyond the limits (hardtanh_backward)."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _hardtanh(input, float(min_val), float(max_val))


def hardtanh_(input, min_val=-1.0, max_val=1.0):  # noqa: A002
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _hardtanh_(input, float(min_val), float(max_val))


def leaky_relu(input, negative_slope=0.01):  # noqa: A002
    """``x if x > 0 else negative_slope * x``."""
    return _leaky(input, float(negative_slope))


def leaky_relu_(input, negative_slope=0.01):  # noqa: A002
    """In place, keeping only the result; its backward raises RuntimeError for a negative slope (as PyTorch)."""
    return _leaky_(input, float(negative_slope))


def _elu_params(alpha, scale, input_scale):
    return float(alpha) * float(scale), float(scale), float(input_scale)


def elu(input, alpha=1.0, scale=1.0, input_scale=1.0):  # noqa: A002
    """``scale * (x if x > 0 else alpha * (exp(input_scale * x) - 1))`` (PyTorch's elu kernel, which celu and
    selu share)."""
    return _elu(input, *_elu_params(alpha, scale, input_scale))


def elu_(input, alpha=1.0, scale=1.0, input_scale=1.0):  # noqa: A002
    """In place, keeping only the result; its backward raises RuntimeError for a negative alpha (as PyTorch)."""
    return _elu_(input, *_elu_params(alpha, scale, input_scale))


def _celu_alpha(alpha):
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")
    return float(alpha)


def celu(input, alpha=1.0):  # noqa: A002
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`` (Barron 2017); alpha = 0 raises RuntimeError."""
    a = _celu_alpha(alpha)
    return elu(input, a, 1.0, 1.0 / a)


def celu_(input, alpha=1.0):  # noqa: A002
    a = _celu_alpha(alpha)
    return elu_(input, a, 1.0, 1.0 / a)


def selu(input):  # noqa: A002
    """``scale * elu(x, alpha)`` with Klambauer et al. (2017)'s alpha = 1.6733, scale = 1.0507."""
    return elu(input, SELU_ALPHA, SELU_SCALE)


def selu_(input):  # noqa: A002
    return elu_(input, SELU_ALPHA, SELU_SCALE)


def relu_(input):  # noqa: A002
    """``max(x, 0)`` in place, keeping only the result for the backward (as PyTorch's relu_)."""
    return _relu_(input)


def hardsigmoid(input):  # noqa: A002
    return _hardsigmoid(input)


def hardsigmoid_(input):  # noqa: A002
    return _hardsigmoid_(input)


def hardswish(input):  # noqa: A002
    """``x * relu6(x + 3) / 6`` (Howard et al. 2019)."""
    return _hardswish(input)


def hardswish_(input):  # noqa: A002
    return _hardswish_(input)


# rrelu: the result is x * r, r saved (PyTorch's rrelu_with_noise); in-place writes x's storage
def _noise_mul_fwd(ctx, a, r):
    cdt = _ct(a.dtype)
    pointwise("x0 * x1", [a, r], a.dtype, cdt, out=a)
    a._storage.version += 1
    if ctx is not None:
        ctx.save_for_backward(r)
    return a


def _noise_mul_bwd(ctx, g):
    (r,) = ctx.saved_tensors
    return g * r, None


_noise_mul_ = register("rrelu_with_noise_", _noise_mul_fwd, _noise_mul_bwd)


def _rrelu_noise(a, lower, upper):
    """r: 1 where x > 0, else U(lower, upper) (Philox ``uniform_``)."""
    u = a.new_empty(a.shape).uniform_(lower, upper)
    cdt = _ct(a.dtype)
    return pointwise("(x0 > 0 ? 1.0f : x1)", [a.detach(), u], a.dtype, cdt)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False):  # noqa: A002
    """Randomized leaky ReLU (Xu et al. 2015): in training, ``x * r`` with r ~ U(lower, upper) drawn per
    negative element (gradient r); in eval, leaky_relu with slope (lower + upper) / 2."""
    _check_float("rrelu", input)
    if not training:
        return leaky_relu(input, (lower + upper) / 2)
    return input * _rrelu_noise(input, float(lower), float(upper))


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):  # noqa: A002
    """In-place :func:`rrelu`; its backward uses the saved noise (training) or the result (eval)."""
    _check_float("rrelu_", input)
    if not training:
        return leaky_relu_(input, (lower + upper) / 2)
    check_inplace(input, None, None)
    r = _rrelu_noise(input, float(lower), float(upper))
    return _in_place(input, _noise_mul_, lambda s: s * r, r)


method("relu_", relu_)   # Tensor.relu_ keeps the result, not a copy of the input
