"""``Work``: one collective in flight, and the scheduler that keeps MPI's call order the same on every rank.

A collective is a generator. It yields ``ISSUE`` to ask for permission to start its next MPI collective, and
receives the communicator for that stage (each stage index has its own duplicated communicator); then it yields a
list of pending MPI requests and OpenCL events, and resumes when they have all completed. Point-to-point ops
yield only pending lists.

MPI demands that the collectives of one communicator start in the same order on every rank. Several async works
may be in flight, each with several stages (header exchange, reduce-scatter, all-gather...), and when a stage
starts depends on timing. The rule that makes the order rank-independent: a work may start its stage ``s`` only
after every earlier live work of its group has started its own stage ``s`` (or finished). Works are created in
program order, identical on every rank, so each stage communicator sees the works in creation order.
"""
import time

from ._types import DistBackendError
from ._watch import all_done, idle, timeout_message

__all__ = ["Work", "ISSUE", "run_now"]

ISSUE = object()


class Work:
    """The handle of an ``async_op=True`` collective (PyTorch's ``Work``).

    ``wait(timeout=None)`` blocks until it completes (and for device tensors, until the result is back on the
    device), raising DistBackendError on timeout or peer failure; ``is_completed()`` polls without blocking;
    ``is_success()``, ``exception()``, ``result()`` (the output tensors), ``source_rank()`` (for a recv from any
    source). ``synchronize()`` is ``wait()``.
    """

    def __init__(self, pg, name, gen, outputs=(), deadline=None, opcode=0, ordered=True):
        self._pg = pg
        self._name = name
        self._gen = gen
        self._outputs = list(outputs)
        self._pending = None        # list awaited, or ISSUE
        self._stage = 0             # collective stages started
        self._done = False
        self._exc = None
        self._source = None
        self._t0 = time.monotonic()
        self._deadline = deadline if deadline is not None else self._t0 + pg.timeout_s
        self._opcode = opcode
        self._ordered = ordered     # collectives are ordered across works; point-to-point ops are not
        self.seq = pg._next_seq() if ordered else pg._next_p2p()
        pg._works.append(self)
        pg.watch.enter(pg.uid, self.seq, opcode)
        self._step(None)

    # ------------------------------------------------------------ driving
    def _step(self, value):
        try:
            self._pending = self._gen.send(value)
        except StopIteration as e:
            self._finish(None, e.value)
        except BaseException as e:                           # noqa: BLE001 - kept for wait()
            self._finish(e, None)

    def _finish(self, exc, value):
        self._done = True
        self._exc = exc
        if value is not None:
            self._source = value
        self._pending = None
        pg = self._pg
        try:
            pg._works.remove(self)
        except ValueError:
            pass
        if not pg._works:
            pg.watch.leave()

    def _may_issue(self):
        for w in self._pg._works:
            if w is self:
                return True
            if w._ordered and w._stage <= self._stage and not w._done:
                return False
        return True

    def _advance(self):
        """Progress without blocking; True when done."""
        while not self._done:
            p = self._pending
            if p is ISSUE:
                if not self._may_issue():
                    return False
                comm = self._pg._stage_comm(self._stage)
                self._stage += 1
                self._step(comm)
                continue
            try:
                ok = all_done(p)
            except BaseException as e:                       # noqa: BLE001
                self._finish(e, None)
                return True
            if not ok:
                return False
            self._step(None)
        return True

    # ------------------------------------------------------------ PyTorch's Work API
    def wait(self, timeout=None):
        """Blocks until done; returns True. ``timeout`` (timedelta or seconds) overrides the group's."""
        if timeout is not None:
            secs = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
            deadline = time.monotonic() + secs
        else:
            deadline = self._deadline
        pg = self._pg
        watch = pg.watch
        what = f"{self._name} (collective #{self.seq} of group {pg.uid})"
        t0 = time.monotonic()
        last = t0
        while True:
            for w in list(pg._works):        # earlier works must progress for this one's stages to start
                w._advance()
                if w is self:
                    break
            if self._done:
                break
            now = time.monotonic()
            if now - last > 0.2:
                last = now
                try:
                    watch.check(what)
                except DistBackendError as e:
                    self._finish(e, None)
                    break
            if now > deadline:
                self._finish(DistBackendError(timeout_message(watch, what, now - self._t0)), None)
                break
            idle(now - t0)
        if self._exc is not None:
            raise self._exc
        return True

    synchronize = wait

    def is_completed(self):
        for w in list(self._pg._works):
            w._advance()
            if w is self:
                break
        return self._done

    def is_success(self):
        if not self._done:
            raise RuntimeError("Work.is_success() called before the work completed")
        return self._exc is None

    def exception(self):
        return self._exc

    def result(self):
        return self._outputs

    def source_rank(self):
        if self._source is None:
            raise RuntimeError("source_rank() is only available for a completed recv from any source")
        return self._source

    def __repr__(self):
        return f"<cltorch.distributed.Work {self._name} #{self.seq} {'done' if self._done else 'pending'}>"


def run_now(work, async_op):
    """Returns the Work for async_op, else waits and returns None (PyTorch's convention)."""
    if async_op:
        return work
    work.wait()
    return None
