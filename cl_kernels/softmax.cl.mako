## Fused softmax / log_softmax over one dim, forward and backward.
##   T: storage type; CT: compute type (half computes in float)
##   log: log_softmax instead of softmax
##   safe: a row whose every entry is -inf gives zeros instead of NaN (torch's _safe_softmax, used by SDPA's
##         math path); ignored for log
## Layout: the input is seen as (outer, R, inner) with element strides (so, sr, si); the output is contiguous
## in that shape. One work-item per (outer, inner) row: three passes over the row (max, sum of exp, write),
## the standard numerically stable formulation (subtract the row max before exp).
<%def name="fast_exp(CT)">
## exp for the compute type: float uses an inline Cody-Waite reduction and Cephes' expf polynomial (about 1 ulp,
## exactly 0 below -87.3 and for -inf, inf above 88.7, NaN kept), because PoCL calls its exp builtin out of
## line, several times slower; double uses the builtin.
% if CT == "float":
inline float fexp(float x)
{
    float xc = x < -87.3f ? -87.3f : (x > 88.7f ? 88.7f : x);
    float t = xc * 1.44269504088896341f + 12582912.0f;
    int n = as_int(t) - 0x4B400000;
    float nf = t - 12582912.0f;
    float r = xc - nf * 0.693359375f;
    r = r - nf * -2.12194440e-4f;
    float p = 1.9875691500E-4f;
    p = p * r + 1.3981999507E-3f;
    p = p * r + 8.3334519073E-3f;
    p = p * r + 4.1665795894E-2f;
    p = p * r + 1.6666665459E-1f;
    p = p * r + 5.0000001201E-1f;
    p = p * (r * r) + r + 1.0f;
    float e = p * as_float((n + 127) << 23);
    return x < -87.3f ? 0.0f : (x > 88.7f ? INFINITY : (x != x ? x : e));
}
% else:
inline ${CT} fexp(${CT} x) { return exp(x); }
% endif
</%def>
<%namespace name="c" file="common.cl.mako"/>
${c.preamble(types)}
${fast_exp(CT)}
<%
    NEG_INF = "(-INFINITY)"
%>
<%def name="bsum(acc, term)">
## acc += the sum over r of term, added in blocks of 32 (block sums, then their sum: rounding error grows as
## R/32 + 32, not R; a 2000-long row summed in one order left softmax 10x further from float64 than torch's)
    for (long rb = 0; rb < R; rb += 32) {
        long re = rb + 32 < R ? rb + 32 : R;
        ${CT} bs = 0;
        for (long r = rb; r < re; ++r) bs += ${term};
        ${acc} += bs;
    }
</%def>
__kernel void softmax_fwd(__global ${T}* out, long out_off,
                          __global const ${T}* in, long in_off,
                          long nrows, long R, long inner, long so, long sr, long si)
{
    long gid = get_global_id(0);
    if (gid >= nrows) return;
    long o = gid / inner, i = gid - o * inner;
    __global const ${T}* x = in + in_off + o * so + i * si;
    __global ${T}* y = out + out_off + o * R * inner + i;
    ${CT} m = ${NEG_INF};
    for (long r = 0; r < R; ++r) {
        ${CT} v = (${CT})x[r * sr];
        m = (v > m || v != v) ? v : m;
    }
    ${CT} ms = m == -INFINITY ? (${CT})0 : m;
    ${CT} s = 0;
${bsum('s', 'fexp((%s)x[r * sr] - ms)' % CT)}
% if log:
    ${CT} ls = log(s);
    for (long r = 0; r < R; ++r) y[r * inner] = (${T})(((${CT})x[r * sr] - ms) - ls);
% else:
% if safe:
    ${CT} inv = (s > 0) ? (${CT})1 / s : (${CT})0;
% else:
    ${CT} inv = (${CT})1 / s;
% endif
    for (long r = 0; r < R; ++r) y[r * inner] = (${T})(fexp((${CT})x[r * sr] - ms) * inv);
% endif
}

## gi = y * (g - sum(g * y))          (softmax)
## gi = g - exp(y) * sum(g)           (log_softmax; y is the log-probability)
## g and y are (outer, R, inner) with their own strides; gi is contiguous.
__kernel void softmax_bwd(__global ${T}* gi, long gi_off,
                          __global const ${T}* g, long g_off, long gso, long gsr, long gsi,
                          __global const ${T}* y, long y_off, long yso, long ysr, long ysi,
                          long nrows, long R, long inner)
{
    long gid = get_global_id(0);
    if (gid >= nrows) return;
    long o = gid / inner, i = gid - o * inner;
    __global const ${T}* gp = g + g_off + o * gso + i * gsi;
    __global const ${T}* yp = y + y_off + o * yso + i * ysi;
    __global ${T}* op = gi + gi_off + o * R * inner + i;
    ${CT} s = 0;
% if log:
${bsum('s', '(%s)gp[r * gsr]' % CT)}
    for (long r = 0; r < R; ++r) op[r * inner] = (${T})((${CT})gp[r * gsr] - fexp((${CT})yp[r * ysr]) * s);
% else:
${bsum('s', '(%s)gp[r * gsr] * (%s)yp[r * ysr]' % (CT, CT))}
    for (long r = 0; r < R; ++r) op[r * inner] = (${T})((${CT})yp[r * ysr] * ((${CT})gp[r * gsr] - s));
% endif
}
