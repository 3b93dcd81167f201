"""Fusing pairs of consecutive recorded launches into one (a GEMM's epilogue, a reduction's prologue).

:func:`fuse_pairs` walks a trace and asks a ``match(entries, i, uses, live)`` function whether entries ``i`` and
``i + 1`` can be one launch; ``match`` returns the fused entry or None. ``uses`` maps a buffer's id to the entry
indices that use it (any role), so a match can tell an intermediate (used by exactly the pair) from a buffer
something else reads. Launches inside an optimizer step's region are never paired (their arguments are
re-derived per replay).
"""
from .trace import Trace, _is_buffer

__all__ = ["fuse_pairs", "buffer_uses", "launch_params"]


def launch_params(e, template, kernel):
    """The render parameters of trace entry ``e`` when it launches ``kernel`` of ``template``, else None."""
    if e[0] != "k":
        return None
    src = getattr(e[2], "_cltorch_src", None)
    if src is None or src[0] != template or src[1] != kernel:
        return None
    return src[2]


def buffer_uses(entries):
    """{buffer id: [entry indices using it, ascending]}."""
    uses = {}
    for i, e in enumerate(entries):
        if e[0] == "k":
            bs = [a for a in e[5] if _is_buffer(a)]
        elif e[0] == "copy":
            bs = [e[2], e[3]]
        else:
            bs = [e[2]]
        for b in bs:
            lst = uses.setdefault(id(b), [])
            if not lst or lst[-1] != i:
                lst.append(i)
    return uses


def fuse_pairs(trace, live, match):
    """A new Trace with each pair ``match`` accepts replaced by its fused entry, and ``{old: new}`` entry
    indices (the trace itself when nothing matched). ``live``: ids of the buffers live Storage objects hold."""
    entries = trace.entries
    in_region = set()
    for _, a, b in trace.regions:
        in_region.update(range(a, b))
    uses = buffer_uses(entries)
    new, remap, i = [], {}, 0
    while i < len(entries):
        fused = None
        if i + 1 < len(entries) and i not in in_region and i + 1 not in in_region:
            fused = match(entries, i, uses, live)
        if fused is not None:
            remap[i] = remap[i + 1] = len(new)
            new.append(fused)
            i += 2
            continue
        remap[i] = len(new)
        new.append(entries[i])
        i += 1
    if len(new) == len(entries):
        return trace, remap
    out = Trace()
    out.entries = new
    out.checks = list(trace.checks)
    out.unsupported = list(trace.unsupported)
    out.regions = [(tag, remap.get(a, len(new)), (remap[b - 1] + 1) if b > a else remap.get(a, 0))
                   for tag, a, b in trace.regions]
    return out, remap
