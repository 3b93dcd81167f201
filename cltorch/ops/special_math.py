"""Special pointwise functions (gamma family, Bessel I, error-function family, xlogy, logaddexp, ...).

Each is one entry of the pointwise registry (``pointwise.defunary`` / ``defbinary``): an expression of the one
elementwise template, whose device helpers (``sm_*``) live in ``cl_kernels/special_math.cl.mako`` (the methods
and their sources are cited there), and a derivative written with differentiable tensor ops:
lgamma' = digamma, digamma' = polygamma(1), polygamma(n)' = polygamma(n+1), erfinv' = sqrt(pi)/2 exp(erfinv^2),
i0' = i1, i1' = i0 - i1/x, i0e' = i1e - sign(x) i0e, i1e' = i0e - i1e (sign(x) + 1/x), ndtr' = phi(x),
ndtri' = 1/phi(ndtri), erfcx' = 2x erfcx - 2/sqrt(pi), sinc' = (cos(pi x) - sinc(x))/x.

Integer and bool inputs compute in the default float dtype, as PyTorch's.
"""
import math

from .. import _dtype as D
from .._tensor import Tensor
from ._util import method
from .pointwise import defunary, defbinary, _g, where

__all__ = ["lgamma", "digamma", "polygamma", "mvlgamma", "erfinv", "i0", "sinc", "logit", "xlogy", "logaddexp",
           "logaddexp2", "copysign", "deg2rad", "rad2deg", "heaviside", "square", "nextafter", "ldexp", "gcd",
           "lcm", "positive", "rsub"]

_SQRT_PI = math.sqrt(math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _is_t(x):
    return isinstance(x, Tensor)


lgamma = defunary("lgamma", "lgamma(x0)", "float", lambda a, o, g: g * a.digamma())
digamma = defunary("digamma", "sm_digamma_f(x0)", "float", lambda a, o, g: g * polygamma(1, a))
psi = digamma
_POLYGAMMA = {}


def polygamma(n, input, *, out=None):  # noqa: A002
    """``polygamma(n, input)``: the n-th derivative of digamma, (-1)^(n+1) n! zeta(n+1, x) for n >= 1.

    ``n`` is a non-negative int; a negative n raises RuntimeError. Float result (integers to the default dtype)."""
    if isinstance(n, Tensor):
        n = n.item()
    if int(n) != n or n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    n = int(n)
    if n == 0:
        return digamma(input, out=out)
    fn = _POLYGAMMA.get(n)
    if fn is None:
        fn = _POLYGAMMA[n] = defunary(f"polygamma_{n}", f"sm_polygamma_f({n}, x0)", "float",
                                      lambda a, o, g, n=n: g * polygamma(n + 1, a), inplace=False)
    return fn(input, out=out)


method("polygamma", lambda self, n: polygamma(n, self))
method("polygamma_", lambda self, n: self.copy_(polygamma(n, self)))


def mvlgamma(input, p):  # noqa: A002
    """Multivariate log-gamma of dimension ``p``: sum_j lgamma(x - j/2) + p(p-1)/4 log(pi).

    Raises RuntimeError when an element is <= (p-1)/2 (PyTorch's domain check; it syncs to read the result)."""
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    if not input.dtype.is_floating_point:
        raise RuntimeError("mvlgamma: expected a floating-point input, got " + str(input.dtype))
    if (input <= (p - 1) / 2).any().item():
        raise RuntimeError(f"All elements must be greater than (p-1)/2 = {(p - 1) / 2}")
    res = input.lgamma()
    for j in range(1, p):
        res = res + (input - j / 2).lgamma()
    return res + p * (p - 1) / 4 * math.log(math.pi)


method("mvlgamma", mvlgamma)
multigammaln = mvlgamma
erfinv = defunary("erfinv", "sm_erfinv_f(x0)", "float", lambda a, o, g: g * (_SQRT_PI / 2) * (o * o).exp(),
                  uses_out=True)
i0 = defunary("i0", "sm_i0_f(x0)", "float", lambda a, o, g: g * i1(a))
i1 = defunary("special_i1", "sm_i1_f(x0)", "float", inplace=False,
              backward=lambda a, o, g: g * where(a == 0, 0.5, i0(a) - o / a))
i0e = defunary("special_i0e", "sm_i0e_f(x0)", "float", inplace=False,
               backward=lambda a, o, g: g * (i1e(a) - a.sign() * o))
i1e = defunary("special_i1e", "sm_i1e_f(x0)", "float", inplace=False,
               backward=lambda a, o, g: g * where(a == 0, 0.5, i0e(a) - o * (a.sign() + 1 / a)))
ndtr = defunary("special_ndtr", "sm_ndtr_f(x0)", "float", inplace=False,
                backward=lambda a, o, g: g * _INV_SQRT_2PI * (a * a * -0.5).exp())
ndtri = defunary("special_ndtri", "sm_ndtri_f(x0)", "float", inplace=False,
                 backward=lambda a, o, g: g * math.sqrt(2 * math.pi) * (o * o * 0.5).exp())
log_ndtr = defunary("special_log_ndtr", "sm_log_ndtr_f(x0)", "float", inplace=False,
                    backward=lambda a, o, g: g * _INV_SQRT_2PI * (a * a * -0.5 - o).exp())
erfcx = defunary("special_erfcx", "sm_erfcx_f(x0)", "float", inplace=False,
                 backward=lambda a, o, g: g * (2 * a * o - 2 / _SQRT_PI))
sinc = defunary("sinc", "sm_sinc_f(x0)", "float",
                backward=lambda a, o, g: g * where(a == 0, 0.0, ((a * math.pi).cos() - o) / a))
entr = defunary("special_entr", "sm_entr_f(x0)", "float", inplace=False,
                backward=lambda a, o, g: -g * (a.log() + 1))
_logit_raw = defunary("logit", "log(x0 / (1.0f - x0))", "float", lambda a, o, g: g / (a * (1 - a)))
deg2rad = defunary("deg2rad", "x0 * 0.017453292519943295f", "float", lambda a, o, g: g * (math.pi / 180))
rad2deg = defunary("rad2deg", "x0 * 57.29577951308232f", "float", lambda a, o, g: g * (180 / math.pi))


def logit(input, eps=None, *, out=None):  # noqa: A002
    """log(p / (1 - p)); with ``eps`` the input is first clamped to [eps, 1 - eps] (gradient 0 outside)."""
    x = input if eps is None else input.clamp(eps, 1 - eps)
    return _logit_raw(x, out=out)


method("logit", lambda self, eps=None: logit(self, eps))
method("logit_", lambda self, eps=None: self.copy_(logit(self, eps)))


def _xlogy_bw(log_fn, shift):
    def bw(ctx, g):
        a, b = _g(ctx)
        ga = gb = None
        if _is_t(a):
            lb = log_fn(b) if _is_t(b) else log_fn(b + 0.0 * a)
            ga = g * where((a == 0) & ~lb.isnan(), 0.0, lb)
        if _is_t(b):
            gb = g * a / (b + shift)
        return ga, gb
    return bw


xlogy = defbinary("xlogy", "sm_xlogy_f(x0, x1)", rule="float",
                  backward=_xlogy_bw(lambda y: y.log(), 0))
xlog1py = defbinary("special_xlog1py", "sm_xlog1py_f(x0, x1)", rule="float", inplace=False,
                    backward=_xlogy_bw(lambda y: y.log1p(), 1))


def _lae_bw(scale):
    def bw(ctx, g):
        a, b = _g(ctx)
        d = (a - b) * scale
        s = d.sigmoid() if _is_t(d) else None
        return (g * s if _is_t(a) else None), (g * (1 - s) if _is_t(b) else None)
    return bw


logaddexp = defbinary("logaddexp", "sm_logaddexp_f(x0, x1)", rule="float", inplace=False, backward=_lae_bw(1.0))
logaddexp2 = defbinary("logaddexp2", "sm_logaddexp2_f(x0, x1)", rule="float", inplace=False,
                       backward=_lae_bw(math.log(2.0)))


def _copysign_bw(ctx, g):
    a, b = _g(ctx)
    if not _is_t(a):
        return None, (g * 0 if _is_t(b) else None)
    sb = copysign(1.0, b) if _is_t(b) else math.copysign(1.0, b)
    return g * a.sign() * sb, (g * 0 if _is_t(b) else None)


copysign = defbinary("copysign", "copysign(x0, x1)", rule="float", backward=_copysign_bw)
nextafter = defbinary("nextafter", "nextafter(x0, x1)", rule="float", inplace=False,
                      backward=lambda ctx, g: (g, g * 0 if _is_t(_g(ctx)[1]) else None))
zeta = defbinary("special_zeta", "sm_zeta_f(x0, x1)", rule="float", inplace=False)
gcd = defbinary("gcd", "sm_gcd_f(x0, x1)", rule="int")
lcm = defbinary("lcm", "sm_lcm_f(x0, x1)", rule="int")
_heaviside_raw = defbinary("heaviside", "(x0 == 0 ? x1 : (x0 > 0))", inplace=False)


def heaviside(input, values, *, out=None):  # noqa: A002
    """0 where input < 0, ``values`` where input == 0, 1 where input > 0. Both must have one dtype (RuntimeError
    otherwise, as PyTorch's)."""
    vd = values.dtype if _is_t(values) else None
    if vd is not None and vd is not input.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes")
    return _heaviside_raw(input, values, out=out)


method("heaviside", heaviside)


def ldexp(input, other, *, out=None):  # noqa: A002
    """input * 2**other (float result)."""
    r = input * (2.0 ** other if not _is_t(other) else other.to(D.float64 if input.dtype is D.float64 else
                                                                   D.get_default_dtype()).exp2())
    if not r.dtype.is_floating_point:
        r = r.to(D.get_default_dtype())
    return out.copy_(r) if out is not None else r


method("ldexp", ldexp)
method("ldexp_", lambda self, other: self.copy_(ldexp(self, other)))


def square(input, *, out=None):  # noqa: A002
    """input * input (bool input gives int64, as PyTorch's pow(x, 2))."""
    if input.dtype is D.bool:
        input = input.long()
    r = input * input
    return out.copy_(r) if out is not None else r


method("square", square)
method("square_", lambda self: self.mul_(self))


def positive(input):  # noqa: A002
    """The input itself; bool raises TypeError as PyTorch's."""
    if input.dtype is D.bool:
        raise TypeError("The `+` operator, on a bool tensor is not supported.")
    return input


method("positive", positive)


def rsub(input, other, *, alpha=1):  # noqa: A002
    """other - alpha * input."""
    return other - input * alpha if alpha != 1 else other - input


method("rsub", rsub)


def frexp(input, *, out=None):  # noqa: A002
    """(mantissa, exponent) with input = mantissa * 2**exponent, |mantissa| in [0.5, 1) (0, inf and NaN keep
    exponent 0). Exponent is int32; the mantissa is input / 2**exponent (exact), differentiable through it.
    Floating input only (RuntimeError)."""
    import collections
    from .elementwise import pointwise
    if not input.dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    ct = D.float32 if input.dtype in (D.float16, D.bfloat16) else input.dtype
    e = pointwise("((x0 == 0 || isinf(x0) || isnan(x0)) ? 0 : ilogb(x0) + 1)", [input.detach()], D.int32, ct)
    m = input / e.to(input.dtype).exp2()
    res = _FREXP(m, e)
    if out is not None:
        out[0].copy_(m)
        out[1].copy_(e)
        return _FREXP(*out)
    return res


_FREXP = __import__("collections").namedtuple("frexp", ["mantissa", "exponent"])
method("frexp", frexp)
__all__ += ["frexp"]
spherical_bessel_j0 = defunary("special_spherical_bessel_j0", "(x0 == 0 ? 1.0f : (isinf(x0) ? 0.0f : sin(x0) / x0))",
                               "float", inplace=False,
                               backward=lambda a, o, g: g * where(a == 0, 0.0, (a.cos() - o) / a))

# orthogonal polynomials p_n(x) of integer degree n (a tensor or a number; float n is truncated); not
# differentiable, as PyTorch's
chebyshev_polynomial_t = defbinary("special_chebyshev_polynomial_t", "sm_cheb_t_f(x0, x1)", rule="float", inplace=False)
chebyshev_polynomial_u = defbinary("special_chebyshev_polynomial_u", "sm_cheb_u_f(x0, x1)", rule="float", inplace=False)
chebyshev_polynomial_v = defbinary("special_chebyshev_polynomial_v", "sm_cheb_v_f(x0, x1)", rule="float", inplace=False)
chebyshev_polynomial_w = defbinary("special_chebyshev_polynomial_w", "sm_cheb_w_f(x0, x1)", rule="float", inplace=False)
shifted_chebyshev_polynomial_t = defbinary("special_shifted_chebyshev_polynomial_t", "sm_scheb_t_f(x0, x1)",
                                           rule="float", inplace=False)
shifted_chebyshev_polynomial_u = defbinary("special_shifted_chebyshev_polynomial_u", "sm_scheb_u_f(x0, x1)",
                                           rule="float", inplace=False)
shifted_chebyshev_polynomial_v = defbinary("special_shifted_chebyshev_polynomial_v", "sm_scheb_v_f(x0, x1)",
                                           rule="float", inplace=False)
shifted_chebyshev_polynomial_w = defbinary("special_shifted_chebyshev_polynomial_w", "sm_scheb_w_f(x0, x1)",
                                           rule="float", inplace=False)
hermite_polynomial_h = defbinary("special_hermite_polynomial_h", "sm_hermite_h_f(x0, x1)", rule="float", inplace=False)
hermite_polynomial_he = defbinary("special_hermite_polynomial_he", "sm_hermite_he_f(x0, x1)", rule="float",
                                  inplace=False)
laguerre_polynomial_l = defbinary("special_laguerre_polynomial_l", "sm_laguerre_f(x0, x1)", rule="float", inplace=False)
legendre_polynomial_p = defbinary("special_legendre_polynomial_p", "sm_legendre_f(x0, x1)", rule="float", inplace=False)

# shifts: a shift by >= the bit width (or a negative one) gives 0, or -1 for a right shift of a negative value
bitwise_left_shift = defbinary("bitwise_left_shift", "((x1 < 0 || x1 >= 8 * sizeof(x0)) ? 0 : (x0 << x1))",
                               rule="int")
bitwise_right_shift = defbinary("bitwise_right_shift",
                                "((x1 < 0 || x1 >= 8 * sizeof(x0)) ? (x0 < 0 ? -1 : 0) : (x0 >> x1))", rule="int")
method("__lshift__", bitwise_left_shift)
method("__rshift__", bitwise_right_shift)
method("__rlshift__", lambda self, other: bitwise_left_shift(other, self))
method("__rrshift__", lambda self, other: bitwise_right_shift(other, self))
method("__ilshift__", lambda self, other: self.bitwise_left_shift_(other))
method("__irshift__", lambda self, other: self.bitwise_right_shift_(other))
__all__ += ["bitwise_left_shift", "bitwise_right_shift"]


def _igamma_bw(sign):
    def bw(ctx, g):
        a, x = _g(ctx)
        if _is_t(a) and a.requires_grad:
            raise NotImplementedError("the derivative of igamma/igammac with respect to input (the shape a) is "
                                      "not implemented (as in PyTorch)")
        if not _is_t(x):
            return None, None
        lg = a.lgamma() if _is_t(a) else math.lgamma(a)
        return None, g * sign * ((a - 1) * x.log() - x - lg).exp()
    return bw


igamma = defbinary("igamma", "sm_igamma_f(x0, x1)", rule="float", backward=_igamma_bw(1.0))
igammac = defbinary("igammac", "sm_igammac_f(x0, x1)", rule="float", backward=_igamma_bw(-1.0))
gammainc, gammaincc = igamma, igammac
__all__ += ["igamma", "igammac"]

# Bessel functions of the first and second kind, modified Bessel K (plain and scaled by e^x), Airy Ai: device
# helpers in special_math.cl.mako (series, Miller's recurrence, Hankel's expansion, the trapezoidal rule on K's
# integral, Taylor steps of Airy's equation; see there). Float and double; not differentiable, as PyTorch's.
bessel_j0 = defunary("special_bessel_j0", "sm_bessel_j0_f(x0)", "float", inplace=False)
bessel_j1 = defunary("special_bessel_j1", "sm_bessel_j1_f(x0)", "float", inplace=False)
bessel_y0 = defunary("special_bessel_y0", "sm_bessel_y0_f(x0)", "float", inplace=False)
bessel_y1 = defunary("special_bessel_y1", "sm_bessel_y1_f(x0)", "float", inplace=False)
modified_bessel_k0 = defunary("special_modified_bessel_k0", "sm_modified_bessel_k0_f(x0)", "float", inplace=False)
modified_bessel_k1 = defunary("special_modified_bessel_k1", "sm_modified_bessel_k1_f(x0)", "float", inplace=False)
scaled_modified_bessel_k0 = defunary("special_scaled_modified_bessel_k0", "sm_scaled_modified_bessel_k0_f(x0)",
                                     "float", inplace=False)
scaled_modified_bessel_k1 = defunary("special_scaled_modified_bessel_k1", "sm_scaled_modified_bessel_k1_f(x0)",
                                     "float", inplace=False)
airy_ai = defunary("special_airy_ai", "sm_airy_ai_f(x0)", "float", inplace=False)
