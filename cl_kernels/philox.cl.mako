## Counter-based random fills: Philox4x32-10 (Random123, as shipped by pyopencl) and the transforms of
## cltorch/ops/_philox_ref.py, which is this kernel's bit-exact numpy mirror (see its docstring for the
## scheme). Each work-item makes `bpi` consecutive Philox blocks; block b of a fill has counter
## (ctr0 + b, stream) and fills elements [b*E, b*E + E), E = elements per block, so a value depends only
## on (seed, offset, element index), never on work-group size.
##
## Parameters:
##   dist    "bits" | "uniform" | "normal" | "exponential" | "randint" | "bernoulli"
##   out_t   OpenCL type stored (float, double, long, int, short, char, uchar, uint)
##   to_bool store (uchar)(value != 0) (cltorch.bool)
##   fp      None or _philox_ref.Precision.cl_constants() of the compute precision (uniform, normal,
##           exponential)
##   p_t     bernoulli only: None (one threshold argument) or "float"/"double" (a probability buffer)
##   bpi     blocks per work-item
##
## Only +, -, * on floating values, under FP_CONTRACT OFF: every result is exactly reproducible.
#pragma OPENCL FP_CONTRACT OFF
% if (fp is not None and fp["cl"] == "double") or p_t == "double" or out_t == "double":
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
% endif
#include <pyopencl-random123/philox.cl>
<%
    if dist == "normal" or dist in ("uniform", "exponential"):
        E = 4 if fp["cl"] == "float" else 2
    elif dist == "randint":
        E = 2
    else:
        E = 4
%>
% if fp is not None:
<%
    F, U, I, S = fp["cl"], fp["ucl"], fp["icl"], ("f" if fp["cl"] == "float" else "")
    mant, nbits, kbits = fp["mant"], fp["nbits"], fp["kbits"]
    one_u = "1u" if nbits == 32 else "1UL"
    def horner(coefs, var):
        expr = coefs[-1]
        for c in coefs[-2::-1]:
            expr = "(" + expr + ") * " + var + " + " + c
        return expr
    hi_mask = ((1 << nbits) - 1) ^ ((1 << mant) - 1)
    ebits = nbits - mant
    sfx = "u" if nbits == 32 else "UL"
%>
__constant ${F} ct_tab_c[64] = {${", ".join(fp["tab_c"])}};
__constant ${F} ct_tab_invc[64] = {${", ".join(fp["tab_invc"])}};
__constant ${F} ct_tab_logc[64] = {${", ".join(fp["tab_logc"])}};

/* log(x) for positive normal x: x = 2^e z, z in [0.6953125, 1.390625); log z = log c + log1p((z-c)/c). */
inline ${F} ct_log(${F} x)
{
    ${U} ix = as_${U}(x);
    ${U} tmp = ix - ${fp["off"]};
    ${I} e = (${I})((tmp >> ${mant}) ^ ${hex(1 << (ebits - 1))}${sfx}) - (${I})${hex(1 << (ebits - 1))};
    ${U} i = (tmp >> ${mant - 6}) & 63${sfx};
    ${F} z = as_${F}(ix - (tmp & ${hex(hi_mask)}${sfx}));
    ${F} r = (z - ct_tab_c[i]) * ct_tab_invc[i];
    ${F} p = ${horner(fp["log_c"], "r")};
    ${F} y = r + (r * r) * p;
    ${F} ef = (${F})e;
    ${F} t = ef * ${fp["ln2_hi"]} + ct_tab_logc[i];
    return t + (y + ef * ${fp["ln2_lo"]});
}

/* (cos, sin) of 2 pi k / 2^${kbits}: exact integer range reduction, polynomials on [0, pi/4]. */
inline void ct_cossin(${U} k, ${F} *c, ${F} *s)
{
    ${U} q = (k >> ${kbits - 2}) & 3${sfx};
    ${U} rr = k & ${hex((1 << (kbits - 2)) - 1)}${sfx};
    int swap = rr > ${hex(1 << (kbits - 3))}${sfx};
    ${U} si = swap ? ${hex(1 << (kbits - 2))}${sfx} - rr : rr;
    ${F} x = (${F})si * ${fp["two_pi_k"]};
    ${F} t = x * x;
    ${F} ps = ${horner(fp["sin_c"], "t")};
    ${F} pc = ${horner(fp["cos_c"], "t")};
    ${F} sinx = x + (x * t) * ps;
    ${F} cosx = 1.0${S} + t * pc;
    ${F} sp = swap ? cosx : sinx;
    ${F} cp = swap ? sinx : cosx;
    if (q == 0) { *c = cp; *s = sp; }
    else if (q == 1) { *c = -sp; *s = cp; }
    else if (q == 2) { *c = -cp; *s = -sp; }
    else { *c = sp; *s = -cp; }
}

/* sqrt(v), v >= 0: bit-trick rsqrt seed, Newton steps, one correction. */
inline ${F} ct_sqrt(${F} v)
{
    ${F} y = as_${F}((${U})${fp["magic"]} - (as_${U}(v) >> 1));
    ${F} h = v * 0.5${S};
% for _ in range(fp["sqrt_iters"]):
    y = y * (1.5${S} - (h * y) * y);
% endfor
    ${F} sq = v * y;
    return sq + (y * 0.5${S}) * (v - sq * sq);
}

/* (0, 1) from the top ${mant} bits of w: (2m + 1) * 2^-${mant + 1}. */
inline ${F} ct_open_unit(${U} w)
{
    return (${F})(((w >> ${nbits - mant}) << 1) | ${one_u}) * ${"0x1p-%d" % (mant + 1)}${S};
}
% endif

__kernel void philox_fill(__global ${out_t} *out, long out_off, long n, uint k0, uint k1, ulong ctr0,
                          uint s0, uint s1
% if dist == "uniform":
    , ${F} lo, ${F} scale, ${F} hi
% elif dist == "normal":
    , ${F} mean, ${F} stdv
% elif dist == "exponential":
    , ${F} nscale
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
    philox4x32_key_t key = {{k0, k1}};
% for bb in range(bpi):
    {
    long b = (long)get_global_id(0) * ${bpi} + ${bb};
    long first = b * ${E};
    if (first >= n) return;
    ulong c = ctr0 + (ulong)b;
    philox4x32_ctr_t ctr = {{(uint)c, (uint)(c >> 32), s0, s1}};
    philox4x32_ctr_t x = philox4x32(ctr, key);
% if dist == "bits":
<% vals = ["x.v[%d]" % j for j in range(4)] %>
% elif dist == "uniform":
% if F == "float":
% for j in range(4):
    float v${j} = (float)(x.v[${j}] >> 8) * 0x1p-24f * scale + lo;
    v${j} = v${j} >= hi ? lo : v${j};
% endfor
% else:
% for j in range(2):
    double v${j} = (double)(((((ulong)x.v[${2 * j}]) << 32) | x.v[${2 * j + 1}]) >> 11) * 0x1p-53 * scale + lo;
    v${j} = v${j} >= hi ? lo : v${j};
% endfor
% endif
<% vals = ["v%d" % j for j in range(E)] %>
% elif dist == "exponential":
% if F == "float":
% for j in range(4):
    float v${j} = ct_log(ct_open_unit(x.v[${j}])) * nscale;
% endfor
% else:
% for j in range(2):
    double v${j} = ct_log(ct_open_unit((((ulong)x.v[${2 * j}]) << 32) | x.v[${2 * j + 1}])) * nscale;
% endfor
% endif
<% vals = ["v%d" % j for j in range(E)] %>
% elif dist == "normal":
% if F == "float":
% for j in range(2):
    float v${2 * j}, v${2 * j + 1};
    {
        float R = ct_sqrt(ct_log(ct_open_unit(x.v[${2 * j}])) * -2.0f);
        float cs, sn;
        ct_cossin(x.v[${2 * j + 1}] >> 8, &cs, &sn);
        v${2 * j} = R * cs * stdv + mean;
        v${2 * j + 1} = R * sn * stdv + mean;
    }
% endfor
% else:
    double v0, v1;
    {
        double R = ct_sqrt(ct_log(ct_open_unit((((ulong)x.v[0]) << 32) | x.v[1])) * -2.0);
        double cs, sn;
        ct_cossin(((((ulong)x.v[2]) << 32) | x.v[3]) >> 11, &cs, &sn);
        v0 = R * cs * stdv + mean;
        v1 = R * sn * stdv + mean;
    }
% endif
<% vals = ["v%d" % j for j in range(E)] %>
% elif dist == "randint":
% for j in range(2):
    ulong w${j} = (((ulong)x.v[${2 * j}]) << 32) | x.v[${2 * j + 1}];
    long v${j} = (long)(lo + (range ? mul_hi(w${j}, range) : w${j}));
% endfor
<% vals = ["v%d" % j for j in range(E)] %>
% elif dist == "bernoulli":
% for j in range(4):
% if p_t is None:
    int v${j} = (ulong)x.v[${j}] < thr;
% elif p_t == "float":
    int v${j} = first + ${j} < n && (ulong)x.v[${j}] < convert_ulong_sat_rtp(prob[p_off + first + ${j}] * 0x1p32f);
% else:
    int v${j} = first + ${j} < n && (ulong)x.v[${j}] < convert_ulong_sat_rtp(prob[p_off + first + ${j}] * 0x1p32);
% endif
% endfor
<% vals = ["v%d" % j for j in range(E)] %>
% endif
<%
    def conv(v):
        if to_bool:
            return "(uchar)(%s != 0)" % v
        return "(%s)(%s)" % (out_t, v)
%>
    __global ${out_t} *o = out + out_off + first;
    if (first + ${E} <= n) {
% for j in range(E):
        o[${j}] = ${conv(vals[j])};
% endfor
    } else {
% for j in range(E):
        if (first + ${j} < n) o[${j}] = ${conv(vals[j])};
% endfor
    }
    }
% endfor
}
