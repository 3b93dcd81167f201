## Deterministic mode's math (cltorch.use_deterministic_algorithms(True)): exp, log, log1p, expm1, tanh, erf, pow
## and rsqrt built from + - * / and exact bit operations only, so every conforming device computes the same bits
## (the program is built with FP_CONTRACT OFF and -cl-fp32-correctly-rounded-divide-sqrt, which makes / and sqrt
## IEEE's correctly rounded ones). Vendors' builtins may differ by a few ulp. Float scalars only: double keeps its
## builtins (parenthesised names are not macro-expanded), float vectors have no overload (the deterministic profile
## computes on scalars). Approximations: exp and log are Cody-Waite range reduction with Cephes-style polynomials
## (about 1 ulp); tanh is an odd polynomial below 0.625 and 1 - 2 / (exp(2|x|) + 1) above; erf a Taylor series
## below 1 and Abramowitz & Stegun 7.1.26 above (about 2 ulp); pow squares for integral exponents up to 2^24, else
## exp(y log x) (measured against torch: up to 8 ulp; exp and log 2, tanh 3, erf 4).
<%def name="helpers(types)">
#define DET_OL __attribute__((overloadable))
inline float DET_OL det_exp(float x)
{
    float xc = x < -103.9f ? -103.9f : (x > 88.8f ? 88.8f : x);
    float t = xc * 1.44269504088896341f + 12582912.0f;
    int n = as_int(t) - 0x4B400000;
    float nf = t - 12582912.0f;
    float r = xc - nf * 0.693359375f;
    r = r - nf * -2.12194440e-4f;
    float p = 1.9875691500E-4f;
    p = p * r + 1.3981999507E-3f;
    p = p * r + 8.3334519073E-3f;
    p = p * r + 4.1665795894E-2f;
    p = p * r + 1.6666665459E-1f;
    p = p * r + 5.0000001201E-1f;
    p = p * (r * r) + r + 1.0f;
    /* 2^n in two factors so that n down to -149 (subnormal results) and up to 128 stay representable */
    int n1 = n / 2, n2 = n - n / 2;
    float e = p * as_float((n1 + 127) << 23) * as_float((n2 + 127) << 23);
    return x != x ? x : (x < -103.9f ? 0.0f : (x > 88.8f ? INFINITY : e));
}
% if "double" in types:
inline double DET_OL det_exp(double x) { return (exp)(x); }
% endif

inline float DET_OL det_log(float x)
{
    if (x != x || x < 0.0f) return CT_NAN;
    if (x == 0.0f) return -INFINITY;
    if (x == INFINITY) return x;
    int e = 0;
    if (x < 1.17549435e-38f) { x = x * 16777216.0f; e = -24; }        /* subnormal: scale by 2^24 */
    uint u = as_uint(x);
    e += (int)((u >> 23) & 0xffu) - 126;
    float m = as_float((u & 0x007fffffu) | 0x3f000000u);             /* m in [0.5, 1) */
    if (m < 0.707106781186547524f) { e -= 1; m = m + m - 1.0f; } else { m = m - 1.0f; }
    float z = m * m;
    float y = 7.0376836292E-2f;
    y = y * m + -1.1514610310E-1f;
    y = y * m + 1.1676998740E-1f;
    y = y * m + -1.2420140846E-1f;
    y = y * m + 1.4249322787E-1f;
    y = y * m + -1.6668057665E-1f;
    y = y * m + 2.0000714765E-1f;
    y = y * m + -2.4999993993E-1f;
    y = y * m + 3.3333331174E-1f;
    y = y * m * z;
    float fe = (float)e;
    y = y + fe * -2.12194440e-4f;
    y = y - 0.5f * z;
    float r = m + y;
    return r + fe * 0.693359375f;
}
% if "double" in types:
inline double DET_OL det_log(double x) { return (log)(x); }
% endif

inline float DET_OL det_log1p(float x)
{
    float u = 1.0f + x;
    if (u == 1.0f) return x;
    if (u == INFINITY) return u;
    return det_log(u) * (x / (u - 1.0f));
}
% if "double" in types:
inline double DET_OL det_log1p(double x) { return (log1p)(x); }
% endif

inline float DET_OL det_expm1(float x)
{
    if (x > -0.35f && x < 0.35f) {      /* Taylor series: exp(x) - 1 loses the low bits here */
        float p = 1.0f / 362880.0f;
        p = p * x + 1.0f / 40320.0f;
        p = p * x + 1.0f / 5040.0f;
        p = p * x + 1.0f / 720.0f;
        p = p * x + 1.0f / 120.0f;
        p = p * x + 1.0f / 24.0f;
        p = p * x + 1.0f / 6.0f;
        p = p * x + 0.5f;
        return p * x * x + x;
    }
    return det_exp(x) - 1.0f;
}
% if "double" in types:
inline double DET_OL det_expm1(double x) { return (expm1)(x); }
% endif

inline float DET_OL det_tanh(float x)
{
    float a = x < 0.0f ? -x : x;
    if (x != x) return x;
    if (a < 0.625f) {
        float z = x * x;
        float p = -5.70498872745E-3f;
        p = p * z + 2.06390887954E-2f;
        p = p * z + -5.37397155531E-2f;
        p = p * z + 1.33314422036E-1f;
        p = p * z + -3.33332819422E-1f;
        return p * z * x + x;
    }
    if (a > 9.1f) return x < 0.0f ? -1.0f : 1.0f;
    float r = 1.0f - 2.0f / (det_exp(a + a) + 1.0f);
    return x < 0.0f ? -r : r;
}
% if "double" in types:
inline double DET_OL det_tanh(double x) { return (tanh)(x); }
% endif

inline float DET_OL det_erf(float x)
{
    float a = x < 0.0f ? -x : x;
    if (x != x) return x;
    if (a < 1.0f) {
        float z = x * x;                /* 2/sqrt(pi) * sum (-1)^k x^(2k+1) / (k! (2k+1)) */
        float p = 1.0f / (3628800.0f * 21.0f);
        p = p * z + -1.0f / (362880.0f * 19.0f);
        p = p * z + 1.0f / (40320.0f * 17.0f);
        p = p * z + -1.0f / (5040.0f * 15.0f);
        p = p * z + 1.0f / (720.0f * 13.0f);
        p = p * z + -1.0f / (120.0f * 11.0f);
        p = p * z + 1.0f / (24.0f * 9.0f);
        p = p * z + -1.0f / (6.0f * 7.0f);
        p = p * z + 1.0f / (2.0f * 5.0f);
        p = p * z + -1.0f / 3.0f;
        p = p * z + 1.0f;
        return 1.12837916709551257f * p * x;
    }
    if (a > 4.0f) return x < 0.0f ? -1.0f : 1.0f;
    float t = 1.0f / (1.0f + 0.3275911f * a);
    float q = 1.061405429f;
    q = q * t + -1.453152027f;
    q = q * t + 1.421413741f;
    q = q * t + -0.284496736f;
    q = q * t + 0.254829592f;
    float r = 1.0f - q * t * det_exp(-(a * a));
    return x < 0.0f ? -r : r;
}
% if "double" in types:
inline double DET_OL det_erf(double x) { return (erf)(x); }
% endif

inline float DET_OL det_pow(float x, float y)
{
    if (y == 0.0f) return 1.0f;
    float ay = y < 0.0f ? -y : y;
    if (ay == floor(ay) && ay <= 16777216.0f) {          /* integral exponent: square and multiply */
        uint k = (uint)ay;
        float r = 1.0f, b = x;
        while (k) { if (k & 1u) r = r * b; b = b * b; k >>= 1; }
        return y < 0.0f ? 1.0f / r : r;
    }
    if (x != x || y != y) return CT_NAN;
    if (x < 0.0f) return CT_NAN;                       /* non-integral power of a negative number */
    if (x == 0.0f) return y > 0.0f ? 0.0f : INFINITY;
    return det_exp(y * det_log(x));
}
% if "double" in types:
inline double DET_OL det_pow(double x, double y) { return (pow)(x, y); }
% endif

inline float DET_OL det_rsqrt(float x) { return 1.0f / sqrt(x); }
% if "double" in types:
inline double DET_OL det_rsqrt(double x) { return (rsqrt)(x); }
% endif

#define exp(x) det_exp(x)
#define log(x) det_log(x)
#define log1p(x) det_log1p(x)
#define expm1(x) det_expm1(x)
#define tanh(x) det_tanh(x)
#define erf(x) det_erf(x)
#define pow(x, y) det_pow(x, y)
#define rsqrt(x) det_rsqrt(x)
</%def>
