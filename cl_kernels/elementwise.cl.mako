## One strided elementwise template for every pointwise op.
##   operands: list of (kind, storage_type, compute_type); kind "t" = tensor, "s" = scalar argument
##   out_type: storage type of the output; expr: C expression over x0..x{n-1}; rank: 0 = contiguous fast path,
##   else the number of collapsed dims; to_bool: the output is bool (stored as uchar 0/1).
<%namespace name="c" file="common.cl.mako"/>
${c.preamble(types)}
<% nt = [i for i, o in enumerate(operands) if o[0] == "t"] %>
__kernel void ew(__global ${out_type}* out, long out_off
% for i, (kind, st, ct) in enumerate(operands):
% if kind == "t":
    , __global const ${st}* in${i}, long off${i}
% else:
    , ${ct} s${i}
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
        ${ct} x${i} = (${ct})in${i}[p${i} + j * str${i}_${last}];
% else:
        ${ct} x${i} = s${i};
% endif
% endfor
% if to_bool:
        out[o + j * ostr${last}] = (${out_type})((${expr}) != 0);
% else:
        out[o + j * ostr${last}] = (${out_type})(${expr});
% endif
    }
}
% endif

<%def name="elem(idx)">
% for i, (kind, st, ct) in enumerate(operands):
% if kind == "t":
            ${ct} x${i} = (${ct})in${i}[off${i} + ${idx}];
% else:
            ${ct} x${i} = s${i};
% endif
% endfor
% if to_bool:
            out[out_off + ${idx}] = (${out_type})((${expr}) != 0);
% else:
            out[out_off + ${idx}] = (${out_type})(${expr});
% endif
</%def>
