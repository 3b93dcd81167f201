## Batched 1-d FFT along the contiguous last dim: Stockham autosort passes, one per radix, plus the three small
## kernels of Bluestein's chirp-z transform.
##   T: "float" or "double" (complex64 / complex128 as T2 = (re, im)); R: the pass's radix; sign: -1 forward,
##   +1 inverse.
## Every kernel runs on an (X, batch) range: b0 is the first batch of this launch (a launch covers at most the
## device's work-groups in dimension 1: backend/geometry.py pieces), nb the batch count (dimension 1 is rounded up
## to whole work-groups).
## Pass (E. Bainville's formulation of Stockham): n = R * m; work-item (j, batch), j < m, with ns the product of the
## radices already done and k = j mod ns, reads v[r] = in[j + r*m], twists v[r] by w^(r*k) with w = exp(sign 2 pi i
## / (ns*R)), takes the R-point DFT and writes out[(j/ns)*ns*R + k + q*ns]. Twiddles come from the pass's table
## tw[(r-1)*ns + k] = exp(-2 pi i r k / (ns*R)), computed in double on the host (angles from exact integers), so
## no angle is formed in float and neighbouring work-items read neighbouring entries. The R-point DFT's constants
## are written here as literals (exact ones as +-1, +-i).
<%!
import math

def dft_terms(R, sign):
    """For each output q: a list of (r, c) with c = exp(sign 2 pi i r q / R) as (re, im)."""
    out = []
    for q in range(R):
        row = []
        for r in range(R):
            t = (r * q) % R
            a = sign * 2.0 * math.pi * t / R
            c, s = math.cos(a), math.sin(a)
            if t == 0:
                c, s = 1.0, 0.0
            elif 4 * t == R:
                c, s = 0.0, float(sign)
            elif 2 * t == R:
                c, s = -1.0, 0.0
            elif 4 * t == 3 * R:
                c, s = 0.0, float(-sign)
            row.append((r, c, s))
        out.append(row)
    return out

def lit(v, T):
    return repr(float(v)) + ("f" if T == "float" else "")
%>
#pragma OPENCL FP_CONTRACT OFF
% if T == "double":
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
% endif
typedef ${T}2 T2;
inline T2 cmul(T2 a, T2 b) { return (T2)(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x); }

% if kernel == "pass":
__kernel void fft_pass(__global const T2* in, long in_off, __global T2* out, long out_off,
                       __global const T2* tw, long n, long ns, ${T} scale, long b0, long nb)
{
    /* int index arithmetic (n < 2^31): a 64-bit division per work-item costs more than the butterfly on CPUs */
    int j = (int)get_global_id(0);
    int m = (int)n / ${R}, ins = (int)ns;
    if (j >= m) return;
    long b = get_global_id(1) + b0;
    if (b >= nb) return;
    in += in_off + b * n;
    out += out_off + b * n;
    int k = j % ins;
    T2 v[${R}];
% for r in range(R):
    v[${r}] = in[j + ${r} * m];
% endfor
% for r in range(1, R):
    { T2 w = tw[${r - 1} * ins + k];
% if sign > 0:
      w.y = -w.y;
% endif
      v[${r}] = cmul(v[${r}], w); }
% endfor
    int o = (j / ins) * ins * ${R} + k;
% for q, row in enumerate(dft_terms(R, sign)):
    {
        T2 acc = v[0];
% for r, c, s in row[1:]:
% if c == 1.0 and s == 0.0:
        acc += v[${r}];
% elif c == -1.0 and s == 0.0:
        acc -= v[${r}];
% elif c == 0.0 and s == 1.0:
        acc += (T2)(-v[${r}].y, v[${r}].x);
% elif c == 0.0 and s == -1.0:
        acc += (T2)(v[${r}].y, -v[${r}].x);
% else:
        acc += cmul(v[${r}], (T2)(${lit(c, T)}, ${lit(s, T)}));
% endif
% endfor
        out[o + ${q} * ins] = acc * scale;
    }
% endfor
}
% elif kernel == "r2c_post":
## rfft of n = 2h reals from the h-point complex DFT Z of z_j = x_2j + i x_2j+1: with A_k = (Z_k + conj Z_(h-k)) / 2
## and B_k = (Z_k - conj Z_(h-k)) / 2i (the DFTs of the even and odd samples), X_k = A_k + w_k B_k, k = 0..h,
## w_k = exp(-2 pi i k / n) from the host's table
__kernel void r2c_post(__global const T2* Z, __global T2* X, __global const T2* w, long h, ${T} scale,
                       long b0, long nb)
{
    long k = get_global_id(0);
    if (k > h) return;
    long b = get_global_id(1) + b0;
    if (b >= nb) return;
    T2 zk = Z[b * h + (k == h ? 0 : k)];
    T2 zc = Z[b * h + (k == 0 ? 0 : h - k)];
    zc.y = -zc.y;
    T2 a = (zk + zc) * (${T})0.5;
    T2 d = (zk - zc) * (${T})0.5;
    T2 bk = (T2)(d.y, -d.x);          /* d / i */
    X[b * (h + 1) + k] = (a + cmul(w[k], bk)) * scale;
}
% elif kernel == "chirp_in":
## a[b, j] = x[b, j] * c[j] for j < n, 0 for n <= j < M (Bluestein's premultiplied, zero-padded input)
__kernel void chirp_in(__global const T2* x, long x_off, __global T2* a, __global const T2* c, long n, long M,
                       long b0, long nb)
{
    long j = get_global_id(0);
    if (j >= M) return;
    long b = get_global_id(1) + b0;
    if (b >= nb) return;
    a[b * M + j] = j < n ? cmul(x[x_off + b * n + j], c[j]) : (T2)(0, 0);
}
% elif kernel == "spectrum_mul":
## A[b, j] *= B[j] * scale (the convolution's spectra; scale = 1/M for the unnormalized inverse that follows)
__kernel void spectrum_mul(__global T2* A, __global const T2* B, long M, ${T} scale, long b0, long nb)
{
    long j = get_global_id(0);
    if (j >= M) return;
    long b = get_global_id(1) + b0;
    if (b >= nb) return;
    A[b * M + j] = cmul(A[b * M + j], B[j]) * scale;
}
% elif kernel == "chirp_out":
## y[b, k] = conv[b, k] * c[k] * scale for k < n
__kernel void chirp_out(__global const T2* conv, __global T2* y, long y_off, __global const T2* c, long n, long M,
                        ${T} scale, long b0, long nb)
{
    long k = get_global_id(0);
    if (k >= n) return;
    long b = get_global_id(1) + b0;
    if (b >= nb) return;
    y[y_off + b * n + k] = cmul(conv[b * M + k], c[k]) * scale;
}
% endif
