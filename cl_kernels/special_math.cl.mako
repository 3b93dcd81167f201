## Device helpers of the special pointwise functions (cltorch/ops/special_math.py), written once per compute
## type: ``sm_<name>_f`` (float) and, where the kernel uses double, ``sm_<name>_d``. elementwise.cl.mako includes
## them only when its expression names an ``sm_`` helper, so other kernels' sources are unchanged.
##
## Sources of the methods (the code is our own):
##  - digamma: reflection psi(x) = psi(1-x) - pi/tan(pi x), recurrence psi(x) = psi(x+1) - 1/x up to x >= 10,
##    then the asymptotic series in Bernoulli numbers (Abramowitz & Stegun 6.3.18).
##  - Hurwitz zeta (and polygamma(n, x) = (-1)^(n+1) n! zeta(n+1, x)): direct sum up to q >= M, then the
##    Euler-Maclaurin tail with Bernoulli numbers B_2..B_18 (A&S 23.2; the method of Cephes' zeta).
##  - erfinv: M. Giles, "Approximating the erfinv function", GPU Computing Gems Jade (2011): the single-precision
##    polynomials in w = -log((1-x)(1+x)); double adds two Newton steps on erf.
##  - I0, I1 (and the scaled I0e, I1e): the power series sum (x/2)^(2k+nu) / (k! (k+nu)!) for |x| <= 20, the
##    Hankel asymptotic expansion e^x / sqrt(2 pi x) sum_k (-1)^k a_k(nu) / x^k beyond (A&S 9.6.10, 9.7.1).
##  - erfcx: exp(x^2) erfc(x) directly below a threshold, the asymptotic series 1/(x sqrt(pi)) sum (-1)^k
##    (2k-1)!! / (2x^2)^k above it (A&S 7.1.23).
##  - ndtri: sqrt(2) erfinv(2p-1) with Giles' w computed from p as -log(4p(1-p)) (no cancellation in the
##    tails); double refines with two Newton steps on ndtr. Beyond Giles' range (w > 16, p < ~1e-7) the
##    start is A&S 26.2.23, refined by Newton steps on log(ndtr).
<%def name="helpers(types)">
<% variants = [("float", "f", "f", "FLT_EPSILON", 9)] + ([("double", "d", "", "DBL_EPSILON", 14)] if "double" in types else []) %>
% for T, S, L, EPS, ZM in variants:
inline ${T} sm_digamma_${S}(${T} x) {
    if (isnan(x)) return x;
    if (x == 0) return copysign((${T})INFINITY, -x);
    ${T} res = 0;
    if (x < 0) {
        if (x == floor(x)) return (${T})NAN;
        res = -${"M_PI_F" if S == "f" else "M_PI"} / tanpi(x);
        x = 1 - x;
    }
    while (x < 10) { res -= 1 / x; x += 1; }
    ${T} z = 1 / (x * x);
    return res + log(x) - 0.5${L} / x
        - z * (0.083333333333333333${L} - z * (0.0083333333333333333${L} - z * (0.003968253968253968${L}
        - z * (0.004166666666666667${L} - z * (0.007575757575757576${L} - z * (0.021092796092796094${L}
        - z * 0.083333333333333333${L}))))));
}
inline ${T} sm_zeta_${S}(${T} s, ${T} q) {
    if (isnan(s) || isnan(q)) return (${T})NAN;
    if (s == 1) return (${T})INFINITY;
    if (s < 1) return (${T})NAN;
    if (q <= 0) {
        if (q == floor(q)) return (${T})INFINITY;
        if (s != floor(s)) return (${T})NAN;
    }
    ${T} sum = 0, a = q;
    int guard = 0;
    while (a < ${ZM}) { sum += pow(a, -s); a += 1; if (++guard > 100000) return (${T})NAN; }
    ${T} w2 = 1 / (a * a);
    sum += pow(a, 1 - s) / (s - 1) + 0.5${L} * pow(a, -s);
    ${T} t = s * pow(a, -s - 1);       /* s (s+1) ... (s+2j-2) a^(-s-2j+1) */
    const ${T} c[9] = {0.08333333333333333${L}, -0.001388888888888889${L}, 3.306878306878307e-05${L},
                       -8.267195767195768e-07${L}, 2.08767569878681e-08${L}, -5.284190138687493e-10${L},
                       1.3382536530684679e-11${L}, -3.3896802963225827e-13${L}, 8.586062056277845e-15${L}};
    for (int j = 0; j < 9; j++) {
        ${T} term = c[j] * t;
        sum += term;
        if (fabs(term) < ${EPS} * fabs(sum)) break;
        t *= (s + 2 * j + 1) * (s + 2 * j + 2) * w2;
    }
    return sum;
}
inline ${T} sm_polygamma_${S}(int n, ${T} x) {
    if (n == 0) return sm_digamma_${S}(x);
    ${T} fact = 1;
    for (int k = 2; k <= n; k++) fact *= k;
    return ((n & 1) ? fact : -fact) * sm_zeta_${S}((${T})(n + 1), x);
}
inline ${T} sm_erfinv_core_${S}(${T} x, ${T} w) {
    ${T} p;
    if (w < 5) {
        w = w - 2.5${L};
        p = 2.81022636e-08${L};
        p = 3.43273939e-07${L} + p * w; p = -3.5233877e-06${L} + p * w; p = -4.39150654e-06${L} + p * w;
        p = 0.00021858087${L} + p * w; p = -0.00125372503${L} + p * w; p = -0.00417768164${L} + p * w;
        p = 0.246640727${L} + p * w; p = 1.50140941${L} + p * w;
    } else {
        w = sqrt(w) - 3;
        p = -0.000200214257${L};
        p = 0.000100950558${L} + p * w; p = 0.00134934322${L} + p * w; p = -0.00367342844${L} + p * w;
        p = 0.00573950773${L} + p * w; p = -0.0076224613${L} + p * w; p = 0.00943887047${L} + p * w;
        p = 1.00167406${L} + p * w; p = 2.83297682${L} + p * w;
    }
    return p * x;
}
inline ${T} sm_erfinv_${S}(${T} x) {
    if (isnan(x) || fabs(x) > 1) return (${T})NAN;
    if (fabs(x) == 1) return copysign((${T})INFINITY, x);
    ${T} y = sm_erfinv_core_${S}(x, -log((1 - x) * (1 + x)));
% if S == "d":
    for (int it = 0; it < 2; it++) y -= (erf(y) - x) / (1.1283791670955126 * exp(-y * y));
% endif
    return y;
}
inline ${T} sm_ndtr_${S}(${T} x) { return 0.5${L} * erfc(-x * 0.70710678118654752${L}); }
inline ${T} sm_erfcx_${S}(${T} x) {
    if (isnan(x)) return x;
    if (x < ${"4" if S == "f" else "10"}) return exp(x * x) * erfc(x);
    if (isinf(x)) return 0;
    ${T} h = 1 / (2 * x * x), term = 1, sum = 1;
    for (int k = 1; k <= ${12 if S == "f" else 20}; k++) { term *= -(2 * k - 1) * h; sum += term; }
    return sum / (x * 1.7724538509055160${L});
}
inline ${T} sm_log_ndtr_${S}(${T} x) {
    if (x < -1) { ${T} t = -x * 0.70710678118654752${L}; return log(0.5${L} * sm_erfcx_${S}(t)) - t * t; }
    return log1p(-0.5${L} * erfc(x * 0.70710678118654752${L}));
}
inline ${T} sm_ndtri_${S}(${T} p) {
    if (isnan(p) || p < 0 || p > 1) return (${T})NAN;
    if (p == 0) return -(${T})INFINITY;
    if (p == 1) return (${T})INFINITY;
    ${T} w = -log(4 * p * (1 - p));
    if (w > 16) {   /* beyond Giles' range: A&S 26.2.23 start, Newton steps on log(ndtr) */
        ${T} pl = p < 0.5${L} ? p : 1 - p;
        ${T} t = sqrt(-2 * log(pl));
        ${T} y = -(t - (2.515517${L} + t * (0.802853${L} + t * 0.010328${L}))
                   / (1 + t * (1.432788${L} + t * (0.189269${L} + t * 0.001308${L}))));
        for (int it = 0; it < 4; it++) {
            ${T} ln = sm_log_ndtr_${S}(y);
            y -= (ln - log(pl)) / (0.3989422804014327${L} * exp(-0.5${L} * y * y - ln));
        }
        return p < 0.5${L} ? y : -y;
    }
    ${T} y = 1.4142135623730951${L} * sm_erfinv_core_${S}(2 * p - 1, w);
% if S == "d":
    for (int it = 0; it < 2; it++) y -= (sm_ndtr_d(y) - p) / (0.3989422804014327 * exp(-0.5 * y * y));
% endif
    return y;
}
/* I_nu(|x|) * exp(-|x|), nu = 0 or 1 (the sign of x is applied by the callers) */
inline ${T} sm_bessel_ie_${S}(int nu, ${T} x) {
    x = fabs(x);
    if (isinf(x)) return 0;
    if (x <= 20) {
        ${T} h = 0.25${L} * x * x, term = nu ? 0.5${L} * x : 1, sum = term;
        for (int k = 1; k < 80; k++) { term *= h / (k * (k + nu)); sum += term; if (term < ${EPS} * sum) break; }
        return sum * exp(-x);
    }
    ${T} mu = 4 * nu * nu, term = 1, sum = 1;
    for (int k = 1; k < 40; k++) {
        term *= -(mu - (2 * k - 1) * (2 * k - 1)) / (8 * k * x);
        sum += term;
        if (fabs(term) < ${EPS} * sum) break;
    }
    return sum / sqrt(2 * ${"M_PI_F" if S == "f" else "M_PI"} * x);
}
inline ${T} sm_i0_${S}(${T} x) {
    if (isnan(x)) return x;
    ${T} a = fabs(x);
    if (a > 20) { ${T} e = exp(0.5${L} * a); return sm_bessel_ie_${S}(0, a) * e * e; }
    return sm_bessel_ie_${S}(0, a) * exp(a);
}
inline ${T} sm_i0e_${S}(${T} x) { return isnan(x) ? x : sm_bessel_ie_${S}(0, x); }
inline ${T} sm_i1_${S}(${T} x) {
    if (isnan(x)) return x;
    ${T} a = fabs(x), r;
    if (a > 20) { ${T} e = exp(0.5${L} * a); r = sm_bessel_ie_${S}(1, a) * e * e; }
    else r = sm_bessel_ie_${S}(1, a) * exp(a);
    return x < 0 ? -r : r;
}
inline ${T} sm_i1e_${S}(${T} x) { if (isnan(x)) return x; ${T} r = sm_bessel_ie_${S}(1, x); return x < 0 ? -r : r; }
inline ${T} sm_sinc_${S}(${T} x) {
    if (x == 0) return 1;
    if (isinf(x)) return 0;
    return sinpi(x) / (${"M_PI_F" if S == "f" else "M_PI"} * x);
}
inline ${T} sm_entr_${S}(${T} x) {
    if (isnan(x)) return x;
    if (x > 0) return -x * log(x);
    if (x == 0) return 0;
    return -(${T})INFINITY;
}
inline ${T} sm_xlogy_${S}(${T} x, ${T} y) { if (isnan(y)) return y; return x == 0 ? 0 : x * log(y); }
inline ${T} sm_xlog1py_${S}(${T} x, ${T} y) { if (isnan(y)) return y; return x == 0 ? 0 : x * log1p(y); }
inline ${T} sm_logaddexp_${S}(${T} a, ${T} b) {
    if (isinf(a) && a == b) return a;
    ${T} m = fmax(a, b);
    return m + log1p(exp(-fabs(a - b)));
}
inline ${T} sm_logaddexp2_${S}(${T} a, ${T} b) {
    if (isinf(a) && a == b) return a;
    ${T} m = fmax(a, b);
    return m + log1p(exp2(-fabs(a - b))) * 1.4426950408889634${L};
}
/* orthogonal polynomials of integer degree n (n < 0 gives 0): three-term recurrences (A&S 22.7); for the
   Chebyshev kinds with |x| < 1 and n > 6 the trigonometric forms (A&S 22.3.15-16), as PyTorch's */
inline ${T} sm_cheb_${S}(${T} x, ${T} nf, int kind) {
    if (isnan(nf) || isnan(x)) return (${T})NAN;
    long n = (long)nf;
    if (n < 0) return 0;
    if (fabs(x) == 1) {
        int even = (n % 2) == 0;
        if (kind == 0) return (x > 0 || even) ? 1 : -1;
        if (kind == 1) return (x > 0 || even) ? (${T})(n + 1) : -(${T})(n + 1);
        if (kind == 2) return x > 0 ? 1 : (even ? (${T})(2 * n + 1) : -(${T})(2 * n + 1));
        return x > 0 ? (${T})(2 * n + 1) : (even ? 1 : -1);
    }
    if (n > 6 && fabs(x) < 1) {
        ${T} th = acos(x);
        if (kind == 0) return cos(n * th);
        if (kind == 1) return sin((n + 1) * th) / sin(th);
        if (kind == 2) return cos((n + 0.5${L}) * th) / cos(0.5${L} * th);
        return sin((n + 0.5${L}) * th) / sin(0.5${L} * th);
    }
    ${T} p0 = 1;
    if (n == 0) return p0;
    ${T} p1 = kind == 0 ? x : kind == 1 ? 2 * x : kind == 2 ? 2 * x - 1 : 2 * x + 1;
    for (long k = 1; k < n; k++) { ${T} p2 = 2 * x * p1 - p0; p0 = p1; p1 = p2; }
    return p1;
}
inline ${T} sm_cheb_t_${S}(${T} x, ${T} n) { return sm_cheb_${S}(x, n, 0); }
inline ${T} sm_cheb_u_${S}(${T} x, ${T} n) { return sm_cheb_${S}(x, n, 1); }
inline ${T} sm_cheb_v_${S}(${T} x, ${T} n) { return sm_cheb_${S}(x, n, 2); }
inline ${T} sm_cheb_w_${S}(${T} x, ${T} n) { return sm_cheb_${S}(x, n, 3); }
inline ${T} sm_scheb_t_${S}(${T} x, ${T} n) { return sm_cheb_${S}(2 * x - 1, n, 0); }
inline ${T} sm_scheb_u_${S}(${T} x, ${T} n) { return sm_cheb_${S}(2 * x - 1, n, 1); }
inline ${T} sm_scheb_v_${S}(${T} x, ${T} n) { return sm_cheb_${S}(2 * x - 1, n, 2); }
inline ${T} sm_scheb_w_${S}(${T} x, ${T} n) { return sm_cheb_${S}(2 * x - 1, n, 3); }
inline ${T} sm_hermite_h_${S}(${T} x, ${T} nf) {
    if (isnan(nf) || isnan(x)) return (${T})NAN;
    long n = (long)nf;
    if (n < 0) return 0;
    ${T} p0 = 1, p1 = 2 * x;
    if (n == 0) return p0;
    for (long k = 1; k < n; k++) { ${T} p2 = 2 * x * p1 - 2 * k * p0; p0 = p1; p1 = p2; }
    return p1;
}
inline ${T} sm_hermite_he_${S}(${T} x, ${T} nf) {
    if (isnan(nf) || isnan(x)) return (${T})NAN;
    long n = (long)nf;
    if (n < 0) return 0;
    ${T} p0 = 1, p1 = x;
    if (n == 0) return p0;
    for (long k = 1; k < n; k++) { ${T} p2 = x * p1 - k * p0; p0 = p1; p1 = p2; }
    return p1;
}
inline ${T} sm_laguerre_${S}(${T} x, ${T} nf) {
    if (isnan(nf) || isnan(x)) return (${T})NAN;
    long n = (long)nf;
    if (n < 0) return 0;
    if (x == 0) return 1;
    ${T} p0 = 1, p1 = 1 - x;
    if (n == 0) return p0;
    for (long k = 1; k < n; k++) { ${T} p2 = ((2 * k + 1 - x) * p1 - k * p0) / (k + 1); p0 = p1; p1 = p2; }
    return p1;
}
inline ${T} sm_legendre_${S}(${T} x, ${T} nf) {
    if (isnan(nf) || isnan(x)) return (${T})NAN;
    long n = (long)nf;
    if (n < 0) return 0;
    if (fabs(x) == 1) return (x > 0 || n % 2 == 0) ? 1 : -1;
    ${T} p0 = 1, p1 = x;
    if (n == 0) return p0;
    for (long k = 1; k < n; k++) { ${T} p2 = ((2 * k + 1) * x * p1 - k * p0) / (k + 1); p0 = p1; p1 = p2; }
    return p1;
}
/* regularized incomplete gamma: the series for x < a + 1, else the continued fraction for Q by the modified
   Lentz method (Numerical Recipes 6.2); edge cases as PyTorch's */
inline ${T} sm_igamma_prefix_${S}(${T} a, ${T} x) { return exp(a * log(x) - x - lgamma(a)); }
inline ${T} sm_igam_series_${S}(${T} a, ${T} x) {
    ${T} ap = a, del = 1 / a, sum = del;
    for (int n = 0; n < 1000; n++) { ap += 1; del *= x / ap; sum += del; if (fabs(del) < fabs(sum) * ${EPS}) break; }
    return sum * sm_igamma_prefix_${S}(a, x);
}
inline ${T} sm_igamc_cf_${S}(${T} a, ${T} x) {
    const ${T} tiny = ${"1e-30f" if S == "f" else "1e-300"};
    ${T} b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
    for (int i = 1; i < 1000; i++) {
        ${T} an = -i * (i - a);
        b += 2;
        d = an * d + b; if (fabs(d) < tiny) d = tiny;
        c = b + an / c; if (fabs(c) < tiny) c = tiny;
        d = 1 / d;
        ${T} del = d * c;
        h *= del;
        if (fabs(del - 1) < ${EPS}) break;
    }
    return h * sm_igamma_prefix_${S}(a, x);
}
inline ${T} sm_igamma_${S}(${T} a, ${T} x) {
    if (isnan(a) || isnan(x) || x < 0 || a < 0) return (${T})NAN;
    if (a == 0) return x > 0 ? 1 : (${T})NAN;
    if (x == 0) return 0;
    if (isinf(a)) return isinf(x) ? (${T})NAN : 0;
    if (isinf(x)) return 1;
    return x < a + 1 ? sm_igam_series_${S}(a, x) : 1 - sm_igamc_cf_${S}(a, x);
}
inline ${T} sm_igammac_${S}(${T} a, ${T} x) {
    if (isnan(a) || isnan(x) || x < 0 || a < 0) return (${T})NAN;
    if (a == 0) return x > 0 ? 0 : (${T})NAN;
    if (x == 0) return 1;
    if (isinf(a)) return isinf(x) ? (${T})NAN : 1;
    if (isinf(x)) return 0;
    return x < a + 1 ? 1 - sm_igam_series_${S}(a, x) : sm_igamc_cf_${S}(a, x);
}
% endfor
inline long sm_gcd_l(long a, long b) { a = a < 0 ? -a : a; b = b < 0 ? -b : b; while (b) { long t = a % b; a = b; b = t; } return a; }
inline int sm_gcd_i(int a, int b) { a = a < 0 ? -a : a; b = b < 0 ? -b : b; while (b) { int t = a % b; a = b; b = t; } return a; }
inline long sm_lcm_l(long a, long b) { long g = sm_gcd_l(a, b); if (g == 0) return 0; long r = (a / g) * b; return r < 0 ? -r : r; }
inline int sm_lcm_i(int a, int b) { int g = sm_gcd_i(a, b); if (g == 0) return 0; int r = (a / g) * b; return r < 0 ? -r : r; }
</%def>
