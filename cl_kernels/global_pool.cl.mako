## Global pooling (cltorch/ops/global_pool.py launches it): one output per plane, the mean (op "avg") or the
## maximum with its index (op "max") of all R elements of the plane, as adaptive_*_pool to 1 x 1 and any pooling
## whose one window is the whole plane.
##
## Layout: plane p = n*C + c of x starts at x_off + n*x_sn + c*x_sc and its elements e = 0..R-1 (e = h*W + w) are
## x_se apart (1 for a contiguous input, C for channels_last); y and the indices are contiguous [planes].
##
## Work: TPR work-items ("lanes", a power of two <= 32) per plane, get_local_size(0) / TPR planes per work-group
## (the host picks any work-group size that is a multiple of TPR; local memory comes as __local arguments, so
## the kernel has no compile-time work-group size). TPR = 1: one plane per work-item and no local memory
## (neighbouring work-items read neighbouring channels of a channels_last input, a CPU's vector lanes).
##
## Summation order (op "avg"), the same for every TPR and work-group size, so every configuration and every
## device gives the same bits (deterministic mode): the plane is cut into chunks of 32 elements; stripe j
## (0..31) is the sum, chunk after chunk from the first, of each chunk's element j; the plane's sum is the
## balanced binary tree over the 32 stripe sums in order (((s0+s1)+(s2+s3))+...). Lane t owns stripes
## t*S..t*S+S-1 (S = 32/TPR) and sums their subtree; the TPR lane sums meet in local memory, where lane 0
## evaluates the rest of the tree. With TPR = 32 lane t reads element t of each chunk: every chunk is one
## coalesced read of the plane. The mean is the sum divided by ``div`` (R, or avg_pool's divisor_override).
##
## Maximum (op "max"): PyTorch's scan (a value replaces the running maximum when it is larger or NaN, starting
## from -inf with index 0): the first maximum wins, the last NaN wins, an all -inf plane gives index 0. Each lane
## scans its elements in increasing order with that rule; lanes combine by ``beats``, a total order on
## (value, index) candidates, so the result does not depend on how the elements were split.
##
## Template parameters: dt ("float" or "double"), idx ("int" or "long": the element index type), op, TPR.
<%!
def tree(names):
    """The balanced binary tree sum over the expressions ``names``, in order."""
    n = len(names)
    return names[0] if n == 1 else "(%s + %s)" % (tree(names[:n // 2]), tree(names[n // 2:]))
%>
<%namespace name="c" file="common.cl.mako"/>
${c.preamble((dt,))}
typedef ${idx} I;
<% S = 32 // TPR %>
% if op == "max":
// whether candidate (bv, bi) beats (av, ai): a NaN beats a number and a later NaN an earlier one; a larger
// number beats a smaller one and, of equal numbers, the earlier wins
inline int beats(${dt} bv, long bi, ${dt} av, long ai)
{
    if (bv != bv) return av != av ? bi > ai : 1;
    if (av != av) return 0;
    return bv > av || (bv == av && bi < ai);
}
% endif
## body(full, j): element k0 + j of the current chunk (full: inside the plane)
<%def name="chunks(body)">
    {
        I c0 = 0;
        for (; c0 + 32 <= R; c0 += 32) {
            const I k0 = c0 + lane * ${S};
% for j in range(S):
            ${body(j)}
% endfor
        }
        if (c0 < R) {
            const I k0 = c0 + lane * ${S};
% for j in range(S):
            if (k0 + ${j} < R) ${body(j)}
% endfor
        }
    }
</%def>
<%def name="avg_body(j)">a${j} += xb[(k0 + ${j}) * x_se];</%def>
<%def name="max_body(j)">{ ${dt} v = xb[(k0 + ${j}) * x_se]; if (v > bv || v != v) { bv = v; bi = k0 + ${j}; } }</%def>

__kernel void global_pool(__global const ${dt}* X, I x_off, I x_sn, I x_sc, I x_se, long C, I R, long P,
                          __global ${dt}* Y, __global long* Ix, int with_idx, ${dt} div${"," if TPR > 1 else ""}
% if TPR > 1 and op == "max":
                          __local ${dt}* red, __local long* redi)
% elif TPR > 1:
                          __local ${dt}* red)
% else:
                          )
% endif
{
% if TPR == 1:
    const int lane = 0;
    const long p = get_global_id(0);
    if (p >= P) return;
    const bool live = true;
% else:
    const int lid = get_local_id(0), lane = lid % ${TPR}, lrow = lid / ${TPR};
    long p = (long)get_group_id(0) * (long)(get_local_size(0) / ${TPR}) + lrow;
    const bool live = p < P;
    if (!live) p = 0;
% endif
    const long n = p / C, cc = p - n * C;
    __global const ${dt}* xb = X + x_off + (I)n * x_sn + (I)cc * x_sc;
% if op == "avg":
% for j in range(S):
    ${dt} a${j} = (${dt})0;
% endfor
    if (live)
${chunks(avg_body)}
    ${dt} s = ${tree(["a%d" % j for j in range(S)])};
% if TPR > 1:
    red[lid] = s;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lane != 0 || !live) return;
    {
        __local const ${dt}* rp = red + lid;
        s = ${tree(["rp[%d]" % t for t in range(TPR)])};
    }
% endif
    Y[p] = s / div;
% else:
    ${dt} bv = -INFINITY;
    long bi = 0;
    if (live)
${chunks(max_body)}
% if TPR > 1:
    red[lid] = bv;
    redi[lid] = bi;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lane != 0 || !live) return;
    for (int t = 1; t < ${TPR}; t++)
        if (beats(red[lid + t], redi[lid + t], bv, bi)) { bv = red[lid + t]; bi = redi[lid + t]; }
% endif
    Y[p] = bv;
    if (with_idx) Ix[p] = bi;
% endif
}
