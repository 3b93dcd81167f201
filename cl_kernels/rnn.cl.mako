## Fused recurrent cells (LSTM, GRU, Elman tanh/relu): the pointwise part of one time step, forward and backward.
##   T: storage type; CT: compute type (half computes in float)
## The matrix products (input projection of the whole sequence, h @ W_hh^T per step) are GEMMs done by the caller;
## these kernels take the two pre-activation blocks they produce, "input gates" ig and "hidden gates" hg, and do
## everything else of a step in one launch. Gate order is PyTorch's: LSTM (i, f, g, o), GRU (r, z, n).
## Layout: n rows (batch entries) of H units; every operand is row-major with its own row stride (in elements) and
## unit column stride, so a time step's slice of a (T, B, G*H) buffer is passed in place. One work-item per
## (row, unit); it reads and writes only its own row's positions j, H + j, 2H + j, 3H + j, so an output may be the
## same memory as an input of the same shape (in-place workspace and running gradients).
## Formulas (the standard ones, as PyTorch's cells): LSTM c' = f*c + i*g, h' = o*tanh(c');
## GRU n = tanh(ig_n + r * hg_n), h' = n + z*(h - n) (hg includes b_hh, so r multiplies W_hn h + b_hn);
## Elman h' = act(ig + hg).
##   vw: units per work-item (8: float8 loads and math, for float with H % 8 == 0; else 1)
<%namespace name="cm" file="common.cl.mako"/>
${cm.preamble(types)}
% if vw > 1:
typedef ${CT}${vw} vt;
typedef int${vw} vit;
#define LD(p) vload${vw}(0, p)
#define ST(p, v) vstore${vw}(v, 0, p)
#define SEL(a, b, c) select(a, b, c)
#define AS_VI(x) as_int${vw}(x)
#define AS_VT(x) as_float${vw}(x)
% else:
typedef ${CT} vt;
typedef int vit;
#define LD(p) (*(p))
#define ST(p, v) (*(p) = (v))
#define SEL(a, b, c) ((c) ? (b) : (a))
#define AS_VI(x) as_int(x)
#define AS_VT(x) as_float(x)
% endif
% if CT == "float":
## exp from + - * only (Cody-Waite reduction and Cephes' expf polynomial, about 1 ulp; inputs clamped to
## [-87.3, 88.7], NaN kept): PoCL calls its math builtins out of line, on one element at a time
inline vt vexp(vt x)
{
    vt xc = clamp(x, -87.3f, 88.7f);
    vt t = xc * 1.44269504088896341f + 12582912.0f;
    vit k = AS_VI(t) - 0x4B400000;
    vt kf = t - 12582912.0f;
    vt r = xc - kf * 0.693359375f;
    r = r - kf * -2.12194440e-4f;
    vt p = 1.9875691500E-4f;
    p = p * r + 1.3981999507E-3f;
    p = p * r + 8.3334519073E-3f;
    p = p * r + 4.1665795894E-2f;
    p = p * r + 1.6666665459E-1f;
    p = p * r + 5.0000001201E-1f;
    p = p * (r * r) + r + 1.0f;
    vt e = p * AS_VT((k + 127) << 23);
    return SEL(e, x, isnan(x));
}
## sigmoid and tanh from it; absolute error about 1e-7
inline vt vsigmoid(vt x) { return 1.0f / (1.0f + vexp(-x)); }
inline vt vtanh(vt x) { vt t = vexp(-2.0f * fabs(x)); vt r = (1.0f - t) / (1.0f + t); return copysign(r, x); }
% else:
inline vt vsigmoid(vt x) { return (${CT})1 / ((${CT})1 + exp(-x)); }
inline vt vtanh(vt x) { return tanh(x); }
% endif
<%def name="arg(name, const=True)">__global ${"const " if const else ""}${T}* ${name}, long ${name}_off, long ${name}_rs</%def>
<%def name="ptr(name, k='0')">(${name} + ${name}_off + b * ${name}_rs + ${k} * H + j)</%def>
<%def name="rd(name, k='0')">LD(${ptr(name, k)})</%def>
<%def name="wr(name, k, v)">ST(${ptr(name, k)}, ${v})</%def>
<%def name="head()">
    long gid = get_global_id(0);
    long hv = H / ${vw};
    if (gid >= n * hv) return;
    long b = gid / hv, j = (gid - b * hv) * ${vw};
</%def>

## ---------------------------------------------------------------------------------------------------- LSTM
## ws receives the activated gates (i, f, g, o), the backward's workspace; ws may be hg itself.
__kernel void lstm_fwd(long n, long H, ${arg("ig")}, ${arg("hg")}, ${arg("cx")},
                       ${arg("hy", False)}, ${arg("cy", False)}, ${arg("ws", False)})
{
${head()}
    vt i = vsigmoid(${rd("ig", 0)} + ${rd("hg", 0)});
    vt f = vsigmoid(${rd("ig", 1)} + ${rd("hg", 1)});
    vt g = vtanh(${rd("ig", 2)} + ${rd("hg", 2)});
    vt o = vsigmoid(${rd("ig", 3)} + ${rd("hg", 3)});
    vt c = f * ${rd("cx")} + i * g;
    ${wr("cy", 0, "c")};
    ${wr("hy", 0, "o * vtanh(c)")};
    ${wr("ws", 0, "i")};
    ${wr("ws", 1, "f")};
    ${wr("ws", 2, "g")};
    ${wr("ws", 3, "o")};
}

## dh = dhy_a (+ dhy_b when two_dh); dc = dcy + dh * o * (1 - tanh(c')^2);
## dgates = (dc * g * i(1-i), dc * c * f(1-f), dc * i * (1-g^2), dh * tanh(c') * o(1-o)); dcx = dc * f.
## dcx may be dcy itself (a running gradient).
__kernel void lstm_bwd(long n, long H, long two_dh, ${arg("ws")}, ${arg("cx")}, ${arg("cy")},
                       ${arg("dha")}, ${arg("dhb")}, ${arg("dcy")}, ${arg("dcx", False)}, ${arg("dg", False)})
{
${head()}
    vt i = ${rd("ws", 0)}, f = ${rd("ws", 1)}, g = ${rd("ws", 2)}, o = ${rd("ws", 3)};
    vt dh = ${rd("dha")};
    if (two_dh) dh += ${rd("dhb")};
    vt tc = vtanh(${rd("cy")});
    vt one = (vt)1;
    vt dc = ${rd("dcy")} + dh * o * (one - tc * tc);
    vt c0 = ${rd("cx")};
    ${wr("dg", 0, "dc * g * i * (one - i)")};
    ${wr("dg", 1, "dc * c0 * f * (one - f)")};
    ${wr("dg", 2, "dc * i * (one - g * g)")};
    ${wr("dg", 3, "dh * tc * o * (one - o)")};
    ${wr("dcx", 0, "dc * f")};
}

## ----------------------------------------------------------------------------------------------------- GRU
## ws (4H per row) receives (r, z, n, hg_n), the backward's workspace.
__kernel void gru_fwd(long n, long H, ${arg("ig")}, ${arg("hg")}, ${arg("hx")}, ${arg("hy", False)},
                      ${arg("ws", False)})
{
${head()}
    vt r = vsigmoid(${rd("ig", 0)} + ${rd("hg", 0)});
    vt z = vsigmoid(${rd("ig", 1)} + ${rd("hg", 1)});
    vt hn = ${rd("hg", 2)};
    vt nn = vtanh(${rd("ig", 2)} + r * hn);
    vt h = ${rd("hx")};
    ${wr("hy", 0, "nn + z * (h - nn)")};
    ${wr("ws", 0, "r")};
    ${wr("ws", 1, "z")};
    ${wr("ws", 2, "nn")};
    ${wr("ws", 3, "hn")};
}

## dh = dhy_a (+ dhy_b); dn = dh * (1 - z) * (1 - n^2); dz = dh * (h - n) * z(1-z); dr = dn * hg_n * r(1-r);
## dig = (dr, dz, dn); dhg = (dr, dz, dn * r); dhx = dh * z (the direct path; the caller adds dhg @ W_hh).
## dhx may be dha itself.
__kernel void gru_bwd(long n, long H, long two_dh, ${arg("ws")}, ${arg("hx")}, ${arg("dha")}, ${arg("dhb")},
                      ${arg("dig", False)}, ${arg("dhg", False)}, ${arg("dhx", False)})
{
${head()}
    vt r = ${rd("ws", 0)}, z = ${rd("ws", 1)}, nn = ${rd("ws", 2)}, hn = ${rd("ws", 3)};
    vt dh = ${rd("dha")};
    if (two_dh) dh += ${rd("dhb")};
    vt one = (vt)1;
    vt dn = dh * (one - z) * (one - nn * nn);
    vt h = ${rd("hx")};
    vt dz = dh * (h - nn) * z * (one - z);
    vt dr = dn * hn * r * (one - r);
    ${wr("dig", 0, "dr")};
    ${wr("dig", 1, "dz")};
    ${wr("dig", 2, "dn")};
    ${wr("dhg", 0, "dr")};
    ${wr("dhg", 1, "dz")};
    ${wr("dhg", 2, "dn * r")};
    ${wr("dhx", 0, "dh * z")};
}

## --------------------------------------------------------------------------------------------- Elman cells
## relu keeps NaN (as PyTorch's clamp_min); its derivative is taken as 0 at 0, as PyTorch's
% for act in ("tanh", "relu"):
__kernel void rnn_${act}_fwd(long n, long H, ${arg("ig")}, ${arg("hg")}, ${arg("hy", False)})
{
${head()}
    vt p = ${rd("ig")} + ${rd("hg")};
% if act == "tanh":
    ${wr("hy", 0, "vtanh(p)")};
% else:
    ${wr("hy", 0, "SEL((vt)0, p, (p > (vt)0) | isnan(p))")};
% endif
}

## dpre = dh * (1 - h'^2) (tanh) or dh * (h' > 0) (relu), with dh = dhy_a (+ dhy_b)
__kernel void rnn_${act}_bwd(long n, long H, long two_dh, ${arg("hy")}, ${arg("dha")}, ${arg("dhb")},
                             ${arg("dp", False)})
{
${head()}
    vt dh = ${rd("dha")};
    if (two_dh) dh += ${rd("dhb")};
    vt h = ${rd("hy")};
% if act == "tanh":
    ${wr("dp", 0, "dh * ((vt)1 - h * h)")};
% else:
    ${wr("dp", 0, "SEL((vt)0, dh, h > (vt)0)")};
% endif
}
% endfor
