## Row teams: the building blocks of the GPU designs of softmax / log_softmax, the norms and cross_entropy
## (softmax_team.cl.mako, norm_team.cl.mako; include with <%namespace name="tm" file="row_team.cl.mako"/>).
##
## A row (or one chunk of a norm row) belongs to a team of TPR consecutive work-items ("lanes"; TPR a power of two,
## 2 to 32), LS / TPR teams per work-group. The CPU designs add a row's terms in 32 stripes: stripe j adds element j
## of each group of 32 consecutive elements, group after group, and the sum is the balanced binary tree over the 32
## stripe sums in order, (((s0 + s1) + (s2 + s3)) + ...). In a team, lane t owns the S = 32 / TPR consecutive stripes
## t*S .. t*S + S - 1: it reads elements t*S .. t*S + S - 1 of every group (one vector of S where the row is
## contiguous; a team of 32 lanes reads a group as one 128-byte transaction), adds them into a vector of S stripe
## sums, and evaluates its stripes' subtree (adjacent pairs first: ``vtree``). The lanes then meet in the upper levels
## of the tree (``team_reduce``): with a lane exchange (group_reduce.cl.mako: NVIDIA's shfl.sync through inline PTX,
## Intel's or Khronos' sub-group shuffles) lane l adds its partner l ^ s for s = 1, 2, ..., TPR / 2; a + b and b + a
## are the same IEEE sum, so every lane ends with the tree's root. Without one each lane stores its subtree in local
## memory and evaluates the upper levels from there. Either way the result has the CPU design's bits.
<%!
    def vtree(v, w):
        """The balanced tree sum over the w lanes of the vector expression v, adjacent pairs first."""
        if w == 1:
            return v
        if w == 2:
            return "((%s).x + (%s).y)" % (v, v)
        return vtree("((%s).even + (%s).odd)" % (v, v), w // 2)

    def tree(names):
        """The balanced binary tree sum over the expressions ``names``, in order."""
        n = len(names)
        return names[0] if n == 1 else "(%s + %s)" % (tree(names[:n // 2]), tree(names[n // 2:]))

    def comp(v, q, w):
        """Component q of a vector expression of width w (the expression itself for w == 1)."""
        return v if w == 1 else "(%s).s%x" % (v, q)
%>

## exp of the compute type. float: an inline Cody-Waite reduction and Cephes' expf polynomial (about 1 ulp, exactly 0
## below -87.3 and for -inf, inf above 88.7, NaN kept), the operations of softmax.cl.mako's and loss.cl.mako's fexp
## (the same bits); fexpv does them lane by lane on a vector of VW. double: the builtin (lane by lane for vectors: a
## vector exp may round differently from the scalar one).
<%def name="fexp_defs(CT, VW)">
<%
    VT = CT if VW == 1 else "%s%d" % (CT, VW)
%>
% if CT == "float":
% for FT, IT_, fname in [("float", "int", "fexp")] + ([(VT, "int%d" % VW, "fexpv")] if VW > 1 else []):
inline ${FT} ${fname}(${FT} x)
{
    ${FT} lo = (${FT})(-87.3f), hi = (${FT})(88.7f);
    ${FT} xc = select(select(x, hi, (${IT_})(x > hi)), lo, (${IT_})(x < lo));
    ${FT} t = xc * 1.44269504088896341f + 12582912.0f;
    ${IT_} n = as_${IT_}(t) - 0x4B400000;
    ${FT} nf = t - 12582912.0f;
    ${FT} r = xc - nf * 0.693359375f;
    r = r - nf * -2.12194440e-4f;
    ${FT} p = (${FT})(1.9875691500E-4f);
    p = p * r + 1.3981999507E-3f;
    p = p * r + 8.3334519073E-3f;
    p = p * r + 4.1665795894E-2f;
    p = p * r + 1.6666665459E-1f;
    p = p * r + 5.0000001201E-1f;
    p = p * (r * r) + r + 1.0f;
    ${FT} e = p * as_${FT}((n + 127) << 23);
    e = select(e, x, (${IT_})(x != x));
    e = select(e, (${FT})INFINITY, (${IT_})(x > hi));
    return select(e, (${FT})0.0f, (${IT_})(x < lo));
}
% endfor
% if VW == 1:
inline float fexpv(float x) { return fexp(x); }
% endif
% else:
inline ${CT} fexp(${CT} x) { return exp(x); }
<% lanes_exp = "exp(x)" if VW == 1 else "(%s)(%s)" % (VT, ", ".join("exp(x.s%x)" % q for q in range(VW))) %>\
inline ${VT} fexpv(${VT} x) { return ${lanes_exp}; }
% endif
</%def>

## NaN-propagating maxima (a NaN anywhere in a row makes its max NaN, as torch's softmax gives NaN there)
<%def name="max_defs(CT, VW)">
<%
    VT = CT if VW == 1 else "%s%d" % (CT, VW)
    base = "int" if CT == "float" else "long"
    IT = base if VW == 1 else "%s%d" % (base, VW)
%>
inline ${CT} smax_nan(${CT} m, ${CT} v) { return (v > m || v != v) ? v : m; }
% if VW > 1:
inline ${VT} vmax_nan(${VT} m, ${VT} v) { return select(m, v, (${IT})((v > m) | isnan(v))); }
inline ${CT} hmax_nan(${VT} v)
{
    ${CT} m = v.s0;
% for q in range(1, VW):
    m = smax_nan(m, v.s${"%x" % q});
% endfor
    return m;
}
% else:
inline ${CT} vmax_nan(${CT} m, ${CT} v) { return smax_nan(m, v); }
inline ${CT} hmax_nan(${CT} v) { return v; }
% endif
</%def>

## The team of this work-item: lane (0 .. TPR - 1), lrow (its team in the work-group), row (the team's row; a team
## past the last row works on row 0 and stores nothing: ``live`` is false), for `nrows` rows.
## (lane and lrow come from the local id as an int: Intel's CPU runtime (2026.2) miscompiled (int)(get_local_id(0) % 32)
## in ce_team_bwd, most lanes storing nothing)
<%def name="team_setup(TPR, LS)">
    const int lid_ = (int)get_local_id(0);
    const int lane = lid_ % ${TPR};
    const int lrow = lid_ / ${TPR};
    long row = (long)get_group_id(0) * ${LS // TPR} + lrow;
    const bool live = row < nrows;
    if (!live) row = 0;
</%def>

## Combine the team's values of the scalar `var` (type CT): op "sum" (the balanced tree over the lanes in order) or
## "max" (NaN-propagating); every lane gets the result. Every work-item of the group must get here (barriers, and
## the exchange needs every lane of the warp). red: a __local CT array of the work-group's size (unused with the
## PTX exchange). With a sub-group exchange the sub-groups must hold whole teams (the work-group size a multiple of
## 32): where the device's sub-groups are narrower than the team, the local-memory form runs.
<%def name="team_reduce(var, op, CT, TPR, xchg, red)">
<%
    steps = []
    s = 1
    while s < TPR:
        steps.append(s)
        s *= 2
    def join(a, b):
        return "%s + %s" % (a, b) if op == "sum" else "smax_nan(%s, %s)" % (a, b)
%>
% if TPR > 1:
    {
% if xchg:
% if xchg != "ptx":
    if (get_max_sub_group_size() >= ${TPR}) {
% endif
% for s in steps:
        ${var} = ${join(var, "xchg_%s(%s, %du)" % (CT, var, s))};
% endfor
% if xchg != "ptx":
    } else {
${local_reduce(var, op, CT, TPR, red)}
    }
% endif
% else:
${local_reduce(var, op, CT, TPR, red)}
% endif
    }
% endif
</%def>

<%def name="local_reduce(var, op, CT, TPR, red)">
        ${red}[get_local_id(0)] = ${var};
        barrier(CLK_LOCAL_MEM_FENCE);
        {
            __local const ${CT}* rp_ = ${red} + lrow * ${TPR};
% if op == "sum":
            ${var} = ${tree(["rp_[%d]" % t for t in range(TPR)])};
% else:
            ${CT} m_ = rp_[0];
            for (int t_ = 1; t_ < ${TPR}; ++t_) m_ = smax_nan(m_, rp_[t_]);
            ${var} = m_;
% endif
        }
        barrier(CLK_LOCAL_MEM_FENCE);
</%def>

## The balanced tree over the VW components of vector expression v (a lane's stripes), as an expression.
<%def name="vsum(v, VW)">${vtree(v, VW)}</%def>
## component q of vector expression v of width VW
<%def name="cmp(v, q, VW)">${comp(v, q, VW)}</%def>
