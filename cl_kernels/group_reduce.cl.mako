## Building blocks of work-group reductions on GPUs (the reduction template's "gpu" design, reduction_gpu.cl.mako;
## written to be included by others: <%namespace name="gr" file="group_reduce.cl.mako"/>).
##
## exchange_functions(xchg, types): the lane exchange xchg_<type>(v, m), the value of the lane whose index is this
##   lane's xor m, for each type in `types`. xchg names the mechanism: "ptx" (NVIDIA: inline PTX shfl.sync.bfly,
##   warps of 32 consecutive work-items), "intel" (cl_intel_subgroups' intel_sub_group_shuffle_xor), "khr"
##   (cl_khr_subgroup_shuffle's sub_group_shuffle_xor), or "" (none: emits nothing). Every value travels as 32-bit
##   words, so one primitive serves every type. Only a probe that built it and checked its numbers on the device
##   enables a mechanism (cltorch/ops/reduction/exchange.py).
##
## tree(...): a tree reduction among the T lanes of a team, in a fixed order: strides T/2, T/4, ..., 1, lane l
##   combining lane l + s into itself (the classic halving tree). With an exchange, the steps whose stride is
##   below the exchange width (32 for ptx, the sub-group size otherwise) run on registers instead of local memory;
##   they read the same operands in the same order, so the result has the same bits as without (which is what the
##   probe checks, and why deterministic mode may use them).
<%def name="exchange_functions(xchg, types)">
% if xchg == "ptx":
inline uint xchg_u(uint v, uint m) {
    uint r;
    asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(v), "r"(m));
    return r;
}
% elif xchg == "intel":
#pragma OPENCL EXTENSION cl_intel_subgroups : enable
inline uint xchg_u(uint v, uint m) { return intel_sub_group_shuffle_xor(v, m); }
% elif xchg == "khr":
#pragma OPENCL EXTENSION cl_khr_subgroups : enable
#pragma OPENCL EXTENSION cl_khr_subgroup_shuffle : enable
inline uint xchg_u(uint v, uint m) { return sub_group_shuffle_xor(v, m); }
% endif
% if xchg:
% for t in types:
% if t == "float":
inline float xchg_float(float v, uint m) { return as_float(xchg_u(as_uint(v), m)); }
% elif t in ("int", "uint"):
inline ${t} xchg_${t}(${t} v, uint m) { return as_${t}(xchg_u(as_uint(v), m)); }
% elif t in ("long", "ulong", "double"):
inline ${t} xchg_${t}(${t} v, uint m) {
    uint2 w = as_uint2(v); w.x = xchg_u(w.x, m); w.y = xchg_u(w.y, m); return as_${t}(w);
}
% elif t in ("char", "uchar", "short", "ushort"):
inline ${t} xchg_${t}(${t} v, uint m) { return (${t})xchg_u((uint)v, m); }
% endif
% endfor
% endif
</%def>

## The tree among the T lanes of a team (T a power of two, a compile-time value). Every work-item of the group
## must reach it (it holds barriers). vals: [(value variable, index variable or None)], the lane's values, kept in
## registers; slot: this lane's first entry in buf (value j at slot + j); stride: entries between neighbouring lanes
## of the tree (the partner at step s is slot + s * stride); lane: this lane's index in its team. join(a, ai, b, bi)
## is the code that combines (b, bi) into the variables (a, ai). On return lane 0 of the team holds the result in
## vals. xchg (one value per lane, stride 1, teams of consecutive work-items only): see exchange_functions.
<%def name="tree(T, lane, slot, stride, vals, buf, ibuf, join, acc, xchg='')">
<%
    steps = []
    s = T // 2
    while s >= 1:
        steps.append(s)
        s //= 2
    def store(j):
        v, vi = vals[j]
        out = "%s[%s + %d] = %s;" % (buf, slot, j, v)
        if vi is not None:
            out += " %s[%s + %d] = %s;" % (ibuf, slot, j, vi)
        return out
    def step(s):
        code = []
        for j, (v, vi) in enumerate(vals):
            src = "%s + %d + %d * (%s)" % (slot, j, s, stride)
            code.append("{ %s b_ = %s[%s]; %s %s }" % (acc, buf, src,
                        ("long bi_ = %s[%s];" % (ibuf, src)) if vi is not None else "", join(v, vi, "b_", "bi_")))
            code.append(store(j))
        return " ".join(code)
%>
% if not steps:
## one lane per team: nothing to combine
% elif not xchg:
    ${" ".join(store(j) for j in range(len(vals)))}
    barrier(CLK_LOCAL_MEM_FENCE);
% for i, s in enumerate(steps):
    if (${lane} < ${s}) { ${step(s)} }
% if i + 1 < len(steps):
    barrier(CLK_LOCAL_MEM_FENCE);
% endif
% endfor
% else:
<%
    assert len(vals) == 1
    v, vi = vals[0]
    width = "32" if xchg == "ptx" else "xw_"
%>
    {
% if xchg != "ptx":
        const uint xw_ = get_max_sub_group_size();
% endif
% if xchg != "ptx" or steps[0] >= 32:
        if (${T} > ${width}) {
            ${store(0)}
            barrier(CLK_LOCAL_MEM_FENCE);
% for s in steps:
% if xchg != "ptx" or s >= 32:
            if (${s} >= ${width}) {
                if (${lane} < ${s}) { ${step(s)} }
                barrier(CLK_LOCAL_MEM_FENCE);
            }
% endif
% endfor
        }
% endif
% for s in steps:
% if xchg != "ptx" or s < 32:
        if (${s} < ${width}) {
            ${acc} b_ = xchg_${acc}(${v}, ${s}u);
% if vi is not None:
            long bi_ = xchg_long(${vi}, ${s}u);
% endif
            ${join(v, vi, "b_", "bi_")}
        }
% endif
% endfor
    }
% endif
</%def>
