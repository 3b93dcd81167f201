"""The collectives and point-to-point ops of ``torch.distributed``, on MPI's non-blocking calls.

Every collective first exchanges a small header (op, sequence number, dtype, shape, root, reduce op) among the
group's ranks, so that ranks calling different collectives, or passing tensors of different shapes or dtypes,
get a DistBackendError naming each rank's tensor on every rank instead of corrupted memory or a hang.

**Deterministic sums.** With 3 or more ranks, a floating-point SUM/AVG/PRODUCT all-reduce is a reduce-scatter
followed by an all-gather: every element is reduced exactly once, by one rank, in MPI's order for that rank
count, and then copied to all ranks, so all ranks hold bit-identical results (a plain MPI_Allreduce may combine
in different orders on different ranks). With 2 ranks each element is one commutative IEEE operation (a + b ==
b + a bit for bit), so MPI_Iallreduce is identical on both and is used. Integer sums and MIN/MAX are exact and use
MPI_Iallreduce.

Device tensors are staged in chunks (at most 8, at least 4 MiB each) for all_reduce and broadcast: every chunk's
device-to-host copy is enqueued at once, the MPI stages of chunk c start as soon as its copy is done, and its
host-to-device copy is enqueued as soon as its result is in, so copies overlap the transfer.
"""
import numpy as np

from ._group import resolve
from ._mpi import mpi, mpi_op, wire_dtype
from ._staging import Host
from ._types import DistBackendError, ReduceOp
from ._watch import OPCODES
from ._work import ISSUE, Work, run_now

__all__ = ["all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter_tensor",
           "reduce_scatter", "gather", "scatter", "all_to_all_single", "all_to_all", "barrier", "monitored_barrier",
           "send", "recv", "isend", "irecv", "P2POp", "batch_isend_irecv"]

_CHUNK_MIN = 4 << 20
_MAX_CHUNKS = 8
_DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "uint16",
           "uint32", "uint64", "bool", "complex64", "complex128"]
_OPS = list(ReduceOp)
_H = 12


_OPIDX = {n: i for i, n in enumerate(OPCODES)}


def _op(name):
    return _OPIDX[name]


def _check_tensor(t, what):
    from .._tensor import Tensor
    if not isinstance(t, Tensor):
        raise TypeError(f"{what}: expected a cltorch Tensor, got {type(t).__name__}")


_DT_IDS = {}


def _dtype_id(dt):
    i = _DT_IDS.get(dt)
    if i is None:
        dn = str(dt).replace("cltorch.", "").replace("torch.", "")
        i = _DT_IDS[dt] = _DTYPES.index(dn) if dn in _DTYPES else 99
    return i


def _header(name, seq, t, root=-1, redop=None, extra=-1):
    h = np.full(_H, -1, np.int64)
    h[0] = _op(name)
    h[1] = seq
    if t is not None:
        h[2] = _dtype_id(t.dtype)
        h[3] = t.numel()
        h[6] = t.dim()
        for i, s in enumerate(tuple(t.shape)[:5]):
            h[7 + i] = s
    h[4] = root
    h[5] = -1 if redop is None else _OPS.index(redop)
    h[11] = extra
    return h


def _describe(h):
    if h[2] < 0:
        return "no tensor"
    dt = _DTYPES[h[2]] if h[2] < len(_DTYPES) else "?"
    nd = int(h[6])
    dims = [int(x) for x in h[7:7 + min(nd, 4)]] + (["..."] if nd > 4 else [])
    return f"{dt} [{', '.join(str(d) for d in dims)}]"


def _headers(comm, h, name, pg, same=True, same_root=True, same_dtype=True):
    """Generator: exchanges headers; raises DistBackendError (on every rank alike) when ranks disagree."""
    allh = np.empty((pg.size(), _H), np.int64)
    yield [comm.Iallgather(h, allh)]
    if (allh == h).all():                # the common case: every rank sent the same header
        return allh
    ops = allh[:, 0]
    if (ops != ops[0]).any() or (allh[:, 1] != allh[0, 1]).any():
        desc = ", ".join(f"rank {pg.ranks[r]} called {OPCODES[int(allh[r, 0])]} (collective #{int(allh[r, 1])})"
                         for r in range(pg.size()))
        raise DistBackendError(f"{name}: ranks are in different collectives: {desc}")
    bad = None
    if same_root and (allh[:, 4] != allh[0, 4]).any():
        bad = "the root rank (src/dst) differs"
    elif (allh[:, 5] != allh[0, 5]).any():
        bad = "the reduce op differs"
    elif same_dtype and (allh[:, 2] != allh[0, 2]).any():
        bad = "the dtypes differ"
    elif same and ((allh[:, 3] != allh[0, 3]).any() or (allh[:, 6:11] != allh[0, 6:11]).any()):
        bad = "the shapes differ"
    elif (allh[:, 11] != allh[0, 11]).any():
        bad = "the output sizes differ"
    if bad:
        desc = "; ".join(f"rank {pg.ranks[r]} has {_describe(allh[r])}"
                         + (f" (root {int(allh[r, 4])})" if allh[r, 4] >= 0 else "")
                         + (f" (op {_OPS[int(allh[r, 5])].name})" if allh[r, 5] >= 0 else "")
                         for r in range(pg.size()))
        raise DistBackendError(f"{name}: ranks disagree, {bad}: {desc}")
    return allh


def _agree(comm, pg, name, problem):
    """Generator: every rank learns whether any rank found ``problem`` (a message or None); all raise alike."""
    flags = np.empty(pg.size(), np.int8)
    yield [comm.Iallgather(np.array([0 if problem is None else 1], np.int8), flags)]
    if flags.any():
        who = [pg.ranks[r] for r in np.flatnonzero(flags)]
        raise DistBackendError(f"{name}: " + (problem if problem else f"rank(s) {who} found a mismatch "
                                                                     "(see their errors)"))


def _chunks(n, isz, device):
    if not device or n == 0:
        return [(0, n)]
    per = max(_CHUNK_MIN // isz, -(-n // _MAX_CHUNKS))
    return [(lo, min(n, lo + per)) for lo in range(0, n, per)]


def _group(group, name):
    pg = resolve(group)
    return pg


def _bytes(a):
    return a.reshape(-1).view(np.uint8)


# ------------------------------------------------------------------ all_reduce
def _all_reduce_gen(pg, work, t, op):
    h = Host(t, write=True)
    try:
        comm = yield ISSUE
        yield from _headers(comm, _header("all_reduce", work.seq, t, redop=op), "all_reduce", pg)
        n = pg.size()
        npd = h.npd
        if op is ReduceOp.AVG and npd.kind not in "fcV":
            raise TypeError(f"all_reduce: ReduceOp.AVG needs a floating point tensor, got {t.dtype}")
        wire = wire_dtype(npd)
        mop = mpi_op(op, npd if npd.kind == "b" else wire)
        # 2 ranks: each element is one IEEE operation of two commutative operands, the same bits in any order,
        # so MPI's own all-reduce is already identical on both ranks; 3 or more: reduce-scatter + all-gather
        det = wire.kind in "fc" and op in (ReduceOp.SUM, ReduceOp.AVG, ReduceOp.PRODUCT) and n > 2
        chunks = _chunks(h.n, h.isz, h.device)
        loads = [h.load(lo, hi) for lo, hi in chunks]
        me = pg.rank()
        stores = []
        st1 = [None] * len(chunks)        # (request, part buffer) of stage 1 per chunk
        res = [None] * len(chunks)

        def src_of(c):
            lo, hi = chunks[c]
            a = h.arr[lo:hi]
            if npd.kind == "b":
                return a.view(np.uint8)
            return a if wire == npd else a.astype(wire)

        def counts(m):
            base, rem = divmod(m, n)
            cnt = np.array([base + (1 if r < rem else 0) for r in range(n)], np.int64)
            return cnt, np.concatenate([[0], np.cumsum(cnt)[:-1]]).astype(np.int64)

        def finish_chunk(c):
            lo, hi = chunks[c]
            out = res[c]
            if op is ReduceOp.AVG:
                out /= n
            if npd.kind == "b":
                h.arr[lo:hi] = out.view(np.bool_)
            elif wire != npd:                  # float16/bfloat16 were reduced in float32; else it is in place
                h.arr[lo:hi] = out.astype(npd)
            stores.extend(h.store(lo, hi))

        def stage2(c):
            comm = yield ISSUE
            yield [st1[c][0]]
            lo, hi = chunks[c]
            part, src = st1[c][1], st1[c][2]
            cnt, disp = counts(hi - lo)
            dst = src                    # stage 1 has finished reading it
            yield [comm.Iallgatherv(part, [dst, (cnt, disp)])]
            res[c] = dst
            finish_chunk(c)

        for c, (lo, hi) in enumerate(chunks):
            if loads[c]:
                yield loads[c]
            src = src_of(c)
            comm = yield ISSUE
            if det:
                cnt, _ = counts(hi - lo)
                part = np.empty(int(cnt[me]), src.dtype)
                st1[c] = (comm.Ireduce_scatter(src, part, cnt, op=mop), part, src)
            else:
                st1[c] = (comm.Iallreduce(mpi().IN_PLACE, src, op=mop), None, src)
            if c > 0:
                if det:
                    yield from stage2(c - 1)
                else:
                    yield [st1[c - 1][0]]
                    res[c - 1] = st1[c - 1][2]
                    finish_chunk(c - 1)
        c = len(chunks) - 1
        if det:
            yield from stage2(c)
        else:
            yield [st1[c][0]]
            res[c] = st1[c][2]
            finish_chunk(c)
        if stores:
            yield stores
    finally:
        h.finish()


def _run(pg, name, genf, *args, async_op=False, outputs=(), ordered=True):
    w = Work.__new__(Work)
    box = {}

    def gen():
        return (yield from genf(pg, box["w"], *args))
    g = gen()
    box["w"] = w
    Work.__init__(w, pg, name, g, outputs=outputs, opcode=_op(name) if name in OPCODES else 0, ordered=ordered)
    return run_now(w, async_op)


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduces ``tensor`` across the group's ranks, in place on every rank (SUM, AVG, PRODUCT, MIN, MAX, BAND,
    BOR, BXOR). Floating SUM/AVG/PRODUCT results are bit-identical on every rank (module docstring). float16 and
    bfloat16 are reduced in float32 and rounded back. Returns a Work with ``async_op=True``, else None.
    Raises DistBackendError when ranks disagree on shape, dtype or op, or on timeout or peer failure."""
    _check_tensor(tensor, "all_reduce")
    pg = _group(group, "all_reduce")
    if pg is None:
        return None
    op = _redop(op)
    return _run(pg, "all_reduce", _all_reduce_gen, tensor, op, async_op=async_op, outputs=[tensor])


def _redop(op):
    if isinstance(op, ReduceOp):
        return op
    name = getattr(op, "name", None) or str(op).split(".")[-1]
    try:
        return ReduceOp[name.upper()]
    except KeyError:
        raise ValueError(f"unknown reduce op {op!r}") from None


# ------------------------------------------------------------------ broadcast
def _broadcast_gen(pg, work, t, root):
    h = Host(t, write=pg.rank() != root, read=pg.rank() == root)
    try:
        comm = yield ISSUE
        yield from _headers(comm, _header("broadcast", work.seq, t, root=root), "broadcast", pg)
        chunks = _chunks(h.n, h.isz, h.device)
        mine = pg.rank() == root
        loads = [h.load(lo, hi) for lo, hi in chunks] if mine else [[] for _ in chunks]
        reqs = [None] * len(chunks)
        stores = []
        for c, (lo, hi) in enumerate(chunks):
            if loads[c]:
                yield loads[c]
            comm = yield ISSUE
            reqs[c] = comm.Ibcast(_bytes(h.arr[lo:hi]), root=root)
            if c > 0 and not mine:
                yield [reqs[c - 1]]
                stores.extend(h.store(*chunks[c - 1]))
        yield [reqs[-1]]
        if not mine:
            stores.extend(h.store(*chunks[-1]))
        if stores:
            yield stores
    finally:
        h.finish()


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    """Copies ``tensor`` of rank ``src`` (a global rank; or ``group_src``, a rank in ``group``) into ``tensor`` of
    every rank of the group. Shapes and dtypes must agree (DistBackendError otherwise)."""
    _check_tensor(tensor, "broadcast")
    pg = _group(group, "broadcast")
    if pg is None:
        return None
    root = _root(pg, src, group_src, "broadcast", "src")
    return _run(pg, "broadcast", _broadcast_gen, tensor, root, async_op=async_op, outputs=[tensor])


def _root(pg, glob, local, what, argname):
    if local is not None:
        if glob is not None:
            raise ValueError(f"{what}: pass {argname} or group_{argname}, not both")
        if not 0 <= int(local) < pg.size():
            raise ValueError(f"{what}: group_{argname}={local} is outside the group (size {pg.size()})")
        return int(local)
    if glob is None:            # PyTorch's default src/dst is global rank 0
        glob = 0 if 0 in pg.ranks else pg.ranks[0]
    return pg.local(glob, what)


# ------------------------------------------------------------------ reduce
def _reduce_gen(pg, work, t, root, op):
    mine = pg.rank() == root
    h = Host(t, write=mine)
    try:
        comm = yield ISSUE
        yield from _headers(comm, _header("reduce", work.seq, t, root=root, redop=op), "reduce", pg)
        npd = h.npd
        if op is ReduceOp.AVG and npd.kind not in "fcV":
            raise TypeError(f"reduce: ReduceOp.AVG needs a floating point tensor, got {t.dtype}")
        wire = wire_dtype(npd)
        mop = mpi_op(op, npd if npd.kind == "b" else wire)
        ev = h.load()
        if ev:
            yield ev
        src = h.arr.view(np.uint8) if npd.kind == "b" else (h.arr if wire == npd else h.arr.astype(wire))
        dst = np.empty_like(src) if mine else None
        comm = yield ISSUE
        yield [comm.Ireduce(src, dst, op=mop, root=root)]
        if mine:
            if op is ReduceOp.AVG:
                dst /= pg.size()
            h.arr[...] = dst.view(np.bool_) if npd.kind == "b" else dst.astype(npd)
            ev = h.store()
            if ev:
                yield ev
    finally:
        h.finish()


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    """Reduces ``tensor`` of every rank into ``tensor`` of rank ``dst`` (others' tensors are left unchanged)."""
    _check_tensor(tensor, "reduce")
    pg = _group(group, "reduce")
    if pg is None:
        return None
    root = _root(pg, dst, group_dst, "reduce", "dst")
    return _run(pg, "reduce", _reduce_gen, tensor, root, _redop(op), async_op=async_op, outputs=[tensor])


# ------------------------------------------------------------------ gathers
def _write_parts(outs, flat_bytes, sizes):
    """Generator: copies consecutive byte ranges of ``flat_bytes`` into the output tensors."""
    if len(outs) == 1 and len(sizes) > 1:        # one output tensor receives every part (…_into_tensor)
        sizes = [sum(sizes)]
    hosts = [Host(o, write=True, read=False) for o in outs]
    try:
        evs = []
        off = 0
        for ho, nb in zip(hosts, sizes):
            _bytes(ho.arr)[...] = flat_bytes[off:off + nb]
            off += nb
            evs.extend(ho.store())
        if evs:
            yield evs
    finally:
        for ho in hosts:
            ho.finish()


def _all_gather_gen(pg, work, outs, t, name):
    h = Host(t)
    try:
        comm = yield ISSUE
        yield from _headers(comm, _header(name, work.seq, t), name, pg)
        ev = h.load()
        if ev:
            yield ev
        nb = h.n * h.isz
        flat = np.empty(nb * pg.size(), np.uint8)
        comm = yield ISSUE
        yield [comm.Iallgather(_bytes(h.arr), flat)]
        yield from _write_parts(outs, flat, [nb] * pg.size())
    finally:
        h.finish()


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """``tensor_list[r]`` of every rank gets ``tensor`` of group rank r. ``tensor_list`` must hold ``world_size``
    tensors of ``tensor``'s shape and dtype (ValueError otherwise)."""
    _check_tensor(tensor, "all_gather")
    pg = _group(group, "all_gather")
    if pg is None:
        return None
    if len(tensor_list) != pg.size():
        raise ValueError(f"all_gather: tensor_list has {len(tensor_list)} tensors, the group has {pg.size()} ranks")
    for o in tensor_list:
        _same(o, tensor, "all_gather", "tensor_list entry")
    return _run(pg, "all_gather", _all_gather_gen, list(tensor_list), tensor, "all_gather", async_op=async_op,
                outputs=list(tensor_list))


def _same(o, t, what, label):
    _check_tensor(o, what)
    if o.dtype != t.dtype or o.numel() != t.numel():
        raise ValueError(f"{what}: {label} is {o.dtype} {list(o.shape)} but the input is {t.dtype} {list(t.shape)}")


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """``output_tensor`` (world_size times ``input_tensor``'s numel: stacked or concatenated along dim 0) gets
    every rank's ``input_tensor`` in rank order."""
    _check_tensor(output_tensor, "all_gather_into_tensor")
    _check_tensor(input_tensor, "all_gather_into_tensor")
    pg = _group(group, "all_gather_into_tensor")
    if pg is None:
        return None
    if output_tensor.dtype != input_tensor.dtype or output_tensor.numel() != input_tensor.numel() * pg.size():
        raise ValueError(f"all_gather_into_tensor: output tensor must have {pg.size()} x the input's elements and "
                         f"its dtype: output {output_tensor.dtype} {list(output_tensor.shape)}, input "
                         f"{input_tensor.dtype} {list(input_tensor.shape)}")
    return _run(pg, "all_gather_into_tensor", _all_gather_gen, [output_tensor], input_tensor,
                "all_gather_into_tensor", async_op=async_op, outputs=[output_tensor])


def _reduce_scatter_gen(pg, work, out, inputs, op, name):
    n = pg.size()
    hin = [Host(i) for i in inputs]
    hout = Host(out, write=True, read=False)
    try:
        comm = yield ISSUE
        yield from _headers(comm, _header(name, work.seq, out, redop=op), name, pg)
        npd = hout.npd
        if op is ReduceOp.AVG and npd.kind not in "fcV":
            raise TypeError(f"{name}: ReduceOp.AVG needs a floating point tensor, got {out.dtype}")
        wire = wire_dtype(npd)
        mop = mpi_op(op, npd if npd.kind == "b" else wire)
        evs = [e for hh in hin for e in hh.load()]
        if evs:
            yield evs
        src = np.concatenate([hh.arr for hh in hin]) if len(hin) > 1 else hin[0].arr
        src = src.view(np.uint8) if npd.kind == "b" else (src if wire == npd else src.astype(wire))
        part = np.empty(hout.n, src.dtype)
        comm = yield ISSUE
        yield [comm.Ireduce_scatter_block(src, part, op=mop)]
        if op is ReduceOp.AVG:
            part /= n
        hout.arr[...] = part.view(np.bool_) if npd.kind == "b" else part.astype(npd)
        ev = hout.store()
        if ev:
            yield ev
    finally:
        for hh in hin:
            hh.finish()
        hout.finish()


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):  # noqa: A002
    """Reduces ``input`` (world_size x ``output``'s numel) across ranks and gives rank r the r-th block in
    ``output``. Each element is reduced once, so the result is deterministic."""
    _check_tensor(output, "reduce_scatter_tensor")
    _check_tensor(input, "reduce_scatter_tensor")
    pg = _group(group, "reduce_scatter_tensor")
    if pg is None:
        return None
    if output.dtype != input.dtype or input.numel() != output.numel() * pg.size():
        raise ValueError(f"reduce_scatter_tensor: input must have {pg.size()} x the output's elements and its "
                         f"dtype: input {input.dtype} {list(input.shape)}, output {output.dtype} {list(output.shape)}")
    return _run(pg, "reduce_scatter_tensor", _reduce_scatter_gen, output, [input], _redop(op),
                "reduce_scatter_tensor", async_op=async_op, outputs=[output])


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduces ``input_list[r]`` across ranks into ``output`` of rank r (same shapes for all entries)."""
    _check_tensor(output, "reduce_scatter")
    pg = _group(group, "reduce_scatter")
    if pg is None:
        return None
    if len(input_list) != pg.size():
        raise ValueError(f"reduce_scatter: input_list has {len(input_list)} tensors, the group has {pg.size()}")
    for i in input_list:
        _same(i, output, "reduce_scatter", "input_list entry")
    return _run(pg, "reduce_scatter", _reduce_scatter_gen, output, list(input_list), _redop(op), "reduce_scatter",
                async_op=async_op, outputs=[output])


def _gather_gen(pg, work, t, outs, root):
    h = Host(t)
    try:
        comm = yield ISSUE
        yield from _headers(comm, _header("gather", work.seq, t, root=root), "gather", pg)
        ev = h.load()
        if ev:
            yield ev
        nb = h.n * h.isz
        mine = pg.rank() == root
        flat = np.empty(nb * pg.size(), np.uint8) if mine else None
        comm = yield ISSUE
        yield [comm.Igather(_bytes(h.arr), flat, root=root)]
        if mine:
            yield from _write_parts(outs, flat, [nb] * pg.size())
    finally:
        h.finish()


def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    """Rank ``dst`` receives every rank's ``tensor`` into ``gather_list`` (world_size tensors, only on dst;
    ValueError when given elsewhere or of the wrong length)."""
    _check_tensor(tensor, "gather")
    pg = _group(group, "gather")
    if pg is None:
        return None
    root = _root(pg, dst, group_dst, "gather", "dst")
    if pg.rank() == root:
        if gather_list is None or len(gather_list) != pg.size():
            raise ValueError(f"gather: the destination rank needs gather_list with {pg.size()} tensors")
        for o in gather_list:
            _same(o, tensor, "gather", "gather_list entry")
    elif gather_list:
        raise ValueError("Argument ``gather_list`` must NOT be specified on non-destination ranks.")
    return _run(pg, "gather", _gather_gen, tensor, list(gather_list or []), root, async_op=async_op,
                outputs=list(gather_list or []))


def _scatter_gen(pg, work, t, ins, root):
    h = Host(t, write=True, read=False)
    mine = pg.rank() == root
    hin = [Host(i) for i in ins] if mine else []
    try:
        comm = yield ISSUE
        yield from _headers(comm, _header("scatter", work.seq, t, root=root), "scatter", pg)
        evs = [e for hh in hin for e in hh.load()]
        if evs:
            yield evs
        flat = np.concatenate([_bytes(hh.arr) for hh in hin]) if mine else None
        comm = yield ISSUE
        yield [comm.Iscatter(flat, _bytes(h.arr), root=root)]
        ev = h.store()
        if ev:
            yield ev
    finally:
        h.finish()
        for hh in hin:
            hh.finish()


def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    """Rank r's ``tensor`` receives ``scatter_list[r]`` of rank ``src`` (the list is given only on src)."""
    _check_tensor(tensor, "scatter")
    pg = _group(group, "scatter")
    if pg is None:
        return None
    root = _root(pg, src, group_src, "scatter", "src")
    if pg.rank() == root:
        if scatter_list is None or len(scatter_list) != pg.size():
            raise ValueError(f"scatter: the source rank needs scatter_list with {pg.size()} tensors")
        for i in scatter_list:
            _same(i, tensor, "scatter", "scatter_list entry")
    elif scatter_list:
        raise ValueError("Argument ``scatter_list`` must NOT be specified on non-source ranks.")
    return _run(pg, "scatter", _scatter_gen, tensor, list(scatter_list or []), root, async_op=async_op,
                outputs=[tensor])


# ------------------------------------------------------------------ all_to_all
def _a2a_gen(pg, work, outs, ins, send_bytes, recv_bytes, name, t0):
    n = pg.size()
    hin = [Host(i) for i in ins]
    try:
        comm = yield ISSUE
        yield from _headers(comm, _header(name, work.seq, t0), name, pg, same=False)
        got = np.empty(n, np.int64)
        comm = yield ISSUE
        yield [comm.Ialltoall(np.asarray(send_bytes, np.int64), got)]
        problem = None
        if not np.array_equal(got, np.asarray(recv_bytes, np.int64)):
            problem = (f"rank {pg.ranks[pg.rank()]} expects {list(np.asarray(recv_bytes))} bytes from ranks "
                       f"{pg.ranks} but they send {got.tolist()} (output/input split sizes disagree)")
        comm = yield ISSUE
        yield from _agree(comm, pg, name, problem)
        evs = [e for hh in hin for e in hh.load()]
        if evs:
            yield evs
        src = np.concatenate([_bytes(hh.arr) for hh in hin]) if len(hin) > 1 else _bytes(hin[0].arr)
        sd = np.concatenate([[0], np.cumsum(send_bytes)[:-1]]).astype(np.int64)
        rd = np.concatenate([[0], np.cumsum(recv_bytes)[:-1]]).astype(np.int64)
        flat = np.empty(int(np.sum(recv_bytes)), np.uint8)
        comm = yield ISSUE
        yield [comm.Ialltoallv([src, (np.asarray(send_bytes, np.int64), sd)],
                               [flat, (np.asarray(recv_bytes, np.int64), rd)])]
        if len(outs) == 1:
            yield from _write_parts(outs, flat, [flat.size])
        else:
            yield from _write_parts(outs, flat, list(recv_bytes))
    finally:
        for hh in hin:
            hh.finish()


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None,  # noqa: A002
                      async_op=False):
    """Rank r sends the r'-th slice of ``input`` along dim 0 to rank r' and receives into ``output`` in rank
    order. Without split sizes, dim 0 is split evenly (it must divide by world_size). Split sizes that disagree
    between senders and receivers raise DistBackendError on every rank."""
    _check_tensor(output, "all_to_all_single")
    _check_tensor(input, "all_to_all_single")
    pg = _group(group, "all_to_all_single")
    if pg is None:
        return None
    n = pg.size()
    if output.dtype != input.dtype:
        raise ValueError(f"all_to_all_single: output is {output.dtype}, input is {input.dtype}")
    row_in = input.numel() // max(input.shape[0], 1) if input.dim() else 1
    row_out = output.numel() // max(output.shape[0], 1) if output.dim() else 1

    def splits(sz, t, what):
        if sz is None or len(sz) == 0:
            if t.shape[0] % n:
                raise ValueError(f"all_to_all_single: {what} dim 0 ({t.shape[0]}) must divide by the world size {n}"
                                 " when no split sizes are given")
            return [t.shape[0] // n] * n
        sz = [int(s) for s in sz]
        if len(sz) != n or sum(sz) != t.shape[0]:
            raise ValueError(f"all_to_all_single: {what} split sizes {sz} must be {n} numbers summing to dim 0 "
                             f"({t.shape[0]})")
        return sz
    si = splits(input_split_sizes, input, "input")
    so = splits(output_split_sizes, output, "output")
    isz = np.dtype(input.dtype.np).itemsize
    sb = [s * row_in * isz for s in si]
    rb = [s * row_out * isz for s in so]
    return _run(pg, "all_to_all_single", _a2a_gen, [output], [input], sb, rb, "all_to_all_single", input,
                async_op=async_op, outputs=[output])


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    """Rank r sends ``input_tensor_list[r']`` to rank r', which receives it in ``output_tensor_list[r]``."""
    pg = _group(group, "all_to_all")
    if pg is None:
        return None
    n = pg.size()
    if len(output_tensor_list) != n or len(input_tensor_list) != n:
        raise ValueError(f"all_to_all: both lists need {n} tensors (got {len(output_tensor_list)} outputs, "
                         f"{len(input_tensor_list)} inputs)")
    t0 = input_tensor_list[0]
    for t in list(output_tensor_list) + list(input_tensor_list):
        _check_tensor(t, "all_to_all")
        if t.dtype != t0.dtype:
            raise ValueError(f"all_to_all: every tensor must be {t0.dtype}, got {t.dtype}")
    isz = np.dtype(t0.dtype.np).itemsize
    return _run(pg, "all_to_all", _a2a_gen, list(output_tensor_list), list(input_tensor_list),
                [t.numel() * isz for t in input_tensor_list], [t.numel() * isz for t in output_tensor_list],
                "all_to_all", t0, async_op=async_op, outputs=list(output_tensor_list))


# ------------------------------------------------------------------ barrier
def _barrier_gen(pg, work):
    comm = yield ISSUE
    yield from _headers(comm, _header("barrier", work.seq, None), "barrier", pg)


def barrier(group=None, async_op=False, device_ids=None):
    """Waits until every rank of the group has reached it (an MPI all-gather of the collective headers, which also
    catches ranks that are in a different collective)."""
    pg = _group(group, "barrier")
    if pg is None:
        return None
    return _run(pg, "barrier", _barrier_gen, async_op=async_op)


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """A barrier with its own ``timeout`` (a timedelta; default the group's). On timeout DistBackendError says
    where the other ranks on this host are."""
    pg = _group(group, "monitored_barrier")
    if pg is None:
        return None
    w = _run(pg, "barrier", _barrier_gen, async_op=True)
    w.wait(timeout=timeout)


# ------------------------------------------------------------------ point to point
def _send_gen(pg, work, t, peer, tag):
    h = Host(t)
    try:
        ev = h.load()
        if ev:
            yield ev
        hdr = _header("send", 0, t)
        comm = pg.p2p()
        yield [comm.Isend(hdr, peer, 2 * tag), comm.Isend(_bytes(h.arr), peer, 2 * tag + 1)]
    finally:
        h.finish()


def _recv_gen(pg, work, t, peer, tag):
    MPI = mpi()
    h = Host(t, write=True, read=False)
    try:
        comm = pg.p2p()
        hdr = np.empty(_H, np.int64)
        st = MPI.Status()
        req = comm.Irecv(hdr, MPI.ANY_SOURCE if peer is None else peer, 2 * tag)
        yield [_Poll(req, st)]
        src = st.Get_source()
        mine = _header("recv", 0, t)
        if hdr[2] != mine[2] or hdr[3] != mine[3]:
            scratch = np.empty(int(hdr[3]) * 16 + 1, np.uint8)
            yield [comm.Irecv(scratch, src, 2 * tag + 1)]
            raise DistBackendError(f"recv: rank {pg.ranks[src]} sent {_describe(hdr)} but rank {pg.ranks[pg.rank()]}"
                                   f" receives into {_describe(mine)}")
        yield [comm.Irecv(_bytes(h.arr), src, 2 * tag + 1)]
        ev = h.store()
        if ev:
            yield ev
        return pg.ranks[src]
    finally:
        h.finish()


class _Poll:
    """An MPI request polled with a status (so a recv from any source learns its sender)."""

    def __init__(self, req, st):
        self.req, self.st, self.done = req, st, False

    def Test(self):  # noqa: N802 (MPI's name)
        if not self.done:                 # a completed request is null: testing it again would clear the status
            self.done = self.req.Test(self.st)
        return self.done


def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    """Sends ``tensor`` to rank ``dst`` without blocking; returns a Work (the shape and dtype travel in a header,
    so a receiver with a different tensor raises instead of reading garbage)."""
    _check_tensor(tensor, "isend")
    pg = _group(group, "isend")
    if pg is None:
        return None
    peer = _root(pg, dst, group_dst, "isend", "dst")
    if peer == pg.rank():
        raise ValueError("isend: a rank cannot send to itself")
    return _run(pg, "send", _send_gen, tensor, peer, int(tag), async_op=True, ordered=False)


def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receives into ``tensor`` from rank ``src`` (any rank when None) without blocking; returns a Work whose
    ``source_rank()`` names the sender. A sender's tensor of another shape or dtype raises DistBackendError."""
    _check_tensor(tensor, "irecv")
    pg = _group(group, "irecv")
    if pg is None:
        return None
    peer = None if src is None and group_src is None else _root(pg, src, group_src, "irecv", "src")
    return _run(pg, "recv", _recv_gen, tensor, peer, int(tag), async_op=True, ordered=False, outputs=[tensor])


def send(tensor, dst=None, group=None, tag=0, group_dst=None):
    """Blocking ``isend``."""
    w = isend(tensor, dst, group, tag, group_dst)
    if w is not None:
        w.wait()


def recv(tensor, src=None, group=None, tag=0, group_src=None):
    """Blocking ``irecv``; returns the sender's global rank (PyTorch's return value)."""
    w = irecv(tensor, src, group, tag, group_src)
    if w is None:
        return -1
    w.wait()
    return w.source_rank()


class P2POp:
    """One point-to-point op for ``batch_isend_irecv``: ``P2POp(dist.isend or dist.irecv, tensor, peer, group,
    tag)``."""

    def __init__(self, op, tensor, peer=None, group=None, tag=0, group_peer=None):
        if op not in (isend, irecv):
            raise ValueError("Invalid ``op``. Expected ``op`` to be of type ``torch.distributed.isend`` or "
                             "``torch.distributed.irecv``.")
        self.op, self.tensor, self.peer, self.group, self.tag, self.group_peer = op, tensor, peer, group, tag, \
            group_peer


def batch_isend_irecv(p2p_op_list):
    """Starts every op of the list; returns their Works."""
    out = []
    for p in p2p_op_list:
        if p.op is isend:
            out.append(isend(p.tensor, p.peer, p.group, p.tag, p.group_peer))
        else:
            out.append(irecv(p.tensor, p.peer, p.group, p.tag, p.group_peer))
    return out
