## Indexing kernels: one gather/put kernel for every index op, and the stream-compaction kernels behind
## nonzero, masked_select and masked_scatter.
##
## idx (gather/put): the work is an iteration space of rank R (sizes sz0..). Every operand has strides over it:
##   "direct" (a): the output of a gather, or the values of a put (absent when the value is a scalar);
##   "data"   (b): the indexed tensor, with stride 0 on the dims that the index tensors replace;
##   index k (K of them, int64): its broadcast strides; its value v adds v * ist_k to the data position,
##   after a bounds check against isz_k (negative values wrap when neg is true).
## A bad index never reads or writes out of bounds: the first work-item to find one records
## (k, value) into err[0..3] with an atomic compare-and-swap, and the host raises IndexError after the launch.
##   mode: "gather" (a = b[...]) or "put" (b[...] op= a);  op: assign | add | mul | max | min
##   dt: OpenCL type of data (for gather and assign only the item size matters: uchar/ushort/uint/ulong)
##   floating: dt is a floating type (NaN rules of max/min); scalar: the put value is a kernel argument
## Runtime flags: W, the positions of the innermost dim per work-item (a short contiguous run; 1 on GPUs);
##   neg, negative indices wrap; inner_ix, some index varies along the innermost dim (else the indices are
##   resolved once per work-item). R >= 1 (the caller pads the rank to a few buckets to bound program count).
##
## cnt / compact (stream compaction over a strided tensor of rank R, in row-major order):
##   work-item c owns elements [c*L, min(n, (c+1)*L)); cnt writes how many are non-zero in its chunk;
##   compact gets the exclusive prefix of those counts and writes, in order:
##     cmode "coords": the coordinates of every non-zero element (nonzero; the rank is not collapsed, only
##                     padded with `pad` leading size-1 dims, whose coordinates are not written)
##     cmode "values": the value of a second strided operand at every non-zero mask element (masked_select)
##     cmode "mscatter": out = mask ? src[next] : self, over every element (masked_scatter)
<%namespace name="c" file="common.cl.mako"/>
${c.preamble(types)}
% if kernel == "idx":
<%
    is_put = mode == "put"
    has_a = not (is_put and scalar)
    wide = dt in ("double", "long", "ulong")
%>
% if is_put and op != "assign" and wide:
#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable
% if op in ("max", "min") and dt == "long":
#pragma OPENCL EXTENSION cl_khr_int64_extended_atomics : enable
% endif
% endif
% if is_put and op != "assign":
<%
    if op == "add":
        comb = "cur + v"
    elif op == "mul":
        comb = "cur * v"
    elif floating:
        cmp = ">" if op == "max" else "<"
        comb = f"((isnan(v) || v {cmp} cur) ? v : cur)"
    else:
        cmp = ">" if op == "max" else "<"
        comb = f"(v {cmp} cur ? v : cur)"
    word = "long" if wide else "int"
    cas = "atom_cmpxchg" if wide else "atomic_cmpxchg"
    if dt in ("float", "double"):
        to_word, from_word = f"as_{word}", f"as_{dt}"
    else:
        to_word = from_word = ""
%>
inline void upd(__global ${dt}* p, ${dt} v)
{
% if op == "add" and dt == "int":
    atomic_add((volatile __global int*)p, v);
% elif op == "add" and dt == "long":
    atom_add((volatile __global long*)p, v);
% elif op in ("max", "min") and dt == "int":
    atomic_${op}((volatile __global int*)p, v);
% elif op in ("max", "min") and dt == "long":
    atom_${op}((volatile __global long*)p, v);
% else:
    volatile __global ${word}* q = (volatile __global ${word}*)p;
    // the first read is atomic too: a plain load racing another work-item's compare-and-swap is a data race
    // (OpenCL's memory model; Oclgrind reports it), even though the loop would retry on a stale value
    ${word} old = ${"atom_add" if wide else "atomic_add"}(q, (${word})0), assumed;
    do {
        assumed = old;
        ${dt} cur = ${from_word}(assumed);
        ${dt} nv = ${comb};
        ${word} nw = ${to_word}(nv);
        if (nw == assumed) break;
        old = ${cas}(q, assumed, nw);
    } while (old != assumed);
% endif
}
% endif

__kernel void idx(__global ${dt}* data, long data_off
% if not is_put:
    , __global ${dt}* out, long a_off
% elif has_a:
    , __global const ${dt}* val, long a_off
% else:
    , ${dt} sval
% endif
% for k in range(K):
    , __global const long* ix${k}, long ixo${k}, long isz${k}, long ist${k}
% endfor
    , long nitems, long W, long neg, long inner_ix
% for d in range(R):
    , long sz${d}
% endfor
% for d in range(R):
% if has_a:
    , long sa${d}
% endif
    , long sb${d}
% for k in range(K):
    , long si${k}_${d}
% endfor
% endfor
    , __global int* err)
{
## work-item: W consecutive positions of the innermost dim (R-1) of one outer position
    long gid = get_global_id(0);
    if (gid >= nitems) return;
<% L = R - 1 %>
    long nl = sz${L};
    long nchunk = (nl + W - 1) / W;
    long c = gid % nchunk;
    long rem = gid / nchunk, id;
% if has_a:
    long pa = a_off;
% endif
    long pb = data_off;
% for k in range(K):
    long pi${k} = ixo${k};
% endfor
% for d in reversed(range(L)):
% if d > 0:
    id = rem % sz${d}; rem = rem / sz${d};
% else:
    id = rem;
% endif
% if has_a:
    pa += id * sa${d};
% endif
    pb += id * sb${d};
% for k in range(K):
    pi${k} += id * si${k}_${d};
% endfor
% endfor
    long j0 = c * W;
    long j1 = j0 + W < nl ? j0 + W : nl;
% if has_a:
    pa += j0 * sa${L};
% endif
    pb += j0 * sb${L};
% for k in range(K):
    pi${k} += j0 * si${k}_${L};
% endfor
    long q = 0;
    int ok = 1;
    for (long j = j0; j < j1; ++j) {
        if (j == j0 || inner_ix) {
## resolve the indices (once per work-item unless an index varies along the innermost dim)
            q = 0;
            ok = 1;
% for k in range(K):
            {
                long v = ix${k}[pi${k}];
                if (v < (neg ? -isz${k} : 0) || v >= isz${k}) {
                    if (atomic_cmpxchg(err, 0, 1) == 0) {
                        err[1] = ${k};
                        err[2] = (int)(v & 0xffffffffL);
                        err[3] = (int)(v >> 32);
                    }
                    ok = 0;
                }
                if (v < 0) v += isz${k};
                q += v * ist${k};
            }
% endfor
        }
% if not is_put:
        out[pa] = ok ? data[pb + q] : (${dt})0;
% else:
<% src = "val[pa]" if has_a else "sval" %>
% if op == "assign":
        if (ok) data[pb + q] = ${src};
% else:
        if (ok) upd(data + pb + q, ${src});
% endif
% endif
% if has_a:
        pa += sa${L};
% endif
        pb += sb${L};
% for k in range(K):
        pi${k} += si${k}_${L};
% endfor
    }
}
% endif
% if kernel in ("cnt", "compact"):
## odometer over a strided operand set: walk elements [start, stop) in row-major order
<%
    ops = ["m"] + (["v"] if cmode == "values" else []) + (["s", "o"] if cmode == "mscatter" else [])
%>
__kernel void ${kernel}(__global const ${mt}* mask, long m_off
% if kernel == "compact":
    , __global const long* excl
% if cmode == "coords":
    , __global long* out, long nd, long pad
% elif cmode == "values":
    , __global const ${vt}* vals, long v_off, __global ${vt}* out
% else:
    , __global const ${vt}* self, long s_off, __global const ${vt}* src, long src_off, __global ${vt}* out, long o_off
% endif
% else:
    , __global long* counts
% endif
    , long n, long L
% for d in range(R):
    , long sz${d}
% endfor
% for d in range(R):
% for o in (ops if kernel == "compact" else ["m"]):
    , long st${o}${d}
% endfor
% endfor
    )
{
    long c = get_global_id(0);
    long start = c * L;
    if (start >= n) return;
    long stop = start + L < n ? start + L : n;
<% wops = ops if kernel == "compact" else ["m"] %>
    long rem = start;
% for d in reversed(range(R)):
% if d > 0:
    long i${d} = rem % sz${d}; rem = rem / sz${d};
% else:
    long i${d} = rem;
% endif
% endfor
% for o in wops:
<% base = {"m": "m_off", "v": "v_off", "s": "s_off", "o": "o_off"}[o] %>
    long p${o} = ${base}${"".join(f" + i{d} * st{o}{d}" for d in range(R))};
% endfor
% if kernel == "cnt":
    long cnt = 0;
% else:
    long pos = excl[c];
% endif
    for (long e = start; e < stop; ++e) {
        int nz = mask[pm] != 0;
% if kernel == "cnt":
        cnt += nz;
% elif cmode == "coords":
        if (nz) {
% for d in range(R):
            if (${d} >= pad) out[pos * nd + ${d} - pad] = i${d};
% endfor
            ++pos;
        }
% elif cmode == "values":
        if (nz) out[pos++] = vals[pv];
% else:
        out[po] = nz ? src[src_off + pos] : self[ps];
        pos += nz;
% endif
## advance the odometer
% if R > 0:
% for o in wops:
        p${o} += st${o}${R - 1};
% endfor
        if (++i${R - 1} == sz${R - 1}) {
% for d in reversed(range(R)):
            i${d} = 0;
% for o in wops:
            p${o} -= sz${d} * st${o}${d};
% endfor
% if d > 0:
% for o in wops:
            p${o} += st${o}${d - 1};
% endfor
            if (++i${d - 1} == sz${d - 1}) {
% endif
% endfor
% for d in range(R):
            }
% endfor
% endif
    }
% if kernel == "cnt":
    counts[c] = cnt;
% endif
}
% endif
% if kernel == "ordered":
## ordered (a put that accumulates floats in a fixed order, for deterministic mode): keys are the destination
## offsets of the n source elements, sorted stably (so equal keys keep the source order), perm the source position
## of each. The first work-item of each run of equal keys folds the whole run into its destination, in order:
## data[key] = (((data[key] op v0) op v1) ...), the sum a sequential loop over the source elements computes.
__kernel void ordered(__global ${dt}* data, __global const long* keys, long keys_off, __global const long* perm,
                      long perm_off, __global const ${dt}* vals, long vals_off, long n)
{
    long j = get_global_id(0);
    if (j >= n) return;
    keys += keys_off; perm += perm_off; vals += vals_off;
    long key = keys[j];
    if (j > 0 && keys[j - 1] == key) return;
    ${dt} acc = data[key];
    for (long k = j; k < n && keys[k] == key; ++k)
        acc = acc ${"+" if op == "add" else "*"} vals[perm[k]];
    data[key] = acc;
}
% endif
