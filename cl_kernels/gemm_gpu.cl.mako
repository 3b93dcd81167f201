## The GPU GEMM design:  C[b] = alpha * A[b] @ B[b] + beta * C[b]  (A: M x K, B: K x N, C: M x N, b < batch),
## chosen by a device profile's `[gemm] design = "gpu"` (cltorch/ops/gemm/gpu.py plans the launches, plan.py
## chooses the tile). The tile machinery (local-memory staging, double buffering, register blocks, operand
## fetches) is in gemm_tiles.cl.mako; see its header for the layout.
##
## Every operand is addressed as  base[off + b*bs + row*rs + col*cs]  (element strides): NN, NT, TN, TT and other
## strided views are read in place, the layout choosing only the fetch pattern (a_fast, b_fast: "k" or "l"; a_ga,
## b_ga: elements per global load), so the tiles in local memory are always k-major.
##
## Parameters: dt (storage: float, double, half, bf16), acc (float or double), idx (offset type: int or long), the
## tile bm, bn, bk, tm, tn, vw and the fetches (gemm_tiles.cl.mako), nat (natural vector alignment), gm (tile rows
## per band of the group order), c_vec (C's rows are contiguous and VW-aligned: vector stores), split (see below),
## c_epi (1: the epilogue operand E, added after the rest is rounded, as a separate elementwise add would:
## cltorch._capture fuses a GEMM with the add of a bias or residual; not for half or bfloat16).
##
## Kernels:
## Operands are declared restrict (C overlaps none of A, B, E: gemm()'s contract; E may share A's or B's memory,
## both only read), so a GPU compiler may read A and B through its read-only data path.
##   gemm_tile        one work-group per (batch entry, K slice, tile). split 0: stores alpha * sum + beta * C (+E)
##                    into C. split 1: stores the raw sum of its K slice into the workspace W (acc type,
##                    [slices][batch][M][N], passed as C with c_ss the slice stride).
##   gemm_splitk_sum  C = alpha * (W[0] + W[1] + ... + W[S-1]) + beta * C (+E), one element per work-item, the
##                    slices added in order: a result does not depend on scheduling (no atomics).
## Work-groups run in bands of gm tile rows, column by column within a band, so groups running at the same time
## share A's row tiles and B's column tiles in the L2 cache (the "grouped ordering" of tiled GEMMs).
<%namespace name="tiles" file="gemm_tiles.cl.mako"/>
<%
    g = tiles.attr.tile(dt, acc, idx, bm, bn, bk, tm, tn, vw, nat, a_fast, a_ga, b_fast, b_ga)
    I = idx
    ot = acc if split else g.ptr          # what gemm_tile stores
    epi = (",\n        __global const %s* restrict E, %s e_off, %s e_rs, %s e_cs, %s e_bs" % (g.ptr, I, I, I, I)) if c_epi else ""
%>
#pragma OPENCL FP_CONTRACT OFF
% if "double" in (dt, acc):
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
% endif
${tiles.io(g)}
<%def name="store_c(g, i, j, val, n)">
## C[b][i][j .. j+n-1] = alpha * val + beta * C (C not read when beta == 0) (+ E), val n lanes of acc; the sum
## is rounded to C's type before E is added (a statement of its own).
<%
    I = idx
    ld, st, ldv, stv = tiles.attr.ld, tiles.attr.st, tiles.attr.ldv, tiles.attr.stv
%>
% if n == 1:
            {
                const ${I} o = (${I})b * c_bs + (${I})(${i}) * c_rs + (${I})(${j}) * c_cs;
                ${acc} t = alpha * ${val};
                if (beta != (${acc})0) t = t + beta * ${ld(g, "Cb", "o")};
% if c_epi:
                t += ${ld(g, "Eb", "(%s)b * e_bs + (%s)(%s) * e_rs + (%s)(%s) * e_cs" % (I, I, i, I, j))};
% endif
                ${st(g, "Cb", "o", "t")};
            }
% else:
            {
                const ${I} o = (${I})b * c_bs + (${I})(${i}) * c_rs + (${I})(${j});
                ${g.accv} t = alpha * ${val};
                if (beta != (${acc})0) t = t + beta * ${ldv(g, "Cb", "o", n)};
% if c_epi:
% for e in range(n):
                t.s${e} += ${ld(g, "Eb", "(%s)b * e_bs + (%s)(%s) * e_rs + (%s)(%s + %d) * e_cs" % (I, I, i, I, j, e))};
% endfor
% endif
                ${stv(g, "Cb", "o", "t", n)};
            }
% endif
</%def>
<%def name="store_run(g, acc_name)">
## One run of VW columns of the register block at (i, j): vector stores inside C, element stores at its edges.
<% I = idx %>
            if (i < M) {
% if split:
                __global ${acc}* w = Cb + (${I})s * c_ss + (${I})b * c_bs + (${I})i * c_rs;
% if g.vw > 1 and c_vec:
                if (j + ${g.vw} <= N) *(__global ${"" if nat else "u"}${g.accv}*)(w + j) = ${acc_name};
                else
% endif
                {
% for e in range(g.vw):
                    if (j + ${e} < N) w[j + ${e}] = ${tiles.attr.lane(acc_name, e, g.vw)};
% endfor
                }
% else:
% if g.vw > 1 and c_vec and dt != "bf16":
                if (j + ${g.vw} <= N)
${store_c(g, "i", "j", acc_name, g.vw)}
                else
% endif
                {
% for e in range(g.vw):
                    if (j + ${e} < N)
${store_c(g, "i", "j + %d" % e, tiles.attr.lane(acc_name, e, g.vw), 1)}
% endfor
                }
% endif
            }
</%def>

__kernel __attribute__((reqd_work_group_size(${g.threads}, 1, 1)))
void gemm_tile(__global const ${g.ptr}* restrict A, ${I} a_off, ${I} a_rs, ${I} a_cs, ${I} a_bs,
               __global const ${g.ptr}* restrict B, ${I} b_off, ${I} b_rs, ${I} b_cs, ${I} b_bs,
               __global ${ot}* restrict C, ${I} c_off, ${I} c_rs, ${I} c_cs, ${I} c_bs, ${I} c_ss,
               int M, int N, int K, int kc, ${acc} alpha, ${acc} beta${epi})
{
${tiles.locals_(g)}
    const int tid = get_local_id(0), tx = tid % ${g.wn}, ty = tid / ${g.wn};
    // work-group -> (batch entry b, K slice s, tile row, tile column)
    const int tiles_m = (M + ${bm - 1}) / ${bm}, tiles_n = (N + ${bn - 1}) / ${bn};
    const int S = K > 0 ? (K + kc - 1) / kc : 1;
    const int per = tiles_m * tiles_n, gid = get_group_id(0);
    const int z = gid / per, t = gid - z * per;
    const int band = t / (${gm} * tiles_n), first = band * ${gm}, rows = min(tiles_m - first, ${gm});
    const int u = t - band * ${gm} * tiles_n;
    const int ib = (first + u % rows) * ${bm}, jb = (u / rows) * ${bn};
    const int s = z % S, b = z / S;
    const int kbeg = s * kc, kend = min(K, kbeg + kc);
    __global const ${g.ptr}* Ab = A + a_off + (${I})b * a_bs;
    __global const ${g.ptr}* Bb = B + b_off + (${I})b * b_bs;
    __global ${ot}* Cb = C + c_off;
% if c_epi:
    __global const ${g.ptr}* Eb = E + e_off;
% endif
<%
    # (base, lane stride, k stride, lanes, first lane); a unit stride is written as 1 where a vector fetch
    # relies on it
    a_args = ("Ab", "1" if a_fast == "l" and a_ga > 1 else "a_rs", "1" if a_fast == "k" and a_ga > 1 else "a_cs",
              "M", "ib")
    b_args = ("Bb", "1" if b_fast == "l" and b_ga > 1 else "b_cs", "1" if b_fast == "k" and b_ga > 1 else "b_rs",
              "N", "jb")
%>
${tiles.setup(g, g.A, *a_args)}
${tiles.setup(g, g.B, *b_args)}
${tiles.accumulators(g)}
${tiles.mainloop(g, a_args, b_args, "kbeg", "kend")}
${tiles.for_each_run(g, store_run)}
}

__kernel void gemm_splitk_sum(__global const ${acc}* restrict W, ${I} ws, int S,
                              __global ${g.ptr}* restrict C, ${I} c_off, ${I} c_rs, ${I} c_cs, ${I} c_bs,
                              int M, int N, ${I} total, ${acc} alpha, ${acc} beta${epi})
{
    const ${I} x = get_global_id(0);
    if (x >= total) return;
    const int j = x % N;
    const ${I} r = x / N;
    const int i = r % M, b = r / M;
    ${acc} sum = W[x];
    for (int s = 1; s < S; s++) sum += W[(${I})s * ws + x];
    __global ${g.ptr}* Cb = C + c_off;
% if c_epi:
    __global const ${g.ptr}* Eb = E + e_off;
% endif
${store_c(g, "i", "j", "sum", 1)}
}
