## Counter-based random fills: Philox4x32-10 (Random123, as shipped by pyopencl) and the transforms of
## cltorch/ops/_philox_ref.py, this kernel's bit-exact numpy mirror (its docstring gives the scheme).
## Block b of a fill has counter (ctr0 + b, stream) and fills elements [b*E, b*E + E), E = elements per
## block, so every value depends only on (seed, offset, element index), never on work-group size or on
## the vector width below.
##
## Parameters:
##   dist    "bits" | "uniform" | "normal" | "exponential" | "randint" | "bernoulli"
##   out_t   OpenCL type stored (float, double, long, int, short, char, uchar, uint)
##   to_bool store (uchar)(value != 0) (cltorch.bool)
##   fp      None, or _philox_ref.Precision.cl_constants() of the compute precision (uniform, normal,
##           exponential)
##   p_t     bernoulli only: None (one threshold argument) or "float"/"double" (a probability buffer)
##   vw      blocks per work-item, computed as the lanes of OpenCL vectors (1, 2, 4, 8 or 16). vw = 1
##           calls Random123's philox4x32() from the header; vw > 1 runs the same rounds on vectors,
##           with the header's multipliers and Weyl constants (PoCL does not vectorize the scalar form
##           across work-items: explicit lanes are ~3x faster there). Both are checked bit for bit
##           against each other and the Random123 known-answer vectors.
##
## Floating work uses only +, -, * (plus exact bit, integer and conversion operations), under
## FP_CONTRACT OFF, so every result is exactly reproducible.
#pragma OPENCL FP_CONTRACT OFF
% if (fp is not None and fp["cl"] == "double") or p_t == "double" or out_t == "double":
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
% endif
#include <pyopencl-random123/philox.cl>
<%
    if dist in ("normal", "uniform", "exponential"):
        E = 4 if fp["cl"] == "float" else 2
    elif dist == "randint":
        E = 2
    else:
        E = 4
    V = "" if vw == 1 else str(vw)
    LANES = "0123456789abcdef"
    def lane(expr, j):
        return expr if vw == 1 else "(%s).s%s" % (expr, LANES[j])
    UI, UL, LG = "uint" + V, "ulong" + V, "long" + V
    def w64(a, b):
        return "((convert_%s(x%d) << 32) | convert_%s(x%d))" % (UL, a, UL, b)
%>
% if fp is not None:
<%
    FS, US = fp["cl"], fp["ucl"]
    F, U, I = FS + V, US + V, fp["icl"] + V
    S = "f" if FS == "float" else ""
    mant, nbits, kbits = fp["mant"], fp["nbits"], fp["kbits"]
    sfx = "u" if nbits == 32 else "UL"
    def horner(coefs, var):
        expr = coefs[-1]
        for c in coefs[-2::-1]:
            expr = "(" + expr + ") * " + var + " + " + c
        return expr
    hi_mask = ((1 << nbits) - 1) ^ ((1 << mant) - 1)
    ebits = nbits - mant
    def gather(tab, idx):
        if vw == 1:
            return "%s[%s]" % (tab, idx)
        return "(%s)(%s)" % (F, ", ".join("%s[(%s).s%s]" % (tab, idx, LANES[j]) for j in range(vw)))
%>
__constant ${FS} ct_tab_c[64] = {${", ".join(fp["tab_c"])}};
__constant ${FS} ct_tab_invc[64] = {${", ".join(fp["tab_invc"])}};
__constant ${FS} ct_tab_logc[64] = {${", ".join(fp["tab_logc"])}};

/* log(x) for positive normal x: x = 2^e z, z in [0.6953125, 1.390625); log z = log c + log1p((z-c)/c). */
inline ${F} ct_log(${F} x)
{
    ${U} ix = as_${U}(x);
    ${U} tmp = ix - ${fp["off"]};
    ${I} e = as_${I}((tmp >> ${mant}) ^ ${hex(1 << (ebits - 1))}${sfx}) - ${hex(1 << (ebits - 1))};
    ${U} i = (tmp >> ${mant - 6}) & 63${sfx};
    ${F} z = as_${F}(ix - (tmp & ${hex(hi_mask)}${sfx}));
    ${F} r = (z - ${gather("ct_tab_c", "i")}) * ${gather("ct_tab_invc", "i")};
    ${F} p = ${horner(fp["log_c"], "r")};
    ${F} y = r + (r * r) * p;
    ${F} ef = convert_${F}(e);
    ${F} t = ef * ${fp["ln2_hi"]} + ${gather("ct_tab_logc", "i")};
    return t + (y + ef * ${fp["ln2_lo"]});
}

/* (cos, sin) of 2 pi k / 2^${kbits}: exact integer range reduction, polynomials on [0, pi/4]. */
inline void ct_cossin(${U} k, ${F} *c, ${F} *s)
{
    ${U} q = (k >> ${kbits - 2}) & 3${sfx};
    ${U} rr = k & ${hex((1 << (kbits - 2)) - 1)}${sfx};
    ${I} swap = rr > ${hex(1 << (kbits - 3))}${sfx};
    ${U} si = swap ? (${U})(${hex(1 << (kbits - 2))}${sfx}) - rr : rr;
    ${F} x = convert_${F}(si) * ${fp["two_pi_k"]};
    ${F} t = x * x;
    ${F} ps = ${horner(fp["sin_c"], "t")};
    ${F} pc = ${horner(fp["cos_c"], "t")};
    ${F} sinx = x + (x * t) * ps;
    ${F} cosx = 1.0${S} + t * pc;
    ${F} sp = swap ? cosx : sinx;
    ${F} cp = swap ? sinx : cosx;
    *c = q == 0 ? cp : (q == 1 ? -sp : (q == 2 ? -cp : sp));
    *s = q == 0 ? sp : (q == 1 ? cp : (q == 2 ? -sp : -cp));
}

/* sqrt(v), v >= 0: bit-trick reciprocal square root seed, Newton steps, one correction. */
inline ${F} ct_sqrt(${F} v)
{
    ${F} y = as_${F}((${U})(${fp["magic"]}) - (as_${U}(v) >> 1));
    ${F} h = v * 0.5${S};
% for _ in range(fp["sqrt_iters"]):
    y = y * (1.5${S} - (h * y) * y);
% endfor
    ${F} sq = v * y;
    return sq + (y * 0.5${S}) * (v - sq * sq);
}

/* (0, 1) from the top ${mant} bits of w: (2m + 1) * 2^-${mant + 1}, exact. */
inline ${F} ct_open_unit(${U} w)
{
    return convert_${F}(((w >> ${nbits - mant}) << 1) | 1${sfx}) * ${"0x1p-%d" % (mant + 1)}${S};
}
% endif
% if dist == "bernoulli" and p_t is not None:
<% PS = "f" if p_t == "float" else "" %>
/* 1 with probability ceil(p 2^32) / 2^32: x < ceil(p 2^32); p <= 0 or NaN never, p >= 1 always. */
inline int ct_bern(uint x, ${p_t} p)
{
    return p >= 1.0${PS} || (p > 0.0${PS} && (ulong)x < (ulong)ceil(p * 0x1p32${PS}));
}
% endif

__kernel void philox_fill(__global ${out_t} *out, long out_off, long n, uint k0, uint k1, ulong ctr0,
                          uint s0, uint s1
% if dist == "uniform":
    , ${FS} lo, ${FS} scale, ${FS} hi
% elif dist == "normal":
    , ${FS} mean, ${FS} stdv
% elif dist == "exponential":
    , ${FS} nscale
% elif dist == "randint":
    , ulong lo, ulong range
% elif dist == "bernoulli":
% if p_t is None:
    , ulong thr
% else:
    , __global const ${p_t} *prob, long p_off
% endif
% endif
    )
{
    long b0 = (long)get_global_id(0) * ${vw};
    long first = b0 * ${E};
    if (first >= n) return;
% if vw == 1:
    philox4x32_key_t key = {{k0, k1}};
    ulong c = ctr0 + (ulong)b0;
    philox4x32_ctr_t ctr = {{(uint)c, (uint)(c >> 32), s0, s1}};
    philox4x32_ctr_t xx = philox4x32(ctr, key);
    uint x0 = xx.v[0], x1 = xx.v[1], x2 = xx.v[2], x3 = xx.v[3];
% else:
    ${UL} c = (${UL})(ctr0 + (ulong)b0) + (${UL})(${", ".join(str(j) for j in range(vw))});
    ${UI} x0 = convert_${UI}(c), x1 = convert_${UI}(c >> 32), x2 = (${UI})(s0), x3 = (${UI})(s1);
    uint ka = k0, kb = k1;
% for rnd in range(10):
    {
% if rnd:
        ka += PHILOX_W32_0; kb += PHILOX_W32_1;
% endif
        ${UL} p0 = convert_${UL}(x0) * (ulong)PHILOX_M4x32_0;
        ${UL} p1 = convert_${UL}(x2) * (ulong)PHILOX_M4x32_1;
        x0 = convert_${UI}(p1 >> 32) ^ x1 ^ ka;
        x1 = convert_${UI}(p1);
        x2 = convert_${UI}(p0 >> 32) ^ x3 ^ kb;
        x3 = convert_${UI}(p0);
    }
% endfor
% endif
<%
    # vals[e]: expression of element e of each block (a vector of vw lanes when vw > 1)
    vals = None
    mask_vals = False
%>
% if dist == "bits":
<% vals = ["x%d" % j for j in range(4)] %>
% elif dist == "uniform":
% if FS == "float":
% for j in range(4):
    ${F} v${j} = convert_${F}(x${j} >> 8) * 0x1p-24f * scale + lo;
    v${j} = v${j} >= hi ? (${F})(lo) : v${j};
% endfor
% else:
% for j in range(2):
    ${F} v${j} = convert_${F}(${w64(2 * j, 2 * j + 1)} >> 11) * 0x1p-53 * scale + lo;
    v${j} = v${j} >= hi ? (${F})(lo) : v${j};
% endfor
% endif
<% vals = ["v%d" % j for j in range(E)] %>
% elif dist == "exponential":
% if FS == "float":
% for j in range(4):
    ${F} v${j} = ct_log(ct_open_unit(x${j})) * nscale;
% endfor
% else:
% for j in range(2):
    ${F} v${j} = ct_log(ct_open_unit(${w64(2 * j, 2 * j + 1)})) * nscale;
% endfor
% endif
<% vals = ["v%d" % j for j in range(E)] %>
% elif dist == "normal":
% if FS == "float":
% for j in range(2):
    ${F} v${2 * j}, v${2 * j + 1};
    {
        ${F} R = ct_sqrt(ct_log(ct_open_unit(x${2 * j})) * -2.0f);
        ${F} cs, sn;
        ct_cossin(x${2 * j + 1} >> 8, &cs, &sn);
        v${2 * j} = R * cs * stdv + mean;
        v${2 * j + 1} = R * sn * stdv + mean;
    }
% endfor
% else:
    ${F} v0, v1;
    {
        ${F} R = ct_sqrt(ct_log(ct_open_unit(${w64(0, 1)})) * -2.0);
        ${F} cs, sn;
        ct_cossin(${w64(2, 3)} >> 11, &cs, &sn);
        v0 = R * cs * stdv + mean;
        v1 = R * sn * stdv + mean;
    }
% endif
<% vals = ["v%d" % j for j in range(E)] %>
% elif dist == "randint":
% for j in range(2):
    ${LG} v${j};
    {
        /* r = mul_hi(w, range) from 32-bit pieces (OpenCL's mul_hi is an out-of-line call on PoCL) */
        ${UL} w = ${w64(2 * j, 2 * j + 1)};
        ${UL} al = w & 0xffffffffUL, ah = w >> 32;
        ulong rl = range & 0xffffffffUL, rh = range >> 32;
        ${UL} lh = al * rh, hl = ah * rl;
        ${UL} mid = ((al * rl) >> 32) + (lh & 0xffffffffUL) + (hl & 0xffffffffUL);
        ${UL} r = ah * rh + (lh >> 32) + (hl >> 32) + (mid >> 32);
        if (range == 0) r = w;
        v${j} = as_${LG}(lo + r);
    }
% endfor
<% vals = ["v%d" % j for j in range(E)] %>
% elif dist == "bernoulli" and p_t is None:
% for j in range(4):
    ${LG} v${j} = convert_${UL}(x${j}) < thr;
% endfor
<% vals = ["v%d" % j for j in range(E)]; mask_vals = True %>
% endif
<%
    def value(j, e):
        """C expression of element e of block b0 + j, converted to out_t."""
        if dist == "bernoulli" and p_t is not None:
            v = "ct_bern(%s, prob[p_off + first + %d])" % (lane("x%d" % e, j), j * E + e)
            return "(%s)(%s)" % (out_t, v)
        v = lane(vals[e], j)
        if to_bool or mask_vals:
            return "(%s)(%s != 0)" % (out_t, v)
        return "(%s)(%s)" % (out_t, v)
%>
    __global ${out_t} *o = out + out_off + first;
    if (first + ${vw * E} <= n) {
% for j in range(vw):
% for e in range(E):
        o[${j * E + e}] = ${value(j, e)};
% endfor
% endfor
    } else {
% for j in range(vw):
% for e in range(E):
        if (first + ${j * E + e} < n) o[${j * E + e}] = ${value(j, e)};
% endfor
% endfor
    }
}
