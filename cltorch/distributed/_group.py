"""Process groups: ``init_process_group`` and friends, on MPI communicators.

The world group is a duplicate of ``MPI.COMM_WORLD``; ``new_group(ranks)`` creates a communicator of those ranks
(collective over the world, as in PyTorch: every rank calls it). Ranks passed to collectives (``src``, ``dst``)
are global ranks, as in PyTorch, and are translated to the group's ranks.
"""
import os
from datetime import timedelta

from ._mpi import available, mpi
from ._types import Backend, GroupMember, default_pg_timeout, group

__all__ = ["ProcessGroup", "init_process_group", "destroy_process_group", "is_initialized", "is_available",
           "is_mpi_available", "get_rank", "get_world_size", "get_backend", "new_group", "get_group_rank",
           "get_global_rank", "get_process_group_ranks", "get_node_local_rank", "default_group", "resolve"]

MAX_STAGES = 20      # header + agreement + 2 per chunk of at most 8 chunks (see _collectives.py)
_state = {"world": None, "watch": None, "groups": [], "hook": None}


class ProcessGroup:
    """A set of ranks with its MPI communicators (one per collective stage, made on first use) and the list of
    its works in flight. ``rank()`` and ``size()`` are this process's rank in the group and the group's size."""

    def __init__(self, comm, ranks, uid, timeout_s, watch):
        self.comm = comm
        self.ranks = list(ranks)          # global rank of each group rank
        self._g2l = {g: i for i, g in enumerate(self.ranks)}
        self.uid = uid
        self.timeout_s = timeout_s
        self.watch = watch
        self._stages = [comm.Dup() for _ in range(MAX_STAGES)]    # made up front: Dup is blocking and collective
        self._p2p = comm.Dup()           # up front too: a lazy Dup would need every rank, not only the peers
        self._works = []
        self._seq = 0
        self._p2pseq = 0

    def rank(self):
        return self.comm.Get_rank()

    def size(self):
        return self.comm.Get_size()

    def name(self):
        return "mpi"

    def _next_seq(self):
        self._seq += 1
        return self._seq

    def _next_p2p(self):
        self._p2pseq += 1
        return self._p2pseq

    def _stage_comm(self, s):
        if s >= len(self._stages):
            raise RuntimeError(f"internal: a collective used {s + 1} stages, more than the {len(self._stages)} "
                               "communicators made for its group")
        return self._stages[s]

    def p2p(self):
        return self._p2p

    def local(self, global_rank, what):
        try:
            return self._g2l[int(global_rank)]
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{what}: global rank {global_rank} is not part of group {self.uid} "
                             f"(its ranks are {self.ranks})") from None

    def free(self):
        for c in self._stages + ([self._p2p] if self._p2p is not None else []):
            try:
                c.Free()
            except Exception:                                # noqa: BLE001
                pass
        self._stages, self._p2p = [], None
        if self.uid != 0:
            try:
                self.comm.Free()
            except Exception:                                # noqa: BLE001
                pass

    def __repr__(self):
        return f"<cltorch.distributed.ProcessGroup {self.uid} ranks={self.ranks} backend=mpi>"


def is_available():
    """True when mpi4py is installed (cltorch's one backend is MPI)."""
    return available()


def is_mpi_available():
    return available()


def is_initialized():
    """Whether ``init_process_group`` has run (and ``destroy_process_group`` has not)."""
    return _state["world"] is not None


def _seconds(timeout):
    if timeout is None:
        return default_pg_timeout.total_seconds()
    if isinstance(timeout, timedelta):
        return timeout.total_seconds()
    raise TypeError(f"timeout must be a datetime.timedelta, got {type(timeout).__name__}")


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None):
    """Starts the default process group on MPI (PyTorch's ``torch.distributed.init_process_group``).

    The processes must have been started by ``mpiexec -n N`` (or ``python -m cltorch.distributed.run``, which runs
    mpiexec); MPI itself does the rendezvous, so ``init_method`` ("env://", "tcp://...", "file://...") and ``store``
    are accepted and not needed. ``world_size`` and ``rank``, when given, and the ``WORLD_SIZE``/``RANK``
    environment variables, when set, must agree with MPI's (ValueError otherwise: e.g. a script started by
    ``torchrun`` instead of an MPI launcher). ``backend`` may be "mpi", None, "gloo", "nccl" or "cpu:gloo,cuda:nccl"
    style strings: every group runs on MPI (get_backend() answers "mpi"). ``timeout`` (a timedelta; default 30
    min) bounds every collective of the group. Sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` (this host's
    rank among its peers) and ``LOCAL_WORLD_SIZE`` in ``os.environ`` where they are unset (until
    ``destroy_process_group``).

    Raises RuntimeError when already initialized or when mpi4py is missing; ValueError for an unknown backend or
    a rank/world size that disagrees with MPI's.
    """
    if _state["world"] is not None:
        raise RuntimeError("trying to initialize the default process group twice!")
    if backend is not None:
        names = [b.split(":")[-1].strip().lower() for b in str(backend).split(",")]
        bad = [b for b in names if b not in ("mpi", "gloo", "nccl", "undefined", "")]
        if bad:
            raise ValueError(f"init_process_group: backend {backend!r} is not provided: cltorch.distributed runs on "
                             "MPI (backend='mpi'; 'gloo' and 'nccl' are accepted and run on MPI)")
    timeout_s = _seconds(timeout)
    MPI = mpi()
    world = MPI.COMM_WORLD
    n, r = world.Get_size(), world.Get_rank()
    env_ws, env_rank = os.environ.get("WORLD_SIZE"), os.environ.get("RANK")
    for what, given, mine in (("world_size", world_size, n), ("rank", rank, r),
                              ("WORLD_SIZE", env_ws, n), ("RANK", env_rank, r)):
        if given is None or given == "" or (isinstance(given, int) and given < 0):
            continue
        if int(given) != mine:
            raise ValueError(
                f"init_process_group: {what}={given} but MPI started this process as rank {r} of {n}: start the "
                f"processes with an MPI launcher (mpiexec -n N python script.py, or python -m "
                f"cltorch.distributed.run --nproc-per-node N script.py), not torchrun")
    from ._watch import Watch, install_excepthook
    watch = Watch(MPI, world)
    comm = world.Dup()
    pg = ProcessGroup(comm, range(n), 0, timeout_s, watch)
    _state.update(world=pg, watch=watch, groups=[pg])
    _state["hook"] = install_excepthook(watch)
    GroupMember.WORLD = group.WORLD = pg
    local = watch.local.index(r) if r in watch.local else 0
    env = {"RANK": r, "WORLD_SIZE": n, "LOCAL_RANK": local, "LOCAL_WORLD_SIZE": len(watch.local)}
    _state["env_set"] = [k for k in env if k not in os.environ]      # removed again by destroy_process_group
    for k in _state["env_set"]:
        os.environ[k] = str(env[k])
    _write_pid_file(r)
    from ._collectives import barrier
    barrier()


def _write_pid_file(rank):
    d = os.environ.get("CLTORCH_DIST_RUNDIR")
    if not d:
        return
    try:
        with open(os.path.join(d, f"rank{rank}.pid"), "w") as f:
            f.write(f"{os.getpid()}\n")
    except OSError:
        pass


def _require():
    pg = _state["world"]
    if pg is None:
        raise ValueError("Default process group has not been initialized, please make sure to call "
                         "init_process_group.")
    return pg


def default_group():
    return _require()


def resolve(group_):
    """The ProcessGroup for a ``group=`` argument (None means the world); None for NON_GROUP_MEMBER."""
    world = _require()
    if group_ is None or group_ is GroupMember.WORLD:
        return world
    if group_ == GroupMember.NON_GROUP_MEMBER:
        return None
    if isinstance(group_, ProcessGroup):
        if group_ not in _state["groups"]:
            raise ValueError(f"{group_!r} has been destroyed")
        return group_
    raise TypeError(f"group must be a ProcessGroup made by new_group (or None), got {type(group_).__name__}")


def destroy_process_group(group=None):
    """Frees a group (or, with None, every group and the default one; ``init_process_group`` may then run
    again). Pending works of the group are abandoned."""
    pg = resolve(group)
    if pg is None:
        return
    if pg is _state["world"]:
        for g in list(_state["groups"]):
            g.free()
        watch = _state["watch"]
        try:
            watch.ctl.Free()
        except Exception:                                    # noqa: BLE001
            pass
        import sys
        if _state["hook"] is not None:
            sys.excepthook = _state["hook"]
        for k in _state.get("env_set", ()):
            os.environ.pop(k, None)
        _state.update(world=None, watch=None, groups=[], hook=None, env_set=[])
        GroupMember.WORLD = group_world_reset()
    else:
        pg.free()
        _state["groups"].remove(pg)


def group_world_reset():
    group.WORLD = None
    return None


def get_rank(group=None):
    """This process's rank in ``group`` (the world by default); -1 outside the group (PyTorch's answer)."""
    pg = resolve(group)
    return -1 if pg is None else pg.rank()


def get_world_size(group=None):
    """The number of ranks in ``group`` (the world by default); -1 outside the group."""
    pg = resolve(group)
    return -1 if pg is None else pg.size()


def get_backend(group=None):
    resolve(group)
    return Backend.MPI


def get_group_rank(group, global_rank):
    pg = resolve(group)
    return pg.local(global_rank, "get_group_rank")


def get_global_rank(group, group_rank):
    pg = resolve(group)
    if not 0 <= group_rank < pg.size():
        raise ValueError(f"Group rank {group_rank} is not part of group {pg.uid}")
    return pg.ranks[group_rank]


def get_process_group_ranks(group):
    pg = resolve(group)
    return list(pg.ranks)


def get_node_local_rank(fallback_rank=None):
    """``LOCAL_RANK`` from the environment (set by the launcher, or by init_process_group from MPI), else
    ``fallback_rank``; RuntimeError when neither exists (PyTorch's behaviour)."""
    v = os.environ.get("LOCAL_RANK")
    if v is not None:
        return int(v)
    if fallback_rank is not None:
        return int(fallback_rank)
    raise RuntimeError("LOCAL_RANK is not in the environment. Consider passing fallback_rank to allow "
                       "`get_node_local_rank` to work, assuming you are not running in a multi-device context and "
                       "want the code to run locally instead.")


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
              group_desc=None, device_id=None):
    """A new group of the global ``ranks`` (all ranks when None), in the given order sorted as PyTorch does.
    Every rank of the world must call it (MPI_Comm_create is collective); ranks outside the group get
    ``GroupMember.NON_GROUP_MEMBER``. ValueError for a rank outside the world or a repeated rank."""
    world = _require()
    n = world.size()
    ranks = list(range(n)) if ranks is None else sorted(int(r) for r in ranks)
    if len(set(ranks)) != len(ranks) or any(not 0 <= r < n for r in ranks):
        raise ValueError(f"new_group: ranks {ranks} must be distinct ranks of the world (0..{n - 1})")
    timeout_s = world.timeout_s if timeout is None else _seconds(timeout)
    MPI = mpi()
    grp = world.comm.Get_group().Incl(ranks)
    comm = world.comm.Create(grp)
    grp.Free()
    uid = max(g.uid for g in _state["groups"]) + 1
    _state["_uid"] = uid
    if comm == MPI.COMM_NULL:
        _state["groups"].append(_Placeholder(uid))
        return GroupMember.NON_GROUP_MEMBER
    pg = ProcessGroup(comm, ranks, uid, timeout_s, world.watch)
    _state["groups"].append(pg)
    return pg


class _Placeholder:
    """Keeps group uids the same on every rank (a rank outside a group still counts it)."""

    def __init__(self, uid):
        self.uid = uid

    def free(self):
        pass
