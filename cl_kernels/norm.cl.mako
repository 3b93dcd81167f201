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
## A row's L = A * Bn elements, in the order j = a * Bn + b, are cut into nch chunks of CH (the last one shorter);
## work-item (r, c) of nrows * nch owns chunk c of row r. The launcher picks CH and nch from the row length and the
## profile alone, so the order of every sum is fixed by L and the profile: not by the work-group size, the device
## or its compiler.
##   forward:  norm_part writes each chunk's pivot m_c = (sum x) / n_c, residual D_c = sum (x - m_c) and centred
##             sum of squares Q_c = sum (x - m_c)^2 (rms: only Q_c = sum x^2). norm_fwd combines a row's chunks in
##             chunk order: mean m1 = sum n_c m_c / L, its correction d = sum (n_c (m_c - m1) + D_c) / L (the
##             corrected two-pass algorithm of Chan, Golub & LeVeque 1983: d holds what rounding m1 lost, to the
##             precision of the centred terms), M2 = sum Q_c + 2 e_c D_c + n_c e_c^2 with e_c = m_c - (m1 + d)
##             (their pairwise update, exact in real arithmetic), and writes its chunk of y; chunk 0 also writes
##             the mean as a pair (hi, lo) with hi + lo = m1 + d exactly, rstd (and var). Every centring
##             subtracts hi, then lo: a float32 mean alone is off by up to half an ulp of |mean|, a bias every
##             term of sum(g * xh) shares (batch_norm weight gradients of an offset input were ~4x further from
##             float64 than torch's, whose CPU kernels accumulate in double).
##   backward: norm_bwd_part writes each chunk's sum(gh) and sum(gh * xh); norm_bwd adds a row's chunk sums in
##             chunk order and writes its chunk of grad_x; chunk 0 also writes the row sums (batch_norm).
## With nch == 1 the second kernel computes its chunk's sums itself (the same function) and the first is not
## launched. The mean is saved as mean[r] (hi) and mean[nrows + r] (lo).
## Inside a chunk, terms add in blocks of NORM_NB (a partial per block, then the partials):
## one sequential float32 sum over a batch_norm row of 16,384 terms was ~20x further from float64 than PyTorch's.
## Every work-item only reads what the previous launch wrote: no local memory, no barriers, no atomics.
<%namespace name="cm" file="common.cl.mako"/>
${cm.preamble(types)}
#define NORM_NB 32
<%
    def widx(row, b):
        if affine == "col":
            return b
        if affine == "group":
            return "((%s %% G) * Cg + (%s) / HW)" % (row, b)
        return row
    # the chunk weight: group/col weights enter the backward's sums (gh = g * w); batch_norm's one weight per
    # row multiplies the row sums instead (which are also its weight and bias gradients)
    w_in_sum = has_w and affine in ("col", "group")
    # deterministic mode: Intel's CPU compiler vectorises the loops over a row's chunk sums, reassociating them
    # (PoCL and Intel then differ in the last bits); volatile accumulators keep IEEE's order, as in loss_reduce
    VOL = "volatile " if context.get("deterministic") else ""
%>
## the normalised element: ((x - mean hi) - mean lo) * rstd (rms: x * rstd)
<%def name="xhat(xv)">\
% if center:
((${xv} - mu) - ml) * rstd\
% else:
${xv} * rstd\
% endif
</%def>
## for-header walking elements j0 <= j < j1 of a row: a, b are the element's coordinates, p its offset in the row
## (an empty row, Bn == 0, has j0 == j1 == 0 and divides nothing)
<%def name="each(j0, j1)">for (long j = ${j0}, a = Bn ? (${j0}) / Bn : 0, b = (${j0}) - a * Bn; j < ${j1}; ++j, b = (b + 1 == Bn) ? 0 : b + 1, a += (b == 0))</%def>

## Sums over elements [j0, j1) of a row: the pivot P = (sum x) / n, D = sum (x - P), Q = sum (x - P)^2 (center);
## or P = D = 0, Q = sum x^2 (rms).
void fwd_chunk(__global const ${T}* xp, long j0, long j1, long sa, long Bn, ${CT}* P_out, ${CT}* D_out, ${CT}* Q_out)
{
    ${CT} m = 0;
    ${CT} sd = 0, pd = 0;
% if center:
    ${CT} s = 0, ps = 0;
    int ks = 0;
    ${each("j0", "j1")} {
        ps += (${CT})xp[a * sa + b];
        if (++ks == NORM_NB) { s += ps; ps = 0; ks = 0; }
    }
    s += ps;
    m = s / (${CT})(j1 - j0);
% endif
    ${CT} q = 0, pq = 0;
    int kq = 0;
    ${each("j0", "j1")} {
        ${CT} d = (${CT})xp[a * sa + b] - m;
% if center:
        pd += d;
% endif
        pq += d * d;
        if (++kq == NORM_NB) { sd += pd; q += pq; pd = 0; pq = 0; kq = 0; }
    }
    *P_out = m;
    *D_out = sd + pd;
    *Q_out = q + pq;
}

__kernel void norm_part(__global ${CT}* part, __global const ${T}* x, long x_off,
                        long nrows, long rs, long sa, long Bn, long L, long CH, long nch)
{
    long gid = get_global_id(0);
    if (gid >= nrows * nch) return;
    long r = gid / nch, c = gid - r * nch;
    long j0 = c * CH, j1 = min(j0 + CH, L);
    ${CT} P, D, Q;
    fwd_chunk(x + x_off + r * rs, j0, j1, sa, Bn, &P, &D, &Q);
    part[3 * gid] = P;
    part[3 * gid + 1] = D;
    part[3 * gid + 2] = Q;
}

__kernel void norm_fwd(__global ${T}* y, long y_off,
                       __global const ${T}* x, long x_off,
                       __global const ${T}* w, long w_off,
                       __global const ${T}* bb, long b_off,
                       __global ${CT}* mean_out, __global ${CT}* rstd_out, __global ${CT}* var_out,
                       __global const ${CT}* part,
                       long nrows, long rs, long sa, long Bn, long L, long CH, long nch,
                       long G, long Cg, long HW, ${CT} eps)
{
    long gid = get_global_id(0);
    if (gid >= nrows * nch) return;
    long r = gid / nch, c = gid - r * nch;
    long j0 = c * CH, j1 = min(j0 + CH, L);
    __global const ${T}* xp = x + x_off + r * rs;
    __global ${T}* yp = y + y_off + r * rs;
    ${CT} M = (${CT})L;
    ${VOL}${CT} m1 = 0, dl = 0, m2 = 0;
    if (nch == 1) {
        ${CT} P, D, Q;
        fwd_chunk(xp, 0, L, sa, Bn, &P, &D, &Q);
        m1 = P;
        dl = D / M;
        m2 = Q - dl * D;         // sum (x - m1 - dl)^2 = Q - 2 dl D + L dl^2, and L dl = D
    } else {
        __global const ${CT}* pr = part + 3 * r * nch;
% if center:
        for (long k = 0; k < nch; ++k) m1 += (${CT})(min((k + 1) * CH, L) - k * CH) * pr[3 * k];
        m1 = m1 / M;
        for (long k = 0; k < nch; ++k) dl += (${CT})(min((k + 1) * CH, L) - k * CH) * (pr[3 * k] - m1) + pr[3 * k + 1];
        dl = dl / M;
% endif
        for (long k = 0; k < nch; ++k) {
% if center:
            ${CT} nk = (${CT})(min((k + 1) * CH, L) - k * CH);
            ${CT} e = (pr[3 * k] - m1) - dl;
            m2 += pr[3 * k + 2] + (${CT})2 * e * pr[3 * k + 1] + nk * e * e;
% else:
            m2 += pr[3 * k + 2];
% endif
        }
    }
    ${CT} mu = m1 + dl;
    ${CT} ml = dl - (mu - m1);   // Fast2Sum (|m1| >= |dl|): mu + ml == m1 + dl exactly
    ${CT} var = m2 / M;
    ${CT} rstd = rsqrt(var + eps);
    if (c == 0) {
        mean_out[r] = mu;
        mean_out[nrows + r] = ml;
        rstd_out[r] = rstd;
% if save_var:
        var_out[r] = var;
% endif
    }
% if affine == "row":
% if has_w:
    ${CT} wr = (${CT})w[w_off + r];
% endif
% if has_b:
    ${CT} br = (${CT})bb[b_off + r];
% endif
% endif
    ${each("j0", "j1")} {
        long p = a * sa + b;
        ${CT} v = ${xhat("(" + CT + ")xp[p]")};
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
        yp[p] = (${T})v;
    }
}

## Backward of the normalisation (per row), with xh = (x - mean) * rstd and gh = g * w:
##   center: gi = rstd * (gh - mean(gh) - xh * mean(gh * xh))
##   rms:    gi = rstd * (gh - xh * mean(gh * xh))
## g is contiguous in x's layout. With affine == "row" (batch_norm) the sums are of g (not gh: the row's one
## weight multiplies them), and chunk 0 writes sum(g) and sum(g * xh) of each row, which are the bias and weight
## gradients.
void bwd_chunk(__global const ${T}* gp, __global const ${T}* xp, __global const ${T}* w, long w_off, long r,
               ${CT} mu, ${CT} ml, ${CT} rstd, long j0, long j1, long sa, long Bn, long G, long Cg, long HW,
               ${CT}* s1_out, ${CT}* s2_out)
{
    ${CT} s1 = 0, s2 = 0, p1 = 0, p2 = 0;
    int k1 = 0;
    ${each("j0", "j1")} {
        long p = a * sa + b;
        ${CT} gv = (${CT})gp[p];
% if w_in_sum:
        gv = gv * (${CT})w[w_off + ${widx("r", "b")}];
% endif
        ${CT} xh = ${xhat("(" + CT + ")xp[p]")};
        p1 += gv;
        p2 += gv * xh;
        if (++k1 == NORM_NB) { s1 += p1; s2 += p2; p1 = 0; p2 = 0; k1 = 0; }
    }
    *s1_out = s1 + p1;
    *s2_out = s2 + p2;
}

__kernel void norm_bwd_part(__global ${CT}* part,
                            __global const ${T}* g, long g_off,
                            __global const ${T}* x, long x_off,
                            __global const ${T}* w, long w_off,
                            __global const ${CT}* mean_in, __global const ${CT}* rstd_in,
                            long nrows, long rs, long sa, long Bn, long L, long CH, long nch,
                            long G, long Cg, long HW)
{
    long gid = get_global_id(0);
    if (gid >= nrows * nch) return;
    long r = gid / nch, c = gid - r * nch;
    long j0 = c * CH, j1 = min(j0 + CH, L);
    ${CT} s1, s2;
    bwd_chunk(g + g_off + r * rs, x + x_off + r * rs, w, w_off, r, mean_in[r], mean_in[nrows + r], rstd_in[r], j0, j1, sa,
              Bn,
              G, Cg, HW, &s1, &s2);
    part[2 * gid] = s1;
    part[2 * gid + 1] = s2;
}

__kernel void norm_bwd(__global ${T}* gi, long gi_off,
                       __global const ${T}* g, long g_off,
                       __global const ${T}* x, long x_off,
                       __global const ${T}* w, long w_off,
                       __global const ${CT}* mean_in, __global const ${CT}* rstd_in,
                       __global ${CT}* sg_out, __global ${CT}* sgx_out,
                       __global const ${CT}* part,
                       long nrows, long rs, long sa, long Bn, long L, long CH, long nch,
                       long G, long Cg, long HW)
{
    long gid = get_global_id(0);
    if (gid >= nrows * nch) return;
    long r = gid / nch, c = gid - r * nch;
    long j0 = c * CH, j1 = min(j0 + CH, L);
    __global const ${T}* xp = x + x_off + r * rs;
    __global const ${T}* gp = g + g_off + r * rs;
    __global ${T}* op = gi + gi_off + r * rs;
    ${CT} M = (${CT})L;
    ${CT} mu = mean_in[r], ml = mean_in[nrows + r], rstd = rstd_in[r];
    ${VOL}${CT} s1 = 0, s2 = 0;
    if (nch == 1) {
        ${CT} t1, t2;
        bwd_chunk(gp, xp, w, w_off, r, mu, ml, rstd, 0, L, sa, Bn, G, Cg, HW, &t1, &t2);
        s1 = t1;
        s2 = t2;
    } else {
        __global const ${CT}* pr = part + 2 * r * nch;
        for (long k = 0; k < nch; ++k) { s1 += pr[2 * k]; s2 += pr[2 * k + 1]; }
    }
% if affine == "row":
    if (c == 0) {
        sg_out[r] = s1;
        sgx_out[r] = s2;
    }
% endif
% if affine == "row" and has_w:
    ${CT} wr = (${CT})w[w_off + r];
    ${CT} c1 = wr * s1 / M, c2 = wr * s2 / M;
% else:
    ${CT} c1 = s1 / M, c2 = s2 / M;
% endif
% if not center:
    c1 = 0;
% endif
    ${each("j0", "j1")} {
        long p = a * sa + b;
        ${CT} gv = (${CT})gp[p];
% if affine == "row" and has_w:
        gv = gv * wr;
% elif affine != "none" and has_w:
        gv = gv * (${CT})w[w_off + ${widx("r", "b")}];
% endif
        ${CT} xh = ${xhat("(" + CT + ")xp[p]")};
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
        ${CT} mu = mean_in[r], ml = mean_in[nrows + r], rstd = rstd_in[r];
        ${CT} xh = ${xhat("(" + CT + ")x[x_off + r * M + col]")};
        sw += gv * xh;
        sb += gv;
    }
    part_w[gid] = sw;
    part_b[gid] = sb;
}
