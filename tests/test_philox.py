"""Counter-based random numbers (Philox4x32-10): the numpy reference against the Random123 known-answer
vectors, the OpenCL kernel bit for bit against the numpy reference on every device, accuracy of our
own log/sin/cos/sqrt, and the distributions' statistics (moments, Kolmogorov-Smirnov on 10^6 draws).

Raw pyopencl buffers on ``cltorch.backend.runtime(i)``; no Tensor involved.
"""
import math
import warnings

import numpy as np
import pytest

from cltorch.backend import list_devices, runtime
from cltorch.ops import _philox_launch as L
from cltorch.ops import _philox_ref as R

# Known-answer vectors of Random123, file tests/kat_vectors (https://github.com/DEShawResearch/random123,
# the "philox4x32 7" and "philox4x32 10" lines; columns: name, rounds, CTR[4], KEY[2], EXPECTED[4]).
KAT = """
philox4x32 7 00000000 00000000 00000000 00000000 00000000 00000000   5f6fb709 0d893f64 4f121f81 4f730a48
philox4x32 7 ffffffff ffffffff ffffffff ffffffff ffffffff ffffffff   5207ddc2 45165e59 4d8ee751 8c52f662
philox4x32 7 243f6a88 85a308d3 13198a2e 03707344 a4093822 299f31d0   4dfccaba 190a87f0 c47362ba b6b5242a
philox4x32 10 00000000 00000000 00000000 00000000 00000000 00000000   6627e8d5 e169c58d bc57ac4c 9b00dbd8
philox4x32 10 ffffffff ffffffff ffffffff ffffffff ffffffff ffffffff   408f276d 41c83b0e a20bc7c6 6d5451fd
philox4x32 10 243f6a88 85a308d3 13198a2e 03707344 a4093822 299f31d0   d16cfe09 94fdcceb 5001e420 24126ea1
"""


def _kat():
    rows = []
    for line in KAT.strip().splitlines():
        f = line.split()
        vals = [int(v, 16) for v in f[2:]]
        rows.append((int(f[1]), vals[0:4], vals[4:6], vals[6:10]))
    return rows


DEVICE_IDS = list(range(len(list_devices())))
VWS = [None, 1]     # None: the device's default vector width (8 on CPU devices); 1: the scalar header call


@pytest.fixture(params=DEVICE_IDS, ids=lambda i: f"cl{i}")
def rt(request):
    return runtime(request.param)


def _need64(rt):
    if not rt.info.fp64:
        pytest.skip(f"{rt.info.name} has no fp64")


def _fill(rt, fn, n, dtype, *args, **kw):
    """Run a fill into a fresh buffer (with a 3-element offset and guard values) and read it back."""
    import pyopencl as cl
    dtype = np.dtype(dtype)
    off = 3
    host = np.full(n + off + 5, 77, dtype)
    guard = host.copy()
    buf = cl.Buffer(rt.ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=host)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if fn is L.fill_bits:
            used = fn(rt, buf, off, n, *args, **kw)
        else:
            used = fn(rt, buf, off, n, dtype, *args, **kw)
    cl.enqueue_copy(rt.queue, host, buf)
    rt.queue.finish()
    assert (host[:off] == guard[:off]).all() and (host[off + n:] == guard[off + n:]).all(), \
        "fill wrote outside its range"
    return host[off:off + n], used


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
    if not np.array_equal(a.view(np.uint8), b.view(np.uint8)):
        bad = np.nonzero(a.reshape(-1).view(np.uint8 if a.itemsize == 1 else f"u{a.itemsize}")
                         != b.reshape(-1).view(np.uint8 if b.itemsize == 1 else f"u{b.itemsize}"))[0]
        raise AssertionError(f"{len(bad)} of {a.size} differ; first at {bad[0]}: {a.reshape(-1)[bad[0]]!r} "
                             f"vs {b.reshape(-1)[bad[0]]!r}")


# ------------------------------------------------------------------------------------ known answers
@pytest.mark.parametrize("rounds,ctr,key,expected", _kat())
def test_reference_known_answers(rounds, ctr, key, expected):
    out = R.philox4x32(np.array(ctr, np.uint32), np.array(key, np.uint32), rounds=rounds)
    assert [int(v) for v in out] == expected


@pytest.mark.parametrize("vw", VWS)
def test_kernel_known_answers(rt, vw):
    # seed = key (low word first), counter = philox_offset (words 0, 1) + stream (words 2, 3)
    for rounds, ctr, key, expected in _kat():
        if rounds != 10:
            continue
        seed = key[0] | key[1] << 32
        out, used = _fill(rt, L.fill_bits, 4, np.uint32, seed, ctr[0] | ctr[1] << 32,
                          stream=ctr[2] | ctr[3] << 32, vector_width=vw)
        assert [int(v) for v in out] == expected and used == 1


def test_reference_counter_layout():
    # block b uses counter (offset + b) with the carry into word 1 and wrap modulo 2**64
    c = R.counters(2**32 - 1, 3, stream=5 << 32 | 7)
    assert c.tolist() == [[0xFFFFFFFF, 0, 7, 5], [0, 1, 7, 5], [1, 1, 7, 5]]
    c = R.counters(2**64 - 1, 2)
    assert c.tolist() == [[0xFFFFFFFF, 0xFFFFFFFF, 0, 0], [0, 0, 0, 0]]
    assert R.key_from_seed(-1) == (0xFFFFFFFF, 0xFFFFFFFF)
    assert R.key_from_seed(0x1234567890) == (0x34567890, 0x12)


# ------------------------------------------------------------------------- kernel == numpy, bitwise
SEEDS = [(0, 0), (2**40 + 12345, 2**32 - 3), (2**64 - 1, 2**64 - 2)]   # carries and wrap of the counter
SIZES = [1, 7, 37, 1000, 4099]


@pytest.mark.parametrize("vw", VWS + [4])
def test_bits_bitwise(rt, vw):
    for seed, off in SEEDS:
        for n in SIZES:
            out, used = _fill(rt, L.fill_bits, n, np.uint32, seed, off, vector_width=vw)
            _same_bits(out, R.bits(seed, off, n))
            assert used == R.counters_used("bits", n) == -(-n // 4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("vw", VWS)
def test_uniform_bitwise(rt, dtype, vw):
    if dtype == np.float64:
        _need64(rt)
    for seed, off in SEEDS:
        for n in SIZES:
            for low, high in ((0.0, 1.0), (-3.5, 2.25)):
                out, used = _fill(rt, L.fill_uniform, n, dtype, seed, off, low, high, vector_width=vw)
                ref = R.uniform(seed, off, n, dtype, low, high)
                _same_bits(out, ref)
                assert used == R.counters_used("uniform", n, dtype)
                assert (out >= dtype(low)).all() and (out < dtype(high)).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_uniform_never_reaches_high(rt, dtype):
    if dtype == np.float64:
        _need64(rt)
    low = dtype(1.0)
    high = np.nextafter(np.nextafter(low, dtype(2)), dtype(2))      # [1, 1 + 2 ulp): rounding hits high
    out, _ = _fill(rt, L.fill_uniform, 4000, dtype, 5, 0, float(low), float(high))
    _same_bits(out, R.uniform(5, 0, 4000, dtype, float(low), float(high)))
    assert (out < high).all() and (out >= low).all()
    assert len(np.unique(out)) == 2


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("vw", VWS)
def test_normal_bitwise(rt, dtype, vw):
    if dtype == np.float64:
        _need64(rt)
    for seed, off in SEEDS:
        for n in SIZES:
            out, used = _fill(rt, L.fill_normal, n, dtype, seed, off, 0.0, 1.0, vector_width=vw)
            _same_bits(out, R.normal(seed, off, n, dtype))
            assert used == R.counters_used("normal", n, dtype)
    out, _ = _fill(rt, L.fill_normal, 20001, dtype, 99, 17, -2.5, 0.375, vector_width=vw)
    _same_bits(out, R.normal(99, 17, 20001, dtype, -2.5, 0.375))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("vw", VWS)
def test_exponential_bitwise(rt, dtype, vw):
    if dtype == np.float64:
        _need64(rt)
    for seed, off in SEEDS:
        for n in SIZES:
            out, used = _fill(rt, L.fill_exponential, n, dtype, seed, off, 1.0, vector_width=vw)
            _same_bits(out, R.exponential(seed, off, n, dtype, 1.0))
            assert used == R.counters_used("exponential", n, dtype)
            assert (out > 0).all()
    out, _ = _fill(rt, L.fill_exponential, 20001, dtype, 4, 5, 3.7, vector_width=vw)
    _same_bits(out, R.exponential(4, 5, 20001, dtype, 3.7))


# every output dtype with the device's default vector width; the scalar path (vw=1) for one dtype
RANDINT_CASES = [(d, None) for d in (np.int64, np.int32, np.int8, np.bool_, np.float32, np.float64)] + \
    [(np.int64, 1)]


@pytest.mark.parametrize("dtype,vw", RANDINT_CASES)
def test_randint_bitwise(rt, dtype, vw):
    if dtype == np.float64:
        _need64(rt)
    ranges = {np.int8: [(-128, 128), (0, 3)], np.bool_: [(0, 2)]}.get(dtype, [(-5, 100), (0, 2**24), (7, 8)])
    if dtype == np.int64:
        ranges += [(-2**63, 2**63), (0, 3 * 2**61 + 5), (-2**62, 2**40)]
    for seed, off in SEEDS[:2]:
        for n in SIZES:
            for low, high in ranges:
                out, used = _fill(rt, L.fill_randint, n, dtype, seed, off, low, high, vector_width=vw)
                _same_bits(out, R.randint(seed, off, n, low, high, dtype))
                assert used == R.counters_used("randint", n) == -(-n // 2)
                if dtype != np.bool_:
                    assert (out >= low).all() and (out < high).all()


@pytest.mark.parametrize("dtype,vw", [(np.float32, None), (np.bool_, None), (np.uint8, 1)])
def test_bernoulli_bitwise(rt, dtype, vw):
    for seed, off in SEEDS[:2]:
        for n in SIZES:
            for p in (0.0, 0.3, 1.0, 0.5):
                out, used = _fill(rt, L.fill_bernoulli, n, dtype, seed, off, p, vector_width=vw)
                _same_bits(out, R.bernoulli(seed, off, n, p, dtype))
                assert used == R.counters_used("bernoulli", n)
                if p == 0.0:
                    assert not out.any()
                if p == 1.0:
                    assert out.all()


@pytest.mark.parametrize("p_dtype,vw", [(np.float32, None), (np.float32, 1), (np.float64, None)])
def test_bernoulli_tensor_p_bitwise(rt, p_dtype, vw):
    import pyopencl as cl
    if p_dtype == np.float64:
        _need64(rt)
    n = 5003
    p = np.random.default_rng(1).uniform(size=n + 2).astype(p_dtype)
    p[:6] = [0.0, 1.0, -0.5, 2.0, np.nan, 1e-9]
    pbuf = cl.Buffer(rt.ctx, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=p)
    out, used = _fill(rt, L.fill_bernoulli, n, np.float32, 11, 3, p_buf=pbuf, p_offset=2, p_dtype=p_dtype,
                      vector_width=vw)
    _same_bits(out, R.bernoulli(11, 3, n, p[2:], np.float32))
    assert out[0] == 0 and out[1] == 1 and out[2] == 0          # p = -0.5, 2.0, NaN


def test_bernoulli_tensor_p_edges():
    # p < 0 or NaN never fires, p >= 1 always fires (ceil(p * 2**32) saturated), exactly as OpenCL's
    # convert_ulong_sat_rtp
    t = R.bernoulli_threshold(np.array([0.0, 1.0, -0.5, 2.0, np.nan, 1e-9, 0.5, np.inf], np.float32))
    assert t.tolist() == [0, 2**32, 0, 2**33, 0, 5, 2**31, 2**64 - 1]


@pytest.mark.parametrize("local_size", [None, 1, 16, 64])
def test_independent_of_local_size(rt, local_size):
    n = 10007
    out, _ = _fill(rt, L.fill_normal, n, np.float32, 3, 1, local_size=local_size)
    _same_bits(out, R.normal(3, 1, n, np.float32))
    out, _ = _fill(rt, L.fill_bits, n, np.uint32, 3, 1, local_size=local_size, vector_width=1)
    _same_bits(out, R.bits(3, 1, n))


def test_consecutive_fills_continue_the_stream(rt):
    # a Generator advances its offset by the counters a fill used: two fills = one fill of the sum
    n1, n2 = 4 * 37, 501
    a, u1 = _fill(rt, L.fill_normal, n1, np.float32, 8, 100)
    b, u2 = _fill(rt, L.fill_normal, n2, np.float32, 8, 100 + u1)
    _same_bits(np.concatenate([a, b]), R.normal(8, 100, n1 + n2, np.float32))
    c, _ = _fill(rt, L.fill_bits, 4, np.uint32, 8, 100 + u1 + u2)
    _same_bits(c, R.random_words(8, 100 + u1 + u2, 1).reshape(-1))


def test_streams_differ(rt):
    a, _ = _fill(rt, L.fill_bits, 64, np.uint32, 1, 0, stream=0)
    b, _ = _fill(rt, L.fill_bits, 64, np.uint32, 1, 0, stream=1)
    _same_bits(b, R.bits(1, 0, 64, stream=1))
    assert (a != b).mean() > 0.9


def test_empty_and_errors(rt):
    import pyopencl as cl
    buf = cl.Buffer(rt.ctx, cl.mem_flags.READ_WRITE, 64)
    assert L.fill_normal(rt, buf, 0, 0, np.float32, 1, 0) == 0
    with pytest.raises(TypeError, match="float16"):
        L.fill_normal(rt, buf, 0, 4, np.float16, 1, 0)
    with pytest.raises(TypeError):
        L.fill_randint(rt, buf, 0, 4, np.complex64, 1, 0, 0, 3)
    with pytest.raises(ValueError, match="from=3 >= to=3"):
        L.fill_randint(rt, buf, 0, 4, np.int64, 1, 0, 3, 3)
    with pytest.raises(ValueError, match="lambda"):
        L.fill_exponential(rt, buf, 0, 4, np.float32, 1, 0, lambd=0.0)
    with pytest.raises(ValueError, match="vector_width"):
        L.fill_bits(rt, buf, 0, 4, 1, 0, vector_width=3)


# --------------------------------------------------------------- accuracy of the elementary functions
def _ulps(got, exact, ftype):
    ulp = np.spacing(np.abs(exact).astype(ftype)).astype(np.float64)
    return np.abs(got.astype(np.float64) - exact) / ulp


def test_log_float32_all_inputs_within_2ulp():
    m = np.arange(1 << 23, dtype=np.uint32)                     # every u the float32 draws can give
    u = ((m << np.uint32(1)) | np.uint32(1)).astype(np.float32) * np.float32(2.0 ** -24)
    e = _ulps(R.log(u, R.FLOAT), np.log(u.astype(np.float64)), np.float32)
    assert e.max() < 2.0, e.max()
    x = np.exp2(np.random.default_rng(0).uniform(-125, 127, 200000)).astype(np.float32)
    assert _ulps(R.log(x, R.FLOAT), np.log(x.astype(np.float64)), np.float32).max() < 2.0
    assert R.log(np.float32(1.0), R.FLOAT) == 0.0


def test_sincos_float32_all_angles_within_2ulp():
    k = np.arange(1 << 24, dtype=np.uint32)
    k = k[(k & np.uint32((1 << 22) - 1)) != 0]                 # exact zeros of cos/sin: checked below
    c, s = R.sincos_turns(k, R.FLOAT)
    ang = 2 * np.pi * k.astype(np.float64) / 2.0 ** 24
    assert _ulps(c, np.cos(ang), np.float32).max() < 2.0
    assert _ulps(s, np.sin(ang), np.float32).max() < 2.0
    c, s = R.sincos_turns(np.array([0, 1 << 22, 2 << 22, 3 << 22], np.uint32), R.FLOAT)
    assert np.abs(c).tolist() == [1, 0, 1, 0] and np.abs(s).tolist() == [0, 1, 0, 1]


def test_sqrt_within_1ulp():
    v = np.exp2(np.random.default_rng(2).uniform(-120, 120, 200000))
    assert _ulps(R.sqrt(v.astype(np.float32), R.FLOAT), np.sqrt(v.astype(np.float32).astype(np.float64)),
                 np.float32).max() < 1.0
    assert _ulps(R.sqrt(v, R.DOUBLE), np.sqrt(v), np.float64).max() <= 1.0
    assert R.sqrt(np.float32(0), R.FLOAT) == 0


def test_float64_functions_accuracy():
    # references in long double (80-bit on x86; skipped where long double is just double)
    if np.finfo(np.longdouble).nmant < 60:
        pytest.skip("no extended long double on this platform")
    rng = np.random.default_rng(3)
    w = rng.integers(0, 2**64 - 1, 200000, dtype=np.uint64)
    u = R._open_unit_from(w, R.DOUBLE)
    ex = np.log(u.astype(np.longdouble))
    err = np.abs(R.log(u, R.DOUBLE).astype(np.longdouble) - ex) / np.spacing(np.abs(ex).astype(np.float64))
    assert float(err.max()) < 2.0
    # angles in the first octants of each quadrant, away from the zeros where long double's own
    # rounding of pi dominates
    k = rng.integers(1 << 40, (1 << 51) - (1 << 40), 200000, dtype=np.uint64)
    c, s = R.sincos_turns(k, R.DOUBLE)
    pi = np.longdouble("3.14159265358979323846264338327950288")
    ang = 2 * pi * k.astype(np.longdouble) / np.longdouble(2.0 ** 53)
    for got, ref in ((c, np.cos(ang)), (s, np.sin(ang))):
        err = np.abs(got.astype(np.longdouble) - ref) / np.spacing(np.abs(ref).astype(np.float64))
        assert float(err.max()) < 2.0


# ---------------------------------------------------------------------------------- statistics
N_STAT = 10 ** 6


def _ks_statistic(x, cdf):
    x = np.sort(x.astype(np.float64))
    f = cdf(x)
    n = len(x)
    i = np.arange(1, n + 1, dtype=np.float64)
    return max(np.max(i / n - f), np.max(f - (i - 1) / n))


def _ks_critical(n, alpha=0.001):
    # asymptotic Kolmogorov distribution: P(sqrt(n) D > c) = alpha, c = sqrt(-ln(alpha / 2) / 2)
    return math.sqrt(-math.log(alpha / 2) / 2) / math.sqrt(n)


_erf = np.frompyfunc(math.erf, 1, 1)


def _normal_cdf(x):
    return 0.5 * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_normal_moments_and_ks(rt, dtype):
    if dtype == np.float64:
        _need64(rt)
    z, _ = _fill(rt, L.fill_normal, N_STAT, dtype, 2024, 0)
    z64 = z.astype(np.float64)
    n = len(z)
    mean, var = z64.mean(), z64.var()
    assert abs(mean) < 5 / math.sqrt(n)
    assert abs(var - 1) < 5 * math.sqrt(2 / n)
    skew = ((z64 - mean) ** 3).mean() / var ** 1.5
    kurt = ((z64 - mean) ** 4).mean() / var ** 2
    assert abs(skew) < 5 * math.sqrt(6 / n) and abs(kurt - 3) < 5 * math.sqrt(24 / n)
    assert _ks_statistic(z64, _normal_cdf) < _ks_critical(n)
    # tails: P(|z| > 3) = 0.0026998
    assert abs((np.abs(z64) > 3).mean() - 0.0026998) < 5 * math.sqrt(0.0027 / n)
    # scaled draws
    y, _ = _fill(rt, L.fill_normal, 200000, dtype, 7, 0, 10.0, 0.5)
    assert abs(y.mean() - 10) < 5 * 0.5 / math.sqrt(len(y)) and abs(y.std() - 0.5) < 0.01


def test_uniform_and_exponential_ks(rt):
    u, _ = _fill(rt, L.fill_uniform, N_STAT, np.float32, 31, 0)
    assert _ks_statistic(u, lambda x: x) < _ks_critical(N_STAT)
    e, _ = _fill(rt, L.fill_exponential, N_STAT, np.float32, 32, 0, 2.0)
    assert _ks_statistic(e, lambda x: 1 - np.exp(-2.0 * x)) < _ks_critical(N_STAT)
    assert abs(e.astype(np.float64).mean() - 0.5) < 5 * 0.5 / math.sqrt(N_STAT)


def test_randint_and_bernoulli_frequencies(rt):
    n = 200000
    r, _ = _fill(rt, L.fill_randint, n, np.int64, 5, 0, -3, 7)
    counts = np.bincount(r + 3, minlength=10)
    expected = n / 10
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 33.7                      # chi-square, 9 degrees of freedom, p = 1e-4
    b, _ = _fill(rt, L.fill_bernoulli, n, np.float32, 6, 0, 0.3)
    assert abs(b.mean() - 0.3) < 5 * math.sqrt(0.21 / n)
