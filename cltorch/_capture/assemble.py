"""Two trace rewrites for data movement: slice assembly and copy composition.

**Slice assembly** (:func:`assemble_slices`). Autograd's backward of a slice (``qkv.split(C, -1)``, ``x[:, a:b]``)
makes a zero-filled buffer of the whole input, copies the slice's gradient into its part, and sums the
gradients of the slices: for attention's q, k and v that is three zero fills, three strided copies and two
full-size adds (the char-LM's 11 launches per layer, counting the head-merging copies). When

* each summand buffer is zero-filled in full (an elementwise ``x0`` with the scalar +0.0, contiguous, offset 0)
  and then written only by elementwise launches whose element sets (computed exactly from their offsets,
  sizes and strides) are disjoint from each other and from the other summands' writes,
* the sums are contiguous ``x0 + x1`` launches of one float type over the whole buffer, at offset 0,
* every summand and partial sum is an intermediate (used by no entry outside the pattern, held by no live
  Storage), and nothing else uses the final sum's buffer between the first write and the last add,

the writes are pointed at the final sum's buffer (the same element offsets), the adds are dropped, and so are
the zero fills when the writes cover every element (else one fill of the final buffer stays, first). Each
element of the sum was ``v + 0`` (or ``0 + 0``): the same value, except that a slice value of -0.0 now stays
-0.0 where the add made it +0.0 (equal under ``==``, and as an operand of later sums and products).

**Copy composition** (:func:`compose_copies`). A pure copy (elementwise ``x0`` of one tensor operand, no type
change) whose source is the contiguous output of another pure copy that nothing else uses becomes one copy from
the first source to the second destination, on the template's strided path, when the two iteration spaces
split into each other (``epilogue._split``) and nothing between the two launches but elementwise reads uses the
first source (the composed copy runs where the second did), which is not the final destination. Copies are
exact, so the result is bit-identical; the intermediate is never written.

**Whole rows** (:func:`whole_rows`). A launch on the elementwise template's strided path gives each work-item
``strided_run`` (16) consecutive elements of the innermost dimension; where that dimension is short (a head of
32 in attention's ``[B, H, T, D]`` permutes) the replay launches it with one work-item per row instead, so the
index arithmetic is paid once per row: the same per-element operations, so the same bits. (A 32x128x4x32
permute copy on PoCL: 0.43-0.54 ms of process CPU with runs of 16, 0.22-0.28 ms with whole rows, load ~6.)

The passes leave launches inside an optimizer step's region alone and return ``(trace, {old: new})`` where
dropped entries have no key.
"""
import numpy as np

from .pairs import buffer_uses
from .trace import Trace

__all__ = ["assemble_slices", "compose_copies", "whole_rows"]

MAX_ELEMS = 1 << 24          # element masks above this size are not built (capture-time memory)
MAX_ROW = 128                # whole_rows: the longest innermost dimension one work-item takes
MIN_ROWS = 64                # whole_rows: rows needed to keep the device's cores busy


def _infos(trace):
    from .fusion import _ew
    in_region = set()
    for _, a, b in trace.regions:
        in_region.update(range(a, b))
    return [None if i in in_region else _ew(e) for i, e in enumerate(trace.entries)]


def _rebuild(trace, new_entries, remap):
    out = Trace()
    out.entries = new_entries
    out.checks = list(trace.checks)
    out.unsupported = list(trace.unsupported)
    n = len(new_entries)

    def first(a, b):
        for i in range(a, b):
            if i in remap:
                return remap[i]
        return None

    regions = []
    for tag, a, b in trace.regions:
        s = first(a, b)
        if s is None:
            nxt = next((remap[i] for i in range(b, len(trace.entries)) if i in remap), n)
            regions.append((tag, nxt, nxt))
        else:
            last = max(remap[i] for i in range(a, b) if i in remap)
            regions.append((tag, s, last + 1))
    out.regions = regions
    return out


def _is_copy(info):
    p, ops, ob, oo, n, frame = info
    return (p.get("expr", "").strip() == "x0" and len(ops) == 1 and ops[0][0] == "t" and not p.get("to_bool")
            and ops[0][1] == ops[0][2] == p.get("out_type"))


def _is_zero_fill(info):
    p, ops, ob, oo, n, frame = info
    if p.get("expr", "").strip() != "x0" or len(ops) != 1 or ops[0][0] != "s" or frame is not None or oo != 0:
        return False
    if p.get("out_type") not in ("float", "double") or p.get("to_bool"):
        return False
    v = ops[0][3]
    try:
        return float(v) == 0.0 and not np.signbit(float(v))
    except (TypeError, ValueError):
        return False


def _elements(info, n):
    """The element indices an elementwise launch writes (a sorted int64 array), or None when they fall outside
    ``[0, n)``, repeat, or are too many to list."""
    p, ops, ob, oo, cnt, frame = info
    if cnt > MAX_ELEMS:
        return None
    if frame is None:
        idx = np.arange(oo, oo + cnt, dtype=np.int64)
    else:
        sizes, ostr = frame
        idx = np.full((), oo, dtype=np.int64)
        for s, st in zip(sizes, ostr):
            idx = idx[..., None] + np.arange(s, dtype=np.int64) * st
        idx = idx.ravel()
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        return None
    idx = np.sort(idx)
    if idx.size > 1 and (np.diff(idx) == 0).any():
        return None
    return idx


def _reads(info, buf):
    return any(o[0] == "t" and o[3] is buf for o in info[1])


def assemble_slices(trace, live):
    """See the module docstring. ``live``: ids of the buffers live Storage objects hold."""
    entries = trace.entries
    infos = _infos(trace)
    uses = buffer_uses(entries)
    state = {}       # buffer id -> dict(buf, n, type, fills, writes, adds, mask, parts)
    done = []
    for i, (e, info) in enumerate(zip(entries, infos)):
        touched = set()
        if info is not None:
            p, ops, ob, oo, n, frame = info
            if _is_zero_fill(info) and n <= MAX_ELEMS:
                st = state.pop(id(ob), None)
                if st is not None and st["adds"]:
                    done.append(st)
                state[id(ob)] = dict(buf=ob, n=n, type=p["out_type"], fills=[i], writes=[], adds=[],
                                     mask=np.zeros(n, dtype=bool), parts=[ob])
                continue
            st = state.get(id(ob))
            if st is not None and not st["adds"] and not _reads(info, ob) and p.get("out_type") == st["type"] \
                    and not any(o[0] == "t" and id(o[3]) in state for o in ops):
                idx = _elements(info, st["n"])
                if idx is not None and not st["mask"][idx].any():
                    st["mask"][idx] = True
                    st["writes"].append(i)
                    continue
            if p.get("expr", "").strip() == "x0 + x1" and frame is None and oo == 0 and len(ops) == 2 and \
                    all(o[0] == "t" and o[4] == 0 and id(o[3]) in state for o in ops) and \
                    ops[0][3] is not ops[1][3] and id(ob) not in state:
                a, b = state[id(ops[0][3])], state[id(ops[1][3])]
                ok = a["n"] == b["n"] == n and a["type"] == b["type"] == p["out_type"] and \
                    all(o[1] == o[2] == p["out_type"] for o in ops) and not (a["mask"] & b["mask"]).any()
                if ok:
                    del state[id(a["buf"])], state[id(b["buf"])]
                    state[id(ob)] = dict(buf=ob, n=n, type=p["out_type"], fills=a["fills"] + b["fills"],
                                         writes=a["writes"] + b["writes"], adds=a["adds"] + b["adds"] + [i],
                                         mask=a["mask"] | b["mask"],
                                         parts=a["parts"] + b["parts"] + [a["buf"], b["buf"]])
                    continue
        # any other use of a tracked buffer ends its pattern there
        if e[0] == "k":
            touched = {id(x) for x in e[5]}
        elif e[0] == "copy":
            touched = {id(e[2]), id(e[3])}
        else:
            touched = {id(e[2])}
        for bid in touched & set(state):
            st = state.pop(bid)
            if st["adds"]:
                done.append(st)
    done += [st for st in state.values() if st["adds"]]

    drop, retarget, refill = set(), {}, {}
    for st in done:
        members = set(st["fills"]) | set(st["writes"]) | set(st["adds"])
        final, last = st["buf"], st["adds"][-1]
        if any(id(b) in live or not set(uses.get(id(b), ())) <= members for b in st["parts"]):
            continue
        if members & (drop | set(retarget) | set(refill)):
            continue
        lo = min(members)
        if any(lo <= u < last for u in uses.get(id(final), ())):
            continue
        drop.update(st["adds"])
        for w in st["writes"]:
            retarget[w] = final
        if st["mask"].all():
            drop.update(st["fills"])
        else:
            f0 = min(st["fills"])
            refill[f0] = final
            drop.update(f for f in st["fills"] if f != f0)
    if not drop:
        return trace, {i: i for i in range(len(entries))}
    new, remap = [], {}
    for i, e in enumerate(entries):
        if i in drop:
            continue
        buf = retarget.get(i) or refill.get(i)
        if buf is not None:
            e = e[:5] + ((buf,) + tuple(e[5][1:]),)
        remap[i] = len(new)
        new.append(e)
    return _rebuild(trace, new, remap), remap


def compose_copies(trace, live):
    """See the module docstring. ``live``: ids of the buffers live Storage objects hold."""
    from .epilogue import _split, _contig
    from .fusion import _strided_launch
    entries = trace.entries
    infos = _infos(trace)
    uses = buffer_uses(entries)
    writer = {}                # buffer id -> index of the pure copy that last wrote it
    drop, replace = set(), {}
    for j, info in enumerate(infos):
        if info is None or not _is_copy(info):
            continue
        p, ops, ob, oo, n, frame = info
        src = ops[0][3]
        i = writer.get(id(src))
        writer[id(ob)] = j
        if i is None or i in drop or i in replace or id(src) in live or uses.get(id(src)) != [i, j]:
            continue
        pp, pops, pob, poo, pn, pframe = infos[i]
        if pn != n or ops[0][4] != poo or pp["out_type"] != p["out_type"] or entries[i][1] is not entries[j][1]:
            continue
        psizes, pout = pframe if pframe is not None else ((pn,), (1,))
        pin = pops[0][5] if pframe is not None else (1,)
        csizes, cout = frame if frame is not None else ((n,), (1,))
        cin = ops[0][5] if frame is not None else (1,)
        if pout != _contig(psizes) or cin != _contig(csizes):
            continue
        s0, d0 = pops[0][3], ob
        # the composed copy runs at j: the first source must hold the same values there (only read in between,
        # by elementwise launches, whose one output is known)
        if s0 is d0 or any(infos[k] is None or infos[k][2] is s0 for k in uses.get(id(s0), ()) if i < k < j):
            continue
        ostr = _split(csizes, cout, psizes)
        if ostr is not None:
            sizes, instr = psizes, pin
        else:
            instr = _split(psizes, pin, csizes)
            if instr is None:
                continue
            sizes, ostr = csizes, cout
        rt = entries[j][1]
        new = _strided_launch(rt, [("t", p["out_type"], p["out_type"])], [s0, pops[0][4]], [tuple(instr)],
                              (tuple(sizes), tuple(ostr)), p, "x0", set(pp.get("types", ())) | set(p.get("types", ())),
                              d0, oo, n)
        drop.add(i)
        replace[j] = new
        writer.pop(id(ob), None)          # the new launch is not a candidate producer for a third copy
    if not drop:
        return trace, {i: i for i in range(len(entries))}
    out, remap = [], {}
    for i, e in enumerate(entries):
        if i in drop:
            continue
        remap[i] = len(out)
        out.append(replace.get(i, e))
    return _rebuild(trace, out, remap), remap


def whole_rows(trace, live):
    """See the module docstring. ``live`` is unused (the launches keep their buffers)."""
    from .pairs import launch_params
    entries = trace.entries
    in_region = set()
    for _, a, b in trace.regions:
        in_region.update(range(a, b))
    new, changed = list(entries), False
    for i, e in enumerate(entries):
        p = None if i in in_region else launch_params(e, "elementwise.cl.mako", "ew")
        if not p or not p.get("rank"):
            continue
        rank, run = p["rank"], p.get("run", 1)
        args = e[5]
        nt = sum(1 for o in p["operands"] if o[0] == "t")
        j = 2 + sum(2 if o[0] == "t" else 1 for o in p["operands"])
        if len(args) != j + 1 + rank + rank * (1 + nt):
            continue
        n, inner = int(args[j]), int(args[j + rank])
        if not run < inner <= MAX_ROW or inner == 0 or n // inner < MIN_ROWS:
            continue
        src = e[2]._cltorch_src
        rt = e[1]
        k = rt.kernel(src[0], src[1], list(src[3]), src[4], **dict(p, run=inner))
        ls = e[4][0]
        rows = n // inner
        new[i] = ("k", rt, k, (((rows + ls - 1) // ls) * ls,), e[4], args)
        changed = True
    if not changed:
        return trace, {i: i for i in range(len(entries))}
    return _rebuild(trace, new, {i: i for i in range(len(entries))}), {i: i for i in range(len(entries))}
