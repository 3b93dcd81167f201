"""Complex tensors (complex64, complex128): the two reinterpreting views, constructors, and arithmetic lowered onto
real ops.

Layout: a complex tensor of shape S, strides st and offset o is stored as interleaved (re, im) pairs (float2 or
double2 in kernels, numpy complex on the host). ``view_as_real`` is the real tensor of shape S + (2,), strides
2*st + (1,), offset 2*o over the same memory (``Storage.alias``), and ``view_as_complex`` its inverse; both are
zero-copy. Data movement (copies, ``cat``, indexing, permutes) moves whole elements of any itemsize, so it runs on
complex tensors directly.

Arithmetic: every complex op here is composed of real ops on those views (through the one elementwise template and
the reduction template): ``(a+ib)(c+id) = (ac-bd) + i(ad+bc)`` and so on. So complex ops need no second engine, and
their gradients come from the real ops' derivatives and the two views, whose backwards are each other. That gives
PyTorch's convention: the gradient of a real loss L w.r.t. z is dL/dRe(z) + i dL/dIm(z), and a linear map's
backward is its adjoint (mul's grad_a = g * conj(b)). ``abs`` has its own derivative (g * z/|z|, 0 at z = 0).

``conj`` materializes (``is_conj()`` is always False; ``resolve_conj`` returns its input). Pointwise ops without a
complex lowering raise NotImplementedError naming the op (see ``pointwise.complex_call``).
"""
import math
import warnings
import weakref

from .. import _dtype as D
from .._dispatch import call, register
from .._tensor import Tensor
from ._util import method
from . import pointwise as P
from .views import select, _materialize

__all__ = ["view_as_real", "view_as_complex", "real", "imag", "complex", "polar", "angle", "conj", "conj_physical",
           "resolve_conj", "resolve_neg", "sgn", "is_conj", "isreal"]

_builtin_complex = complex
_aliases = weakref.WeakValueDictionary()     # (id(storage), dtype name) -> alias storage (which keeps storage alive)


def _alias(st, dtype):
    """``st``'s memory as a storage of ``dtype`` (one alias per storage and dtype while it lives)."""
    if st._alias_of is not None and st._alias_of.dtype is dtype:
        return st._alias_of
    key = (id(st), dtype.name)
    a = _aliases.get(key)
    if a is None or a._alias_of is not st:
        a = st.alias(dtype)
        _aliases[key] = a
    return a


def real_view(z):
    """view_as_real without autograd (the raw geometry)."""
    return Tensor._make(_alias(z._storage, z.dtype.to_real()), z._shape + (2,),
                        tuple(2 * s for s in z._stride) + (1,), 2 * z._offset)


def _complex_viewable(x):
    return x._shape and x._shape[-1] == 2 and x._stride[-1] == 1 and x._offset % 2 == 0 and \
        all(s % 2 == 0 for s, n in zip(x._stride[:-1], x._shape[:-1]) if n != 1)


def complex_view(x):
    """view_as_complex without autograd (x must pass view_as_complex's checks)."""
    return Tensor._make(_alias(x._storage, x.dtype.to_complex()), x._shape[:-1],
                        tuple(s // 2 if n != 1 else s for s, n in zip(x._stride[:-1], x._shape[:-1])),
                        x._offset // 2)


def _vr_fwd(ctx, z):
    if not z.dtype.is_complex:
        raise RuntimeError("view_as_real is only supported for complex tensors")
    v = real_view(z)
    v.__dict__["_complex_of"] = z       # an in-place op through v re-links z's graph (autograd.inplace_rebase)
    return v


def _as_complex_grad(g):
    if not _complex_viewable(g):
        g = g.contiguous()
    return view_as_complex(g)


def _vc_fwd(ctx, x):
    if x.dtype not in (D.float32, D.float64):
        raise RuntimeError("view_as_complex is only supported for float and double tensors, but got a tensor of "
                           f"scalar type: {x.dtype.name.capitalize()}")
    if not x._shape or x._shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    if x._stride[-1] != 1:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if not all(s % 2 == 0 for s, n in zip(x._stride[:-1], x._shape[:-1]) if n != 1):
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last dimension")
    if x._offset % 2:
        raise RuntimeError("Tensor must have a storage_offset divisible by 2")
    return complex_view(x)


_vr_op = register("view_as_real", _vr_fwd, lambda ctx, g: (_as_complex_grad(g),))
_vc_op = register("view_as_complex", _vc_fwd, lambda ctx, g: (view_as_real(g),))


def view_as_real(input):  # noqa: A002
    """The complex tensor ``input`` (shape S) viewed as a real tensor of shape S + (2,) holding (re, im): no copy,
    float32 for complex64, float64 for complex128. Raises RuntimeError for a real input. Backward:
    view_as_complex of the gradient."""
    return call(_vr_op, input)


def view_as_complex(input):  # noqa: A002
    """A float32/float64 tensor of shape S + (2,) (last stride 1, other strides and the offset even) viewed as a
    complex tensor of shape S: no copy. Raises RuntimeError naming the violated condition."""
    return call(_vc_op, input)


def real(input):  # noqa: A002
    """The real part: a float view of a complex tensor (writable: ``z.real.copy_(x)`` changes z); a real tensor
    itself."""
    return select(view_as_real(input), -1, 0) if input.dtype.is_complex else input


def imag(input):  # noqa: A002
    """The imaginary part as a float view of a complex tensor. Raises RuntimeError for a real tensor, as PyTorch."""
    if not input.dtype.is_complex:
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return select(view_as_real(input), -1, 1)


def complex(real, imag):  # noqa: A001,A002 - PyTorch's names
    """``real + i imag`` (broadcast) as complex64 from float32 parts, complex128 from float64. Raises RuntimeError
    when the parts are not both float32 or both float64. Gradients: real(g) and imag(g)."""
    for t, what in ((real, "real"), (imag, "imag")):
        if not isinstance(t, Tensor):
            raise TypeError(f"complex(): argument '{what}' must be Tensor, not {type(t).__name__}")
    if real.dtype not in (D.float32, D.float64) or imag.dtype not in (D.float32, D.float64):
        raise RuntimeError(f"Expected both inputs to be Half, Float or Double tensors but got "
                           f"{real.dtype.name.capitalize()} and {imag.dtype.name.capitalize()}")
    if real.dtype is not imag.dtype:
        raise RuntimeError(f"Expected object of scalar type {real.dtype.name.capitalize()} but got scalar type "
                           f"{imag.dtype.name.capitalize()} for second argument")
    from .joins import stack
    from .views import broadcast_tensors
    re, im = broadcast_tensors(real, imag)
    return view_as_complex(stack([re, im], -1))


def polar(abs, angle):  # noqa: A002
    """``abs * (cos(angle) + i sin(angle))``; same dtype rules as :func:`complex`."""
    return complex(abs * angle.cos(), abs * angle.sin())


def _abs_fwd(ctx, z):
    v = real_view(z)
    out = P.hypot(select(v, -1, 0), select(v, -1, 1))
    if ctx is not None:
        ctx.save_for_backward(z)
    return out


def _sgn_of(z, r):
    """z / |z|, 0 where |z| = 0 (r = |z|, real)."""
    safe = P.where(r == 0, 1.0, r)
    return view_as_complex(view_as_real(z) / safe.unsqueeze(-1))


def _abs_bwd(ctx, g):
    z, = ctx.saved_tensors
    return (_mul(g, _sgn_of(z, call(_abs_op, z))),)


_abs_op = register("complex_abs", _abs_fwd, _abs_bwd)


def cabs(z):
    """|z| of a complex tensor as its real dtype (hypot of the parts); gradient g * z/|z| (0 at z = 0)."""
    return call(_abs_op, z)


def angle(input):  # noqa: A002
    """The argument: atan2(im, re) for complex; for real input pi where negative, 0 elsewhere, NaN kept (PyTorch).
    Integer inputs give the default float dtype."""
    if input.dtype.is_complex:
        v = view_as_real(input)
        return P.atan2(select(v, -1, 1), select(v, -1, 0))
    x = input if input.dtype.is_floating_point else input.to(D.get_default_dtype())
    return P.where(x.isnan(), x, P.where(x < 0, math.pi, 0.0).to(x.dtype))


_CONJ = {}


def conj(input):  # noqa: A002
    """The complex conjugate, materialized (``is_conj()`` stays False); a real tensor itself. Gradient conj(g)."""
    if not input.dtype.is_complex:
        return input
    rd = input.dtype.to_real()
    key = (input.device, rd)
    s = _CONJ.get(key)
    if s is None:
        from .creation import tensor
        s = _CONJ[key] = tensor([1.0, -1.0], dtype=rd, device=input.device)
    return view_as_complex(view_as_real(input) * s)


conj_physical = conj


def resolve_conj(input):  # noqa: A002
    """``input`` itself: cltorch's conj materializes, so no tensor carries a lazy conjugate bit."""
    return input


resolve_neg = resolve_conj


def is_conj(input):  # noqa: A002
    """False: cltorch never sets a lazy conjugate bit (``conj`` materializes)."""
    return False


def isreal(input):  # noqa: A002
    """True where the imaginary part is 0 (everywhere for a real tensor)."""
    if input.dtype.is_complex:
        return imag(input) == 0
    from .creation import ones
    return ones(input._shape, dtype=D.bool, device=input.device)


def sgn(input):  # noqa: A002
    """z / |z| for complex (0 at 0); ``sign`` for real tensors."""
    if not input.dtype.is_complex:
        return P.sign(input)
    return _sgn_of(input, cabs(input).detach() if not input.requires_grad else cabs(input))


# ----------------------------------------------------------------------------- arithmetic over (re, im) parts
def _parts(x, rd):
    """An operand's (re, im) as real tensors of dtype ``rd`` or Python floats; im is None for a real operand."""
    if isinstance(x, Tensor):
        if x.dtype.is_complex:
            if x.dtype.to_real() is not rd:
                x = x.to(rd.to_complex())
            v = view_as_real(x)
            return select(v, -1, 0), select(v, -1, 1)
        return (x if x.dtype is rd else x.to(rd)), None
    if isinstance(x, (_builtin_complex,)) or hasattr(x, "imag") and not isinstance(x, (int, float, bool)):
        return float(x.real), float(x.imag)
    return float(x), None


def _add_p(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def _sub_p(a, b):
    if b is None:
        return a
    if a is None:
        return -b
    return a - b


def _mul_p(a, b):
    return None if a is None or b is None else a * b


def _assemble(re, im):
    """complex(re, im): re is a tensor (one operand is), im a tensor, a Python float or None (zero)."""
    if im is None:
        im = re * 0
    elif not isinstance(im, Tensor):
        im = re * 0 + im
    if re.device != im.device:       # a 0-d cpu part with a device part
        re, im = (re.to(im.device), im) if not re._shape else (re, im.to(re.device))
    return complex(re, im)


def _rdt(a, b):
    rd = D.result_type(a, b).to_real()
    if rd not in (D.float32, D.float64):
        rd = D.float32 if rd is D.float16 or rd is D.bfloat16 else rd
    return rd


def _add(a, b):
    rd = _rdt(a, b)
    (ar, ai), (br, bi) = _parts(a, rd), _parts(b, rd)
    return _assemble(_add_p(ar, br), _add_p(ai, bi))


def _sub(a, b):
    rd = _rdt(a, b)
    (ar, ai), (br, bi) = _parts(a, rd), _parts(b, rd)
    return _assemble(_sub_p(ar, br), _sub_p(ai, bi))


def _mul(a, b):
    rd = _rdt(a, b)
    (ar, ai), (br, bi) = _parts(a, rd), _parts(b, rd)
    return _assemble(_sub_p(ar * br, _mul_p(ai, bi)), _add_p(_mul_p(ar, bi), _mul_p(ai, br)))


def _div(a, b):
    rd = _rdt(a, b)
    (ar, ai), (br, bi) = _parts(a, rd), _parts(b, rd)
    if bi is None:
        return _assemble(ar / br, None if ai is None else ai / br)
    den = br * br + bi * bi
    return _assemble(_add_p(ar * br, _mul_p(ai, bi)) / den, _sub_p(_mul_p(ai, br), ar * bi) / den)


def _eq(a, b):
    rd = _rdt(a, b)
    (ar, ai), (br, bi) = _parts(a, rd), _parts(b, rd)
    r = P.eq(ar, br)
    ai, bi = (0.0 if ai is None else ai), (0.0 if bi is None else bi)
    if isinstance(ai, Tensor) or isinstance(bi, Tensor):
        return r & P.eq(ai, bi)
    return r if ai == bi else r & False


def _neg(z):
    return view_as_complex(-view_as_real(z))


def _reciprocal(z):
    return _div(1.0, z)


def _exp(z):
    v = view_as_real(z)
    re, im = select(v, -1, 0), select(v, -1, 1)
    m = re.exp()
    return complex(m * im.cos(), m * im.sin())


def _log(z):
    v = view_as_real(z)
    return complex(cabs(z).log(), P.atan2(select(v, -1, 1), select(v, -1, 0)))


def _sqrt(z):
    v = view_as_real(z)
    return polar(cabs(z).sqrt(), P.atan2(select(v, -1, 1), select(v, -1, 0)) * 0.5)


def _pow(a, b):
    """a ** b = exp(b log a) (principal branch); 0 ** b is 0 for b with positive real part, as PyTorch."""
    if not isinstance(b, Tensor) and b == 2:
        return _mul(a, a)
    if not isinstance(a, Tensor) or not a.dtype.is_complex:
        a = _add(a, 0j) if isinstance(a, Tensor) else a
    if not isinstance(a, Tensor):
        la = _builtin_complex(a)
        import cmath
        return _exp(_mul(b, cmath.log(la))) if la != 0 else _mul(b, 0.0)
    return _exp(_mul(b, _log(a)))


def _c_sum(x, dim=None, keepdim=False, dtype=None):
    """sum over a complex tensor: the sum of the real view over the same dims."""
    from .reductions import sum as rsum
    from .reduction import normalize_dims
    if dtype is not None and D.to_dtype(dtype) is not x.dtype:
        x = x.to(dtype)
    dims = tuple(range(x.dim())) if dim is None or dim == () or dim == [] else normalize_dims(dim, x.dim())
    return view_as_complex(rsum(view_as_real(x), dims, keepdim) if dims else view_as_real(x).clone())


def _c_mean(x, dim=None, keepdim=False, dtype=None):
    from .reductions import mean as rmean
    from .reduction import normalize_dims
    if dtype is not None and D.to_dtype(dtype) is not x.dtype:
        x = x.to(dtype)
    dims = tuple(range(x.dim())) if dim is None or dim == () or dim == [] else normalize_dims(dim, x.dim())
    return view_as_complex(rmean(view_as_real(x), dims, keepdim) if dims else view_as_real(x).clone())


def _masked_fill(input, mask, value):  # noqa: A002
    """where(mask, value, input) in input's complex dtype (a real input with a complex value raises, as PyTorch)."""
    if not input.dtype.is_complex:
        raise RuntimeError(f"masked_fill: cannot fill a {input.dtype} tensor with a complex value")
    if isinstance(value, Tensor):
        value = value.to(input.dtype)
    else:
        from .creation import full
        value = full((), _builtin_complex(value), dtype=input.dtype, device=input.device)
    rv, ri = view_as_real(input), view_as_real(value.expand(input._shape))
    return view_as_complex(P.where(mask.unsqueeze(-1), ri, rv))


P.COMPLEX_OPS.update({"masked_fill": _masked_fill, "add": _add, "sub": _sub, "mul": _mul, "true_divide": _div, "eq": _eq,
                      "ne": lambda a, b: ~_eq(a, b), "neg": _neg, "abs": cabs, "reciprocal": _reciprocal,
                      "exp": _exp, "log": _log, "sqrt": _sqrt, "pow": _pow,
                      "sign": None})


# ----------------------------------------------------------------------------- casts and fills (raw, no autograd)
def cast(x, dtype, device):
    """x (on ``device``) cast to ``dtype`` where one of the two is complex: real -> complex puts the values in the
    real part; complex -> real keeps the real part (warning, as PyTorch), complex -> bool is re != 0 or im != 0; complex64 <-> complex128 casts the parts."""
    from .creation import empty
    if dtype.is_complex:
        out = empty(x._shape, dtype=dtype, device=device)
        v = real_view(out)
        if x.dtype.is_complex:
            _copy_raw(v, real_view(x))
        else:
            _copy_raw(select(v, -1, 0).detach(), x)
            P.full_like_value(select(v, -1, 1).detach(), 0)
        return out
    if dtype is D.bool:             # PyTorch: nonzero when either part is (no warning)
        return (real_view(x).detach() != 0).any(-1).to(device=device)
    warnings.warn("Casting complex values to real discards the imaginary part", UserWarning, stacklevel=4)
    return _materialize(select(real_view(x), -1, 0).detach(), dtype, device)


def _copy_raw(dst, src):
    from .views import _copy_into
    from .._dispatch import set_grad_enabled_raw
    prev = set_grad_enabled_raw(False)
    try:
        _copy_into(dst, src)
    finally:
        set_grad_enabled_raw(prev)


def fill_complex(out, value):
    """Fill a complex tensor with a (complex or real) Python scalar: each part of its real view."""
    v = real_view(out)
    value = _builtin_complex(value)
    P.full_like_value(select(v, -1, 0), value.real)
    P.full_like_value(select(v, -1, 1), value.imag)
    return out


# ----------------------------------------------------------------------------- methods
def _set_real(self, value):
    real(self).copy_(value)


def _set_imag(self, value):
    imag(self).copy_(value)


Tensor.real = property(real, _set_real)
Tensor.imag = property(imag, _set_imag)
for _n in ("conj", "conj_physical", "resolve_conj", "resolve_neg", "is_conj", "isreal", "sgn", "angle"):
    method(_n, globals()[_n])
method("abs", lambda self: P.abs(self))
method("cfloat", lambda self, memory_format=None: self.to(D.complex64))
method("cdouble", lambda self, memory_format=None: self.to(D.complex128))
method("chalf", lambda self, memory_format=None: self.to(D.complex32))
