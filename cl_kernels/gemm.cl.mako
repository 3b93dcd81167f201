## The CPU GEMM design:  C[b] = alpha * A[b] @ B[b] + beta * C[b]   (A: M x K, B: K x N, C: M x N, b < batch),
## chosen by a device profile's `[gemm] design = "cpu"` (cltorch/ops/gemm/cpu.py; GPUs: gemm_gpu.cl.mako).
##
## Every operand is addressed as  base[off + b*bs + row*rs + col*cs]  (element strides), so transposed and
## other strided views are read in place. Parameters (all from the device profile, see cltorch/ops/gemm/cpu.py):
##   dt      storage type of A, B, C: "float", "double", "half" or "bf16" (half is read with vload_half and
##           written with vstore_half_rte, accumulated in float; it needs no cl_khr_fp16; bf16 is bfloat16's
##           16-bit pattern in a ushort, widened by a shift and rounded to nearest even on store)
##   acc     accumulation type: "float" or "double"
##   idx     index type: "int" or "long" (long when an operand spans more than 2^31 elements)
## The names used only by some kernels still get (dummy) values: the template is strict.
##   c_epi   1: gemm_main takes one more operand E (E, e_off, e_rs, e_cs, e_bs after beta) and stores
##           alpha * A@B + beta * C + E, the sum E added in its own statement after the rest is rounded, so
##           the result is the GEMM's stored value plus E exactly as a separate elementwise add would give
##           (cltorch._capture fuses a recorded GEMM and the `x0 + x1` launch that adds a bias or residual to
##           it). Not for half. 0: no epilogue.
##
## Register blocking (BLIS-style micro-kernel, see Van Zee & van de Geijn,
## "BLIS: A Framework for Rapidly Instantiating BLAS Functionality", ACM TOMS 41(3), 2015):
##   mr      rows of C per work-item;  vw  vector width;  nv  vectors per row: nr = nv*vw columns
##   The micro-kernel reads A and B through run-time strides, with one more stride per operand: the
##   distance between panels (a_ps between row panels of mr rows, b_ps between column panels of nr
##   columns). The same code therefore reads
##     A in place (a_ps = mr*a_rs), or packed panels [M/mr][K][mr] (a_ps = K*mr; a_mode "packed");
##     B in place (b_ps = nr; needs unit column stride and N >= nr), or packed panels [N/nr][K][nr]
##     (b_rs = nr, b_ps = K*nr).
##   flags   bit 0: C's columns are contiguous (vector stores of whole tiles); bit 1: B is read in place and
##           N % nr != 0: the last column panel is read and computed at columns N-nr .. N-1 (in bounds) and
##           stores only its columns not stored by the panel before (jlo on). Each element's sum is the same
##           whichever tile computes it, so this gives the bits a packed, zero-padded panel gives. Vectors are accessed through element-aligned types (u<type><n>), so no
##     operand needs more than element alignment (cpu tensors over numpy memory are 16-byte aligned).
##   Rows past M are clamped to row M-1 (read, never stored); packed panels are zero padded.
##   a_mode  "packed": A is read from packed panels with compile-time offsets (one pointer increment per
##           k step: measured faster than six run-time-strided row pointers); "strided": in place.
##   b_mode  the element type B is read as: "any" when dt == acc (one program serves in-place and
##           packed B); for half "direct" or "packed" (packed panels hold the accumulation type).
##   ku      unroll factor of the k loop (0: leave it to the compiler)
##   kc, tm  kc == 0: work-item (x, y, z) computes the mr x nr tile at row panel x, column panel y of
##           batch z, over all of K.  kc > 0: work-item (x, y, z) computes tm tiles stacked along M
##           (column panel x, row group y), K in blocks of kc, so each kc x nr slice of B is reused
##           from L1 by the tm tiles; partial sums wait in a private array between blocks.
##   kb      k steps per work-item of the pack kernels gemm_pack_{a,b}_{lane,k,any}, which copy an
##           operand into panels: P[b][p][k][r] = S[b][lane p*R + r][k] (R = mr for A, nr for B), zero
##           past the last lane. "lane"/"k" name the source direction with unit stride (the copy loops
##           read along it, and the compiler sees the unit stride); "any" is the general case.
##
<%
    from types import SimpleNamespace
    def make_io(t):
        """Load/store helpers for elements stored as type t, computed in acc."""
        if t == "bf16":
            return SimpleNamespace(
                ld=lambda p, i: "bf16_ld(%s[%s])" % (p, i),
                ldv=lambda p, i, n: ("bf16_ld%d(vload%d(0, %s + (%s)))" % (n, n, p, i)) if n > 1 else "bf16_ld(%s[%s])" % (p, i),
                st=lambda p, i, v: "%s[%s] = bf16_st(%s)" % (p, i, v),
                stv=lambda p, i, v, n: ("vstore%d(bf16_st%d(%s), 0, %s + (%s))" % (n, n, v, p, i)) if n > 1 else "%s[%s] = bf16_st(%s)" % (p, i, v))
        if t == "half":
            return SimpleNamespace(
                ld=lambda p, i: "vload_half(%s, %s)" % (i, p),
                ldv=lambda p, i, n: ("vload_half%d(0, %s + (%s))" % (n, p, i)) if n > 1 else "vload_half(%s, %s)" % (i, p),
                st=lambda p, i, v: "vstore_half_rte(%s, %s, %s)" % (v, i, p),
                stv=lambda p, i, v, n: ("vstore_half%d_rte(%s, 0, %s + (%s))" % (n, v, p, i)) if n > 1 else "vstore_half_rte(%s, %s, %s)" % (v, i, p))
        # vectors are read and written through the element-aligned types u<type><n> (see below), so an
        # operand need only be aligned to its element: cpu tensors over numpy memory are 16-byte aligned
        return SimpleNamespace(
            ld=lambda p, i: "(%s)%s[%s]" % (acc, p, i),
            ldv=lambda p, i, n: ("*(__global const u%s%d*)(%s + (%s))" % (t, n, p, i)) if n > 1 else "%s[%s]" % (p, i),
            st=lambda p, i, v: "%s[%s] = %s" % (p, i, v),
            stv=lambda p, i, v, n: ("*(__global u%s%d*)(%s + (%s)) = %s" % (t, n, p, i, v)) if n > 1 else "%s[%s] = %s" % (p, i, v))
    io = make_io(dt)
    ld, st = io.ld, io.st
    lanes = "0123456789abcdef"
    def ptr(t):
        """The C type elements of storage type t are held in."""
        return "ushort" if t == "bf16" else t
%>
## a * b + c may be one fused multiply-add, except in deterministic mode: whether a compiler fuses depends on
## the device (NVIDIA and x86 CPUs with FMA do, a CPU without it cannot), so there every product is rounded
#pragma OPENCL FP_CONTRACT ${"OFF" if context.get("deterministic") else "ON"}
% if "double" in (dt, acc):
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
% endif
typedef ${idx} I;
<%
    epi_args = (",\n        __global const %s* E, I e_off, I e_rs, I e_cs, I e_bs" % ptr(dt)) if c_epi else ""
%>
% if dt == "bf16":
inline float bf16_ld(ushort h) { return as_float(((uint)h) << 16); }
inline ushort bf16_st(float f) {           /* round to nearest even; NaN stays NaN */
    uint u = as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)0x7fc0;
    return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
% for n in (2, 4, 8, 16):
inline float${n} bf16_ld${n}(ushort${n} h) { return as_float${n}(convert_uint${n}(h) << 16); }
inline ushort${n} bf16_st${n}(float${n} f) {
    uint${n} u = as_uint${n}(f);
    uint${n} r = (u + (uint${n})0x7fffu + ((u >> 16) & (uint${n})1u)) >> 16;
    return convert_ushort${n}(select(r, (uint${n})0x7fc0u, (u & (uint${n})0x7fffffffu) > (uint${n})0x7f800000u));
}
% endfor
% endif
% for t in sorted(set(x for x in (dt, acc) if x not in ("half", "bf16"))):
% for n in (2, 4, 8, 16):
typedef ${t}${n} u${t}${n} __attribute__((aligned(${8 if t == "double" else 4})));
% endfor
% endfor

<%
    NR = nv * vw
    vt = acc + (str(vw) if vw > 1 else "")
    at = acc if a_mode == "packed" else dt          # element type A is read as
    bt = acc if b_mode == "packed" else dt
    aio, bio = make_io(at), make_io(bt)
    def lane(v, e):
        return v if vw == 1 else "%s.s%s" % (v, lanes[e])
    g = SimpleNamespace(io=io, aio=aio, bio=bio, lane=lane, NR=NR, vt=vt, at=at, bt=bt)
%>
<%def name="transpose8(t)">
## t0..t7 (t_q.s_r = a_r.s_q) from a0..a7, vectors of 8 ${t}: three rounds of shuffle2 (pairs, quads, halves).
<%
    m = "ulong8" if t == "double" else "uint8"
    rounds = [("a", "b", 1, "(0,8,2,10,4,12,6,14)", "(1,9,3,11,5,13,7,15)"),
              ("b", "c", 2, "(0,1,8,9,4,5,12,13)", "(2,3,10,11,6,7,14,15)"),
              ("c", "t", 4, "(0,1,2,3,8,9,10,11)", "(4,5,6,7,12,13,14,15)")]
%>
% for src, dst, h, lo, hi in rounds:
% for i in range(8):
% if not i & h:
            ${t}8 ${dst}${i} = shuffle2(${src}${i}, ${src}${i + h}, (${m})${lo}), ${dst}${i + h} = shuffle2(${src}${i}, ${src}${i + h}, (${m})${hi});
% endif
% endfor
% endfor
</%def>
<%def name="pack_kernel(g, name, R, contig)">
<%
    ls = "1" if contig == "lane" else "ls"
    ks = "1" if contig == "k" else "ks"
%>
__kernel void ${name}(__global const ${ptr(dt)}* S, I s_off, I ls_, I ks_, I s_bs, int L, int K,
                      __global ${acc}* P, I p_bs)
{
% if contig == "lane":
    // neighbouring work-items take neighbouring panels: together they stream along the source's rows
    int p = get_global_id(0), k0 = get_global_id(1) * ${kb}, b = get_global_id(2);
% else:
    int k0 = get_global_id(0) * ${kb}, p = get_global_id(1), b = get_global_id(2);
% endif
    if (k0 >= K || p * ${R} >= L) return;
    I ls = ls_, ks = ks_;
    __global const ${ptr(dt)}* s = S + s_off + (I)b * s_bs + (I)(p * ${R}) * ls + (I)k0 * ks;
    __global ${acc}* d = P + (I)b * p_bs + ((I)p * K + k0) * ${R};
    int nl = L - p * ${R};
    if (nl >= ${R} && k0 + ${kb} <= K) {
% if contig == "k" and kb == 8 and R % 8 == 0:
        // each group of 8 lanes: 8 vector loads along k, an 8x8 transpose in registers, 8 vector stores
% for g0 in range(0, R, 8):
        {
% for r in range(8):
            ${acc}8 a${r} = ${g.io.ldv("s", "(I)%d * ls" % (g0 + r), 8)};
% endfor
${transpose8(acc)}
% for q in range(8):
            *(__global u${acc}8*)(d + ${q * R + g0}) = t${q};
% endfor
        }
% endfor
% elif contig == "k":
% for r in range(R):
% for q in range(kb):
        d[${q * R + r}] = ${g.io.ld("s", "(I)%d * %s + %d" % (r, ls, q))};
% endfor
% endfor
% else:
% for q in range(kb):
% for r in range(R):
        d[${q * R + r}] = ${g.io.ld("s", "(I)%d * %s + (I)%d * %s" % (q, ks, r, ls))};
% endfor
% endfor
% endif
    } else {
        for (int q = 0; q < ${kb} && k0 + q < K; q++)
            for (int r = 0; r < ${R}; r++)
                d[q * ${R} + r] = r < nl ? ${g.io.ld("s", "(I)q * %s + (I)r * %s" % (ks, ls))} : (${acc})0;
    }
}
</%def>
<%def name="operands(g, kstart)">
## Positions the A and B read pointers at k = kstart for the tile at (i0, row panel pi, column panel pj).
% if a_mode == "packed":
        __global const ${ptr(g.at)}* ab = A + (I)b * a_bs + (I)pi * a_ps + (I)(${kstart}) * ${mr};
% else:
        __global const ${ptr(g.at)}* ab = A + a_off + (I)b * a_bs + (I)pi * a_ps + (I)(${kstart}) * a_cs;
% for r in range(mr):
        I ro${r} = (I)min(${r}, M - 1 - i0) * a_rs;
% endfor
% endif
        __global const ${ptr(g.bt)}* bp = B + b_off + (I)b * b_bs + (I)pj * b_ps - (jlo - j0) + (I)(${kstart}) * b_rs;
</%def>
<%def name="micro(g, kstart, kend, c='c')">
## The micro-kernel: ${c}{r}_{v} += A[i0+r][k] * B[k][j0 + v*vw ...] for k in [kstart, kend).
% if ku:
        #pragma unroll ${ku}
% endif
        for (int k = ${kstart}; k < ${kend}; k++) {
% for v in range(nv):
            ${g.vt} b${v} = ${g.bio.ldv("bp", "%d" % (v * vw), vw)};
% endfor
% for r in range(mr):
            ${acc} x${r} = ${g.aio.ld("ab", ("%d" % r) if a_mode == "packed" else ("ro%d" % r))};
% for v in range(nv):
            ${c}${r}_${v} += x${r} * b${v};
% endfor
% endfor
            ab += ${mr if a_mode == "packed" else "a_cs"};
            bp += b_rs;
        }
</%def>
<%def name="store_tile(g)">
## Writes alpha * c + beta * C (C not read when beta == 0) for the tile at (i0, j0), columns from jlo on.
    {
        __global ${ptr(dt)}* cp = C + c_off + (I)b * c_bs + (I)i0 * c_rs + (I)j0 * c_cs;
% if c_epi:
        __global const ${ptr(dt)}* ep = E + e_off + (I)b * e_bs + (I)i0 * e_rs + (I)j0 * e_cs;
% endif
% if vw > 1:
        if ((flags & 1) && i0 + ${mr} <= M && j0 + ${g.NR} <= N && j0 == jlo${" && e_cs == 1" if c_epi else ""}) {
% for r in range(mr):
% for v in range(nv):
% if dt in ("half", "bf16"):
            if (beta == (${acc})0) ${g.io.stv("cp", "%d * c_rs + %d" % (r, v * vw), "alpha * c%d_%d" % (r, v), vw)};
            else ${g.io.stv("cp", "%d * c_rs + %d" % (r, v * vw), "alpha * c%d_%d + beta * %s" % (r, v, g.io.ldv("cp", "%d * c_rs + %d" % (r, v * vw), vw)), vw)};
% else:
            { __global u${dt}${vw}* q = (__global u${dt}${vw}*)(cp + ${r} * c_rs + ${v * vw});
% if c_epi:
              ${g.vt} t = (beta == (${acc})0) ? alpha * c${r}_${v} : alpha * c${r}_${v} + beta * (*q);
              t += *(__global const u${dt}${vw}*)(ep + ${r} * e_rs + ${v * vw});
              *q = t; }
% else:
              *q = (beta == (${acc})0) ? alpha * c${r}_${v} : alpha * c${r}_${v} + beta * (*q); }
% endif
% endif
% endfor
% endfor
        } else
% endif
        {
% for r in range(mr):
            if (i0 + ${r} < M) {
% for v in range(nv):
% for e in range(vw):
                if (j0 + ${v * vw + e} < N && j0 + ${v * vw + e} >= jlo) {
                    I o = ${r} * c_rs + (I)${v * vw + e} * c_cs;
                    ${acc} t = alpha * ${g.lane("c%d_%d" % (r, v), e)};
                    if (beta != (${acc})0) t += beta * ${g.io.ld("cp", "o")};
% if c_epi:
                    t += ${g.io.ld("ep", "%d * e_rs + (I)%d * e_cs" % (r, v * vw + e))};
% endif
                    ${g.io.st("cp", "o", "t")};
                }
% endfor
% endfor
            }
% endfor
        }
    }
</%def>
% if kb:
${pack_kernel(g, "gemm_pack_a_lane", mr, "lane")}
${pack_kernel(g, "gemm_pack_a_k", mr, "k")}
${pack_kernel(g, "gemm_pack_a_any", mr, "")}
${pack_kernel(g, "gemm_pack_b_lane", NR, "lane")}
${pack_kernel(g, "gemm_pack_b_k", NR, "k")}
${pack_kernel(g, "gemm_pack_b_any", NR, "")}
% endif

__kernel void gemm_main(__global const ${ptr(at)}* A, I a_off, I a_rs, I a_cs, I a_bs, I a_ps,
                        __global const ${ptr(bt)}* B, I b_off, I b_rs, I b_bs, I b_ps,
                        __global ${ptr(dt)}* C, I c_off, I c_rs, I c_cs, I c_bs, int flags,
                        int M, int N, int K, ${acc} alpha, ${acc} beta${epi_args})
{
% if kc == 0:
    // one mr x nr tile per work-item, all of K, summed in blocks of 64 k (a block sum, then the sum of those:
    // rounding error grows as K/64 + 64 instead of K, as with BLAS's K panels; one order along K was 3-6x
    // further from the float64 product than torch's at K = 700..2000)
    int pi = get_global_id(0), pj = get_global_id(1), b = get_global_id(2);
    int i0 = pi * ${mr}, j0 = pj * ${NR}, jlo = j0;
    if (i0 >= M || j0 >= N) return;
    if ((flags & 2) && j0 + ${NR} > N) j0 = N - ${NR};     // B in place: the last panel ends at column N
% for r in range(mr):
% for v in range(nv):
    ${vt} c${r}_${v} = (${vt})0;
% endfor
% endfor
    {
${operands(g, "0")}
        for (int kb0 = 0; kb0 < K; kb0 += 64) {
            int kb1 = min(K, kb0 + 64);
% for r in range(mr):
% for v in range(nv):
            ${vt} d${r}_${v} = (${vt})0;
% endfor
% endfor
${micro(g, "kb0", "kb1", "d")}
% for r in range(mr):
% for v in range(nv):
            c${r}_${v} += d${r}_${v};
% endfor
% endfor
        }
    }
${store_tile(g)}
% else:
    // tm tiles stacked along M per work-item, K in blocks of kc: the kc x nr slice of B stays in L1 while
    // the tm tiles use it; partial sums wait in a private array between blocks.
    int pj = get_global_id(0), pg = get_global_id(1), b = get_global_id(2);
    int j0 = pj * ${NR}, jlo = j0, ig = pg * ${tm * mr};
    if (ig >= M || j0 >= N) return;
    if ((flags & 2) && j0 + ${NR} > N) j0 = N - ${NR};     // B in place: the last panel ends at column N
    ${vt} part[${tm * mr * nv}];
    for (int t = 0; t < ${tm * mr * nv}; t++) part[t] = (${vt})0;
    for (int k0 = 0; k0 < K; k0 += ${kc}) {
        int k1 = min(K, k0 + ${kc});
        for (int t = 0; t < ${tm}; t++) {
            int pi = pg * ${tm} + t, i0 = pi * ${mr};
            if (i0 >= M) break;
% for r in range(mr):
% for v in range(nv):
            ${vt} c${r}_${v} = part[t * ${mr * nv} + ${r * nv + v}];
% endfor
% endfor
${operands(g, "k0")}
${micro(g, "k0", "k1")}
% for r in range(mr):
% for v in range(nv):
            part[t * ${mr * nv} + ${r * nv + v}] = c${r}_${v};
% endfor
% endfor
        }
    }
    for (int t = 0; t < ${tm}; t++) {
        int i0 = ig + t * ${mr};
        if (i0 >= M) break;
% for r in range(mr):
% for v in range(nv):
        ${vt} c${r}_${v} = part[t * ${mr * nv} + ${r * nv + v}];
% endfor
% endfor
${store_tile(g)}
    }
% endif
}
