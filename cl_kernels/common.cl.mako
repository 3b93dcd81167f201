## Shared preamble: extensions, FP contraction off (bit-identical results across devices), helpers.
<%namespace name="det" file="det_math.cl.mako"/>
<%def name="preamble(types)">
#pragma OPENCL FP_CONTRACT OFF
% if "double" in types:
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
% endif
% if "half" in types:
## without the extension half is a storage type only (vload_half / vstore_half); templates compute it in float
#ifdef cl_khr_fp16
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#endif
% endif
typedef long idx_t;
#define CT_NAN (0.0f/0.0f)
inline long floordiv_l(long a, long b) { long q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; }
inline long remainder_l(long a, long b) { long r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
inline int floordiv_i(int a, int b) { int q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; }
inline int remainder_i(int a, int b) { int r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
inline float remainder_f(float a, float b) { float r = fmod(a, b); return (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) ? r + b : r; }
inline float floordiv_f(float a, float b) { float m = fmod(a, b); float d = (a - m) / b; if (m != 0.0f && ((b < 0.0f) != (m < 0.0f))) d -= 1.0f; if (d == 0.0f) return copysign(0.0f, a / b); float fd = floor(d); if (d - fd > 0.5f) fd += 1.0f; return b == 0.0f ? a / b : fd; }
inline float nan_max_f(float a, float b) { return (isnan(a) || isnan(b)) ? CT_NAN : fmax(a, b); }
inline float nan_min_f(float a, float b) { return (isnan(a) || isnan(b)) ? CT_NAN : fmin(a, b); }
inline long ipow_l(long b, long e) { long r = 1; while (e > 0) { if (e & 1) r *= b; b *= b; e >>= 1; } return r; }
% if "double" in types:
inline double remainder_d(double a, double b) { double r = fmod(a, b); return (r != 0.0 && ((r < 0.0) != (b < 0.0))) ? r + b : r; }
inline double floordiv_d(double a, double b) { double m = fmod(a, b); double d = (a - m) / b; if (m != 0.0 && ((b < 0.0) != (m < 0.0))) d -= 1.0; if (d == 0.0) return copysign(0.0, a / b); double fd = floor(d); if (d - fd > 0.5) fd += 1.0; return b == 0.0 ? a / b : fd; }
inline double nan_max_d(double a, double b) { return (isnan(a) || isnan(b)) ? (0.0/0.0) : fmax(a, b); }
inline double nan_min_d(double a, double b) { return (isnan(a) || isnan(b)) ? (0.0/0.0) : fmin(a, b); }
% endif
% if context.get("deterministic"):
## cltorch.use_deterministic_algorithms(True): own + - * / polynomials for the math builtins
${det.helpers(types)}
% endif
</%def>
