## Tiled GEMM:  C[b] = alpha * A[b] @ B[b] + beta * C[b]   (A: M x K, B: K x N, C: M x N, b < batch)
##
## Every operand is addressed as  base[off + b*bs + row*rs + col*cs]  (element strides), so transposed and
## other strided views are read in place. Parameters (all from the device profile, see cltorch/ops/_gemm.py):
##   kind    "main": the GEMM kernel gemm_main;  "pack": the panel-packing kernel gemm_pack
##   dt      storage type of A, B, C: "float", "double" or "half" (half is read with vload_half and
##           written with vstore_half_rte, accumulated in float; it needs no cl_khr_fp16)
##   acc     accumulation type: "float" or "double"
##   idx     index type: "int" or "long" (long when an operand spans more than 2^31 elements)
##   use_local 0: register blocking without local memory (CPU devices).
##           1: work-group tiles staged in local memory (GPUs).
## The names of the kernels not rendered still get (dummy) values: the template is strict.
##
## kind == "pack": P[b][p][k][r] = S[b][p*R + r][k] with R = lanes_n, zero past L lanes; kb k-steps per
##   work-item; contig ("lane", "k" or "") says which source direction has unit stride, so that the copy
##   loops read along it and the compiler sees the unit stride.
##
## use_local == 0 (register-blocked, the CPU path; BLIS-style micro-kernel, see Van Zee & van de Geijn,
## "BLIS: A Framework for Rapidly Instantiating BLAS Functionality", ACM TOMS 41(3), 2015):
##   mr      rows of C per work-item;  vw  vector width;  nv  vectors per row: nr = nv*vw columns
##   a_mode  "strided": A read through its strides (rows past M are clamped to row M-1 and not stored);
##           "packed":  A read from panels made by gemm_pack: [b][M/mr][K][mr], zero padded.
##   b_mode  "packed":  B read from panels made by gemm_pack: [b][N/nr][K][nr], zero padded, in the
##                      accumulation type, so every k step is nv aligned vector loads;
##           "direct":  B read in place with vector loads (host guarantees cs == 1, N % nr == 0 and
##                      vector-aligned off, rs, bs).
##   ku      unroll factor of the k loop (0: leave it to the compiler)
##   kc, tm  kc == 0: work-item (x, y, z) computes the mr x nr tile at row panel x, column panel y of
##           batch z, over all of K.  kc > 0: work-item (x, y, z) computes tm tiles stacked along M
##           (column panel x, row group y), K in blocks of kc, so each kc x nr slice of B is reused
##           from L1 by the tm tiles; partial sums wait in a private array between blocks.
##
## use_local == 1 (textbook local-memory tiling; Volkov & Demmel, "Benchmarking GPUs to tune dense linear
## algebra", SC 2008, for the register tile per work-item):
##   lx, ly  work-group shape; each work-item computes mr x nr elements of C spread with stride ly (rows)
##           and lx (columns), so neighbouring work-items touch neighbouring columns (coalesced stores);
##   tk      K depth of the staged tiles;  the group tile is (ly*mr) x (lx*nr).
##   a_kfast / b_kfast: the cooperative loads walk k fastest (set when that operand is contiguous in k).
##   Work-item (x, y, z): group (gx, gy) covers columns [gx*lx*nr, ...) and rows [gy*ly*mr, ...).
<%
    if dt == "half":
        def ld(ptr, i):
            return "vload_half(%s, %s)" % (i, ptr)
        def ldv(ptr, i, n):
            return "vload_half%d(0, %s + (%s))" % (n, ptr, i) if n > 1 else "vload_half(%s, %s)" % (i, ptr)
        def st(ptr, i, v):
            return "vstore_half_rte(%s, %s, %s)" % (v, i, ptr)
        def stv(ptr, i, v, n):
            return "vstore_half%d_rte(%s, 0, %s + (%s))" % (n, v, ptr, i) if n > 1 else "vstore_half_rte(%s, %s, %s)" % (v, i, ptr)
    else:
        def ld(ptr, i):
            return "(%s)%s[%s]" % (acc, ptr, i)
        def ldv(ptr, i, n):
            return "*(__global const %s%s*)(%s + (%s))" % (dt, n if n > 1 else "", ptr, i)
        def st(ptr, i, v):
            return "%s[%s] = %s" % (ptr, i, v)
        def stv(ptr, i, v, n):
            return "*(__global %s%s*)(%s + (%s)) = %s" % (dt, n if n > 1 else "", ptr, i, v)
    lanes = "0123456789abcdef"
%>
#pragma OPENCL FP_CONTRACT ON
% if "double" in (dt, acc):
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
% endif
typedef ${idx} I;

% if kind == "pack":
<%
    R = lanes_n
    ls = "1" if contig == "lane" else "ls"
    ks = "1" if contig == "k" else "ks"
%>
// Packs one operand into panels of R lanes:  P[b][p][k][r] = S[b][lane p*R + r][k], zero past L lanes.
// For A the lanes are rows (lane stride a_rs, k stride a_cs); for B they are columns (b_cs, b_rs).
// Work-item (x, y, z) copies the R x ${kb} block at k = x*${kb} of panel y (x and y swapped when
// contig is "lane"), batch z. contig = "${contig}":
// the source is contiguous along ${"k" if contig == "k" else "the lanes" if contig == "lane" else "neither"},
// and the loops below read along that direction (the written block, R*${kb} elements, stays in L1).
__kernel void gemm_pack(__global const ${dt}* S, I s_off, I ls_, I ks_, I s_bs, int L, int K,
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
    __global const ${dt}* s = S + s_off + (I)b * s_bs + (I)(p * ${R}) * ls + (I)k0 * ks;
    __global ${acc}* d = P + (I)b * p_bs + ((I)p * K + k0) * ${R};
    int nl = L - p * ${R};
    if (nl >= ${R} && k0 + ${kb} <= K) {
% if contig == "k":
% for r in range(R):
% for q in range(kb):
        d[${q * R + r}] = ${ld("s", "(I)%d * %s + %d" % (r, ls, q))};
% endfor
% endfor
% else:
% for q in range(kb):
% for r in range(R):
        d[${q * R + r}] = ${ld("s", "(I)%d * %s + (I)%d * %s" % (q, ks, r, ls))};
% endfor
% endfor
% endif
    } else {
        for (int q = 0; q < ${kb} && k0 + q < K; q++)
            for (int r = 0; r < ${R}; r++)
                d[q * ${R} + r] = r < nl ? ${ld("s", "(I)q * %s + (I)r * %s" % (ks, ls))} : (${acc})0;
    }
}

% elif use_local == 0:
<%
    NR = nv * vw
    vt = acc + (str(vw) if vw > 1 else "")
    def lane(v, e):
        return v if vw == 1 else "%s.s%s" % (v, lanes[e])
    from types import SimpleNamespace
    g = SimpleNamespace(ld=ld, ldv=ldv, st=st, stv=stv, lane=lane, NR=NR, vt=vt)
%>
<%def name="micro(g, kstart, kend)">
## The micro-kernel: c{r}_{v} += A[i0+r][k] * B[k][j0 + v*vw ...] for k in [kstart, kend).
## Expects pointers a0..a{mr-1} (strided) or ap (packed) and bp, all positioned at k = kstart.
% if ku:
        #pragma unroll ${ku}
% endif
        for (int k = ${kstart}; k < ${kend}; k++) {
% for v in range(nv):
% if b_mode == "packed":
            ${g.vt} b${v} = bp[${v}];
% else:
            ${g.vt} b${v} = ${g.ldv("bp", "%d" % (v * vw), vw)};
% endif
% endfor
% for r in range(mr):
% if a_mode == "strided":
            ${acc} x${r} = ${g.ld("a%d" % r, "0")};
% else:
            ${acc} x${r} = ap[${r}];
% endif
% for v in range(nv):
            c${r}_${v} += x${r} * b${v};
% endfor
% endfor
% if b_mode == "packed":
            bp += ${nv};
% else:
            bp += b_rs;
% endif
% if a_mode == "packed":
            ap += ${mr};
% else:
% for r in range(mr):
            a${r} += a_cs;
% endfor
% endif
        }
</%def>
<%def name="a_ptrs(g, kstart)">
% if a_mode == "strided":
% for r in range(mr):
        __global const ${dt}* a${r} = A + a_off + (I)b * a_bs + (I)min(i0 + ${r}, M - 1) * a_rs + (I)(${kstart}) * a_cs;
% endfor
% else:
        __global const ${acc}* ap = A + (I)b * a_bs + (I)(i0 / ${mr}) * K * ${mr} + (I)(${kstart}) * ${mr};
% endif
</%def>
<%def name="b_ptr(g, kstart)">
% if b_mode == "packed":
        __global const ${g.vt}* bp = (__global const ${g.vt}*)(B + (I)b * b_bs + (I)pj * K * ${g.NR}) + (I)(${kstart}) * ${nv};
% else:
        __global const ${dt}* bp = B + b_off + (I)b * b_bs + j0 + (I)(${kstart}) * b_rs;
% endif
</%def>
<%def name="store_tile(g)">
## Writes alpha * c + beta * C (C not read when beta == 0) for the tile at (i0, j0).
    {
        __global ${dt}* cp = C + c_off + (I)b * c_bs + (I)i0 * c_rs + (I)j0 * c_cs;
% if vw > 1:
        if (c_vec && i0 + ${mr} <= M && j0 + ${g.NR} <= N) {
% for r in range(mr):
% for v in range(nv):
% if dt == "half":
            if (beta == (${acc})0) ${g.stv("cp", "%d * c_rs + %d" % (r, v * vw), "alpha * c%d_%d" % (r, v), vw)};
            else ${g.stv("cp", "%d * c_rs + %d" % (r, v * vw), "alpha * c%d_%d + beta * %s" % (r, v, g.ldv("cp", "%d * c_rs + %d" % (r, v * vw), vw)), vw)};
% else:
            { __global ${dt}${vw}* q = (__global ${dt}${vw}*)(cp + ${r} * c_rs + ${v * vw});
              *q = (beta == (${acc})0) ? alpha * c${r}_${v} : alpha * c${r}_${v} + beta * (*q); }
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
                if (j0 + ${v * vw + e} < N) {
                    I o = ${r} * c_rs + (I)${v * vw + e} * c_cs;
                    ${acc} t = alpha * ${g.lane("c%d_%d" % (r, v), e)};
                    if (beta != (${acc})0) t += beta * ${g.ld("cp", "o")};
                    ${g.st("cp", "o", "t")};
                }
% endfor
% endfor
            }
% endfor
        }
    }
</%def>

__kernel void gemm_main(__global const ${dt if a_mode == "strided" else acc}* A, I a_off, I a_rs, I a_cs, I a_bs,
                        __global const ${dt if b_mode == "direct" else acc}* B, I b_off, I b_rs, I b_bs,
                        __global ${dt}* C, I c_off, I c_rs, I c_cs, I c_bs, int c_vec,
                        int M, int N, int K, ${acc} alpha, ${acc} beta)
{
% if kc == 0:
    // one mr x nr tile per work-item, all of K
    int pi = get_global_id(0), pj = get_global_id(1), b = get_global_id(2);
    int i0 = pi * ${mr}, j0 = pj * ${NR};
    if (i0 >= M || j0 >= N) return;
% for r in range(mr):
% for v in range(nv):
    ${vt} c${r}_${v} = (${vt})0;
% endfor
% endfor
    {
${a_ptrs(g, "0")}
${b_ptr(g, "0")}
${micro(g, "0", "K")}
    }
${store_tile(g)}
% else:
    // tm tiles stacked along M per work-item, K in blocks of kc: the kc x nr slice of B stays in L1 while
    // the tm tiles use it; partial sums wait in a private array between blocks.
    int pj = get_global_id(0), pg = get_global_id(1), b = get_global_id(2);
    int j0 = pj * ${NR}, ig = pg * ${tm * mr};
    if (ig >= M || j0 >= N) return;
    ${vt} part[${tm * mr * nv}];
    for (int t = 0; t < ${tm * mr * nv}; t++) part[t] = (${vt})0;
    for (int k0 = 0; k0 < K; k0 += ${kc}) {
        int k1 = min(K, k0 + ${kc});
        for (int t = 0; t < ${tm}; t++) {
            int i0 = ig + t * ${mr};
            if (i0 >= M) break;
% for r in range(mr):
% for v in range(nv):
            ${vt} c${r}_${v} = part[t * ${mr * nv} + ${r * nv + v}];
% endfor
% endfor
${a_ptrs(g, "k0")}
${b_ptr(g, "k0")}
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

% else:
<%
    TM = ly * mr
    TN = lx * nr
%>
__kernel __attribute__((reqd_work_group_size(${lx}, ${ly}, 1)))
void gemm_main(__global const ${dt}* A, I a_off, I a_rs, I a_cs, I a_bs,
               __global const ${dt}* B, I b_off, I b_rs, I b_cs, I b_bs,
               __global ${dt}* C, I c_off, I c_rs, I c_cs, I c_bs,
               int M, int N, int K, ${acc} alpha, ${acc} beta)
{
    __local ${acc} As[${tk}][${TM + 1}];
    __local ${acc} Bs[${tk}][${TN + 1}];
    int tx = get_local_id(0), ty = get_local_id(1), b = get_global_id(2);
    int lid = ty * ${lx} + tx;
    int jb = get_group_id(0) * ${TN}, ib = get_group_id(1) * ${TM};
    __global const ${dt}* Ab = A + a_off + (I)b * a_bs;
    __global const ${dt}* Bb = B + b_off + (I)b * b_bs;
% for r in range(mr):
% for c in range(nr):
    ${acc} c${r}_${c} = (${acc})0;
% endfor
% endfor
    for (int k0 = 0; k0 < K; k0 += ${tk}) {
        for (int t = lid; t < ${tk * TM}; t += ${lx * ly}) {
% if a_kfast:
            int kk = t % ${tk}, ii = t / ${tk};
% else:
            int ii = t % ${TM}, kk = t / ${TM};
% endif
            int i = ib + ii, k = k0 + kk;
            As[kk][ii] = (i < M && k < K) ? ${ld("Ab", "(I)i * a_rs + (I)k * a_cs")} : (${acc})0;
        }
        for (int t = lid; t < ${tk * TN}; t += ${lx * ly}) {
% if b_kfast:
            int kk = t % ${tk}, jj = t / ${tk};
% else:
            int jj = t % ${TN}, kk = t / ${TN};
% endif
            int j = jb + jj, k = k0 + kk;
            Bs[kk][jj] = (j < N && k < K) ? ${ld("Bb", "(I)k * b_rs + (I)j * b_cs")} : (${acc})0;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < ${tk}; kk++) {
% for c in range(nr):
            ${acc} y${c} = Bs[kk][tx + ${c * lx}];
% endfor
% for r in range(mr):
            { ${acc} x = As[kk][ty + ${r * ly}];
% for c in range(nr):
              c${r}_${c} += x * y${c};
% endfor
            }
% endfor
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    __global ${dt}* Cb = C + c_off + (I)b * c_bs;
% for r in range(mr):
    { int i = ib + ty + ${r * ly};
      if (i < M) {
% for c in range(nr):
        { int j = jb + tx + ${c * lx};
          if (j < N) {
            I o = (I)i * c_rs + (I)j * c_cs;
            ${acc} t = alpha * c${r}_${c};
            if (beta != (${acc})0) t += beta * ${ld("Cb", "o")};
            ${st("Cb", "o", "t")};
          } }
% endfor
      } }
% endfor
}
% endif
