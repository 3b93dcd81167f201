"""Fusing a recorded GEMM with the elementwise add that follows it (a linear layer's bias, a residual).

The launch that stores a GEMM's C (``gemm_main`` of the CPU design, ``gemm_tile`` or, after split-K,
``gemm_splitk_sum`` of the GPU design: ``ops.gemm.launch_info``) followed directly by an elementwise ``x0 + x1``
launch (``elementwise.cl.mako``) becomes one launch of that kernel with its ``c_epi`` epilogue, which stores
``A @ B + E`` into the add's output, when

* the GEMM does not read C (``beta == 0``), stores a contiguous ``[batch][M][N]`` block, and nothing but the add
  uses that block's buffer (no other entry of the trace, no live Storage: it is an intermediate);
* one of the add's operands is that block, read element for element as the add writes its contiguous output,
  and the other (E, the bias or the residual) can be addressed as ``E[b*e_bs + i*e_rs + j*e_cs]`` over the
  GEMM's (batch, row, column) indices (each of the add's collapsed dimensions lies within one of those, or
  splits at their boundaries);
* the add's output is neither the GEMM's A nor B nor E, and all of them are float32 or float64 (no half).

The epilogue adds E in a statement of its own after the GEMM's value is formed (and ``FP_CONTRACT`` cannot join
them), so the stored value is bit-identical to the two launches. Launches inside an optimizer step's region
are left alone.
"""
from .pairs import fuse_pairs

__all__ = ["fuse_gemm_epilogues"]

_INT_MAX = 2 ** 31 - 1


def _gemm_info(e):
    """(params, batch, buffers the GEMM reads, (C, c_off, c_rs, c_cs, c_bs), M, N, alpha, beta, C position) of a
    launch that stores a GEMM's C without an epilogue (either design: ``ops.gemm.launch_info``), else None."""
    if e[0] != "k":
        return None
    from ..ops import gemm as _gemm
    info = _gemm.launch_info(e[2], e[3], e[5])
    if info is None:
        return None
    p = info["params"]
    if p.get("dt") not in ("float", "double") or p.get("dt") != p.get("acc"):
        return None
    return (p, info["batch"], info["reads"], info["c"], info["M"], info["N"], info["alpha"], info["beta"],
            info["c_pos"])


def _split(sizes, strides, target):
    """Strides of an operand over ``target`` dims (outermost first) from its strides over ``sizes`` (the same
    elements in the same row-major order), or None when a target dim is not one stride apart."""
    dims = [(s, st) for s, st in zip(sizes, strides) if s != 1]
    out = []
    for t in reversed(target):
        if t == 1:
            out.append(0)
            continue
        need, stride, acc = t, None, 1
        while need > 1:
            if not dims:
                return None
            s, st = dims.pop()
            if s > need:
                if s % need:
                    return None
                dims.append((s // need, st * need))
                s = need
            elif need % s:
                return None
            if stride is None:
                stride = st
            elif st != stride * acc:
                return None
            acc *= s
            need //= s
        out.append(stride)
    if dims:
        return None
    return tuple(reversed(out))


def _contig(shape):
    st, acc = [], 1
    for d in reversed(shape):
        st.append(acc)
        acc *= d
    return tuple(reversed(st))


def _match(entries, i, uses, live, _ew):
    """The fused entry for GEMM ``i`` and add ``i + 1``, or None."""
    from ..ops import gemm as _gemm
    g = _gemm_info(entries[i])
    if g is None:
        return None
    p, batch, reads, (cbuf, c_off, c_rs, c_cs, c_bs), M, N, alpha, beta, ci = g
    if beta != 0 or c_cs != 1 or c_rs != N or (batch > 1 and c_bs != M * N):
        return None
    if id(cbuf) in live or uses.get(id(cbuf)) != [i, i + 1]:
        return None
    info = _ew(entries[i + 1])
    if info is None or entries[i + 1][1] is not entries[i][1]:
        return None
    ep, ops, ob, oo, n, frame = info
    if ep.get("expr") != "x0 + x1" or ep.get("to_bool") or ep.get("out_type") != p["dt"] or n != batch * M * N:
        return None
    if len(ops) != 2 or any(o[0] != "t" or o[1] != p["dt"] or o[2] != p["dt"] for o in ops):
        return None
    cs = [k for k, o in enumerate(ops) if o[3] is cbuf]
    if len(cs) != 1 or ops[cs[0]][4] != c_off:
        return None
    other = ops[1 - cs[0]]
    ebuf, e_off = other[3], other[4]
    if ob is cbuf or any(ob is r for r in reads) or ob is ebuf or ebuf is cbuf:
        return None
    target = (batch, M, N)
    if frame is None:
        e_str = _contig(target)
    else:
        sizes, ostr = frame
        if ostr != _contig(sizes) or ops[cs[0]][5] != ostr:
            return None
        e_str = _split(sizes, other[5], target)
        if e_str is None:
            return None
    e_bs, e_rs, e_cs = e_str
    if p["idx"] == "int" and e_off + (batch - 1) * e_bs + (M - 1) * e_rs + (N - 1) * e_cs > _INT_MAX:
        return None
    rt = entries[i][1]
    k = _gemm.epilogue_kernel(rt, entries[i][2])
    args = list(entries[i][5])
    args[ci], args[ci + 1] = ob, oo
    args += [ebuf, e_off, e_rs, e_cs, e_bs]
    _, _, _, gs, ls, _ = entries[i]
    return ("k", rt, k, gs, ls, tuple(args))


def fuse_gemm_epilogues(trace, live):
    """A new Trace with each eligible GEMM + add pair fused (see the module docstring), and ``{old: new}``
    entry indices. ``live``: ids of the buffers live Storage objects hold."""
    from .fusion import _ew
    return fuse_pairs(trace, live, lambda entries, i, uses, live: _match(entries, i, uses, live, _ew))
