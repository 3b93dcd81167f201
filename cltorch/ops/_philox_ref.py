"""Counter-based random numbers: the pure-numpy reference of ``cl_kernels/philox.cl.mako``.

Every function here is bit-identical to the OpenCL kernel (the tests check this on every device), so
the numbers a seed gives are the same on ``cpu``, on every ``cl:N`` and here. DESIGN.md decision 6.

The generator
-------------
Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC 2011),
as in the Random123 headers that pyopencl ships (``pyopencl/cl/pyopencl-random123/philox.cl``). One
call maps a 128-bit counter and a 64-bit key to four 32-bit words ``x0..x3``.

- **key** = ``(seed mod 2**32, (seed >> 32) mod 2**32)`` (the 64-bit seed, low word first).
- **counter** of block ``b`` = ``(c mod 2**32, c >> 32, stream mod 2**32, stream >> 32)`` with
  ``c = (philox_offset + b) mod 2**64``. ``stream`` is 0 unless a caller asks for a separate stream.
- **element -> block**: a draw that needs ``W`` words takes ``4 // W`` elements per block, so element
  ``i`` of a fill uses block ``i // (4 // W)``, words ``W * (i % (4 // W))`` onwards. A fill of ``n``
  elements therefore consumes ``ceil(n / (4 // W))`` counters (see :func:`counters_used`); a Generator's
  offset advances by that much. Nothing depends on work-group size.

Words per element (``W``): 1 for ``bits``, ``bernoulli`` and float32 ``uniform``/``exponential``/
``normal`` (a float32 Box-Muller pair takes words (0, 1) or (2, 3) and gives elements 0, 1 or 2, 3 of
the block); 2 for ``randint`` (all dtypes) and float64 ``uniform``/``exponential``/``normal`` (a float64
pair takes all 4 words and gives the block's 2 elements).

Transforms (``x`` is a 32-bit word, ``w = x_hi << 32 | x_lo`` a 64-bit one made of two consecutive
words, the first one high)
----------------------------------------------------------------------------------------------------
- ``uniform`` float32: ``u = (x >> 8) * 2**-24`` in [0, 1) (exact), ``v = u * scale + low`` with
  ``scale = float32(high - low)``, ``low = float32(low)``; a ``v >= float32(high)`` (rounding can reach
  it) becomes ``low``. float64: ``u = (w >> 11) * 2**-53``, the same in float64.
- ``randint`` in ``[low, high)``: ``r = mulhi64(w, range)`` (Lemire's multiply-shift, without the
  rejection step), ``value = low + r``. With 64 random bits the relative bias of any outcome is at most
  ``range / 2**64`` (below 2**-32 for every range under 2**32). ``range = 2**64`` takes ``r = w``.
- ``bernoulli(p)``: ``x < T`` with ``T = ceil(p * 2**32)`` (0 for p <= 0 or NaN, at least 2**32 for
  p >= 1), so ``P(1) = ceil(p * 2**32) / 2**32``: exact to 2**-32. A tensor ``p`` (float32 or float64)
  gets ``T`` per element by the same rule, computed in its own precision (``p * 2**32`` and ``ceil`` are
  exact).
- ``exponential(lambd)``: ``u = (2 * (x >> 9) + 1) * 2**-24`` in (0, 1) (never 0 or 1),
  ``v = log(u) * nscale`` with ``nscale = -1 / lambd`` rounded to the dtype. float64: ``u = (2 * (w >>
  12) + 1) * 2**-53``.
- ``normal(mean, std)``, Box-Muller: ``u`` as for ``exponential`` from the first word(s) of the pair,
  an angle of ``k`` turns / 2**K from the second (``K = 24``: ``k = x >> 8``; float64: ``K = 53``,
  ``k = w >> 11``); ``R = sqrt(-2 log u)``; the pair is ``(R cos 2 pi k / 2**K, R sin 2 pi k / 2**K)``,
  then ``z * std + mean``.

Elementary functions from ``+``, ``-`` and ``*`` only
------------------------------------------------------
OpenCL allows its ``log``/``sin``/``cos`` several ulp of error, its single-precision ``sqrt`` and
division 3 and 2.5 ulp, and compilers contract ``a * b + c`` into FMA. So the kernel computes them
with the functions below, built from IEEE ``+``, ``-``, ``*`` (each correctly rounded, hence identical
on every conforming device and in numpy), exact integer and bit operations, and exact int-to-float
conversions, under ``#pragma OPENCL FP_CONTRACT OFF``. numpy evaluates the same operations in the same
order in the same precision.

- ``log(x)``, ``x`` positive and normal: ``x = 2**e * z`` with ``z`` in [0.6953125, 1.390625) found from
  the bits; a 64-entry table (indexed by the top mantissa bits of ``z``) gives a centre ``c``, ``1/c``
  and ``log c``, with ``c = 1`` for the two subintervals next to 1 so that ``log`` stays accurate
  there; ``r = (z - c) * (1/c)`` (``z - c`` is exact), ``|r| <= 1/64``;
  ``log x = (e * ln2_hi + log c) + ((r + r*r*L(r)) + e * ln2_lo)``.
- ``sin``/``cos`` of ``2 pi k / 2**K`` (``k`` an integer, so range reduction is exact integer work): the
  top two bits of ``k`` give the quadrant, the rest an angle in [0, pi/2) that is folded to
  ``x`` in [0, pi/4]; ``sin x = x + (x*t)*P(t)``, ``cos x = 1 + t*Q(t)``, ``t = x*x``.
- ``sqrt(v)``: the bit-trick reciprocal square root seed (``MAGIC - (bits(v) >> 1)``), Newton steps
  ``y = y * (1.5 - (h*y)*y)`` with ``h = 0.5 * v``, then ``s = v*y`` and one correction
  ``s + (0.5*y) * (v - s*s)``.

The polynomial coefficients ``P``, ``Q``, ``L`` were fitted offline (mpmath, 50 digits, weighted least
squares on Chebyshev nodes refined by Lawson's iteration towards minimax, weighted for relative error)
and are written below as fixed hex constants, so no machine recomputes them. The log tables are
computed at import with exact rational/``decimal`` arithmetic, which is deterministic. Measured
accuracy (``tests/test_philox.py``): float32 ``log`` within 2 ulp over all 2**23 inputs it can get,
sin/cos within 2 ulp over all 2**24 angles; float64 likewise on samples.

Bit-identity holds where every intermediate is a normal number or zero, which the transforms ensure
for their own work. Parameters that push a result below the smallest normal (``std=1e-39`` say) may
differ on devices that flush subnormals.
"""
from decimal import Decimal, localcontext

import numpy as np

__all__ = ["philox4x32", "key_from_seed", "counters", "random_words", "counters_used", "words_per_element",
           "bits", "uniform", "normal", "exponential", "randint", "bernoulli", "log", "sincos_turns",
           "sqrt", "Precision", "FLOAT", "DOUBLE", "precision", "uniform_params", "randint_params",
           "bernoulli_threshold", "exponential_params", "normal_params"]

MASK32 = 0xFFFFFFFF
MASK64 = 0xFFFFFFFFFFFFFFFF

# Philox4x32 constants (Random123 philox.h / pyopencl-random123/philox.cl)
PHILOX_M4x32_0 = 0xD2511F53
PHILOX_M4x32_1 = 0xCD9E8D57
PHILOX_W32_0 = 0x9E3779B9
PHILOX_W32_1 = 0xBB67AE85


# ---------------------------------------------------------------------------------------- Philox core
def philox4x32(ctr, key, rounds=10):
    """Philox4x32-R of counters ``ctr`` (uint32, shape (..., 4)) under ``key`` (uint32, (..., 2)).

    Returns uint32 of shape (..., 4). Same round function and key schedule as Random123's
    ``philox4x32_R``: round, then bump the key by the Weyl constants, ``rounds`` times (no bump after
    the last round).
    """
    ctr = np.asarray(ctr, dtype=np.uint32)
    key = np.asarray(key, dtype=np.uint32)
    c0, c1, c2, c3 = (ctr[..., j].astype(np.uint64) for j in range(4))
    k0 = np.broadcast_to(key[..., 0].astype(np.uint64), c0.shape)
    k1 = np.broadcast_to(key[..., 1].astype(np.uint64), c0.shape)
    m0, m1, m32 = np.uint64(PHILOX_M4x32_0), np.uint64(PHILOX_M4x32_1), np.uint64(MASK32)
    w0, w1 = np.uint64(PHILOX_W32_0), np.uint64(PHILOX_W32_1)
    s32 = np.uint64(32)
    for rnd in range(rounds):
        if rnd:
            k0 = (k0 + w0) & m32
            k1 = (k1 + w1) & m32
        p0 = m0 * c0
        p1 = m1 * c2
        c0, c1, c2, c3 = ((p1 >> s32) ^ c1 ^ k0, p1 & m32, (p0 >> s32) ^ c3 ^ k1, p0 & m32)
    return np.stack([c0, c1, c2, c3], axis=-1).astype(np.uint32)


def key_from_seed(seed):
    """The Philox key ``(lo, hi)`` of a seed: the seed taken modulo 2**64, low 32 bits first."""
    s = int(seed) & MASK64
    return s & MASK32, s >> 32


def counters(philox_offset, nblocks, stream=0):
    """The counters of blocks ``0 .. nblocks-1`` of a fill starting at ``philox_offset`` (uint32, (n, 4))."""
    c = (np.uint64(int(philox_offset) & MASK64) + np.arange(nblocks, dtype=np.uint64))  # wraps mod 2**64
    out = np.empty((nblocks, 4), np.uint32)
    out[:, 0] = (c & np.uint64(MASK32)).astype(np.uint32)
    out[:, 1] = (c >> np.uint64(32)).astype(np.uint32)
    s = int(stream) & MASK64
    out[:, 2] = s & MASK32
    out[:, 3] = s >> 32
    return out


def random_words(seed, philox_offset, nblocks, stream=0):
    """The four words of each of ``nblocks`` blocks (uint32, (nblocks, 4))."""
    return philox4x32(counters(philox_offset, nblocks, stream), np.array(key_from_seed(seed), np.uint32))


# ----------------------------------------------------------------------------------- bookkeeping
def _is_double(dtype):
    return np.dtype(_np_dtype(dtype)) == np.float64


def _np_dtype(dtype):
    return np.dtype(getattr(dtype, "np", dtype))


def words_per_element(kind, dtype=np.float32):
    """Random words one element of ``kind`` takes (1, 2 or 4); see the module docstring."""
    if kind in ("bits", "bernoulli"):
        return 1
    if kind in ("uniform", "exponential"):
        return 2 if _is_double(dtype) else 1
    if kind == "randint":
        return 2
    if kind == "normal":
        return 2 if _is_double(dtype) else 1
    raise ValueError(f"unknown random kind {kind!r}")


def elements_per_block(kind, dtype=np.float32):
    """Elements filled from one Philox block (4 words)."""
    return 4 // words_per_element(kind, dtype)


def counters_used(kind, n, dtype=np.float32):
    """Counters (Philox blocks) a fill of ``n`` elements of ``kind`` consumes: ``ceil(n / per_block)``."""
    e = elements_per_block(kind, dtype)
    return (int(n) + e - 1) // e


# ------------------------------------------------------------------------------ precision constants
def _hex(v, suffix):
    """A C hex-float literal that denotes exactly ``v``."""
    v = float(v)
    if v == 0.0:
        return ("-" if np.signbit(v) else "") + "0.0" + suffix
    return v.hex() + suffix


class Precision:
    """Everything the elementary functions need for one floating type (float32 or float64)."""

    def __init__(self, name, ftype, utype, itype, mant, magic, sqrt_iters, sin_c, cos_c, log_c, ln2_bits):
        self.name, self.ftype, self.utype, self.itype = name, ftype, utype, itype
        self.cl = "float" if ftype == np.float32 else "double"
        self.ucl = "uint" if utype == np.uint32 else "ulong"
        self.icl = "int" if utype == np.uint32 else "long"
        self.suffix = "f" if ftype == np.float32 else ""
        self.nbits = 32 if utype == np.uint32 else 64
        self.mant = mant
        self.expbits = self.nbits - 1 - mant
        self.magic = magic
        self.sqrt_iters = sqrt_iters
        self.sin_c = [ftype(float.fromhex(h)) for h in sin_c]
        self.cos_c = [ftype(float.fromhex(h)) for h in cos_c]
        self.log_c = [ftype(float.fromhex(h)) for h in log_c]
        # angle: K bits of turn; u: (2m+1) * 2**-(mant+1)
        self.kbits = mant + 1
        self.two_pi_k = ftype(2.0 * np.pi * 2.0 ** -self.kbits)      # exact scaling of float64 2 pi
        self._log_tables(ln2_bits)

    def _round(self, d):
        """Decimal -> this precision, correctly rounded for float64 (float32 via float64)."""
        return self.ftype(float(d))

    def _log_tables(self, ln2_bits):
        with localcontext() as ctx:
            ctx.prec = 60
            self._log_tables_60(ln2_bits)

    def _log_tables_60(self, ln2_bits):
        ln2 = Decimal(2).ln()
        # ln2_hi: ln 2 truncated to ln2_bits significant bits, so e * ln2_hi is exact for |e| < 2**(p - bits)
        scale = 2 ** ln2_bits
        hi = Decimal(int(ln2 * scale)) / scale
        self.ln2_hi = self._round(hi)
        self.ln2_lo = self._round(ln2 - Decimal(float(self.ln2_hi)))
        one_bits = int(np.array(1.0, self.ftype).view(self.utype))
        self.off = int(np.array(0.6953125, self.ftype).view(self.utype))
        step = 1 << (self.mant - 6)
        c, invc, logc = [], [], []
        for i in range(64):
            lo_bits = self.off + i * step
            hi_bits = lo_bits + step
            if lo_bits <= one_bits <= hi_bits:          # the two subintervals that touch 1.0
                ci = self.ftype(1.0)
            else:
                ci = np.array(lo_bits + step // 2, self.utype).view(self.ftype)[()]
            dc = Decimal(float(ci))
            c.append(ci)
            invc.append(self._round(1 / dc))
            logc.append(self._round(dc.ln()) if ci != 1.0 else self.ftype(0.0))
        self.tab_c = np.array(c, self.ftype)
        self.tab_invc = np.array(invc, self.ftype)
        self.tab_logc = np.array(logc, self.ftype)

    def cl_constants(self):
        """Hex literals for the kernel template (strings), keyed by name."""
        s = self.suffix
        return {
            "sin_c": [_hex(v, s) for v in self.sin_c],
            "cos_c": [_hex(v, s) for v in self.cos_c],
            "log_c": [_hex(v, s) for v in self.log_c],
            "tab_c": [_hex(v, s) for v in self.tab_c],
            "tab_invc": [_hex(v, s) for v in self.tab_invc],
            "tab_logc": [_hex(v, s) for v in self.tab_logc],
            "ln2_hi": _hex(self.ln2_hi, s), "ln2_lo": _hex(self.ln2_lo, s),
            "two_pi_k": _hex(self.two_pi_k, s),
            "off": hex(self.off) + ("u" if self.nbits == 32 else "UL"),
            "magic": hex(self.magic) + ("u" if self.nbits == 32 else "UL"),
            "mant": self.mant, "nbits": self.nbits, "kbits": self.kbits, "sqrt_iters": self.sqrt_iters,
            "cl": self.cl, "ucl": self.ucl, "icl": self.icl,
        }


# Fitted coefficients (see module docstring). sin: P(t) = sum sin_c[j] t**j on t in [0, (pi/4)**2];
# cos: Q(t) likewise; log1p(r) = r + r*r*L(r), L(r) = sum log_c[j] r**j on r in [-1/128, 1/64].
FLOAT = Precision(
    "float32", np.float32, np.uint32, np.int32, 23, 0x5F3759DF, 2,
    sin_c=["-0x1.5555554cbaa2bp-3", "0x1.11110896de62ap-7", "-0x1.a00f9e22fedb0p-13", "0x1.6cd8771e36a33p-19"],
    cos_c=["-0x1.ffffffd0c51dap-2", "0x1.55553e1023da2p-5", "-0x1.6c087e73963bep-10", "0x1.99342bc8cd4fcp-16"],
    log_c=["-0x1.000000008832bp-1", "0x1.555561a0397ccp-2", "-0x1.0000e552cd839p-2", "0x1.9361a3bb7fad2p-3"],
    ln2_bits=16)

DOUBLE = Precision(
    "float64", np.float64, np.uint64, np.int64, 52, 0x5FE6EB50C7B537A9, 3,
    sin_c=["-0x1.5555555555555p-3", "0x1.111111111110bp-7", "-0x1.a01a01a018ae9p-13", "0x1.71de3a5339e05p-19",
           "-0x1.ae645298d98dep-26", "0x1.61209314cef74p-33", "-0x1.aaa576a2cf549p-41"],
    cos_c=["-0x1.0000000000000p-1", "0x1.555555555553cp-5", "-0x1.6c16c16c13f18p-10", "0x1.a01a019b6f852p-16",
           "-0x1.27e4f75377b1cp-22", "0x1.1ee984ab1c9e5p-29", "-0x1.8f806df016caep-37"],
    log_c=["-0x1.0000000000001p-1", "0x1.55555555551c1p-2", "-0x1.ffffffffb08b4p-3", "0x1.999999e3a6276p-3",
           "-0x1.55558039183c4p-3", "0x1.248a79dfd1331p-3", "-0x1.f26b180ae098ap-4"],
    ln2_bits=42)


def precision(dtype):
    """FLOAT for float32, DOUBLE for float64; TypeError otherwise."""
    d = _np_dtype(dtype)
    if d == np.float32:
        return FLOAT
    if d == np.float64:
        return DOUBLE
    raise TypeError(f"random floating draws support float32 and float64, not {d}")


# --------------------------------------------------------------------------- elementary functions
def _horner(coefs, t, P):
    p = coefs[-1]
    for c in coefs[-2::-1]:
        p = p * t + c
    return np.asarray(p, P.ftype)


def log(x, P=FLOAT):
    """Natural log of positive normal ``x`` (array of P's type), from +, -, * and bit operations."""
    x = np.asarray(x, P.ftype)
    ut, it = P.utype, P.itype
    ix = x.view(ut)
    tmp = ix - ut(P.off)                                       # wraps
    ebits = P.nbits - P.mant                                   # sign-extend the top ebits bits
    top = tmp >> ut(P.mant)
    sign = ut(1 << (ebits - 1))
    e = (top ^ sign).astype(it) - it(1 << (ebits - 1))
    i = ((tmp >> ut(P.mant - 6)) & ut(63)).astype(np.intp)
    iz = ix - (tmp & ut(((1 << P.nbits) - 1) ^ ((1 << P.mant) - 1)))
    z = iz.view(P.ftype)
    c, invc, logc = P.tab_c[i], P.tab_invc[i], P.tab_logc[i]
    r = (z - c) * invc
    p = _horner(P.log_c, r, P)
    y = r + (r * r) * p
    ef = e.astype(P.ftype)
    t = ef * P.ln2_hi + logc
    return t + (y + ef * P.ln2_lo)


def sincos_turns(k, P=FLOAT):
    """``(cos, sin)`` of ``2 pi k / 2**K`` for integers ``0 <= k < 2**K`` (K = 24 float32, 53 float64)."""
    ut = P.utype
    k = np.asarray(k, ut)
    K = P.kbits
    q = (k >> ut(K - 2)) & ut(3)
    rr = k & ut((1 << (K - 2)) - 1)
    half = ut(1 << (K - 3))
    swap = rr > half
    s_int = np.where(swap, ut(1 << (K - 2)) - rr, rr)
    x = s_int.astype(P.ftype) * P.two_pi_k
    t = x * x
    sinx = x + (x * t) * _horner(P.sin_c, t, P)
    cosx = P.ftype(1.0) + t * _horner(P.cos_c, t, P)
    sp = np.where(swap, cosx, sinx)
    cp = np.where(swap, sinx, cosx)
    cos = np.select([q == 0, q == 1, q == 2], [cp, -sp, -cp], sp)
    sin = np.select([q == 0, q == 1, q == 2], [sp, cp, -sp], -cp)
    return cos.astype(P.ftype), sin.astype(P.ftype)


def sqrt(v, P=FLOAT):
    """Square root of ``v >= 0`` (normal or zero), from +, -, * and bit operations."""
    v = np.asarray(v, P.ftype)
    ut = P.utype
    y = (ut(P.magic) - (v.view(ut) >> ut(1))).view(P.ftype)
    h = v * P.ftype(0.5)
    for _ in range(P.sqrt_iters):
        y = y * (P.ftype(1.5) - (h * y) * y)
    s = v * y
    return s + (y * P.ftype(0.5)) * (v - s * s)


# ----------------------------------------------------------------------------- host-side parameters
def uniform_params(low, high, dtype):
    """``(low, scale, high)`` in the dtype, as the kernel receives them."""
    ft = precision(dtype).ftype
    return ft(low), ft(float(high) - float(low)), ft(high)


def normal_params(mean, std, dtype):
    ft = precision(dtype).ftype
    return ft(mean), ft(std)


def exponential_params(lambd, dtype):
    """``nscale = -1 / lambd`` rounded to the dtype."""
    ft = precision(dtype).ftype
    return ft(-1.0 / float(lambd))


def randint_params(low, high):
    """``(low mod 2**64, range mod 2**64)`` with range 0 meaning 2**64. Raises ValueError if empty."""
    low, high = int(low), int(high)
    rng = high - low
    if rng <= 0:
        raise ValueError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    if rng > 1 << 64:
        raise ValueError(f"randint range [{low}, {high}) is wider than 2**64")
    return low & MASK64, rng & MASK64


def bernoulli_threshold(p):
    """``ceil(p * 2**32)`` clamped to [0, 2**64 - 1] (NaN gives 0), as uint64, elementwise for float32 or
    float64 ``p`` (scalar or array), ``p * 2**32`` rounded in p's own precision (exact but for overflow)."""
    p = np.asarray(p)
    if p.dtype not in (np.float32, np.float64):
        p = p.astype(np.float64)
    t = np.ceil(p * p.dtype.type(4294967296.0)).astype(np.float64)
    t = np.where(np.isnan(t), 0.0, t)
    big = t >= 18446744073709551616.0
    t = np.clip(t, 0.0, 18446744073709549568.0)
    out = t.astype(np.uint64)
    return np.where(big, np.uint64(MASK64), out)


# ------------------------------------------------------------------------------------- the draws
def _words(seed, philox_offset, n, per_block, stream):
    nb = (int(n) + per_block - 1) // per_block
    return random_words(seed, philox_offset, nb, stream)


def _w64(hi, lo):
    return (hi.astype(np.uint64) << np.uint64(32)) | lo.astype(np.uint64)


def bits(seed, philox_offset, n, stream=0):
    """``n`` raw 32-bit words (uint32): element i is word ``i % 4`` of block ``i // 4``."""
    return _words(seed, philox_offset, n, 4, stream).reshape(-1)[:n].copy()


def _unit(seed, philox_offset, n, P, stream):
    """Uniform [0, 1) in P: 24 (float32) or 53 (float64) random bits."""
    if P is FLOAT:
        x = _words(seed, philox_offset, n, 4, stream).reshape(-1)[:n]
        return (x >> np.uint32(8)).astype(np.float32) * np.float32(2.0 ** -24)
    x = _words(seed, philox_offset, n, 2, stream).reshape(-1, 2)[:n]
    w = _w64(x[:, 0], x[:, 1])
    return (w >> np.uint64(11)).astype(np.float64) * np.float64(2.0 ** -53)


def _open_unit_from(w, P):
    """(0, 1): ``(2 m + 1) * 2**-(mant + 1)`` from the top ``mant`` bits of a word."""
    ut = P.utype
    m = w >> ut(P.nbits - P.mant)
    return ((m << ut(1)) | ut(1)).astype(P.ftype) * P.ftype(2.0 ** -(P.mant + 1))


def uniform(seed, philox_offset, n, dtype=np.float32, low=0.0, high=1.0, stream=0):
    """``n`` uniform draws on [low, high) in float32 or float64."""
    P = precision(dtype)
    lo, scale, hi = uniform_params(low, high, dtype)
    u = _unit(seed, philox_offset, n, P, stream)
    v = u * scale + lo
    return np.where(v >= hi, lo, v).astype(P.ftype)


def exponential(seed, philox_offset, n, dtype=np.float32, lambd=1.0, stream=0):
    """``n`` exponential draws of rate ``lambd``: ``log(u) * (-1/lambd)``, u in (0, 1)."""
    P = precision(dtype)
    nscale = exponential_params(lambd, dtype)
    if P is FLOAT:
        x = _words(seed, philox_offset, n, 4, stream).reshape(-1)[:n]
        u = _open_unit_from(x, P)
    else:
        x = _words(seed, philox_offset, n, 2, stream).reshape(-1, 2)[:n]
        u = _open_unit_from(_w64(x[:, 0], x[:, 1]), P)
    return log(u, P) * nscale


def _box_muller(wu, wk, P):
    u = _open_unit_from(wu, P)
    k = wk >> P.utype(P.nbits - P.kbits)
    v = log(u, P) * P.ftype(-2.0)
    R = sqrt(v, P)
    c, s = sincos_turns(k, P)
    return R * c, R * s


def normal(seed, philox_offset, n, dtype=np.float32, mean=0.0, std=1.0, stream=0):
    """``n`` normal draws (Box-Muller on our own log/sqrt/sin/cos), then ``z * std + mean``."""
    P = precision(dtype)
    m, sd = normal_params(mean, std, dtype)
    if P is FLOAT:
        x = _words(seed, philox_offset, n, 4, stream)
        z = np.empty((x.shape[0], 4), np.float32)
        z[:, 0], z[:, 1] = _box_muller(x[:, 0], x[:, 1], P)
        z[:, 2], z[:, 3] = _box_muller(x[:, 2], x[:, 3], P)
    else:
        x = _words(seed, philox_offset, n, 2, stream)
        z = np.empty((x.shape[0], 2), np.float64)
        z[:, 0], z[:, 1] = _box_muller(_w64(x[:, 0], x[:, 1]), _w64(x[:, 2], x[:, 3]), P)
    z = z.reshape(-1)[:n]
    return z * sd + m


def mulhi64(a, b):
    """High 64 bits of the 128-bit product of uint64 arrays (OpenCL ``mul_hi`` on ulong)."""
    a = np.asarray(a, np.uint64)
    b = np.asarray(b, np.uint64)
    m, s = np.uint64(MASK32), np.uint64(32)
    al, ah, bl, bh = a & m, a >> s, b & m, b >> s
    ll, lh, hl, hh = al * bl, al * bh, ah * bl, ah * bh
    mid = (ll >> s) + (lh & m) + (hl & m)
    return hh + (lh >> s) + (hl >> s) + (mid >> s)


def randint(seed, philox_offset, n, low, high, dtype=np.int64, stream=0):
    """``n`` integers in ``[low, high)`` (multiply-shift of 64 random bits), cast to ``dtype``."""
    lo, rng = randint_params(low, high)
    x = _words(seed, philox_offset, n, 2, stream).reshape(-1, 2)[:n]
    w = _w64(x[:, 0], x[:, 1])
    r = w if rng == 0 else mulhi64(w, np.uint64(rng))
    v = (r + np.uint64(lo)).view(np.int64)                    # wraps mod 2**64 like the kernel
    return _cast_int(v, dtype)


def _cast_int(v, dtype):
    d = _np_dtype(dtype)
    if d == np.bool_:
        return v != 0
    if d.kind == "f":
        return v.astype(d)                                     # round to nearest even, as convert_T
    if d.kind in "iu":
        return v.astype(np.uint64).astype(d) if d.kind == "u" else v.astype(d)
    raise TypeError(f"randint cannot produce {d}")


def bernoulli(seed, philox_offset, n, p=0.5, dtype=np.float32, stream=0):
    """``n`` Bernoulli draws: ``x < ceil(p * 2**32)``; ``p`` a scalar or an array of n probabilities."""
    x = _words(seed, philox_offset, n, 4, stream).reshape(-1)[:n]
    if np.ndim(p) == 0:
        t = bernoulli_threshold(float(p))
    else:
        t = bernoulli_threshold(np.asarray(p).reshape(-1)[:n])
    m = x.astype(np.uint64) < t
    d = _np_dtype(dtype)
    return m if d == np.bool_ else m.astype(d)
