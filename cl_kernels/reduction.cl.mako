## One reduction template: map, reduce and finish expressions over any set of dims.
##   in_type: input storage type; map_type: the type x is cast to; acc_type: accumulator type; out_type
##   map_expr: over x; combine: over a (accumulator) and b (mapped value), gives the new a
##   identity: the accumulator's start; finish: over acc and nred (the reduced count), for the last stage
##   arg: also track the index of the chosen element (better: predicate over b, bi, a, ai; ties go to the lower index)
##   work-item (o, ch) of M*C reduces elements ch, ch+C, ch+2C... of output o (interleaved, so loads coalesce)
##   arg_in: the input already holds (value, index) partials (second stage of an arg reduction)
##   rk / rr: ranks of the kept and the reduced dims; last: write finished values (else raw partials)
##   pro / pro_expr: a pointwise prologue (cltorch._capture fuses the elementwise launch that made the input into
##   its reduction): the input is not read from `in`; the element at position p is pro_expr over x<i> =
##   in<i>[off<i> + p] or the scalar argument s<i> (pro: each operand's ("t" | "s", type)), `in_off` is the offset of the first element read in that
##   element space. Empty pro: one input `in`.
##   float sums (combine "a + b", float accumulator) add in blocks of BLK: each work-item's sequential sum of n
##   terms becomes n/BLK block sums plus one sum of those, so its rounding error grows as n/BLK + BLK instead of n
##   (PyTorch's CPU sums are cascaded for the same reason; a long row summed in one order was 5-30x further from
##   the float64 sum than torch's)
<%namespace name="c" file="common.cl.mako"/>
<%
    import re as _re
    blocked = combine.replace(" ", "") == "a+b" and acc_type == "float" and not arg
    BLK = 32

    def load_x(p, vec):
        """The input element (a vector of vw when vec) at position p: a load, or the prologue over its operands."""
        if not pro:
            return ("*(__global const %s%d*)(in + %s)" % (map_type, vw, p)) if vec else "(%s)in[%s]" % (map_type, p)
        def one(m):
            i = int(m.group(1))
            if pro[i][0] == "s":
                return "s%d" % i
            if vec:
                return "(*(__global const %s%d*)(in%d + off%d + (%s)))" % (pro[i][1], vw, i, i, p)
            return "in%d[off%d + (%s)]" % (i, i, p)
        e = _re.sub(r"\bx(\d+)\b", one, pro_expr)
        return e if vec else "(%s)(%s)" % (map_type, e)
%>
${c.preamble(types)}
__kernel void red(__global ${out_type}* out, long out_off
% if arg:
    , __global long* iout, long iout_off
% endif
% if pro:
% for i, (kind, t) in enumerate(pro):
% if kind == "t":
    , __global const ${t}* in${i}, long off${i}
% else:
    , ${t} s${i}
% endif
% endfor
    , long in_off
% else:
    , __global const ${in_type}* in, long in_off
% endif
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
% if blocked:
    for (long rb = 0; rb < R; rb += ${BLK}) {
    long re = rb + ${BLK} < R ? rb + ${BLK} : R;
    ${acc_type}${vw} s = (${acc_type}${vw})(0);
    for (long r = rb; r < re; ++r) {
% else:
    for (long r = 0; r < R; ++r) {
% endif
        long p = base, rr_ = r, jd;
% for d in reversed(range(rr)):
% if d > 0:
        jd = rr_ % rs${d}; rr_ = rr_ / rs${d};
% else:
        jd = rr_;
% endif
        p += jd * rst${d};
% endfor
        ${map_type}${vw} x = ${load_x("p", True)};
        ${acc_type}${vw} b = ${map_expr};
% if blocked:
        s += b;
% else:
        a = ${combine};
% endif
    }
% if blocked:
    a += s;
    }
% endif
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
<% sblk = blocked and vmode != "inner" %>
% if vmode == "inner":
## vector mode "inner": contiguous reduced rows (rr == 1, rst0 == 1, C == 1): vw lanes of partial results,
## combined at the end, then a scalar tail
    long clen = ((R + C - 1) / C + ${vw} - 1) / ${vw} * ${vw};   // contiguous chunk of work-item (o, ch)
    long r0 = ch * clen, rend = r0 + clen < R ? r0 + clen : R;
    {
        ${acc_type}${vw} av = (${acc_type}${vw})(${identity});
% if blocked:
        while (r0 + ${vw} <= rend) {
        long re = r0 + ${BLK * vw} < rend ? r0 + ${BLK * vw} : rend;
        ${acc_type}${vw} sv = (${acc_type}${vw})(0);
        for (; r0 + ${vw} <= re; r0 += ${vw}) {
% else:
        for (; r0 + ${vw} <= rend; r0 += ${vw}) {
% endif
            ${map_type}${vw} x = ${load_x("base + r0", True)};
            ${acc_type}${vw} b = ${map_expr};
% if blocked:
            sv += b;
% else:
            ${acc_type}${vw} a = av;
            av = ${combine};
% endif
        }
% if blocked:
        av += sv;
        }
% endif
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
% if sblk:
    for (long rb = ch; rb < R; rb += C * ${BLK}) {
    long re = rb + C * ${BLK} < R ? rb + C * ${BLK} : R;
    ${acc_type} s = 0;
    for (long r = rb; r < re; r += C, p += pstep) {
% else:
    for (long r = ch; r < R; r += C, p += pstep) {
% endif
% else:
% if sblk:
    for (long rb = ch; rb < R; rb += C * ${BLK}) {
    long re = rb + C * ${BLK} < R ? rb + C * ${BLK} : R;
    ${acc_type} s = 0;
    for (long r = rb; r < re; r += C) {
% else:
    for (long r = ch; r < R; r += C) {
% endif
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
        ${map_type} x = ${load_x("p", False)};
        ${acc_type} b = ${map_expr};
% if arg:
% if arg_in:
        long bi = iin[iin_off + p - in_off];
% else:
        long bi = r;
% endif
        if (ai < 0 || (${better})) { a = b; ai = bi; }
% elif sblk:
        s += b;
% else:
        a = ${combine};
% endif
    }
% if sblk:
    a += s;
    }
% endif
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
