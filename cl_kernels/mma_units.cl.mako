## Matrix units seen from OpenCL C: for each unit, how a warp's fragments of A (IM x IK), B (IK x IN) and the
## accumulator (IM x IN, float) are spread over its lanes, how fragments are loaded from local memory, and the one
## instruction that multiplies them. Included by gemm_mma.cl.mako (and any kernel shaped like a GEMM: attention's
## Q K^T and P V, implicit-GEMM convolution) with  <%namespace name="mu" file="mma_units.cl.mako"/>.
##
## Units (cltorch/ops/gemm/mma.py chooses one per device behind a probe; each vendor's spelling below is written
## from its public documentation):
##   nv_mma       NVIDIA tensor cores through inline PTX: mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16} (f32
##                accumulate), m16n8k8 .tf32 for float32 when TF32 is allowed, fragments of 16-bit operands loaded
##                with ldmatrix(.trans) from local memory (PTX ISA, "Warp-level matrix fragments for mma.m16n8k16",
##                "ldmatrix"); 32 lanes.
##   amd_mfma     AMD CDNA (gfx908/90a/94x): __builtin_amdgcn_mfma_f32_32x32x8f16 / ..._32x32x8bf16_1k; 64 lanes.
##   amd_wmma     AMD RDNA3 (gfx11): __builtin_amdgcn_wmma_f32_16x16x16_{f16,bf16}_w32; 32 lanes (lanes 16-31 hold
##                copies of lanes 0-15's A and B).
##   intel_dpas   cl_intel_subgroup_matrix_multiply_accumulate, sub-groups of 8 (Xe-HPG): M = 8 rows, N = 8 columns.
##   intel_dpas16 the same extension on devices whose sub-groups are 16 (Xe-HPC, Xe2): N = 16.
## The AMD builtins are guarded by __has_builtin (a compiler without them fails the build: the probe says so).
##
## Lanes: lane ln = (work-item's local id) % WARP, warp = local id / WARP, with a 1-D work-group, which is how
## NVIDIA (warps), AMD (wavefronts) and Intel (sub-groups of a required size) number them.
##
## Fragments: a 16-bit operand's fragment is a list of elements packed in pairs into uint registers (element 2j in
## the low half of register j); float (TF32) fragments hold one element (its TF32 bits) per register. The maps
## below give, for element e of lane ln, its (row, k) in A, (k, col) in B, and for accumulator element r its
## (row, col) in the IM x IN product.
##
## emu = 1 replaces every instruction by a plain OpenCL C version that moves the fragments through local memory
## (each lane writes the elements its fragment holds where the maps put them, a barrier, each lane computes its
## accumulator elements). It runs on any device (CPU devices, Oclgrind), so a kernel's fragment and lane
## arithmetic is checked where no matrix unit exists; only the maps themselves need the hardware (the probe).
<%!
# name: (lanes per warp, {storage type: (IM, IN, IK)})
UNITS = {
    "nv_mma": (32, {"half": (16, 8, 16), "bf16": (16, 8, 16), "float": (16, 8, 8)}),
    "amd_mfma": (64, {"half": (32, 32, 8), "bf16": (32, 32, 8)}),
    "amd_wmma": (32, {"half": (16, 16, 16), "bf16": (16, 16, 16)}),
    "intel_dpas": (8, {"half": (8, 8, 16), "bf16": (8, 8, 16)}),
    "intel_dpas16": (16, {"half": (8, 16, 16), "bf16": (8, 16, 16)}),
}


def maps(unit, dt):
    """(a, b, c, a_owner, b_owner, a_pairs, b_pairs): a[e] = (row, k) of A element e, b[e] = (k, col), c[r] =
    (row, col) of accumulator element r (C expressions in the lane `ln`); *_owner: the lanes that hold a distinct
    copy (None: all); *_pairs: the direction of an element pair in a register ("k" or "l": along the operand's
    lanes, i.e. A's rows or B's columns)."""
    if unit == "nv_mma" and dt != "float":          # m16n8k16: g = ln / 4, t = ln % 4
        a = [("(ln >> 2) + %d" % (8 * ((e // 2) % 2)), "((ln & 3) << 1) + %d" % (e % 2 + 8 * (e // 4)))
             for e in range(8)]
        b = [("((ln & 3) << 1) + %d" % (e % 2 + 8 * (e // 2)), "(ln >> 2)") for e in range(4)]
        c = [("(ln >> 2) + %d" % (8 * (r // 2)), "((ln & 3) << 1) + %d" % (r % 2)) for r in range(4)]
        return a, b, c, None, None, "k", "k"
    if unit == "nv_mma":                            # m16n8k8 tf32
        a = [("(ln >> 2) + %d" % (8 * (e % 2)), "(ln & 3) + %d" % (4 * (e // 2))) for e in range(4)]
        b = [("(ln & 3) + %d" % (4 * e), "(ln >> 2)") for e in range(2)]
        c = [("(ln >> 2) + %d" % (8 * (r // 2)), "((ln & 3) << 1) + %d" % (r % 2)) for r in range(4)]
        return a, b, c, None, None, None, None
    if unit == "amd_mfma":                          # 32x32x8: k blocks of 4 per half-wave, 4-row groups of C
        a = [("(ln & 31)", "((ln >> 5) << 2) + %d" % e) for e in range(4)]
        b = [("((ln >> 5) << 2) + %d" % e, "(ln & 31)") for e in range(4)]
        c = [("((ln >> 5) << 2) + %d" % (8 * (r // 4) + r % 4), "(ln & 31)") for r in range(16)]
        return a, b, c, None, None, "k", "k"
    if unit == "amd_wmma":                          # 16x16x16 wave32: A rows / B columns per lane, C rows interleaved
        a = [("(ln & 15)", "%d" % e) for e in range(16)]
        b = [("%d" % e, "(ln & 15)") for e in range(16)]
        c = [("(ln >> 4) + %d" % (2 * r), "(ln & 15)") for r in range(8)]
        return a, b, c, "ln < 16", "ln < 16", "k", "k"
    if unit == "intel_dpas":                        # sub-group 8: a.sR = row R, k 2ln..2ln+1; b.si = k 2i..2i+1
        a = [("%d" % (e // 2), "(ln << 1) + %d" % (e % 2)) for e in range(16)]
        b = [("%d" % e, "ln") for e in range(16)]
        c = [("%d" % r, "ln") for r in range(8)]
        return a, b, c, None, None, "k", "k"
    if unit == "intel_dpas16":                      # sub-group 16: a.sR = row R, k ln; b as above, 16 columns
        a = [("%d" % e, "ln") for e in range(8)]
        b = [("%d" % e, "ln") for e in range(16)]
        c = [("%d" % r, "ln") for r in range(8)]
        return a, b, c, None, None, "l", "k"
    raise ValueError("unknown matrix unit %r" % unit)


def shape(unit, dt):
    return UNITS[unit][1][dt]


def warp(unit):
    return UNITS[unit][0]


def acc_vector(unit):
    """Width of the accumulator's vector type (0: scalars, as inline PTX operands must be)."""
    return {"nv_mma": 0, "amd_mfma": 16, "amd_wmma": 8, "intel_dpas": 8, "intel_dpas16": 8}[unit]


def acc(unit, fm, fn, r):
    """The accumulator element r of fragment (fm, fn), as an lvalue."""
    if acc_vector(unit):
        return "c%d_%d.s%s" % (fm, fn, "0123456789abcdef"[r])
    return "c%d_%d_%d" % (fm, fn, r)


def ldsm_a(f, lay, P, m0, k0, name="aF"):
    """nv_mma's ldmatrix for A fragment f (rows m0.., k0..): (count, trans, destination registers <name><f>_j, the
    offset of the row lane ln passes). "kc": four 8x8 matrices (rows 0-7 / 8-15) x (k 0-7 / 8-15); "lc": the same,
    .trans."""
    dst = ["%s%d_%d" % (name, f, j) for j in range(4)]
    if lay == "kc":
        return 4, False, dst, "(%s + (ln & 7) + (((ln >> 3) & 1) << 3)) * %d + %s + ((ln >> 4) << 3)" % (m0, P, k0)
    return 4, True, dst, "(%s + (ln & 7) + ((ln >> 4) << 3)) * %d + %s + (((ln >> 3) & 1) << 3)" % (k0, P, m0)


def ldsm_b(f, count, lay, P, n0, k0, name="bF"):
    """nv_mma's ldmatrix for B fragments f .. f+count-1 (count 1 or 2: .x2 or .x4)."""
    dst = ["%s%d_%d" % (name, f + i, j) for i in range(count) for j in range(2)]
    if lay == "kc":
        return 2 * count, False, dst, "(%s + (ln & 7) + ((ln >> 4) << 3)) * %d + %s + (((ln >> 3) & 1) << 3)" % (
            n0, P, k0)
    return 2 * count, True, dst, "(%s + (ln & 7) + (((ln >> 3) & 1) << 3)) * %d + %s + ((ln >> 4) << 3)" % (k0, P, n0)


def regs(name, f, n):
    """The registers of fragment f: <name><f>_0 .. <name><f>_<n-1>."""
    return ["%s%d_%d" % (name, f, j) for j in range(n)]


def accs(unit, dt, name):
    """The accumulator elements of an instruction as lvalues: scalars <name>_r (nv_mma), else <name>.s<r>."""
    n = len(maps(unit, dt)[2])
    if acc_vector(unit):
        return ["%s.s%s" % (name, "0123456789abcdef"[r]) for r in range(n)]
    return ["%s_%d" % (name, r) for r in range(n)]


def emu_scratch(unit, dt, fm_n, fn_n, ldsm_slots):
    """(operand elements, ldmatrix row offsets) of the emulation's local scratch per warp."""
    IM, IN, IK = shape(unit, dt)
    return fm_n * IM * IK + fn_n * IK * IN, ldsm_slots * 32


def nregs(unit, dt, which):
    """Registers of a lane's A ("a") or B ("b") fragment: elements in pairs (16-bit) or one each (TF32)."""
    m = maps(unit, dt)
    n = len(m[0] if which == "a" else m[1])
    return n if dt == "float" else n // 2
%>

<%def name="preamble(unit, dt, emu, asm_kw)">
## Declarations every kernel using a unit needs once, at file scope.
% if unit == "nv_mma" and not emu:
#define CLT_ASM ${asm_kw} volatile
% endif
% if unit.startswith("amd") and not emu:
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
% endif
% if unit.startswith("intel") and not emu:
#pragma OPENCL EXTENSION cl_intel_subgroups : enable
% endif
% if emu and dt == "half":
inline float clt_h2f(ushort h) { return vload_half(0, (const __private half*)&h); }
% endif
% if dt == "float":
inline uint clt_tf32(float x) {        /* round to TF32 (10 mantissa bits), to nearest, ties away from zero */
% if unit == "nv_mma" and not emu:
    uint u;
    CLT_ASM("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(x));
    return u;
% else:
    uint u = as_uint(x);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
    return u;
% endif
}
% endif
</%def>

<%def name="kernel_attributes(unit, emu)">\
% if unit.startswith("intel") and not emu:
__attribute__((intel_reqd_sub_group_size(${warp(unit)}))) \
% endif
</%def>

<%def name="locals_(unit, dt, emu, warps, fm_n, fn_n, ldsm_slots)">
## Local scratch of the emulation, per warp: the operands of one IK slice's fm_n x fn_n instructions (storage
## bits) and the row offsets of its ldmatrix loads (32 per load).
% if emu:
<% ab, lo = emu_scratch(unit, dt, fm_n, fn_n, ldsm_slots) %>
    __local ${"uint" if dt == "float" else "ushort"} emu_ab[${warps * ab}];
% if lo:
    __local uint emu_l[${warps * lo}];
% endif
#define emu_ab_per_warp ${ab}
% endif
</%def>

<%def name="declare(unit, dt, fm_n, fn_n)">
## A and B fragment registers and the zeroed accumulators of a warp tile of fm_n x fn_n instructions.
<% IM, IN, IK = shape(unit, dt); na, nb = nregs(unit, dt, "a"), nregs(unit, dt, "b"); nv = acc_vector(unit) %>
% for fm in range(fm_n):
    uint ${", ".join("aF%d_%d" % (fm, j) for j in range(na))};
% endfor
% for fn in range(fn_n):
    uint ${", ".join("bF%d_%d" % (fn, j) for j in range(nb))};
% endfor
% for fm in range(fm_n):
% for fn in range(fn_n):
% if nv:
    float${nv} c${fm}_${fn} = (float${nv})0.0f;
% else:
    float ${", ".join("c%d_%d_%d = 0.0f" % (fm, fn, r) for r in range(len(maps(unit, dt)[2])))};
% endif
% endfor
% endfor
</%def>

<%def name="_at(lay, P, l0, k0, l, k)">\
## Index in a local tile of the element at lane l (A's row, B's column), k, tile origin (l0, k0): layout "kc"
## (rows of k per lane, pitch P) or "lc" (rows of lanes per k).
% if lay == "kc":
(${l0} + ${l}) * ${P} + ${k0} + ${k}\
% else:
(${k0} + ${k}) * ${P} + ${l0} + ${l}\
% endif
</%def>

<%def name="_load_map(unit, dt, X, which, f, lay, P, l0, k0)">
## Fragment registers <which>F<f>_j from the local tile X by the maps (every unit but nv_mma's ldmatrix path).
<%
    m = maps(unit, dt)
    elems = m[0] if which == "a" else m[1]
    pairs = m[5] if which == "a" else m[6]
    # (lane, k) of each element: A's lane is its row, B's its column
    lk = [(r, k) for (r, k) in elems] if which == "a" else [(c, k) for (k, c) in elems]
    along = "k" if lay == "kc" else "l"
%>
% if dt == "float":
% for e, (l, k) in enumerate(lk):
    ${which}F${f}_${e} = clt_tf32(${X}[${_at(lay, P, l0, k0, l, k)}]);
% endfor
% else:
% for j in range(len(lk) // 2):
% if pairs == along:
    ${which}F${f}_${j} = *(__local const uint*)(${X} + ${_at(lay, P, l0, k0, lk[2 * j][0], lk[2 * j][1])});
% else:
    ${which}F${f}_${j} = (uint)${X}[${_at(lay, P, l0, k0, lk[2 * j][0], lk[2 * j][1])}] | ((uint)${X}[${_at(lay, P, l0, k0, lk[2 * j + 1][0], lk[2 * j + 1][1])}] << 16);
% endif
% endfor
% endif
</%def>

<%def name="ldsm(ldm, call, X)">
## One ldmatrix.sync.aligned.m8n8.x<n>[.trans].shared.b16 (call = (n, trans, registers, offset)): lane ln gives
## the address X + offset of one 8-element row (lanes 0-7 the rows of matrix 0, 8-15 of matrix 1, ...); thread ln
## receives from matrix j the elements (ln / 4, 2 (ln % 4) + {0, 1}), with .trans (2 (ln % 4) + {0, 1}, ln / 4).
<%
    n, trans, dst, off = call
    regs = ", ".join("%%%d" % i for i in range(n))
    outs = ", ".join('"=r"(%s)' % d for d in dst)
    addr = '"r"((uint)(size_t)(%s + (%s)))' % (X, off) if ldm == "r32" else '"l"(%s + (%s))' % (X, off)
%>
    CLT_ASM("ldmatrix.sync.aligned.m8n8.x${n}${".trans" if trans else ""}.shared.b16 {${regs}}, [%${n}];" : ${outs} : ${addr});
</%def>

<%def name="ldsm_emulated(calls)">
## The ldmatrix loads of one IK slice, emulated together (calls: (n, trans, registers, offset, X)): the lanes'
## row offsets go through local memory (one barrier), each lane gathers its elements, a barrier before reuse.
    {
        __local uint* xl = emu_l + warp * ${32 * len(calls)};
% for c, (n, trans, dst, off, X) in enumerate(calls):
        xl[${32 * c} + ln] = (uint)(${off});
% endfor
        barrier(CLK_LOCAL_MEM_FENCE);
% for c, (n, trans, dst, off, X) in enumerate(calls):
% for j, d in enumerate(dst):
% if trans:
        ${d} = (uint)${X}[xl[${32 * c + 8 * j} + ((ln & 3) << 1)] + (ln >> 2)] | ((uint)${X}[xl[${32 * c + 8 * j} + ((ln & 3) << 1) + 1] + (ln >> 2)] << 16);
% else:
        ${d} = (uint)${X}[xl[${32 * c + 8 * j} + (ln >> 2)] + ((ln & 3) << 1)] | ((uint)${X}[xl[${32 * c + 8 * j} + (ln >> 2)] + ((ln & 3) << 1) + 1] << 16);
% endif
% endfor
% endfor
        barrier(CLK_LOCAL_MEM_FENCE);
    }
</%def>

<%def name="load_a(unit, dt, X, f, lay, P, m0, k0)">
## A fragment f (rows m0 .. m0+IM-1 of the tile, k0 .. k0+IK-1) from the local A tile X, element by element.
${_load_map(unit, dt, X, "a", f, lay, P, m0, k0)}
</%def>

<%def name="load_b(unit, dt, X, f, lay, P, n0, k0)">
## B fragment f (columns n0 .. n0+IN-1, k0 .. k0+IK-1) from the local B tile X, element by element.
${_load_map(unit, dt, X, "b", f, lay, P, n0, k0)}
</%def>

<%def name="_elem(dt, R, e)">\
## Storage bits of element e of the fragment in registers R (16-bit: half of a register; float: the TF32 bits).
% if dt == "float":
${R[e]}\
% else:
(ushort)(${R[e // 2]} >> ${16 * (e % 2)})\
% endif
</%def>

<%def name="_widen(dt, v)">\
% if dt == "half":
clt_h2f(${v})\
% else:
as_float((uint)(${v})${" << 16" if dt == "bf16" else ""})\
% endif
</%def>

<%def name="mma_emulated(unit, dt, fm_n, fn_n)">
## The fm_n x fn_n instructions of one IK slice of the GEMM, emulated together (see mma_emulated_regs).
<%
    na, nb = nregs(unit, dt, "a"), nregs(unit, dt, "b")
    prods = [(fm, fn, accs(unit, dt, "c%d_%d" % (fm, fn))) for fm in range(fm_n) for fn in range(fn_n)]
%>
${mma_emulated_regs(unit, dt, [regs("aF", f, na) for f in range(fm_n)], [regs("bF", f, nb) for f in range(fn_n)], prods)}
</%def>

<%def name="mma_emulated_regs(unit, dt, As, Bs, prods)">
## Instructions emulated together: As / Bs the register lists of the A and B fragments, prods (index into As,
## index into Bs, the accumulator's lvalues). Each owning lane writes the elements its fragments hold where the
## maps put them, a barrier, each lane adds to its accumulator elements the dot products of their rows and columns
## (in k order), a barrier before the scratch is reused. Every work-item of the group must reach it.
<%
    IM, IN, IK = shape(unit, dt)
    a, b, c, a_own, b_own, _, _ = maps(unit, dt)
    ab, _ = emu_scratch(unit, dt, len(As), len(Bs), 0)
    T = "uint" if dt == "float" else "ushort"
%>
    {
        __local ${T}* xa = emu_ab + warp * emu_ab_per_warp;
        __local ${T}* xb = xa + ${len(As) * IM * IK};
% if a_own:
        if (${a_own})
% endif
        {
% for f, R in enumerate(As):
% for e, (r, k) in enumerate(a):
            xa[${f * IM * IK} + (${r}) * ${IK} + ${k}] = ${_elem(dt, R, e)};
% endfor
% endfor
        }
% if b_own:
        if (${b_own})
% endif
        {
% for f, R in enumerate(Bs):
% for e, (k, col) in enumerate(b):
            xb[${f * IK * IN} + (${k}) * ${IN} + ${col}] = ${_elem(dt, R, e)};
% endfor
% endfor
        }
        barrier(CLK_LOCAL_MEM_FENCE);
% for ia, ib, C in prods:
% for r, (row, col) in enumerate(c):
        {
            float s = 0.0f;
            for (int q = 0; q < ${IK}; q++) s += ${_widen(dt, "xa[%d + (%s) * %d + q]" % (ia * IM * IK, row, IK))} * ${_widen(dt, "xb[%d + q * %d + %s]" % (ib * IK * IN, IN, col))};
            ${C[r]} += s;
        }
% endfor
% endfor
        barrier(CLK_LOCAL_MEM_FENCE);
    }
</%def>

<%def name="mma(unit, dt, fm, fn)">
## Accumulator (fm, fn) += A fragment fm x B fragment fn: one instruction of the warp (GEMM register names).
${mma_regs(unit, dt, regs("aF", fm, nregs(unit, dt, "a")), regs("bF", fn, nregs(unit, dt, "b")), "c%d_%d" % (fm, fn))}
</%def>

<%def name="mma_regs(unit, dt, A, B, C)">
## C += A x B: one instruction of the warp on the register lists A and B; C the accumulator's name (scalars
## C_r for nv_mma, a vector elsewhere).
% if unit == "nv_mma":
<%
    shp = "m16n8k8" if dt == "float" else "m16n8k16"
    ty = {"half": "f16", "bf16": "bf16", "float": "tf32"}[dt]
    acc_ = ["%s_%d" % (C, r) for r in range(4)]
    na_ = len(A)
%>
    CLT_ASM("mma.sync.aligned.${shp}.row.col.f32.${ty}.${ty}.f32 {%0,%1,%2,%3}, {${",".join("%%%d" % (4 + i) for i in range(na_))}}, {${",".join("%%%d" % (4 + na_ + i) for i in range(len(B)))}}, {%0,%1,%2,%3};"
        : ${", ".join('"+f"(%s)' % x for x in acc_)}
        : ${", ".join('"r"(%s)' % x for x in A + B)});
% elif unit == "amd_mfma":
% if dt == "half":
    ${C} = __builtin_amdgcn_mfma_f32_32x32x8f16(as_half4((uint2)(${", ".join(A)})), as_half4((uint2)(${", ".join(B)})), ${C}, 0, 0, 0);
% else:
    ${C} = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(as_short4((uint2)(${", ".join(A)})), as_short4((uint2)(${", ".join(B)})), ${C}, 0, 0, 0);
% endif
% elif unit == "amd_wmma":
% if dt == "half":
    ${C} = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(as_half16((uint8)(${", ".join(A)})), as_half16((uint8)(${", ".join(B)})), ${C});
% else:
    ${C} = __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32(as_short16((uint8)(${", ".join(A)})), as_short16((uint8)(${", ".join(B)})), ${C});
% endif
% elif unit == "intel_dpas":
    ${C} = intel_sub_group_${"f16_f16" if dt == "half" else "bf16_bf16"}_matrix_mad_k16(as_int8((uint8)(${", ".join(A)})), as_int8((uint8)(${", ".join(B)})), ${C});
% elif unit == "intel_dpas16":
    ${C} = intel_sub_group_${"f16_f16" if dt == "half" else "bf16_bf16"}_matrix_mad_k16(as_short8((uint4)(${", ".join(A)})), as_int8((uint8)(${", ".join(B)})), ${C});
% endif
</%def>

<%def name="guard(unit, dt, emu)">
## A build error naming what the compiler lacks (the probe reports it), instead of an implicit declaration.
% if not emu and unit == "amd_mfma":
<% fn = "__builtin_amdgcn_mfma_f32_32x32x8f16" if dt == "half" else "__builtin_amdgcn_mfma_f32_32x32x8bf16_1k" %>
#if !defined(__has_builtin) || !__has_builtin(${fn})
#error "this compiler has no ${fn} (AMD CDNA MFMA)"
#endif
% elif not emu and unit == "amd_wmma":
<% fn = "__builtin_amdgcn_wmma_f32_16x16x16_%s_w32" % ("f16" if dt == "half" else "bf16") %>
#if !defined(__has_builtin) || !__has_builtin(${fn})
#error "this compiler has no ${fn} (AMD RDNA3 WMMA)"
#endif
% elif not emu and unit.startswith("intel"):
#ifndef cl_intel_subgroup_matrix_multiply_accumulate
#error "the device lacks cl_intel_subgroup_matrix_multiply_accumulate (Intel DPAS)"
#endif
% endif
</%def>

<%def name="quad_reduce(emu, items)">
## nv_mma: reduce each (op, variable) of items over the 4 lanes that share an accumulator row (lanes 4g .. 4g+3),
## op "max" or "sum", every lane getting (x0 op x1) op (x2 op x3): warp shuffles (shfl.sync.bfly) on the device;
## emulated, one exchange through local memory (emu_q: 32 floats per warp and item; every work-item must reach it).
% if emu:
    {
        __local float* xq = emu_q + warp * ${32 * len(items)};
% for i, (op, v) in enumerate(items):
        xq[${32 * i} + ln] = ${v};
% endfor
        barrier(CLK_LOCAL_MEM_FENCE);
% for i, (op, v) in enumerate(items):
<% f = "fmax" if op == "max" else "" %>
        {
            __local const float* x4 = xq + ${32 * i} + (ln & ~3);
% if op == "max":
            ${v} = fmax(fmax(x4[0], x4[1]), fmax(x4[2], x4[3]));
% else:
            ${v} = (x4[0] + x4[1]) + (x4[2] + x4[3]);
% endif
        }
% endfor
        barrier(CLK_LOCAL_MEM_FENCE);
    }
% else:
% for op, v in items:
    {
        float o_;
% for m in (1, 2):
        CLT_ASM("shfl.sync.bfly.b32 %0, %1, ${m}, 0x1f, 0xffffffff;" : "=f"(o_) : "f"(${v}));
        ${v} = ${"fmax(%s, o_)" % v if op == "max" else "%s + o_" % v};
% endfor
    }
% endfor
% endif
</%def>
