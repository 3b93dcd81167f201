## Fused scaled-dot-product attention, flash style: tiled over keys with an online softmax, O(L) extra memory,
## the row logsumexp saved for a backward that recomputes the attention weights (FlashAttention-2: Tri Dao,
## "FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning", 2023; the online softmax
## of Milakov & Gimelshein, "Online normalizer calculation for softmax", 2018).
##
## Register blocking instead of local memory (the CPU path; see POCL-NOTES.md): a work-item owns BM query rows
## (forward, dQ) or BN keys (dK/dV) and keeps its accumulators in vector registers of VW lanes; scores are
## computed VW keys at a time from K^T (so no horizontal sums), each scalar of the streamed operand broadcast
## against a vector of the owned one.
##
## Parameters: T storage type; CT compute type; VW vector width (1, 2, 4, 8); E head dim of q/k; EV head dim
## of v; EVP = EV rounded up to VW; BM query rows per work-item (forward), BMQ (dQ); BN keys per block (forward
## BNQ (dQ); multiples of VW); BNK keys per work-item (dK/dV; a multiple of VW) and BQ query rows per step there;
## mask "none" | "bool" | "float" (MT its storage type); causal: top-left aligned tril(L, S).
## Batch: a query/output batch index bh = b0 * H + h; the k/v batch index is kvh = b0 * Hk + h / (H / Hk).
## Packed operands (made by sdpa_pack, zero padded): Kt[kvh][E][SP] (K transposed), Vp[kvh][SP][EVP] (V rows),
## Vt[kvh][EV][SP], Kp[kvh][SP][EP] (K rows, EP = E rounded up to VW). SP = S rounded up to BN.
<%namespace name="cm" file="common.cl.mako"/>
${cm.preamble(types)}
## a * b + c may be one fused multiply-add, except in deterministic mode: whether a compiler fuses depends on
## the device (NVIDIA and x86 CPUs with FMA do, a CPU without it cannot), so there every product is rounded
#pragma OPENCL FP_CONTRACT ${"OFF" if context.get("deterministic") else "ON"}
<%
    V = "%s%d" % (CT, VW) if VW > 1 else CT
    NB = BN // VW
    NBK = BNK // VW
    NBQ = BNQ // VW
    EV8 = EVP // VW
    LANES = "0123456789abcdef"
    def lane(v, e):
        return v if VW == 1 else "%s.s%s" % (v, LANES[e])
    def vload(ptr):
        return "(*(__global const %s*)(%s))" % (V, ptr)
    NEG = "(-INFINITY)"
    IDS = "long" if CT == "double" else "int"
    IDX = IDS + (str(VW) if VW > 1 else "")
    LANE_IDS = "(%s)(%s)" % (IDX, ", ".join(str(e) for e in range(VW))) if VW > 1 else "0"
%>
typedef ${V} vec_t;
#define MINL(a, b) ((a) < (b) ? (a) : (b))

## exp of a vector. float: 2^n * e^r with n = round(x log2 e), r = x - n ln 2 split in two parts (Cody & Waite),
## e^r from Cephes' expf polynomial (about 1 ulp on |r| <= ln2/2); x below -87.3 (and -inf) gives 0, x above
## 88.7 gives +inf, NaN propagates. The builtin exp becomes a scalar library call per lane on PoCL, several
## times slower. double: the builtin.
% if CT == "float":
<%
    IV = "int%d" % VW if VW > 1 else "int"
    AS_I = "as_%s" % IV
    AS_F = "as_%s" % V
%>
inline vec_t vexp(vec_t x)
{
    const vec_t lo = (vec_t)(-87.3f), hi = (vec_t)(88.7f);
    vec_t xc = x < lo ? lo : x;
    xc = xc > hi ? hi : xc;
    vec_t t = xc * 1.44269504088896341f + 12582912.0f;
    ${IV} n = ${AS_I}(t) - 0x4B400000;
    vec_t nf = t - 12582912.0f;
    vec_t r = xc - nf * 0.693359375f;
    r = r - nf * -2.12194440e-4f;
    vec_t p = 1.9875691500E-4f;
    p = p * r + 1.3981999507E-3f;
    p = p * r + 8.3334519073E-3f;
    p = p * r + 4.1665795894E-2f;
    p = p * r + 1.6666665459E-1f;
    p = p * r + 5.0000001201E-1f;
    p = p * (r * r) + r + 1.0f;
    vec_t e = p * ${AS_F}((n + 127) << 23);
    e = x < lo ? (vec_t)(0.0f) : e;
    e = x > hi ? (vec_t)(INFINITY) : e;
    e = x != x ? x : e;
    return e;
}
% else:
inline vec_t vexp(vec_t x) { return exp(x); }
% endif

inline ${CT} hmax_v(vec_t v)
{
% if VW == 1:
    return v;
% else:
    ${CT} r = v.s0;
% for e in range(1, VW):
    r = ${lane("v", e)} > r ? ${lane("v", e)} : r;
% endfor
    return r;
% endif
}

inline ${CT} hsum_v(vec_t v)
{
% if VW == 1:
    return v;
% elif VW == 2:
    return v.s0 + v.s1;
% elif VW == 4:
    return (v.s0 + v.s1) + (v.s2 + v.s3);
% else:
    return ((v.s0 + v.s1) + (v.s2 + v.s3)) + ((v.s4 + v.s5) + (v.s6 + v.s7));
% endif
}

% if dropout:
## Dropout inside the kernels: Philox4x32-10 (Salmon et al., SC 2011; the rounds of Random123's philox4x32, here on
## vectors of blocks with 64-bit products instead of the mul_hi builtin, which PoCL calls out of line). Element
## (bh, i, j) of the attention weights uses word (idx & 3) of block (idx >> 2), idx = (bh * L + i) * SP4 + j,
## with SP4 = S rounded up to 4, counter = (ctr0 + block) (low word, high word, 0, 0) and key = (k0, k1): the
## same numbers as cltorch.ops._philox_ref.random_words(seed, ctr0, ...). A weight is kept (and scaled by
## pscale = 1 / (1 - p)) when its word is >= thr = ceil(p * 2^32).
## high word of a 32 x 32 bit product from 16-bit halves (plain 32-bit vector arithmetic; mul_hi and 64-bit
## converts are out-of-line calls on PoCL)
#define mulhi_v(a, m) ((((a) >> 16) * ((m) >> 16)) + ((((a) >> 16) * ((m) & 0xFFFFu)) >> 16) + ((((a) & 0xFFFFu) * ((m) >> 16)) >> 16) + ((((((a) & 0xFFFFu) * ((m) & 0xFFFFu)) >> 16) + ((((a) >> 16) * ((m) & 0xFFFFu)) & 0xFFFFu) + ((((a) & 0xFFFFu) * ((m) >> 16)) & 0xFFFFu)) >> 16))
<%def name="keep_vectors(out, rowbase, j0, nkeys)">
## The Philox blocks of nkeys / 4 consecutive blocks, as vectors of power-of-two widths (e.g. 6 = 4 + 2), then
## the kept weights' multipliers ${out}_n for key vectors n.
    {
<%
        P = nkeys // 4
        chunks, start = [], 0
        for w in (16, 8, 4, 2, 1):
            while P - start >= w:
                chunks.append((start, w))
                start += w
        UV = "uint%d" % VW if VW > 1 else "uint"
        comps = "0123456789abcdef"
        def word(key):
            blk, wd = key // 4, key % 4
            for ci, (st, w) in enumerate(chunks):
                if st <= blk < st + w:
                    return "x%d_%d" % (wd, ci) + ("" if w == 1 else ".s%s" % comps[blk - st])
%>\
        ulong cb = ctr0 + ((ulong)(${rowbase} + ${j0}) >> 2);
        uint cb0 = (uint)cb, cb1 = (uint)(cb >> 32);
% for ci, (st, w) in enumerate(chunks):
<%
        UP = "uint%d" % w if w > 1 else "uint"
        lanes_u = "(%s)(%s)" % (UP, ", ".join("%du" % (st + b) for b in range(w))) if w > 1 else "%du" % st
%>\
        ${UP} x0_${ci}, x1_${ci}, x2_${ci}, x3_${ci};
        {
            ${UP} x0 = (${UP})(cb0) + ${lanes_u};
            ${UP} x1 = (${UP})(cb1) + (x0 < ${lanes_u} ? (${UP})(1u) : (${UP})(0u));   // carry of the low word
            ${UP} x2 = (${UP})(0u), x3 = (${UP})(0u);
            uint kk0 = k0, kk1 = k1;
            for (int rnd = 0; rnd < 10; ++rnd) {
                ${UP} y0 = mulhi_v(x2, 0xCD9E8D57u) ^ x1 ^ (${UP})(kk0);
                ${UP} y2 = mulhi_v(x0, 0xD2511F53u) ^ x3 ^ (${UP})(kk1);
                x1 = x2 * 0xCD9E8D57u;
                x3 = x0 * 0xD2511F53u;
                x0 = y0;
                x2 = y2;
                kk0 += 0x9E3779B9u;
                kk1 += 0xBB67AE85u;
            }
            x0_${ci} = x0; x1_${ci} = x1; x2_${ci} = x2; x3_${ci} = x3;
        }
% endfor
% for n in range(nkeys // VW):
        ${out}_${n} = convert_${IDX}((${UV})(${", ".join(word(n * VW + e) for e in range(VW))}) >= (${UV})(thr)) ? (vec_t)(pscale) : (vec_t)(0);
% endfor
    }
</%def>
% endif

## Pack: dst[b][a][c] (contiguous, a < AP, c < CP) = src[b0 * sb0 + h * sh + a * sa + c * sc] for a < A, c < C,
## else 0; b = b0 * NH + h. One work-item per destination row (b, a).
__kernel void sdpa_pack(__global ${CT}* dst, __global const ${T}* src, long s_off, long sb0, long sh, long sa,
                        long sc, long NH, long A, long C, long AP, long CP, long total)
{
    long gid = get_global_id(0);
    if (gid >= total) return;
    long a = gid % AP, b = gid / AP;
    long b0 = b / NH, h = b - b0 * NH;
    __global ${CT}* d = dst + gid * CP;
    if (a >= A) {
        for (long c = 0; c < CP; ++c) d[c] = 0;
        return;
    }
    __global const ${T}* s = src + s_off + b0 * sb0 + h * sh + a * sa;
    for (long c = 0; c < C; ++c) d[c] = (${CT})s[c * sc];
    for (long c = C; c < CP; ++c) d[c] = 0;
}

<%def name="score_fixups(si, i_expr, j0, nrows, nkeys)">
## Masks, causal and the key tail on the score vectors ${si}_i_n of rows ${i_expr}(i) and keys j0 + n*VW + lane,
## as vector compares and selects (compact code; the per-lane form made the program slow to build).
    {
% if mask != "none":
        int need = 1;
% else:
        int need = (${j0} + ${nkeys} > S)${" || (%s + %d - 1 > %s)" % (j0, nkeys, i_expr(0)) if causal else ""};
% endif
        if (need) {
% for n in range(nkeys // VW):
            ${IDX} jv${n} = (${IDX})(${j0} + ${n * VW}) + ${LANE_IDS};
% endfor
% for i in range(nrows):
            {
                long ii = ${i_expr(i)};
% if mask != "none":
                long iic = ii < L - 1 ? ii : L - 1;
                __global const ${MT}* mrow = Mk + m_off + b0 * smb + h * smh + iic * sml;
% endif
% for n in range(nkeys // VW):
                {
<% jl = lambda e: "MINL(%s + %d, S - 1) * sms" % (j0, n * VW + e) %>\
% if VW == 1:
                    ${IDX} bad = jv${n} >= S${" || jv%d > ii" % n if causal else ""};
% else:
                    ${IDX} bad = jv${n} >= (${IDX})(S)${" | jv%d > (%s)(ii)" % (n, IDX) if causal else ""};
% endif
% if mask == "float":
                    ${si}_${i}_${n} += (vec_t)(${", ".join("(%s)mrow[%s]" % (CT, jl(e)) for e in range(VW))});
% elif mask == "bool":
% if VW == 1:
                    bad = bad || !mrow[${jl(0)}];
% else:
                    bad |= (${IDX})(${", ".join("(%s)mrow[%s]" % (IDS, jl(e)) for e in range(VW))}) == (${IDX})(0);
% endif
% endif
                    ${si}_${i}_${n} = bad ? (vec_t)(${NEG}) : ${si}_${i}_${n};
                }
% endfor
            }
% endfor
        }
    }
</%def>

## Forward. Work-item gid = bh * nqb + qb owns query rows [qb*BM*R, qb*BM*R + BM*R) of batch bh, in R groups of
## BM rows. For cache reuse it walks the keys in chunks of SC keys: for each chunk, each group of BM rows runs
## the register-blocked inner loop (scores for BN keys, online softmax, P V) with its accumulators reloaded
## from private memory, so one chunk of K and V serves BM*R rows while it is hot in cache.
__kernel void sdpa_fwd(__global ${T}* O, __global ${CT}* LSE,
                       __global const ${T}* Q, long q_off, long sqb, long sqh, long sql, long sqd,
                       __global const ${CT}* Kt, __global const ${CT}* Vp,
                       __global const ${MT}* Mk, long m_off, long smb, long smh, long sml, long sms,
                       long L, long S, long SP, long H, long Hk, long nqb, long total, ${CT} scale, long SC
% if dropout:
                       , uint k0, uint k1, ulong ctr0, uint thr, ${CT} pscale, long SP4
% endif
                       )
{
    long gid = get_global_id(0);
    if (gid >= total) return;
    long bh = gid / nqb, qb = gid - bh * nqb;
    long b0 = bh / H, h = bh - b0 * H;
    long kvh = b0 * Hk + h / (H / Hk);
    long iw = qb * ${BM * R};
    ${CT} q[${BM * R}][${E}];
    for (int i = 0; i < ${BM * R}; ++i) {
        __global const ${T}* qr = Q + q_off + b0 * sqb + h * sqh + MINL(iw + i, L - 1) * sql;
        for (int d = 0; d < ${E}; ++d) q[i][d] = (${CT})qr[d * sqd] * scale;
    }
% if R > 1:
    vec_t accs[${BM * R}][${EV8}];
    ${CT} mst[${BM * R}], lst[${BM * R}];
    for (int i = 0; i < ${BM * R}; ++i) {
        for (int c = 0; c < ${EV8}; ++c) accs[i][c] = (vec_t)(0);
        mst[i] = ${NEG}; lst[i] = 0;
    }
% endif
    __global const ${CT}* kt = Kt + kvh * ${E} * SP;
    __global const ${CT}* vp = Vp + kvh * SP * ${EVP};
    long jend_w = S;
% if causal:
    jend_w = MINL(S, iw + ${BM * R});
% endif
    vec_t pav[${BM}][${NB}];
    for (long c0 = 0; c0 < jend_w; c0 += SC) {
    for (int r = 0; r < ${R}; ++r) {
    long i0 = iw + r * ${BM};
    if (i0 >= L) break;
    int qo = r * ${BM};
    long jend = MINL(c0 + SC, S);
% if causal:
    jend = MINL(jend, i0 + ${BM});
% endif
    if (c0 >= jend) continue;
% for i in range(BM):
% if R > 1:
% for c in range(EV8):
    vec_t acc_${i}_${c} = accs[qo + ${i}][${c}];
% endfor
    ${CT} m_${i} = mst[qo + ${i}], l_${i} = lst[qo + ${i}];
% else:
% for c in range(EV8):
    vec_t acc_${i}_${c} = (vec_t)(0);
% endfor
    ${CT} m_${i} = ${NEG}, l_${i} = 0;
% endif
% endfor
    for (long j0 = c0; j0 < jend; j0 += ${BN}) {
% for i in range(BM):
% for n in range(NB):
        vec_t s_${i}_${n} = (vec_t)(0);
% endfor
% endfor
        __global const ${CT}* kp = kt + j0;
        for (int d = 0; d < ${E}; ++d, kp += SP) {
% for n in range(NB):
            vec_t k${n} = ${vload("kp + %d" % (n * VW))};
% endfor
% for i in range(BM):
% for n in range(NB):
            s_${i}_${n} += q[qo + ${i}][d] * k${n};
% endfor
% endfor
        }
        ${score_fixups("s", lambda i: "(i0 + %d)" % i, "j0", BM, BN)}
% for i in range(BM):
        {
% if dropout:
% for n in range(NB):
            vec_t kp_${n};
% endfor
            ${keep_vectors("kp", "(bh * L + i0 + %d) * SP4" % i, "j0", BN)}
% endif
            ${CT} bm = hmax_v(s_${i}_0);
% for n in range(1, NB):
            { ${CT} t = hmax_v(s_${i}_${n}); bm = t > bm ? t : bm; }
% endfor
            ${CT} mn = bm > m_${i} ? bm : m_${i};
            ${CT} ms = (mn == ${NEG}) ? (${CT})0 : mn;
            ${CT} corr = exp(m_${i} - ms);   // scalar, once per block
            ${CT} ps = 0;
% for n in range(NB):
            vec_t p${n} = vexp(s_${i}_${n} - ms);
            ps += hsum_v(p${n});
% if dropout:
            pav[${i}][${n}] = p${n} * kp_${n};
% else:
            pav[${i}][${n}] = p${n};
% endif
% endfor
            l_${i} = l_${i} * corr + ps;
            m_${i} = mn;
% for c in range(EV8):
            acc_${i}_${c} *= corr;
% endfor
        }
% endfor
        __global const ${CT}* vr = vp + j0 * ${EVP};
        for (int jj = 0; jj < ${BN}; ++jj, vr += ${EVP}) {
% for c in range(EV8):
            vec_t v${c} = ${vload("vr + %d" % (c * VW))};
% endfor
% for i in range(BM):
            {
                ${CT} pv = ((__private ${CT}*)pav[${i}])[jj];
% for c in range(EV8):
                acc_${i}_${c} += pv * v${c};
% endfor
            }
% endfor
        }
    }
% if R > 1:
% for i in range(BM):
% for c in range(EV8):
    accs[qo + ${i}][${c}] = acc_${i}_${c};
% endfor
    mst[qo + ${i}] = m_${i}; lst[qo + ${i}] = l_${i};
% endfor
    }
    }
    for (int i = 0; i < ${BM * R}; ++i) {
        if (iw + i >= L) break;
        long row = bh * L + iw + i;
        ${CT} li = lst[i], mi = mst[i];
        ${CT} inv = li > 0 ? (${CT})1 / li : (${CT})0;
        __global ${T}* orow = O + row * ${EV};
        for (int c = 0; c < ${EV8}; ++c) {
            vec_t o = accs[i][c] * inv;
% for e in range(VW):
            if (c * ${VW} + ${e} < ${EV}) orow[c * ${VW} + ${e}] = (${T})${lane("o", e)};
% endfor
        }
        LSE[row] = li > 0 ? mi + log(li) : ${NEG};
    }
% else:
% for i in range(BM):
    if (i0 + ${i} < L) {
        long row = bh * L + i0 + ${i};
        ${CT} inv = l_${i} > 0 ? (${CT})1 / l_${i} : (${CT})0;
        __global ${T}* orow = O + row * ${EV};
% for c in range(EV8):
        {
            vec_t o = acc_${i}_${c} * inv;
% for e in range(VW):
% if c * VW + e < EV:
            orow[${c * VW + e}] = (${T})${lane("o", e)};
% endif
% endfor
        }
% endfor
        LSE[row] = l_${i} > 0 ? m_${i} + log(l_${i}) : ${NEG};
    }
% endfor
    }
    }
% endif
}

## Backward, dQ: work-item owns RQ groups of BMQ query rows (as the forward) and walks the keys in chunks of SC:
##   p = exp(s - lse), dp = dO . v, ds = p * (dp - Dlt), dQ += ds k;  dQ *= scale at the end.
## Dlt[row] = sum(dO * O) over the row (precomputed). Vt is V transposed, Kp holds K's rows.
__kernel void sdpa_bwd_dq(__global ${T}* DQ, long dq_sb0, long dq_sh, long dq_sl,
                          __global const ${T}* Q, long q_off, long sqb, long sqh, long sql, long sqd,
                          __global const ${T}* DO, long do_off, long sdb, long sdh, long sdl, long sdd,
                          __global const ${CT}* LSE, __global const ${CT}* Dlt,
                          __global const ${CT}* Kt, __global const ${CT}* Vt, __global const ${CT}* Kp,
                          __global const ${MT}* Mk, long m_off, long smb, long smh, long sml, long sms,
                          long L, long S, long SP, long H, long Hk, long nqb, long total, ${CT} scale, long SC
% if dropout:
                       , uint k0, uint k1, ulong ctr0, uint thr, ${CT} pscale, long SP4
% endif
                       )
{
    long gid = get_global_id(0);
    if (gid >= total) return;
    long bh = gid / nqb, qb = gid - bh * nqb;
    long b0 = bh / H, h = bh - b0 * H;
    long kvh = b0 * Hk + h / (H / Hk);
<%
    EP8 = EP // VW
    NW = BMQ * RQ
%>
    long iw = qb * ${NW};
    ${CT} q[${NW}][${E}];
    ${CT} go[${NW}][${EV}];
    ${CT} lse[${NW}], dl[${NW}];
    vec_t dqs[${NW}][${EP8}];
    for (int i = 0; i < ${NW}; ++i) {
        long ic = MINL(iw + i, L - 1);
        __global const ${T}* qr = Q + q_off + b0 * sqb + h * sqh + ic * sql;
        for (int d = 0; d < ${E}; ++d) q[i][d] = (${CT})qr[d * sqd] * scale;
        __global const ${T}* gr = DO + do_off + b0 * sdb + h * sdh + ic * sdl;
        for (int d = 0; d < ${EV}; ++d) go[i][d] = (${CT})gr[d * sdd];
        ${CT} lv = LSE[bh * L + ic];
        lse[i] = lv == ${NEG} ? (${CT})INFINITY : lv;      // a fully masked row: p = 0
        dl[i] = Dlt[bh * L + ic];
        for (int c = 0; c < ${EP8}; ++c) dqs[i][c] = (vec_t)(0);
    }
    __global const ${CT}* kt = Kt + kvh * ${E} * SP;
    __global const ${CT}* vt = Vt + kvh * ${EV} * SP;
    __global const ${CT}* kpr = Kp + kvh * SP * ${EP};
    long jend_w = S;
% if causal:
    jend_w = MINL(S, iw + ${NW});
% endif
    vec_t pav[${BMQ}][${NBQ}];
    for (long c0 = 0; c0 < jend_w; c0 += SC) {
    for (int r = 0; r < ${RQ}; ++r) {
    long i0 = iw + r * ${BMQ};
    if (i0 >= L) break;
    int qo = r * ${BMQ};
    long jend = MINL(c0 + SC, S);
% if causal:
    jend = MINL(jend, i0 + ${BMQ});
% endif
    if (c0 >= jend) continue;
% for i in range(BMQ):
% for c in range(EP8):
    vec_t dq_${i}_${c} = dqs[qo + ${i}][${c}];
% endfor
% endfor
    for (long j0 = c0; j0 < jend; j0 += ${BNQ}) {
% for i in range(BMQ):
% for n in range(NBQ):
        vec_t s_${i}_${n} = (vec_t)(0), t_${i}_${n} = (vec_t)(0);
% endfor
% endfor
        {
            __global const ${CT}* kp = kt + j0;
            for (int d = 0; d < ${E}; ++d, kp += SP) {
% for n in range(NBQ):
                vec_t k${n} = ${vload("kp + %d" % (n * VW))};
% endfor
% for i in range(BMQ):
% for n in range(NBQ):
                s_${i}_${n} += q[qo + ${i}][d] * k${n};
% endfor
% endfor
            }
            __global const ${CT}* vq = vt + j0;
            for (int d = 0; d < ${EV}; ++d, vq += SP) {
% for n in range(NBQ):
                vec_t v${n} = ${vload("vq + %d" % (n * VW))};
% endfor
% for i in range(BMQ):
% for n in range(NBQ):
                t_${i}_${n} += go[qo + ${i}][d] * v${n};
% endfor
% endfor
            }
        }
        ${score_fixups("s", lambda i: "(i0 + %d)" % i, "j0", BMQ, BNQ)}
% for i in range(BMQ):
        {
            ${CT} ls = lse[qo + ${i}], dli = dl[qo + ${i}];
% if dropout:
% for n in range(NBQ):
            vec_t kp_${n};
% endfor
            ${keep_vectors("kp", "(bh * L + i0 + %d) * SP4" % i, "j0", BNQ)}
% endif
% for n in range(NBQ):
            vec_t p${n} = vexp(s_${i}_${n} - ls);
% if dropout:
            pav[${i}][${n}] = p${n} * (t_${i}_${n} * kp_${n} - dli);
% else:
            pav[${i}][${n}] = p${n} * (t_${i}_${n} - dli);
% endif
% endfor
        }
% endfor
        __global const ${CT}* kr = kpr + j0 * ${EP};
        for (int jj = 0; jj < ${BNQ}; ++jj, kr += ${EP}) {
% for c in range(EP8):
            vec_t k${c} = ${vload("kr + %d" % (c * VW))};
% endfor
% for i in range(BMQ):
            {
                ${CT} dsv = ((__private ${CT}*)pav[${i}])[jj];
% for c in range(EP8):
                dq_${i}_${c} += dsv * k${c};
% endfor
            }
% endfor
        }
    }
% for i in range(BMQ):
% for c in range(EP8):
    dqs[qo + ${i}][${c}] = dq_${i}_${c};
% endfor
% endfor
    }
    }
    for (int i = 0; i < ${NW}; ++i) {
        if (iw + i >= L) break;
        __global ${T}* qrow = DQ + b0 * dq_sb0 + h * dq_sh + (iw + i) * dq_sl;
        for (int c = 0; c < ${EP8}; ++c) {
            vec_t o = dqs[i][c] * scale;
% for e in range(VW):
            if (c * ${VW} + ${e} < ${E}) qrow[c * ${VW} + ${e}] = (${T})${lane("o", e)};
% endfor
        }
    }
}

## Backward, dK and dV: work-item gid = kvh * nkb + kb owns keys [kb*BN, kb*BN + BN) of k/v batch kvh, held as
## NB vectors of VW keys; it walks every query row of every query head that reads this k/v head, BQ rows at a
## time:  p = exp(s - lse), dV += p dO, ds = p * (dO . v - Dlt), dK += ds q * scale.
## Accumulators are transposed (dKt[d] holds VW keys), written back as dK[kvh][j][d].
__kernel void sdpa_bwd_dkv(__global ${T}* DK, __global ${T}* DV,
                           __global const ${T}* Q, long q_off, long sqb, long sqh, long sql, long sqd,
                           __global const ${T}* DO, long do_off, long sdb, long sdh, long sdl, long sdd,
                           __global const ${CT}* LSE, __global const ${CT}* Dlt,
                           __global const ${CT}* Kt, __global const ${CT}* Vt,
                           __global const ${MT}* Mk, long m_off, long smb, long smh, long sml, long sms,
                           long L, long S, long SP, long H, long Hk, long nkb, long total, ${CT} scale
% if dropout:
                       , uint k0, uint k1, ulong ctr0, uint thr, ${CT} pscale, long SP4
% endif
                       )
{
    long gid = get_global_id(0);
    if (gid >= total) return;
    long kvh = gid / nkb, kb = gid - kvh * nkb;
    long b0 = kvh / Hk, hk = kvh - b0 * Hk;
    long rep = H / Hk;
    long j0 = kb * ${BNK};
    vec_t dkt[${E}][${NBK}], dvt[${EV}][${NBK}];
    for (int d = 0; d < ${E}; ++d) {
% for n in range(NBK):
        dkt[d][${n}] = (vec_t)(0);
% endfor
    }
    for (int d = 0; d < ${EV}; ++d) {
% for n in range(NBK):
        dvt[d][${n}] = (vec_t)(0);
% endfor
    }
    __global const ${CT}* kt = Kt + kvh * ${E} * SP + j0;
    __global const ${CT}* vt = Vt + kvh * ${EV} * SP + j0;
    long istart = 0;
% if causal:
    istart = j0;            // rows i < j0 see none of these keys
% endif
    for (long h = hk * rep; h < hk * rep + rep; ++h) {
        long bh = b0 * H + h;
        for (long i0 = istart; i0 < L; i0 += ${BQ}) {
            ${CT} qs[${BQ}][${E}];
            ${CT} go[${BQ}][${EV}];
% for i in range(BQ):
            ${CT} lse_${i}, dl_${i};
            {
                long ic = MINL(i0 + ${i}, L - 1);
                __global const ${T}* qr = Q + q_off + b0 * sqb + h * sqh + ic * sql;
                for (int d = 0; d < ${E}; ++d) qs[${i}][d] = (${CT})qr[d * sqd] * scale;
                __global const ${T}* gr = DO + do_off + b0 * sdb + h * sdh + ic * sdl;
                for (int d = 0; d < ${EV}; ++d) go[${i}][d] = (${CT})gr[d * sdd];
                lse_${i} = LSE[bh * L + ic];
                if (i0 + ${i} >= L || lse_${i} == ${NEG}) lse_${i} = INFINITY;   // no contribution
                dl_${i} = Dlt[bh * L + ic];
            }
% for n in range(NBK):
            vec_t s_${i}_${n} = (vec_t)(0), t_${i}_${n} = (vec_t)(0);
% endfor
% endfor
            for (int d = 0; d < ${E}; ++d) {
% for n in range(NBK):
                vec_t k${n} = ${vload("kt + d * SP + %d" % (n * VW))};
% endfor
% for i in range(BQ):
% for n in range(NBK):
                s_${i}_${n} += qs[${i}][d] * k${n};
% endfor
% endfor
            }
            for (int d = 0; d < ${EV}; ++d) {
% for n in range(NBK):
                vec_t v${n} = ${vload("vt + d * SP + %d" % (n * VW))};
% endfor
% for i in range(BQ):
% for n in range(NBK):
                t_${i}_${n} += go[${i}][d] * v${n};
% endfor
% endfor
            }
            ${score_fixups("s", lambda i: "(i0 + %d)" % i, "j0", BQ, BNK)}
% for i in range(BQ):
% if dropout:
% for n in range(NBK):
            vec_t kp${i}_${n};
% endfor
            ${keep_vectors("kp%d" % i, "(bh * L + i0 + %d) * SP4" % i, "j0", BNK)}
% endif
% for n in range(NBK):
% if dropout:
            vec_t pr_${i}_${n} = vexp(s_${i}_${n} - lse_${i});
            vec_t p_${i}_${n} = pr_${i}_${n} * kp${i}_${n};
            vec_t ds_${i}_${n} = pr_${i}_${n} * (t_${i}_${n} * kp${i}_${n} - dl_${i});
% else:
            vec_t p_${i}_${n} = vexp(s_${i}_${n} - lse_${i});
            vec_t ds_${i}_${n} = p_${i}_${n} * (t_${i}_${n} - dl_${i});
% endif
% endfor
% endfor
            for (int d = 0; d < ${EV}; ++d) {
% for n in range(NBK):
                dvt[d][${n}] += ${" + ".join("p_%d_%d * go[%d][d]" % (i, n, i) for i in range(BQ))};
% endfor
            }
            for (int d = 0; d < ${E}; ++d) {
% for n in range(NBK):
                dkt[d][${n}] += ${" + ".join("ds_%d_%d * qs[%d][d]" % (i, n, i) for i in range(BQ))};
% endfor
            }
        }
    }
% for n in range(NBK):
% for e in range(VW):
    if (j0 + ${n * VW + e} < S) {
        long j = j0 + ${n * VW + e};
        __global ${T}* dkr = DK + (kvh * S + j) * ${E};
        __global ${T}* dvr = DV + (kvh * S + j) * ${EV};
        for (int d = 0; d < ${E}; ++d) dkr[d] = (${T})${lane("dkt[d][%d]" % n, e)};
        for (int d = 0; d < ${EV}; ++d) dvr[d] = (${T})${lane("dvt[d][%d]" % n, e)};
    }
% endfor
% endfor
}
