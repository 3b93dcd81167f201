## Depthwise convolution kernels (cltorch/ops/conv/depthwise.py launches them).
##
## A depthwise convolution has groups == input channels C and one input channel per group; each input channel c
## feeds M output channels c*M + m (the channel multiplier; PyTorch's out_channels = M * in_channels). In the
## 3-d geometry of conv.cl.mako (1-d and 2-d convolutions have depth, and 1-d ones height, 1):
##     y[n, c*M+m, od, oh, ow] = b[c*M+m] + sum_{e, i, j} w[c*M+m, 0, e, i, j]
##                                * x[n, c, od*sd - pd + e*dd, oh*sh - ph + i*dh, ow*sw - pw + j*dw]
## (x read as zero outside the image). Its adjoint in x (conv_transpose, the gradient with respect to the input):
##     z[n, c, d, h, w] = b[c] + sum_{m, e, i, j} w[c*M+m, 0, e, i, j]
##                        * u[n, c*M+m, (d + pd - e*dd)/sd, (h + ph - i*dh)/sh, (w + pw - j*dw)/sw]
## over the (e, i, j) for which the divisions are exact and land inside u; its adjoint in w (the weight gradient):
##     v[c*M+m, 0, e, i, j] = sum_{n, od, oh, ow} u[n, c*M+m, od, oh, ow] * x[n, c, od*sd - pd + e*dd, ...]
## and the bias gradient is the same sum with x replaced by 1 (tap t = KD*KH*KW).
##
## With one input channel per output there is nothing to block over in channels (the implicit-GEMM kernels of
## conv.cl.mako would pad their K = taps x 1 and their output-channel vectors). The forward and input-gradient
## kernels block over positions instead: each work-item computes mr consecutive outputs of one row (a vector of
## mr lanes; mr = 8 on CPU devices, 1 on GPUs, where consecutive work-items then read consecutive elements). A
## tap whose mr inputs all lie inside the row is one vector load when the row is contiguous (and, forward, the
## stride 1), mr scalar loads otherwise; at the image's edges loads are made at clamped indices and padding enters
## as a select. The input gradient splits each row by stride phase (below), so its taps read consecutive elements
## of u at every stride.
## Every lane adds its taps in the same order whatever mr is, so mr never changes a result. x, w and u are read
## through their strides (any layout, channels_last included); outputs are written contiguous.
##
## The weight gradient is a reduction over N*OD*OH rows of OW positions, summed in a fixed order that depends only
## on the shapes (never on work-group sizes or profile values): dw_wgrad_part sums each block of RB consecutive rows
## (the host picks RB so a block holds about 256 terms) into part[(oc*T + t)*NBLK + blk], in 8 lanes (lane l takes
## the positions ow = l mod 8 of each row, rows in order; the lanes are then added as a fixed tree, which lets CPU
## devices compute the block as float8 / double8 arithmetic); dw_wgrad_sum adds a row of
## NBLK partials in chunks of 256 (each chunk sequential, the chunk sums sequential). Every device therefore adds
## the same terms in the same order; the preamble's FP_CONTRACT OFF keeps products unfused, and in deterministic
## mode the accumulators are volatile (Intel's CPU compiler otherwise vectorises, and so reassociates, such loops).
##
## Rows read with unit stride take a compiled path when the host passes the taps' offsets along W (fwo for dw_fwd:
## stride fws and offsets j*dw - pw; bwo for dw_bwd_input: per stride phase f the taps (j, (f + pw - j*dw)/sw) that
## reach it): the mr outputs of a
## row then need the input elements at fws*r + offset, which are loaded once per input row (fws vectors of mr
## elements, one vector load each inside the row, plus the few elements just outside them, zero in the padding)
## and every tap's vector is a fixed selection of their lanes. The taps add in the same order as the general
## path, so which path ran never changes a result.
##
## Template parameters: dt ("float" or "double"), idx ("int" or "long": the index type), mr (outputs per
## work-item of dw_fwd and dw_bwd_input: 1, 2, 4, 8 or 16), fwo / bwo (None, or the W offsets of the taps as a
## tuple) and fws (the forward stride along W the offsets are for); gwo / gws the same for dw_wgrad_rows.
<%namespace name="c" file="common.cl.mako"/>
${c.preamble((dt,))}
<%
    det = context.get("deterministic")
    VOL = "volatile " if det else ""
    R = mr
    VT = dt + (str(R) if R > 1 else "")
    V8 = dt + "8"
    lanes = "0123456789abcdef"
    def vec(items, n, T):
        return items[0] if n == 1 else "(%s)(%s)" % (T, ", ".join(items))
    def vload(n, ptr):
        return "(*(%s))" % ptr if n == 1 else "vload%d(0, %s)" % (n, ptr)
    def lane(v, r, n):
        return v if n == 1 else "%s.s%s" % (v, lanes[r])
%>
## acc += w[j] * (the mr elements ptr[x0 + SW*r + o], r < mr; zero outside [0, L)) for each tap (j, o) of taps in
## order: the elements are loaded once (SW vectors from x0 and the used ones outside them), the taps select lanes.
<%def name="row_taps(ptr, x0, L, taps, SW, wr, acc)">
<%
    NC = SW * R
    used = sorted({SW * r + o for j, o in taps for r in range(R)})
    edges = [E for E in used if E < 0 or E >= NC]
    def nm(E):
        if 0 <= E < NC:
            k, l = divmod(E, R)
            return "c%d" % k if R == 1 else "c%d.s%s" % (k, lanes[l])
        return ("em%d" % -E) if E < 0 else ("ep%d" % E)
%>
                {
                    ${VT} ${", ".join("c%d" % k for k in range(SW))};
                    if (${x0} + ${NC} <= ${L}) {
% for k in range(SW):
                        c${k} = ${vload(R, "%s + %s + %d" % (ptr, x0, k * R))};
% endfor
                    } else {
% for k in range(SW):
                        c${k} = ${vec(["(%s + %d < %s ? %s[min(%s + %d, %s - 1)] : (%s)0)" % (x0, k * R + r, L, ptr, x0, k * R + r, L, dt) for r in range(R)], R, VT)};
% endfor
                    }
% for E in edges:
                    ${dt} ${nm(E)} = (${x0} + (${E}) >= 0 && ${x0} + (${E}) < ${L}) ? ${ptr}[clamp(${x0} + (${E}), 0, ${L} - 1)] : (${dt})0;
% endfor
% for j, o in taps:
                    ${acc} += ${wr}[(I)${j} * w_sw] * ${vec([nm(SW * r + o) for r in range(R)], R, VT)};
% endfor
                }
</%def>
typedef ${idx} I;

// Forward: y [N, C*M, OD, OH, OW] contiguous at y_off. One launch dimension over N*C*M*Q work-items (rounded up;
// NB = N), gid = (n*C*M + oc)*Q + q, so a work-group spans channels and images of small maps; q = rb*NWB + wb:
// the work-item computes rows row = rb*RH .. rb*RH + RH - 1 (row = od*OH + oh, below OD*OH), outputs
// ow = wb*${R} + r (r < ${R}) of each (RH rows a work-item amortise its set-up). w element (oc, e, i, j) at
// w_off + oc*w_so + e*w_sd + i*w_sh + j*w_sw; input channel c = oc / M.
__kernel void dw_fwd(__global const ${dt}* X, I x_off, I x_sn, I x_sc, I x_sd, I x_sh, I x_sw,
                     __global const ${dt}* Wt, I w_off, I w_so, I w_sd, I w_sh, I w_sw,
                     __global const ${dt}* B, I b_off, I b_st, int has_bias,
                     __global ${dt}* Y, I y_off,
                     int C, int M, int D, int H, int W, int OD, int OH, int OW, int KD, int KH, int KW,
                     int sd, int sh, int sw, int pd, int ph, int pw, int dd, int dh, int dw, int NWB, int Q, int NB,
                     int RH)
{
    I gid = get_global_id(0);
    if (gid >= (I)Q * (C * M) * NB) return;
    I nc = gid / Q;
    int q = (int)(gid - nc * Q);
    int n = (int)(nc / (C * M)), oc = (int)(nc - (I)n * (C * M));
    int rb = q / NWB, wb = q - rb * NWB;
    int ow0 = wb * ${R}, c = oc / M;
    int CM = C * M;
    __global const ${dt}* xb = X + x_off + (I)n * x_sn + (I)c * x_sc;
    __global const ${dt}* wb_ = Wt + w_off + (I)oc * w_so;
    ${dt} bias = has_bias ? B[b_off + (I)oc * b_st] : (${dt})0;
    int unit = x_sw == 1 && sw == 1;
    int w0 = ow0 * sw - pw;
    int rend = min(rb * RH + RH, OD * OH);
    for (int row = rb * RH; row < rend; row++) {
    int od = row / OH, oh = row - od * OH;
    ${VOL}${VT} acc = (${VT})bias;
    int d0 = od * sd - pd, h0 = oh * sh - ph;
    for (int e = 0; e < KD; e++) {
        int id = d0 + e * dd;
        if (id < 0 || id >= D) continue;
        for (int i = 0; i < KH; i++) {
            int ih = h0 + i * dh;
            if (ih < 0 || ih >= H) continue;
            __global const ${dt}* xr = xb + (I)id * x_sd + (I)ih * x_sh;
            __global const ${dt}* wr = wb_ + (I)e * w_sd + (I)i * w_sh;
% if fwo is not None:
            ${row_taps("xr", "ow0 * %d" % fws, "W", list(enumerate(fwo)), fws, "wr", "acc")}
% else:
            for (int j = 0; j < KW; j++) {
                ${dt} wv = wr[(I)j * w_sw];
                int base = w0 + j * dw;
                ${VT} xv;
                if (base >= 0 && base + ${R - 1} * sw < W) {
                    if (unit) xv = ${vload(R, "xr + base")};
                    else xv = ${vec(["xr[(I)(base + %d * sw) * x_sw]" % r for r in range(R)], R, VT)};
                } else {
% for r in range(R):
                    int iw${r} = base + ${r} * sw;
                    ${dt} l${r} = xr[(I)clamp(iw${r}, 0, W - 1) * x_sw];
                    l${r} = (iw${r} >= 0 && iw${r} < W) ? l${r} : (${dt})0;
% endfor
                    xv = ${vec(["l%d" % r for r in range(R)], R, VT)};
                }
                acc += wv * xv;
            }
% endif
        }
    }
    __global ${dt}* yr = Y + y_off + ((I)n * CM + oc) * (OD * OH * OW) + (I)row * OW + ow0;
% if R == 1:
    yr[0] = acc;
% else:
    if (ow0 + ${R} <= OW) vstore${R}(acc, 0, yr);
    else {
% for r in range(R):
        if (ow0 + ${r} < OW) yr[${r}] = ${lane("acc", r, R)};
% endfor
    }
% endif
    }
}

// Adjoint in x: z [N, C, D, H, W] contiguous at z_off from u [N, C*M, OD, OH, OW] (read through its strides).
// Positions are split by phase (w + pw) mod sw: the work-item's ${R} outputs are w = f + sw*(wb*${R} + r) of one
// row and one phase f, so a tap j either reaches none of them or reads ${R} consecutive u elements
// ow = (f + pw - j*dw)/sw + wb*${R} + r. One launch dimension over N*C*Q work-items (rounded up; NB = N),
// gid = (n*C + c)*Q + q, q = (rb*sw + f)*NWB + wb: the work-item computes rows row = rb*RH .. rb*RH + RH - 1
// (row = d*H + h, below D*H). b (has_bias): one value per channel c.
__kernel void dw_bwd_input(__global const ${dt}* U, I u_off, I u_sn, I u_sc, I u_sd, I u_sh, I u_sw,
                           __global const ${dt}* Wt, I w_off, I w_so, I w_sd, I w_sh, I w_sw,
                           __global const ${dt}* B, I b_off, I b_st, int has_bias,
                           __global ${dt}* Z, I z_off,
                           int C, int M, int D, int H, int W, int OD, int OH, int OW, int KD, int KH, int KW,
                           int sd, int sh, int sw, int pd, int ph, int pw, int dd, int dh, int dw, int NWB, int Q, int NB,
                           int RH)
{
    I gid = get_global_id(0);
    if (gid >= (I)Q * C * NB) return;
    I nc = gid / Q;
    int q = (int)(gid - nc * Q);
    int n = (int)(nc / C), c = (int)(nc - (I)n * C);
    int rf = q / NWB, wb = q - rf * NWB;
    int rb = rf / sw, f = rf - rb * sw;
    int w0 = f + sw * wb * ${R};
    if (w0 >= W) return;
    ${dt} bias = has_bias ? B[b_off + (I)c * b_st] : (${dt})0;
    int unit = u_sw == 1;
    int rend = min(rb * RH + RH, D * H);
    for (int row = rb * RH; row < rend; row++) {
    int d = row / H, h = row - d * H;
    ${VOL}${VT} acc = (${VT})bias;
    for (int m = 0; m < M; m++) {
        int oc = c * M + m;
        __global const ${dt}* ub = U + u_off + (I)n * u_sn + (I)oc * u_sc;
        __global const ${dt}* wb_ = Wt + w_off + (I)oc * w_so;
        for (int e = 0; e < KD; e++) {
            int td = d + pd - e * dd;
            int od = td / sd;
            if (td < 0 || od * sd != td || od >= OD) continue;
            for (int i = 0; i < KH; i++) {
                int th = h + ph - i * dh;
                int oh = th / sh;
                if (th < 0 || oh * sh != th || oh >= OH) continue;
                __global const ${dt}* ur = ub + (I)od * u_sd + (I)oh * u_sh;
                __global const ${dt}* wr = wb_ + (I)e * w_sd + (I)i * w_sh;
% if bwo is not None:
% for f_, taps in enumerate(bwo):
                ${"if" if f_ == 0 else "else if"} (f == ${f_}) ${row_taps("ur", "wb * %d" % R, "OW", taps, 1, "wr", "acc")}
% endfor
% else:
                for (int j = 0; j < KW; j++) {
                    int tb = f + pw - j * dw;
                    int qo = floordiv_i(tb, sw);
                    if (qo * sw != tb) continue;            // this tap reaches no output of phase f
                    ${dt} wv = wr[(I)j * w_sw];
                    int o0 = qo + wb * ${R};
                    ${VT} uv;
                    if (o0 >= 0 && o0 + ${R - 1} < OW) {
                        if (unit) uv = ${vload(R, "ur + o0")};
                        else uv = ${vec(["ur[(I)(o0 + %d) * u_sw]" % r for r in range(R)], R, VT)};
                    } else {
% for r in range(R):
                        ${dt} l${r} = ur[(I)clamp(o0 + ${r}, 0, OW - 1) * u_sw];
                        l${r} = (o0 + ${r} >= 0 && o0 + ${r} < OW) ? l${r} : (${dt})0;
% endfor
                        uv = ${vec(["l%d" % r for r in range(R)], R, VT)};
                    }
                    acc += wv * uv;
                }
% endif
            }
        }
    }
    __global ${dt}* zr = Z + z_off + ((I)n * C + c) * (D * H * W) + (I)row * W + w0;
% if R == 1:
    zr[0] = acc;
% else:
    if (sw == 1 && w0 + ${R} <= W) vstore${R}(acc, 0, zr);
    else {
% for r in range(R):
        if (w0 + ${r} * sw < W) zr[(I)${r} * sw] = ${lane("acc", r, R)};
% endfor
    }
% endif
    }
}

// Weight-gradient partial sums: part[(oc*T + t)*NBLK + blk] = the sum over the rows (n, od, oh) of block blk
// (rows blk*RB .. min((blk+1)*RB, NR) - 1, NR = N*OD*OH) and over ow of u[n, oc, od, oh, ow] * x-tap t (t < KS =
// KD*KH*KW: x at tap t = (e*KH + i)*KW + j; t == KS: 1, the bias), added in 8 lanes (lane l: the ow = l mod 8 of
// every row, in order), then ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)). T = KS + has_bias.
// Range (T rounded up, C*M rounded up, NBLK).
__kernel void dw_wgrad_part(__global const ${dt}* X, I x_off, I x_sn, I x_sc, I x_sd, I x_sh, I x_sw,
                            __global const ${dt}* U, I u_off, I u_sn, I u_sc, I u_sd, I u_sh, I u_sw,
                            __global ${dt}* Part,
                            int C, int M, int D, int H, int W, int OD, int OH, int OW, int KD, int KH, int KW,
                            int sd, int sh, int sw, int pd, int ph, int pw, int dd, int dh, int dw,
                            int T, int RB, int NR, int NBLK)
{
    int t = get_global_id(0), oc = get_global_id(1), blk = get_global_id(2);
    int KS = KD * KH * KW;
    if (t >= T || oc >= C * M || blk >= NBLK) return;
    int c = oc / M;
    int bias = t == KS;
    int tt = bias ? 0 : t;
    int e = tt / (KH * KW), rr = tt - e * (KH * KW);
    int i = rr / KW, j = rr - i * KW;
    int r0 = blk * RB, r1 = min(r0 + RB, NR);
    int OHD = OD * OH;
    int uunit = u_sw == 1, xunit = x_sw == 1 && sw == 1;
    ${VOL}${V8} acc = (${V8})0;
    int n = r0 / OHD, q0 = r0 - n * OHD;
    int od = q0 / OH, oh = q0 - od * OH - 1;
    for (int row = r0; row < r1; row++) {
        oh++;                                   // (n, od, oh) of this row, stepped instead of divided
        if (oh == OH) { oh = 0; od++; if (od == OD) { od = 0; n++; } }
        int id = od * sd - pd + e * dd, ih = oh * sh - ph + i * dh;
        if (!bias && (id < 0 || id >= D || ih < 0 || ih >= H)) continue;
        __global const ${dt}* xr = X + x_off + (I)n * x_sn + (I)c * x_sc + (I)clamp(id, 0, D - 1) * x_sd
                                   + (I)clamp(ih, 0, H - 1) * x_sh;
        __global const ${dt}* ur = U + u_off + (I)n * u_sn + (I)oc * u_sc + (I)od * u_sd + (I)oh * u_sh;
        int base = j * dw - pw;
        for (int ow0 = 0; ow0 < OW; ow0 += 8) {
            int full = ow0 + 8 <= OW;
            ${V8} uv, xv;
            if (full && uunit) uv = vload8(0, ur + ow0);
            else {
% for r in range(8):
                ${dt} u${r} = ur[(I)min(ow0 + ${r}, OW - 1) * u_sw];
                u${r} = ow0 + ${r} < OW ? u${r} : (${dt})0;
% endfor
                uv = ${vec(["u%d" % r for r in range(8)], 8, V8)};
            }
            int xw0 = ow0 * sw + base;
            if (bias) xv = (${V8})1;
            else if (full && xw0 >= 0 && xw0 + 7 * sw < W) {
                if (xunit) xv = vload8(0, xr + xw0);
                else xv = ${vec(["xr[(I)(xw0 + %d * sw) * x_sw]" % r for r in range(8)], 8, V8)};
            } else {
% for r in range(8):
                int iw${r} = xw0 + ${r} * sw;
                ${dt} l${r} = xr[(I)clamp(iw${r}, 0, W - 1) * x_sw];
                l${r} = (ow0 + ${r} < OW && iw${r} >= 0 && iw${r} < W) ? l${r} : (${dt})0;
% endfor
                xv = ${vec(["l%d" % r for r in range(8)], 8, V8)};
            }
            acc += uv * xv;
        }
    }
    ${V8} a = acc;
    Part[((I)oc * T + t) * NBLK + blk] = ((a.s0 + a.s1) + (a.s2 + a.s3)) + ((a.s4 + a.s5) + (a.s6 + a.s7));
}

% if gwo is not None:
// Weight-gradient partial sums through the compiled row path (x and u rows read with unit stride; gwo: the taps'
// W offsets j*dw - pw at stride gws along W): work-item (ei, oc, blk) computes the ${len(gwo)} taps
// t = ei*KW + j of row tap ei = e*KH + i (ei == KD*KH: the bias, t = KS) over block blk, loading each chunk of
// u and the x elements its taps need once. Every tap adds the same terms in the same order as dw_wgrad_part (8
// lanes, rows in order, the same zeros in the padding and past OW), so the partials are bitwise the same.
// Range (KD*KH + has_bias rounded up, C*M rounded up, NBLK).
<%
    KWc = len(gwo)
    GS = gws
    GNC = 8 * GS
    gused = sorted({GS * l + o for o in gwo for l in range(8)})
    gedges = [E for E in gused if E < 0 or E >= GNC]
    def gnm(E):
        if 0 <= E < GNC:
            k, l = divmod(E, 8)
            return "c%d.s%s" % (k, lanes[l])
        return ("em%d" % -E) if E < 0 else ("ep%d" % E)
    def gld(E):
        return "(xw0 + (%d) >= 0 && xw0 + (%d) < W) ? xr[clamp(xw0 + (%d), 0, W - 1)] : (%s)0" % (E, E, E, dt)
%>
__kernel void dw_wgrad_rows(__global const ${dt}* X, I x_off, I x_sn, I x_sc, I x_sd, I x_sh, I x_sw,
                            __global const ${dt}* U, I u_off, I u_sn, I u_sc, I u_sd, I u_sh, I u_sw,
                            __global ${dt}* Part,
                            int C, int M, int D, int H, int W, int OD, int OH, int OW, int KD, int KH, int KW,
                            int sd, int sh, int sw, int pd, int ph, int pw, int dd, int dh, int dw,
                            int T, int RB, int NR, int NBLK)
{
    int ei = get_global_id(0), oc = get_global_id(1), blk = get_global_id(2);
    int KS = KD * KH * KW, NEI = KD * KH;
    if (ei > NEI || (ei == NEI && T == KS) || oc >= C * M || blk >= NBLK) return;
    int c = oc / M;
    int bias = ei == NEI;
    int e = bias ? 0 : ei / KH, i = bias ? 0 : ei - (ei / KH) * KH;
    int r0 = blk * RB, r1 = min(r0 + RB, NR);
    int OHD = OD * OH;
% for j in range(KWc):
    ${VOL}${V8} a${j} = (${V8})0;
% endfor
    int n = r0 / OHD, q0 = r0 - n * OHD;
    int od = q0 / OH, oh = q0 - od * OH - 1;
    for (int row = r0; row < r1; row++) {
        oh++;                                   // (n, od, oh) of this row, stepped instead of divided
        if (oh == OH) { oh = 0; od++; if (od == OD) { od = 0; n++; } }
        int id = od * sd - pd + e * dd, ih = oh * sh - ph + i * dh;
        if (!bias && (id < 0 || id >= D || ih < 0 || ih >= H)) continue;
        __global const ${dt}* xr = X + x_off + (I)n * x_sn + (I)c * x_sc + (I)clamp(id, 0, D - 1) * x_sd
                                   + (I)clamp(ih, 0, H - 1) * x_sh;
        __global const ${dt}* ur = U + u_off + (I)n * u_sn + (I)oc * u_sc + (I)od * u_sd + (I)oh * u_sh;
        for (int ow0 = 0; ow0 < OW; ow0 += 8) {
            int xw0 = ow0 * ${GS};
            if (ow0 + 8 <= OW) {
                ${V8} uv = vload8(0, ur + ow0);
                if (bias) { a0 += uv * (${V8})1; continue; }
                ${V8} ${", ".join("c%d" % k for k in range(GS))};
                if (xw0 + ${GNC} <= W) {
% for k in range(GS):
                    c${k} = vload8(0, xr + xw0 + ${8 * k});
% endfor
                } else {
% for k in range(GS):
                    c${k} = ${vec([gld(8 * k + l) for l in range(8)], 8, V8)};
% endfor
                }
% for E in gedges:
                ${dt} ${gnm(E)} = ${gld(E)};
% endfor
% for j, o in enumerate(gwo):
                a${j} += uv * ${vec([gnm(GS * l + o) for l in range(8)], 8, V8)};
% endfor
            } else {                            // the last, partial chunk: lanes past OW are zero in u and x
% for l in range(8):
                ${dt} u${l} = ur[min(ow0 + ${l}, OW - 1)];
                u${l} = ow0 + ${l} < OW ? u${l} : (${dt})0;
% endfor
                ${V8} uv = ${vec(["u%d" % l for l in range(8)], 8, V8)};
                if (bias) { a0 += uv * (${V8})1; continue; }
% for j, o in enumerate(gwo):
                a${j} += uv * ${vec(["(ow0 + %d < OW ? %s : (%s)0)" % (l, "(" + gld(GS * l + o) + ")", dt) for l in range(8)], 8, V8)};
% endfor
            }
        }
    }
    __global ${dt}* pp = Part + ((I)oc * T + (bias ? KS : ei * ${KWc})) * NBLK + blk;
% for j in range(KWc):
    {
        ${V8} a = a${j};
        pp[(I)${j} * NBLK] = ((a.s0 + a.s1) + (a.s2 + a.s3)) + ((a.s4 + a.s5) + (a.s6 + a.s7));
    }
%   if j == 0:
    if (bias) return;
%   endif
% endfor
}
% endif

// Weight (and bias) gradient from the partials: s = sum_blk part[(oc*T + t)*NBLK + blk] in chunks of 256 (each
// chunk in order, then the chunk sums in order); t < KS goes to V[v_off + oc*KS + t] (the weight gradient
// [C*M, 1, KD, KH, KW] contiguous), t == KS to Bg[b_off + oc*b_st]. Range: (T*C*M rounded up).
__kernel void dw_wgrad_sum(__global const ${dt}* Part, __global ${dt}* V, I v_off,
                           __global ${dt}* Bg, I b_off, I b_st, int T, int KS, int CM, int NBLK)
{
    int k = get_global_id(0);
    if (k >= T * CM) return;
    int oc = k / T, t = k - oc * T;
    __global const ${dt}* pp = Part + (I)k * NBLK;
    ${VOL}${dt} s = (${dt})0;
    for (int b0 = 0; b0 < NBLK; b0 += 256) {
        int b1 = min(b0 + 256, NBLK);
        ${VOL}${dt} a = (${dt})0;
        for (int b = b0; b < b1; b++) a += pp[b];
        s += a;
    }
    if (t < KS) V[v_off + (I)oc * KS + t] = s;
    else Bg[b_off + (I)oc * b_st] = s;
}
