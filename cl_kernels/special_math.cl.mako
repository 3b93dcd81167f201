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
##  - Bessel J0, J1, Y0, Y1, K0, K1 (and the scaled K's), Airy Ai: see the comments at their helpers (series,
##    Miller's recurrence and Hankel's expansion; the trapezoidal rule on K's integral; Taylor steps of Airy's ODE).
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
<% MILLER_PAD, HANKEL_X, TRAP_H, AIRY_NEG = (20, 8, "0.5f", 8) if S == "f" else (40, 20, "0.25", 12) %>
/* Bessel J0, J1, Y0, Y1 of x > 0, selected by `which` (0..3). x < 1: the power series (A&S 9.1.10-11; Y's with
   their logarithmic terms, no cancellation there). 1 <= x < ${HANKEL_X}: Miller's backward recurrence
   J_(k-1) = (2k/x) J_k - J_(k+1) from an even start well above x, normalised by 1 = J0 + 2 sum J_2m (A&S 9.1.46),
   with Y0 = (2/pi)(ln(x/2) + gamma) J0 - (4/pi) sum (-1)^m J_2m / m (A&S 9.1.88) and Y1 = -Y0' from the same J's.
   Beyond: Hankel's asymptotic expansion with the phase written through sin x and cos x (A&S 9.2.5-10). */
inline ${T} sm_bessel_jy_${S}(int which, ${T} x) {
    const ${T} TWO_PI = 0.63661977236758134${L}, GAM = 0.57721566490153286${L};
    if (x < 1) {
        ${T} h = 0.25${L} * x * x, lg = log(0.5${L} * x) + GAM;
        ${T} t0 = 1, t1 = 0.5${L} * x, j0 = 1, j1 = t1, hk = 0, s0 = 0, s1 = t1;   /* s1: k = 0 term, psi sum 1 */
        for (int k = 1; k < 30; k++) {
            t0 *= -h / (k * k);
            t1 *= -h / (k * (k + 1));
            hk += 1.0${L} / k;
            j0 += t0; j1 += t1;
            s0 -= t0 * hk;                                  /* sum (-1)^(k+1) H_k (x^2/4)^k / k!^2 */
            s1 += t1 * (2 * hk + 1.0${L} / (k + 1));          /* sum (-1)^k (H_k + H_(k+1)) (x/2)^(2k+1) / (k!(k+1)!) */
            if (fabs(t0) < ${EPS} * 1e-3${L}) break;
        }
        if (which == 0) return j0;
        if (which == 1) return j1;
        if (which == 2) return TWO_PI * (lg * j0 + s0);
        /* Y1 = -2/(pi x) + (2/pi) ln(x/2) J1 - (1/pi) sum (-1)^k (psi(k+1) + psi(k+2)) (x/2)^(2k+1)/(k!(k+1)!),
           psi(k+1) + psi(k+2) = H_k + H_(k+1) - 2 gamma */
        return -TWO_PI / x + TWO_PI * lg * j1 - 0.5${L} * TWO_PI * s1;
    }
    if (x < ${HANKEL_X}) {
        int n = 2 * (((int)x + ${MILLER_PAD}) / 2);
        ${T} jp = 0, jc = 1e-20${L}, norm = 0, s0 = 0, s1 = 0, j1 = 0, j0 = 0;
        /* contributions of index n (even): to the norm and to s0 */
        norm += 2 * jc;
        s0 += ((n / 2) % 2 ? -jc : jc) / (n / 2);
        for (int k = n; k >= 1; k--) {
            ${T} jm = (2 * k / x) * jc - jp;            /* J_(k-1) */
            int i = k - 1;
            if (i == 0) { j0 = jm; j1 = jc; }
            else if (i % 2 == 0) { int m = i / 2; norm += 2 * jm; s0 += (m % 2 ? -jm : jm) / m; }
            else { int m = (i + 1) / 2; ${T} c = 1.0${L} / m + (m > 1 ? 1.0${L} / (m - 1) : 0); s1 += (m % 2 ? -c : c) * jm; }
            jp = jc; jc = jm;
            if (fabs(jc) > 1e10${L}) { jc *= 1e-10${L}; jp *= 1e-10${L}; norm *= 1e-10${L}; s0 *= 1e-10${L}; s1 *= 1e-10${L}; }
        }
        ${T} tot = j0 + norm, J0 = j0 / tot, J1 = j1 / tot, lg = log(0.5${L} * x) + GAM;
        if (which == 0) return J0;
        if (which == 1) return J1;
        if (which == 2) return TWO_PI * lg * J0 - 2 * TWO_PI * s0 / tot;
        return -TWO_PI * (J0 / x - lg * J1) + TWO_PI * s1 / tot;
    }
    /* Hankel: J = sqrt(2/(pi x)) (P cos chi - Q sin chi), Y = sqrt(2/(pi x)) (P sin chi + Q cos chi), chi = x - (2nu+1) pi/4 */
    int nu = which & 1;
    ${T} mu = 4 * nu * nu, P = 1, Q = 0, a = 1, prev = INFINITY;
    for (int k = 1; k < 60; k++) {
        a *= (mu - (2 * k - 1) * (2 * k - 1)) / (8 * k * x);
        if (fabs(a) > prev) break;                      /* the asymptotic series starts to diverge */
        prev = fabs(a);
        int r = k % 4;                                  /* a_k with sign (-1)^floor(k/2) into P (even k) or Q (odd k) */
        if (r == 0) P += a; else if (r == 1) Q += a; else if (r == 2) P -= a; else Q -= a;
        if (fabs(a) < ${EPS} * 1e-2${L}) break;
    }
    ${T} sx = sin(x), cx = cos(x), c, sn;
    if (nu == 0) { c = (cx + sx); sn = (sx - cx); }     /* sqrt(2) cos(x - pi/4), sqrt(2) sin(x - pi/4) */
    else { c = (sx - cx); sn = -(sx + cx); }            /* sqrt(2) cos(x - 3pi/4), sqrt(2) sin(x - 3pi/4) */
    ${T} amp = rsqrt(${"M_PI_F" if S == "f" else "M_PI"} * x);   /* sqrt(2/(pi x)) / sqrt(2) */
    return which < 2 ? amp * (P * c - Q * sn) : amp * (P * sn + Q * c);
}
inline ${T} sm_bessel_j0_${S}(${T} x) {
    if (isnan(x)) return x;
    x = fabs(x);
    if (isinf(x)) return (${T})NAN;                        /* PyTorch's value at infinity */
    return x == 0 ? 1 : sm_bessel_jy_${S}(0, x);
}
inline ${T} sm_bessel_j1_${S}(${T} x) {
    if (isnan(x) || x == 0) return x;
    if (isinf(x)) return (${T})NAN;
    ${T} r = sm_bessel_jy_${S}(1, fabs(x));
    return x < 0 ? -r : r;
}
inline ${T} sm_bessel_y0_${S}(${T} x) {
    if (isnan(x)) return x;
    if (x < 0) return (${T})NAN;
    if (x == 0) return -INFINITY;
    return isinf(x) ? (${T})NAN : sm_bessel_jy_${S}(2, x);
}
inline ${T} sm_bessel_y1_${S}(${T} x) {
    if (isnan(x)) return x;
    if (x < 0) return (${T})NAN;
    if (x == 0) return -INFINITY;
    return isinf(x) ? (${T})NAN : sm_bessel_jy_${S}(3, x);
}
/* e^x K_nu(x) for x > 0 = int_0^inf exp(-x (cosh t - 1)) cosh(nu t) dt (A&S 9.6.24), by the trapezoidal rule:
   the integrand is entire and decays doubly exponentially, so the rule converges geometrically in 1/h
   (Trefethen & Weideman, SIAM Review 2014); h shrinks as 1/sqrt(x) with the width of the integrand's peak. */
inline ${T} sm_kscaled_${S}(${T} nu, ${T} x) {
    ${T} h = ${TRAP_H} * (x > 2 ? sqrt(2 / x) : 1), sum = 0.5${L};
    for (int k = 1; k < 2000; k++) {
        ${T} t = k * h, sh = sinh(0.5${L} * t), e = -2 * x * sh * sh;
        ${T} f = 0.5${L} * (exp(e + nu * t) + exp(e - nu * t));
        sum += f;
        if (f < ${EPS} * 1e-2${L} * sum) break;
    }
    return sum * h;
}
inline ${T} sm_mbk_${S}(${T} nu, ${T} x, int scaled) {
    if (isnan(x)) return x;
    if (x < 0) return (${T})NAN;
    if (x == 0) return INFINITY;
    if (isinf(x)) return 0;
    ${T} r = sm_kscaled_${S}(nu, x);
    return scaled ? r : r * exp(-x);
}
inline ${T} sm_modified_bessel_k0_${S}(${T} x) { return sm_mbk_${S}(0, x, 0); }
inline ${T} sm_modified_bessel_k1_${S}(${T} x) { return sm_mbk_${S}(1, x, 0); }
inline ${T} sm_scaled_modified_bessel_k0_${S}(${T} x) { return sm_mbk_${S}(0, x, 1); }
inline ${T} sm_scaled_modified_bessel_k1_${S}(${T} x) { return sm_mbk_${S}(1, x, 1); }
/* Airy Ai. x > 1: (1/pi) sqrt(x/3) K_(1/3)(z), z = 2/3 x^(3/2) (A&S 10.4.14). -${AIRY_NEG} <= x <= 1: Taylor steps of
   at most 1/4 from Ai(0), Ai'(0) (A&S 10.4.4-5) along Ai'' = x Ai, whose Taylor coefficients obey
   (n+2)(n+1) a_(n+2) = x0 a_n + a_(n-1). Below: the asymptotic expansion in u_k (A&S 10.4.60, DLMF 9.7.9). */
inline ${T} sm_airy_ai_${S}(${T} x) {
    if (isnan(x)) return x;
    if (isinf(x)) return (${T})NAN;                        /* PyTorch's value at +-infinity */
    if (x > 1) {
        ${T} z = 0.66666666666666667${L} * x * sqrt(x);
        return sqrt(x / 3) * 0.31830988618379067${L} * exp(-z) * sm_kscaled_${S}(0.33333333333333333${L}, z);
    }
    if (x >= -${AIRY_NEG}) {
        ${T} y = 0.35502805388781724${L}, yp = -0.25881940379280680${L}, x0 = 0;
        int steps = (int)ceil(fabs(x) * 4);
        ${T} h = steps ? x / steps : 0;
        for (int s = 0; s < steps; s++) {
            ${T} am3 = 0, am2 = y, am1 = yp, ny = y + yp * h, nyp = yp, hp = h;   /* hp = h^(n-1) */
            for (int n = 2; n < 32; n++) {
                ${T} an = (x0 * am2 + am3) / (n * (n - 1));
                nyp += n * an * hp;
                hp *= h;
                ny += an * hp;
                am3 = am2; am2 = am1; am1 = an;
            }
            y = ny; yp = nyp; x0 += h;
        }
        return y;
    }
    ${T} X = -x, z = 0.66666666666666667${L} * X * sqrt(X), u = 1, P = 1, Q = 0, zk = 1, prev = INFINITY;
    for (int k = 1; k < 60; k++) {
        u *= (6 * k - 5) * (6 * k - 3) * (6 * k - 1) / ((${T})(2 * k - 1) * 216 * k);
        zk /= z;
        ${T} term = u * zk;
        if (term > prev) break;
        prev = term;
        int r = k % 4;                                  /* (-1)^floor(k/2) u_k / z^k into P (even) or Q (odd) */
        if (r == 0) P += term; else if (r == 1) Q += term; else if (r == 2) P -= term; else Q -= term;
        if (term < ${EPS} * 1e-2${L}) break;
    }
    ${T} sx = sin(z), cx = cos(z);                       /* cos(z - pi/4) = (cos z + sin z)/sqrt 2, sin(z - pi/4) = (sin z - cos z)/sqrt 2 */
    return (P * (cx + sx) + Q * (sx - cx)) * 0.70710678118654752${L} * 0.56418958354775629${L} / sqrt(sqrt(X));
}
% endfor
inline long sm_gcd_l(long a, long b) { a = a < 0 ? -a : a; b = b < 0 ? -b : b; while (b) { long t = a % b; a = b; b = t; } return a; }
inline int sm_gcd_i(int a, int b) { a = a < 0 ? -a : a; b = b < 0 ? -b : b; while (b) { int t = a % b; a = b; b = t; } return a; }
inline long sm_lcm_l(long a, long b) { long g = sm_gcd_l(a, b); if (g == 0) return 0; long r = (a / g) * b; return r < 0 ? -r : r; }
inline int sm_lcm_i(int a, int b) { int g = sm_gcd_i(a, b); if (g == 0) return 0; int r = (a / g) * b; return r < 0 ? -r : r; }
</%def>
