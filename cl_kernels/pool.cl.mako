## Pooling, padding and resampling kernels (cltorch/ops/pool.py and cltorch/ops/padding.py launch them).
##
## Pooling works on planes: x [N, C, H, W] read through its strides (plane n*C + c), outputs written
## contiguous [N, C, OH, OW]. One work-item per output element (work-item (ow, oh, plane)); every
## backward is a gather (one work-item per input element, summing the outputs that read it), so no atomics
## are needed and results are deterministic.
##
## Windows: regular windows start at oh*sh - ph and take KH taps dilation dh apart (PyTorch's max_pool2d /
## avg_pool2d); adaptive windows (adaptive_*_pool2d) are [floor(oh*H/OH), ceil((oh+1)*H/OH)).
## Max pooling follows PyTorch's CPU kernel: the running maximum starts at -inf with the index of the first
## in-range tap, and a tap replaces it when it is larger or NaN (so NaN propagates, the last NaN wins).
## Indices are plane-local, h*W + w (what PyTorch returns with return_indices=True).
##
## Template parameters: dt ("float" or "double"), idx ("int" or "long"); tkh, tkw: 0 for the general program,
## else the window of the tiling max-pooling program (maxpool_tile, maxpool_tile_bwd) and nothing else.
<%namespace name="c" file="common.cl.mako"/>
${c.preamble((dt,))}
typedef ${idx} I;
#define NEG_INF (-INFINITY)
## Every kernel runs on a 3-d range (x, y, plane) whose global sizes the host rounds up to its work-group
## shape: coordinates come from the ids, with no integer division (which PoCL cannot vectorize; measured
## 45% slower on a flat range). NPL is the plane count. A range with more work-groups in dimension 1 or 2 than
## the device allows (NVIDIA: 65,535) runs as several launches (backend/geometry.py ``pieces``), each given the
## origin (Y0, Z0) of its part (grid-stride loops instead measured 2-4x slower on PoCL for padding and
## resampling: its work-item loops no longer vectorize).
<%def name="grid3(x, y, z, X, Y)">
    int ${x} = get_global_id(0), ${y} = get_global_id(1) + Y0, ${z} = get_global_id(2) + Z0;
    if (${x} >= ${X} || ${y} >= ${Y} || ${z} >= NPL) return;</%def>

% if tkh:
// ------------------------------------------------------------------------------------------- tiling windows
// The common case, a program of its own per window size: windows of ${tkh} x ${tkw} with stride equal to the
// window, no padding, no dilation, every window inside the input (OH*${tkh} <= H, OW*${tkw} <= W). Taps are
// unrolled and unchecked. Same results as maxpool_fwd (the first tap starts the running maximum, which is
// what -inf plus "larger or NaN" gives).
__kernel void maxpool_tile(__global const ${dt}* X, I x_off, I x_sn, I x_sc, I x_sh, I x_sw,
                           __global ${dt}* Y, __global long* Ix, int with_idx, int C, int H, int W, int OH, int OW,
                           int NPL, int Y0, int Z0)
{
${grid3("ow", "oh", "pl", "OW", "OH")}
    int p = oh * OW + ow;
    int n = pl / C, cc = pl - n * C;
    int h0 = oh * ${tkh}, w0 = ow * ${tkw};
    __global const ${dt}* xb = X + x_off + (I)n * x_sn + (I)cc * x_sc + (I)h0 * x_sh + (I)w0 * x_sw;
    ${dt} best = xb[0];
    int bi = 0;
% for i in range(tkh):
% for j in range(tkw):
% if i or j:
    { ${dt} v = xb[${i} * x_sh + ${j} * x_sw]; if (v > best || v != v) { best = v; bi = ${i * 1000 + j}; } }
% endif
% endfor
% endfor
    Y[(I)pl * OH * OW + p] = best;
    if (with_idx) Ix[(I)pl * OH * OW + p] = (long)(h0 + bi / 1000) * W + w0 + bi % 1000;
}

// Its gradient: every window writes its KH x KW block of grad_x (g at the index, zero elsewhere). Input
// elements that no window covers (the last rows/columns when H % ${tkh} or W % ${tkw} != 0) are zeroed by the
// host first. grad_x is contiguous [planes, H, W]; g and the indices contiguous [planes, OH, OW].
__kernel void maxpool_tile_bwd(__global const ${dt}* G, I g_off, __global const long* Ix, I i_off,
                               __global ${dt}* X, int H, int W, int OH, int OW, int NPL, int Y0, int Z0)
{
${grid3("ow", "oh", "pl", "OW", "OH")}
    int p = oh * OW + ow;
    I o = (I)pl * OH * OW + p;
    ${dt} gv = G[g_off + o];
    long k = Ix[i_off + o];
    int h0 = oh * ${tkh}, w0 = ow * ${tkw};
    __global ${dt}* xb = X + (I)pl * H * W;
% for i in range(tkh):
% for j in range(tkw):
    { long q = (long)(h0 + ${i}) * W + w0 + ${j}; xb[q] = (q == k) ? gv : (${dt})0; }
% endfor
% endfor
}
% else:
inline int ad_start(int o, int isz, int osz) { return (int)(((long)o * isz) / osz); }
inline int ad_end(int o, int isz, int osz) { return (int)(((long)(o + 1) * isz + osz - 1) / osz); }

// ------------------------------------------------------------------------------------------- max pooling
% for ad in (0, 1):
<% sfx = "_adaptive" if ad else "" %>
__kernel void maxpool_fwd${sfx}(__global const ${dt}* X, I x_off, I x_sn, I x_sc, I x_sh, I x_sw,
                             __global ${dt}* Y, __global long* Ix, int with_idx,
                             int C, int H, int W, int OH, int OW,
                             int KH, int KW, int sh, int sw, int ph, int pw, int dh, int dw, int NPL, int Y0, int Z0)
{
${grid3("ow", "oh", "pl", "OW", "OH")}
    int p = oh * OW + ow;
    int n = pl / C, cc = pl - n * C;
    __global const ${dt}* xb = X + x_off + (I)n * x_sn + (I)cc * x_sc;
% if ad:
    int h0 = ad_start(oh, H, OH), h1 = ad_end(oh, H, OH), hstep = 1;
    int w0 = ad_start(ow, W, OW), w1 = ad_end(ow, W, OW), wstep = 1;
% else:
    int h0 = oh * sh - ph, w0 = ow * sw - pw;
    int h1 = min(h0 + (KH - 1) * dh + 1, H), w1 = min(w0 + (KW - 1) * dw + 1, W);
    int hstep = dh, wstep = dw;
    while (h0 < 0) h0 += dh;
    while (w0 < 0) w0 += dw;
% endif
    ${dt} best = NEG_INF;
    long bi = (long)h0 * W + w0;
    for (int h = h0; h < h1; h += hstep) {
        for (int w = w0; w < w1; w += wstep) {
            ${dt} v = xb[(I)h * x_sh + (I)w * x_sw];
            if (v > best || v != v) { best = v; bi = (long)h * W + w; }
        }
    }
    Y[(I)pl * OH * OW + p] = best;
    if (with_idx) Ix[(I)pl * OH * OW + p] = bi;
}

// grad_x[pl, h, w] = sum of g[pl, o] over the outputs o whose window holds (h, w) and whose index is h*W + w.
// g and the indices are read contiguous [planes, OH, OW]; grad_x is written contiguous [planes, H, W].
__kernel void maxpool_scatter${sfx}(__global const ${dt}* G, I g_off, __global const long* Ix, I i_off,
                                 __global ${dt}* X, int H, int W, int OH, int OW,
                                 int KH, int KW, int sh, int sw, int ph, int pw, int dh, int dw, int NPL, int Y0, int Z0)
{
${grid3("w", "h", "pl", "W", "H")}
    int q = h * W + w;
    __global const ${dt}* gb = G + g_off + (I)pl * OH * OW;
    __global const long* ib = Ix + i_off + (I)pl * OH * OW;
    ${dt} acc = (${dt})0;
% if ad:
    int oh1 = min(OH, (int)(((long)(h + 1) * OH + H - 1) / H)), ow1 = min(OW, (int)(((long)(w + 1) * OW + W - 1) / W));
    for (int oh = (int)(((long)h * OH) / H); oh < oh1; oh++) {
        if (h < ad_start(oh, H, OH) || h >= ad_end(oh, H, OH)) continue;
        for (int ow = (int)(((long)w * OW) / W); ow < ow1; ow++) {
            if (w < ad_start(ow, W, OW) || w >= ad_end(ow, W, OW)) continue;
            I o = (I)oh * OW + ow;
            if (ib[o] == (long)q) acc += gb[o];
        }
    }
% else:
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
            I o = (I)oh * OW + ow;
            if (ib[o] == (long)q) acc += gb[o];
        }
    }
% endif
    X[(I)pl * H * W + q] = acc;
}
% endfor

// y[pl, o] = x[pl, idx[pl, o]]: the adjoint of maxpool_scatter (double backward of max pooling).
// x is read contiguous [planes, H*W]; y and idx are contiguous [planes, OHW].
__kernel void maxpool_gather(__global const ${dt}* X, I x_off, __global const long* Ix, I i_off,
                             __global ${dt}* Y, int HW, int OHW, int NPL, int Y0, int Z0)
{
${grid3("p", "_y", "pl", "OHW", "1")}
    long k = Ix[i_off + (I)pl * OHW + p];
    Y[(I)pl * OHW + p] = X[x_off + (I)pl * HW + (I)k];
}

// ------------------------------------------------------------------------------------------- average pooling
// Regular windows follow PyTorch's CPU avg_pool2d: the window [h0, h0 + KH) is cut at H + ph (that size is
// the divisor with count_include_pad), then at [0, H) (the divisor without); divisor_override (non-zero) wins.
// A window with no element gives 0.
inline int avg_window(int o, int s, int p, int k, int L, int* a, int* b)
{
    int s0 = o * s - p;
    int s1 = min(s0 + k, L + p);
    int size = s1 - s0;
    *a = max(s0, 0);
    *b = min(s1, L);
    return size;
}

% for ad in (0, 1):
<% sfx = "_adaptive" if ad else "" %>
__kernel void avgpool_fwd${sfx}(__global const ${dt}* X, I x_off, I x_sn, I x_sc, I x_sh, I x_sw,
                             __global ${dt}* Y, int C, int H, int W, int OH, int OW,
                             int KH, int KW, int sh, int sw, int ph, int pw, int include_pad, int divisor, int NPL, int Y0, int Z0)
{
${grid3("ow", "oh", "pl", "OW", "OH")}
    int p = oh * OW + ow;
    int n = pl / C, cc = pl - n * C;
    __global const ${dt}* xb = X + x_off + (I)n * x_sn + (I)cc * x_sc;
% if ad:
    int h0 = ad_start(oh, H, OH), h1 = ad_end(oh, H, OH);
    int w0 = ad_start(ow, W, OW), w1 = ad_end(ow, W, OW);
    ${dt} div = (${dt})((h1 - h0) * (w1 - w0));
% else:
    int h0, h1, w0, w1;
    int sz = avg_window(oh, sh, ph, KH, H, &h0, &h1) * avg_window(ow, sw, pw, KW, W, &w0, &w1);
    if (h0 >= h1 || w0 >= w1) { Y[(I)pl * OH * OW + p] = (${dt})0; return; }
    ${dt} div = (${dt})(divisor != 0 ? divisor : (include_pad ? sz : (h1 - h0) * (w1 - w0)));
% endif
    ${dt} acc = (${dt})0;
    for (int h = h0; h < h1; h++)
        for (int w = w0; w < w1; w++)
            acc += xb[(I)h * x_sh + (I)w * x_sw];
    Y[(I)pl * OH * OW + p] = acc / div;
}

// The adjoint of avgpool_fwd: grad_x[pl, h, w] = sum over the windows o holding (h, w) of g[pl, o] / div(o).
// g read contiguous [planes, OH, OW] at g_off; grad_x written contiguous [planes, H, W].
__kernel void avgpool_bwd${sfx}(__global const ${dt}* G, I g_off, __global ${dt}* X,
                             int H, int W, int OH, int OW,
                             int KH, int KW, int sh, int sw, int ph, int pw, int include_pad, int divisor, int NPL, int Y0, int Z0)
{
${grid3("w", "h", "pl", "W", "H")}
    int q = h * W + w;
    __global const ${dt}* gb = G + g_off + (I)pl * OH * OW;
    ${dt} acc = (${dt})0;
% if ad:
    int oh1 = min(OH, (int)(((long)(h + 1) * OH + H - 1) / H)), ow1 = min(OW, (int)(((long)(w + 1) * OW + W - 1) / W));
    for (int oh = (int)(((long)h * OH) / H); oh < oh1; oh++) {
        int h0 = ad_start(oh, H, OH), h1 = ad_end(oh, H, OH);
        if (h < h0 || h >= h1) continue;
        for (int ow = (int)(((long)w * OW) / W); ow < ow1; ow++) {
            int w0 = ad_start(ow, W, OW), w1 = ad_end(ow, W, OW);
            if (w < w0 || w >= w1) continue;
            acc += gb[(I)oh * OW + ow] / (${dt})((h1 - h0) * (w1 - w0));
        }
    }
% else:
    for (int i = 0; i < KH; i++) {
        int th = h + ph - i;
        if (th < 0) break;
        int oh = th / sh;
        if (oh * sh != th || oh >= OH) continue;
        int h0, h1;
        int szh = avg_window(oh, sh, ph, KH, H, &h0, &h1);
        for (int j = 0; j < KW; j++) {
            int tw = w + pw - j;
            if (tw < 0) break;
            int ow = tw / sw;
            if (ow * sw != tw || ow >= OW) continue;
            int w0, w1;
            int sz = szh * avg_window(ow, sw, pw, KW, W, &w0, &w1);
            ${dt} div = (${dt})(divisor != 0 ? divisor : (include_pad ? sz : (h1 - h0) * (w1 - w0)));
            acc += gb[(I)oh * OW + ow] / div;
        }
    }
% endif
    X[(I)pl * H * W + q] = acc;
}
% endfor

// ------------------------------------------------------------------------------------------- padding
// One padded dim of a contiguous [outer, L, inner] tensor: out [outer, L + a + b, inner].
// mode 0 reflect (edge not repeated), 1 replicate, 2 circular. |a|, |b| are small enough that one
// reflection/wrap suffices (the host checks PyTorch's limits); negative pads crop.
inline int pad_src(int i, int L, int mode)
{
    if (mode == 0) { if (i < 0) i = -i; if (i >= L) i = 2 * (L - 1) - i; return i; }
    if (mode == 1) return clamp(i, 0, L - 1);
    if (i < 0) return i + L;
    if (i >= L) return i - L;
    return i;
}

__kernel void pad1d_fwd(__global const ${dt}* X, I x_off, __global ${dt}* Y,
                        int L, int inner, int a, int b, int mode, int NPL, int Y0, int Z0)
{
    int Lo = L + a + b;
${grid3("r", "o", "ou", "inner", "Lo")}
    int e = o * inner + r;
    int i = pad_src(o - a, L, mode);
    Y[(I)ou * Lo * inner + e] = X[x_off + ((I)ou * L + i) * inner + r];
}

// The adjoint: grad_x[ou, i, r] = sum of g[ou, o, r] over the o with pad_src(o - a) == i.
__kernel void pad1d_bwd(__global const ${dt}* G, I g_off, __global ${dt}* X,
                        int L, int inner, int a, int b, int mode, int NPL, int Y0, int Z0)
{
${grid3("r", "i", "ou", "inner", "L")}
    int e = i * inner + r;
    int Lo = L + a + b;
    __global const ${dt}* gb = G + g_off + (I)ou * Lo * inner + r;
    ${dt} acc = (${dt})0;
    int o = i + a;
    if (o >= 0 && o < Lo) acc += gb[(I)o * inner];
    if (mode == 0) {
        o = a - i;                         // left mirror
        if (i > 0 && o >= 0 && o < Lo) acc += gb[(I)o * inner];
        o = a + 2 * (L - 1) - i;           // right mirror
        if (i < L - 1 && o >= 0 && o < Lo) acc += gb[(I)o * inner];
    } else if (mode == 1) {
        if (i == 0) for (o = 0; o < min(a, Lo); o++) acc += gb[(I)o * inner];
        if (i == L - 1) for (o = max(a + L, 0); o < Lo; o++) acc += gb[(I)o * inner];
    } else {
        o = i + a - L;
        if (o >= 0 && o < Lo) acc += gb[(I)o * inner];
        o = i + a + L;
        if (o >= 0 && o < Lo) acc += gb[(I)o * inner];
    }
    X[(I)ou * L * inner + e] = acc;
}

// ------------------------------------------------------------------------------------------- resampling
// One resampled dim of [outer, L, inner] (x read through strides, out contiguous [outer, Lo, inner]).
// mode 0 nearest: src = min(floor(o * scale), L - 1) in float (PyTorch's nearest_idx);
// mode 1 nearest-exact: src = min(floor((o + 0.5) * scale), L - 1);
// mode 2 linear: src = o * scale (align_corners) or max(scale * (o + 0.5) - 0.5, 0) (otherwise; PyTorch's
// area_pixel_compute_source_index), i0 = (int)src, i1 = i0 + (i0 < L - 1), w1 = src - i0, w0 = 1 - w1.
inline int near_src(int o, int L, float scale, int exact)
{
    float s = exact ? ((float)o + 0.5f) * scale : (float)o * scale;
    return min((int)floor(s), L - 1);
}

inline ${dt} lin_src(int o, ${dt} scale, int align)
{
    if (align) return scale * (${dt})o;
    ${dt} s = scale * ((${dt})o + (${dt})0.5) - (${dt})0.5;
    return s < (${dt})0 ? (${dt})0 : s;
}

__kernel void resample_fwd(__global const ${dt}* X, I x_off, I x_so, I x_sl, I x_si,
                           __global ${dt}* Y, int L, int Lo, int inner, int mode, int align,
                           float fscale, ${dt} scale, int NPL, int Y0, int Z0)
{
${grid3("r", "o", "ou", "inner", "Lo")}
    int e = o * inner + r;
    __global const ${dt}* xb = X + x_off + (I)ou * x_so + (I)r * x_si;
    ${dt} v;
    if (mode < 2) {
        v = xb[(I)near_src(o, L, fscale, mode) * x_sl];
    } else {
        ${dt} s = lin_src(o, scale, align);
        int i0 = (int)s;
        int i1 = i0 + (i0 < L - 1 ? 1 : 0);
        ${dt} l1 = s - (${dt})i0, l0 = (${dt})1 - l1;
        v = xb[(I)i0 * x_sl] * l0 + xb[(I)i1 * x_sl] * l1;
    }
    Y[(I)ou * Lo * inner + e] = v;
}

// The adjoint (a gather): grad_x[ou, i, r] = sum over outputs o reading i of their weight times g[ou, o, r].
// The candidate range [olo, ohi) comes from the host (a superset); each candidate is checked exactly.
__kernel void resample_bwd(__global const ${dt}* G, I g_off, __global ${dt}* X,
                           int L, int Lo, int inner, int mode, int align, float fscale, ${dt} scale,
                           ${dt} inv, int margin, int NPL, int Y0, int Z0)
{
${grid3("r", "i", "ou", "inner", "L")}
    int e = i * inner + r;
    __global const ${dt}* gb = G + g_off + (I)ou * Lo * inner + r;
    // candidates: outputs whose source lies within one step of i
    int olo, ohi;
    if (inv <= (${dt})0) { olo = 0; ohi = Lo; }
    else {
        ${dt} c = mode == 1 ? (${dt})0.5 : (mode == 2 && !align ? (${dt})0.5 : (${dt})0);
        olo = (int)floor(((${dt})(i - 1) + c) * inv - c) - margin;
        ohi = (int)ceil(((${dt})(i + 2) + c) * inv - c) + margin;
        olo = max(olo, 0);
        ohi = (i == L - 1) ? Lo : min(ohi, Lo);
        if (mode == 2 && i == 0) olo = 0;
    }
    ${dt} acc = (${dt})0;
    for (int o = olo; o < ohi; o++) {
        if (mode < 2) {
            if (near_src(o, L, fscale, mode) == i) acc += gb[(I)o * inner];
        } else {
            ${dt} s = lin_src(o, scale, align);
            int i0 = (int)s;
            int i1 = i0 + (i0 < L - 1 ? 1 : 0);
            ${dt} l1 = s - (${dt})i0, l0 = (${dt})1 - l1;
            ${dt} gv = gb[(I)o * inner];
            if (i0 == i) acc += gv * l0;
            if (i1 == i) acc += gv * l1;
        }
    }
    X[(I)ou * L * inner + e] = acc;
}
% endif
