## Convolution kernels of the CPU designs (cltorch/ops/conv/direct.py and im2col.py launch them).
##
## Geometry, shared by every kernel here. Every convolution is 3-d (1-d and 2-d ones have depth, and 1-d ones
## height, 1: one code path for all three). With G groups it maps x [N, G*CIg, D, H, W] to y [N, G*COg, OD, OH, OW]:
##     y[n, g*COg+o, od, oh, ow] = sum_{c, e, i, j} w[g*COg+o, c, e, i, j]
##                                 * x[n, g*CIg+c, od*sd - pd + e*dd, oh*sh - ph + i*dh, ow*sw - pw + j*dw]
## with x read as zero outside [0, D) x [0, H) x [0, W) (so pd/ph/pw are the front/top/left pads; the far pads
## only show in OD/OH/OW, which the host passes). The "transposed" direction is its adjoint (conv_transpose3d,
## and the gradient of a convolution with respect to its input):
##     z[n, g*CIg+c, d, h, w] = sum_{o, e, i, j} w[g*COg+o, c, e, i, j]
##                              * u[n, g*COg+o, (d + pd - e*dd)/sd, (h + ph - i*dh)/sh, (w + pw - j*dw)/sw]
## over the (e, i, j) for which the divisions are exact and land inside u.
##
## Two ways to compute them:
##   * conv_direct / conv_direct_t: "implicit GEMM", no im2col buffer. The GEMM view is
##         out[(n, p), co] = sum_k A[(n, p), k] * WT[k, co],
##     A being the im2col matrix (never stored) and WT the weights reordered by conv_prep_w into
##     [G][KD*KH*KW*CI + 1][Opad] (row k = ((e*KH + i)*KW + j)*CI + c; the extra last row holds the bias; columns padded
##     with zeros to Opad, a multiple of NR = nv*vw). Each work-item computes mr output positions x NR
##     output channels with nv vector accumulators per position, the register-blocking scheme of BLIS-like
##     CPU micro-kernels (Van Zee & van de Geijn, ACM TOMS 41(3), 2015) applied to convolution as in
##     "implicit GEMM" convolution (Chetlur et al., "cuDNN: Efficient Primitives for Deep Learning", 2014).
##     The loop runs over (e, i, j) outside and over channels inside, so bounds are tested once per tap and position:
##     an out-of-range tap reads a one-element zero buffer with stride 0 instead of branching in the inner loop.
##   * im2col / col2im for the explicit im2col + GEMM path (cltorch/ops/gemm/ does the product):
##     col[n, g, k, p] with k = ((c*KD + e)*KH + i)*KW + j (PyTorch's weight order), p = (od*OH + oh)*OW + ow, at
##     c_off + n*c_sn + g*c_sg + k*c_sk + p*c_sp (any layout the host wants); col2im sums a column matrix back
##     into the image (the adjoint of im2col), one work-item per image element (a gather, no atomics).
##
## Template parameters: dt ("float" or "double"), idx ("int" or "long": the index type), vw (vector width),
## nv (vectors per position), mr (positions per work-item).
<%namespace name="c" file="common.cl.mako"/>
${c.preamble((dt,))}
<%
    NR = nv * vw
    VT = dt + (str(vw) if vw > 1 else "")
    lanes = "0123456789abcdef"
    def lane(v, e):
        return v if vw == 1 else "%s.s%s" % (v, lanes[e])
%>
typedef ${idx} I;

// WT[g][k][o], k = ((e*KH + i)*KW + j)*CI + c for k < K = KD*KH*KW*CI, row K = bias; o < Opad (zero past
// CO). The weight element for group g, kernel-input channel c, kernel-output channel o, tap (e, i, j) is
// W[w_off + g*w_gs + c*w_ci + o*w_co + e*w_e + i*w_i + j*w_j]. One work-item per WT element: (o, k, g).
__kernel void conv_prep_w(__global const ${dt}* W, I w_off, I w_gs, I w_ci, I w_co, I w_e, I w_i, I w_j,
                          __global const ${dt}* B, I b_off, I b_st, int has_bias,
                          __global ${dt}* WT, int CI, int CO, int KD, int KH, int KW, int Opad)
{
    int o = get_global_id(0), k = get_global_id(1), g = get_global_id(2);
    int K = KD * KH * KW * CI;
    if (o >= Opad || k > K) return;
    ${dt} v = (${dt})0;
    if (o < CO) {
        if (k == K) {
            if (has_bias) v = B[b_off + (I)(g * CO + o) * b_st];
        } else {
            int t = k / CI, cc = k - t * CI;
            int e = t / (KH * KW), r = t - e * (KH * KW);
            int i = r / KW, j = r - i * KW;
            v = W[w_off + (I)g * w_gs + (I)cc * w_ci + (I)o * w_co + (I)e * w_e + (I)i * w_i + (I)j * w_j];
        }
    }
    WT[((I)g * (K + 1) + k) * Opad + o] = v;
}

% for tr in (0, 1):
<% name = "conv_direct_t" if tr else "conv_direct" %>
// ${"transposed (adjoint) direction" if tr else "forward direction"}: out [N, G*CO, OD, OH, OW] contiguous at
// y_off; in read through its strides; (D, H, W) is in's spatial size. Work-item: (position block of ${mr} of NB,
// channel block of ${NR} of NCB, n*G + g of NGt).
__kernel void ${name}(__global const ${dt}* X, I x_off, I x_sn, I x_sc, I x_sd, I x_sh, I x_sw,
                          __global const ${dt}* WT, __global ${dt}* Y, I y_off, __global const ${dt}* Z,
                          int G, int CI, int CO, int D, int H, int W, int OD, int OH, int OW, int KD, int KH, int KW,
                          int sd, int sh, int sw, int pd, int ph, int pw, int dd, int dh, int dw,
                          int Opad, int NB, int NCB, int NGt)
{
    // 3-d range (position block, channel block, n*G + g), rounded up by the host: no integer division
    int pb = get_global_id(0), cb = get_global_id(1), ng = get_global_id(2);
    if (pb >= NB || cb >= NCB || ng >= NGt) return;
    int PHW = OH * OW, P = OD * PHW;
    int p0 = pb * ${mr};
    int n = ng / G, g = ng - n * G;
    int K = KD * KH * KW * CI;
    __global const ${dt}* xb = X + x_off + (I)n * x_sn + (I)(g * CI) * x_sc;
    __global const ${VT}* wp = (__global const ${VT}*)(WT + (I)g * (K + 1) * Opad + cb * ${NR});
    int wrow = Opad / ${vw};
% for r in range(mr):
    int q${r} = min(p0 + ${r}, P - 1);
    int od${r} = q${r} / PHW, qq${r} = q${r} - od${r} * PHW;
    int oh${r} = qq${r} / OW, ow${r} = qq${r} - oh${r} * OW;
% if tr:
    int bd${r} = od${r} + pd, bh${r} = oh${r} + ph, bw${r} = ow${r} + pw;
% else:
    int bd${r} = od${r} * sd - pd, bh${r} = oh${r} * sh - ph, bw${r} = ow${r} * sw - pw;
% endif
% for v in range(nv):
    ${VT} acc${r}_${v} = wp[(I)K * wrow + ${v}];
% endfor
% endfor
    for (int e = 0; e < KD; e++) {
% for r in range(mr):
% if tr:
      int td${r} = bd${r} - e * dd, id${r} = td${r} / sd;
      int okd${r} = td${r} >= 0 && id${r} * sd == td${r} && id${r} < D;
% else:
      int id${r} = bd${r} + e * dd;
      int okd${r} = id${r} >= 0 && id${r} < D;
% endif
% endfor
      for (int i = 0; i < KH; i++) {
        for (int j = 0; j < KW; j++) {
% for r in range(mr):
% if tr:
            int th${r} = bh${r} - i * dh, tw${r} = bw${r} - j * dw;
            int ih${r} = th${r} / sh, iw${r} = tw${r} / sw;
            int ok${r} = okd${r} && th${r} >= 0 && tw${r} >= 0 && ih${r} * sh == th${r} && iw${r} * sw == tw${r} &&
                         ih${r} < H && iw${r} < W;
% else:
            int ih${r} = bh${r} + i * dh, iw${r} = bw${r} + j * dw;
            int ok${r} = okd${r} && ih${r} >= 0 && ih${r} < H && iw${r} >= 0 && iw${r} < W;
% endif
            __global const ${dt}* xp${r} = ok${r} ? xb + (I)id${r} * x_sd + (I)ih${r} * x_sh + (I)iw${r} * x_sw : Z;
            I xs${r} = ok${r} ? x_sc : 0;
% endfor
            __global const ${VT}* wq = wp + (I)(((e * KH + i) * KW + j) * CI) * wrow;
            for (int cc = 0; cc < CI; cc++) {
% for v in range(nv):
                ${VT} b${v} = wq[${v}];
% endfor
% for r in range(mr):
                { ${dt} a = *xp${r};
% for v in range(nv):
                  acc${r}_${v} += a * b${v};
% endfor
                  xp${r} += xs${r}; }
% endfor
                wq += wrow;
            }
        }
      }
    }
    __global ${dt}* yb = Y + y_off + (I)(n * G + g) * CO * P;
    int o0 = cb * ${NR};
% for r in range(mr):
    if (p0 + ${r} < P) {
% for v in range(nv):
% for e in range(vw):
        if (o0 + ${v * vw + e} < CO) yb[(I)(o0 + ${v * vw + e}) * P + p0 + ${r}] = ${lane("acc%d_%d" % (r, v), e)};
% endfor
% endfor
    }
% endfor
}
% endfor

// col[n, g, k, p] = x[n, g*CI + c, od*sd - pd + e*dd, oh*sh - ph + i*dh, ow*sw - pw + j*dw] (zero outside),
// k = ((c*KD + e)*KH + i)*KW + j, p = (od*OH + oh)*OW + ow, stored at c_off + n*c_sn + g*c_sg + k*c_sk + p*c_sp.
// Rows k in [K, Kp) (K = CI*KD*KH*KW) are filled too: row K
// with ones_row (a row of ones makes conv_wgrad produce the bias gradient), the rest with zeros.
// One work-item per (n, g, p) writes its Kp values (few, large work-groups); n counts from the chunk start
// (x_off and c_off point at the chunk). Flat range over NG*P, NG = chunk size * G.
__kernel void im2col(__global const ${dt}* X, I x_off, I x_sn, I x_sc, I x_sd, I x_sh, I x_sw,
                     __global ${dt}* Col, I c_off, I c_sn, I c_sg, I c_sk, I c_sp,
                     int G, int CI, int D, int H, int W, int OD, int OH, int OW, int KD, int KH, int KW,
                     int sd, int sh, int sw, int pd, int ph, int pw, int dd, int dh, int dw,
                     int Kp, int ones_row, int NG)
{
    int PHW = OH * OW, P = OD * PHW;
    I gid = get_global_id(0);
    int ng = (int)(gid / P), p = (int)(gid - (I)ng * P);
    if (ng >= NG) return;
    int n = ng / G, g = ng - n * G;
    int od = p / PHW, q = p - od * PHW;
    int oh = q / OW, ow = q - oh * OW;
    int d0 = od * sd - pd, h0 = oh * sh - ph, w0 = ow * sw - pw;
    __global const ${dt}* xb = X + x_off + (I)n * x_sn + (I)(g * CI) * x_sc;
    __global ${dt}* out = Col + c_off + (I)n * c_sn + (I)g * c_sg + (I)p * c_sp;
    I k = 0;
    for (int cc = 0; cc < CI; cc++) {
      for (int e = 0; e < KD; e++) {
        int id = d0 + e * dd;
        int dok = id >= 0 && id < D;
        for (int i = 0; i < KH; i++) {
            int ih = h0 + i * dh;
            int hok = dok && ih >= 0 && ih < H;
            for (int j = 0; j < KW; j++) {
                int iw = w0 + j * dw;
                out[k * c_sk] = (hok && iw >= 0 && iw < W) ? xb[(I)id * x_sd + (I)ih * x_sh + (I)iw * x_sw] : (${dt})0;
                k++;
            }
        }
      }
      xb += x_sc;
    }
    int K = CI * KD * KH * KW;
    for (int kk = K; kk < Kp; kk++, k++) out[k * c_sk] = (kk == K && ones_row) ? (${dt})1 : (${dt})0;
}

// Weight (and bias) gradient: V[g*CO + o][k] = sum_{n, p} U[n, g*CO + o, p] * Col[g][n*P + p][k] for k < Kw,
// where Col (from im2col, k fastest, row length Kp, a multiple of ${NR}) may carry a row of ones at k = K
// (then column K of the product is the bias gradient, stored to Bg[g*CO + o]). U is read through its
// batch and channel strides with contiguous spatial positions. acc: add to V (and Bg) instead of storing
// (for batch chunks). Work-item: (k block of ${NR}, o block of ${mr}, g); the reduction runs over n and p.
__kernel void conv_wgrad(__global const ${dt}* U, I u_off, I u_sn, I u_sc,
                         __global const ${dt}* Col, I c_gs, __global ${dt}* V, I v_off,
                         __global ${dt}* Bg, I b_off, I b_st, int has_bias,
                         int Nc, int P, int CO, int K, int Kp, int acc_out)
{
    int kb = get_global_id(0), ob = get_global_id(1), g = get_global_id(2);
    int k0 = kb * ${NR}, o0 = ob * ${mr};
    if (k0 >= Kp || o0 >= CO) return;
    __global const ${VT}* cp = (__global const ${VT}*)(Col + (I)g * c_gs + k0);
    int crow = Kp / ${vw};
% for r in range(mr):
    __global const ${dt}* u${r} = U + u_off + (I)(g * CO + min(o0 + ${r}, CO - 1)) * u_sc;
% for v in range(nv):
    ${VT} acc${r}_${v} = (${VT})0;
% endfor
% endfor
    for (int n = 0; n < Nc; n++) {
        I un = (I)n * u_sn;
        for (int p = 0; p < P; p++) {
% for v in range(nv):
            ${VT} b${v} = cp[${v}];
% endfor
% for r in range(mr):
            { ${dt} a = u${r}[un + p];
% for v in range(nv):
              acc${r}_${v} += a * b${v};
% endfor
            }
% endfor
            cp += crow;
        }
    }
% for r in range(mr):
    if (o0 + ${r} < CO) {
        __global ${dt}* vr = V + v_off + (I)(g * CO + o0 + ${r}) * K;
% for v in range(nv):
% for e in range(vw):
        { int k = k0 + ${v * vw + e};
          ${dt} t = ${lane("acc%d_%d" % (r, v), e)};
          if (k < K) { if (acc_out) vr[k] += t; else vr[k] = t; }
          else if (k == K && has_bias) { __global ${dt}* bp = Bg + b_off + (I)(g * CO + o0 + ${r}) * b_st;
                                         if (acc_out) *bp += t; else *bp = t; } }
% endfor
% endfor
    }
% endfor
}

// The adjoint of im2col: x[n, g*CI + c, d, h, w] = sum over the taps (e, i, j) and positions p that read it of
// col[n, g, k, p]. x is written contiguous [N, G*CI, D, H, W] at x_off. Work-item: ((d*H + h)*W + w, g*CI + c, n).
__kernel void col2im(__global const ${dt}* Col, I c_off, I c_sn, I c_sg, I c_sk, I c_sp,
                     __global ${dt}* X, I x_off,
                     int G, int CI, int D, int H, int W, int OD, int OH, int OW, int KD, int KH, int KW,
                     int sd, int sh, int sw, int pd, int ph, int pw, int dd, int dh, int dw)
{
    int dhw = get_global_id(0), ch = get_global_id(1), n = get_global_id(2);
    int HW = H * W;
    if (dhw >= D * HW) return;
    int d = dhw / HW, hw = dhw - d * HW;
    int h = hw / W, w = hw - h * W;
    int g = ch / CI, cc = ch - g * CI;
    __global const ${dt}* cb = Col + c_off + (I)n * c_sn + (I)g * c_sg + (I)(cc * KD * KH * KW) * c_sk;
    ${dt} acc = (${dt})0;
    for (int e = 0; e < KD; e++) {
      int td = d + pd - e * dd;
      if (td < 0) break;
      int od = td / sd;
      if (od * sd != td || od >= OD) continue;
      for (int i = 0; i < KH; i++) {
        int th = h + ph - i * dh;
        if (th < 0) break;
        int oh = th / sh;
        if (oh * sh != th || oh >= OH) continue;
        for (int j = 0; j < KW; j++) {
            int tw = w + pw - j * dw;
            if (tw < 0) break;
            int ow = tw / sw;
            if (ow * sw != tw || ow >= OW) continue;
            acc += cb[(I)((e * KH + i) * KW + j) * c_sk + (I)((od * OH + oh) * OW + ow) * c_sp];
        }
      }
    }
    X[x_off + ((I)n * G * CI + ch) * D * HW + dhw] = acc;
}
