"""Fusing a recorded elementwise launch into the reduction that reads its result (a reduction's prologue).

An ``elementwise.cl.mako`` launch on the contiguous path immediately followed by a reduction launch (either
design: ``reduction.cl.mako`` or ``reduction_gpu.cl.mako``) that reads its output becomes one reduction launch
whose input element ``p`` is the elementwise expression over the operands at ``p`` (the template's
``pro``/``pro_expr``), when

* the elementwise output is an intermediate: used by no other entry of the trace, held by no live Storage;
* the expression is plain arithmetic (``x<i>``, numeric literals, ``+ - * /``, parentheses, and on the
  reduction's scalar path casts to the one type all share: the same IEEE operations on scalars and on vectors
  of any width, and ``FP_CONTRACT`` is off in both templates), and every type involved (tensor and scalar
  operands, output, the reduction's input and map types) is the same float32 or float64;
* on the reduction's vector paths, every operand's offset is a multiple of its vector width (the loads stay
  aligned as the single input's were).

The reduction then reads each element exactly as the elementwise kernel computed and stored it, in the same
order, so its result is bit-identical.

The other way round, an elementwise launch (tensor operands only) that alone reads a reduction's finished
output becomes the reduction's finish expression (``_match_finish``: e.g. the ``sqrt`` of each parameter's sum
of squares in ``clip_grad_norm_``), the finished value cast as the reduction stored it; skipped where the
elementwise kernel ran those elements on vector builtins (the finish is scalar) or the reduction stores vectors.
Launches inside an optimizer step's region are left alone.
"""
import re

import numpy as np

from .pairs import fuse_pairs, launch_params

__all__ = ["fuse_reduction_prologues"]

_ARITH = re.compile(r"^(?:\s|x\d+|\d+\.?\d*(?:[eE][-+]?\d+)?f?|\.\d+(?:[eE][-+]?\d+)?f?|[-+*/()])*$")


# the reduction kernels of both designs (cltorch/ops/reduction): the CPU design's and the GPU design's
_REDUCTIONS = (("reduction.cl.mako", "red"), ("reduction_gpu.cl.mako", "red_rows"),
               ("reduction_gpu.cl.mako", "red_cols"))


def _red(e, with_pro=False):
    """(params, arguments) of a one-input reduction launch (or one with a prologue, when ``with_pro``), or None."""
    for template, name in _REDUCTIONS:
        p = launch_params(e, template, name)
        if p is not None:
            break
    else:
        return None
    if (p.get("pro") and not with_pro) or p.get("arg_in"):
        return None
    return p, e[5]


def _match(entries, i, uses, live, _ew):
    from ..ops.elementwise import _NP_SCALAR
    info = _ew(entries[i])
    red = _red(entries[i + 1])
    if info is None or red is None or entries[i][1] is not entries[i + 1][1]:
        return None
    ep, ops, ob, oo, n, frame = info
    rp, rargs = red
    t = rp["in_type"]
    expr = ep["expr"]
    if rp.get("vmode") not in ("inner", "outer"):   # evaluated on scalars (the GPU design evaluates it per
        expr = expr.replace(f"({t})", "")           # component), a fused chain's form casts to the stored types
    if frame is not None or ep.get("to_bool") or not _ARITH.match(expr):
        return None
    if t not in ("float", "double") or rp["map_type"] != t or ep["out_type"] != t:
        return None
    if not any(o[0] == "t" for o in ops) or any(o[1] != t or o[2] != t for o in ops):
        return None
    ii = 4 if rp["arg"] else 2                        # position of `in` in the reduction's arguments
    if rargs[ii] is not ob or rargs[ii + 1] < oo or id(ob) in live or uses.get(id(ob)) != [i, i + 1]:
        return None
    if any(o[0] == "t" and o[3] is ob for o in ops):
        return None
    vw = rp.get("vw", 1) if rp.get("vmode") else 1
    if vw > 1 and any(o[0] == "t" and o[4] % vw for o in ops):
        return None
    rt = entries[i + 1][1]
    params = dict(rp)
    params["pro"] = tuple((o[0], o[1]) for o in ops)
    params["pro_expr"] = ep["expr"]
    argd = [None, np.int64] + ([None, np.int64] if rp["arg"] else [])
    for o in ops:
        argd += [None, np.int64] if o[0] == "t" else [_NP_SCALAR[o[2]]]
    argd += [np.int64] * (5 + 2 * rp["rk"] + 2 * rp["rr"])
    src = entries[i + 1][2]._cltorch_src
    k = rt.kernel(src[0], src[1], argd, **params)
    args = list(rargs[:ii])
    for o in ops:
        args += [o[3], o[4]] if o[0] == "t" else [o[3]]
    args.append(rargs[ii + 1] - oo)
    args += list(rargs[ii + 2:])
    _, _, _, gs, ls, _ = entries[i + 1]
    return ("k", rt, k, gs, ls, tuple(args))


def _match_finish(entries, i, uses, live, _ew):
    """Reduction ``i`` and the elementwise launch ``i + 1`` that alone reads its result (e.g. the ``sqrt`` of a
    sum of squares) as one reduction whose finish expression is the elementwise expression over the finished
    value, cast as the reduction stored it; or None."""
    red = _red(entries[i], with_pro=True)
    info = _ew(entries[i + 1])
    if red is None or info is None or entries[i][1] is not entries[i + 1][1]:
        return None
    rp, rargs = red
    ep, ops, ob, oo, n, frame = info
    if rp["arg"] or not rp["last"] or rp.get("vmode") == "outer" or frame is not None or ep.get("to_bool"):
        return None
    pos = 3 + sum(2 if kind == "t" else 1 for kind, _ in rp["pro"]) if rp["pro"] else 4
    rob, roo, M = rargs[0], rargs[1], rargs[pos]
    if n != M or id(rob) in live or uses.get(id(rob)) != [i, i + 1] or ob is rob:
        return None
    if any(o[0] != "t" or o[3] is not rob or o[4] != roo for o in ops):
        return None
    if ep.get("vw", 0) > 1 and n >= ep.get("epi", 1) and not _ARITH.match(ep["expr"]):
        return None                       # some elements took the vector builtins: the scalar finish may differ
    if ep["out_type"] not in ("float", "double") or rp["out_type"] not in ("float", "double"):
        return None
    fin = f"(({rp['out_type']})({rp['finish']}))"
    expr = re.sub(r"\bx(\d+)\b", lambda m: f"(({ops[int(m.group(1))][2]}){fin})", ep["expr"])
    params = dict(rp)
    params["finish"], params["out_type"] = expr, ep["out_type"]
    params["types"] = tuple(sorted(set(rp["types"]) | set(ep.get("types", ()))))
    src = entries[i][2]._cltorch_src
    k = entries[i][1].kernel(src[0], src[1], list(src[3]), **params)
    _, rt, _, gs, ls, _ = entries[i]
    return ("k", rt, k, gs, ls, (ob, oo) + tuple(rargs[2:]))


def fuse_reduction_prologues(trace, live):
    """A new Trace with each eligible elementwise + reduction pair fused (see the module docstring), and
    ``{old: new}`` entry indices. ``live``: ids of the buffers live Storage objects hold."""
    from .fusion import _ew
    trace, r1 = fuse_pairs(trace, live, lambda entries, i, uses, live: _match(entries, i, uses, live, _ew))
    trace, r2 = fuse_pairs(trace, live, lambda entries, i, uses, live: _match_finish(entries, i, uses, live, _ew))
    return trace, {a: r2[b] for a, b in r1.items()}
