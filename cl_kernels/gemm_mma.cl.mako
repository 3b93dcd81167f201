## GEMM on matrix units:  C[b] = alpha * A[b] @ B[b] + beta * C[b]  (A: M x K, B: K x N, C: M x N, b < batch),
## for 16-bit storage (float16 / bfloat16: products exact, sums in float32, C rounded once) and, where TF32 is
## allowed, float32. cltorch/ops/gemm/mma.py plans it and chooses the unit (mma_units.cl.mako) behind a probe.
##
## A work-group computes a BM x BN tile of C with WM x WN warps, each a (BM/WM) x (BN/WN) warp tile of FM x FN
## unit instructions (IM x IN x IK each). K is walked in steps of BK: the step's A (BM x BK) and B (BK x BN) tiles
## are copied from global memory into local memory in their storage type, in two buffers (double buffering: the
## next step's tiles are read into registers while the current step is multiplied, one barrier per step). Each
## operand keeps its global layout in local memory, so every copy is a plain vector copy:
##   "kc": the operand is contiguous along k (A row-major, B column-major): local rows of BK per lane;
##   "lc": contiguous along its lanes (A column-major, B row-major): local rows of BL lanes per k;
## and the fragment loads read either (nv_mma: ldmatrix for "kc", ldmatrix.trans for "lc"). Rows are padded by
## 8 elements (16 bytes): eight 16-byte rows that ldmatrix reads together start in different banks.
## Strided operands that are contiguous in neither direction are copied element by element ("kc", G = 1).
##
## Parameters: unit, emu (mma_units.cl.mako), dt (half, bf16, float), idx (int or long offsets), bm, bn, bk, wm,
## wn, a_lay / b_lay ("kc" or "lc"), a_g / b_g (elements per global load: 8, 4, 2, 1), nat (vector loads from
## global memory at natural alignment: GPUs, offsets and strides checked by the planner; else vloadn), gm (tile
## rows per band of the group order, as gemm_gpu.cl.mako), ldm (nv_mma's 16-bit fragment loads: "r32" / "r64":
## ldmatrix with a 32- or 64-bit address operand, "none": element loads), asm_kw (the inline-assembly keyword the
## compiler takes), c_epi (1: the epilogue operand E, float only, added after the rest is rounded).
##
## Lanes past M or N are clamped to the last row / column (read, never stored), so edge tiles run the same loop;
## only the last K step, when K is not a multiple of BK, tests k (zeros past it).
<%namespace name="mu" file="mma_units.cl.mako"/>
<%
    W = mu.attr.warp(unit)
    IM, IN, IK = mu.attr.shape(unit, dt)
    warps = wm * wn
    T = warps * W
    WTM, WTN = bm // wm, bn // wn
    FM, FN = WTM // IM, WTN // IN
    I = idx
    ET = "float" if dt == "float" else "ushort"
    PADE = 8 if ET == "ushort" else 4
    # local tiles: (rows, pitch) per operand and layout
    A_P = (bk if a_lay == "kc" else bm) + PADE
    B_P = (bk if b_lay == "kc" else bn) + PADE
    A_T = (bm if a_lay == "kc" else bk) * A_P
    B_T = (bn if b_lay == "kc" else bk) * B_P
    nv16 = unit == "nv_mma" and dt != "float" and ldm != "none"
    out_t = {"half": "half", "bf16": "ushort", "float": "float"}[dt]
    epi = (",\n        __global const float* restrict E, %s e_off, %s e_rs, %s e_cs, %s e_bs" % (I, I, I, I)) if c_epi else ""

    def operand(name, BL, lay, G):
        per = (bk if lay == "kc" else BL) // G
        na = BL * bk // G // T
        return dict(name=name, BL=BL, lay=lay, G=G, per=per, na=na)
    OA = operand("A", bm, a_lay, a_g)
    OB = operand("B", bn, b_lay, b_g)

    def vt(n):
        return ET + (str(n) if n > 1 else "")
%>
${mu.guard(unit, dt, emu)}
#pragma OPENCL FP_CONTRACT OFF
${mu.preamble(unit, dt, emu, asm_kw)}
% if dt == "bf16":
inline ushort clt_bf16_st(float f) {       /* round to nearest even; NaN stays NaN */
    uint u = as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)0x7fc0;
    return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
% endif
% if dt == "half":
inline float clt_ldc(__global const half* p) { return vload_half(0, p); }
% elif dt == "bf16":
inline float clt_ldc(__global const ushort* p) { return as_float(((uint)*p) << 16); }
% else:
inline float clt_ldc(__global const float* p) { return *p; }
% endif

<%def name="setup(X, L, ls, ks, lb)">
## Per work-item constants of operand X's copy: each load's lane and k within the tile (X_l<i>, X_k<i>) and, for
## "kc", its clamped lane's offset X_o<i>; X_in: all BL lanes of the tile in range (uniform over the group).
<% n = X["name"] %>
% if X["lay"] == "lc":
    const int ${n}_in = ${lb} + ${X["BL"]} <= ${L};
% endif
% for i in range(X["na"]):
<% v = "(tid + %d)" % (i * T) %>
% if X["lay"] == "kc":
    const int ${n}_l${i} = ${v} / ${X["per"]}, ${n}_k${i} = (${v} % ${X["per"]}) * ${X["G"]};
    const ${I} ${n}_o${i} = (${I})min(${lb} + ${n}_l${i}, ${L} - 1) * ${ls};
% else:
    const int ${n}_l${i} = (${v} % ${X["per"]}) * ${X["G"]}, ${n}_k${i} = ${v} / ${X["per"]};
% endif
    ${vt(X["G"])} ${n}_r${i};
% endfor
</%def>

<%def name="gload(X, p, at)">\
## G consecutive elements at p + at, as a vector of the storage type (or the element).
% if X["G"] == 1:
${p}[${at}]\
% elif nat:
*(__global const ${vt(X["G"])}*)(${p} + (${at}))\
% else:
vload${X["G"]}(0, ${p} + (${at}))\
% endif
</%def>

<%def name="fetch(X, base, L, ls, ks, lb, k0, kend, checked)">
## Registers X_r<i> <- operand X at k = k0 .. k0+BK-1 (checked: zero at k >= kend).
<% n, G = X["name"], X["G"] %>
% for i in range(X["na"]):
% if X["lay"] == "kc":
% if not checked:
    ${n}_r${i} = ${gload(X, base, "%s_o%d + (%s)(%s + %s_k%d) * %s" % (n, i, I, k0, n, i, ks))};
% else:
% for e in range(G):
    ${n}_r${i}${(".s%x" % e) if G > 1 else ""} = (${k0} + ${n}_k${i} + ${e} < ${kend}) ? ${base}[${n}_o${i} + (${I})(${k0} + ${n}_k${i} + ${e}) * ${ks}] : (${ET})0;
% endfor
% endif
% else:
    {
        const ${I} ko = (${I})(${k0} + ${n}_k${i}) * ${ks};
% if checked:
        if (${k0} + ${n}_k${i} >= ${kend}) ${n}_r${i} = (${vt(G)})0; else
% endif
% if G > 1:
        if (${n}_in) ${n}_r${i} = ${gload(X, base, "ko + (%s + %s_l%d)" % (lb, n, i))};
        else {
% for e in range(G):
            ${n}_r${i}.s${"%x" % e} = ${base}[ko + (${I})min(${lb} + ${n}_l${i} + ${e}, ${L} - 1) * ${ls}];
% endfor
        }
% else:
        ${n}_r${i} = ${base}[ko + (${I})min(${lb} + ${n}_l${i}, ${L} - 1) * ${ls}];
% endif
    }
% endif
% endfor
</%def>

<%def name="stash(X, tile, P)">
## The local tile <- registers X_r<i> (one vector store each: the layout is the global one).
<% n, G = X["name"], X["G"] %>
% for i in range(X["na"]):
<% at = "%s_l%d * %d + %s_k%d" % (n, i, P, n, i) if X["lay"] == "kc" else "%s_k%d * %d + %s_l%d" % (n, i, P, n, i) %>
% if G > 1:
    *(__local ${vt(G)}*)(${tile} + ${at}) = ${n}_r${i};
% else:
    ${tile}[${at}] = ${n}_r${i};
% endif
% endfor
</%def>

<%def name="multiply(Ac, Bc)">
## One BK step on the current tiles: per IK slice, the warp's A and B fragments, then FM x FN instructions
## (emulated: each slice's loads and instructions exchange through local memory together).
% for kk in range(bk // IK):
% if nv16:
<%
    calls = [mu.attr.ldsm_a(fm, a_lay, A_P, "wm0 + %d" % (fm * IM), kk * IK) + (Ac,) for fm in range(FM)]
    calls += [mu.attr.ldsm_b(fn, min(2, FN - fn), b_lay, B_P, "wn0 + %d" % (fn * IN), kk * IK) + (Bc,)
              for fn in range(0, FN, 2)]
%>
% if emu:
${mu.ldsm_emulated(calls)}
% else:
% for call in calls:
${mu.ldsm(ldm, call[:4], call[4])}
% endfor
% endif
% else:
% for fm in range(FM):
${mu.load_a(unit, dt, Ac, fm, a_lay, A_P, "wm0 + %d" % (fm * IM), kk * IK)}
% endfor
% for fn in range(FN):
${mu.load_b(unit, dt, Bc, fn, b_lay, B_P, "wn0 + %d" % (fn * IN), kk * IK)}
% endfor
% endif
% if emu:
${mu.mma_emulated(unit, dt, FM, FN)}
% else:
% for fm in range(FM):
% for fn in range(FN):
${mu.mma(unit, dt, fm, fn)}
% endfor
% endfor
% endif
% endfor
</%def>

__kernel ${mu.kernel_attributes(unit, emu)}__attribute__((reqd_work_group_size(${T}, 1, 1)))
void gemm_mma(__global const ${ET}* restrict A, ${I} a_off, ${I} a_rs, ${I} a_cs, ${I} a_bs,
              __global const ${ET}* restrict B, ${I} b_off, ${I} b_rs, ${I} b_cs, ${I} b_bs,
              __global ${out_t}* restrict C, ${I} c_off, ${I} c_rs, ${I} c_cs, ${I} c_bs,
              int M, int N, int K, float alpha, float beta${epi})
{
    __local ${ET} As[${2 * A_T}] __attribute__((aligned(16)));
    __local ${ET} Bs[${2 * B_T}] __attribute__((aligned(16)));
${mu.locals_(unit, dt, emu, warps, FM, FN, (FM + (FN + 1) // 2) if nv16 else 0)}
    const int tid = get_local_id(0), warp = tid / ${W}, ln = tid % ${W};
    const int wm0 = (warp % ${wm}) * ${WTM}, wn0 = (warp / ${wm}) * ${WTN};
    // work-group -> (batch entry b, tile row, tile column), tile rows in bands of ${gm} (L2 reuse)
    const int tiles_m = (M + ${bm - 1}) / ${bm}, tiles_n = (N + ${bn - 1}) / ${bn};
    const int per = tiles_m * tiles_n, gid = get_group_id(0);
    const int b = gid / per, t = gid - b * per;
    const int band = t / (${gm} * tiles_n), first = band * ${gm}, rows = min(tiles_m - first, ${gm});
    const int u = t - band * ${gm} * tiles_n;
    const int ib = (first + u % rows) * ${bm}, jb = (u / rows) * ${bn};
    __global const ${ET}* Ab = A + a_off + (${I})b * a_bs;
    __global const ${ET}* Bb = B + b_off + (${I})b * b_bs;
<%
    # (base, lane count, lane stride, k stride, first lane); a unit stride is written as 1 where a vector load
    # relies on it
    a_args = ("Ab", "M", "1" if a_lay == "lc" and a_g > 1 else "a_rs", "1" if a_lay == "kc" and a_g > 1 else "a_cs", "ib")
    b_args = ("Bb", "N", "1" if b_lay == "lc" and b_g > 1 else "b_cs", "1" if b_lay == "kc" and b_g > 1 else "b_rs", "jb")
%>
${setup(OA, a_args[1], a_args[2], a_args[3], a_args[4])}
${setup(OB, b_args[1], b_args[2], b_args[3], b_args[4])}
${mu.declare(unit, dt, FM, FN)}
    if (K > 0) {
        if (${bk} <= K) {
${fetch(OA, *a_args, k0="0", kend="K", checked=False)}
${fetch(OB, *b_args, k0="0", kend="K", checked=False)}
        } else {
${fetch(OA, *a_args, k0="0", kend="K", checked=True)}
${fetch(OB, *b_args, k0="0", kend="K", checked=True)}
        }
${stash(OA, "As", A_P)}
${stash(OB, "Bs", B_P)}
        barrier(CLK_LOCAL_MEM_FENCE);
        int cur = 0;
        for (int k0 = 0; k0 < K; k0 += ${bk}) {
            const int kn = k0 + ${bk};
            if (kn < K) {                          /* the next step's tiles, in flight during the multiply */
                if (kn + ${bk} <= K) {
${fetch(OA, *a_args, k0="kn", kend="K", checked=False)}
${fetch(OB, *b_args, k0="kn", kend="K", checked=False)}
                } else {
${fetch(OA, *a_args, k0="kn", kend="K", checked=True)}
${fetch(OB, *b_args, k0="kn", kend="K", checked=True)}
                }
            }
            {
                __local const ${ET}* Ac = As + cur * ${A_T};
                __local const ${ET}* Bc = Bs + cur * ${B_T};
${multiply("Ac", "Bc")}
            }
            if (kn < K) {
                __local ${ET}* An = As + (cur ^ 1) * ${A_T};
                __local ${ET}* Bn = Bs + (cur ^ 1) * ${B_T};
${stash(OA, "An", A_P)}
${stash(OB, "Bn", B_P)}
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            cur ^= 1;
        }
    }
    // C = alpha * acc + beta * C (C not read when beta == 0), rounded once to C's type (+ E after it)
    __global ${out_t}* Cb = C + c_off + (${I})b * c_bs;
% if c_epi:
    __global const float* Eb = E + e_off + (${I})b * e_bs;
% endif
<% c_map = mu.attr.maps(unit, dt)[2] %>
% for fm in range(FM):
% for fn in range(FN):
% for r, (row, col) in enumerate(c_map):
    {
        const int i = ib + wm0 + ${fm * IM} + ${row}, j = jb + wn0 + ${fn * IN} + ${col};
        if (i < M && j < N) {
            const ${I} o = (${I})i * c_rs + (${I})j * c_cs;
            float v = alpha * ${mu.attr.acc(unit, fm, fn, r)};
            if (beta != 0.0f) v = v + beta * clt_ldc(Cb + o);
% if dt == "half":
            vstore_half_rte(v, 0, Cb + o);
% elif dt == "bf16":
            Cb[o] = clt_bf16_st(v);
% else:
            Cb[o] = v;
% if c_epi:
            Cb[o] += Eb[(${I})i * e_rs + (${I})j * e_cs];
% endif
% endif
        }
    }
% endfor
% endfor
% endfor
}
