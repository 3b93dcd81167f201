"""Object collectives: picklable Python objects through the same non-blocking MPI path (pickle, then bytes)."""
import pickle

import numpy as np

from ._collectives import _header, _headers, _root, _run
from ._group import resolve
from ._work import ISSUE

__all__ = ["broadcast_object_list", "all_gather_object", "gather_object", "scatter_object_list"]


def _dumps(obj):
    return np.frombuffer(pickle.dumps(obj), np.uint8)


def _loads(b):
    return pickle.loads(b.tobytes())


def _bcast_objs_gen(pg, work, objs, root):
    comm = yield ISSUE
    yield from _headers(comm, _header("broadcast_object_list", work.seq, None, root=root, extra=len(objs)),
                        "broadcast_object_list", pg)
    mine = pg.rank() == root
    blobs = [_dumps(o) for o in objs] if mine else None
    sizes = np.array([b.size for b in blobs], np.int64) if mine else np.empty(len(objs), np.int64)
    comm = yield ISSUE
    yield [comm.Ibcast(sizes, root=root)]
    flat = np.concatenate(blobs) if mine and blobs else np.empty(int(sizes.sum()), np.uint8)
    comm = yield ISSUE
    yield [comm.Ibcast(flat, root=root)]
    if not mine:
        off = 0
        for i, n in enumerate(sizes.tolist()):
            objs[i] = _loads(flat[off:off + n])
            off += n


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """Replaces ``object_list``'s entries on every rank by those of rank ``src`` (pickled; the lists must have
    the same length everywhere, DistBackendError otherwise). ``device`` is accepted (MPI moves host bytes)."""
    pg = resolve(group)
    if pg is None:
        return
    root = _root(pg, src, group_src, "broadcast_object_list", "src")
    _run(pg, "broadcast_object_list", _bcast_objs_gen, object_list, root)


def _allgather_obj_gen(pg, work, out, obj):
    comm = yield ISSUE
    yield from _headers(comm, _header("all_gather_object", work.seq, None), "all_gather_object", pg)
    b = _dumps(obj)
    sizes = np.empty(pg.size(), np.int64)
    comm = yield ISSUE
    yield [comm.Iallgather(np.array([b.size], np.int64), sizes)]
    disp = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    flat = np.empty(int(sizes.sum()), np.uint8)
    comm = yield ISSUE
    yield [comm.Iallgatherv(b, [flat, (sizes, disp)])]
    for i in range(pg.size()):
        out[i] = _loads(flat[disp[i]:disp[i] + sizes[i]])


def all_gather_object(object_list, obj, group=None):
    """``object_list[r]`` (a list of world_size entries) gets rank r's ``obj`` on every rank (pickled)."""
    pg = resolve(group)
    if pg is None:
        return
    if len(object_list) != pg.size():
        raise ValueError(f"all_gather_object: object_list has {len(object_list)} entries, the group has "
                         f"{pg.size()} ranks")
    _run(pg, "all_gather_object", _allgather_obj_gen, object_list, obj)


def _gather_obj_gen(pg, work, obj, out, root):
    comm = yield ISSUE
    yield from _headers(comm, _header("gather_object", work.seq, None, root=root), "gather_object", pg)
    b = _dumps(obj)
    mine = pg.rank() == root
    sizes = np.empty(pg.size(), np.int64) if mine else None
    comm = yield ISSUE
    yield [comm.Igather(np.array([b.size], np.int64), sizes, root=root)]
    if mine:
        disp = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        flat = np.empty(int(sizes.sum()), np.uint8)
        comm = yield ISSUE
        yield [comm.Igatherv(b, [flat, (sizes, disp)], root=root)]
        for i in range(pg.size()):
            out[i] = _loads(flat[disp[i]:disp[i] + sizes[i]])
    else:
        comm = yield ISSUE
        yield [comm.Igatherv(b, None, root=root)]


def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None):
    """Rank ``dst``'s ``object_gather_list`` (world_size entries) gets every rank's ``obj``."""
    pg = resolve(group)
    if pg is None:
        return
    root = _root(pg, dst, group_dst, "gather_object", "dst")
    if pg.rank() == root and (object_gather_list is None or len(object_gather_list) != pg.size()):
        raise ValueError(f"gather_object: the destination rank needs object_gather_list with {pg.size()} entries")
    _run(pg, "gather_object", _gather_obj_gen, obj, object_gather_list, root)


def _scatter_obj_gen(pg, work, out, ins, root):
    comm = yield ISSUE
    yield from _headers(comm, _header("scatter_object_list", work.seq, None, root=root), "scatter_object_list", pg)
    mine = pg.rank() == root
    blobs = [_dumps(o) for o in ins] if mine else None
    sizes = np.array([b.size for b in blobs], np.int64) if mine else None
    n = np.empty(1, np.int64)
    comm = yield ISSUE
    yield [comm.Iscatter(sizes, n, root=root)]
    buf = np.empty(int(n[0]), np.uint8)
    comm = yield ISSUE
    if mine:
        disp = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        yield [comm.Iscatterv([np.concatenate(blobs), (sizes, disp)], buf, root=root)]
    else:
        yield [comm.Iscatterv(None, buf, root=root)]
    out[0] = _loads(buf)


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=None, group=None,
                        group_src=None):
    """``scatter_object_output_list[0]`` of rank r gets ``scatter_object_input_list[r]`` of rank ``src``."""
    pg = resolve(group)
    if pg is None:
        return
    root = _root(pg, src, group_src, "scatter_object_list", "src")
    if not scatter_object_output_list:
        raise ValueError("Expected argument scatter_object_output_list to be a list of size at least 1.")
    if pg.rank() == root and (scatter_object_input_list is None or len(scatter_object_input_list) != pg.size()):
        raise ValueError(f"scatter_object_list: the source rank needs {pg.size()} input objects")
    _run(pg, "scatter_object_list", _scatter_obj_gen, scatter_object_output_list, scatter_object_input_list, root)
