## Fused normalisation kernels: layer_norm, rms_norm, group_norm and batch_norm (training statistics).
##   T: storage type; CT: compute type
##   center: subtract the mean (layer/group/batch norm); 0 gives rms_norm (x * rsqrt(mean(x^2) + eps))
##   affine: how an element finds its weight/bias:
##       "none"  no weight or bias
##       "col"   w[b]                           (layer_norm / rms_norm: the normalized dims)
##       "group" w[(row % G) * Cg + b / HW]     (group_norm: per channel)
##       "row"   w[row]                         (batch_norm: one row per channel)
##   has_w, has_b: a weight / a bias is passed
##   save_var: also write the biased variance of each row (batch_norm's running statistics)
## A row is `A x Bn` elements of a contiguous input: element (a, b) of row r sits at
##   r * rs + a * sa + b         (layer/rms/group norm: A = 1; batch_norm: rs = HW, sa = C * HW, Bn = HW)
## One work-item per row. Mean and variance take two passes (mean first, then the centred sum of squares),
## which is exact enough without Welford's update; the third pass writes. Every row sum adds in fixed blocks of
## NORM_NB terms (a partial sum per block, then the partials), as the reduction template does: one sequential sum over
## a batch_norm row of N * HW terms (16,384 for 16 x 32 x 32) was ~20x further from float64 than PyTorch's.
<%namespace name="cm" file="common.cl.mako"/>
${cm.preamble(types)}
#define NORM_NB 256
## ${blk(s, p, k)} after `p += term;`: close the block of NORM_NB terms into s (k counts the block's terms)
<%def name="blk(s, p, k)">if (++${k} == NORM_NB) { ${s} += ${p}; ${p} = 0; ${k} = 0; }</%def>
<%
    def widx(row, b):
        if affine == "col":
            return b
        if affine == "group":
            return "((%s %% G) * Cg + (%s) / HW)" % (row, b)
        return row
%>
__kernel void norm_fwd(__global ${T}* y, long y_off,
                       __global const ${T}* x, long x_off,
                       __global const ${T}* w, long w_off,
                       __global const ${T}* bb, long b_off,
                       __global ${CT}* mean_out, __global ${CT}* rstd_out, __global ${CT}* var_out,
                       long nrows, long rs, long A, long sa, long Bn, long G, long Cg, long HW, ${CT} eps)
{
    long r = get_global_id(0);
    if (r >= nrows) return;
    __global const ${T}* xp = x + x_off + r * rs;
    __global ${T}* yp = y + y_off + r * rs;
    ${CT} M = (${CT})(A * Bn);
% if center:
    ${CT} s = 0, ps = 0;
    int ks = 0;
    for (long a = 0; a < A; ++a)
        for (long b = 0; b < Bn; ++b) { ps += (${CT})xp[a * sa + b]; ${blk("s", "ps", "ks")} }
    s += ps;
    ${CT} mu = s / M;
% else:
    ${CT} mu = 0;
% endif
    ${CT} q = 0, pq = 0;
    int kq = 0;
    for (long a = 0; a < A; ++a)
        for (long b = 0; b < Bn; ++b) { ${CT} d = (${CT})xp[a * sa + b] - mu; pq += d * d; ${blk("q", "pq", "kq")} }
    q += pq;
    ${CT} var = q / M;
    ${CT} rstd = rsqrt(var + eps);
    mean_out[r] = mu;
    rstd_out[r] = rstd;
% if save_var:
    var_out[r] = var;
% endif
% if affine == "row":
% if has_w:
    ${CT} wr = (${CT})w[w_off + r];
% endif
% if has_b:
    ${CT} br = (${CT})bb[b_off + r];
% endif
% endif
    for (long a = 0; a < A; ++a)
        for (long b = 0; b < Bn; ++b) {
            ${CT} v = ((${CT})xp[a * sa + b] - mu) * rstd;
% if affine == "row":
% if has_w:
            v = v * wr;
% endif
% if has_b:
            v = v + br;
% endif
% elif affine != "none":
% if has_w:
            v = v * (${CT})w[w_off + ${widx("r", "b")}];
% endif
% if has_b:
            v = v + (${CT})bb[b_off + ${widx("r", "b")}];
% endif
% endif
            yp[a * sa + b] = (${T})v;
        }
}

## Backward of the normalisation (per row), with xh = (x - mean) * rstd and gh = g * w:
##   center: gi = rstd * (gh - mean(gh) - xh * mean(gh * xh))
##   rms:    gi = rstd * (gh - xh * mean(gh * xh))
## g is contiguous in x's layout. With affine == "row" (batch_norm) it also writes sum(g) and sum(g * xh) of
## each row, which are the bias and weight gradients.
__kernel void norm_bwd(__global ${T}* gi, long gi_off,
                       __global const ${T}* g, long g_off,
                       __global const ${T}* x, long x_off,
                       __global const ${T}* w, long w_off,
                       __global const ${CT}* mean_in, __global const ${CT}* rstd_in,
                       __global ${CT}* sg_out, __global ${CT}* sgx_out,
                       long nrows, long rs, long A, long sa, long Bn, long G, long Cg, long HW)
{
    long r = get_global_id(0);
    if (r >= nrows) return;
    __global const ${T}* xp = x + x_off + r * rs;
    __global const ${T}* gp = g + g_off + r * rs;
    __global ${T}* op = gi + gi_off + r * rs;
    ${CT} M = (${CT})(A * Bn);
    ${CT} mu = mean_in[r], rstd = rstd_in[r];
% if affine == "row" and has_w:
    ${CT} wr = (${CT})w[w_off + r];
% endif
    ${CT} s1 = 0, s2 = 0, p1 = 0, p2 = 0;
    int k1 = 0;
    for (long a = 0; a < A; ++a)
        for (long b = 0; b < Bn; ++b) {
            long p = a * sa + b;
            ${CT} gv = (${CT})gp[p];
            ${CT} xh = ((${CT})xp[p] - mu) * rstd;
            p1 += gv;
            p2 += gv * xh;
            if (++k1 == NORM_NB) { s1 += p1; s2 += p2; p1 = 0; p2 = 0; k1 = 0; }
        }
    s1 += p1; s2 += p2;
% if affine == "row":
    sg_out[r] = s1;
    sgx_out[r] = s2;
% endif
% if affine == "row" and has_w:
    ${CT} c1 = wr * s1 / M, c2 = wr * s2 / M;
% elif affine == "none" or not has_w:
    ${CT} c1 = s1 / M, c2 = s2 / M;
% else:
    s1 = 0; s2 = 0; p1 = 0; p2 = 0; k1 = 0;
    for (long a = 0; a < A; ++a)
        for (long b = 0; b < Bn; ++b) {
            long p = a * sa + b;
            ${CT} gv = (${CT})gp[p] * (${CT})w[w_off + ${widx("r", "b")}];
            ${CT} xh = ((${CT})xp[p] - mu) * rstd;
            p1 += gv;
            p2 += gv * xh;
            if (++k1 == NORM_NB) { s1 += p1; s2 += p2; p1 = 0; p2 = 0; k1 = 0; }
        }
    s1 += p1; s2 += p2;
    ${CT} c1 = s1 / M, c2 = s2 / M;
% endif
% if not center:
    c1 = 0;
% endif
    for (long a = 0; a < A; ++a)
        for (long b = 0; b < Bn; ++b) {
            long p = a * sa + b;
            ${CT} gv = (${CT})gp[p];
% if affine == "row" and has_w:
            gv = gv * wr;
% elif affine != "none" and has_w:
            gv = gv * (${CT})w[w_off + ${widx("r", "b")}];
% endif
            ${CT} xh = ((${CT})xp[p] - mu) * rstd;
            op[p] = (${T})(rstd * (gv - c1 - xh * c2));
        }
}

## Weight and bias gradients of layer_norm / rms_norm: column sums over rows of g * xh and g.
## Work-item (col, chunk) sums rows [chunk * CH, chunk * CH + CH) into part_w[chunk][col], part_b[chunk][col].
__kernel void norm_wgrad(__global ${CT}* part_w, __global ${CT}* part_b,
                         __global const ${T}* g, long g_off,
                         __global const ${T}* x, long x_off,
                         __global const ${CT}* mean_in, __global const ${CT}* rstd_in,
                         long nrows, long M, long CH, long nchunks)
{
    long gid = get_global_id(0);
    if (gid >= M * nchunks) return;
    long ch = gid / M, col = gid - ch * M;
    long r0 = ch * CH, r1 = min(r0 + CH, nrows);
    ${CT} sw = 0, sb = 0;
    for (long r = r0; r < r1; ++r) {
        ${CT} gv = (${CT})g[g_off + r * M + col];
        ${CT} xh = ((${CT})x[x_off + r * M + col] - mean_in[r]) * rstd_in[r];
        sw += gv * xh;
        sb += gv;
    }
    part_w[gid] = sw;
    part_b[gid] = sb;
}
