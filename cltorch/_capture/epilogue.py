"""Fusing a recorded GEMM with the elementwise add that follows it (a linear layer's bias, a residual).

A ``gemm_main`` launch (``cl_kernels/gemm.cl.mako``) followed directly by an elementwise ``x0 + x1`` launch
(``elementwise.cl.mako``) becomes one ``gemm_main`` launch with the template's ``c_epi`` epilogue, which stores
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
from .pairs import fuse_pairs, launch_params

__all__ = ["fuse_gemm_epilogues"]

_INT_MAX = 2 ** 31 - 1


def _gemm_info(e):
    """(params, batch, A, B, (C, c_off, c_rs, c_cs, c_bs), M, N, alpha, beta, C position) of a plain gemm_main."""
    p = launch_params(e, "gemm.cl.mako", "gemm_main")
    if p is None:
        return None
    if p.get("c_epi") or p.get("dt") not in ("float", "double") or p.get("dt") != p.get("acc"):
        return None
    a = e[5]
    if p["use_local"]:
        ci, mi = 10, 15
    else:
        ci, mi = 11, 17
    if len(a) != mi + 5:
        return None
    gs = e[3]
    batch = gs[2] if len(gs) > 2 else 1
    c = (a[ci], a[ci + 1], a[ci + 2], a[ci + 3], a[ci + 4])
    return p, batch, a[0], a[6 if not p["use_local"] else 5], c, a[mi], a[mi + 1], a[mi + 3], a[mi + 4], ci


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
    p, batch, abuf, bbuf, (cbuf, c_off, c_rs, c_cs, c_bs), M, N, alpha, beta, ci = g
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
    if ob is cbuf or ob is abuf or ob is bbuf or ob is ebuf or ebuf is cbuf:
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
    k = _gemm.epilogue_kernel(rt, p)
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
