## One reduction template: map, reduce and finish expressions over any set of dims.
##   in_type: input storage type; map_type: the type x is cast to; acc_type: accumulator type; out_type
##   map_expr: over x; combine: over a (accumulator) and b (mapped value), gives the new a
##   identity: the accumulator's start; finish: over acc and nred (the reduced count), for the last stage
##   arg: also track the index of the chosen element (better: predicate over b, bi, a, ai; ties go to the lower index)
##   work-item (o, ch) of M*C reduces elements ch, ch+C, ch+2C... of output o (interleaved, so loads coalesce)
##   arg_in: the input already holds (value, index) partials (second stage of an arg reduction)
##   rk / rr: ranks of the kept and the reduced dims; last: write finished values (else raw partials)
<%namespace name="c" file="common.cl.mako"/>
${c.preamble(types)}
__kernel void red(__global ${out_type}* out, long out_off
% if arg:
    , __global long* iout, long iout_off
% endif
    , __global const ${in_type}* in, long in_off
% if arg_in:
    , __global const long* iin, long iin_off
% endif
    , long M, long R, long C, long nred
% for d in range(rk):
    , long ks${d}, long kst${d}
% endfor
% for d in range(rr):
    , long rs${d}, long rst${d}
% endfor
    )
{
    long gid = get_global_id(0);
% if vmode == "outer":
## vector mode "outer": the innermost kept dim is contiguous; work-item gid makes outputs vw*gid .. vw*gid+vw-1
## with vector loads, one per reduced element (C == 1, no arg, vector-safe expressions, aligned; the launcher checks)
    if (gid * ${vw} >= M) return;
    long o = gid * ${vw};
    long base = in_off, rem = o, id;
% for d in reversed(range(rk)):
% if d > 0:
    id = rem % ks${d}; rem = rem / ks${d};
% else:
    id = rem;
% endif
    base += id * kst${d};
% endfor
    ${acc_type}${vw} a = (${acc_type}${vw})(${identity});
    for (long r = 0; r < R; ++r) {
        long p = base, rr_ = r, jd;
% for d in reversed(range(rr)):
% if d > 0:
        jd = rr_ % rs${d}; rr_ = rr_ / rs${d};
% else:
        jd = rr_;
% endif
        p += jd * rst${d};
% endfor
        ${map_type}${vw} x = *(__global const ${map_type}${vw}*)(in + p);
        ${acc_type}${vw} b = ${map_expr};
        a = ${combine};
    }
    ${acc_type}${vw} acc = a;
    *(__global ${out_type}${vw}*)(out + out_off + o) = ${finish};
}
% else:
    if (gid >= M * C) return;
    long o = gid / C, ch = gid - o * C;
    long base = in_off, rem = o, id;
% for d in reversed(range(rk)):
% if d > 0:
    id = rem % ks${d}; rem = rem / ks${d};
% else:
    id = rem;
% endif
    base += id * kst${d};
% endfor
    ${acc_type} a = ${identity};
% if arg:
    long ai = -1;
% endif
% if vmode == "inner":
## vector mode "inner": contiguous reduced rows (rr == 1, rst0 == 1, C == 1): vw lanes of partial results,
## combined at the end, then a scalar tail
    long clen = ((R + C - 1) / C + ${vw} - 1) / ${vw} * ${vw};   // contiguous chunk of work-item (o, ch)
    long r0 = ch * clen, rend = r0 + clen < R ? r0 + clen : R;
    {
        ${acc_type}${vw} av = (${acc_type}${vw})(${identity});
        for (; r0 + ${vw} <= rend; r0 += ${vw}) {
            ${map_type}${vw} x = *(__global const ${map_type}${vw}*)(in + base + r0);
            ${acc_type}${vw} b = ${map_expr};
            ${acc_type}${vw} a = av;
            av = ${combine};
        }
        ${acc_type} lanes[${vw}];
        *(${acc_type}${vw}*)lanes = av;
        for (int l = 0; l < ${vw}; ++l) {
            ${acc_type} b = lanes[l];
            a = ${combine};
        }
    }
    long p = base + r0;
    for (long r = r0; r < rend; ++r, ++p) {
% elif rr == 1:
    long p = base + ch * rst0, pstep = C * rst0;
    for (long r = ch; r < R; r += C, p += pstep) {
% else:
    for (long r = ch; r < R; r += C) {
        long p = base, rr_ = r, jd;
% for d in reversed(range(rr)):
% if d > 0:
        jd = rr_ % rs${d}; rr_ = rr_ / rs${d};
% else:
        jd = rr_;
% endif
        p += jd * rst${d};
% endfor
% endif
        ${map_type} x = (${map_type})in[p];
        ${acc_type} b = ${map_expr};
% if arg:
% if arg_in:
        long bi = iin[iin_off + p - in_off];
% else:
        long bi = r;
% endif
        if (ai < 0 || (${better})) { a = b; ai = bi; }
% else:
        a = ${combine};
% endif
    }
% if last:
    ${acc_type} acc = a;
    out[out_off + gid] = (${out_type})(${finish});
% else:
    out[out_off + gid] = a;
% endif
% if arg:
    iout[iout_off + gid] = ai;
% endif
}
% endif
