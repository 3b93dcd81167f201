## Scaled-dot-product attention for GPUs: the FlashAttention-2 work partitioning (Tri Dao, "FlashAttention-2:
## Faster Attention with Better Parallelism and Work Partitioning", 2023) on plain OpenCL work-groups, with the
## online softmax of Milakov & Gimelshein ("Online normalizer calculation for softmax", 2018).
##
## kind "fwd": a work-group per (batch*head, block of BM queries): the query block is staged once in local
##   memory; key/value blocks of BN keys are staged from their own strides (any layout: no pack kernel) and each
##   work-item computes a register tile of RM rows x RN keys of S = Q K^T, then the running row max is exchanged
##   through local memory, P = exp(S - max) goes to local memory (over the K tile, which is dead by then) and each
##   work-item adds P V into RM rows x (RV vectors of 4) columns of its output accumulator, rescaled whenever the
##   row max grows. The work-item tile is tm + TM*a (rows) x tn + TN*b (keys), tn fastest in the local id: lanes
##   that share rows read the same Q vector (a broadcast), lanes that share a key row read neighbouring K rows,
##   whose padded stride (an odd number of vectors) puts them in different banks.
## kind "dq": the dQ pass of the backward, the same partitioning: per key block S and dP = dO V^T are recomputed in
##   registers, dS = P * (dP - Dlt) goes to local memory (over the V tile) and dQ += dS K. No atomics: each dQ
##   element is summed by one work-item in key order.
## kind "dkv": a work-group per (batch*kv head, block of BN keys): K and V blocks stay in local memory while the
##   work-group walks the query blocks of every query head that reads them (GQA), staging Q and dO, computing
##   S^T and dP^T tiles (RK keys x RQ rows per work-item), then P and dS through local memory into dV += P^T dO
##   and dK += dS^T Q (RK keys x RE/RV column vectors per work-item, tk fastest in the local id).
## kind "dlt": Dlt[row] = sum(dO * O) over a row (one work-item per row), which the dq and dkv passes read.
##
## Every local tile is an array of 4-vectors (${CT}4) and the inner loops read them as vectors. Exponentials are
## base 2: Q is staged times qscale = scale * log2(e), a float mask is added times log2(e), and the saved
## logsumexp is natural (LSE = (m + log2(l)) * ln 2); dK is rescaled by ln 2 at the end (Q staged scaled).
##
## Parameters: T storage type (float, double, half, bfloat16 as ushort bits); CT compute type (float, double);
## E, EV head dims of q/k and of v (vectors of 4: E4, EV4; local rows padded to an odd number of vectors);
## TM, TN, RM, RN (fwd, dq) or TK, TQ, RK, RQ (dkv) the work-item grid and register tiles (RM, RK multiples of 4);
## vec: every staged operand is contiguous along the head dim with 4-element aligned strides and offset (then one
## 4-vector global load per element group, else scalar loads with zero fill); mask "none" | "bool" | "float" (MT
## its storage type); causal: top-left aligned tril(L, S); dropout: in-kernel dropout on P with the Philox stream
## of the fused CPU design (cl_kernels/sdpa.cl.mako: word (bh * L + i) * SP4 + j, counter ctr0 + word / 4, key
## (k0, k1), kept when the word >= thr, then times pscale), so both designs draw the same mask for a seed.
## Batch: query batch bh = b0 * H + h, its k/v batch kvh = b0 * Hk + h / (H / Hk); strides per operand:
## off, b0 stride, h stride, row stride, element stride.
<%namespace name="cm" file="common.cl.mako"/>
${cm.preamble(types)}
## a * b + c may be one fused multiply-add, except in deterministic mode: whether a compiler fuses depends on
## the device (NVIDIA and x86 CPUs with FMA do, a CPU without it cannot), so there every product is rounded
#pragma OPENCL FP_CONTRACT ${"OFF" if context.get("deterministic") else "ON"}
% if dropout:
#include <pyopencl-random123/philox.cl>
% endif
<%
    V4 = CT + "4"
    PT = "ushort" if T == "bfloat16" else T
    MPT = "ushort" if MT == "bfloat16" else MT
    E4, EV4 = (E + 3) // 4, (EV + 3) // 4
    odd = lambda n: n if n % 2 else n + 1
    E4P, EV4P = odd(E4), odd(EV4)
    LOG2E = "((%s)1.4426950408889634)" % CT
    LN2 = "((%s)0.6931471805599453)" % CT
    NEG = "(-INFINITY)"
    XYZW = "xyzw"

    def ld1(ptr, idx):
        # one element of storage type T as CT
        if T == "half":
            return "vload_half(0, %s + %s)" % (ptr, idx)
        if T == "bfloat16":
            return "as_float(((uint)%s[%s]) << 16)" % (ptr, idx)
        return "(%s)%s[%s]" % (CT, ptr, idx)

    def ld4(ptr, d4, sd, dim):
        # elements 4*d4 .. 4*d4+3 of a row starting at ptr (element stride sd, length dim) as a V4
        if vec:
            p = "%s + 4 * (%s)" % (ptr, d4)
            if T == "half":
                return "vload_half4(0, %s)" % p
            if T == "bfloat16":
                return "as_float4(convert_uint4(*(__global const ushort4*)(%s)) << 16)" % p
            return "(*(__global const %s*)(%s))" % (V4, p)
        lanes = []
        for e in range(4):
            idx = "(4 * (%s) + %d)" % (d4, e)
            x = ld1(ptr, "%s * %s" % (idx, sd))
            lanes.append("(%s < %d ? %s : (%s)0)" % (idx, dim, x, CT) if dim % 4 else x)
        return "(%s)(%s)" % (V4, ", ".join(lanes))

    def st4(ptr, c4, val, dim):
        # store V4 val as elements 4*c4 .. of a contiguous row of length dim (guarded when dim % 4)
        if dim % 4 == 0:
            if T == "half":
                return "vstore_half4_rte(%s, 0, %s + 4 * (%s));" % (val, ptr, c4)
            if T == "bfloat16":
                return "{ %s w_ = %s; %s }" % (V4, val, " ".join(
                    "%s[4 * (%s) + %d] = bf16_store(w_.%s);" % (ptr, c4, e, XYZW[e]) for e in range(4)))
            return "vstore4(%s, 0, %s + 4 * (%s));" % (val, ptr, c4)
        out = ["{ %s w_ = %s;" % (V4, val)]
        for e in range(4):
            idx = "4 * (%s) + %d" % (c4, e)
            if T == "half":
                s = "vstore_half_rte(w_.%s, 0, %s + %s);" % (XYZW[e], ptr, idx)
            elif T == "bfloat16":
                s = "%s[%s] = bf16_store(w_.%s);" % (ptr, idx, XYZW[e])
            else:
                s = "%s[%s] = (%s)w_.%s;" % (ptr, idx, T, XYZW[e])
            out.append("if (%s < %d) %s" % (idx, dim, s))
        out.append("}")
        return " ".join(out)

    def mld(idx):
        # element idx of the mask row mrow as CT (float masks) or its truth (bool masks, uchar)
        if MT == "half":
            return "vload_half(0, mrow + %s)" % idx
        if MT == "bfloat16":
            return "as_float(((uint)mrow[%s]) << 16)" % idx
        return "mrow[%s]" % idx
%>
% if T == "bfloat16":
inline ushort bf16_store(float f) {
    uint u = as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)0x7fc0;
    return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
% endif
#define MAXC(a, b) ((a) > (b) ? (a) : (b))

## Stage rows row0 .. row0+ROWS-1 (rows >= nvalid: zeros) of an operand into a local tile of 4-vectors with a row
## stride of DSTRIDE vectors; element (r, d) of the operand is base[r * sl + d * sd]; times `mul` if given.
<%def name="stage(dst, dstride, base, row0, nvalid, rows, sl, sd, dim, mul=None)">
<% dim4 = (dim + 3) // 4 %>\
    for (int t = lid; t < ${rows * dim4}; t += WG) {
        const int r = t / ${dim4}, d4 = t - r * ${dim4};
        ${V4} x = (${V4})(0);
        if (${row0} + r < ${nvalid}) {
            __global const ${PT}* p = ${base} + (${row0} + r) * ${sl};
            x = ${ld4("p", "d4", sd, dim)};
        }
        ${dst}[r * ${dstride} + d4] = x${(" * " + mul) if mul else ""};
    }
</%def>

## Causal, key-tail and mask fix-ups of score tile s_a_b (a < NA, b < NB) of rows irow(a), keys jcol(b): -inf where
## a pair takes no part, plus the float mask times log2(e). `need` is the block-uniform test that any pair is
## affected (without a mask only blocks on the diagonal or at the key tail are).
<%def name="fixups(NA, NB, irow, jcol, need)">
% if mask != "none":
    {
% else:
    if (${need}) {
% endif
% for a in range(NA):
        {
            const long i_ = ${irow(a)};
% if mask != "none":
            __global const ${MPT}* mrow = Mk + m_off + b0 * smb + h * smh + (i_ < L ? i_ : L - 1) * sml;
% endif
% for b in range(NB):
            {
                const long j_ = ${jcol(b)};
                int bad = j_ >= S${" || j_ > i_" if causal else ""};
% if mask == "bool":
                bad = bad || !${mld("(j_ < S ? j_ : S - 1) * sms")};
% elif mask == "float":
                s_${a}_${b} += (${CT})${mld("(j_ < S ? j_ : S - 1) * sms")} * ${LOG2E};
% endif
                s_${a}_${b} = bad ? ${NEG} : s_${a}_${b};
            }
% endfor
        }
% endfor
    }
</%def>

% if dropout:
## Dropout on a staged tile: each work-item takes whole Philox blocks (4 consecutive keys of one row: one draw of
## 4 words) and scales the 4 weights in local memory. `elem(r, jl)` is the scalar index of row r, key jl of the
## block; `body` rewrites x (the kept multiplier is keep: pscale or 0).
<%def name="dropout_pass(ROWS, COLS, rowbase, row0, col0, elem, body)">
    for (int t = lid; t < ${ROWS * (COLS // 4)}; t += WG) {
        const int r = t / ${COLS // 4}, jq = t - r * ${COLS // 4};
        const long i = ${row0} + r, j = ${col0} + 4 * jq;
        if (i >= L || j >= S) continue;
        const ulong c = ctr0 + ((ulong)((${rowbase} + i) * SP4 + j) >> 2);
        philox4x32_key_t key = {{k0, k1}};
        philox4x32_ctr_t ctr = {{(uint)c, (uint)(c >> 32), 0u, 0u}};
        philox4x32_ctr_t w = philox4x32(ctr, key);
% for e in range(4):
        {
            const int jl = 4 * jq + ${e};
            const ${CT} keep = w.v[${e}] >= thr ? pscale : (${CT})0;
            ${body(elem("r", "jl"))}
        }
% endfor
    }
</%def>
% endif
<%
    DROP_ARGS = (", uint k0, uint k1, ulong ctr0, uint thr, %s pscale, long SP4" % CT) if dropout else ""
    OPND = lambda n: "__global const %s* %s, long %s_off, long %s_sb, long %s_sh, long %s_sl, long %s_sd" % (
        PT, n, n.lower(), n.lower(), n.lower(), n.lower(), n.lower())
    MASK_ARGS = "__global const %s* Mk, long m_off, long smb, long smh, long sml, long sms" % MPT
%>

% if kind == "fwd":
<%
    WG = TM * TN
    BM, BN = TM * RM, TN * RN
    RV = (EV4 + TN - 1) // TN          # output column vectors per work-item
    PSL = odd(BM // 4)                 # P tile row: BM/4 row-slot vectors (+1 pad)
    KP = BN * max(E4P, PSL)
%>
#define WG ${WG}
## O[bh][i][:] (contiguous), LSE[bh][i] natural logsumexp (-inf for a row with no key).
__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void sdpa_flash_fwd(__global ${PT}* O, __global ${CT}* LSE, ${OPND("Q")}, ${OPND("K")}, ${OPND("V")},
                    ${MASK_ARGS}, long L, long S, long H, long Hk, long nqb, ${CT} qscale${DROP_ARGS})
{
    __local ${V4} Qs[${BM * E4P}];
    __local ${V4} KPs[${KP}];           // the K tile [BN][E4P], then P [BN][PSL] (row slot tm*RM/4 + a/4, lane a%4)
    __local ${V4} Vs[${BN * EV4P}];
    __local ${V4} red[${BM * TN // 4}];  // per row slot: TN partial maxima (then sums)
    __local ${CT}* reds = (__local ${CT}*)red;      // scalar view: written once per block per row
    const int lid = get_local_id(0), tn = lid % ${TN}, tm = lid / ${TN};
    const long g = get_group_id(0);
    const long bh = g / nqb;
% if causal:
    const long qb = nqb - 1 - (g - bh * nqb);      // the longest key ranges first
% else:
    const long qb = g - bh * nqb;
% endif
    const long b0 = bh / H, h = bh - b0 * H, hk = h / (H / Hk);
    const long q0 = qb * ${BM};
    __global const ${PT}* qb_ = Q + q_off + b0 * q_sb + h * q_sh;
    __global const ${PT}* kb_ = K + k_off + b0 * k_sb + hk * k_sh;
    __global const ${PT}* vb_ = V + v_off + b0 * v_sb + hk * v_sh;
${stage("Qs", E4P, "qb_", "q0", "L", BM, "q_sl", "q_sd", E, "qscale")}
% for a in range(RM):
    ${CT} m_${a} = ${NEG}, l_${a} = 0;
% for c in range(RV):
    ${V4} acc_${a}_${c} = (${V4})(0);
% endfor
% endfor
    long jend = S;
% if causal:
    jend = MAXC(0, (q0 + ${BM} < S ? q0 + ${BM} : S));
% endif
    for (long j0 = 0; j0 < jend; j0 += ${BN}) {
        barrier(CLK_LOCAL_MEM_FENCE);       // the previous block's P and V reads are done
${stage("KPs", E4P, "kb_", "j0", "S", BN, "k_sl", "k_sd", E)}
${stage("Vs", EV4P, "vb_", "j0", "S", BN, "v_sl", "v_sd", EV)}
        barrier(CLK_LOCAL_MEM_FENCE);
% for a in range(RM):
% for b in range(RN):
        ${CT} s_${a}_${b} = 0;
% endfor
% endfor
        for (int d4 = 0; d4 < ${E4}; ++d4) {
% for a in range(RM):
            const ${V4} qv${a} = Qs[(tm + ${TM * a}) * ${E4P} + d4];
% endfor
% for b in range(RN):
            const ${V4} kv${b} = KPs[(tn + ${TN * b}) * ${E4P} + d4];
% endfor
% for e in XYZW:
% for a in range(RM):
% for b in range(RN):
            s_${a}_${b} += qv${a}.${e} * kv${b}.${e};
% endfor
% endfor
% endfor
        }
${fixups(RM, RN, lambda a: "q0 + tm + %d" % (TM * a), lambda b: "j0 + tn + %d" % (TN * b),
         "j0 + %d > S%s" % (BN, (" || j0 + %d > q0" % (BN - 1)) if causal else ""))}
% for a in range(RM):
        {
            ${CT} mx = s_${a}_0;
% for b in range(1, RN):
            mx = MAXC(mx, s_${a}_${b});
% endfor
            reds[(tm * ${RM} + ${a}) * ${TN} + tn] = mx;     /* per block */
        }
% endfor
        barrier(CLK_LOCAL_MEM_FENCE);       // every work-item is past its S loop: the K tile may become P
% for a in range(RM):
        {
            ${CT} bm = ${NEG};
% for q in range(TN // 4):
            {
                const ${V4} r4 = red[(tm * ${RM} + ${a}) * ${TN // 4} + ${q}];
                bm = MAXC(bm, MAXC(MAXC(r4.x, r4.y), MAXC(r4.z, r4.w)));
            }
% endfor
            const ${CT} mn = MAXC(m_${a}, bm);
            const ${CT} ms = mn == ${NEG} ? (${CT})0 : mn;
            const ${CT} corr = exp2(m_${a} - ms);
            m_${a} = mn;
            ${CT} ps = 0;
% for b in range(RN):
            s_${a}_${b} = exp2(s_${a}_${b} - ms);
            ps += s_${a}_${b};
% endfor
            l_${a} = l_${a} * corr + ps;
% for c in range(RV):
            acc_${a}_${c} *= corr;
% endfor
        }
% endfor
% for b in range(RN):
% for q in range(RM // 4):
        KPs[(tn + ${TN * b}) * ${PSL} + tm * ${RM // 4} + ${q}] = (${V4})(${", ".join("s_%d_%d" % (4 * q + e, b) for e in range(4))});
% endfor
% endfor
        barrier(CLK_LOCAL_MEM_FENCE);
% if dropout:
${dropout_pass(BM, BN, "bh * L", "q0", "j0",
               lambda r, jl: "((__local %s*)KPs)[(%s) * %d + ((%s) %% %d) * %d + (%s) / %d]" % (CT, jl, 4 * PSL, r, TM, RM, r, TM),
               lambda x: "%s *= keep;" % x)}
        barrier(CLK_LOCAL_MEM_FENCE);
% endif
        for (int jl = 0; jl < ${BN}; ++jl) {
% for q in range(RM // 4):
            const ${V4} pv${q} = KPs[jl * ${PSL} + tm * ${RM // 4} + ${q}];
% endfor
% for c in range(RV):
<% cexpr = "tn + %d" % (TN * c) %>\
% if EV4 % TN:
            const ${V4} vv${c} = ${cexpr} < ${EV4} ? Vs[jl * ${EV4P} + ${cexpr}] : (${V4})(0);
% else:
            const ${V4} vv${c} = Vs[jl * ${EV4P} + ${cexpr}];
% endif
% endfor
% for a in range(RM):
% for c in range(RV):
            acc_${a}_${c} += pv${a // 4}.${XYZW[a % 4]} * vv${c};
% endfor
% endfor
        }
    }
    // the row sums: TN partial sums per row, added in a fixed order
    barrier(CLK_LOCAL_MEM_FENCE);
% for a in range(RM):
    reds[(tm * ${RM} + ${a}) * ${TN} + tn] = l_${a};     /* once */
% endfor
    barrier(CLK_LOCAL_MEM_FENCE);
% for a in range(RM):
    {
        const long i = q0 + tm + ${TM * a};
        ${CT} ls = 0;
% for q in range(TN // 4):
        {
            const ${V4} r4 = red[(tm * ${RM} + ${a}) * ${TN // 4} + ${q}];
            ls += (r4.x + r4.y) + (r4.z + r4.w);
        }
% endfor
        if (i < L) {
            const ${CT} inv = ls > 0 ? (${CT})1 / ls : (${CT})0;
            __global ${PT}* orow = O + (bh * L + i) * ${EV};
% for c in range(RV):
<% cexpr = "tn + %d" % (TN * c) %>\
% if EV4 % TN:
            if (${cexpr} < ${EV4}) ${st4("orow", cexpr, "acc_%d_%d * inv" % (a, c), EV)}
% else:
            ${st4("orow", cexpr, "acc_%d_%d * inv" % (a, c), EV)}
% endif
% endfor
            if (tn == 0) LSE[bh * L + i] = ls > 0 ? (m_${a} + log2(ls)) * ${LN2} : ${NEG};
        }
    }
% endfor
}
% endif

% if kind == "dq":
<%
    WG = TM * TN
    BM, BN = TM * RM, TN * RN
    RE = (E4 + TN - 1) // TN           # dQ column vectors per work-item
    PSL = odd(BM // 4)
    VD = BN * max(EV4P, PSL)
%>
#define WG ${WG}
## DQ[bh][i][:] (contiguous) = scale * sum_j dS[i][j] K[j][:], dS = P * (dP - Dlt), P = exp(S - LSE).
__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void sdpa_flash_dq(__global ${PT}* DQ, ${OPND("Q")}, ${OPND("K")}, ${OPND("V")}, ${OPND("DO")},
                   __global const ${CT}* LSE, __global const ${CT}* Dlt, ${MASK_ARGS},
                   long L, long S, long H, long Hk, long nqb, ${CT} qscale, ${CT} dscale${DROP_ARGS})
{
    __local ${V4} Qs[${BM * E4P}];
    __local ${V4} dOs[${BM * EV4P}];
    __local ${V4} Ks[${BN * E4P}];
    __local ${V4} VDs[${VD}];           // the V tile [BN][EV4P], then dS [BN][PSL] (row slots as the forward's P)
% if dropout:
    __local ${V4} Ps[${BN * PSL}];
% endif
    const int lid = get_local_id(0), tn = lid % ${TN}, tm = lid / ${TN};
    const long g = get_group_id(0);
    const long bh = g / nqb;
% if causal:
    const long qb = nqb - 1 - (g - bh * nqb);
% else:
    const long qb = g - bh * nqb;
% endif
    const long b0 = bh / H, h = bh - b0 * H, hk = h / (H / Hk);
    const long q0 = qb * ${BM};
    __global const ${PT}* qb_ = Q + q_off + b0 * q_sb + h * q_sh;
    __global const ${PT}* kb_ = K + k_off + b0 * k_sb + hk * k_sh;
    __global const ${PT}* vb_ = V + v_off + b0 * v_sb + hk * v_sh;
    __global const ${PT}* db_ = DO + do_off + b0 * do_sb + h * do_sh;
${stage("Qs", E4P, "qb_", "q0", "L", BM, "q_sl", "q_sd", E, "qscale")}
${stage("dOs", EV4P, "db_", "q0", "L", BM, "do_sl", "do_sd", EV)}
% for a in range(RM):
    ${CT} lse_${a}, dl_${a};
    {
        const long i = q0 + tm + ${TM * a};
        const ${CT} lv = i < L ? LSE[bh * L + i] : ${NEG};
        lse_${a} = lv == ${NEG} ? (${CT})INFINITY : lv * ${LOG2E};      // a row with no key: P = 0
        dl_${a} = i < L ? Dlt[bh * L + i] : (${CT})0;
    }
% for c in range(RE):
    ${V4} dq_${a}_${c} = (${V4})(0);
% endfor
% endfor
    long jend = S;
% if causal:
    jend = MAXC(0, (q0 + ${BM} < S ? q0 + ${BM} : S));
% endif
    for (long j0 = 0; j0 < jend; j0 += ${BN}) {
        barrier(CLK_LOCAL_MEM_FENCE);
${stage("Ks", E4P, "kb_", "j0", "S", BN, "k_sl", "k_sd", E)}
${stage("VDs", EV4P, "vb_", "j0", "S", BN, "v_sl", "v_sd", EV)}
        barrier(CLK_LOCAL_MEM_FENCE);
% for a in range(RM):
% for b in range(RN):
        ${CT} s_${a}_${b} = 0, t_${a}_${b} = 0;
% endfor
% endfor
        for (int d4 = 0; d4 < ${E4}; ++d4) {
% for a in range(RM):
            const ${V4} qv${a} = Qs[(tm + ${TM * a}) * ${E4P} + d4];
% endfor
% for b in range(RN):
            const ${V4} kv${b} = Ks[(tn + ${TN * b}) * ${E4P} + d4];
% endfor
% for e in XYZW:
% for a in range(RM):
% for b in range(RN):
            s_${a}_${b} += qv${a}.${e} * kv${b}.${e};
% endfor
% endfor
% endfor
        }
        for (int d4 = 0; d4 < ${EV4}; ++d4) {
% for a in range(RM):
            const ${V4} ov${a} = dOs[(tm + ${TM * a}) * ${EV4P} + d4];
% endfor
% for b in range(RN):
            const ${V4} vv${b} = VDs[(tn + ${TN * b}) * ${EV4P} + d4];
% endfor
% for e in XYZW:
% for a in range(RM):
% for b in range(RN):
            t_${a}_${b} += ov${a}.${e} * vv${b}.${e};
% endfor
% endfor
% endfor
        }
${fixups(RM, RN, lambda a: "q0 + tm + %d" % (TM * a), lambda b: "j0 + tn + %d" % (TN * b),
         "j0 + %d > S%s" % (BN, (" || j0 + %d > q0" % (BN - 1)) if causal else ""))}
% for a in range(RM):
% for b in range(RN):
        s_${a}_${b} = exp2(s_${a}_${b} - lse_${a});
% if not dropout:
        t_${a}_${b} = s_${a}_${b} * (t_${a}_${b} - dl_${a});
% endif
% endfor
% endfor
        barrier(CLK_LOCAL_MEM_FENCE);       // every work-item is past its dP loop: the V tile may become dS
% for b in range(RN):
% for q in range(RM // 4):
        VDs[(tn + ${TN * b}) * ${PSL} + tm * ${RM // 4} + ${q}] = (${V4})(${", ".join("t_%d_%d" % (4 * q + e, b) for e in range(4))});
% if dropout:
        Ps[(tn + ${TN * b}) * ${PSL} + tm * ${RM // 4} + ${q}] = (${V4})(${", ".join("s_%d_%d" % (4 * q + e, b) for e in range(4))});
% endif
% endfor
% endfor
        barrier(CLK_LOCAL_MEM_FENCE);
% if dropout:
<% el = lambda r, jl: "(%s) * %d + ((%s) %% %d) * %d + (%s) / %d" % (jl, 4 * PSL, r, TM, RM, r, TM) %>\
${dropout_pass(BM, BN, "bh * L", "q0", "j0", el,
               lambda x: "((__local %s*)VDs)[%s] = ((__local %s*)Ps)[%s] * (((__local %s*)VDs)[%s] * keep - Dlt[bh * L + i]);" % (CT, x, CT, x, CT, x))}
        barrier(CLK_LOCAL_MEM_FENCE);
% endif
        for (int jl = 0; jl < ${BN}; ++jl) {
% for q in range(RM // 4):
            const ${V4} pv${q} = VDs[jl * ${PSL} + tm * ${RM // 4} + ${q}];
% endfor
% for c in range(RE):
<% cexpr = "tn + %d" % (TN * c) %>\
% if E4 % TN:
            const ${V4} kv${c} = ${cexpr} < ${E4} ? Ks[jl * ${E4P} + ${cexpr}] : (${V4})(0);
% else:
            const ${V4} kv${c} = Ks[jl * ${E4P} + ${cexpr}];
% endif
% endfor
% for a in range(RM):
% for c in range(RE):
            dq_${a}_${c} += pv${a // 4}.${XYZW[a % 4]} * kv${c};
% endfor
% endfor
        }
    }
% for a in range(RM):
    {
        const long i = q0 + tm + ${TM * a};
        if (i < L) {
            __global ${PT}* qrow = DQ + (bh * L + i) * ${E};
% for c in range(RE):
<% cexpr = "tn + %d" % (TN * c) %>\
% if E4 % TN:
            if (${cexpr} < ${E4}) ${st4("qrow", cexpr, "dq_%d_%d * dscale" % (a, c), E)}
% else:
            ${st4("qrow", cexpr, "dq_%d_%d * dscale" % (a, c), E)}
% endif
% endfor
        }
    }
% endfor
}
% endif

% if kind == "dkv":
<%
    WG = TK * TQ
    BN, BM = TK * RK, TQ * RQ          # keys per group, query rows per step
    RE, RV = (E4 + TQ - 1) // TQ, (EV4 + TQ - 1) // TQ
    KSL = odd(BN // 4)                 # P / dS tile row: BN/4 key-slot vectors (+1 pad)
%>
#define WG ${WG}
## DK[kvh][j][:], DV[kvh][j][:] (contiguous): dV = sum over the query heads of the group and their rows of
## P^T dO, dK = scale * dS^T Q.
__kernel __attribute__((reqd_work_group_size(${WG}, 1, 1)))
void sdpa_flash_dkv(__global ${PT}* DK, __global ${PT}* DV, ${OPND("Q")}, ${OPND("K")}, ${OPND("V")},
                    ${OPND("DO")}, __global const ${CT}* LSE, __global const ${CT}* Dlt, ${MASK_ARGS},
                    long L, long S, long H, long Hk, long nkb, ${CT} qscale, ${CT} kscale${DROP_ARGS})
{
    __local ${V4} Ks[${BN * E4P}];
    __local ${V4} Vs[${BN * EV4P}];
    __local ${V4} Qs[${BM * E4P}];
    __local ${V4} dOs[${BM * EV4P}];
    __local ${V4} Ps[${BM * KSL}];      // [row][key slot tk*RK/4 + b/4, lane b%4]
    __local ${V4} dSs[${BM * KSL}];
    const int lid = get_local_id(0), tk = lid % ${TK}, tq = lid / ${TK};
    const long g = get_group_id(0);
    const long kvh = g / nkb, kb = g - kvh * nkb;
    const long b0 = kvh / Hk, hk = kvh - b0 * Hk, rep = H / Hk;
    const long j0 = kb * ${BN};
    {
        __global const ${PT}* kb_ = K + k_off + b0 * k_sb + hk * k_sh;
        __global const ${PT}* vb_ = V + v_off + b0 * v_sb + hk * v_sh;
${stage("Ks", E4P, "kb_", "j0", "S", BN, "k_sl", "k_sd", E)}
${stage("Vs", EV4P, "vb_", "j0", "S", BN, "v_sl", "v_sd", EV)}
    }
% for b in range(RK):
% for c in range(RE):
    ${V4} dk_${b}_${c} = (${V4})(0);
% endfor
% for c in range(RV):
    ${V4} dv_${b}_${c} = (${V4})(0);
% endfor
% endfor
% if causal:
    const long istart = (j0 / ${BM}) * ${BM};     // rows before j0 see none of these keys
% else:
    const long istart = 0;
% endif
    for (long h = hk * rep; h < hk * rep + rep; ++h) {
    const long bh = b0 * H + h;
    __global const ${PT}* qb_ = Q + q_off + b0 * q_sb + h * q_sh;
    __global const ${PT}* db_ = DO + do_off + b0 * do_sb + h * do_sh;
    for (long i0 = istart; i0 < L; i0 += ${BM}) {
        barrier(CLK_LOCAL_MEM_FENCE);       // the previous step's reads of Q, dO, P, dS are done
${stage("Qs", E4P, "qb_", "i0", "L", BM, "q_sl", "q_sd", E, "qscale")}
${stage("dOs", EV4P, "db_", "i0", "L", BM, "do_sl", "do_sd", EV)}
        barrier(CLK_LOCAL_MEM_FENCE);
% for a in range(RQ):
        ${CT} lse_${a}, dl_${a};
        {
            const long i = i0 + tq + ${TQ * a};
            const ${CT} lv = i < L ? LSE[bh * L + i] : ${NEG};
            lse_${a} = lv == ${NEG} ? (${CT})INFINITY : lv * ${LOG2E};
            dl_${a} = i < L ? Dlt[bh * L + i] : (${CT})0;
        }
% endfor
## score tiles indexed [row a][key b] (s_a_b) so that the fix-ups are shared with the other kinds
% for a in range(RQ):
% for b in range(RK):
        ${CT} s_${a}_${b} = 0, t_${a}_${b} = 0;
% endfor
% endfor
        for (int d4 = 0; d4 < ${E4}; ++d4) {
% for b in range(RK):
            const ${V4} kv${b} = Ks[(tk + ${TK * b}) * ${E4P} + d4];
% endfor
% for a in range(RQ):
            const ${V4} qv${a} = Qs[(tq + ${TQ * a}) * ${E4P} + d4];
% endfor
% for e in XYZW:
% for a in range(RQ):
% for b in range(RK):
            s_${a}_${b} += qv${a}.${e} * kv${b}.${e};
% endfor
% endfor
% endfor
        }
        for (int d4 = 0; d4 < ${EV4}; ++d4) {
% for b in range(RK):
            const ${V4} vv${b} = Vs[(tk + ${TK * b}) * ${EV4P} + d4];
% endfor
% for a in range(RQ):
            const ${V4} ov${a} = dOs[(tq + ${TQ * a}) * ${EV4P} + d4];
% endfor
% for e in XYZW:
% for a in range(RQ):
% for b in range(RK):
            t_${a}_${b} += ov${a}.${e} * vv${b}.${e};
% endfor
% endfor
% endfor
        }
${fixups(RQ, RK, lambda a: "i0 + tq + %d" % (TQ * a), lambda b: "j0 + tk + %d" % (TK * b),
         "j0 + %d > S%s" % (BN, (" || j0 + %d > i0" % (BN - 1)) if causal else ""))}
% for a in range(RQ):
% for b in range(RK):
        s_${a}_${b} = exp2(s_${a}_${b} - lse_${a});
% if not dropout:
        t_${a}_${b} = s_${a}_${b} * (t_${a}_${b} - dl_${a});
% endif
% endfor
% for q in range(RK // 4):
        Ps[(tq + ${TQ * a}) * ${KSL} + tk * ${RK // 4} + ${q}] = (${V4})(${", ".join("s_%d_%d" % (a, 4 * q + e) for e in range(4))});
        dSs[(tq + ${TQ * a}) * ${KSL} + tk * ${RK // 4} + ${q}] = (${V4})(${", ".join("t_%d_%d" % (a, 4 * q + e) for e in range(4))});
% endfor
% endfor
        barrier(CLK_LOCAL_MEM_FENCE);
% if dropout:
<% el = lambda r, jl: "(%s) * %d + ((%s) %% %d) * %d + (%s) / %d" % (r, 4 * KSL, jl, TK, RK, jl, TK) %>\
${dropout_pass(BM, BN, "bh * L", "i0", "j0", el,
               lambda x: "{ const %s p_ = ((__local %s*)Ps)[%s]; ((__local %s*)Ps)[%s] = p_ * keep; ((__local %s*)dSs)[%s] = p_ * (((__local %s*)dSs)[%s] * keep - Dlt[bh * L + i]); }" % (CT, CT, x, CT, x, CT, x, CT, x))}
        barrier(CLK_LOCAL_MEM_FENCE);
% endif
        for (int r = 0; r < ${BM}; ++r) {
% for q in range(RK // 4):
            const ${V4} pv${q} = Ps[r * ${KSL} + tk * ${RK // 4} + ${q}];
            const ${V4} dsv${q} = dSs[r * ${KSL} + tk * ${RK // 4} + ${q}];
% endfor
% for c in range(RV):
<% cexpr = "tq + %d" % (TQ * c) %>\
% if EV4 % TQ:
            const ${V4} ov${c} = ${cexpr} < ${EV4} ? dOs[r * ${EV4P} + ${cexpr}] : (${V4})(0);
% else:
            const ${V4} ov${c} = dOs[r * ${EV4P} + ${cexpr}];
% endif
% endfor
% for c in range(RE):
<% cexpr = "tq + %d" % (TQ * c) %>\
% if E4 % TQ:
            const ${V4} qv${c} = ${cexpr} < ${E4} ? Qs[r * ${E4P} + ${cexpr}] : (${V4})(0);
% else:
            const ${V4} qv${c} = Qs[r * ${E4P} + ${cexpr}];
% endif
% endfor
% for b in range(RK):
% for c in range(RV):
            dv_${b}_${c} += pv${b // 4}.${XYZW[b % 4]} * ov${c};
% endfor
% for c in range(RE):
            dk_${b}_${c} += dsv${b // 4}.${XYZW[b % 4]} * qv${c};
% endfor
% endfor
        }
    }
    }
% for b in range(RK):
    {
        const long j = j0 + tk + ${TK * b};
        if (j < S) {
            __global ${PT}* krow = DK + (kvh * S + j) * ${E};
            __global ${PT}* vrow = DV + (kvh * S + j) * ${EV};
% for c in range(RE):
<% cexpr = "tq + %d" % (TQ * c) %>\
            ${"if (%s < %d) " % (cexpr, E4) if E4 % TQ else ""}${st4("krow", cexpr, "dk_%d_%d * kscale" % (b, c), E)}
% endfor
% for c in range(RV):
<% cexpr = "tq + %d" % (TQ * c) %>\
            ${"if (%s < %d) " % (cexpr, EV4) if EV4 % TQ else ""}${st4("vrow", cexpr, "dv_%d_%d" % (b, c), EV)}
% endfor
        }
    }
% endfor
}
% endif

% if kind == "dlt":
## Dlt[row] = sum_c dO[row][c] * O[row][c] (row = bh * L + i; O contiguous, dO strided): with vec, 4 columns
## at a time (4-vector loads) and the 4 lanes added at the end, else in column order.
__kernel void sdpa_flash_dlt(__global ${CT}* Dlt, __global const ${PT}* O, ${OPND("DO")}, long L, long H,
                             long rows)
{
    const long row = get_global_id(0);
    if (row >= rows) return;
    const long bh = row / L, i = row - bh * L, b0 = bh / H, h = bh - b0 * H;
    __global const ${PT}* orow = O + row * ${EV};
    __global const ${PT}* drow = DO + do_off + b0 * do_sb + h * do_sh + i * do_sl;
% if vec:
    ${V4} acc = (${V4})(0);
    for (int c4 = 0; c4 < ${EV4}; ++c4)
        acc += ${ld4("orow", "c4", 1, EV)} * ${ld4("drow", "c4", 1, EV)};
    Dlt[row] = (acc.x + acc.y) + (acc.z + acc.w);
% else:
    ${CT} acc = 0;
    for (int c = 0; c < ${EV}; ++c)
        acc += ${ld1("orow", "c")} * ${ld1("drow", "c * do_sd")};
    Dlt[row] = acc;
% endif
}
% endif
