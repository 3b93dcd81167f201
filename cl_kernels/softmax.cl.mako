## Fused softmax / log_softmax over one dim, forward and backward.
##   T: storage type; CT: compute type (half computes in float)
##   log: log_softmax instead of softmax
##   safe: a row whose every entry is -inf gives zeros instead of NaN (torch's _safe_softmax, used by SDPA's
##         math path); ignored for log
##   TPR: work-items ("lanes") per row, a power of two <= 32; LS: work-group size when TPR > 1 (LS / TPR rows
##        per work-group; TPR = 1 runs one row per work-item with any work-group size)
##   contig: the rows are contiguous (element stride 1, output likewise) and T == CT: lanes read vectors
##   rowvec: 0, or (TPR = 1, rows along a non-last dim, inner % rowvec == 0, inner stride 1, T == CT) each
##           work-item owns rowvec neighbouring rows as the lanes of vectors (every row's operations unchanged)
## Layout: the input is seen as (outer, R, inner) with element strides (so, sr, si); the output is contiguous
## in that shape. Three passes over each row: the max, the sum of exp(x - max), the write (the standard
## max-subtraction, so logits of any size are stable).
##
## Summation order (the same for every TPR, LS and vector width, so every configuration gives the same bits on a
## device, and devices agree wherever their log/exp builtins do, as in deterministic mode): the row is cut into chunks of 32; stripe j (0..31) is the sum, chunk after chunk from 0, of
## each chunk's element j (missing elements of the last chunk add 0); the row sum is the balanced binary tree
## over the 32 stripe sums in order (((s0+s1)+(s2+s3))+...). Rounding error grows as R/32 + 5, not R. Lane t
## owns stripes t*S .. t*S+S-1 (S = 32/TPR): for TPR = 1 they are 32 consecutive elements (four float8
## loads on a CPU), for TPR = 32 lane t reads element t of each chunk (coalesced on a GPU). Each lane sums its
## subtree; the lanes' partial sums meet in local memory, where every lane of the row evaluates the rest of
## the tree itself (no broadcast step; a barrier before the reads and one before local memory is reused).
<%!
    class Geom:
        """Per-lane geometry and code snippets: S stripes per lane, VW vector width, NV accumulators per lane
        (type VT, comparison type IT), RPG rows per work-group, store_e: pass 2 stores exp for pass 3."""
        def __init__(self, TPR, contig, CT, T, log, LS, rowvec):
            self.CT, self.T, self.rowvec = CT, T, rowvec
            self.S = 32 // TPR
            # rowvec: a work-item owns rowvec neighbouring rows (along inner), lane q of each vector is row q
            self.VW = rowvec if rowvec else (min(self.S, 8) if contig else 1)
            self.NV = self.S if rowvec else self.S // self.VW
            self.span = 1 if rowvec else self.VW        # elements of one row per accumulator
            self.VT = CT if self.VW == 1 else "%s%d" % (CT, self.VW)
            base = "int" if CT == "float" else "long"
            self.IT = base if self.VW == 1 else "%s%d" % (base, self.VW)
            self.RPG = LS // TPR if TPR > 1 else 1
            self.store_e = (not log) and T == CT and (contig or bool(rowvec))
            self.FX = "fexpv" if self.VW > 1 else "fexp"
            self.RT = self.VT if rowvec else CT          # the type of a row's max and sum
            self.RIT = self.IT if rowvec else base       # and its comparison type

        def ld(self, p, st, j, full, pad):
            """Accumulator j's elements of the current chunk (k0 = chunk start + lane*S) as VT; outside a full
            chunk, elements at r >= R read as ``pad``."""
            VW, CT = self.VW, self.CT
            if self.rowvec:
                return "vload%d(0, %s + (k0 + %d) * %s)" % (VW, p, j, st)
            if VW > 1 and full:
                return "vload%d(0, %s + k0 + %d)" % (VW, p, j * VW)
            if VW > 1:
                return "(%s)(%s)" % (self.VT, ", ".join("(k0 + %d < R ? (%s)%s[k0 + %d] : %s)" % (
                    j * VW + q, CT, p, j * VW + q, pad) for q in range(VW)))
            if full:
                return "(%s)%s[(k0 + %d) * %s]" % (CT, p, j, st)
            return "(k0 + %d < R ? (%s)%s[(k0 + %d) * %s] : %s)" % (j, CT, p, j, st, pad)

        def st(self, p, stride, j, full, val):
            """Store accumulator j's elements of the current chunk."""
            VW = self.VW
            if self.rowvec:
                return "vstore%d(%s, 0, %s + (k0 + %d) * %s);" % (VW, val, p, j, stride)
            if VW > 1 and full:
                return "vstore%d(%s, 0, %s + k0 + %d);" % (VW, val, p, j * VW)
            if VW > 1:
                return "{ %s sv = %s; %s }" % (self.VT, val, " ".join(
                    "if (k0 + %d < R) %s[k0 + %d] = sv.s%x;" % (j * VW + q, p, j * VW + q, q) for q in range(VW)))
            if full:
                return "%s[(k0 + %d) * %s] = (%s)(%s);" % (p, j, stride, self.T, val)
            return "if (k0 + %d < R) %s[(k0 + %d) * %s] = (%s)(%s);" % (j, p, j, stride, self.T, val)

    def tree(names):
        """The balanced binary tree sum over the expressions ``names``, in order."""
        n = len(names)
        return names[0] if n == 1 else "(%s + %s)" % (tree(names[:n // 2]), tree(names[n // 2:]))

    def vtree(v, w):
        """The balanced tree sum over the w lanes of vector expression v (adjacent pairs first)."""
        if w == 1:
            return v
        if w == 2:
            return "((%s).x + (%s).y)" % (v, v)
        return vtree("((%s).even + (%s).odd)" % (v, v), w // 2)
%>
<%
    g = Geom(TPR, contig, CT, T, log, LS, rowvec); S, VW, NV, VT, IT, RPG, store_e, FX = g.S, g.VW, g.NV, g.VT, g.IT, g.RPG, g.store_e, g.FX
    NEG_INF = "(-INFINITY)"
%><%namespace name="c" file="common.cl.mako"/>
${c.preamble(types)}
## exp for the compute type: float uses an inline Cody-Waite reduction and Cephes' expf polynomial (about 1 ulp,
## exactly 0 below -87.3 and for -inf, inf above 88.7, NaN kept), because PoCL calls its exp builtin out of
## line, several times slower; the vector overload does the same operations lane by lane (same bits). double
## uses the builtin.
<%def name="fexp_def(FT, IT_, fname)">
% if CT == "float":
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
% endif
</%def>
% if CT == "float":
${fexp_def("float", "int", "fexp")}
% if VW > 1:
${fexp_def(VT, IT, "fexpv")}
% endif
% else:
inline ${CT} fexp(${CT} x) { return exp(x); }
% if VW > 1:
## lane by lane through the scalar builtin: a vector exp may round differently (PoCL's does), and vector and
## scalar loads must give the same bits
inline ${VT} fexpv(${VT} x) { return (${VT})(${", ".join("exp(x.s%x)" % q for q in range(VW))}); }
% endif
% endif
inline ${VT} vmax_nan(${VT} m, ${VT} v) { return select(m, v, (${IT})((v > m) | isnan(v))); }
inline ${CT} smax_nan(${CT} m, ${CT} v) { return (v > m || v != v) ? v : m; }
<%def name="row_setup()">
<% g = Geom(TPR, contig, CT, T, log, LS, rowvec); S, VW, NV, VT, IT, RPG, store_e, FX = g.S, g.VW, g.NV, g.VT, g.IT, g.RPG, g.store_e, g.FX %>

    const int lane = ${"0" if TPR == 1 else "(int)get_local_id(0) %% %d" % TPR};    // the local id as an int first (see row_team.cl.mako)
% if TPR == 1:
    long row = get_global_id(0)${" * %d" % rowvec if rowvec else ""};
    if (row >= nrows) return;
    const bool live = true;
% else:
    __local ${CT} red[${LS}];
    const int lrow = (int)get_local_id(0) / ${TPR};
    long row = (long)get_group_id(0) * ${RPG} + lrow;
    const bool live = row < nrows;
    if (!live) row = 0;
% endif
    long o = row / inner, i = row - o * inner;
</%def>
<%def name="lane_reduce(var, op)">
<% g = Geom(TPR, contig, CT, T, log, LS, rowvec); S, VW, NV, VT, IT, RPG, store_e, FX = g.S, g.VW, g.NV, g.VT, g.IT, g.RPG, g.store_e, g.FX %>

## combine the lanes' partial ``var`` (op: "max" or "sum") in local memory; every lane gets the row's value
% if TPR > 1:
    red[get_local_id(0)] = ${var};
    barrier(CLK_LOCAL_MEM_FENCE);
    {
        __local const ${CT}* rp = red + lrow * ${TPR};
% if op == "max":
        ${CT} mm = rp[0];
        for (int t = 1; t < ${TPR}; ++t) mm = smax_nan(mm, rp[t]);
        ${var} = mm;
% else:
        ${var} = ${tree(["rp[%d]" % t for t in range(TPR)])};
% endif
    }
    barrier(CLK_LOCAL_MEM_FENCE);
% endif
</%def>
## chunks(body): body(full, j) for each accumulator j of each of the row's chunks (full: all its elements lie
## inside the row)
<%def name="chunks(body)">
<% g = Geom(TPR, contig, CT, T, log, LS, rowvec); S, VW, NV, VT, IT, RPG, store_e, FX = g.S, g.VW, g.NV, g.VT, g.IT, g.RPG, g.store_e, g.FX %>

    {
        long c = 0;
        for (; c + 32 <= R; c += 32) {
            const long k0 = c + lane * ${S};
% for j in range(NV):
${body(True, j)}
% endfor
        }
        if (c < R) {
            // the last chunk: accumulators wholly inside the row run as in a full chunk, the one that straddles
            // its end reads the missing elements as the pad (+0 sums and -inf maxima change nothing), the
            // ones past it are skipped
            const long k0 = c + lane * ${S};
% for j in range(NV):
            if (k0 + ${(j + 1) * g.span} <= R) {
${body(True, j)}
            }
% if g.span > 1:
            else if (k0 + ${j * VW} < R) {
${body(False, j)}
            }
% endif
% endfor
        }
    }
</%def>
<%def name="acc_sum(var)">
<% g = Geom(TPR, contig, CT, T, log, LS, rowvec); S, VW, NV, VT, IT, RPG, store_e, FX = g.S, g.VW, g.NV, g.VT, g.IT, g.RPG, g.store_e, g.FX %>

    ${g.RT} ${var};
    {
<% names = ["a%d" % j for j in range(NV)] %>\
% if VW > 1 and not rowvec:
        ${CT} ${", ".join("%s_s" % n for n in names)};
% for n in names:
        ${n}_s = ${vtree(n, VW)};
% endfor
        ${var} = ${tree(["%s_s" % n for n in names])};
% else:
        ${var} = ${tree(names)};
% endif
    }
</%def>

__kernel void softmax_fwd(__global ${T}* out, long out_off,
                          __global const ${T}* in, long in_off,
                          long nrows, long R, long inner, long so, long sr, long si)
{
${row_setup()}
    __global const ${T}* x = in + in_off + o * so + i * si;
    __global ${T}* y = out + out_off + o * R * inner + i;
    // pass 1: the row max
    ${VT} mv = (${VT})${NEG_INF};
<%def name="max_body(full, j)">
<% g = Geom(TPR, contig, CT, T, log, LS, rowvec); S, VW, NV, VT, IT, RPG, store_e, FX = g.S, g.VW, g.NV, g.VT, g.IT, g.RPG, g.store_e, g.FX %>

            mv = vmax_nan(mv, ${g.ld("x", "sr", j, full, "(-INFINITY)")});
</%def>
    if (live) {
${chunks(max_body)}
    }
% if rowvec:
    ${VT} m = mv;
% elif VW > 1:
    ${CT} m = mv.s0;
% for q in range(1, VW):
    m = smax_nan(m, mv.s${"%x" % q});
% endfor
% else:
    ${CT} m = mv;
% endif
${lane_reduce("m", "max")}
% if rowvec:
    const ${VT} ms = select(m, (${VT})0, (${IT})(m == (${VT})(-INFINITY)));
% else:
    const ${CT} ms = m == -INFINITY ? (${CT})0 : m;
% endif
    // pass 2: the sum of exp(x - ms) (stored into y when the write pass can reuse it)
% for j in range(NV):
    ${VT} a${j} = (${VT})0;
% endfor
<%def name="sum_body(full, j)">
<% g = Geom(TPR, contig, CT, T, log, LS, rowvec); S, VW, NV, VT, IT, RPG, store_e, FX = g.S, g.VW, g.NV, g.VT, g.IT, g.RPG, g.store_e, g.FX %>

            {
                ${VT} e = ${FX}(${g.ld("x", "sr", j, full, "(-INFINITY)")} - ms);
                a${j} += e;
% if store_e:
                ${g.st("y", "inner", j, full, "e")}
% endif
            }
</%def>
    if (live) {
${chunks(sum_body)}
    }
${acc_sum("s")}
${lane_reduce("s", "sum")}
    if (!live) return;
% if log:
% if rowvec:
    const ${VT} ls = (${VT})(${", ".join("log(s.s%x)" % q for q in range(VW))});
% else:
    const ${CT} ls = log(s);
% endif
% else:
% if safe:
    const ${g.RT} inv = select((${g.RT})0, (${g.RT})1 / s, (${g.RIT})(s > 0));
% else:
    const ${g.RT} inv = (${g.RT})1 / s;
% endif
% endif
    // pass 3: the write
<%def name="write_body(full, j)">
<% g = Geom(TPR, contig, CT, T, log, LS, rowvec); S, VW, NV, VT, IT, RPG, store_e, FX = g.S, g.VW, g.NV, g.VT, g.IT, g.RPG, g.store_e, g.FX %>

% if log:
            ${g.st("y", "inner", j, full, "(%s - ms) - ls" % g.ld("x", "sr", j, full, "0"))}
% elif store_e:
            ${g.st("y", "inner", j, full, "%s * inv" % g.ld("y", "inner", j, full, "0"))}
% else:
            ${g.st("y", "inner", j, full, FX + "(%s - ms) * inv" % g.ld("x", "sr", j, full, "0"))}
% endif
</%def>
${chunks(write_body)}
}

## gi = y * (g - sum(g * y))          (softmax)
## gi = g - exp(y) * sum(g)           (log_softmax; y is the log-probability)
## g and y are (outer, R, inner) with their own strides; gi is contiguous. Same lanes and summation order as
## the forward.
__kernel void softmax_bwd(__global ${T}* gi, long gi_off,
                          __global const ${T}* g, long g_off, long gso, long gsr, long gsi,
                          __global const ${T}* y, long y_off, long yso, long ysr, long ysi,
                          long nrows, long R, long inner)
{
${row_setup()}
    __global const ${T}* gp = g + g_off + o * gso + i * gsi;
    __global const ${T}* yp = y + y_off + o * yso + i * ysi;
    __global ${T}* op = gi + gi_off + o * R * inner + i;
% for j in range(NV):
    ${VT} a${j} = (${VT})0;
% endfor
<%def name="bsum_body(full, j)">
<% g = Geom(TPR, contig, CT, T, log, LS, rowvec); S, VW, NV, VT, IT, RPG, store_e, FX = g.S, g.VW, g.NV, g.VT, g.IT, g.RPG, g.store_e, g.FX %>

% if log:
            a${j} += ${g.ld("gp", "gsr", j, full, "0")};
% else:
            a${j} += ${g.ld("gp", "gsr", j, full, "0")} * ${g.ld("yp", "ysr", j, full, "0")};
% endif
</%def>
    if (live) {
${chunks(bsum_body)}
    }
${acc_sum("s")}
${lane_reduce("s", "sum")}
    if (!live) return;
<%def name="bwrite_body(full, j)">
<% g = Geom(TPR, contig, CT, T, log, LS, rowvec); S, VW, NV, VT, IT, RPG, store_e, FX = g.S, g.VW, g.NV, g.VT, g.IT, g.RPG, g.store_e, g.FX %>

% if log:
            ${g.st("op", "inner", j, full, ("%s - " + FX + "(%s) * s") % (g.ld("gp", "gsr", j, full, "0"), g.ld("yp", "ysr", j, full, "0")))}
% else:
            ${g.st("op", "inner", j, full, "%s * (%s - s)" % (g.ld("yp", "ysr", j, full, "0"), g.ld("gp", "gsr", j, full, "0")))}
% endif
</%def>
${chunks(bwrite_body)}
}
