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
##   vec: every 8 elements j = 8i .. 8i + 7 of a row sit side by side in memory (A == 1, or Bn % 8 == 0): they load
##        and store as one vector; otherwise each element's offset is walked separately (same values, same order)
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
## Inside a chunk (CH is a multiple of 8), terms add in 32 stripes: stripe t (0..31) adds, group after group, the
## terms j0 + 32 i + t (missing terms of the last group add 0), and the chunk's sum is the balanced binary tree over
## the 32 stripe sums in order (((s0 + s1) + (s2 + s3)) + ...): four vector accumulators of 8 lanes, whatever the
## device. The error of a chunk sum grows as CH / 32 + 5 (one sequential float32 sum over a batch_norm row of
## 16,384 terms was ~20x further from float64 than PyTorch's).
## Every work-item only reads what the previous launch wrote: no local memory, no barriers, no atomics.
<%namespace name="cm" file="common.cl.mako"/>
${cm.preamble(types)}
<%
    V = CT + "8"
    IV = "long8" if CT == "double" else "int8"
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
    if T == CT:
        LD, ST = "vload8(0, %s)", "vstore8(%s, 0, %s)"
    else:   # half storage, float compute
        LD, ST = "vload_half8(0, %s)", "vstore_half8(%s, 0, %s)"
    def vtree(v):
        """the balanced tree over the 8 lanes of v, adjacent pairs first"""
        l = ["%s.s%d" % (v, q) for q in range(8)]
        return "(((%s + %s) + (%s + %s)) + ((%s + %s) + (%s + %s)))" % tuple(l)
    def tree4(n):
        """the balanced tree over the 32 stripes held in vectors n0 .. n3"""
        return "((%s + %s) + (%s + %s))" % tuple(vtree("%s%d" % (n, v)) for v in range(4))
%>
#define NORM_IOTA ((${IV})(0, 1, 2, 3, 4, 5, 6, 7))

## lanes q >= rem of t read 0 (the terms past the end of a chunk)
inline ${V} keep8(${V} t, int rem) { return select((${V})0, t, NORM_IOTA < (${IV})rem); }

## lanes of a vector: those j < j1 of j, j + 1, ..., j + 7 (0 to 8)
inline int rem8(long j, long j1) { return (int)clamp(j1 - j, 0L, 8L); }

## 8 consecutive elements q[0..7] (those at i >= rem read 0)
inline ${V} ld8c(__global const ${T}* q, int rem)
{
    if (rem >= 8) return ${LD % "q"};
    ${V} v = (${V})0;
% for i in range(8):
    if (rem > ${i}) v.s${i} = (${CT})q[${i}];
% endfor
    return v;
}

## elements j .. j + 7 of a row whose element j sits at (a, b): p[a * sa + b], ... (lanes >= rem read 0)
inline ${V} ld8(__global const ${T}* p, long a, long b, long sa, long Bn, int rem)
{
% if vec:
    return ld8c(p + a * sa + b, rem);
% else:
    ${V} v = (${V})0;
% for i in range(8):
    if (rem > ${i}) v.s${i} = (${CT})p[a * sa + b];
    if (++b == Bn) { b = 0; ++a; }
% endfor
    return v;
% endif
}

inline void st8(__global ${T}* p, long a, long b, long sa, long Bn, int rem, ${V} v)
{
% if vec:
    __global ${T}* q = p + a * sa + b;
    if (rem >= 8) { ${ST % ("v", "q")}; return; }
% for i in range(8):
    if (rem > ${i}) q[${i}] = (${T})v.s${i};
% endfor
% else:
% for i in range(8):
    if (rem > ${i}) p[a * sa + b] = (${T})v.s${i};
    if (++b == Bn) { b = 0; ++a; }
% endfor
% endif
}

## (a, b) of element j -> of element j + 8
inline void adv8(long* a, long* b, long Bn)
{
% if vec:
    *b += 8;
    if (*b >= Bn) { *b -= Bn; *a += 1; }
% else:
    *b += 8;
    *a += *b / Bn;
    *b %= Bn;
% endif
}

% if affine == "group":
## group_norm's weight of elements b .. b + 7 of row r (A == 1)
inline ${V} wgroup8(__global const ${T}* w, long r, long b, int rem, long G, long Cg, long HW)
{
    ${V} v = (${V})0;
% for i in range(8):
    if (rem > ${i}) v.s${i} = (${CT})w[${widx("r", "b + %d" % i)}];
% endfor
    return v;
}
% endif

## the weight of 8 elements (a, b) .. of row r (affine "col" / "group")
<%def name="wvec(wp)">\
% if affine == "col":
ld8c(${wp} + b, rem)\
% else:
wgroup8(${wp}, r, b, rem, G, Cg, HW)\
% endif
</%def>

## the normalised elements: ((x - mean hi) - mean lo) * rstd (rms: x * rstd)
<%def name="xhat(xv)">\
% if center:
((${xv} - mu) - ml) * rstd\
% else:
${xv} * rstd\
% endif
</%def>

## a for-header over the groups of 32 elements of [j0, j1), (a, b) walking with them; its body is unrolled over
## the group's four vectors (v = 0..3), each at element k + 8 v with rem lanes
<%def name="groups()">\
    {
    long a = a0, b = b0;
    for (long k = j0; k < j1; k += 32) {
% for v in range(4):
        {
        int rem = rem8(k + ${8 * v}, j1);
${caller.body(v=v)}
        adv8(&a, &b, Bn);
        }
% endfor
    }
    }
</%def>

## a for-header over the vectors of [j0, j1), (a, b) walking with them
<%def name="vectors()">\
    {
    long a = a0, b = b0;
    for (long k = j0; k < j1; k += 8) {
        int rem = rem8(k, j1);
${caller.body()}
        adv8(&a, &b, Bn);
    }
    }
</%def>

<%def name="start()">\
    long a0 = Bn ? j0 / Bn : 0, b0 = j0 - a0 * Bn;
</%def>

## Sums over elements [j0, j1) of a row: the pivot P = (sum x) / n, D = sum (x - P), Q = sum (x - P)^2 (center);
## or P = D = 0, Q = sum x^2 (rms).
void fwd_chunk(__global const ${T}* xp, long j0, long j1, long sa, long Bn, ${CT}* P_out, ${CT}* D_out, ${CT}* Q_out)
{
${start()}
    ${CT} m = 0;
% if center:
    ${V} s0 = 0, s1 = 0, s2 = 0, s3 = 0;
<%self:groups args="v">
        s${v} += ld8(xp, a, b, sa, Bn, rem);
</%self:groups>
    m = ${tree4("s")} / (${CT})(j1 - j0);
% endif
    ${V} d0 = 0, d1 = 0, d2 = 0, d3 = 0, q0 = 0, q1 = 0, q2 = 0, q3 = 0;
<%self:groups args="v">
        ${V} t = keep8(ld8(xp, a, b, sa, Bn, rem) - m, rem);
% if center:
        d${v} += t;
% endif
        q${v} += t * t;
</%self:groups>
    *P_out = m;
% if center:
    *D_out = ${tree4("d")};
% else:
    *D_out = 0;
% endif
    *Q_out = ${tree4("q")};
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
${start()}
<%self:vectors>
        ${V} v = ${xhat("ld8(xp, a, b, sa, Bn, rem)")};
% if affine == "row":
% if has_w:
        v = v * wr;
% endif
% if has_b:
        v = v + br;
% endif
% elif affine != "none":
% if has_w:
        v = v * ${wvec("w + w_off")};
% endif
% if has_b:
        v = v + ${wvec("bb + b_off")};
% endif
% endif
        st8(yp, a, b, sa, Bn, rem, v);
</%self:vectors>
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
${start()}
    ${V} e0 = 0, e1 = 0, e2 = 0, e3 = 0, f0 = 0, f1 = 0, f2 = 0, f3 = 0;
<%self:groups args="v">
        ${V} gv = ld8(gp, a, b, sa, Bn, rem);
% if w_in_sum:
        gv = gv * ${wvec("w + w_off")};
% endif
        e${v} += gv;
        f${v} += keep8(gv * ${xhat("ld8(xp, a, b, sa, Bn, rem)")}, rem);
</%self:groups>
    *s1_out = ${tree4("e")};
    *s2_out = ${tree4("f")};
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
              Bn, G, Cg, HW, &s1, &s2);
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
${start()}
<%self:vectors>
        ${V} gv = ld8(gp, a, b, sa, Bn, rem);
% if affine == "row" and has_w:
        gv = gv * wr;
% elif affine != "none" and has_w:
        gv = gv * ${wvec("w + w_off")};
% endif
        ${V} xh = ${xhat("ld8(xp, a, b, sa, Bn, rem)")};
        st8(op, a, b, sa, Bn, rem, rstd * (gv - c1 - xh * c2));
</%self:vectors>
}

## Weight and bias gradients of layer_norm / rms_norm: column sums over rows of g * xh and g (rows of M columns,
## contiguous). Work-item (cv, chunk) sums rows [chunk * CH, chunk * CH + CH), each row after the previous one,
## for the 8 columns 8 cv .. 8 cv + 7 (those < M) into part_w[chunk][col], part_b[chunk][col].
__kernel void norm_wgrad(__global ${CT}* part_w, __global ${CT}* part_b,
                         __global const ${T}* g, long g_off,
                         __global const ${T}* x, long x_off,
                         __global const ${CT}* mean_in, __global const ${CT}* rstd_in,
                         long nrows, long M, long CH, long nchunks)
{
    long gid = get_global_id(0);
    long MV = (M + 7) / 8;
    if (gid >= MV * nchunks) return;
    long ch = gid / MV, c0 = 8 * (gid - ch * MV);
    long r0 = ch * CH, r1 = min(r0 + CH, nrows);
    int rem = rem8(c0, M);
    ${V} sw = 0, sb = 0;
    for (long r = r0; r < r1; ++r) {
        ${V} gv = ld8c(g + g_off + r * M + c0, rem);
        ${CT} mu = mean_in[r], ml = mean_in[nrows + r], rstd = rstd_in[r];
        ${V} xh = ${xhat("ld8c(x + x_off + r * M + c0, rem)")};
        sw += gv * xh;
        sb += gv;
    }
    __global ${CT}* pw = part_w + ch * M + c0;
    __global ${CT}* pb = part_b + ch * M + c0;
% for i in range(8):
    if (rem > ${i}) { pw[${i}] = sw.s${i}; pb[${i}] = sb.s${i}; }
% endfor
}
