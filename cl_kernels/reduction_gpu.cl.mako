## The reduction template's GPU design (cltorch/ops/reduction/gpu_plan.py plans its launches). It takes the
## parameters and kernel arguments of reduction.cl.mako (in_type ... pro, pro_expr; out, [iout], in, in_off, [iin],
## M, R, C, nred, the kept and the reduced geometry), so cltorch._capture fuses prologues and finishes into
## either design; C is the number of partials per output (1: this launch writes finished values). Two kernels:
##
## red_rows: a team of `team` lanes (consecutive work-items) reduces one (output o, slice s) unit, unit = o * C + s:
##   slice s of output o's R elements (spans of a whole number of vw-element chunks). Lane l takes chunks l,
##   l + team, l + 2 team, ... of the slice (neighbouring lanes read neighbouring chunks: coalesced; one vector load
##   per chunk where `valign`), chunk j of the lane into accumulator j % nacc (nacc independent chains, their loads
##   issued together), the few elements after the last whole chunk into accumulator 0; then accumulators 1..nacc-1
##   fold into 0 in turn and the team's halving tree (group_reduce.cl.mako) combines the lanes. Partials (C > 1) go
##   to out[o * C + s]; the second pass is red_rows over those rows of C.
## red_cols: the outputs lie along a contiguous dim ("columns"): 2-D work-groups, each lane along x takes vw
##   consecutive outputs (coalesced across the lanes, one vector load per row where `valign`), `team` lanes along y
##   split slab s (= group y) of the R reduced rows: lane y takes rows y, y + team, ... of the slab, row j of the
##   lane into accumulator j % nacc; then the tree along y. Partials (C > 1) go to out[s * M + o]; the second pass
##   is red_cols over those C rows.
##
## Every operation's order depends only on the shape, C, team, vw and nacc: not on the work-group size, the number
## of groups, the device, whether a chunk came as one vector load or element by element (valign), or whether the
## tree's last steps ran on the lane exchange (xchg) - what deterministic mode needs for bit-identical results.
## rcont (red_rows): the reduced elements are one contiguous span (rr == 1, rst0 == 1), else addresses come from
## the reduced geometry element by element. lsize: the work-group size (the trees' local arrays).
<%namespace name="c" file="common.cl.mako"/>
<%namespace name="gr" file="group_reduce.cl.mako"/>
<%
    import re as _re
    A, V, T = nacc, vw, team
    vec = bool(valign) and V > 1

    def comp(i):
        return "s%x" % i

    def scalar_x(p):
        """The input element at address p, as map_type: a load, or the prologue over its operands."""
        if not pro:
            return "(%s)in[%s]" % (map_type, p)
        def one(m):
            i = int(m.group(1))
            return "s%d" % i if pro[i][0] == "s" else "in%d[off%d + (%s)]" % (i, i, p)
        return "(%s)(%s)" % (map_type, _re.sub(r"\bx(\d+)\b", one, pro_expr))

    def vector_loads(name, p):
        """(statements, component expressions): the V elements at address p (aligned), loaded as vectors; the
        prologue, if any, is evaluated per component on scalars (as the elementwise kernel's scalar form)."""
        if not pro:
            ld = "*(__global const %s%d*)(in + %s)" % (in_type, V, p)
            if in_type != map_type:
                ld = "convert_%s%d(%s)" % (map_type, V, ld)
            return "%s%d %s = %s;" % (map_type, V, name, ld), ["%s.%s" % (name, comp(ci)) for ci in range(V)]
        st = " ".join("%s%d %s_%d = *(__global const %s%d*)(in%d + off%d + (%s));" % (t, V, name, i, t, V, i, i, p)
                      for i, (kind, t) in enumerate(pro) if kind == "t")
        def one(ci):
            def sub(m):
                i = int(m.group(1))
                return "s%d" % i if pro[i][0] == "s" else "%s_%d.%s" % (name, i, comp(ci))
            return "(%s)(%s)" % (map_type, _re.sub(r"\bx(\d+)\b", sub, pro_expr))
        return st, [one(ci) for ci in range(V)]

    def fold(a, ai, x, idx, p):
        """Fold the element x (map_type expression; reduced index idx, address p) into (a, ai)."""
        s = "{ %s x = %s; %s b = %s; " % (map_type, x, acc_type, map_expr)
        if arg:
            bi = "iin[iin_off + (%s) - in_off]" % p if arg_in else idx
            s += "long bi = %s; %s a = %s; long ai = %s; if (ai < 0 || (%s)) { %s = b; %s = bi; } }" % (
                bi, acc_type, a, ai, better, a, ai)
        else:
            s += "%s a = %s; %s = %s; }" % (acc_type, a, a, combine)
        return s

    def join(a, ai, b, bi):
        """Combine the partial (b, bi) into (a, ai); an empty partial (index -1) changes nothing."""
        if arg:
            return ("{ %s a = %s; %s b = %s; long ai = %s; long bi = %s; if (bi >= 0 && (ai < 0 || (%s))) "
                    "{ %s = b; %s = bi; } }" % (acc_type, a, acc_type, b, ai, bi, better, a, ai))
        return "{ %s a = %s; %s b = %s; %s = %s; }" % (acc_type, a, acc_type, b, a, combine)

    def kept_base(o):
        """Statements: long base = the address of output o's first reduced element."""
        s = "long base = in_off; { long rem_ = %s, id_; " % o
        for d in reversed(range(rk)):
            s += ("id_ = rem_ %% ks%d; rem_ = rem_ / ks%d; " % (d, d)) if d > 0 else "id_ = rem_; "
            s += "base += id_ * kst%d; " % d
        return s + "}"

    def red_addr(var, r):
        """Statements: long var = base + the offset of reduced element r."""
        if rr == 1:
            return "long %s = base + (%s) * rst0;" % (var, r)
        s = "long %s = base; { long rr_ = %s, jd_; " % (var, r)
        for d in reversed(range(rr)):
            s += ("jd_ = rr_ %% rs%d; rr_ = rr_ / rs%d; " % (d, d)) if d > 0 else "jd_ = rr_; "
            s += "%s += jd_ * rst%d; " % (var, d)
        return s + "}"

    accs = [("a%d" % k, "ai%d" % k if arg else None) for k in range(A)]
%>
${c.preamble(types)}
${gr.exchange_functions(xchg, sorted({acc_type} | ({"long"} if arg else set())))}
<%def name="args()">
    __global ${out_type}* out, long out_off
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
</%def>
% if design == "rows":
<%
    def chunk_loads(k, r):
        """Statements loading chunk k (its first reduced index r) into registers X<k>_<c>."""
        if rcont and vec:
            st, comps = vector_loads("V%d" % k, "base + %s" % r)
            return st + " " + " ".join("%s X%d_%d = %s;" % (map_type, k, ci, e) for ci, e in enumerate(comps))
        out = []
        for ci in range(V):
            if rcont:
                out.append("%s X%d_%d = %s;" % (map_type, k, ci, scalar_x("base + %s + %d" % (r, ci))))
            else:
                out.append("%s %s X%d_%d = %s;" % (red_addr("p%d_%d" % (k, ci), "%s + %d" % (r, ci)), map_type, k,
                                                    ci, scalar_x("p%d_%d" % (k, ci))))
        return " ".join(out)

    def chunk_folds(k, r):
        a, ai = accs[k]
        out = []
        for ci in range(V):
            p = ("base + %s + %d" % (r, ci)) if rcont else "p%d_%d" % (k, ci)
            out.append(fold(a, ai, "X%d_%d" % (k, ci), "%s + %d" % (r, ci), p))
        return " ".join(out)
%>
__kernel void red_rows(${args()})
{
    __local ${acc_type} tv_[${lsize}];
% if arg:
    __local long ti_[${lsize}];
% endif
    const int tl = (int)get_local_id(0) % ${T};     // as an int first: Intel's CPU runtime (2026.2) miscompiled (int)(get_local_id(0) % 32) (row_team.cl.mako)
    const long unit = get_global_id(0) / ${T};
    const int live = unit < M * C;
    const long o = live ? unit / C : 0, s = live ? unit - o * C : 0;
    ${kept_base("o")}
% for a, ai in accs:
    ${acc_type} ${a} = ${identity};
% if arg:
    long ${ai} = -1;
% endif
% endfor
    if (live) {
        const long span = ((R + C - 1) / C + ${V - 1}) / ${V} * ${V};
        const long lo = s * span, hi = lo + span < R ? lo + span : R;
        const long nv = hi > lo ? (hi - lo) / ${V} : 0;
        long t = tl;
        for (; t + ${(A - 1) * T} < nv; t += ${A * T}) {
% for k in range(A):
            const long r${k} = lo + (t + ${k * T}) * ${V};
            ${chunk_loads(k, "r%d" % k)}
% endfor
% for k in range(A):
            ${chunk_folds(k, "r%d" % k)}
% endfor
        }
% for k in range(A - 1):
        if (t < nv) {
            const long r${k} = lo + t * ${V};
            ${chunk_loads(k, "r%d" % k)}
            ${chunk_folds(k, "r%d" % k)}
            t += ${T};
% endfor
% for k in range(A - 1):
        }
% endfor
        for (long r = lo + nv * ${V} + tl; r < hi; r += ${T}) {
% if rcont:
            ${fold(accs[0][0], accs[0][1], scalar_x("base + r"), "r", "base + r")}
% else:
            ${red_addr("p", "r")}
            ${fold(accs[0][0], accs[0][1], scalar_x("p"), "r", "p")}
% endif
        }
    }
% for a, ai in accs[1:]:
    ${join(accs[0][0], accs[0][1], a, ai)}
% endfor
    ${gr.tree(T, "tl", "get_local_id(0)", "1", [accs[0]], "tv_", "ti_", join, acc_type, xchg)}
    if (live && tl == 0) {
% if last:
        ${acc_type} acc = a0;
        out[out_off + unit] = (${out_type})(${finish});
% else:
        out[out_off + unit] = a0;
% endif
% if arg:
        iout[iout_off + unit] = ai0;
% endif
    }
}
% else:
<%
    caccs = [[("a%d_%d" % (k, v), ("ai%d_%d" % (k, v)) if arg else None) for v in range(V)] for k in range(A)]

    def row_loads(k, r):
        """Statements loading row r's V outputs into registers X<k>_<v>."""
        s = red_addr("p%d" % k, r) + " "
        if vec:
            st, comps = vector_loads("V%d" % k, "p%d" % k)
            return s + st + " " + " ".join("%s X%d_%d = %s;" % (map_type, k, v, e) for v, e in enumerate(comps))
        return s + " ".join("%s X%d_%d = %s;" % (map_type, k, v, scalar_x("p%d + %d" % (k, v))) for v in range(V))

    def row_folds(k, r):
        out = []
        for v in range(V):
            a, ai = caccs[k][v]
            out.append(fold(a, ai, "X%d_%d" % (k, v), r, "p%d + %d" % (k, v)))
        return " ".join(out)
%>
__kernel void red_cols(${args()})
{
    __local ${acc_type} tv_[${lsize * V}];
% if arg:
    __local long ti_[${lsize * V}];
% endif
    const int lx = get_local_id(0), ly = get_local_id(1);
    const long o0 = get_global_id(0) * ${V};
    const long s = get_group_id(1);
    const int live = o0 < M;
    ${kept_base("live ? o0 : 0")}
% for k in range(A):
% for a, ai in caccs[k]:
    ${acc_type} ${a} = ${identity};
% if arg:
    long ${ai} = -1;
% endif
% endfor
% endfor
    if (live) {
        const long span = (R + C - 1) / C;
        const long lo = s * span, hi = lo + span < R ? lo + span : R;
        long r = lo + ly;
        for (; r + ${(A - 1) * T} < hi; r += ${A * T}) {
% for k in range(A):
            const long r${k} = r + ${k * T};
            ${row_loads(k, "r%d" % k)}
% endfor
% for k in range(A):
            ${row_folds(k, "r%d" % k)}
% endfor
        }
% for k in range(A - 1):
        if (r < hi) {
            const long r${k} = r;
            ${row_loads(k, "r%d" % k)}
            ${row_folds(k, "r%d" % k)}
            r += ${T};
% endfor
% for k in range(A - 1):
        }
% endfor
    }
% for k in range(1, A):
% for v in range(V):
    ${join(caccs[0][v][0], caccs[0][v][1], caccs[k][v][0], caccs[k][v][1])}
% endfor
% endfor
<% lxs = "(int)get_local_size(0)" %>\
    ${gr.tree(T, "ly", "(ly * %s + lx) * %d" % (lxs, V), "%s * %d" % (lxs, V), caccs[0], "tv_", "ti_", join, acc_type)}
    if (live && ly == 0) {
% for v in range(V):
        {
% if last:
            ${acc_type} acc = ${caccs[0][v][0]};
            out[out_off + o0 + ${v}] = (${out_type})(${finish});
% else:
            out[out_off + s * M + o0 + ${v}] = ${caccs[0][v][0]};
% endif
% if arg:
            iout[iout_off + ${"o0" if last else "s * M + o0"} + ${v}] = ${caccs[0][v][1]};
% endif
        }
% endfor
    }
}
% endif
