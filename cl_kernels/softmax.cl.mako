## Fused softmax / log_softmax over one dim, forward and backward.
##   T: storage type; CT: compute type (half computes in float)
##   log: log_softmax instead of softmax
##   safe: a row whose every entry is -inf gives zeros instead of NaN (torch's _safe_softmax, used by SDPA's
##         math path); ignored for log
## Layout: the input is seen as (outer, R, inner) with element strides (so, sr, si); the output is contiguous
## in that shape. One work-item per (outer, inner) row: three passes over the row (max, sum of exp, write),
## the standard numerically stable formulation (subtract the row max before exp).
<%namespace name="c" file="common.cl.mako"/>
${c.preamble(types)}
<%
    NEG_INF = "(-INFINITY)"
%>
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
        m = (v > m || isnan(v)) ? v : m;
    }
    ${CT} ms = isinf(m) && m < 0 ? (${CT})0 : m;
    ${CT} s = 0;
    for (long r = 0; r < R; ++r) s += exp((${CT})x[r * sr] - ms);
% if log:
    ${CT} ls = log(s);
    for (long r = 0; r < R; ++r) y[r * inner] = (${T})(((${CT})x[r * sr] - ms) - ls);
% else:
% if safe:
    ${CT} inv = (s > 0) ? (${CT})1 / s : (${CT})0;
% else:
    ${CT} inv = (${CT})1 / s;
% endif
    for (long r = 0; r < R; ++r) y[r * inner] = (${T})(exp((${CT})x[r * sr] - ms) * inv);
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
    for (long r = 0; r < R; ++r) s += (${CT})gp[r * gsr];
    for (long r = 0; r < R; ++r) op[r * inner] = (${T})((${CT})gp[r * gsr] - exp((${CT})yp[r * ysr]) * s);
% else:
    for (long r = 0; r < R; ++r) s += (${CT})gp[r * gsr] * (${CT})yp[r * ysr];
    for (long r = 0; r < R; ++r) op[r * inner] = (${T})((${CT})yp[r * ysr] * ((${CT})gp[r * gsr] - s));
% endif
}
