## Building blocks of the GPU GEMM design (cl_kernels/gemm_gpu.cl.mako) and of kernels shaped like it (an
## implicit-GEMM convolution): a work-group computes a BM x BN tile of C; K is walked in steps of BK, each step's
## A (BM x BK) and B (BK x BN) tiles staged in local memory, k-major for both, in two buffers (double buffering:
## the next step's tiles are fetched from global memory into registers while the current step is multiplied, so
## one barrier per step suffices); each work-item accumulates a TM x TN register block.
##
## Include with  <%namespace name="tiles" file="gemm_tiles.cl.mako"/>  and build the description of a tile with
##   g = tiles.attr.tile(dt, acc, idx, bm, bn, bk, tm, tn, vw, nat, a_fast, a_ga, b_fast, b_ga)
## then emit  ${tiles.io(g)}  once (load/store helpers), and in a kernel body  ${tiles.locals_(g)},
## ${tiles.setup(g, g.A, "Ab", "a_rs", "a_cs", "M", "ib")}, the same for B, ${tiles.accumulators(g)} and
## ${tiles.mainloop(g, "kbeg", "kend")} (a caller with operands of its own passes fetch_a / fetch_b: defs with the
## signature of `fetch` that leave the same registers filled, e.g. an im2col gather).
##
## Register blocks (Volkov & Demmel, "Benchmarking GPUs to tune dense linear algebra", SC 2008; the layout is the
## one of the 128 x 128 SGEMM kernels of NVIDIA's and AMD's BLAS libraries and of CLBlast's "XgemmDirect"/Xgemm
## parameters MWG/NWG/KWG, MDIMC/NDIMC, VWM/VWN): the work-items form a WM x WN grid (WM = BM/TM, WN = BN/TN);
## work-item (tx, ty) owns rows  c*(BM/RM) + ty*VW + e  (c < RM = TM/VW, e < VW) and columns
## c*(BN/RN) + tx*VW + e. Each k step of the inner loop therefore reads RM + RN vectors of VW elements from local
## memory (float4 for VW 4: 4 vector loads for 64 FMAs at 8 x 8), consecutive work-items reading consecutive
## vectors of a B row (no bank conflicts) and the same vector of an A row (a broadcast). Local rows are padded by
## PAD = 4 elements (cltorch/ops/gemm/plan.py), so the transposing stores of a k-contiguous operand (k-fast
## fetches below) fall on different banks while rows stay VW-aligned.
##
## Operand fetches (global memory -> registers), per operand X (A: lanes are C's rows, B: C's columns):
##   fast "k": each load is a run of GA elements along k at one lane (X stored k-contiguous, GA > 1, or neither
##             direction contiguous with the k stride the smaller); stored to local memory transposed (scalars);
##   fast "l": each load is a run of GA lanes at one k (X stored lane-contiguous); stored as one vector when
##             GA == VW. A group whose tile passes the last lane loads element by element instead.
## Lanes past the operand's last one are clamped to it (read, never stored: the register block's row or column
## past M or N is discarded), so interior and edge tiles run the same loop with no bounds test; only the last K
## step, when K is not a multiple of BK, tests k (zeros past it: a clamped value could be Inf, and Inf * 0 = NaN).
##
## Loads of float and double vectors: `nat` 1 reads them through the vector types (natural alignment: device
## buffers on a GPU; the launcher checks offsets and strides are multiples of GA), `nat` 0 through
## element-aligned typedefs (CPU devices, whose buffers may wrap host memory aligned to the element only).
## half is read with vload_half / vload_halfN, bfloat16 (16-bit patterns, ushort) widened by a shift: the
## tiles in local memory and the accumulators are float.
<%!
from types import SimpleNamespace

PAD = 4          # keep in step with cltorch/ops/gemm/plan.py PAD


def _operand(name, BL, BK, threads, fast, ga):
    per = (BK if fast == "k" else BL) // ga
    na = BL * BK // ga // threads
    return SimpleNamespace(name=name, BL=BL, fast=fast, ga=ga, per=per, na=na, ld=(BL + PAD))


def tile(dt, acc, idx, bm, bn, bk, tm, tn, vw, nat, a_fast, a_ga, b_fast, b_ga):
    """The description of a tile the defs below read (see the header)."""
    wm, wn = bm // tm, bn // tn
    threads = wm * wn
    ptr = {"bf16": "ushort"}.get(dt, dt)
    return SimpleNamespace(
        dt=dt, acc=acc, idx=idx, bm=bm, bn=bn, bk=bk, tm=tm, tn=tn, vw=vw, nat=nat, wm=wm, wn=wn,
        rm=tm // vw, rn=tn // vw, threads=threads, ptr=ptr, accv=acc + (str(vw) if vw > 1 else ""),
        A=_operand("A", bm, bk, threads, a_fast, a_ga), B=_operand("B", bn, bk, threads, b_fast, b_ga))


def vtype(t, n):
    return t + (str(n) if n > 1 else "")


def lane(v, e, n):
    """Element e of a value of n lanes (a scalar when n == 1)."""
    return v if n == 1 else "%s.s%s" % (v, "0123456789abcdef"[e])


def ld(g, p, i):
    """Element i of pointer p (the storage type), in the accumulation type."""
    if g.dt == "half":
        return "vload_half(0, %s + (%s))" % (p, i)
    if g.dt == "bf16":
        return "bf16_ld(%s[%s])" % (p, i)
    return "(%s)%s[%s]" % (g.acc, p, i) if g.dt != g.acc else "%s[%s]" % (p, i)


def ldv(g, p, i, n):
    """n consecutive elements from p + i, as an n-vector of the accumulation type (n == 1: ld)."""
    if n == 1:
        return ld(g, p, i)
    if g.dt == "half":
        return "vload_half%d(0, %s + (%s))" % (n, p, i)
    if g.dt == "bf16":
        return "bf16_ld%d(vload%d(0, %s + (%s)))" % (n, n, p, i)
    t = "%s%d" % (g.dt, n) if g.nat else "u%s%d" % (g.dt, n)
    return "*(__global const %s*)(%s + (%s))" % (t, p, i)


def st(g, p, i, v):
    if g.dt == "half":
        return "vstore_half_rte(%s, 0, %s + (%s))" % (v, p, i)
    if g.dt == "bf16":
        return "%s[%s] = bf16_st(%s)" % (p, i, v)
    return "%s[%s] = %s" % (p, i, v)


def stv(g, p, i, v, n):
    """Store the n-vector v at p + i (only for n > 1 and dt float, double or half)."""
    if g.dt == "half":
        return "vstore_half%d_rte(%s, 0, %s + (%s))" % (n, v, p, i)
    t = "%s%d" % (g.dt, n) if g.nat else "u%s%d" % (g.dt, n)
    return "*(__global %s*)(%s + (%s)) = %s" % (t, p, i, v)
%>
<%def name="io(g)">
## Load/store helpers for the storage type.
% if g.dt == "bf16":
inline float bf16_ld(ushort h) { return as_float(((uint)h) << 16); }
% for n in (2, 4):
inline float${n} bf16_ld${n}(ushort${n} h) { return as_float${n}(convert_uint${n}(h) << 16); }
% endfor
inline ushort bf16_st(float f) {           /* round to nearest even; NaN stays NaN */
    uint u = as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)0x7fc0;
    return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
% endif
% if not g.nat:
% for t in sorted({g.dt, g.acc} & {"float", "double"}):
% for n in (2, 4):
typedef ${t}${n} u${t}${n} __attribute__((aligned(${8 if t == "double" else 4})));
% endfor
% endfor
% endif
</%def>

<%def name="locals_(g)">
    __local ${g.accv} As[2][${g.bk}][${g.A.ld // g.vw}];
    __local ${g.accv} Bs[2][${g.bk}][${g.B.ld // g.vw}];
</%def>

<%def name="setup(g, X, base, ls, ks, L, lb)">
## Per work-item constants of operand X: each load's lane and k within the tile, and (fast "k") its clamped
## lane offset. `base` is X's pointer at the batch entry, `ls`/`ks` its lane and k strides, `L` its lane count,
## `lb` the group's first lane. Defines X_l<i>, X_k<i>, X_o<i> (fast "k") and X_in (fast "l" with vectors: all
## the tile's lanes in range, a value uniform over the work-group).
<% n = X.name %>
% if X.fast == "l" and X.ga > 1:
    const int ${n}_in = ${lb} + ${X.BL} <= ${L};
% endif
% for i in range(X.na):
<%
    v = "(tid + %d)" % (i * g.threads)
%>
% if X.fast == "k":
    const int ${n}_l${i} = ${v} / ${X.per}, ${n}_k${i} = (${v} % ${X.per}) * ${X.ga};
    const ${g.idx} ${n}_o${i} = (${g.idx})min(${lb} + ${n}_l${i}, ${L} - 1) * ${ls};
% else:
    const int ${n}_l${i} = (${v} % ${X.per}) * ${X.ga}, ${n}_k${i} = ${v} / ${X.per};
% endif
% endfor
% for i in range(X.na):
    ${vtype(g.acc, X.ga)} ${n}_r${i};
% endfor
</%def>

<%def name="fetch(g, X, base, ls, ks, L, lb, k0, kend, checked)">
## Registers X_r<i> <- the tile of X at k = k0 .. k0+BK-1 (checked: zero at k >= kend).
<%
    n = X.name
    I = g.idx
%>
% for i in range(X.na):
% if X.fast == "k":
% if not checked:
    ${n}_r${i} = ${ldv(g, base, "%s_o%d + (%s)(%s + %s_k%d) * %s" % (n, i, I, k0, n, i, ks), X.ga)};
% else:
% for e in range(X.ga):
    ${lane(n + "_r%d" % i, e, X.ga)} = (${k0} + ${n}_k${i} + ${e} < ${kend}) ? ${ld(g, base, "%s_o%d + (%s)(%s + %s_k%d + %d) * %s" % (n, i, I, k0, n, i, e, ks))} : (${g.acc})0;
% endfor
% endif
% else:
    {
        const ${I} ko = (${I})(${k0} + ${n}_k${i}) * ${ks};
% if checked:
        if (${k0} + ${n}_k${i} >= ${kend}) ${n}_r${i} = (${vtype(g.acc, X.ga)})0; else
% endif
% if X.ga > 1:
        if (${n}_in) ${n}_r${i} = ${ldv(g, base, "ko + (%s + %s_l%d)" % (lb, n, i), X.ga)};
        else {
% for e in range(X.ga):
            ${lane(n + "_r%d" % i, e, X.ga)} = ${ld(g, base, "ko + (%s)min(%s + %s_l%d + %d, %s - 1) * %s" % (I, lb, n, i, e, L, ls))};
% endfor
        }
% else:
        ${n}_r${i} = ${ld(g, base, "ko + (%s)min(%s + %s_l%d, %s - 1) * %s" % (I, lb, n, i, L, ls))};
% endif
    }
% endif
% endfor
</%def>

<%def name="stash(g, X, buf)">
## Local tile `buf` of X <- the registers X_r<i> (k-major: X_s[buf][k][lane]).
<%
    n = X.name
    arr = n + "s"
%>
% for i in range(X.na):
% if X.fast == "k":
% for e in range(X.ga):
    ((__local ${g.acc}*)${arr}[${buf}][${n}_k${i} + ${e}])[${n}_l${i}] = ${lane(n + "_r%d" % i, e, X.ga)};
% endfor
% elif X.ga == g.vw:
    ${arr}[${buf}][${n}_k${i}][${n}_l${i} / ${g.vw}] = ${n}_r${i};
% else:
% for e in range(X.ga):
    ((__local ${g.acc}*)${arr}[${buf}][${n}_k${i}])[${n}_l${i} + ${e}] = ${lane(n + "_r%d" % i, e, X.ga)};
% endfor
% endif
% endfor
</%def>

<%def name="accumulators(g)">
% for c in range(g.rm):
% for e in range(g.vw):
% for cc in range(g.rn):
    ${g.accv} c${c}_${e}_${cc} = (${g.accv})0;
% endfor
% endfor
% endfor
</%def>

<%def name="multiply(g, buf)">
## The inner loop: BK steps, each RM + RN vector loads from local memory and TM * TN FMAs.
    #pragma unroll
    for (int kk = 0; kk < ${g.bk}; kk++) {          /* inner loop */
% for c in range(g.rm):
        const ${g.accv} a${c} = As[${buf}][kk][${c * g.wm} + ty];
% endfor
% for c in range(g.rn):
        const ${g.accv} b${c} = Bs[${buf}][kk][${c * g.wn} + tx];
% endfor
% for c in range(g.rm):
% for e in range(g.vw):
% for cc in range(g.rn):
        c${c}_${e}_${cc} = fma((${g.accv})(${lane("a%d" % c, e, g.vw)}), b${cc}, c${c}_${e}_${cc});
% endfor
% endfor
% endfor
    }                                               /* end of inner loop */
</%def>

<%def name="mainloop(g, a_args, b_args, kbeg, kend, fetch_a=None, fetch_b=None)">
## The K loop over [kbeg, kend) with double-buffered local tiles. a_args / b_args: (base, ls, ks, L, lb) of
## each operand as passed to setup(). fetch_a / fetch_b replace `fetch` for an operand (same signature).
<%
    fa = fetch_a or fetch
    fb = fetch_b or fetch
%>
    if (${kend} > ${kbeg}) {
        if (${kbeg} + ${g.bk} <= ${kend}) {
${fa(g, g.A, *a_args, k0=kbeg, kend=kend, checked=False)}
${fb(g, g.B, *b_args, k0=kbeg, kend=kend, checked=False)}
        } else {
${fa(g, g.A, *a_args, k0=kbeg, kend=kend, checked=True)}
${fb(g, g.B, *b_args, k0=kbeg, kend=kend, checked=True)}
        }
${stash(g, g.A, "0")}
${stash(g, g.B, "0")}
        barrier(CLK_LOCAL_MEM_FENCE);
        int cur = 0;
        for (int k0 = ${kbeg}; k0 < ${kend}; k0 += ${g.bk}) {
            const int kn = k0 + ${g.bk};
            if (kn < ${kend}) {                    /* the next step's tiles, in flight during the multiply */
                if (kn + ${g.bk} <= ${kend}) {
${fa(g, g.A, *a_args, k0="kn", kend=kend, checked=False)}
${fb(g, g.B, *b_args, k0="kn", kend=kend, checked=False)}
                } else {
${fa(g, g.A, *a_args, k0="kn", kend=kend, checked=True)}
${fb(g, g.B, *b_args, k0="kn", kend=kend, checked=True)}
                }
            }
${multiply(g, "cur")}
            if (kn < ${kend}) {
${stash(g, g.A, "cur ^ 1")}
${stash(g, g.B, "cur ^ 1")}
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            cur ^= 1;
        }
    }
</%def>

<%def name="for_each_run(g, body)">
## Calls body(i, j, acc) for each run of VW columns of the register block: C row i, first column j, the
## accumulator acc (VW lanes).
% for c in range(g.rm):
% for e in range(g.vw):
    {
        const int i = ib + ${c * g.wm * g.vw} + ty * ${g.vw} + ${e};
% for cc in range(g.rn):
        {
            const int j = jb + ${cc * g.wn * g.vw} + tx * ${g.vw};
${body(g, "c%d_%d_%d" % (c, e, cc))}
        }
% endfor
    }
% endfor
% endfor
</%def>
