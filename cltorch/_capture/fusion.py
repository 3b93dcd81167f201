"""Fusing chains of recorded elementwise launches into one kernel of the same template.

A run of consecutive ``elementwise.cl.mako`` launches on the contiguous fast path (rank 0) over the same
element count on one device becomes one launch when each intermediate output

* is read only by later launches of the run (at the offset it was written at, in any operand positions;
  so a run is a small DAG with one result, e.g. a GELU's backward),
* is used by no other entry of the trace (no other write, read, copy or fill), and
* belongs to no live tensor when the capture ends (no Storage holds the buffer: nothing outside can see it).

The fused expression substitutes each intermediate's (already fused) expression for the consumers' operands.
When every launch of the run took the vector path with the same width, the expressions are float-typed and
compose as they are, on the same vector builtins, so the result is bit-identical to the separate launches
(the template is built with ``FP_CONTRACT OFF``: no multiply-add is formed across the former kernel
boundaries). Otherwise each substituted value is cast to the type it was stored as and then to the type it
was loaded as (exactly the rounding the intermediate buffer did), on the scalar path; math builtins may then
differ from their vector forms by an ulp. Launches inside an optimizer step's region are left alone (their
arguments are re-derived per replay). The intermediates are then never written, and their buffers are
released with the unfused trace.
"""
import gc
import re

import numpy as np

from ..backend import geometry
from .pairs import buffer_uses, launch_params
from .trace import Trace

__all__ = ["fuse", "MAX_EXPR"]

MAX_EXPR = 6000          # characters: a longer fused expression ends the run (duplicated operands grow it)
_X = re.compile(r"\bx(\d+)\b")


def _live_buffers():
    """ids of the buffers that live Storage objects hold."""
    from .._storage import Storage
    out = set()
    for o in gc.get_objects():
        if type(o) is Storage and o.buf is not None:
            out.add(id(o.buf))
    return out


def _contig(shape):
    st, acc = [], 1
    for d in reversed(shape):
        st.append(acc)
        acc *= d
    return tuple(reversed(st))


def _ew(e):
    """(params, operands [(kind, st, ct, value, offset, strides)], out buffer, out offset, n, frame) of an eligible
    launch; ``frame`` is None for the contiguous path, else (collapsed sizes, output strides) of the strided one
    (each tensor operand's strides are then the last item of its tuple)."""
    p = launch_params(e, "elementwise.cl.mako", "ew")
    if p is None:
        return None
    rank = p.get("rank")
    if rank is None or (rank == 0 and p.get("run", 1) != 1):
        return None
    types = p.get("types", ())
    if "bfloat16" in types or "half" in types or p.get("out_type") in ("bfloat16", "half"):
        return None
    args = e[5]
    ops, j = [], 2
    for kind, st, ct in p["operands"]:
        if kind == "t":
            ops.append(["t", st, ct, args[j], args[j + 1], None])
            j += 2
        else:
            ops.append(["s", st, ct, args[j], None, None])
            j += 1
    n = args[j]
    nt = sum(1 for o in ops if o[0] == "t")
    if len(args) != j + 1 + rank + rank * (1 + nt):
        return None
    frame = None
    if rank:
        sizes = tuple(args[j + 1:j + 1 + rank])
        tail = args[j + 1 + rank:]
        ostr = tuple(tail[d * (1 + nt)] for d in range(rank))
        k = 0
        for o in ops:
            if o[0] == "t":
                k += 1
                o[5] = tuple(tail[d * (1 + nt) + k] for d in range(rank))
        frame = (sizes, ostr)
    return p, [tuple(o) for o in ops], args[0], args[1], n, frame


def fuse(trace, live=None):
    """A new Trace with slice gradients assembled in place and copies of copies composed (``assemble.py``),
    eligible runs fused (see the module docstring), then each GEMM followed by an add of
    its result fused into the GEMM's epilogue (``epilogue.py``) and each elementwise launch whose result only
    a reduction reads into the reduction's prologue (``prologue.py``), and short-rowed strided launches given
    one work-item per row (``assemble.whole_rows``); and ``{old entry: new entry}``."""
    from .assemble import assemble_slices, compose_copies, whole_rows
    from .epilogue import fuse_gemm_epilogues
    from .prologue import fuse_reduction_prologues
    if live is None:
        live = _live_buffers()
    out, remap = trace, {i: i for i in range(len(trace.entries))}
    for step in (assemble_slices, compose_copies, _fuse_ew, fuse_gemm_epilogues, fuse_reduction_prologues,
                 whole_rows):
        out, r2 = step(out, live)
        remap = {i: r2[j] for i, j in remap.items() if j in r2}
    return out, remap


def _fuse_ew(trace, live):
    """fuse()'s elementwise part."""
    entries = trace.entries
    in_region = set()
    for _, a, b in trace.regions:
        in_region.update(range(a, b))
    uses = buffer_uses(entries)     # buffer id -> entry indices using it (any role)
    infos = [None if i in in_region else _ew(e) for i, e in enumerate(entries)]
    if sum(1 for x in infos if x is not None) < 2:
        return trace, {i: i for i in range(len(entries))}
    if live is None:
        live = _live_buffers()
    # dead launches: an elementwise kernel writes only its output; one that nothing reads and no live tensor holds
    # (e.g. a gradient autograd computed for a Python scalar) is dropped, which can join the chains around it
    dead = set()
    changed = True
    while changed:
        changed = False
        for i in range(len(entries) - 1, -1, -1):
            info = infos[i]
            if info is None or i in dead:
                continue
            ob = info[2]
            if id(ob) not in live and uses.get(id(ob)) == [i] and \
                    not any(o[0] == "t" and o[3] is ob for o in info[1]):
                dead.add(i)
                changed = True
                for o in info[1]:
                    if o[0] == "t":
                        lst = uses.get(id(o[3]))
                        if lst and i in lst:
                            lst.remove(i)
    if dead:
        keep = [i for i in range(len(entries)) if i not in dead]
        pos = {old: new for new, old in enumerate(keep)}
        sub = Trace()
        sub.entries = [entries[i] for i in keep]
        sub.checks, sub.unsupported = list(trace.checks), list(trace.unsupported)
        sub.regions = [(tag, pos[a] if a in pos else len(keep), (pos[b - 1] + 1) if b > a else pos.get(a, 0))
                       for tag, a, b in trace.regions]
        fused, remap = _fuse_ew(sub, live)
        return fused, {i: remap[pos[i]] for i in keep}

    groups = _groups(entries, infos, uses, live)

    new_entries, remap = [], {}
    gi = {g[0]: g for g in groups if len(g) > 1}
    skip = set()
    for i, e in enumerate(entries):
        if i in skip:
            continue
        g = gi.get(i)
        fused = _fuse_group(entries, infos, g) if g else None
        if fused is None:
            remap[i] = len(new_entries)
            new_entries.append(e)
            continue
        for j in g:
            remap[j] = len(new_entries)
            skip.add(j)
        new_entries.append(fused)
    out = Trace()
    out.entries = new_entries
    out.checks = list(trace.checks)
    out.unsupported = list(trace.unsupported)
    out.regions = [(tag, remap.get(a, len(new_entries)), (remap[b - 1] + 1) if b > a else remap.get(a, 0))
                   for tag, a, b in trace.regions]
    return out, remap


def _groups(entries, infos, uses, live):
    """Runs of consecutive eligible launches to fuse: a member reads earlier members' outputs only at the offset
    each was written, as the type it was stored as, and every member's output but the last is used only by
    members (no live Storage holds it), so the members form a DAG whose one result is the last output; a run
    that would leak an intermediate is cut back to its longest closed prefix."""
    groups, s, n_all = [], 0, len(infos)
    while s < n_all:
        if infos[s] is None:
            s += 1
            continue
        cand, gframe, outs = [s], infos[s][5], {id(infos[s][2]): s}
        j = s + 1
        while j < n_all and infos[j] is not None and _joins(entries, infos, cand, gframe, outs, j):
            cand.append(j)
            if gframe is None:
                gframe = infos[j][5]
            outs[id(infos[j][2])] = j
            j += 1
        k = len(cand)
        while k > 1 and not _closed(infos, cand[:k], uses, live):
            k -= 1
        groups.append(cand[:k])
        s = cand[k - 1] + 1
    return groups


def _joins(entries, infos, cand, gframe, outs, j):
    p, ops, ob, oo, n, fr = infos[j]
    if entries[j][1] is not entries[cand[0]][1] or n != infos[cand[0]][4]:
        return False
    if id(ob) in outs:
        # an in-place chain (``running_mean.mul_(0.9).add_(mean, alpha=0.1)``): the member rewrites an earlier
        # member's output in full, as the same type; the earlier value stays in a register
        m = infos[outs[id(ob)]]
        if m[3] != oo or m[0]["out_type"] != p["out_type"]:
            return False
    if any(infos[c][0].get("to_bool") for c in cand):
        return False
    frame = gframe if fr is None else fr
    for o in ops:
        if o[0] == "t" and id(o[3]) in outs:
            m = infos[outs[id(o[3])]]
            if o[3] is not m[2] or o[4] != m[3] or o[1] != m[0]["out_type"] or \
                    (o[5] is not None and o[5] != frame[1]):
                return False
    return _frame_ok(gframe, fr, infos[j], [infos[c] for c in cand])


def _closed(infos, g, uses, live):
    """Whether every output of ``g`` but the last is an intermediate only members use, or the last output's own
    buffer and offset (which the last member overwrites)."""
    members = set(g)
    last = infos[g[-1]][2]
    for m in g[:-1]:
        ob = infos[m][2]
        if ob is last and infos[m][3] == infos[g[-1]][3]:
            continue         # rewritten in full by the last member (an in-place chain, see _joins)
        if id(ob) in live or ob is last or not set(uses.get(id(ob), ())) <= members:
            return False
    return True


def _frame_ok(gframe, fr, info, members):
    """Whether a launch with frame ``fr`` joins a group whose frame is ``gframe`` (None: all contiguous so far).

    A strided frame is one iteration space for every member: the same collapsed sizes and output strides, which
    must be contiguous (so a contiguous member's operands are the frame's contiguous strides), and no member on
    the vector path (its builtins would change to the scalar forms)."""
    if gframe is None and fr is None:
        return True
    frame = gframe if gframe is not None else fr
    if fr is not None and gframe is not None and fr != gframe:
        return False
    sizes, ostr = frame
    if ostr != _contig(sizes):
        return False
    n = 1
    for d in sizes:
        n *= d
    if n != info[4]:
        return False
    return all(m[0].get("vw", 0) == 0 for m in members + [info])


def _fuse_group(entries, infos, g):
    """The fused launch entry of group ``g`` (entry indices), or None when it cannot be built."""
    from ..ops.elementwise import _NP_SCALAR, gpu_layout
    rt = entries[g[0]][1]
    vws = {infos[i][0].get("vw", 0) for i in g}
    vector = len(vws) == 1 and next(iter(vws)) > 0
    vw = next(iter(vws)) if vector else 0
    final_buf, final_off = infos[g[-1]][2], infos[g[-1]][3]
    for i in g:
        for o in infos[i][1]:
            if o[0] == "t" and o[3] is final_buf and o[4] != final_off:
                return None          # reads the final output at another offset: not elementwise-safe fused
    frame = next((infos[i][5] for i in g if infos[i][5] is not None), None)
    if frame is not None:
        vector, vw = False, 0
        cstr = _contig(frame[0])
    spec, fargs, ext = [], [], {}
    tstrides = []              # per tensor operand of the fused kernel: its strides in the frame
    types = set()
    text = None
    made = {}                  # output buffer id of a member -> (its expression, the type it was stored as)
    for i in g:
        p, ops, ob, oo, n, _ = infos[i]
        types.update(p.get("types", ()))
        subst = {}
        for j, (kind, st, ct, val, off, strides) in enumerate(ops):
            if kind == "t" and id(val) in made:
                mtext, mot = made[id(val)]
                subst[j] = f"({mtext})" if vector else f"(({ct})(({mot})({mtext})))"
            elif kind == "t":
                if frame is not None and strides is None:
                    strides = cstr
                k = (id(val), off, st, ct, strides)
                if k not in ext:
                    ext[k] = len(spec)
                    spec.append(("t", st, ct))
                    fargs += [val, off]
                    tstrides.append(strides)
                subst[j] = f"x{ext[k]}"
            else:
                subst[j] = f"x{len(spec)}"
                spec.append(("s", st, ct))
                fargs.append(val)
        text = _X.sub(lambda m: subst[int(m.group(1))], p["expr"])
        if len(text) > MAX_EXPR:
            return None
        made[id(ob)] = (text, p["out_type"])
    last = infos[g[-1]][0]
    n = infos[g[-1]][4]
    prof = rt.profile
    if frame is not None:
        return _strided_launch(rt, spec, fargs, tstrides, frame, last, text, types, final_buf, final_off, n)
    epi = prof.get_value("elementwise", "elems_per_item", 1)
    if vw:
        epi = max(vw, (epi // vw) * vw)
    # the GPU design's vector accesses, as pointwise chooses them for eager launches (gpu_layout; offsets aligned)
    layout = gpu_layout(rt, [last["out_type"]] + [o[1] for o in spec if o[0] == "t"])
    lay = {}
    if layout is not None:
        gvec, offs, j = layout[0], [final_off], 0
        for kind, _, _ in spec:          # fargs: (buffer, offset) per tensor operand, the value per scalar
            if kind == "t":
                offs.append(fargs[j + 1])
            j += 2 if kind == "t" else 1
        if gvec > 1 and any(off % gvec for off in offs):
            gvec = 1
        vw, epi, lay = 0, max(gvec, layout[1] // gvec * gvec), {"gvec": gvec}
    ls = prof.get_value("elementwise", "local_size", 64)
    argd = [None, np.int64]
    for kind, st, ct in spec:
        argd += [None, np.int64] if kind == "t" else [_NP_SCALAR[ct]]
    argd.append(np.int64)
    k = rt.kernel("elementwise.cl.mako", "ew", argd, operands=tuple(spec), out_type=last["out_type"], expr=text,
                  rank=0, to_bool=last.get("to_bool", False), types=tuple(sorted(types)), epi=epi, vw=vw, run=1, **lay)
    gs, ls = geometry.nd(rt, (n + epi - 1) // epi, ls, k)
    return ("k", rt, k, gs, ls, (final_buf, final_off, *fargs, n))


def _strided_launch(rt, spec, fargs, tstrides, frame, last, text, types, final_buf, final_off, n):
    """The fused launch on the template's strided path over ``frame`` (sizes, contiguous output strides)."""
    from ..ops.elementwise import _NP_SCALAR
    sizes, ostr = frame
    rank = len(sizes)
    prof = rt.profile
    run = prof.get_value("elementwise", "strided_run", 1)
    ls = prof.get_value("elementwise", "local_size", 64)
    argd = [None, np.int64]
    for kind, st, ct in spec:
        argd += [None, np.int64] if kind == "t" else [_NP_SCALAR[ct]]
    argd += [np.int64] * (1 + rank + rank * (1 + len(tstrides)))
    k = rt.kernel("elementwise.cl.mako", "ew", argd, operands=tuple(spec), out_type=last["out_type"], expr=text,
                  rank=rank, to_bool=last.get("to_bool", False), types=tuple(sorted(types)), epi=1, vw=0, run=run)
    tail = list(sizes)
    for d in range(rank):
        tail.append(ostr[d])
        for st in tstrides:
            tail.append(st[d])
    inner = sizes[-1]
    gs, ls = geometry.nd(rt, (n // inner) * ((inner + run - 1) // run), ls, k)
    return ("k", rt, k, gs, ls, (final_buf, final_off, *fargs, n, *tail))
