## Implicit-GEMM convolution kernels: the GPU design (cltorch/ops/conv/igemm.py plans and launches them).
##
## The geometry is conv.cl.mako's (every convolution is 3-d; G groups; x [N, G*CI, D, H, W]; y [N, G*CO, OD, OH, OW]).
## Each direction is a GEMM whose one operand is gathered from the image while it is staged in local memory (no
## column matrix is ever written), as in cuDNN's implicit GEMM (Chetlur et al., "cuDNN: Efficient Primitives for
## Deep Learning", 2014) and CUTLASS's implicit-GEMM convolutions:
##
##   * igemm_conv, the forward and the input gradient (the transposed direction, conv_transpose):
##         out[n, g*CO + m, position] = bias[g*CO + m] + sum_{tap t, channel c} WP[g, t, c, m] * in[n, g*CI + c, src]
##     M = the output channels (rows), N = the output positions of all images (columns), K = taps x channels. The
##     K loop runs over the taps outside and blocks of TK channels inside, so each work-item finds its columns'
##     source positions once per tap (no division in the loop) and a channel step is one stride. The host gives
##     each column's source as base + delta: base = q * bm + bo for the column's grid coordinate q, delta from a
##     tap table (forward: base = o*s - p, delta = e*dil). The input gradient of a strided convolution is phase-
##     decomposed: the output positions are split by (d mod sd, h mod sh, w mod sw) and a work-group's columns all
##     have one phase, whose taps are the only ones that reach it (the host lists them per phase, with their exact
##     deltas (phase + p - e*dil) / s): no tap is tested for divisibility and none is multiplied by zero.
##   * igemm_wgrad, the weight gradient: rows o (output channels), columns (c, t) in PyTorch's weight order,
##     K = the N*OD*OH*OW positions, cut into splits of KC positions (a multiple of TK). Each split writes its partial
##     sums; igemm_wsum adds the splits in order. The order of every sum depends on the shapes and KC only (never on
##     the work-group or tile sizes): deterministic.
##
## Work-group tile: TM rows x TN columns, one TK-deep slice of K at a time in local memory; work-item (tx, ty) of
## (LX = TN/RN) x (LY = TM/RM) computes RM x RN outputs in registers: rows (v*LY + ty)*VW + 0..VW-1 for v < RM/VW,
## columns (v*LX + tx)*VW + 0..VW-1 for v < RN/VW (the register blocking of Volkov and Demmel, SC 2008; vectors
## strided by the group so a warp's local loads hit consecutive 16-byte words). Its inner loop reads local memory
## only as VW-wide vectors (RM/VW + RN/VW vector loads for RM*RN multiply-adds). Global reads: the weight tile as
## VW-wide vectors along m, the gathered tile with consecutive work-items on consecutive columns (positions: a
## coalesced row of the image when the stride is 1). The next slice is read into registers while the current one
## is multiplied (one local buffer, two barriers per slice).
##
## Template parameters: dt ("float" or "double"), idx ("int" or "long", the index type), tm, tn, tk, rm, rn, vw
## (powers of two; rm and rn multiples of vw), wgrad (0: the conv kernels, 1: igemm_wgrad and igemm_wsum).
## Multiply-adds are fma() (one instruction on GPUs); in deterministic mode they are a separate * and + as in every
## other kernel there.
<%namespace name="c" file="common.cl.mako"/>
${c.preamble((dt,))}
<%
    det = context.get("deterministic")
    VW = vw
    VT = dt + str(VW) if VW > 1 else dt
    LX, LY = tn // rn, tm // rm
    NT = LX * LY
    RMV, RNV = rm // VW, rn // VW
    lanes = "0123456789abcdef"
    def lane(v, e):
        return v if VW == 1 else "%s.s%s" % (v, lanes[e])
    def cdiv(a, b):
        return -(-a // b)
%>
typedef ${idx} I;
% if det:
#define MAC(acc, a, b) acc = acc + (a) * (b)
% else:
#define MAC(acc, a, b) acc = fma((a), (b), acc)
% endif

## The register-blocked product of one TK slice: acc[r][v] += A[kk][row r] * B[kk][column vector v]. A and B are
## local arrays of VT vectors with rows of ${"arow"} and ${"brow"} vectors.
<%def name="slice_product(A, arow, B, brow)">
#pragma unroll
        for (int kk = 0; kk < ${tk}; kk++) {      // inner loop: local memory read as ${VT} vectors only
% for v in range(RMV):
            ${VT} a${v} = ${A}[kk * ${arow} + ${v * LY} + ty];
% endfor
% for v in range(RNV):
            ${VT} b${v} = ${B}[kk * ${brow} + ${v * LX} + tx];
% endfor
% for v in range(RMV):
% for e in range(VW):
% for w in range(RNV):
            MAC(acc${v * VW + e}_${w}, (${VT})(${lane("a%d" % v, e)}), b${w});
% endfor
% endfor
% endfor
        }
</%def>

% if not wgrad:
<%
    # weight slice: TK rows x TM/VW vectors, AL vector loads per work-item
    AVN = tk * tm // VW
    AL = cdiv(AVN, NT)
    # gathered slice: TK rows x TN columns. NT >= TN: one column per work-item, rows lid/TN + i*(NT/TN);
    # TN > NT: TN/NT columns lid + j*NT, every row
    if NT >= tn:
        BC = 1
        BR = cdiv(tk * tn, NT)
        RSTEP = NT // tn
    else:
        BC = tn // NT
        BR = tk
        RSTEP = 1
%>
// WP[((g*KS + t)*CIp + c)*Opad + o] = W[g, o, c, tap t] (zero for c >= CI or o >= CO): the weight of kernel-input
// channel c and kernel-output channel o of group g at tap t = (e*KH + i)*KW + j, read through W's strides (w_gs:
// group stride, w_ci / w_co: channel strides; for the transposed direction the host swaps them). One work-item per
// element of WP, o fastest.
__kernel void igemm_prep(__global const ${dt}* W, I w_off, I w_gs, I w_ci, I w_co, I w_e, I w_i, I w_j,
                         __global ${dt}* WP, int CI, int CIp, int CO, int Opad, int KD, int KH, int KW, I total)
{
    I gid = get_global_id(0);
    if (gid >= total) return;
    int o = (int)(gid % Opad);
    I r = gid / Opad;
    int cc = (int)(r % CIp);
    r /= CIp;
    int KS = KD * KH * KW;
    int t = (int)(r % KS), g = (int)(r / KS);
    int e = t / (KH * KW), ij = t - e * (KH * KW);
    int i = ij / KW, j = ij - i * KW;
    ${dt} v = (${dt})0;
    if (o < CO && cc < CI)
        v = W[w_off + (I)g * w_gs + (I)cc * w_ci + (I)o * w_co + (I)e * w_e + (I)i * w_i + (I)j * w_j];
    WP[gid] = v;
}

// out[n, g*CO + m, (od, oh, ow)] for the columns of one phase f (see the header). Column q of phase f is image
// n = q / (QD*QH*QW) at grid point (qd, qh, qw); it writes output position (qd*om_d + fd, ...) (skipped outside
// OD x OH x OW) and reads the kernel input at (qd*bm_d + bo_d + delta_d, ...) for each tap in phase f's list:
// TT[f*(1 + 4*KS)] = the number of taps, then (t, delta_d, delta_h, delta_w) for each. Range: (NPH*TP*LX,
// MT*LY, G), local (LX, LY, 1); f = tile / TP. The input is read through its strides; out is contiguous.
__kernel __attribute__((reqd_work_group_size(${LX}, ${LY}, 1)))
void igemm_conv(__global const ${dt}* X, I x_off, I x_sn, I x_sc, I x_sd, I x_sh, I x_sw,
                __global const ${VT}* WP, __global const ${dt}* B, I b_off, I b_st, int has_bias,
                __global ${dt}* Y, I y_off, __global const int* TT,
                int G, int CI, int CIp, int CO, int Opad, int Din, int Hin, int Win,
                int QD, int QH, int QW, int OD, int OH, int OW, int om_d, int om_h, int om_w,
                int bm_d, int bm_h, int bm_w, int bo_d, int bo_h, int bo_w, int KS, I NQ, int TP)
{
    __local ${VT} As[${tk * tm // VW}];
    __local ${VT} Bs[${tk * tn // VW}];
    __local ${dt}* Bsc = (__local ${dt}*)Bs;
    const int tx = get_local_id(0), ty = get_local_id(1);
    const int lid = ty * ${LX} + tx;
    const int tile = get_group_id(0), g = get_group_id(2);
    const int f = tile / TP, tp = tile - f * TP;
    const int m0 = get_group_id(1) * ${tm};
    const int fw = f % om_w, fh = (f / om_w) % om_h, fd = f / (om_w * om_h);
    const I q0 = (I)tp * ${tn};
    const int QP = QD * QH * QW;
    __global const int* tt = TT + f * (1 + 4 * KS);
    const int ntaps = tt[0];
    const int NCB = CIp / ${tk};
    const int NKT = ntaps * NCB;
    const I xg = x_off + (I)(g * CI) * x_sc;
    // this work-item's gathered columns: image base, grid base, whether the column exists
% for j in range(BC):
    I xb${j}; int bd${j}, bh${j}, bw${j}, cv${j};
    {
        I q = q0 + (lid % ${tn}) + ${j * NT};
        int n = (int)(q / QP), r = (int)(q - (I)n * QP);
        int qd = r / (QH * QW), rr = r - qd * (QH * QW);
        int qh = rr / QW, qw = rr - qh * QW;
        cv${j} = q < NQ && qd * om_d + fd < OD && qh * om_h + fh < OH && qw * om_w + fw < OW;
        xb${j} = xg + (I)n * x_sn;
        bd${j} = qd * bm_d + bo_d; bh${j} = qh * bm_h + bo_h; bw${j} = qw * bm_w + bo_w;
    }
% endfor
    const int brow0 = ${"lid / %d" % tn if NT >= tn else "0"};
    // accumulators start at the bias (the order of conv.cl.mako's direct kernels: bias, then taps, then channels)
% for v in range(RMV):
% for e in range(VW):
    ${VT} ${", ".join("acc%d_%d" % (v * VW + e, w) for w in range(RNV))};
    {
        int m = m0 + ${v * LY * VW} + ty * ${VW} + ${e};
        ${dt} bias = (has_bias && m < CO) ? B[b_off + (I)(g * CO + m) * b_st] : (${dt})0;
% for w in range(RNV):
        acc${v * VW + e}_${w} = (${VT})(bias);
% endfor
    }
% endfor
% endfor
% for i in range(AL):
    ${VT} ra${i};
% endfor
% for j in range(BC):
% for r in range(BR):
    ${dt} rb${j}_${r};
% endfor
% endfor
<%def name="load_slice(kt)">
    {
        int ti = ${kt} / NCB, cb = ${kt} - ti * NCB;
        __global const int* te = tt + 1 + 4 * ti;
        int t = te[0], dd_ = te[1], dh_ = te[2], dw_ = te[3];
        int c0 = cb * ${tk};
        __global const ${VT}* wp = WP + ((I)(g * KS + t) * CIp + c0) * (Opad / ${VW}) + m0 / ${VW};
% for i in range(AL):
<% e0 = "lid + %d" % (i * NT) %>
% if (i + 1) * NT > AVN:
        ra${i} = (${e0} < ${AVN}) ? wp[(I)((${e0}) / ${tm // VW}) * (Opad / ${VW}) + (${e0}) % ${tm // VW}] : (${VT})0;
% else:
        ra${i} = wp[(I)((${e0}) / ${tm // VW}) * (Opad / ${VW}) + (${e0}) % ${tm // VW}];
% endif
% endfor
% for j in range(BC):
        {
            int id = bd${j} + dd_, ih = bh${j} + dh_, iw = bw${j} + dw_;
            int ok = cv${j} && id >= 0 && id < Din && ih >= 0 && ih < Hin && iw >= 0 && iw < Win;
            __global const ${dt}* xp = X + xb${j} + (I)id * x_sd + (I)ih * x_sh + (I)iw * x_sw;
% for r in range(BR):
<% row = "brow0 + %d" % (r * RSTEP) %>
            { int cr = ${row};
              rb${j}_${r} = (ok && cr < ${tk} && c0 + cr < CI) ? xp[(I)(c0 + cr) * x_sc] : (${dt})0; }
% endfor
        }
% endfor
    }
</%def>
    if (NKT > 0) {
        ${load_slice("0")}
    }
    for (int kt = 0; kt < NKT; kt++) {
% for i in range(AL):
% if (i + 1) * NT > AVN:
        if (lid + ${i * NT} < ${AVN}) As[lid + ${i * NT}] = ra${i};
% else:
        As[lid + ${i * NT}] = ra${i};
% endif
% endfor
% for j in range(BC):
% for r in range(BR):
        { int cr = brow0 + ${r * RSTEP};
          if (cr < ${tk}) Bsc[cr * ${tn} + (lid % ${tn}) + ${j * NT}] = rb${j}_${r}; }
% endfor
% endfor
        barrier(CLK_LOCAL_MEM_FENCE);
        if (kt + 1 < NKT) {
            ${load_slice("(kt + 1)")}
        }
        ${slice_product("As", tm // VW, "Bs", tn // VW)}
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const int P = OD * OH * OW;
% for w in range(RNV):
% for e2 in range(VW):
    {
        I q = q0 + ${w * LX * VW} + tx * ${VW} + ${e2};
        int n = (int)(q / QP), r = (int)(q - (I)n * QP);
        int qd = r / (QH * QW), rr = r - qd * (QH * QW);
        int qh = rr / QW, qw = rr - qh * QW;
        int od = qd * om_d + fd, oh = qh * om_h + fh, ow = qw * om_w + fw;
        if (q < NQ && od < OD && oh < OH && ow < OW) {
            __global ${dt}* yp = Y + y_off + ((I)n * G * CO + g * CO) * P + (od * OH + oh) * OW + ow;
% for v in range(RMV):
% for e in range(VW):
            { int m = m0 + ${v * LY * VW} + ty * ${VW} + ${e};
              if (m < CO) yp[(I)m * P] = ${lane("acc%d_%d" % (v * VW + e, w), e2)}; }
% endfor
% endfor
        }
    }
% endfor
% endfor
}

% else:
<%
    # both slices are read with consecutive work-items on consecutive positions (K, the rows of the slices): the
    # tk work-items of a row group read tk consecutive elements, then the next channel / column
    assert NT % tk == 0
    CSTEP = NT // tk
    AL = cdiv(tk * tm, NT)
    BL = cdiv(tk * tn, NT)
    TMP, TNP = tm + VW, tn + VW      # padded rows: the transposing stores of a warp spread over the banks
%>
// Partial weight gradients: PART[p_off + ((g*S + s)*CO + m)*NCOL + col] = sum over the positions q in
// [s*KC, (s+1)*KC) of U[n, g*CO + m, od, oh, ow] * X[n, g*CI + c, od*sd - pd + e*dd, oh*sh - ph + i*dh,
// ow*sw - pw + j*dw] (zero outside the image), col = c*KS + (e*KH + i)*KW + j (PyTorch's weight order),
// q = ((n*OD + od)*OH + oh)*OW + ow, in increasing q. U and X are read through their strides.
// Range (ceil(NCOL/TN)*LX, ceil(CO/TM)*LY, G*S), local (LX, LY, 1).
__kernel __attribute__((reqd_work_group_size(${LX}, ${LY}, 1)))
void igemm_wgrad(__global const ${dt}* X, I x_off, I x_sn, I x_sc, I x_sd, I x_sh, I x_sw,
                 __global const ${dt}* U, I u_off, I u_sn, I u_sc, I u_sd, I u_sh, I u_sw,
                 __global ${dt}* PART, I p_off, int G, int CI, int CO, int KD, int KH, int KW,
                 int D, int H, int W, int OD, int OH, int OW, int sd, int sh, int sw, int pd, int ph, int pw,
                 int dd, int dh, int dw, I NQ, I KC, int S)
{
    __local ${VT} As[${tk * TMP // VW}];
    __local ${VT} Bs[${tk * TNP // VW}];
    __local ${dt}* Asc = (__local ${dt}*)As;
    __local ${dt}* Bsc = (__local ${dt}*)Bs;
    const int tx = get_local_id(0), ty = get_local_id(1);
    const int lid = ty * ${LX} + tx;
    const int gs = get_group_id(2);
    const int g = gs / S, s = gs - g * S;
    const int m0 = get_group_id(1) * ${tm}, col0 = get_group_id(0) * ${tn};
    const int KS = KD * KH * KW, NCOL = CI * KS;
    const int P = OD * OH * OW;
    const I k0 = (I)s * KC;
    const I kend = min(NQ, k0 + KC);
    const int NKT = (int)((kend - k0 + ${tk - 1}) / ${tk});
    const int kk = lid % ${tk}, cg = lid / ${tk};
    // this work-item's gathered columns (c, tap): channel offset and the tap's dilated offsets
% for i in range(BL):
    I xc${i}; int de${i}, dh${i}, dw${i}, cv${i};
    {
        int col = col0 + cg + ${i * CSTEP};
        cv${i} = col < NCOL && cg + ${i * CSTEP} < ${tn};
        int cc = col / KS, t = col - cc * KS;
        int e = t / (KH * KW), ij = t - e * (KH * KW);
        int i_ = ij / KW, j_ = ij - i_ * KW;
        xc${i} = x_off + (I)(g * CI + cc) * x_sc;
        de${i} = e * dd - pd; dh${i} = i_ * dh - ph; dw${i} = j_ * dw - pw;
    }
% endfor
% for v in range(RMV):
% for e in range(VW):
% for w in range(RNV):
    ${VT} acc${v * VW + e}_${w} = (${VT})0;
% endfor
% endfor
% endfor
% for i in range(AL):
    ${dt} ra${i};
% endfor
% for i in range(BL):
    ${dt} rb${i};
% endfor
<%def name="load_wslice(kt)">
    {
        I q = k0 + (I)(${kt}) * ${tk} + kk;
        int ok = q < kend;
        int n = (int)(q / P), p = (int)(q - (I)n * P);
        int od = p / (OH * OW), r = p - od * (OH * OW);
        int oh = r / OW, ow = r - oh * OW;
        __global const ${dt}* up = U + u_off + (I)n * u_sn + (I)(g * CO) * u_sc + (I)od * u_sd + (I)oh * u_sh
                                   + (I)ow * u_sw;
% for i in range(AL):
        { int m = cg + ${i * CSTEP};
          ra${i} = (ok && m < ${tm} && m0 + m < CO) ? up[(I)(m0 + m) * u_sc] : (${dt})0; }
% endfor
        I xn = (I)n * x_sn;
        int bd = od * sd, bh = oh * sh, bw = ow * sw;
% for i in range(BL):
        { int id = bd + de${i}, ih = bh + dh${i}, iw = bw + dw${i};
          rb${i} = (ok && cv${i} && id >= 0 && id < D && ih >= 0 && ih < H && iw >= 0 && iw < W)
                   ? X[xc${i} + xn + (I)id * x_sd + (I)ih * x_sh + (I)iw * x_sw] : (${dt})0; }
% endfor
    }
</%def>
    if (NKT > 0) {
        ${load_wslice("0")}
    }
    for (int kt = 0; kt < NKT; kt++) {
% for i in range(AL):
        if (cg + ${i * CSTEP} < ${tm}) Asc[kk * ${TMP} + cg + ${i * CSTEP}] = ra${i};
% endfor
% for i in range(BL):
        if (cg + ${i * CSTEP} < ${tn}) Bsc[kk * ${TNP} + cg + ${i * CSTEP}] = rb${i};
% endfor
        barrier(CLK_LOCAL_MEM_FENCE);
        if (kt + 1 < NKT) {
            ${load_wslice("kt + 1")}
        }
        ${slice_product("As", TMP // VW, "Bs", TNP // VW)}
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    __global ${dt}* pp = PART + p_off + ((I)(g * S + s) * CO) * NCOL;
% for v in range(RMV):
% for e in range(VW):
    { int m = m0 + ${v * LY * VW} + ty * ${VW} + ${e};
      if (m < CO) {
% for w in range(RNV):
% for e2 in range(VW):
        { int col = col0 + ${w * LX * VW} + tx * ${VW} + ${e2};
          if (col < NCOL) pp[(I)m * NCOL + col] = ${lane("acc%d_%d" % (v * VW + e, w), e2)}; }
% endfor
% endfor
      } }
% endfor
% endfor
}

// V[v_off + (g*CO + m)*NCOL + col] = sum over s = 0, 1, ..., S-1 in order of PART[((g*S + s)*CO + m)*NCOL + col];
// one work-item per element (TOTAL = G*CO*NCOL), consecutive work-items on consecutive columns.
__kernel void igemm_wsum(__global const ${dt}* PART, __global ${dt}* V, I v_off, int CO, int NCOL, int S, I TOTAL)
{
    I gid = get_global_id(0);
    if (gid >= TOTAL) return;
    I per = (I)CO * NCOL;
    int g = (int)(gid / per);
    I r = gid - (I)g * per;
    __global const ${dt}* p = PART + (I)g * S * per + r;
    ${"volatile " if det else ""}${dt} acc = p[0];
    for (int s = 1; s < S; s++) acc += p[(I)s * per];
    V[v_off + gid] = acc;
}
% endif
