## Attention forward on NVIDIA's tensor cores (FlashAttention-2's forward, Tri Dao 2023, with its register reuse:
## the score accumulators become the A fragments of P V), for float16 / bfloat16 q, k, v with float32 sums; chosen
## by cltorch/ops/attention/mma.py behind a probe, with the unit of cl_kernels/mma_units.cl.mako.
##
## A work-group of WG warps per (batch*head, block of BQ = 16*WG queries); warp w owns queries q0 + 16w .. +15.
## The query block is staged in local memory once and each warp keeps its Q fragments in registers (ldmatrix).
## Key and value blocks of BN keys are copied to local memory in their storage type (rows padded by 8 elements),
## the next block read into registers while the current one is multiplied: S = Q K^T (mma.sync m16n8k16, K's rows
## read with ldmatrix as B fragments), scaled by qscale = scale * log2(e), masked (keys past S; causal: key > query,
## top-left aligned), the online softmax's row max and sum reduced over the 4 lanes of a row (warp shuffles), P =
## exp2(S - max) packed into A fragments in registers (rounded to the storage type) and O += P V (V read with
## ldmatrix.trans). At the end O / l is stored in q's dtype and the natural logsumexp (m + log2 l) ln 2 for the
## backward (the flash design's, cl_kernels/sdpa_flash.cl.mako, reads it).
##
## Parameters: unit ("nv_mma"), emu (the unit emulated: any device), dt ("half" or "bf16"), D (head dim of q, k and
## v: a multiple of 16), WG (warps), BN (keys per block, a multiple of 16), causal, G (elements per global load: 8
## or 1), nat (vector loads at natural alignment: a GPU whose offsets and strides the planner checked; else vloadn),
## ldm, asm_kw (mma_units.cl.mako).
<%namespace name="mu" file="mma_units.cl.mako"/>
<%
    W = mu.attr.warp(unit)
    IM, IN, IK = mu.attr.shape(unit, dt)
    T = WG * W
    BQ = 16 * WG
    DP = D + 8
    KD = D // 16                # k steps of S = Q K^T
    NS = BN // 8                # n8 tiles of S
    ND = D // 8                 # n8 tiles of O
    SMN = max(BQ, 2 * BN) * DP
    ldm_ = ldm if not emu else "r32"
    slots = max(KD, BN // 16, D // 16)
    ab = max(IM * IK + NS * IK * IN, IM * IK + ND * IK * IN)

    def vt(n):
        return "ushort" + (str(n) if n > 1 else "")
%>
${mu.preamble(unit, dt, emu, asm_kw)}
#pragma OPENCL FP_CONTRACT ON
% if dt == "half":
inline ushort clt_f2s(float x) { ushort h; vstore_half_rte(x, 0, (__private half*)&h); return h; }
% else:
inline ushort clt_f2s(float x) {       /* bf16 bits, round to nearest even; NaN stays NaN */
    uint u = as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)0x7fc0;
    return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
% endif
inline uint clt_pack(float lo, float hi) { return (uint)clt_f2s(lo) | ((uint)clt_f2s(hi) << 16); }

<%def name="copy_rows(name, base, sl, R, rows0, limit, tile, regs)">
## Rows rows0 .. rows0+R-1 of an operand (row stride sl, contiguous elements, rows past limit-1 clamped to it):
## into the registers <regs><i> (tile None) or from them into the local tile (pitch DP).
<% U = R * D // G; per = D // G; n = U // T %>
% for i in range(n):
<% v = "(tid + %d)" % (i * T) %>
% if tile is None:
    {
        const int r = ${v} / ${per}, c = (${v} % ${per}) * ${G};
        __global const ushort* p = ${base} + (long)min(${rows0} + r, ${limit} - 1) * ${sl} + c;
% if G > 1 and nat:
        ${regs}${i} = *(__global const ${vt(G)}*)p;
% elif G > 1:
        ${regs}${i} = vload${G}(0, p);
% else:
        ${regs}${i} = *p;
% endif
    }
% else:
    {
        const int r = ${v} / ${per}, c = (${v} % ${per}) * ${G};
% if G > 1:
        *(__local ${vt(G)}*)(${tile} + r * ${DP} + c) = ${regs}${i};
% else:
        ${tile}[r * ${DP} + c] = ${regs}${i};
% endif
    }
% endif
% endfor
</%def>

<%def name="ldsm_all(calls)">
% if emu:
${mu.ldsm_emulated(calls)}
% else:
% for call in calls:
${mu.ldsm(ldm_, call[:4], call[4])}
% endfor
% endif
</%def>

<%def name="mmas(As, Bs, prods)">
## prods: (index into As, index into Bs, accumulator name)
% if emu:
${mu.mma_emulated_regs(unit, dt, As, Bs, [(ia, ib, mu.attr.accs(unit, dt, c)) for ia, ib, c in prods])}
% else:
% for ia, ib, c in prods:
${mu.mma_regs(unit, dt, As[ia], Bs[ib], c)}
% endfor
% endif
</%def>

__kernel __attribute__((reqd_work_group_size(${T}, 1, 1)))
void sdpa_mma(__global ushort* restrict out, __global float* restrict lse,
              __global const ushort* restrict Q, long q_off, long q_sb, long q_sh, long q_sl,
              __global const ushort* restrict K, long k_off, long k_sb, long k_sh, long k_sl,
              __global const ushort* restrict V, long v_off, long v_sb, long v_sh, long v_sl,
              int L, int S, int H, int Hk, int nqb, float qscale)
{
    __local ushort sm[${SMN}] __attribute__((aligned(16)));
% if emu:
    __local ushort emu_ab[${WG * ab}];
    __local uint emu_l[${WG * 32 * slots}];
    __local float emu_q[${WG * 64}];
#define emu_ab_per_warp ${ab}
% endif
    const int tid = get_local_id(0), warp = tid / ${W}, ln = tid % ${W};
    const int gid = get_group_id(0), bh = gid / nqb;
    const int qb = ${"nqb - 1 - (gid - bh * nqb)" if causal else "gid - bh * nqb"};   /* causal: longest first */
    const int b0 = bh / H, h = bh - b0 * H, hk = h / (H / Hk);
    const int q0 = qb * ${BQ};
    __global const ushort* Qp = Q + q_off + (long)b0 * q_sb + (long)h * q_sh;
    __global const ushort* Kp = K + k_off + (long)b0 * k_sb + (long)hk * k_sh;
    __global const ushort* Vp = V + v_off + (long)b0 * v_sb + (long)hk * v_sh;
    __local ushort* Ks = sm;
    __local ushort* Vs = sm + ${BN * DP};
<% nq = BQ * D // G // T; nk = BN * D // G // T %>
    ${vt(G)} ${", ".join("qr%d" % i for i in range(nq))};
${copy_rows("Q", "Qp", "q_sl", BQ, "q0", "L", None, "qr")}
${copy_rows("Q", "Qp", "q_sl", BQ, "q0", "L", "sm", "qr")}
    barrier(CLK_LOCAL_MEM_FENCE);
    uint ${", ".join("qF%d_%d" % (kd, j) for kd in range(KD) for j in range(4))};
${ldsm_all([mu.attr.ldsm_a(kd, "kc", DP, "warp * 16", kd * 16, name="qF") + ("sm",) for kd in range(KD)])}
    barrier(CLK_LOCAL_MEM_FENCE);

    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
    float ${", ".join("o%d_%d = 0.0f" % (n, r) for n in range(ND) for r in range(4))};
    float ${", ".join("s%d_%d" % (n, r) for n in range(NS) for r in range(4))};
    uint ${", ".join("kF%d_%d" % (n, j) for n in range(NS) for j in range(2))};
    uint ${", ".join("vF%d_%d" % (n, j) for n in range(ND) for j in range(2))};
    uint ${", ".join("pF%d_%d" % (kk, j) for kk in range(BN // 16) for j in range(4))};
    const int r0 = q0 + warp * 16 + (ln >> 2);          /* this lane's rows: r0 (elements 0, 1) and r0 + 8 (2, 3) */
    int nkb = (S + ${BN - 1}) / ${BN};
% if causal:
    nkb = min(nkb, (q0 + ${BQ - 1}) / ${BN} + 1);        /* keys past the block's last row are all masked */
% endif
    ${vt(G)} ${", ".join("kr%d, vr%d" % (i, i) for i in range(nk))};
${copy_rows("K", "Kp", "k_sl", BN, "0", "S", None, "kr")}
${copy_rows("V", "Vp", "v_sl", BN, "0", "S", None, "vr")}
    for (int kb = 0; kb < nkb; kb++) {
${copy_rows("K", "Kp", "k_sl", BN, "0", "S", "Ks", "kr")}
${copy_rows("V", "Vp", "v_sl", BN, "0", "S", "Vs", "vr")}
        barrier(CLK_LOCAL_MEM_FENCE);
        if (kb + 1 < nkb) {                              /* the next block, in flight during this one */
            const int kn = (kb + 1) * ${BN};
${copy_rows("K", "Kp", "k_sl", BN, "kn", "S", None, "kr")}
${copy_rows("V", "Vp", "v_sl", BN, "kn", "S", None, "vr")}
        }
        // S = Q K^T
% for n in range(NS):
        ${" ".join("s%d_%d = 0.0f;" % (n, r) for r in range(4))}
% endfor
% for kd in range(KD):
${ldsm_all([mu.attr.ldsm_b(2 * n2, 2, "kc", DP, n2 * 16, kd * 16, name="kF") + ("Ks",) for n2 in range(NS // 2)])}
${mmas([mu.attr.regs("qF", kd, 4)], [mu.attr.regs("kF", n, 2) for n in range(NS)], [(0, n, "s%d" % n) for n in range(NS)])}
% endfor
        // scale and mask, the online softmax (rows r0 and r0 + 8), P into A fragments
        {
            const int c0 = kb * ${BN} + ((ln & 3) << 1);
            float mx0 = -INFINITY, mx1 = -INFINITY;
% for n in range(NS):
% for r in range(4):
            {
                const int col = c0 + ${n * 8 + r % 2};
                float x = s${n}_${r} * qscale;
                if (col >= S${" || col > r0 + %d" % (8 * (r // 2)) if causal else ""}) x = -INFINITY;
                s${n}_${r} = x;
                mx${r // 2} = fmax(mx${r // 2}, x);
            }
% endfor
% endfor
${mu.quad_reduce(emu, [("max", "mx0"), ("max", "mx1")])}
            const float mn0 = fmax(m0, mx0), mn1 = fmax(m1, mx1);
            const float a0 = exp2(m0 - mn0), a1 = exp2(m1 - mn1);
            m0 = mn0;
            m1 = mn1;
            float ls0 = 0.0f, ls1 = 0.0f;
% for n in range(NS):
% for r in range(4):
            s${n}_${r} = exp2(s${n}_${r} - mn${r // 2});
            ls${r // 2} += s${n}_${r};
% endfor
% endfor
            l0 = l0 * a0 + ls0;
            l1 = l1 * a1 + ls1;
% for n in range(ND):
            o${n}_0 *= a0; o${n}_1 *= a0; o${n}_2 *= a1; o${n}_3 *= a1;
% endfor
% for kk in range(BN // 16):
            pF${kk}_0 = clt_pack(s${2 * kk}_0, s${2 * kk}_1);
            pF${kk}_1 = clt_pack(s${2 * kk}_2, s${2 * kk}_3);
            pF${kk}_2 = clt_pack(s${2 * kk + 1}_0, s${2 * kk + 1}_1);
            pF${kk}_3 = clt_pack(s${2 * kk + 1}_2, s${2 * kk + 1}_3);
% endfor
        }
        // O += P V
% for kk in range(BN // 16):
${ldsm_all([mu.attr.ldsm_b(2 * d2, 2, "lc", DP, d2 * 16, kk * 16, name="vF") + ("Vs",) for d2 in range(ND // 2)])}
${mmas([mu.attr.regs("pF", kk, 4)], [mu.attr.regs("vF", n, 2) for n in range(ND)], [(0, n, "o%d" % n) for n in range(ND)])}
% endfor
        barrier(CLK_LOCAL_MEM_FENCE);                    /* before the next block overwrites the tiles */
    }
${mu.quad_reduce(emu, [("sum", "l0"), ("sum", "l1")])}
    // O / l in q's dtype; the natural logsumexp of each row
% for half_ in range(2):
    {
        const int row = r0 + ${8 * half_};
        if (row < L) {
            const float inv = 1.0f / l${half_};
            __global ushort* op = out + ((long)bh * L + row) * ${D} + ((ln & 3) << 1);
% for n in range(ND):
% for e in range(2):
            op[${n * 8 + e}] = clt_f2s(o${n}_${2 * half_ + e} * inv);
% endfor
% endfor
            if ((ln & 3) == 0) lse[(long)bh * L + row] = (m${half_} + log2(l${half_})) * 0.6931471805599453f;
        }
    }
% endfor
}
