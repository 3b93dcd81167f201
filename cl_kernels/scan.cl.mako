## Inclusive scans along one dim of a strided tensor (cumsum, cumprod, cummax, cummin).
##
## Work-item (row, c) owns positions [c*L, min(n, (c+1)*L)) of its row and walks them sequentially (no
## barriers, no local memory: simple per-row work is what PoCL runs fastest, and neighbouring work-items
## touch neighbouring rows, so it coalesces on GPUs when the scanned dim is not the innermost).
##   phase 0 (reduce): write the chunk's total to part[row * nch + c] (and its index to ipart for arg scans)
##   phase 1 (scan):   write the running values; with carry, start from the inclusive scan of the partials
##                     of the chunks before (part[row * nch + c - 1]), computed by a scan of the partials.
## phase and carry are runtime arguments and the row rank RK is padded to 1, 2, 4 or 8, so one program per
## dtype combination and op serves every shape.
## Rows are the collapsed other dims (rank RK), each operand with its own strides; the input may have
## negative strides (a reversed scan is a scan of a reversed view).
##   in_t, acc_t, out_t: types; op: sum | prod | max | min; arg: also track the index (cummax/cummin):
##   PyTorch's rule, a later element replaces the running one when it is NaN or (running is not NaN and it
##   is >= for max, <= for min), so ties and NaNs take the latest index. arg_in: the input's indices come
##   from an index buffer (the scan of partials) instead of the position.
<%namespace name="c" file="common.cl.mako"/>
${c.preamble(types)}
<%
    if op == "sum":
        comb, ident = "a + b", "0"
    elif op == "prod":
        comb, ident = "a * b", "1"
    else:
        cmp = ">=" if op == "max" else "<="
        if floating:
            take = f"(isnan(b) || (!isnan(a) && b {cmp} a))"
        else:
            take = f"(b {cmp} a)"
%>
__kernel void scan(__global const ${in_t}* in, long in_off
% if arg_in:
    , __global const long* iin, long iin_off
% endif
    , __global ${out_t}* out, long out_off
% if arg:
    , __global long* iout, long iout_off
% endif
    , __global ${acc_t}* part
% if arg:
    , __global long* ipart
% endif
    , long phase, long carry, long rows, long n, long L, long nch, long s_in, long s_out
% if arg:
    , long s_iout
% endif
% if arg_in:
    , long s_iin
% endif
% for d in range(RK):
    , long ks${d}, long kin${d}, long kout${d}
% if arg:
    , long kiout${d}
% endif
% if arg_in:
    , long kiin${d}
% endif
% endfor
    )
{
## phase 0: chunk totals into part; phase 1: running values (from part[gid - 1] when carry and c > 0)
    long gid = get_global_id(0);
    if (gid >= rows * nch) return;
    long row = gid / nch, c = gid - row * nch;
    long start = c * L;
    long stop = start + L < n ? start + L : n;
    long rem = row, id;
    long pin = in_off;
% if arg_in:
    long piin = iin_off;
% endif
    long pout = out_off;
% if arg:
    long piout = iout_off;
% endif
% for d in reversed(range(RK)):
% if d > 0:
    id = rem % ks${d}; rem = rem / ks${d};
% else:
    id = rem;
% endif
    pin += id * kin${d};
% if arg_in:
    piin += id * kiin${d};
% endif
    pout += id * kout${d};
% if arg:
    piout += id * kiout${d};
% endif
% endfor
    pin += start * s_in;
% if arg_in:
    piin += start * s_iin;
% endif
    pout += start * s_out;
% if arg:
    piout += start * s_iout;
% endif
    int write = phase == 1;
    ${acc_t} a;
% if arg:
    long ai;
% endif
    long e = start;
    if (write && carry && c > 0) {
        a = part[gid - 1];
% if arg:
        ai = ipart[gid - 1];
% endif
    } else {
        a = (${acc_t})in[pin];
% if arg:
% if arg_in:
        ai = iin[piin];
% else:
        ai = e;
% endif
% endif
        if (write) {
            out[pout] = (${out_t})a;
% if arg:
            iout[piout] = ai;
% endif
        }
        ++e;
        pin += s_in;
        pout += s_out;
% if arg:
        piout += s_iout;
% endif
% if arg_in:
        piin += s_iin;
% endif
    }
    for (; e < stop; ++e) {
        ${acc_t} b = (${acc_t})in[pin];
% if arg:
        if (${take}) {
            a = b;
% if arg_in:
            ai = iin[piin];
% else:
            ai = e;
% endif
        }
% else:
        a = ${comb};
% endif
        if (write) {
            out[pout] = (${out_t})a;
% if arg:
            iout[piout] = ai;
% endif
        }
        pin += s_in;
        pout += s_out;
% if arg:
        piout += s_iout;
% endif
% if arg_in:
        piin += s_iin;
% endif
    }
    if (!write) {
        part[gid] = a;
% if arg:
        ipart[gid] = ai;
% endif
    }
}
