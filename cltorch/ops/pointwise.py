"""Every pointwise op, registered once with its dtype rule, kernel expression and derivative.

All of them run through the one elementwise template (``elementwise.pointwise``). An entry gives:
the expression over ``x0, x1, ...`` (a string, or a function of the compute dtype), the dtype rule
(``same``: PyTorch's result_type; ``float``: integers go to the default float; ``bool``: comparisons),
and the derivative as a function of (ctx, grad) written with differentiable tensor ops, so double
backward works. In-place forms (``add_``) and reflected operators (``__radd__``) come from the same
entry.

OpenCL builtins that differ from PyTorch are avoided: ``round`` uses ``rint`` (halves to even),
``maximum``/``minimum``/``clamp``/``relu`` propagate NaN (``fmax``/``fmin`` drop it), and integer
division by zero raises ZeroDivisionError instead of giving an undefined value.
"""
import dis
import math
import re

import numpy as np

from .. import _dtype as D
from .._dispatch import call, register, is_grad_enabled, _state as _grad_state
from ..backend.runtime import DETERMINISTIC
from .._tensor import Tensor
from ._util import method
from .elementwise import pointwise, plan_of, broadcast_shapes

__all__ = []

_F_LIT = re.compile(r"(\d+\.\d*(?:e[-+]?\d+)?)f\b")


def _render(expr, ct):
    """Expressions are written for float (literals with an f suffix, helpers with _f); adapt to ct."""
    if callable(expr):
        expr = expr(ct)
    if ct is D.float64:
        expr = _F_LIT.sub(r"\1", expr).replace("_f(", "_d(")
    elif not ct.is_floating_point:
        expr = expr.replace("_f(", "_l(") if ct is D.int64 else expr.replace("_f(", "_i(")
    return expr


def _ct(dt):
    """Compute dtype: half computes in float."""
    return D.float32 if dt is D.float16 else dt


def _is_t(x):
    return isinstance(x, Tensor)


def _dtype_of(x):
    return x.dtype if _is_t(x) else None


def _float_result(dt):
    return dt if dt.is_floating_point else D.get_default_dtype()


# ----------------------------------------------------------------------------- in-place machinery
def check_inplace(self, result_dtype, shape):
    """PyTorch's in-place rules: the result must cast to self's kind and fit self's shape; self must not overlap."""
    if result_dtype is not None and result_dtype is not self.dtype:
        if (result_dtype.is_floating_point and not self.dtype.is_floating_point) or \
                (result_dtype is not D.bool and self.dtype is D.bool):
            raise RuntimeError(f"result type {result_dtype.name.capitalize()} can't be cast to the desired output "
                               f"type {self.dtype.name.capitalize()}")
    if shape is not None and tuple(shape) != self._shape:
        raise RuntimeError(f"output with shape {list(self._shape)} doesn't match the broadcast shape {list(shape)}")
    if self._overlaps():
        raise RuntimeError("unsupported operation: some elements of the input tensor and the written-to tensor "
                           "refer to a single memory location. Please clone() the tensor before performing the "
                           "operation.")


def run_inplace(self, opname, fn_outplace, *args, **kw):
    """Run an in-place op: out of place when autograd must see it (then copy and rebase), else directly."""
    if is_grad_enabled() and (self._requires_grad or any(getattr(a, "_requires_grad", False) for a in args)):
        from .. import autograd as _ag
        return _ag.inplace_rebase(self, lambda s: fn_outplace(s, *args, **kw), opname)
    return None


# ----------------------------------------------------------------------------- binary ops
_BINARY = {}


def _signature(x):
    """What type promotion and the launch read from an operand: a tensor's dtype, shape, strides and device, or a
    scalar's Python type (elementwise's plan key has the same parts)."""
    return (x.dtype, x._shape, x._stride, x.device) if isinstance(x, Tensor) else type(x)


def _binary_forward(name, expr, rule, saves=True):
    resolved = {}   # promotion keys and default dtype -> (kernel expression, output dtype, compute dtype)

    def resolve(a, b):
        if not _is_t(a) and not _is_t(b):
            raise TypeError(f"{name}(): expected at least one tensor argument")
        rdt = D.result_type(a, b)
        if rule == "float":
            rdt = _float_result(rdt)
        elif rule == "int":
            if rdt.is_floating_point:
                raise RuntimeError(f"\"{name}_cpu\" not implemented for '{rdt.name.capitalize()}': {name} needs "
                                   "integer or bool tensors")
        cdt = _ct(rdt)
        return _render(expr, cdt), (D.bool if rule == "bool" else rdt), cdt

    def forward(ctx, a, b, out=None):
        # one lookup per operand signature gives the promotion and the recorded launch (elementwise's plan); the
        # deterministic flag is part of the key, as plans made in the other mode hold the other mode's kernels
        key = (_signature(a), _signature(b), D.get_default_dtype(), DETERMINISTIC[0])
        r = resolved.get(key)
        if r is None:
            r = resolved[key] = [*resolve(a, b), None]
        if ctx is not None and saves:
            ctx.save_for_backward(a if _is_t(a) else None, b if _is_t(b) else None)
            ctx.a_scalar, ctx.b_scalar = (None if _is_t(a) else a), (None if _is_t(b) else b)
        if out is not None:
            return pointwise(r[0], [a, b], r[1], r[2], out=out)
        return _launch(r, (a, b))
    forward.resolved = resolved     # read by defbinary's functions (their one-frame path)
    return forward


def _launch(r, operands):
    """``pointwise(*r[:3])`` on ``operands`` (a tuple) for an entry ``r = [expr, out dtype, compute dtype, plan]``
    that its caller keeps per operand signature (see ``_signature``; the key must also hold the deterministic flag):
    the plan elementwise recorded for that signature is kept in ``r[3]``, so a repeated call runs it without
    elementwise's plan lookup. Returns the new output tensor."""
    p = r[3]
    if p is not None:
        res = p.run(operands, None)
        if res is not None:
            return res
    ops = list(operands)
    res = pointwise(r[0], ops, r[1], r[2])
    r[3] = plan_of(r[0], ops, r[1], r[2])
    return res


def _unbroadcast_none(x):
    return x


# Complex operands: ops/complex.py lowers each op it supports onto real ops over view_as_real views and registers
# it here by name; any other pointwise op raises NotImplementedError naming itself for complex inputs.
COMPLEX_OPS = {}


def _cx(x):
    return x.__class__ is complex or isinstance(x, Tensor) and x.dtype._kind == 3 or isinstance(x, np.complexfloating)


def complex_call(name, args, out=None):
    """Run op ``name`` on operands of which one is complex (a complex tensor, a Python or numpy complex scalar:
    numpy's is read as Python's, as PyTorch's argument parser reads it)."""
    args = tuple(complex(a) if isinstance(a, np.complexfloating) else a for a in args)
    f = COMPLEX_OPS.get(name)
    if f is None:
        if name in ("sign", "sign_"):
            raise RuntimeError("Unlike NumPy, torch.sign is not intended to support complex numbers. Please use "
                               "torch.sgn instead.")
        raise NotImplementedError(f"{name} is not implemented for complex tensors in cltorch (complex ops provided: "
                                  f"{', '.join(sorted(k for k, v in COMPLEX_OPS.items() if v))})")
    r = f(*args)
    if out is not None:
        out.copy_(r)
        return out
    return r


def _complex_inplace(self, name, r):
    """Write the complex result r of an in-place op into self (PyTorch's casting rule: not into a real tensor)."""
    if not self.dtype.is_complex:
        raise RuntimeError(f"result type {r.dtype.name.capitalize()} can't be cast to the desired output type "
                           f"{self.dtype.name.capitalize()}")
    return self.copy_(r)


def defbinary(name, expr, rule="same", backward=None, inplace=True, reflect=None, op_name=None, saves=True):
    """Register binary op ``name``: kernel ``expr`` over x0, x1, dtype ``rule``, derivative ``backward(ctx, grad)``;
    also its in-place form and reflected operator. ``saves=False``: the derivative reads neither operand, so the
    forward keeps no reference to them (add, sub)."""
    op = register(name, _binary_forward(name, expr, rule, saves), backward)
    _BINARY[name] = op
    resolved, recorded, direct = op.forward.resolved, backward is not None, op.widen is None

    def fn(a, b, *, out=None):
        # The common case in one frame: where the dispatcher would only call forward (no autocast region, no 16-bit
        # widening, nothing for autograd to record), the plan forward recorded for these operands' signature (its
        # key, built the same way) runs directly. A miss, or a plan that does not apply, takes the path below.
        if out is None and direct and _grad_state.ac is None:
            ta, tb = isinstance(a, Tensor), isinstance(b, Tensor)
            if not (recorded and _grad_state.enabled and (ta and a._requires_grad or tb and b._requires_grad)):
                r = resolved.get(((a.dtype, a._shape, a._stride, a.device) if ta else type(a),
                                  (b.dtype, b._shape, b._stride, b.device) if tb else type(b),
                                  D._default[0], DETERMINISTIC[0]))
                if r is not None and r[3] is not None:
                    res = r[3].run((a, b), None)
                    if res is not None:
                        return res
        if _cx(a) or _cx(b):
            return complex_call(name, (a, b), out)
        if out is not None:
            r = call(op, a, b)
            out.copy_(r)
            return out
        return call(op, a, b)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise ``{name}`` with broadcasting and PyTorch's type promotion."
    method(name, fn)
    if inplace:
        checked = set()     # operand signatures (and default dtype) whose in-place checks passed: they depend on no more

        def fn_(self, other):
            if _cx(self) or _cx(other):
                return _complex_inplace(self, name, fn(self, other))
            key = (_signature(self), _signature(other), D.get_default_dtype())
            if key not in checked:
                rdt = D.result_type(self, other)
                if rule == "float":
                    rdt = _float_result(rdt)
                check_inplace(self, rdt if rule != "bool" else None,
                              broadcast_shapes(self._shape, other._shape) if _is_t(other) else None)
                checked.add(key)
            r = run_inplace(self, name + "_", fn, other)
            if r is not None:
                return r
            if rule == "bool" and self.dtype is not D.bool:   # the kernel writes bool: compute, then cast in
                return self.copy_(call(op, self, other))
            op.forward(None, self, other, out=self)
            self._storage.version += 1
            return self
        fn_.__name__ = name + "_"
        method(name + "_", fn_)
    if reflect:
        method(reflect, lambda self, other: fn(other, self))
    return fn


def _g(ctx):
    a, b = ctx.saved_tensors
    a = a if a is not None else ctx.a_scalar
    b = b if b is not None else ctx.b_scalar
    return a, b


def _zero_grad(ctx, g):
    return None, None


add = defbinary("add", "x0 + x1", backward=lambda ctx, g: (g, g), reflect="__radd__", saves=False)
def _needs(ctx):
    """Which of the two operands want a gradient (both, where the context was not made by the recorder)."""
    return ctx.needs_input_grad or (True, True)


def _mul_backward(ctx, g):
    a, b = ctx.saved_tensors
    if a is None:
        a = ctx.a_scalar
    if b is None:
        b = ctx.b_scalar
    na, nb = ctx.needs_input_grad or (True, True)
    if _grad_state.enabled:       # create_graph: recorded products (double backward)
        return (g * b if na else None), (g * a if nb else None)
    # the engine without create_graph: mul's forward itself, what ``g * b`` reaches through the public call (mul has
    # no autocast or 16-bit widening entry and a real op's gradient is real), without the call's layers
    f = _BINARY["mul"].forward
    return (f(None, g, b) if na else None), (f(None, g, a) if nb else None)


sub = defbinary("sub", "x0 - x1", backward=lambda ctx, g: (g, -g if _needs(ctx)[1] else None), saves=False)
mul = defbinary("mul", "x0 * x1", backward=_mul_backward, reflect="__rmul__")
_true_div = defbinary("true_divide", "x0 / x1", rule="float",
                backward=lambda ctx, g: (lambda a, b: (g / b, -g * a / (b * b) if _is_t(b) else None))(*_g(ctx)))
atan2 = defbinary("atan2", "atan2(x0, x1)", rule="float",
                  backward=lambda ctx, g: (lambda a, b: (g * b / (a * a + b * b), -g * a / (a * a + b * b)))(*_g(ctx)))
maximum = defbinary("maximum", lambda ct: "nan_max_f(x0, x1)" if ct.is_floating_point else "(x0 > x1 ? x0 : x1)",
                    backward=lambda ctx, g: _minmax_grad(ctx, g, True), inplace=False)
minimum = defbinary("minimum", lambda ct: "nan_min_f(x0, x1)" if ct.is_floating_point else "(x0 < x1 ? x0 : x1)",
                    backward=lambda ctx, g: _minmax_grad(ctx, g, False), inplace=False)
fmax = defbinary("fmax", lambda ct: "fmax(x0, x1)" if ct.is_floating_point else "(x0 > x1 ? x0 : x1)",
                 backward=lambda ctx, g: _fminmax_grad(ctx, g, True), inplace=False)
fmin = defbinary("fmin", lambda ct: "fmin(x0, x1)" if ct.is_floating_point else "(x0 < x1 ? x0 : x1)",
                 backward=lambda ctx, g: _fminmax_grad(ctx, g, False), inplace=False)
_remainder_raw = defbinary("remainder", lambda ct: "remainder_f(x0, x1)",
                           backward=lambda ctx, g: (lambda a, b: (g, -g * floor_divide(a, b) if _is_t(b) else None))(
                               *_g(ctx)))
_fmod_raw = defbinary("fmod", lambda ct: "fmod(x0, x1)" if ct.is_floating_point else "(x0 % x1)",
                      backward=lambda ctx, g: (lambda a, b: (g, -g * (a / b).trunc() if _is_t(b) else None))(*_g(ctx)))
_floordiv_raw = defbinary("floor_divide", lambda ct: "floordiv_f(x0, x1)", backward=_zero_grad)
eq = defbinary("eq", "x0 == x1", rule="bool")
ne = defbinary("ne", "x0 != x1", rule="bool")
lt = defbinary("lt", "x0 < x1", rule="bool")
le = defbinary("le", "x0 <= x1", rule="bool")
gt = defbinary("gt", "x0 > x1", rule="bool")
ge = defbinary("ge", "x0 >= x1", rule="bool")
bitwise_and = defbinary("bitwise_and", "x0 & x1", rule="int")
bitwise_or = defbinary("bitwise_or", "x0 | x1", rule="int")
bitwise_xor = defbinary("bitwise_xor", "x0 ^ x1", rule="int")
logical_and = defbinary("logical_and", "(x0 != 0) && (x1 != 0)", rule="bool", inplace=False)
logical_or = defbinary("logical_or", "(x0 != 0) || (x1 != 0)", rule="bool", inplace=False)
logical_xor = defbinary("logical_xor", "(x0 != 0) != (x1 != 0)", rule="bool", inplace=False)
hypot = defbinary("hypot", "hypot(x0, x1)", rule="float", inplace=False,
                  backward=lambda ctx, g: (lambda a, b: (g * a / hypot(a, b), g * b / hypot(a, b)))(*_g(ctx)))


def _minmax_grad(ctx, g, is_max):
    a, b = _g(ctx)
    if not _is_t(b):
        m = (a > b) if is_max else (a < b)
        return g * m + g * (a == b) * 0.5, None
    if not _is_t(a):
        m = (b > a) if is_max else (b < a)
        return None, g * m + g * (a == b) * 0.5
    ma = (a > b) if is_max else (a < b)
    tie = (a == b) * 0.5
    return g * (ma + tie), g * ((~ma) & (a != b)) + g * tie


def _fminmax_grad(ctx, g, is_max):
    """PyTorch's fmax/fmin derivative: a gets the gradient where it was chosen (a >= b for fmax, a <= b for
    fmin, ties included) or b is NaN; b gets it everywhere else."""
    a, b = _g(ctx)
    sel = (a >= b) if is_max else (a <= b)
    if _is_t(b):
        sel = sel | b.isnan()
    elif b != b:
        sel = sel | True
    ga = where(sel, g, 0.0) if _is_t(a) else None
    gb = where(sel, 0.0, g) if _is_t(b) else None
    return ga, gb


def _check_intdiv(a, b, name):
    dt = D.result_type(a, b)
    if not dt.is_floating_point:
        if _is_t(b):
            if (b == 0).any().item():
                raise ZeroDivisionError(f"{name}: integer division by zero")
        elif b == 0:
            raise ZeroDivisionError(f"{name}: integer division by zero")


def floor_divide(a, b, *, out=None):
    """``a // b``: rounds toward negative infinity (PyTorch's floor_divide). Integer division by zero raises
    ZeroDivisionError."""
    _check_intdiv(a, b, "floor_divide")
    return _floordiv_raw(a, b, out=out)


def remainder(a, b, *, out=None):
    """Python's modulus: the result takes the divisor's sign. Integer division by zero raises ZeroDivisionError."""
    _check_intdiv(a, b, "remainder")
    return _remainder_raw(a, b, out=out)


def fmod(a, b, *, out=None):
    """C's fmod: the result takes the dividend's sign."""
    _check_intdiv(a, b, "fmod")
    return _fmod_raw(a, b, out=out)


def div(a, b, *, rounding_mode=None, out=None):
    """True division, or ``rounding_mode='trunc'`` / ``'floor'``. Integer inputs give float for true division."""
    if rounding_mode is None:
        return _true_div(a, b, out=out)
    if rounding_mode == "floor":
        return floor_divide(a, b, out=out)
    if rounding_mode == "trunc":
        dt = D.result_type(a, b)
        if dt.is_floating_point:
            return _true_div(a, b).trunc()
        _check_intdiv(a, b, "div")
        return _trunc_div(a, b)
    raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'")


_trunc_div = defbinary("_trunc_div_int", "x0 / x1", inplace=False)
div_true = _true_div
true_divide = _true_div
method("div", lambda self, other, *, rounding_mode=None: div(self, other, rounding_mode=rounding_mode))
method("divide", lambda self, other, *, rounding_mode=None: div(self, other, rounding_mode=rounding_mode))
divide = div
method("floor_divide", floor_divide)
method("remainder", remainder)
method("fmod", fmod)
method("__truediv__", _true_div)
method("__rtruediv__", lambda self, other: _true_div(other, self))
method("__floordiv__", lambda self, other: floor_divide(self, other))
method("__rfloordiv__", lambda self, other: floor_divide(other, self))
method("__mod__", lambda self, other: remainder(self, other))
method("__rmod__", lambda self, other: remainder(other, self))


def _div_(self, other, *, rounding_mode=None):
    if rounding_mode is None:
        return self.true_divide_(other)
    r = div(self, other, rounding_mode=rounding_mode)
    check_inplace(self, r.dtype, r._shape)
    return self.copy_(r)


method("div_", _div_)
method("__itruediv__", lambda self, other: self.true_divide_(other))
method("__ifloordiv__", lambda self, other: self.copy_(floor_divide(self, other)))
method("__imod__", lambda self, other: self.copy_(remainder(self, other)))


def _add(a, b, *, alpha=1, out=None):
    if alpha != 1:
        b = b * alpha
    return add_raw(a, b, out=out)


def _sub(a, b, *, alpha=1, out=None):
    if _is_t(a) and a.dtype is D.bool and _is_t(b) and b.dtype is D.bool:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
                           "`logical_xor()` operator instead.")
    if alpha != 1:
        b = b * alpha
    return sub_raw(a, b, out=out)


add_raw, sub_raw = add, sub
_add_inplace, _sub_inplace = Tensor.add_, Tensor.sub_
method("add", lambda self, other, *, alpha=1: _add(self, other, alpha=alpha))
method("sub", lambda self, other, *, alpha=1: _sub(self, other, alpha=alpha))
method("add_", lambda self, other, *, alpha=1: _add_inplace(self, other * alpha if alpha != 1 else other))
method("sub_", lambda self, other, *, alpha=1: _sub_inplace(self, other * alpha if alpha != 1 else other))
method("subtract", Tensor.sub)
method("multiply", Tensor.mul)
method("__add__", add_raw)
method("__sub__", _sub)
method("__rsub__", lambda self, other: _sub(other, self))
method("__mul__", mul)
method("__iadd__", lambda self, other: _add_inplace(self, other))
method("__isub__", lambda self, other: _sub_inplace(self, other))
method("__imul__", lambda self, other: self.mul_(other))
_NUMBER = (int, float, bool, complex, np.number, np.bool_)      # Python and numpy scalars
method("__eq__", lambda self, other: eq(self, other) if _is_t(other) or isinstance(other, _NUMBER) else False)
method("__ne__", lambda self, other: ne(self, other) if _is_t(other) or isinstance(other, _NUMBER) else True)
method("__lt__", lambda self, other: lt(self, other))
method("__le__", lambda self, other: le(self, other))
method("__gt__", lambda self, other: gt(self, other))
method("__ge__", lambda self, other: ge(self, other))
method("__and__", lambda self, other: logical_and(self, other) if self.dtype is D.bool and
       (not _is_t(other) or other.dtype is D.bool) else bitwise_and(self, other))
method("__or__", lambda self, other: logical_or(self, other) if self.dtype is D.bool and
       (not _is_t(other) or other.dtype is D.bool) else bitwise_or(self, other))
method("__xor__", lambda self, other: logical_xor(self, other) if self.dtype is D.bool and
       (not _is_t(other) or other.dtype is D.bool) else bitwise_xor(self, other))
method("__rand__", lambda self, other: self.__and__(other))
method("__ror__", lambda self, other: self.__or__(other))
method("__rxor__", lambda self, other: self.__xor__(other))
method("__iand__", lambda self, other: self.copy_(self & other))
method("__ior__", lambda self, other: self.copy_(self | other))
method("__ixor__", lambda self, other: self.copy_(self ^ other))
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne
for _n, _f in (("greater", gt), ("greater_equal", ge), ("less", lt), ("less_equal", le), ("not_equal", ne)):
    method(_n, _f)
add, sub = _add, _sub
subtract, multiply = _sub, mul


# ----------------------------------------------------------------------------- pow
def _pow_backward(ctx, g):
    a, b = _g(ctx)
    ga = gb = None
    if _is_t(a) and a.requires_grad or ctx.needs_input_grad[:1] == (True,):
        if _is_t(b):
            ga = g * b * pow(a, b - 1)
        else:
            ga = g * b * pow(a, b - 1) if b != 0 else a * 0
    if _is_t(b):
        ab = pow(a, b)
        gb = g * ab * (a.log() if _is_t(a) else math.log(a))
    return ga, gb


_pow_raw = defbinary("pow", lambda ct: "pow(x0, x1)" if ct.is_floating_point else "ipow_l(x0, x1)",
                     backward=_pow_backward, inplace=True)


def pow(a, b, *, out=None):  # noqa: A001
    """``a ** b``. An integer tensor to a negative integer power raises RuntimeError, as in PyTorch."""
    dt = D.result_type(a, b)
    if not dt.is_floating_point and not dt.is_complex:
        if _is_t(b):
            if (b < 0).any().item():
                raise RuntimeError("Integers to negative integer powers are not allowed.")
        elif b < 0:
            raise RuntimeError("Integers to negative integer powers are not allowed.")
    if _is_t(a) and not _is_t(b) and b == 2:
        return mul(a, a) if out is None else out.copy_(mul(a, a))
    return _pow_raw(a, b, out=out)


_pow_inplace = Tensor.pow_
method("pow", pow)
method("__pow__", pow)
method("__rpow__", lambda self, other: pow(other, self))
method("pow_", lambda self, e: _pow_inplace(self, e))
method("__ipow__", lambda self, e: _pow_inplace(self, e))
float_power = lambda a, b: pow(a.double() if _is_t(a) else a, b.double() if _is_t(b) else b)  # noqa: E731


# ----------------------------------------------------------------------------- unary ops
def _derivative_reads(backward, bw_expr):
    """Whether a unary derivative ``backward(a, out, grad)`` (and its fused form ``bw_expr`` over x0 = grad,
    x1 = a, x2 = out) reads its input and its output: the forward saves only those, as PyTorch's derivative
    formulas save only the tensors they name, so an in-place op on a tensor the derivative never reads (``y =
    x.sin(); y.mul_(2)``) does not trip the saved-tensor version check."""
    if backward is None:
        return False, False
    code = backward.__code__
    # every name an instruction mentions (Python 3.13's LOAD_FAST_LOAD_FAST names two at once, as a tuple), and
    # the parameters a nested function reads: a parameter no instruction names is one the derivative never reads
    read = set(code.co_cellvars)
    for ins in dis.get_instructions(code):
        v = ins.argval
        read.update(v if isinstance(v, tuple) else (v,))
    a_name, out_name = code.co_varnames[:2]
    expr = bw_expr or ""
    return (a_name in read or re.search(r"\bx1\b", expr) is not None,
            out_name in read or re.search(r"\bx2\b", expr) is not None)


def _unary_forward(name, expr, rule, keeps=(True, True)):
    keep_a, keep_out = keeps
    resolved = {}   # the operand's signature, default dtype, deterministic flag -> _launch entry (see _launch)

    def resolve(a):
        dt = a.dtype
        if rule == "float":
            rdt = _float_result(dt)
        elif rule == "bool":
            rdt = D.bool
        elif rule == "float_only":
            if not dt.is_floating_point:
                raise RuntimeError(f"{name}(): expected a floating-point tensor, got {dt}")
            rdt = dt
        elif rule == "int":
            if dt.is_floating_point:
                raise RuntimeError(f"\"{name}_cpu\" not implemented for '{dt.name.capitalize()}': {name} needs "
                                   "integer or bool tensors")
            rdt = dt
        elif rule == "nobool":
            if dt is D.bool:
                raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If you are trying "
                                   "to invert a mask, use the `~` or `logical_not()` operator instead.")
            rdt = dt
        else:
            rdt = dt
        cdt = _ct(rdt if rule != "bool" else dt)
        if rule in ("same", "int") and dt is D.bool:
            cdt = D.uint8
        e = "(x0 == 0)" if rule == "int" and dt is D.bool else _render(expr, cdt)   # bool: ~ is logical not
        return [e, rdt, cdt, None]

    def forward(ctx, a, out=None):
        key = (_signature(a), D.get_default_dtype(), DETERMINISTIC[0])
        r = resolved.get(key)
        if r is None:
            r = resolved[key] = resolve(a)
        out = _launch(r, (a,)) if out is None else pointwise(r[0], [a], r[1], r[2], out=out)
        if ctx is not None:
            ctx.save_for_backward(a if keep_a else None, out if keep_out else None)
        return out
    forward.resolved = resolved     # read by defunary's functions (their one-frame path)
    return forward


def defunary(name, expr, rule="float", backward=None, inplace=True, uses_out=False, bw_expr=None):
    """Register unary op ``name``: kernel ``expr`` over x0, dtype ``rule``, derivative ``backward(a, out, grad)``
    written with differentiable tensor ops. ``bw_expr``, when given, is the same derivative as one kernel
    expression over x0 = grad, x1 = a, x2 = out, in the order of ``backward``'s operations (so the result is
    bit-identical under FP_CONTRACT OFF): the backward launches it once instead of one kernel per operation when
    the gradient itself is not recorded (no ``create_graph``) and grad, a and out share a float32/float64 dtype,
    as PyTorch's ``tanh_backward``-style kernels do."""
    fused = {}      # (grad, a, out) signatures and the deterministic flag -> _launch entry
    keeps = _derivative_reads(backward, bw_expr)

    def bw(ctx, g):
        a, o = ctx.saved_tensors
        if bw_expr is not None and not _grad_state.enabled:
            # the one the expression does not read (not saved) stands in for it in the launch's operands
            a, o = (o if a is None else a), (a if o is None else o)
            dt = o.dtype
            if g.dtype is dt and a.dtype is dt and (dt is D.float32 or dt is D.float64):
                key = (_signature(g), _signature(a), _signature(o), DETERMINISTIC[0])
                r = fused.get(key)
                if r is None:
                    r = fused[key] = [_render(bw_expr, dt), dt, dt, None]
                return (_launch(r, (g, a, o)),)
        return (backward(a, o, g),)
    op = register(name, _unary_forward(name, expr, rule, keeps), bw if backward is not None else None)
    resolved, recorded, direct = op.forward.resolved, backward is not None, op.widen is None

    def fn(a, *, out=None):
        # the common case in one frame, as defbinary's functions: forward's recorded plan for this signature
        if out is None and direct and _grad_state.ac is None and isinstance(a, Tensor) and \
                not (recorded and _grad_state.enabled and a._requires_grad):
            r = resolved.get(((a.dtype, a._shape, a._stride, a.device), D._default[0], DETERMINISTIC[0]))
            if r is not None and r[3] is not None:
                res = r[3].run((a,), None)
                if res is not None:
                    return res
        if a.dtype._kind == 3:
            return complex_call(name, (a,), out)
        if out is not None:
            return out.copy_(call(op, a))
        return call(op, a)
    fn.__name__ = name
    fn.__doc__ = f"Elementwise ``{name}``."
    method(name, fn)
    if inplace:
        def fn_(self):
            if self.dtype._kind == 3:
                return _complex_inplace(self, name, fn(self))
            rdt = _float_result(self.dtype) if rule == "float" else self.dtype
            check_inplace(self, rdt, None)
            r = run_inplace(self, name + "_", fn)
            if r is not None:
                return r
            op.forward(None, self, out=self)
            self._storage.version += 1
            return self
        method(name + "_", fn_)
    return fn


_S2PI = "0.7978845608028654f"
neg = defunary("neg", "-x0", "nobool", lambda a, o, g: -g)
method("__neg__", neg)
method("negative", neg)
negative = neg
abs = defunary("abs", lambda ct: "fabs(x0)" if ct.is_floating_point else "(x0 < 0 ? -x0 : x0)", "same",  # noqa: A001
               lambda a, o, g: g * a.sign())
method("__abs__", abs)
absolute = abs
sign = defunary("sign", "(x0 > 0) - (x0 < 0)", "same", lambda a, o, g: g * 0)
sgn = sign
reciprocal = defunary("reciprocal", "1.0f / x0", "float", lambda a, o, g: -g * o * o, uses_out=True)
exp = defunary("exp", "exp(x0)", "float", lambda a, o, g: g * o, uses_out=True)
exp2 = defunary("exp2", "exp2(x0)", "float", lambda a, o, g: g * o * math.log(2.0), uses_out=True)
expm1 = defunary("expm1", "expm1(x0)", "float", lambda a, o, g: g * (o + 1), uses_out=True)
log = defunary("log", "log(x0)", "float", lambda a, o, g: g / a)
log2 = defunary("log2", "log2(x0)", "float", lambda a, o, g: g / (a * math.log(2.0)))
log10 = defunary("log10", "log10(x0)", "float", lambda a, o, g: g / (a * math.log(10.0)))
log1p = defunary("log1p", "log1p(x0)", "float", lambda a, o, g: g / (a + 1))
sqrt = defunary("sqrt", "sqrt(x0)", "float", lambda a, o, g: g / (o * 2), uses_out=True,
                bw_expr="x0 / (x2 * 2.0f)")
rsqrt = defunary("rsqrt", "rsqrt(x0)", "float", lambda a, o, g: g * o * o * o * -0.5, uses_out=True)
sin = defunary("sin", "sin(x0)", "float", lambda a, o, g: g * a.cos(), bw_expr="x0 * cos(x1)")
cos = defunary("cos", "cos(x0)", "float", lambda a, o, g: -g * a.sin(), bw_expr="(-x0) * sin(x1)")
tan = defunary("tan", "tan(x0)", "float", lambda a, o, g: g * (o * o + 1), uses_out=True)
asin = defunary("asin", "asin(x0)", "float", lambda a, o, g: g * (1 - a * a).rsqrt())
acos = defunary("acos", "acos(x0)", "float", lambda a, o, g: -g * (1 - a * a).rsqrt())
atan = defunary("atan", "atan(x0)", "float", lambda a, o, g: g / (a * a + 1))
arcsin, arccos, arctan = asin, acos, atan
sinh = defunary("sinh", "sinh(x0)", "float", lambda a, o, g: g * a.cosh())
cosh = defunary("cosh", "cosh(x0)", "float", lambda a, o, g: g * a.sinh())
tanh = defunary("tanh", "tanh(x0)", "float", lambda a, o, g: g * (1 - o * o), uses_out=True,
                bw_expr="x0 * (1.0f - x2 * x2)")
asinh = defunary("asinh", "asinh(x0)", "float", lambda a, o, g: g * (a * a + 1).rsqrt())
acosh = defunary("acosh", "acosh(x0)", "float", lambda a, o, g: g * (a * a - 1).rsqrt())
atanh = defunary("atanh", "atanh(x0)", "float", lambda a, o, g: g / (1 - a * a))
sigmoid = defunary("sigmoid", "1.0f / (1.0f + exp(-x0))", "float", lambda a, o, g: g * o * (1 - o), uses_out=True,
                   bw_expr="(x0 * x2) * (1.0f - x2)")
relu = defunary("relu", lambda ct: "(x0 < 0 ? (%s)0 : x0)" % ct.cl, "same", lambda a, o, g: g * (o > 0),
                bw_expr="x0 * (x2 > 0.0f ? 1.0f : 0.0f)")     # reads its output, as PyTorch's threshold_backward
erf = defunary("erf", "erf(x0)", "float", lambda a, o, g: g * (2.0 / math.sqrt(math.pi)) * (-(a * a)).exp())
erfc = defunary("erfc", "erfc(x0)", "float", lambda a, o, g: g * (-2.0 / math.sqrt(math.pi)) * (-(a * a)).exp())
floor = defunary("floor", lambda ct: "floor(x0)" if ct.is_floating_point else "x0", "same", lambda a, o, g: g * 0)
ceil = defunary("ceil", lambda ct: "ceil(x0)" if ct.is_floating_point else "x0", "same", lambda a, o, g: g * 0)
trunc = defunary("trunc", lambda ct: "trunc(x0)" if ct.is_floating_point else "x0", "same", lambda a, o, g: g * 0)
fix = trunc
frac = defunary("frac", "x0 - trunc(x0)", "float_only", lambda a, o, g: g)
_round0 = defunary("round", lambda ct: "rint(x0)" if ct.is_floating_point else "x0", "same", lambda a, o, g: g * 0)
isnan = defunary("isnan", lambda ct: "isnan(x0)" if ct.is_floating_point else "0", "bool", inplace=False)
isinf = defunary("isinf", lambda ct: "isinf(x0)" if ct.is_floating_point else "0", "bool", inplace=False)
isfinite = defunary("isfinite", lambda ct: "isfinite(x0)" if ct.is_floating_point else "1", "bool", inplace=False)
isposinf = defunary("isposinf", lambda ct: "(isinf(x0) && x0 > 0)" if ct.is_floating_point else "0", "bool",
                    inplace=False)
isneginf = defunary("isneginf", lambda ct: "(isinf(x0) && x0 < 0)" if ct.is_floating_point else "0", "bool",
                    inplace=False)
logical_not = defunary("logical_not", "x0 == 0", "bool", inplace=False)
bitwise_not = defunary("bitwise_not", "~x0", "int")
signbit = defunary("signbit", lambda ct: "signbit(x0)" if ct.is_floating_point else "x0 < 0", "bool", inplace=False)
silu = defunary("silu", "x0 / (1.0f + exp(-x0))", "float_only",
                lambda a, o, g: (lambda s: g * (s * (1 + a * (1 - s))))(a.sigmoid()))
mish = defunary("mish", "x0 * tanh(log1p(exp(x0)))", "float_only",
                lambda a, o, g: (lambda sp, s: g * (sp.tanh() + a * s * (1 - sp.tanh() ** 2)))(
                    softplus(a), a.sigmoid()))
gelu_exact = defunary("gelu", "0.5f * x0 * (1.0f + erf(x0 * 0.7071067811865476f))", "float_only",
                      lambda a, o, g: g * (0.5 * (1 + (a * 0.7071067811865476).erf())
                                           + a * (-(a * a) * 0.5).exp() * (1.0 / math.sqrt(2 * math.pi))),
                      inplace=False)
gelu_tanh = defunary("gelu_tanh", "0.5f * x0 * (1.0f + tanh(%s * (x0 + 0.044715f * x0 * x0 * x0)))" % _S2PI,
                     "float_only", lambda a, o, g: _gelu_tanh_grad(a, g), inplace=False)
method("__invert__", lambda self: logical_not(self) if self.dtype is D.bool else bitwise_not(self))
method("relu_", Tensor.relu_)


def _gelu_tanh_grad(a, g):
    k = 0.7978845608028654
    inner = (a + a * a * a * 0.044715) * k
    t = inner.tanh()
    dinner = (a * a * 0.134145 + 1) * k
    return g * (0.5 * (1 + t) + 0.5 * a * (1 - t * t) * dinner)


def gelu(a, approximate="none"):
    """GELU: ``x * Φ(x)`` (``approximate='none'``, erf) or the tanh approximation (``'tanh'``)."""
    if approximate == "tanh":
        return gelu_tanh(a)
    if approximate != "none":
        raise RuntimeError(f"approximate argument must be either none or tanh, got '{approximate}'")
    return gelu_exact(a)


method("gelu", gelu)


def round(a, *, decimals=0, out=None):  # noqa: A001
    """Rounds halves to even (``rint``), as PyTorch does; ``decimals`` scales by 10**decimals first."""
    if decimals == 0:
        return _round0(a, out=out)
    s = 10.0 ** decimals
    r = _round0(a * s) / s
    return r if out is None else out.copy_(r)


method("round", round)


def softplus(a, beta=1.0, threshold=20.0):
    """``log(1 + exp(beta x)) / beta``, linear above ``threshold`` (PyTorch's formula)."""
    return call(_softplus_op, a, float(beta), float(threshold))


def _softplus_fwd(ctx, a, beta, threshold):
    cdt = _ct(a.dtype)
    if ctx is not None:
        ctx.save_for_backward(a)
        ctx.beta, ctx.threshold = beta, threshold
    return pointwise(_render("(x0 * x1 > x2) ? x0 : log1p(exp(x0 * x1)) / x1", cdt), [a, beta, threshold], a.dtype,
                     cdt)


def _softplus_bwd(ctx, g):
    (a,) = ctx.saved_tensors
    z = a * ctx.beta
    return g * where(z > ctx.threshold, 1.0, z.sigmoid()), None, None


_softplus_op = register("softplus", _softplus_fwd, _softplus_bwd)


def _nan_to_num_fwd(ctx, a, nan, posinf, neginf):
    if ctx is not None:
        ctx.save_for_backward(a)
    cdt = _ct(a.dtype)
    return pointwise(_render("isnan(x0) ? x1 : (isinf(x0) ? (x0 > 0 ? x2 : x3) : x0)", cdt),
                     [a, nan, posinf, neginf], a.dtype, cdt)


# PyTorch's derivative: the gradient passes where the input is finite, zero where it was replaced
_nan_to_num_op = register("nan_to_num", _nan_to_num_fwd,
                          lambda ctx, g: (where(ctx.saved_tensors[0].isfinite(), g, 0.0), None, None, None))


def nan_to_num(a, nan=0.0, posinf=None, neginf=None):
    """Replaces NaN, +inf and -inf with finite values (default: 0, the dtype's max and min). Differentiable:
    the gradient is zero at the replaced entries."""
    if not a.dtype.is_floating_point:
        return a.clone()
    fi = D.finfo(a.dtype)
    posinf = fi.max if posinf is None else posinf
    neginf = fi.min if neginf is None else neginf
    return call(_nan_to_num_op, a, float(nan), float(posinf), float(neginf))


method("nan_to_num", nan_to_num)


# ----------------------------------------------------------------------------- clamp, where, lerp, addc*
def _clamp_fwd(ctx, a, lo, hi):
    rdt = D.result_type(*[x for x in (a, lo, hi) if x is not None])
    cdt = _ct(rdt)
    if ctx is not None:
        ctx.save_for_backward(a, lo if _is_t(lo) else None, hi if _is_t(hi) else None)
        ctx.lo, ctx.hi = lo, hi
    ops, e = [a], "x0"
    if cdt.is_floating_point:
        if lo is not None:
            ops.append(lo)
            e = f"(isnan(x{len(ops) - 1}) ? x{len(ops) - 1} : (({e}) < x{len(ops) - 1} ? x{len(ops) - 1} : ({e})))"
        if hi is not None:
            ops.append(hi)
            e = f"(isnan(x{len(ops) - 1}) ? x{len(ops) - 1} : (({e}) > x{len(ops) - 1} ? x{len(ops) - 1} : ({e})))"
        e = f"(isnan(x0) ? x0 : {e})"
    else:
        if lo is not None:
            ops.append(lo)
            e = f"(({e}) < x{len(ops) - 1} ? x{len(ops) - 1} : ({e}))"
        if hi is not None:
            ops.append(hi)
            e = f"(({e}) > x{len(ops) - 1} ? x{len(ops) - 1} : ({e}))"
    return pointwise(e, ops, rdt, cdt)


def _clamp_bwd(ctx, g):
    """PyTorch's ``clamp_backward_min_max``: with both bounds and min > max the result is max, so max takes
    the gradient there and neither input nor min does."""
    a, lo_t, hi_t = ctx.saved_tensors
    lo, hi = ctx.lo, ctx.hi
    m = None
    if lo is not None:
        m = a >= lo
    if hi is not None:
        m2 = a <= hi
        m = m2 if m is None else (m & m2)
    ga = where(m, g, 0.0)
    glo = ghi = None
    if lo_t is not None:
        p = a < lo
        glo = where(p & (lo < hi) if hi is not None else p, g, 0.0)
    if hi_t is not None:
        p = a > hi
        ghi = where(p | (hi < lo) if lo is not None else p, g, 0.0)
    return ga, glo, ghi


_clamp_op = register("clamp", _clamp_fwd, _clamp_bwd)


def clamp(a, min=None, max=None, *, out=None):  # noqa: A002
    """Clamp into [min, max]; bounds are scalars or tensors; NaN propagates (unlike OpenCL's fmin/fmax)."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    r = call(_clamp_op, a, min, max)
    return r if out is None else out.copy_(r)


def clamp_(self, min=None, max=None):  # noqa: A002
    r = run_inplace(self, "clamp_", clamp, min, max)
    if r is not None:
        return r
    return self.copy_(clamp(self, min, max))


clip = clamp
method("clamp", clamp)
method("clip", clamp)
method("clamp_", clamp_)
method("clip_", clamp_)
method("clamp_min", lambda self, m: clamp(self, min=m))
method("clamp_max", lambda self, m: clamp(self, max=m))
method("clamp_min_", lambda self, m: clamp_(self, min=m))


def _where_fwd(ctx, cond, a, b):
    rdt = D.result_type(a, b)
    cdt = _ct(rdt)
    if ctx is not None:
        ctx.save_for_backward(cond)
        ctx.shapes = (a._shape if _is_t(a) else None, b._shape if _is_t(b) else None)
    return pointwise("x0 ? x1 : x2", [cond, a, b], rdt, cdt, op_compute=[D.uint8, cdt, cdt])


def _where_bwd(ctx, g):
    (cond,) = ctx.saved_tensors
    sa, sb = ctx.shapes
    z = g * 0
    return None, (where(cond, g, z) if sa is not None else None), (where(cond, z, g) if sb is not None else None)


_where_op = register("where", _where_fwd, _where_bwd)


def where(condition, input=None, other=None, *, out=None):  # noqa: A002
    """``where(cond, a, b)`` picks a where cond else b (broadcast); ``where(cond)`` is ``nonzero(as_tuple=True)``."""
    if input is None and other is None:
        return condition.nonzero(as_tuple=True)
    if condition.dtype is not D.bool:
        if condition.dtype is D.uint8:
            condition = condition != 0
        else:
            raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype "
                               f"{condition.dtype.name.capitalize()}")
    r = call(_where_op, condition, input, other)
    return r if out is None else out.copy_(r)


method("where", lambda self, condition, other: where(condition, self, other))


def _lerp_fwd(ctx, a, b, w):
    rdt = a.dtype
    cdt = _ct(rdt)
    if ctx is not None:
        ctx.save_for_backward(a, b, w if _is_t(w) else None)
        ctx.w = w
    return pointwise("x0 + x2 * (x1 - x0)", [a, b, w], rdt, cdt)


def _lerp_bwd(ctx, g):
    a, b, wt = ctx.saved_tensors
    w = wt if wt is not None else ctx.w
    return g * (1 - w), g * w, (g * (b - a) if wt is not None else None)


_lerp_op = register("lerp", _lerp_fwd, _lerp_bwd)


def lerp(input, end, weight):  # noqa: A002
    """``input + weight * (end - input)``."""
    return call(_lerp_op, input, end, weight)


method("lerp", lambda self, end, weight: lerp(self, end, weight))
method("lerp_", lambda self, end, weight: self.copy_(lerp(self, end, weight)))


def _addc_fwd(kind):
    def fwd(ctx, a, t1, t2, value):
        rdt = D.result_type(a, t1, t2)
        cdt = _ct(rdt)
        if ctx is not None:
            ctx.save_for_backward(t1, t2)
            ctx.value = value
        e = "x0 + x3 * x1 * x2" if kind == "mul" else "x0 + x3 * (x1 / x2)"
        return pointwise(e, [a, t1, t2, value], rdt, cdt)
    return fwd


def _addcmul_bwd(ctx, g):
    t1, t2 = ctx.saved_tensors
    return g, g * t2 * ctx.value, g * t1 * ctx.value, None


def _addcdiv_bwd(ctx, g):
    t1, t2 = ctx.saved_tensors
    return g, g * ctx.value / t2, -g * ctx.value * t1 / (t2 * t2), None


_addcmul_op = register("addcmul", _addc_fwd("mul"), _addcmul_bwd)
_addcdiv_op = register("addcdiv", _addc_fwd("div"), _addcdiv_bwd)


def addcmul(input, tensor1, tensor2, *, value=1):  # noqa: A002
    """``input + value * tensor1 * tensor2``."""
    return call(_addcmul_op, input, tensor1, tensor2, value)


def addcdiv(input, tensor1, tensor2, *, value=1):  # noqa: A002
    """``input + value * tensor1 / tensor2``."""
    return call(_addcdiv_op, input, tensor1, tensor2, value)


def _inplace_via(fn):
    def f(self, *args, **kw):
        r = run_inplace(self, fn.__name__ + "_", lambda s, *a: fn(s, *a, **kw), *args)
        if r is not None:
            return r
        res = fn(self, *args, **kw)
        check_inplace(self, res.dtype, res._shape)
        return self.copy_(res)
    return f


method("addcmul", addcmul)
method("addcdiv", addcdiv)
method("addcmul_", _inplace_via(addcmul))
method("addcdiv_", _inplace_via(addcdiv))


def _masked_fill_fwd(ctx, a, mask, value):
    cdt = _ct(a.dtype)
    if ctx is not None:
        ctx.save_for_backward(mask)
        ctx.value_is_t = _is_t(value)
    return pointwise("x1 ? x2 : x0", [a, mask, value], a.dtype, cdt, op_compute=[cdt, D.uint8, cdt])


def _masked_fill_bwd(ctx, g):
    (mask,) = ctx.saved_tensors
    gv = where(mask, g, g * 0).sum() if ctx.value_is_t else None
    return where(mask, g * 0, g), None, gv


_masked_fill_op = register("masked_fill", _masked_fill_fwd, _masked_fill_bwd)


def masked_fill(input, mask, value):  # noqa: A002
    """Where ``mask`` (bool, broadcastable) is True, ``value``; else ``input``."""
    if mask.dtype is not D.bool:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{mask.dtype.name}")
    if _is_t(value) and value.dim() != 0:
        raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value.dim()} dimension(s).")
    if _cx(input) or _cx(value):
        return complex_call("masked_fill", (input, mask, value))
    return call(_masked_fill_op, input, mask, value)


def masked_fill_(self, mask, value):
    if _cx(self) or _cx(value):
        return _complex_inplace(self, "masked_fill_", masked_fill(self, mask, value))
    r = run_inplace(self, "masked_fill_", masked_fill, mask, value)
    if r is not None:
        return r
    if mask.dtype is not D.bool:
        raise RuntimeError("masked_fill_ only supports boolean masks")
    broadcast = broadcast_shapes(self._shape, mask._shape)
    check_inplace(self, None, broadcast)
    res = _masked_fill_op.forward(None, self, mask, value.item() if _is_t(value) else value)  # into a new tensor
    return self.copy_(res)


method("masked_fill", masked_fill)
method("masked_fill_", masked_fill_)


# ----------------------------------------------------------------------------- casts and fills
def cast(a, dtype):
    """A copy of ``a`` converted to ``dtype`` (float to int truncates; to bool is ``!= 0``)."""
    from .._storage import check_caps
    check_caps(dtype, a.device)
    if a.device.type == "cpu":
        from .._tensor import Tensor as T
        arr = a._host_view()
        if dtype is D.bool:
            res = (arr != 0).astype(dtype.np)
        else:
            res = D.host_values(arr, dtype).astype(dtype.np)
        from .._storage import Storage
        return T._make(Storage.from_host(res.reshape(-1), a.device), a._shape)
    cdt = _ct(dtype) if dtype.is_floating_point else _ct(a.dtype)
    return pointwise("x0", [a], dtype, cdt)


def full_like_value(out, value):
    """Fill ``out`` (any strides) with a Python scalar; returns out."""
    if out.numel() == 0:
        return out
    if out.dtype._kind == 3 and not (out.device.type == "cpu" and out.is_contiguous()):
        from .complex import fill_complex
        return fill_complex(out, value)
    if out.device.type == "cpu" and out.is_contiguous():
        out._storage.host_sync()
        out._host_view()[...] = D.host_values(value, out.dtype)
        return out
    cdt = _ct(out.dtype)
    if not cdt.is_floating_point:   # the kernel's scalar argument has the tensor's integer type
        value = int(value) if math.isfinite(value) else 0
    return pointwise("x0", [value], out.dtype, cdt, out=out, shape=out._shape)


__all__ = [n for n in dir() if not n.startswith("_") and n not in (
    "math", "re", "D", "call", "register", "is_grad_enabled", "Tensor", "method", "pointwise", "broadcast_shapes",
    "check_inplace", "run_inplace", "defbinary", "defunary", "cast", "full_like_value", "add_raw", "sub_raw",
    "div_true", "gelu_exact", "gelu_tanh")]
