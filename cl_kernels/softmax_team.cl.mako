## Softmax / log_softmax rows, the GPU design (cltorch/ops/softmax/team.py plans the launches): a team of TPR lanes
## per row along the last dim (row_team.cl.mako), LS / TPR rows per work-group.
##   T: storage type; CT: compute type (half is stored as half, computed in float through vload_half/vstore_half)
##   log: log_softmax; safe: a row of -inf gives zeros (torch's _safe_softmax; forward only, ignored for log)
##   TPR, LS: lanes per row, work-group size; S = 32 / TPR elements of each group of 32 per lane
##   K: groups of 32 a lane holds in registers at once (v0 .. v{K-1}, vectors of S)
##   cached: the whole row fits in those registers (R <= 32 K): it is read from global memory once, and the forward
##           writes it once; otherwise each pass streams the row in blocks of K groups (the loads of a block issued
##           together, then added in order)
##   contig: the input rows' elements are adjacent (element stride 1): vector loads; else scalar loads at stride sr
##   which: "fwd", "bwd" (softmax), "ce_fwd", "ce_bwd" (cross_entropy with class-index targets over rows along the last
##          dim: loss.cl.mako's ce_fwd / ce_bwd with TT, has_w, smooth); xchg: the lane exchange ("ptx", "intel",
##          "khr" or "": local memory)
## The sums add in softmax.cl.mako's order (32 stripes, then the balanced tree; see row_team.cl.mako), so this design
## gives the CPU design's bits: a lane's stripe sums take the groups in order, padded elements (past the row's end)
## read -inf in the max and add exp(-inf) = +0 to a sum, which leaves it unchanged (a stripe sum starts at +0 and is
## never -0). Forward: max, sum of exp(x - max), write; backward: gi = y * (g - sum(g * y)) (softmax),
## gi = g - exp(y) * sum(g) (log_softmax).
<%namespace name="c" file="common.cl.mako"/>
<%namespace name="gr" file="group_reduce.cl.mako"/>
<%namespace name="tm" file="row_team.cl.mako"/>
<%
    S = 32 // TPR
    VT = CT if S == 1 else "%s%d" % (CT, S)
    half = T == "half"
    NEG = "(%s)(-INFINITY)" % VT
    base = "int" if CT == "float" else "long"
    IT = base if S == 1 else "%s%d" % (base, S)
    has_w = bool(context.get("has_w"))          # cross_entropy's parameters (absent for softmax)
    smooth = bool(context.get("smooth"))
    TT = context.get("TT", "long")

    def elem(p, i):
        return "vload_half(0, %s + (%s))" % (p, i) if half else "(%s)%s[%s]" % (CT, p, i)

    # Offsets: o is a group's first element relative to the lane's first (an int: 32 k, or cb + 32 k in a streamed
    # block); p a lane's base pointer (x + lane * S * sr), so a cached row's loads take constant offsets; rl (int) is
    # the number of the row's elements from the lane's first one, so an element o + q lies in the row when o + q < rl.
    def ld_full(p, st, o, cont):
        """The S elements o .. o + S - 1 (all inside the row) of the lane at p (element stride st)."""
        if cont and S > 1:
            return ("vload_half%d(0, %s + %s)" if half else "vload%d(0, %s + %s)") % (S, p, o)
        if S == 1:
            return elem(p, o if cont else "(%s) * %s" % (o, st))
        idx = ["%s + %d" % (o, q) if cont else "(%s + %d) * %s" % (o, q, st) for q in range(S)]
        return "(%s)(%s)" % (VT, ", ".join(elem(p, i) for i in idx))

    def ld_part(p, st, o, cont, pad):
        """As ld_full, elements past the row read as pad."""
        idx = [("%s + %d" % (o, q), "%s + %d" % (o, q) if cont else "(%s + %d) * %s" % (o, q, st)) for q in range(S)]
        parts = ["(%s < rl ? %s : (%s)%s)" % (j, elem(p, i), CT, pad) for j, i in idx]
        return parts[0] if S == 1 else "(%s)(%s)" % (VT, ", ".join(parts))

    def load(var, p, st, o, cont, pad):
        """Statements: var = the lane's S elements at o (padded past the row's end)."""
        return ("if (%s + %d <= rl) %s = %s; else if (%s < rl) %s = %s; else %s = (%s)(%s);"
                % (o, S, var, ld_full(p, st, o, cont), o, var, ld_part(p, st, o, cont, pad), var, VT, pad))

    def store(p, o, val):
        """Statements: the S values val at elements o .. o + S - 1 of the lane at p, contiguous (those in the row)."""
        if S == 1:
            one = "vstore_half(%s, 0, %s + %s);" % (val, p, o) if half else "%s[%s] = (%s)(%s);" % (p, o, T, val)
            return "if (%s < rl) %s" % (o, one)
        full = ("vstore_half%d(%s, 0, %s + %s);" if half else "vstore%d(%s, 0, %s + %s);") % (S, val, p, o)
        parts = " ".join("if (%s + %d < rl) %s" % (o, q, "vstore_half(sv_.s%x, 0, %s + %s + %d);" % (q, p, o, q)
                                                       if half else "%s[%s + %d] = sv_.s%x;" % (p, o, q, q))
                         for q in range(S))
        return "if (%s + %d <= rl) %s else { %s sv_ = %s; %s }" % (o, S, full, VT, val, parts)

    def inside(o):
        """The lane's components at o that lie in the row, as a comparison (S > 1: a vector of IT)."""
        if S == 1:
            return "(%s < rl)" % o
        return "(iota_ + (%s)(%s) < (%s)rl)" % (IT, o, IT)

    def wload(var, o):
        """Statements: var = the class weights of the lane's S classes at o (1 without weights; 0 past the row)."""
        if has_w:
            return load(var, "wl", "1", o, True, "0")
        if S == 1:
            return "%s = %s < rl ? (%s)1 : (%s)0;" % (var, o, CT, CT)
        return "%s = select((%s)0, (%s)1, %s);" % (var, VT, VT, inside(o))

    def stream(pre, body):
        """The row's groups in blocks of K: pre(k, o) (the block's loads) for every group k of the block (o: its
        offset), then body(k, o) for each."""
        out = ["    for (int cb_ = 0; cb_ < rl; cb_ += %d) {" % (32 * K)]
        for k in range(K):
            out.append("        const int o%d = cb_ + %d;" % (k, 32 * k))
            out.append("        " + pre(k, "o%d" % k))
        for k in range(K):
            out.append("        " + body(k, "o%d" % k))
        out.append("    }")
        return "\n".join(out)

    def max_pre(k, o):
        return "%s b%d; %s" % (VT, k, load("b%d" % k, "xl", "sr", o, contig, "-INFINITY"))

    def write_pre(k, o):
        return "%s b%d; %s" % (VT, k, load("b%d" % k, "xl", "sr", o, contig, "0"))

    def bpre(k, o):
        return "%s g%d; %s %s y%d; %s" % (VT, k, load("g%d" % k, "gl", "gsr", o, contig, "0"), VT, k,
                                          load("y%d" % k, "yl", "ysr", o, contig, "0"))

    def bsum(k, o):
        return "a += g%d;" % k if log else "a += g%d * y%d;" % (k, k)

    def bwrite(k, o):
        return store("ol", o, "g%d - fexpv(y%d) * s" % (k, k) if log else "y%d * (g%d - s)" % (k, k))
%>
${c.preamble(types)}
${gr.exchange_functions(xchg, [CT])}
${tm.fexp_defs(CT, S)}
${tm.max_defs(CT, S)}
% if S > 1:
#define iota_ ((${IT})(${", ".join(str(q) for q in range(S))}))
% endif
% if which == "fwd":
__kernel void softmax_team_fwd(__global ${T}* out, long out_off, __global const ${T}* in, long in_off,
                               long nrows, long R, long so, long sr)
{
% if TPR > 1 and xchg != "ptx":
    __local ${CT} red[${LS}];
% endif
${tm.team_setup(TPR, LS)}
    const int rl = (int)(R - lane * ${S});
    __global const ${T}* xl = in + in_off + row * so + lane * ${S} * sr;
    __global ${T}* yl = out + out_off + row * R + lane * ${S};
    ${VT} mv = ${NEG};
% if cached:
## the row in registers: group k of the row is v{k} (past the row: padding)
% for k in range(K):
    ${VT} v${k};
    ${load("v%d" % k, "xl", "sr", str(32 * k), contig, "-INFINITY")}
% endfor
% for k in range(K):
    mv = vmax_nan(mv, v${k});
% endfor
% else:
${stream(max_pre, lambda k, o: "mv = vmax_nan(mv, b%d);" % k)}
% endif
    ${CT} m = hmax_nan(mv);
${tm.team_reduce("m", "max", CT, TPR, xchg, "red")}
    const ${CT} ms = m == -INFINITY ? (${CT})0 : m;
    ${VT} a = (${VT})0;
% if cached:
% for k in range(K):
    {
        ${VT} e = fexpv(v${k} - ms);
        a += e;
% if not log:
        v${k} = e;
% endif
    }
% endfor
% else:
${stream(max_pre, lambda k, o: "a += fexpv(b%d - ms);" % k)}
% endif
    ${CT} s = ${tm.vsum("a", S)};
${tm.team_reduce("s", "sum", CT, TPR, xchg, "red")}
    if (!live) return;
% if log:
    const ${CT} ls = log(s);
% elif safe:
    const ${CT} inv = s > 0 ? (${CT})1 / s : (${CT})0;
% else:
    const ${CT} inv = (${CT})1 / s;
% endif
% if cached:
% for k in range(K):
    ${store("yl", str(32 * k), "(v%d - ms) - ls" % k if log else "v%d * inv" % k)}
% endfor
% else:
${stream(write_pre, lambda k, o: store("yl", o, "(b%d - ms) - ls" % k if log else "fexpv(b%d - ms) * inv" % k))}
% endif
}
% elif which == "bwd":
## gi = y * (g - sum(g * y)) (softmax), gi = g - exp(y) * sum(g) (log_softmax; y is the log-probability); g and y
## have their own row and element strides, gi is contiguous
__kernel void softmax_team_bwd(__global ${T}* gi, long gi_off,
                               __global const ${T}* g, long g_off, long gso, long gsr,
                               __global const ${T}* y, long y_off, long yso, long ysr,
                               long nrows, long R)
{
% if TPR > 1 and xchg != "ptx":
    __local ${CT} red[${LS}];
% endif
${tm.team_setup(TPR, LS)}
    const int rl = (int)(R - lane * ${S});
    __global const ${T}* gl = g + g_off + row * gso + lane * ${S} * gsr;
    __global const ${T}* yl = y + y_off + row * yso + lane * ${S} * ysr;
    __global ${T}* ol = gi + gi_off + row * R + lane * ${S};
    ${VT} a = (${VT})0;
% if cached:
% for k in range(K):
    ${bpre(k, str(32 * k))}
% endfor
% for k in range(K):
    ${bsum(k, str(32 * k))}
% endfor
% else:
${stream(bpre, bsum)}
% endif
    ${CT} s = ${tm.vsum("a", S)};
${tm.team_reduce("s", "sum", CT, TPR, xchg, "red")}
    if (!live) return;
% if cached:
% for k in range(K):
    ${bwrite(k, str(32 * k))}
% endfor
% else:
${stream(bpre, bwrite)}
% endif
}
% elif which == "ce_fwd":
## cross_entropy with class-index targets (loss.cl.mako's ce_fwd, mode "ce"), rows along the last dim: per row the
## loss (weighted), the logsumexp ms + ls and the target's weight (0 where ignored); err[0] = 1, err[1] = the target
## for a target outside [0, C) that is not ignore_index. The max and the sum of exp(x - max) are log_softmax's (the
## same bits), so the loss is -w[t] * log_softmax(x)[t] exactly; label smoothing adds the stripe sum of
## w_c * (ls - (x_c - ms)).
__kernel void ce_team_fwd(__global ${CT}* loss, __global ${CT}* lse_out, __global ${CT}* wt_out,
                          __global long* err,
                          __global const ${T}* in, long in_off, long so, long sr,
                          __global const ${TT}* t, long t_off,
                          __global const ${T}* w, long w_off,
                          long nrows, long R, long ignore_index, ${CT} eps_smooth)
{
% if TPR > 1 and xchg != "ptx":
    __local ${CT} red[${LS}];
% endif
${tm.team_setup(TPR, LS)}
    __global const ${T}* x = in + in_off + row * so;
    __global const ${T}* wp = w + w_off;
    const int rl = (int)(R - lane * ${S});
    __global const ${T}* xl = x + lane * ${S} * sr;
    __global const ${T}* wl = wp + lane * ${S};
    const long tg = (long)t[t_off + row];
    const bool ignored = tg == ignore_index, bad = !ignored && (tg < 0 || tg >= R);
    ${VT} mv = ${NEG};
% if cached:
% for k in range(K):
    ${VT} v${k};
    ${load("v%d" % k, "xl", "sr", str(32 * k), contig, "-INFINITY")}
% endfor
% for k in range(K):
    mv = vmax_nan(mv, v${k});
% endfor
% else:
${stream(max_pre, lambda k, o: "mv = vmax_nan(mv, b%d);" % k)}
% endif
    ${CT} m = hmax_nan(mv);
${tm.team_reduce("m", "max", CT, TPR, xchg, "red")}
    const ${CT} ms = m == -INFINITY ? (${CT})0 : m;
    ${VT} a = (${VT})0;
% if cached:
% for k in range(K):
    a += fexpv(v${k} - ms);
% endfor
% else:
${stream(max_pre, lambda k, o: "a += fexpv(b%d - ms);" % k)}
% endif
    ${CT} s = ${tm.vsum("a", S)};
${tm.team_reduce("s", "sum", CT, TPR, xchg, "red")}
    const ${CT} ls = log(s);
% if smooth:
    ${VT} a2 = (${VT})0;
<%
    def smooth_term(xv, k, o):
        """a2 += w_c * (ls - (x_c - ms)) for the lane's classes inside the row (past it: + 0)."""
        if S == 1:
            return "{ %s wv; %s if (%s < rl) a2 += wv * (ls - (%s - ms)); }" % (VT, wload("wv", o), o, xv)
        return "{ %s wv; %s a2 += select((%s)0, wv * (ls - (%s - ms)), %s); }" % (
            VT, wload("wv", o), VT, xv, inside(o))
%>
% if cached:
% for k in range(K):
    ${smooth_term("v%d" % k, k, str(32 * k))}
% endfor
% else:
${stream(max_pre, lambda k, o: smooth_term("b%d" % k, k, o))}
% endif
    ${CT} sm = ${tm.vsum("a2", S)};
${tm.team_reduce("sm", "sum", CT, TPR, xchg, "red")}
% endif
    if (!live || lane != 0) return;
    if (ignored || bad) {
        if (bad) { err[0] = 1; err[1] = tg; }
        loss[row] = 0; wt_out[row] = 0; lse_out[row] = 0;
        return;
    }
% if has_w:
    const ${CT} wt = ${elem("wp", "tg")};
% else:
    const ${CT} wt = (${CT})1;
% endif
    lse_out[row] = ms + ls;
    ${CT} nll = -wt * ((${elem("x", "tg * sr")} - ms) - ls);
% if smooth:
    nll = ((${CT})1 - eps_smooth) * nll + eps_smooth / (${CT})R * sm;
% endif
    loss[row] = nll;
    wt_out[row] = wt;
}
% elif which == "ce_bwd":
## d loss_row / d x[row, c] times the row's upstream gradient gs (loss.cl.mako's ce_bwd, mode "ce"):
##   gs * ((1 - eps) * w_t * (p_c - [c == t]) + eps / C * (wsum * p_c - w_c)),  p_c = exp(x_c - lse)
## gs = g[row * gstride], divided by den[0] where has_den; wsum: the sum of the class weights (wsum_in[0] with
## weights, C without). No sums over a row: the team's lanes write neighbouring elements.
__kernel void ce_team_bwd(__global ${T}* gi, long gi_off,
                          __global const ${T}* g, long g_off, long gstride,
                          __global const ${CT}* den,
                          __global const ${T}* in, long in_off, long so, long sr,
                          __global const ${TT}* t, long t_off,
                          __global const ${T}* w, long w_off,
                          __global const ${CT}* lse_in, __global const ${CT}* wsum_in,
                          long nrows, long R, long ignore_index, ${CT} eps_smooth, int has_den)
{
${tm.team_setup(TPR, LS)}
    if (!live) return;
    __global const ${T}* x = in + in_off + row * so;
    __global const ${T}* wp = w + w_off;
    const int rl = (int)(R - lane * ${S});
    __global const ${T}* xl = x + lane * ${S} * sr;
    __global const ${T}* wl = wp + lane * ${S};
    __global ${T}* ol = gi + gi_off + row * R + lane * ${S};
    const long tg = (long)t[t_off + row];
    if (tg == ignore_index || tg < 0 || tg >= R) {
        for (int o = 0; o < rl; o += 32) {
            ${store("ol", "o", "(%s)0" % VT)}
        }
        return;
    }
    const int tl = (int)(tg - lane * ${S});     // the target's offset from the lane's first element
    ${CT} gs = ${elem("g", "g_off + row * gstride")};
    if (has_den) gs = gs / den[0];
% if has_w:
    const ${CT} wt = ${elem("wp", "tg")};
% else:
    const ${CT} wt = (${CT})1;
% endif
    const ${CT} lse = lse_in[row];
    ${CT} a = gs * wt;
% if smooth:
    a = a * ((${CT})1 - eps_smooth);
    const ${CT} bsc = gs * eps_smooth / (${CT})R;
    const ${CT} wsum = ${"wsum_in[0]" if has_w else "(%s)R" % CT};
% endif
    for (int cb_ = 0; cb_ < rl; cb_ += ${32 * K}) {
% for k in range(K):
        const int o${k} = cb_ + ${32 * k};
        ${VT} b${k}; ${load("b%d" % k, "xl", "sr", "o%d" % k, contig, "0")}
% endfor
% for k in range(K):
        {
            ${VT} p = fexpv(b${k} - lse);
% if S == 1:
            ${VT} v = a * (p - (o${k} == tl ? (${CT})1 : (${CT})0));
% else:
            ${VT} hit = select((${VT})0, (${VT})1, (${IT})(iota_ + (${IT})(o${k}) == (${IT})(tl)));
            ${VT} v = a * (p - hit);
% endif
% if smooth:
            ${VT} wv; ${wload("wv", "o%d" % k)}
            v = v + bsc * (wsum * p - wv);
% endif
            ${store("ol", "o%d" % k, "v")}
        }
% endfor
    }
}
% endif
