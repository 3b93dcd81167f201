## Depthwise convolution kernels, the GPU design (cltorch/ops/conv/depthwise_tile.py launches them).
##
## The geometry and the three directions are conv_depthwise.cl.mako's (groups == C input channels, M output channels
## per input channel, every convolution 3-d). These kernels stage what a work-group reads in local memory with
## coalesced loads (consecutive work-items on consecutive elements of a row) and read it from there for every tap:
##   * dwt_fwd: a work-group per (n, input channel c, output depth od, tile of TH = LY*RH rows x LX columns); it
##     stages the input patch of the tile plus its halo ((TH-1)*sh + (KH-1)*dh + 1 rows, (LX-1)*sw + (KW-1)*dw + 1
##     columns, zero outside the image) once per depth tap and computes the tile for all M output channels of c:
##     work-item (lx, ly) the outputs (ly + r*LY, lx), r < RH, of each of them;
##   * dwt_bwd_input: a work-group per (n, c, depth d, tile of z); for each output channel c*M + m and depth tap it
##     stages the u patch the tile's taps reach;
##   * dwt_wgrad_part: a work-group per (output channel, block of RB rows of u); it stages the block's u rows and,
##     for each of them, the KD*KH input rows its taps read; work-item (t, l) sums tap t in lane l.
## Each output adds the same terms in the same order as conv_depthwise.cl.mako's kernels (forward: bias, then taps
## e, i, j, rows outside the image skipped, columns outside it adding zero; input gradient: bias, then m, e, i, j;
## weight gradient: 8 lanes over ow mod 8, rows in order, then ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)),
## the partials summed by dw_wgrad_sum), so the two designs give the same bits.
##
## Template parameters: dt ("float" or "double"), idx ("int" or "long"), mult (the channel multiplier M, dwt_fwd:
## its M x RH accumulators are registers), rh (RH, output rows per work-item).
<%namespace name="c" file="common.cl.mako"/>
${c.preamble((dt,))}
<%
    det = context.get("deterministic")
    VOL = "volatile " if det else ""
%>
typedef ${idx} I;

// y [N, C*M, OD, OH, OW] contiguous at y_off. Groups: gid = ((n*C + c)*OD + od)*NTH*NTW + th*NTW + tw over a 1-d
// range of NT = LX*LY work-items each; P: the local patch (PH*PW elements).
__kernel void dwt_fwd(__global const ${dt}* X, I x_off, I x_sn, I x_sc, I x_sd, I x_sh, I x_sw,
                      __global const ${dt}* Wt, I w_off, I w_so, I w_sd, I w_sh, I w_sw,
                      __global const ${dt}* B, I b_off, I b_st, int has_bias,
                      __global ${dt}* Y, I y_off, __local ${dt}* P,
                      int C, int D, int H, int W, int OD, int OH, int OW, int KD, int KH, int KW,
                      int sd, int sh, int sw, int pd, int ph, int pw, int dd, int dh, int dw,
                      int LX, int LY, int NTH, int NTW, int PH, int PW)
{
    const int lid = get_local_id(0), NT = LX * LY;
    const int lx = lid % LX, ly = lid / LX;
    I grp = get_group_id(0);
    const int tw = (int)(grp % NTW); grp /= NTW;
    const int th = (int)(grp % NTH); grp /= NTH;
    const int od = (int)(grp % OD); grp /= OD;
    const int c = (int)(grp % C), n = (int)(grp / C);
    const int TH = LY * ${rh};
    const int oh0 = th * TH, ow0 = tw * LX;
    const int ih0 = oh0 * sh - ph, iw0 = ow0 * sw - pw;
    const int CM = C * ${mult};
    __global const ${dt}* xb = X + x_off + (I)n * x_sn + (I)c * x_sc;
% for m in range(mult):
    const int oc${m} = c * ${mult} + ${m};
    __global const ${dt}* w${m} = Wt + w_off + (I)oc${m} * w_so;
    ${dt} bias${m} = has_bias ? B[b_off + (I)oc${m} * b_st] : (${dt})0;
% for r in range(rh):
    ${VOL}${dt} acc${m}_${r} = bias${m};
% endfor
% endfor
    for (int e = 0; e < KD; e++) {
        int id = od * sd - pd + e * dd;
        if (id < 0 || id >= D) continue;                    // the same for the whole group
        __global const ${dt}* xd = xb + (I)id * x_sd;
        barrier(CLK_LOCAL_MEM_FENCE);                       // the previous depth's patch is no longer read
        for (int k = lid; k < PH * PW; k += NT) {
            int pr = k / PW, pc = k - pr * PW;
            int ih = ih0 + pr, iw = iw0 + pc;
            P[k] = (ih >= 0 && ih < H && iw >= 0 && iw < W) ? xd[(I)ih * x_sh + (I)iw * x_sw] : (${dt})0;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
% for r in range(rh):
        {
            int oh = oh0 + ly + ${r} * LY;
            int prb = (ly + ${r} * LY) * sh, pcb = lx * sw;
            for (int i = 0; i < KH; i++) {
                int ih = oh * sh - ph + i * dh;
                if (ih < 0 || ih >= H) continue;
                __local const ${dt}* pr_ = P + (prb + i * dh) * PW + pcb;
                for (int j = 0; j < KW; j++) {
                    ${dt} xv = pr_[j * dw];
% for m in range(mult):
                    acc${m}_${r} += w${m}[(I)e * w_sd + (I)i * w_sh + (I)j * w_sw] * xv;
% endfor
                }
            }
        }
% endfor
    }
    const int ow = ow0 + lx;
% for r in range(rh):
    {
        int oh = oh0 + ly + ${r} * LY;
        if (oh < OH && ow < OW) {
% for m in range(mult):
            Y[y_off + (((I)n * CM + oc${m}) * OD + od) * OH * OW + (I)oh * OW + ow] = acc${m}_${r};
% endfor
        }
    }
% endfor
}

// z [N, C, D, H, W] contiguous at z_off from u [N, C*M, OD, OH, OW] (read through its strides). Groups: gid =
// ((n*C + c)*D + d)*NTH*NTW + th*NTW + tw; the tile's rows h0 .. h0 + LY*RH - 1 and columns w0 .. w0 + LX - 1 read
// u rows from floor((h0 + ph - (KH-1)*dh) / sh) and columns from floor((w0 + pw - (KW-1)*dw) / sw) on: P holds
// PH x PW of them (zero outside u) for one (m, depth tap) at a time.
__kernel void dwt_bwd_input(__global const ${dt}* U, I u_off, I u_sn, I u_sc, I u_sd, I u_sh, I u_sw,
                            __global const ${dt}* Wt, I w_off, I w_so, I w_sd, I w_sh, I w_sw,
                            __global const ${dt}* B, I b_off, I b_st, int has_bias,
                            __global ${dt}* Z, I z_off, __local ${dt}* P,
                            int C, int M, int D, int H, int W, int OD, int OH, int OW, int KD, int KH, int KW,
                            int sd, int sh, int sw, int pd, int ph, int pw, int dd, int dh, int dw,
                            int LX, int LY, int NTH, int NTW, int PH, int PW)
{
    const int lid = get_local_id(0), NT = LX * LY;
    const int lx = lid % LX, ly = lid / LX;
    I grp = get_group_id(0);
    const int tw = (int)(grp % NTW); grp /= NTW;
    const int th = (int)(grp % NTH); grp /= NTH;
    const int d = (int)(grp % D); grp /= D;
    const int c = (int)(grp % C), n = (int)(grp / C);
    const int TH = LY * ${rh};
    const int h0 = th * TH, w0 = tw * LX;
    const int oh_lo = floordiv_i(h0 + ph - (KH - 1) * dh, sh), ow_lo = floordiv_i(w0 + pw - (KW - 1) * dw, sw);
    ${dt} bias = has_bias ? B[b_off + (I)c * b_st] : (${dt})0;
% for r in range(rh):
    ${VOL}${dt} acc${r} = bias;
% endfor
    const int w = w0 + lx;
    for (int m = 0; m < M; m++) {
        int oc = c * M + m;
        __global const ${dt}* ub = U + u_off + (I)n * u_sn + (I)oc * u_sc;
        __global const ${dt}* wb_ = Wt + w_off + (I)oc * w_so;
        for (int e = 0; e < KD; e++) {
            int td = d + pd - e * dd;
            int od = td / sd;
            if (td < 0 || od * sd != td || od >= OD) continue;          // the same for the whole group
            __global const ${dt}* ud = ub + (I)od * u_sd;
            barrier(CLK_LOCAL_MEM_FENCE);
            for (int k = lid; k < PH * PW; k += NT) {
                int pr = k / PW, pc = k - pr * PW;
                int oh = oh_lo + pr, ow = ow_lo + pc;
                P[k] = (oh >= 0 && oh < OH && ow >= 0 && ow < OW) ? ud[(I)oh * u_sh + (I)ow * u_sw] : (${dt})0;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
% for r in range(rh):
            {
                int h = h0 + ly + ${r} * LY;
                for (int i = 0; i < KH; i++) {
                    int th_ = h + ph - i * dh;
                    int oh = th_ / sh;
                    if (th_ < 0 || oh * sh != th_ || oh >= OH) continue;
                    __global const ${dt}* wr = wb_ + (I)e * w_sd + (I)i * w_sh;
                    __local const ${dt}* pr_ = P + (oh - oh_lo) * PW;
                    for (int j = 0; j < KW; j++) {
                        int tb = w + pw - j * dw;
                        int qo = floordiv_i(tb, sw);
                        if (qo * sw != tb) continue;
                        acc${r} += wr[(I)j * w_sw] * pr_[qo - ow_lo];
                    }
                }
            }
% endfor
        }
    }
% for r in range(rh):
    {
        int h = h0 + ly + ${r} * LY;
        if (h < H && w < W) Z[z_off + (((I)n * C + c) * D + d) * H * W + (I)h * W + w] = acc${r};
    }
% endfor
}

// Weight-gradient partials with the block staged: part[(oc*T + t)*NBLK + blk] exactly as dw_wgrad_part computes
// it. A group per (blk, oc): gid = oc*NBLK + blk, T*8 work-items: (t, l) = (lid / 8, lid % 8). U rows of the block
// go to Ul [RB][OW] (zero past the last row), the input rows of each (block row, e, i) to Xl [RB][KD*KH][W]
// (zero outside the image), S [T*8]: the lanes' sums.
__kernel void dwt_wgrad_part(__global const ${dt}* X, I x_off, I x_sn, I x_sc, I x_sd, I x_sh, I x_sw,
                             __global const ${dt}* U, I u_off, I u_sn, I u_sc, I u_sd, I u_sh, I u_sw,
                             __global ${dt}* Part, __local ${dt}* Ul, __local ${dt}* Xl, __local ${dt}* S,
                             int C, int M, int D, int H, int W, int OD, int OH, int OW, int KD, int KH, int KW,
                             int sd, int sh, int sw, int pd, int ph, int pw, int dd, int dh, int dw,
                             int T, int RB, int NR, int NBLK)
{
    const int lid = get_local_id(0), NT = get_local_size(0);
    const I grp = get_group_id(0);
    const int oc = (int)(grp / NBLK), blk = (int)(grp - (I)oc * NBLK);
    const int c = oc / M;
    const int KS = KD * KH * KW, NEI = KD * KH;
    const int r0 = blk * RB, nr = min(RB, NR - r0);
    const int OHD = OD * OH;
    // stage: u rows, then the input rows each (row, e, i) reads
    for (int k = lid; k < RB * OW; k += NT) {
        int rr = k / OW, ow = k - rr * OW;
        ${dt} v = (${dt})0;
        if (rr < nr) {
            int row = r0 + rr, n = row / OHD, q = row - n * OHD;
            int od = q / OH, oh = q - od * OH;
            v = U[u_off + (I)n * u_sn + (I)oc * u_sc + (I)od * u_sd + (I)oh * u_sh + (I)ow * u_sw];
        }
        Ul[k] = v;
    }
    for (int k = lid; k < RB * NEI * W; k += NT) {
        int rr = k / (NEI * W), rest = k - rr * (NEI * W);
        int ei = rest / W, iw = rest - ei * W;
        ${dt} v = (${dt})0;
        if (rr < nr) {
            int row = r0 + rr, n = row / OHD, q = row - n * OHD;
            int od = q / OH, oh = q - od * OH;
            int e = ei / KH, i = ei - e * KH;
            int id = od * sd - pd + e * dd, ih = oh * sh - ph + i * dh;
            if (id >= 0 && id < D && ih >= 0 && ih < H)
                v = X[x_off + (I)n * x_sn + (I)c * x_sc + (I)id * x_sd + (I)ih * x_sh + (I)iw * x_sw];
        }
        Xl[k] = v;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const int t = lid / 8, l = lid % 8;
    if (t < T) {
        int bias = t == KS;
        int tt = bias ? 0 : t;
        int e = tt / (KH * KW), rem = tt - e * (KH * KW);
        int i = rem / KW, j = rem - i * KW;
        int ei = e * KH + i;
        ${VOL}${dt} acc = (${dt})0;
        int n = r0 / OHD, q0 = r0 - n * OHD;
        int od = q0 / OH, oh = q0 - od * OH - 1;
        for (int rr = 0; rr < nr; rr++) {
            oh++;                                   // (n, od, oh) of this row, stepped instead of divided
            if (oh == OH) { oh = 0; od++; if (od == OD) { od = 0; n++; } }
            int id = od * sd - pd + e * dd, ih = oh * sh - ph + i * dh;
            if (!bias && (id < 0 || id >= D || ih < 0 || ih >= H)) continue;
            __local const ${dt}* ur = Ul + rr * OW;
            __local const ${dt}* xr = Xl + (rr * NEI + ei) * W;
            for (int ow0 = 0; ow0 < OW; ow0 += 8) {
                int ow = ow0 + l;
                int iw = ow * sw - pw + j * dw;
                ${dt} uv = ow < OW ? ur[ow] : (${dt})0;
                ${dt} xv = bias ? (${dt})1 : ((ow < OW && iw >= 0 && iw < W) ? xr[iw] : (${dt})0);
                acc += uv * xv;
            }
        }
        S[lid] = acc;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (t < T && l == 0) {
        __local const ${dt}* a = S + t * 8;
        Part[((I)oc * T + t) * NBLK + blk] = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    }
}
