"""Failures and timeouts: how a rank that waits on a collective learns that it never will complete.

MPI's blocking calls wait forever on a peer that died or raised. cltorch never blocks in MPI: every collective is
non-blocking and ``wait_until`` polls it against a deadline (the group's ``timeout``), and every 0.2 s checks:

- failure notices: a rank whose Python ends with an uncaught exception sends its rank and the exception to every
  peer (``sys.excepthook``, installed by ``init_process_group``) on a control communicator; a peer that polls
  raises DistBackendError naming that rank and its exception;
- peers on this host (pids exchanged at init): a dead or zombie process raises DistBackendError naming its rank.
  (Under MPICH's ``mpiexec`` a rank killed by a signal makes the launcher kill the whole job at once; the
  cltorch launcher then names the rank from the pid files the ranks wrote, see ``run.py``.)
- at the deadline: DistBackendError naming the collective, its sequence number, and, for peers on this host,
  where each of them is (a node-local shared-memory table that every rank updates as it enters a collective).
"""
import os
import socket
import sys
import time

import numpy as np

from ._types import DistBackendError

__all__ = ["Watch", "wait_until"]

_CHECK_EVERY = 0.2
_NOTICE_TAG = 7001
_ABORT_GRACE = 1.0      # s between telling the peers and MPI_Abort
OPCODES = ["?", "barrier", "all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor",
           "reduce_scatter_tensor", "gather", "scatter", "all_to_all_single", "send", "recv", "broadcast_object_list",
           "all_gather_object", "gather_object", "scatter_object_list", "reduce_scatter", "all_to_all", "init"]


class Watch:
    """Per-process failure state of the world: peers' pids and hosts, the control communicator, and the node-local
    table of where each rank is (columns: group uid, sequence number, opcode, 1 while inside)."""

    def __init__(self, MPI, world):
        self.MPI = MPI
        self.world = world
        self.rank = world.Get_rank()
        self.size = world.Get_size()
        self.ctl = world.Dup()
        self.host = socket.gethostname()
        me = np.zeros(72, np.uint8)
        hb = self.host.encode()[:64]
        me[:len(hb)] = np.frombuffer(hb, np.uint8)
        me[64:72] = np.frombuffer(np.int64(os.getpid()).tobytes(), np.uint8)
        allb = np.zeros((self.size, 72), np.uint8)
        req = self.ctl.Iallgather(me, allb)
        self.failed = None
        wait_until([req], time.monotonic() + 300, self, "init_process_group (exchanging pids)", check=False)
        self.peers = [(bytes(r[:64]).rstrip(b"\0").decode(), int(np.frombuffer(r[64:72].tobytes(), np.int64)[0]))
                      for r in allb]
        self.local = [r for r, (h, _) in enumerate(self.peers) if h == self.host]
        self.table = None
        self._win = None
        try:
            node = world.Split_type(MPI.COMM_TYPE_SHARED)
            nsz = node.Get_size()
            self._win = MPI.Win.Allocate_shared(nsz * 4 * 8 if node.Get_rank() == 0 else 0, 8, comm=node)
            buf, _ = self._win.Shared_query(0)
            self.table = np.frombuffer(buf, np.int64, count=nsz * 4).reshape(nsz, 4)
            self.node_rank = node.Get_rank()
            g = np.array([self.rank], np.int64)
            ranks = np.zeros(nsz, np.int64)
            node.Allgather(g, ranks)
            self.node_ranks = ranks.tolist()       # world rank of each node-local row
            self.table[self.node_rank] = 0
            node.Barrier()
            self.node = node
        except Exception:                                    # noqa: BLE001 - the table is a diagnostic only
            self.table = None
            self.node_rank = 0
        self._last = 0.0

    # ------------------------------------------------------------ where this rank is
    def enter(self, uid, seq, opcode):
        if self.table is not None:
            self.table[self.node_rank] = (uid, seq, opcode, 1)

    def leave(self):
        if self.table is not None:
            self.table[self.node_rank, 3] = 0

    def where(self):
        """'rank 1 is inside all_reduce #4 of group 0; rank 2 last finished barrier #3 of group 0' for peers here."""
        if self.table is None:
            return ""
        out = []
        for row, r in enumerate(self.node_ranks):
            if r == self.rank:
                continue
            uid, seq, opc, inside = (int(v) for v in self.table[row])
            name = OPCODES[opc] if 0 <= opc < len(OPCODES) else "?"
            out.append(f"rank {r} is {'inside' if inside else 'past'} {name} #{seq} of group {uid}")
        return "; ".join(out)

    # ------------------------------------------------------------ peers
    def check(self, what):
        """Raises DistBackendError if a peer sent a failure notice or a peer on this host is dead."""
        if self.failed is not None:
            raise DistBackendError(self.failed)
        MPI = self.MPI
        st = MPI.Status()
        while self.ctl.Iprobe(MPI.ANY_SOURCE, _NOTICE_TAG, st):
            n = st.Get_count(MPI.BYTE)
            b = bytearray(n)
            self.ctl.Recv([b, MPI.BYTE], st.Get_source(), _NOTICE_TAG)
            self.failed = (f"cltorch.distributed: rank {st.Get_source()} failed ({b.decode(errors='replace')}); "
                           f"rank {self.rank} stopped in {what}")
            raise DistBackendError(self.failed)
        for r in self.local:
            if r == self.rank:
                continue
            pid = self.peers[r][1]
            state = _proc_state(pid)
            if state in (None, "Z", "X"):
                self.failed = (f"cltorch.distributed: rank {r} (pid {pid} on {self.host}) died; rank {self.rank} "
                               f"stopped in {what}")
                raise DistBackendError(self.failed)

    def notify(self, message):
        """Tells every peer that this rank failed (best effort, at most 1 s)."""
        MPI = self.MPI
        data = bytearray(message.encode()[:4000])
        reqs = [self.ctl.Isend([data, MPI.BYTE], r, _NOTICE_TAG) for r in range(self.size) if r != self.rank]
        end = time.monotonic() + 1.0
        while reqs and time.monotonic() < end:
            if MPI.Request.Testall(reqs):
                return
            time.sleep(0.001)


def _proc_state(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            s = f.read()
        return s[s.rindex(b")") + 2:s.rindex(b")") + 3].decode()
    except FileNotFoundError:
        return None
    except OSError:
        try:
            os.kill(pid, 0)
            return "R"
        except ProcessLookupError:
            return None
        except PermissionError:
            return "R"


def wait_until(pending, deadline, watch, what, check=True, on_timeout=None):
    """Polls ``pending`` (MPI requests and OpenCL events) until all complete; raises DistBackendError at
    ``deadline`` (time.monotonic()) or when ``watch.check`` finds a failed peer; between polls see ``idle``."""
    t0 = time.monotonic()
    last = t0
    while True:
        if all_done(pending):
            return
        now = time.monotonic()
        if now - last > _CHECK_EVERY:
            last = now
            if check:
                watch.check(what)
        if now > deadline:
            raise DistBackendError(timeout_message(watch, what, now - t0) if on_timeout is None else on_timeout())
        idle(now - t0)


def idle(waited):
    """Between two polls: yield the CPU to runnable processes (a peer rank on the same core), and after 1 s of
    waiting also sleep 100 us per poll, so that a long wait does not keep a core busy. MPI progresses only inside
    the polls, so the first second never sleeps: a sleeping poller stalls MPI's shared-memory pipeline."""
    if waited < 1.0:
        os.sched_yield()
    else:
        time.sleep(0.0001)


def all_done(pending):
    from ._mpi import mpi
    Request = mpi().Request
    reqs = []
    for p in pending:
        if isinstance(p, Request):
            reqs.append(p)
        elif hasattr(p, "Test"):
            if not p.Test():
                return False
        elif not _event_done(p):
            return False
    if reqs:
        return Request.Testall(reqs)
    return True


def _event_done(ev):
    import pyopencl as cl
    st = ev.get_info(cl.event_info.COMMAND_EXECUTION_STATUS)
    if st < 0:
        raise DistBackendError(f"an OpenCL copy for a collective failed (status {st})")
    return st == cl.command_execution_status.COMPLETE


def timeout_message(watch, what, waited):
    where = watch.where()
    return (f"cltorch.distributed: {what} timed out on rank {watch.rank} after {waited:.1f} s (the process group's "
            f"timeout)" + (f"; {where}" if where else "; no peer on this host to report"))


def install_excepthook(watch):
    """On an uncaught exception: print it as usual, tell every peer which rank failed and why, wait 1 s (peers in a
    collective raise DistBackendError naming this rank), then ``MPI_Abort`` so that the job ends even when a peer
    is busy outside MPI (set CLTORCH_DIST_ABORT_ON_ERROR=0 to let the process exit normally instead)."""
    prev = sys.excepthook

    def hook(tp, val, tb):
        try:
            prev(tp, val, tb)
        finally:
            try:
                sys.stderr.flush()
                _write_error_file(watch.rank, f"{tp.__name__}: {val}")
                if watch.failed is None or not isinstance(val, DistBackendError):
                    watch.notify(f"{tp.__name__}: {val}")
                if watch.size > 1 and os.environ.get("CLTORCH_DIST_ABORT_ON_ERROR", "1") != "0":
                    # peers that poll a collective have the notice now and raise their own error naming this
                    # rank; give them a moment, then end the job (a peer busy outside MPI would never see it)
                    time.sleep(_ABORT_GRACE)
                    sys.stderr.flush()
                    sys.stdout.flush()
                    watch.MPI.COMM_WORLD.Abort(1)
            except Exception:                                # noqa: BLE001 - dying anyway
                pass
    sys.excepthook = hook
    return prev


def _write_error_file(rank, message):
    """For the launcher (run.py): the first failure of this rank, in its run folder."""
    d = os.environ.get("CLTORCH_DIST_RUNDIR")
    if not d:
        return
    try:
        with open(os.path.join(d, f"rank{rank}.error"), "w") as f:
            f.write(message[:2000] + "\n")
    except OSError:
        pass
