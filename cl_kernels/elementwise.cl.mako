## One strided elementwise template for every pointwise op.
##   operands: list of (kind, storage_type, compute_type); kind "t" = tensor, "s" = scalar argument
##   out_type: storage type of the output; expr: C expression over x0..x{n-1}; rank: 0 = contiguous fast path,
##   else the number of collapsed dims; to_bool: the output is bool (stored as uchar 0/1).
##   "bfloat16" (storage or compute type) is held as ushort bit patterns and computed in float: widened exactly on
##   load, rounded to nearest even on store (NaN stores as 0x7FC0, as PyTorch's scalar conversion).
##   "half" storage is read with vload_half and written with vstore_half_rte (core OpenCL, no cl_khr_fp16 needed);
##   its compute type is float, so the result is the same with or without the extension.
##   gvec (the GPU design of the contiguous path, rank 0; absent or 0: the CPU design): work-group g covers elements
##   [g*L*epi, (g+1)*L*epi) of the n (L: the local size); in a whole chunk, work-item l reads its epi/gvec vectors
##   of gvec elements at vector indices l, l + L, ... (a group's lanes on consecutive 16-byte words: PyTorch's CUDA
##   vectorized loop), every load before any store, and computes each element on scalars (ew_one: the operations,
##   builtins and conversions of the scalar path, so the bits do not depend on gvec, alignment or the tail); the
##   last, partial chunk runs element by element (lane l: elements l, l + L, ...). Vectors need every operand's
##   offset to be a multiple of gvec (checked by the launcher; buffers start aligned).
<%namespace name="c" file="common.cl.mako"/>
<%namespace name="sm" file="special_math.cl.mako"/>
<%!
def ctype(t):
    return "float" if t == "bfloat16" else t

def ptype(t):
    return "ushort" if t == "bfloat16" else t

def load(st, ct, v):
    if st == "half":     # vload_half is core OpenCL: half storage needs no cl_khr_fp16
        return "(%s)vload_half(0, &%s)" % (ctype(ct), v)
    return "(%s)%s" % (ctype(ct), ("bf16_load(%s)" % v) if st == "bfloat16" else v)

def store(ot, v, dst):
    if ot == "half":     # rounds to nearest even, as a (half) conversion does
        return "vstore_half_rte((float)(%s), 0, &%s)" % (v, dst)
    return "%s = %s" % (dst, ("bf16_store((float)(%s))" % v) if ot == "bfloat16" else "(%s)(%s)" % (ot, v))

## the GPU design's reads and writes: g elements of storage type st at an aligned pointer (g = 1: one element)
def raw(st, g):          # the type a read gives: half storage is read as float (vloada_half widens exactly)
    return ("float" if st == "half" else ptype(st)) + (str(g) if g > 1 else "")

def vread(st, g, ptr):
    if st == "half":
        return ("vloada_half%d(0, %s)" % (g, ptr)) if g > 1 else "vload_half(0, %s)" % ptr
    return ("*(__global const %s%d*)(%s)" % (ptype(st), g, ptr)) if g > 1 else "*(%s)" % ptr

def vwrite(ot, g, ptr, v):
    if ot == "half":     # rounds to nearest even, as the scalar path's vstore_half_rte
        return ("vstorea_half%d_rte(%s, 0, %s)" % (g, v, ptr)) if g > 1 else "vstore_half_rte(%s, 0, %s)" % (v, ptr)
    return ("*(__global %s%d*)(%s) = %s" % (ptype(ot), g, ptr, v)) if g > 1 else "*(%s) = %s" % (ptr, v)

def comp(v, g, c):
    return "%s.s%d" % (v, c) if g > 1 else v

def value(st, ct, x):    # the compute-type value of one element x as read (load()'s conversion)
    return ("(%s)bf16_load(%s)" % (ctype(ct), x)) if st == "bfloat16" else "(%s)(%s)" % (ctype(ct), x)

def one_args(operands, read):    # ew_one's arguments: each tensor operand's element as read(i, st), each scalar
    return ", ".join(value(st, ct, read(i, st)) if kind == "t" else "s%d" % i
                     for i, (kind, st, ct) in enumerate(operands))

def stored(ot, to_bool, expr):   # the element as written (store()'s conversion; half: the float vstore rounds)
    if to_bool:
        return "(%s)((%s) != 0)" % (ot, expr)
    if ot == "half":
        return "(float)(%s)" % expr
    return ("bf16_store((float)(%s))" % expr) if ot == "bfloat16" else "(%s)(%s)" % (ot, expr)
%>
${c.preamble(types)}
% if "bfloat16" in types:
typedef float bfloat16;      /* the compute type: expressions' casts to it mean float */
inline float bf16_load(ushort h) { return as_float(((uint)h) << 16); }
inline ushort bf16_store(float f) {
    uint u = as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)0x7fc0;
    return (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
% endif
% if "sm_" in expr:
${sm.helpers(types)}
% endif
% if context.get("gvec", 0):
## one element of the GPU design: the scalar path's loads' conversions are the caller's, its store's conversion here
inline ${raw(out_type, 1)} ew_one(${", ".join("%s x%d" % (ctype(o[2]), i) for i, o in enumerate(operands))}) {
    return ${stored(out_type, to_bool, expr)};
}
% endif
<% nt = [i for i, o in enumerate(operands) if o[0] == "t"] %>
__kernel void ew(__global ${ptype(out_type)}* out, long out_off
% for i, (kind, st, ct) in enumerate(operands):
% if kind == "t":
    , __global const ${ptype(st)}* in${i}, long off${i}
% else:
    , ${ctype(ct)} s${i}
% endif
% endfor
    , long n
% for d in range(rank):
    , long size${d}
% endfor
% for d in range(rank):
    , long ostr${d}
% for i in nt:
    , long str${i}_${d}
% endfor
% endfor
    )
{
% if rank == 0 and context.get("gvec", 0):
<% g = context.get("gvec", 0); nv = epi // g %>
## the GPU design (see the top of this file)
    long L = get_local_size(0), l = get_local_id(0);
    long base = (long)get_group_id(0) * L * ${epi};
    if (base + L * ${epi} <= n) {
## unrolled here, not left to the compiler: every vector of every operand loaded into registers first
% for j in range(nv):
        long e${j} = base + (${j} * L + l) * ${g};
% for i in nt:
        ${raw(operands[i][1], g)} r${i}_${j} = ${vread(operands[i][1], g, "in%d + off%d + e%d" % (i, i, j))};
% endfor
% endfor
% for j in range(nv):
        {
            ${raw(out_type, g)} o;
% for cc in range(g):
            ${comp("o", g, cc)} = ew_one(${one_args(operands, lambda i, st: comp("r%d_%d" % (i, j), g, cc))});
% endfor
            ${vwrite(out_type, g, "out + out_off + e%d" % j, "o")};
        }
% endfor
    } else {
        for (int j = 0; j < ${epi}; ++j) {
            long e = base + j * L + l;
            if (e < n) {
<% tail_args = one_args(operands, lambda i, st: vread(st, 1, "in%d + off%d + e" % (i, i))) %>
                ${vwrite(out_type, 1, "out + out_off + e", "ew_one(%s)" % tail_args)};
            }
        }
    }
}
% else:
    long gid = get_global_id(0);
% if rank != 0:
    if (gid >= n) return;
% endif
% if rank == 0:
## contiguous fast path: each work-item does `epi` consecutive elements (a fixed-trip loop the compiler
## vectorises on CPU devices), with a guarded tail
    long start = gid * ${epi};
    if (start + ${epi} <= n) {
% if vw > 1:
## vector path: operands aligned to vw elements, expression valid on vector types (checked by the launcher)
        for (int j = 0; j < ${epi}; j += ${vw}) {
            long e = start + j;
% for i, (kind, st, ct) in enumerate(operands):
% if kind == "t":
            ${ct}${vw} x${i} = *(__global const ${ct}${vw}*)(in${i} + off${i} + e);
% else:
            ${ct} x${i} = s${i};
% endif
% endfor
            *(__global ${out_type}${vw}*)(out + out_off + e) = ${expr};
        }
% else:
        for (int j = 0; j < ${epi}; ++j) {
            long e = start + j;
${elem("e")}
        }
% endif
    } else {
        for (long e = start; e < n; ++e) {
${elem("e")}
        }
    }
}
% else:
## strided path: work-item (row, chunk) does up to `run` consecutive elements of the innermost collapsed dim,
## so the div/mod index arithmetic is paid once per run, not once per element
<% last = rank - 1 %>
    long inner = size${last};
    long nch = (inner + ${run} - 1) / ${run};
    if (gid >= (n / inner) * nch) return;
    long row = gid / nch, c0 = (gid - row * nch) * ${run};
    long rem = row, id;
    long o = out_off + c0 * ostr${last};
% for i in nt:
    long p${i} = off${i} + c0 * str${i}_${last};
% endfor
% for d in reversed(range(last)):
% if d > 0:
    id = rem % size${d}; rem = rem / size${d};
% else:
    id = rem;
% endif
    o += id * ostr${d};
% for i in nt:
    p${i} += id * str${i}_${d};
% endfor
% endfor
    long cnt = inner - c0 < ${run} ? inner - c0 : ${run};
    for (long j = 0; j < cnt; ++j) {
% for i, (kind, st, ct) in enumerate(operands):
% if kind == "t":
        ${ctype(ct)} x${i} = ${load(st, ct, "in%d[p%d + j * str%d_%d]" % (i, i, i, last))};
% else:
        ${ctype(ct)} x${i} = s${i};
% endif
% endfor
% if to_bool:
        out[o + j * ostr${last}] = (${out_type})((${expr}) != 0);
% else:
        ${store(out_type, expr, "out[o + j * ostr%d]" % last)};
% endif
    }
}
% endif
% endif

<%def name="elem(idx)">
% for i, (kind, st, ct) in enumerate(operands):
% if kind == "t":
            ${ctype(ct)} x${i} = ${load(st, ct, "in%d[off%d + %s]" % (i, i, idx))};
% else:
            ${ctype(ct)} x${i} = s${i};
% endif
% endfor
% if to_bool:
            out[out_off + ${idx}] = (${out_type})((${expr}) != 0);
% else:
            ${store(out_type, expr, "out[out_off + %s]" % idx)};
% endif
</%def>
