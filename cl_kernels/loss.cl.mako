## Fused classification losses: cross_entropy (log_softmax + nll in one pass) and nll_loss, with class-index
## targets (ce_fwd / ce_bwd) and with class-probability targets (cep_fwd / cep_bwd); the mean/sum reduction
## (loss_reduce).
##   T: storage type of the input; CT: compute type; TT: storage type of class-index targets
##   mode: "ce" (input is logits) or "nll" (input is log-probabilities)
##   has_w: a class weight vector is passed; smooth: label_smoothing > 0
## Layout: the input is (outer, C, inner) with element strides (so, sc, si); row = o * inner + i; targets and
## per-row outputs are contiguous over rows.
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
<%namespace name="cm" file="common.cl.mako"/>
${cm.preamble(types)}
${fast_exp(CT)}
<%
    W = (lambda idx: "(%s)w[w_off + (%s)]" % (CT, idx)) if has_w else (lambda idx: "(%s)1" % CT)
%>
## Per row: loss (already weighted), the row's logsumexp (ce) and the row's weight w[t] (0 when ignored).
## err[0] is set to 1 and err[1] to the target when a target is outside [0, C) and not ignore_index.
__kernel void ce_fwd(__global ${CT}* loss, __global ${CT}* lse_out, __global ${CT}* wt_out,
                     __global long* err,
                     __global const ${T}* x, long x_off, long so, long sc, long si,
                     __global const ${TT}* t, long t_off,
                     __global const ${T}* w, long w_off,
                     long nrows, long C, long inner, long ignore_index, ${CT} eps_smooth)
{
    long row = get_global_id(0);
    if (row >= nrows) return;
    long o = row / inner, i = row - o * inner;
    __global const ${T}* xp = x + x_off + o * so + i * si;
    long tg = (long)t[t_off + row];
    if (tg == ignore_index) {
        loss[row] = 0; wt_out[row] = 0;
% if mode == "ce":
        lse_out[row] = 0;
% endif
        return;
    }
    if (tg < 0 || tg >= C) {
        err[0] = 1; err[1] = tg;
        loss[row] = 0; wt_out[row] = 0;
% if mode == "ce":
        lse_out[row] = 0;
% endif
        return;
    }
    ${CT} wt = ${W("tg")};
% if mode == "ce":
    ${CT} m = -INFINITY;
    for (long c = 0; c < C; ++c) { ${CT} v = (${CT})xp[c * sc]; m = (v > m || v != v) ? v : m; }
    ${CT} ms = (m == -INFINITY) ? (${CT})0 : m;
    ${CT} s = 0;
    for (long c = 0; c < C; ++c) s += fexp((${CT})xp[c * sc] - ms);
    ${CT} ls = log(s);
    lse_out[row] = ms + ls;
    ${CT} nll = -wt * (((${CT})xp[tg * sc] - ms) - ls);
% if smooth:
    ${CT} sm = 0;
    for (long c = 0; c < C; ++c) sm += ${W("c")} * (ls - ((${CT})xp[c * sc] - ms));
    nll = ((${CT})1 - eps_smooth) * nll + eps_smooth / (${CT})C * sm;
% endif
% else:
    ${CT} nll = -wt * (${CT})xp[tg * sc];
% endif
    loss[row] = nll;
    wt_out[row] = wt;
}

## d loss_row / d x[row, c] times the row's upstream gradient gs:
##   ce:  gs * ((1 - eps) * w_t * (p_c - [c == t]) + eps / C * (Wsum * p_c - w_c)),  p_c = exp(x_c - lse)
##   nll: -gs * w_t * [c == t]
## gs = g[row * gstride] (reduction "none"; gstride 0 for a scalar upstream), divided by den[0] for "mean".
## gi is written contiguous in the (outer, C, inner) layout. wsum: the sum of the class weights (C without weights;
## summed here when weights are given).
__kernel void ce_bwd(__global ${T}* gi, long gi_off,
                     __global const ${T}* g, long g_off, long gstride,
                     __global const ${CT}* den,
                     __global const ${T}* x, long x_off, long so, long sc, long si,
                     __global const ${TT}* t, long t_off,
                     __global const ${T}* w, long w_off,
                     __global const ${CT}* lse_in,
                     long nrows, long C, long inner, long ignore_index, ${CT} eps_smooth, ${CT} wsum, int has_den)
{
    long row = get_global_id(0);
    if (row >= nrows) return;
    long o = row / inner, i = row - o * inner;
    __global ${T}* op = gi + gi_off + o * C * inner + i;
    long tg = (long)t[t_off + row];
    if (tg == ignore_index || tg < 0 || tg >= C) {
        for (long c = 0; c < C; ++c) op[c * inner] = (${T})0;
        return;
    }
    ${CT} gs = (${CT})g[g_off + row * gstride];
    if (has_den) gs = gs / den[0];
    ${CT} wt = ${W("tg")};
% if mode == "ce":
    __global const ${T}* xp = x + x_off + o * so + i * si;
    ${CT} lse = lse_in[row];
    ${CT} a = gs * wt;
% if smooth:
    a = a * ((${CT})1 - eps_smooth);
    ${CT} bsc = gs * eps_smooth / (${CT})C;
% if has_w:
    wsum = 0;
    for (long c = 0; c < C; ++c) wsum += ${W("c")};
% endif
% endif
    for (long c = 0; c < C; ++c) {
        ${CT} p = fexp((${CT})xp[c * sc] - lse);
        ${CT} v = a * (p - (c == tg ? (${CT})1 : (${CT})0));
% if smooth:
        v = v + bsc * (wsum * p - ${W("c")});
% endif
        op[c * inner] = (${T})v;
    }
% else:
    for (long c = 0; c < C; ++c) op[c * inner] = (${T})(c == tg ? -gs * wt : (${CT})0);
% endif
}

## Probability targets: loss_row = -sum_c w_c * t'_c * logp_c with t' = t * (1 - eps) + eps / C.
## The target is read in the input's (outer, C, inner) layout with its own strides.
__kernel void cep_fwd(__global ${CT}* loss, __global ${CT}* lse_out,
                      __global const ${T}* x, long x_off, long so, long sc, long si,
                      __global const ${T}* t, long t_off, long tso, long tsc, long tsi,
                      __global const ${T}* w, long w_off,
                      long nrows, long C, long inner, ${CT} eps_smooth)
{
    long row = get_global_id(0);
    if (row >= nrows) return;
    long o = row / inner, i = row - o * inner;
    __global const ${T}* xp = x + x_off + o * so + i * si;
    __global const ${T}* tp = t + t_off + o * tso + i * tsi;
    ${CT} m = -INFINITY;
    for (long c = 0; c < C; ++c) { ${CT} v = (${CT})xp[c * sc]; m = (v > m || v != v) ? v : m; }
    ${CT} ms = (m == -INFINITY) ? (${CT})0 : m;
    ${CT} s = 0;
    for (long c = 0; c < C; ++c) s += fexp((${CT})xp[c * sc] - ms);
    ${CT} ls = log(s);
    lse_out[row] = ms + ls;
    ${CT} acc = 0;
    for (long c = 0; c < C; ++c) {
        ${CT} tc = (${CT})tp[c * tsc];
% if smooth:
        tc = tc * ((${CT})1 - eps_smooth) + eps_smooth / (${CT})C;
% endif
        acc += ${W("c")} * tc * (ls - ((${CT})xp[c * sc] - ms));
    }
    loss[row] = acc;
}

## d loss_row / d x_c = gs * (p_c * sum_k w_k t'_k - w_c t'_c)
__kernel void cep_bwd(__global ${T}* gi, long gi_off,
                      __global const ${T}* g, long g_off, long gstride, ${CT} gmul,
                      __global const ${T}* x, long x_off, long so, long sc, long si,
                      __global const ${T}* t, long t_off, long tso, long tsc, long tsi,
                      __global const ${T}* w, long w_off,
                      __global const ${CT}* lse_in,
                      long nrows, long C, long inner, ${CT} eps_smooth)
{
    long row = get_global_id(0);
    if (row >= nrows) return;
    long o = row / inner, i = row - o * inner;
    __global const ${T}* xp = x + x_off + o * so + i * si;
    __global const ${T}* tp = t + t_off + o * tso + i * tsi;
    __global ${T}* op = gi + gi_off + o * C * inner + i;
    ${CT} gs = (${CT})g[g_off + row * gstride] * gmul;
    ${CT} lse = lse_in[row];
    ${CT} tw = 0;
    for (long c = 0; c < C; ++c) {
        ${CT} tc = (${CT})tp[c * tsc];
% if smooth:
        tc = tc * ((${CT})1 - eps_smooth) + eps_smooth / (${CT})C;
% endif
        tw += ${W("c")} * tc;
    }
    for (long c = 0; c < C; ++c) {
        ${CT} tc = (${CT})tp[c * tsc];
% if smooth:
        tc = tc * ((${CT})1 - eps_smooth) + eps_smooth / (${CT})C;
% endif
        ${CT} p = fexp((${CT})xp[c * sc] - lse);
        op[c * inner] = (${T})(gs * (p * tw - ${W("c")} * tc));
    }
}

## Sum (and, for "mean", divide) per-row losses: work-item k sums rows [k * CH, k * CH + CH) of loss and of
## wt into part[k], part[P + k] (a first stage, P > 1). With P == 1 it writes the final value: out[0] = sum,
## or sum / sum(wt) for mean (sum(wt) is replaced by nden when has_wt is 0), and den[0] = that denominator.
__kernel void loss_reduce(__global ${T}* out, __global ${CT}* den, __global ${CT}* part,
                          __global const ${CT}* loss, long loss_off, __global const ${CT}* wt, long wt_off,
                          long n, long CH, long P, int mean, int has_wt, long nden)
{
    long k = get_global_id(0);
    if (k >= P) return;
    long r0 = k * CH, r1 = min(r0 + CH, n);
## deterministic mode: Intel's CPU compiler vectorises this sum (reassociating it); volatile keeps IEEE's order
    ${"volatile " if context.get("deterministic") else ""}${CT} sl = 0, sw = 0;
    for (long r = r0; r < r1; ++r) sl += loss[loss_off + r];
    if (has_wt) for (long r = r0; r < r1; ++r) sw += wt[wt_off + r];
    if (P > 1) { part[k] = sl; part[P + k] = sw; return; }
    if (!has_wt) sw = (${CT})nden;
    den[0] = sw;
    out[0] = (${T})(mean ? sl / sw : sl);
}
