## The norms' GPU design (cltorch/ops/norms/team.py plans the launches): norm.cl.mako's kernels, with a team of TPR
## lanes (row_team.cl.mako) per (row, chunk) instead of one work-item. The layout, the chunks and every sum's order
## are norm.cl.mako's (read its header): a row's L = A x Bn elements in nch chunks of CH; inside a chunk the terms add
## in 32 stripes over the groups of 32 from the chunk's start, then the balanced tree over the stripes; a row's chunk
## sums add in chunk order. Lane t holds stripes t*S .. t*S + S - 1 (S = 32 / TPR) of each group: neighbouring lanes
## read neighbouring elements (coalesced; one vector of S where `vec`), and the designs give the same bits.
##   Parameters: norm.cl.mako's (T, CT, center, affine, has_w, has_b, save_var, vec, types), and
##   TPR, LS: lanes per chunk, work-group size (LS / TPR chunks per work-group)
##   K: groups of 32 a lane holds in registers at once; cached: the whole chunk fits (G = ceil(CH / 32) <= K): it is
##      read from global memory once per kernel; otherwise each pass streams it in blocks of K groups
##   xchg: the lane exchange; which: "part", "fwd", "bwd_part" or "bwd" (one kernel per program)
##   flat: A == 1, a row's elements are adjacent (layer/rms/group norm): lanes address their elements from a base
##         pointer with constant offsets, and a chunk may stay in registers; batch_norm (A > 1) streams
## Without `vec` (batch_norm with Bn % 8 != 0) TPR is 32 (one element per lane and group).
## A team's unit is u = r * nch + c (row r, chunk c); work-item arguments and outputs are norm.cl.mako's.
<%namespace name="cm" file="common.cl.mako"/>
<%namespace name="gr" file="group_reduce.cl.mako"/>
<%namespace name="tm" file="row_team.cl.mako"/>
<%def name="body()">
<%
    S = 32 // TPR
    VT = CT if S == 1 else "%s%d" % (CT, S)
    base = "int" if CT == "float" else "long"
    IT = base if S == 1 else "%s%d" % (base, S)
    half = T == "half"
    VOL = "volatile " if context.get("deterministic") else ""
    w_in_sum = has_w and affine in ("col", "group")
    assert vec or S == 1

    def comp(v, q):
        return v if S == 1 else "%s.s%x" % (v, q)

    def elem(p, i):
        return "vload_half(0, %s + (%s))" % (p, i) if half else "(%s)%s[%s]" % (CT, p, i)

    # Positions. flat (A == 1: a row's elements are adjacent, layer/rms/group norm): a lane's element of group k is
    # o + q (o = 32 k, or ob_ + 32 k in a streamed block) past the lane's base pointers xl, gl, yl, ol (the chunk's
    # start plus lane * S), so cached loads and stores take constant offsets, and it lies in the chunk when o + q <
    # cl. Otherwise (batch_norm) the lane walks (jl, la, lb): element jl of the row at la * sa + lb, streamed.
    LP = {"xp": "xl", "gp": "gl", "yp": "yl", "op": "ol"}

    def idx(q):
        return ("o + %d" % q if q else "o") if flat else ("la * sa + lb + %d" % q if q else "la * sa + lb")

    def valid(q):
        return "(o + %d < cl)" % q if flat else "(jl + %d < j1)" % q

    def ptr(p):
        return LP[p] if flat else p

    def ld(var, p, pad="0"):
        """Statements: var = the lane's S elements of the current group (those past the chunk read pad)."""
        b = ptr(p)
        if S == 1:
            return "%s = %s ? %s : (%s)%s;" % (var, valid(0), elem(b, idx(0)), CT, pad)
        full = ("vload_half%d(0, %s + %s)" if half else "vload%d(0, %s + %s)") % (S, b, idx(0))
        parts = ", ".join("(%s ? %s : (%s)%s)" % (valid(q), elem(b, idx(q)), CT, pad) for q in range(S))
        return "if (%s) %s = %s; else %s = (%s)(%s);" % (valid(S - 1), var, full, var, VT, parts)

    def st(p, val):
        """Statements: store the S values val at the lane's current elements (those in the chunk)."""
        b = ptr(p)
        if S == 1:
            one = ("vstore_half(%s, 0, %s + %s);" % (val, b, idx(0)) if half
                   else "%s[%s] = (%s)(%s);" % (b, idx(0), T, val))
            return "if %s %s" % (valid(0), one)
        full = ("vstore_half%d(%s, 0, %s + %s);" if half else "vstore%d(%s, 0, %s + %s);") % (S, val, b, idx(0))
        parts = " ".join("if %s %s" % (valid(q), "vstore_half(sv_.s%x, 0, %s + %s);" % (q, b, idx(q)) if half
                                       else "%s[%s] = (%s)sv_.s%x;" % (b, idx(q), T, q))
                         for q in range(S))
        return "if (%s) %s else { %s sv_ = %s; %s }" % (valid(S - 1), full, VT, val, parts)

    def keep(v):
        """v with the components past the chunk set to 0."""
        if S == 1:
            return "(%s ? %s : (%s)0)" % (valid(0), v, CT)
        pos, end = ("o", "cl") if flat else ("jl", "j1")
        return "select((%s)0, %s, (%s)(iota_ + (%s)(%s) < (%s)%s))" % (VT, v, IT, IT, pos, IT, end)

    def wvec(wp):
        """The weights of the lane's current elements (affine "col" / "group": flat, the element is b)."""
        if affine == "col":
            one = lambda q: "(%s ? %s : (%s)0)" % (valid(q), elem("(%s + jb)" % wp, idx(q)), CT)
        else:
            one = lambda q: "(%s ? %s : (%s)0)" % (valid(q), elem(wp, "((r %% G) * Cg + (jb + %s) / HW)" % idx(q)),
                                                  CT)
        return one(0) if S == 1 else "(%s)(%s)" % (VT, ", ".join(one(q) for q in range(S)))

    def xhat(v):
        return "((%s - mu) - ml) * rstd" % v if center else "%s * rstd" % v

    def groups(body):
        """Code: for every group k of the chunk, body(k) = (declarations, loads, statements) at the lane's position of
        group k; cached (flat only): one pass over the K groups; streamed: blocks of K groups, the block's loads first."""
        if flat:
            if cached:
                out = []
                for k in range(K):
                    d, l, r_ = body(k)
                    out.append("    %s { const int o = %d; %s %s }" % (d, 32 * k, l, r_))
                return "\n".join(out)
            out = ["    for (int ob_ = 0; ob_ < cl; ob_ += %d) {" % (32 * K)]
            for k in range(K):
                d, l, r_ = body(k)
                out.append("      %s { const int o = ob_ + %d; %s }" % (d, 32 * k, l))
            for k in range(K):
                out.append("      { const int o = ob_ + %d; %s }" % (32 * k, body(k)[2]))
            out.append("    }")
            return "\n".join(out)
        assert not cached
        out = ["    { long jl = j0 + lane * %d, la = Bn ? jl / Bn : 0, lb = jl - la * Bn;" % S]
        step = "jl += 32; la += da_; lb += db_; if (lb >= Bn) { lb -= Bn; la += 1; }"
        out.append("    for (long i0_ = 0; i0_ < G_; i0_ += %d) {" % K)
        out.append("      long jk_[%d], ak_[%d], bk_[%d];" % (K, K, K))
        for k in range(K):
            d, l, r_ = body(k)
            out.append("      %s jk_[%d] = jl; ak_[%d] = la; bk_[%d] = lb;" % (d, k, k, k))
            out.append("      { const long jl = jk_[%d], la = ak_[%d], lb = bk_[%d]; %s } %s" % (k, k, k, l, step))
        for k in range(K):
            out.append("      { const long jl = jk_[%d], la = ak_[%d], lb = bk_[%d]; %s }" % (k, k, k, body(k)[2]))
        out.append("    }")
        out.append("    }")
        return "\n".join(out)
%>
${cm.preamble(types)}
${gr.exchange_functions(xchg, [CT])}
% if S > 1:
#define iota_ ((${IT})(${", ".join(str(q) for q in range(S))}))
% endif
<%def name="unit_setup()">
% if TPR > 1 and xchg != "ptx":
    __local ${CT} red[${LS}];
% endif
    const int lid_ = (int)get_local_id(0);
    const int lane = lid_ % ${TPR};
    const int lrow = lid_ / ${TPR};
    long unit = (long)get_group_id(0) * ${LS // TPR} + lrow;
    const bool live = unit < nrows * nch;
    if (!live) unit = 0;
    const long r = unit / nch, c = unit - r * nch;
    const long j0 = c * CH, j1 = min(j0 + CH, L);
% if flat:
    const int cl = (int)(j1 - j0) - lane * ${S};     // the chunk's elements from the lane's first one
    const long jb = j0 + lane * ${S};                 // the lane's first element of the row
% else:
    const long G_ = (j1 - j0 + 31) / 32;
    const long da_ = Bn ? 32 / Bn : 0, db_ = Bn ? 32 % Bn : 0;
% endif
</%def>
## the chunk's sums: team-reduce each (sum) and leave the results in every lane
<%def name="reduce(*names)">
% for n in names:
${tm.team_reduce(n, "sum", CT, TPR, xchg, "red")}
% endfor
</%def>
% if which in ("part", "fwd"):
## the chunk's sums (norm.cl.mako's fwd_chunk): the pivot P_ = (sum x) / n, D_ = sum (x - P_), Q_ = sum (x - P_)^2
## (center), or P_ = D_ = 0, Q_ = sum x^2 (rms); x{k} holds group k where cached
<%def name="fwd_sums()">
    ${CT} P_ = 0, D_ = 0, Q_ = 0;
    {
% if center:
    ${VT} s_ = (${VT})0;
% if cached:
% for k in range(K):
    s_ += x${k};
% endfor
% else:
${groups(lambda k: ("%s b%d;" % (VT, k), ld("b%d" % k, "xp"), "s_ += b%d;" % k))}
% endif
    ${CT} s1_ = ${tm.vsum("s_", S)};
${reduce("s1_")}
    P_ = s1_ / (${CT})(j1 - j0);
% endif
    ${VT} d_ = (${VT})0, q_ = (${VT})0;
% if cached:
% for k in range(K):
    { const int o = ${32 * k}; ${VT} t = ${keep("x%d - P_" % k)}; d_ += t; q_ += t * t; }
% endfor
% else:
<% dq = lambda k: "{ %s t = %s; d_ += t; q_ += t * t; }" % (VT, keep("b%d - P_" % k)) %>\
${groups(lambda k: ("%s b%d;" % (VT, k), ld("b%d" % k, "xp"), dq(k)))}
% endif
% if center:
    ${CT} d1_ = ${tm.vsum("d_", S)};
% else:
    ${CT} d1_ = 0;
% endif
    ${CT} q1_ = ${tm.vsum("q_", S)};
% if center:
${reduce("d1_", "q1_")}
% else:
${reduce("q1_")}
% endif
    D_ = d1_;
    Q_ = q1_;
    }
</%def>
## load the chunk into x0 .. x{K-1} (cached)
<%def name="load_x()">
% for k in range(K):
    ${VT} x${k};
% endfor
${groups(lambda k: ("", ld("x%d" % k, "xp"), ""))}
</%def>
% endif
% if which == "part":
__kernel void norm_team_part(__global ${CT}* part, __global const ${T}* x, long x_off,
                             long nrows, long rs, long sa, long Bn, long L, long CH, long nch)
{
${unit_setup()}
    __global const ${T}* xp = x + x_off + r * rs;
% if flat:
    __global const ${T}* xl = xp + jb;
% endif
% if cached:
${load_x()}
% endif
${fwd_sums()}
    if (live && lane == 0) {
        part[3 * unit] = P_;
        part[3 * unit + 1] = D_;
        part[3 * unit + 2] = Q_;
    }
}
% elif which == "fwd":
__kernel void norm_team_fwd(__global ${T}* y, long y_off,
                            __global const ${T}* x, long x_off,
                            __global const ${T}* w, long w_off,
                            __global const ${T}* bb, long b_off,
                            __global ${CT}* mean_out, __global ${CT}* rstd_out, __global ${CT}* var_out,
                            __global const ${CT}* part,
                            long nrows, long rs, long sa, long Bn, long L, long CH, long nch,
                            long G, long Cg, long HW, ${CT} eps)
{
${unit_setup()}
    __global const ${T}* xp = x + x_off + r * rs;
% if flat:
    __global const ${T}* xl = xp + jb;
% endif
    __global ${T}* yp = y + y_off + r * rs;
% if flat:
    __global ${T}* yl = yp + jb;
% endif
    ${CT} M = (${CT})L;
    ${VOL}${CT} m1 = 0, dl = 0, m2 = 0;
% if cached:
${load_x()}
% endif
    if (nch == 1) {
${fwd_sums()}
        m1 = P_;
        dl = D_ / M;
        m2 = Q_ - dl * D_;
    } else {
        __global const ${CT}* pr = part + 3 * r * nch;
% if center:
        for (long k = 0; k < nch; ++k) m1 += (${CT})(min((k + 1) * CH, L) - k * CH) * pr[3 * k];
        m1 = m1 / M;
        for (long k = 0; k < nch; ++k) dl += (${CT})(min((k + 1) * CH, L) - k * CH) * (pr[3 * k] - m1) + pr[3 * k + 1];
        dl = dl / M;
% endif
        for (long k = 0; k < nch; ++k) {
% if center:
            ${CT} nk = (${CT})(min((k + 1) * CH, L) - k * CH);
            ${CT} e = (pr[3 * k] - m1) - dl;
            m2 += pr[3 * k + 2] + (${CT})2 * e * pr[3 * k + 1] + nk * e * e;
% else:
            m2 += pr[3 * k + 2];
% endif
        }
    }
    if (!live) return;
    ${CT} mu = m1 + dl;
    ${CT} ml = dl - (mu - m1);
    ${CT} var = m2 / M;
    ${CT} rstd = rsqrt(var + eps);
    if (c == 0 && lane == 0) {
        mean_out[r] = mu;
        mean_out[nrows + r] = ml;
        rstd_out[r] = rstd;
% if save_var:
        var_out[r] = var;
% endif
    }
% if affine == "row":
% if has_w:
    ${CT} wr = (${CT})${elem("w", "w_off + r")};
% endif
% if has_b:
    ${CT} br = (${CT})${elem("bb", "b_off + r")};
% endif
% endif
<%
    def out_val(v):
        e = "%s v_ = %s;" % (VT, xhat(v))
        if affine == "row":
            if has_w:
                e += " v_ = v_ * wr;"
            if has_b:
                e += " v_ = v_ + br;"
        elif affine != "none":
            if has_w:
                e += " v_ = v_ * %s;" % wvec("(w + w_off)")
            if has_b:
                e += " v_ = v_ + %s;" % wvec("(bb + b_off)")
        return "{ %s %s }" % (e, st("yp", "v_"))
%>
% if cached:
${groups(lambda k: ("", "", out_val("x%d" % k)))}
% else:
${groups(lambda k: ("%s b%d;" % (VT, k), ld("b%d" % k, "xp"), out_val("b%d" % k)))}
% endif
}
% else:
## backward: with xh = (x - mean) * rstd and gh = g * w (col/group), the chunk's s1 = sum(gh), s2 = sum(gh * xh)
## (batch_norm, affine "row": sums of g); see norm.cl.mako
<%
    def gload(k, gv, xv):
        """(loads, statements): g and x of group k into gv, xv; gv becomes gh where the weight enters the sums."""
        lds = "%s; %s;" % (ld(gv, "gp").rstrip(";"), ld(xv, "xp").rstrip(";"))
        if w_in_sum:
            lds += " %s = %s * %s;" % (gv, gv, wvec("(w + w_off)"))
        return lds
%>
<%def name="bwd_sums()">
    ${CT} S1_, S2_;
    {
    ${VT} e_ = (${VT})0, f_ = (${VT})0;
% if cached:
% for k in range(K):
    { const int o = ${32 * k}; e_ += g${k}; f_ += ${keep("g%d * %s" % (k, xhat("x%d" % k)))}; }
% endfor
% else:
<% ef = lambda k: "e_ += g%d; f_ += %s;" % (k, keep("g%d * %s" % (k, xhat("x%d" % k)))) %>\
${groups(lambda k: ("%s g%d, x%d;" % (VT, k, k), gload(k, "g%d" % k, "x%d" % k), ef(k)))}
% endif
    ${CT} e1_ = ${tm.vsum("e_", S)}, f1_ = ${tm.vsum("f_", S)};
${reduce("e1_", "f1_")}
    S1_ = e1_;
    S2_ = f1_;
    }
</%def>
<%def name="load_gx()">
% for k in range(K):
    ${VT} g${k}, x${k};
% endfor
${groups(lambda k: ("", gload(k, "g%d" % k, "x%d" % k), ""))}
</%def>
% if which == "bwd_part":
__kernel void norm_team_bwd_part(__global ${CT}* part,
                                 __global const ${T}* g, long g_off,
                                 __global const ${T}* x, long x_off,
                                 __global const ${T}* w, long w_off,
                                 __global const ${CT}* mean_in, __global const ${CT}* rstd_in,
                                 long nrows, long rs, long sa, long Bn, long L, long CH, long nch,
                                 long G, long Cg, long HW)
{
${unit_setup()}
    __global const ${T}* xp = x + x_off + r * rs;
% if flat:
    __global const ${T}* xl = xp + jb;
% endif
    __global const ${T}* gp = g + g_off + r * rs;
% if flat:
    __global const ${T}* gl = gp + jb;
% endif
    const ${CT} mu = mean_in[r], ml = mean_in[nrows + r], rstd = rstd_in[r];
% if cached:
${load_gx()}
% endif
${bwd_sums()}
    if (live && lane == 0) {
        part[2 * unit] = S1_;
        part[2 * unit + 1] = S2_;
    }
}
% else:
__kernel void norm_team_bwd(__global ${T}* gi, long gi_off,
                            __global const ${T}* g, long g_off,
                            __global const ${T}* x, long x_off,
                            __global const ${T}* w, long w_off,
                            __global const ${CT}* mean_in, __global const ${CT}* rstd_in,
                            __global ${CT}* sg_out, __global ${CT}* sgx_out,
                            __global const ${CT}* part,
                            long nrows, long rs, long sa, long Bn, long L, long CH, long nch,
                            long G, long Cg, long HW)
{
${unit_setup()}
    __global const ${T}* xp = x + x_off + r * rs;
% if flat:
    __global const ${T}* xl = xp + jb;
% endif
    __global const ${T}* gp = g + g_off + r * rs;
% if flat:
    __global const ${T}* gl = gp + jb;
% endif
    __global ${T}* op = gi + gi_off + r * rs;
% if flat:
    __global ${T}* ol = op + jb;
% endif
    ${CT} M = (${CT})L;
    const ${CT} mu = mean_in[r], ml = mean_in[nrows + r], rstd = rstd_in[r];
    ${VOL}${CT} s1 = 0, s2 = 0;
% if cached:
${load_gx()}
% endif
    if (nch == 1) {
${bwd_sums()}
        s1 = S1_;
        s2 = S2_;
    } else {
        __global const ${CT}* pr = part + 2 * r * nch;
        for (long k = 0; k < nch; ++k) { s1 += pr[2 * k]; s2 += pr[2 * k + 1]; }
    }
    if (!live) return;
% if affine == "row":
    if (c == 0 && lane == 0) {
        sg_out[r] = s1;
        sgx_out[r] = s2;
    }
% endif
% if affine == "row" and has_w:
    ${CT} wr = (${CT})${elem("w", "w_off + r")};
    ${CT} c1 = wr * s1 / M, c2 = wr * s2 / M;
% else:
    ${CT} c1 = s1 / M, c2 = s2 / M;
% endif
% if not center:
    c1 = 0;
% endif
<%
    def bout(gv, xv):
        g2 = gv
        if affine == "row" and has_w:
            g2 = "(%s * wr)" % gv
        return st("op", "rstd * (%s - c1 - %s * c2)" % (g2, xhat(xv)))
%>
% if cached:
${groups(lambda k: ("", "", bout("g%d" % k, "x%d" % k)))}
% else:
${groups(lambda k: ("%s g%d, x%d;" % (VT, k, k), gload(k, "g%d" % k, "x%d" % k), bout("g%d" % k, "x%d" % k)))}
% endif
}
% endif
% endif
</%def>
${body()}
