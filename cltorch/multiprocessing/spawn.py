"""``spawn`` / ``start_processes``: run ``fn(i, *args)`` in ``nprocs`` processes, with PyTorch's signature.

A child that raises has its traceback written to a private file; the parent's :meth:`ProcessContext.join`
raises :class:`ProcessRaisedException` carrying that text, or :class:`ProcessExitedException` for a child
that died without raising (a signal, ``os._exit``). The first failure terminates the other children
(SIGTERM, then SIGKILL after a grace period), as PyTorch does.
"""
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import tempfile
import time
import traceback

__all__ = ["spawn", "start_processes", "ProcessContext", "SpawnContext", "ProcessException",
           "ProcessRaisedException", "ProcessExitedException"]

_TERMINATE_GRACE = 30.0   # seconds children get to exit after SIGTERM before SIGKILL


class ProcessException(Exception):
    """A child started by :func:`start_processes` failed. ``error_index``: its index ``i``; ``pid``: its pid."""

    __slots__ = ["error_index", "error_pid"]

    def __init__(self, msg: str, error_index: int, pid: int):
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.pid = pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """A child raised an exception; the message ends with the child's formatted traceback."""

    def __init__(self, msg: str, error_index: int, error_pid: int):
        super().__init__(msg, error_index, error_pid)


class ProcessExitedException(ProcessException):
    """A child exited without raising: killed by ``signal_name``, or with a nonzero ``exit_code``."""

    __slots__ = ["exit_code"]

    def __init__(self, msg: str, error_index: int, error_pid: int, exit_code: int, signal_name=None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code, self.signal_name)


def _wrap(fn, i, args, error_file):
    """The child's entry point: runs ``fn(i, *args)``; an exception's traceback goes to ``error_file``."""
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass  # the parent terminated us (SIGINT): nothing to report
    except Exception:
        with open(error_file, "wb") as f:
            pickle.dump(traceback.format_exc(), f)
        sys.exit(1)


class ProcessContext:
    """The children of one :func:`start_processes` call. ``processes``: the Process objects, in index order."""

    def __init__(self, processes, error_files):
        self.error_files = error_files
        self.processes = processes
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self):
        return [int(p.pid) for p in self.processes]

    def join(self, timeout=None, grace_period=None):
        """Waits up to ``timeout`` seconds (None: forever) for a child to end.

        Returns True when every child has ended successfully, False while some still run. Raises
        ProcessRaisedException (with the child's traceback) or ProcessExitedException for the first child
        that failed, after terminating the others (SIGTERM, then SIGKILL after ``grace_period`` seconds).
        """
        if not self.sentinels:
            return True
        ready = multiprocessing.connection.wait(self.sentinels.keys(), timeout=timeout)
        error_index = None
        for sentinel in ready:
            index = self.sentinels.pop(sentinel)
            p = self.processes[index]
            p.join()
            if p.exitcode != 0 and error_index is None:
                error_index = index
        if error_index is None:
            return not self.sentinels
        self._terminate_rest(_TERMINATE_GRACE if grace_period is None else grace_period)
        p = self.processes[error_index]
        error_file = self.error_files[error_index]
        if not os.path.exists(error_file) or os.path.getsize(error_file) == 0:
            code = p.exitcode
            if code < 0:
                name = signal.Signals(-code).name
                raise ProcessExitedException(f"process {error_index} terminated with signal {name}",
                                             error_index, p.pid, code, name)
            raise ProcessExitedException(f"process {error_index} terminated with exit code {code}",
                                         error_index, p.pid, code)
        with open(error_file, "rb") as f:
            original = pickle.load(f)
        msg = f"\n\n-- Process {error_index} terminated with the following error:\n{original}"
        raise ProcessRaisedException(msg, error_index, p.pid)

    def _terminate_rest(self, grace):
        for p in self.processes:
            if p.is_alive():
                p.terminate()
        deadline = time.monotonic() + grace
        for p in self.processes:
            p.join(max(deadline - time.monotonic(), 0))
        for p in self.processes:
            if p.is_alive():
                p.kill()
                p.join()


class SpawnContext(ProcessContext):
    """What :func:`spawn` returns with ``join=False`` (PyTorch keeps this name for compatibility)."""


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Starts ``nprocs`` processes running ``fn(i, *args)`` for ``i`` in ``range(nprocs)``.

    Args:
        fn: a picklable (module-level) function; its first argument is the process index.
        args: further arguments (cpu tensors among them arrive shared, not copied).
        nprocs: how many processes.
        join: wait for all of them (True) or return the :class:`ProcessContext` at once (False).
        daemon: the children's ``daemon`` flag.
        start_method: ``"spawn"`` (PyTorch's default), ``"forkserver"`` or ``"fork"``. A forked child of a
            process that used OpenCL raises RuntimeError at its first OpenCL use (it would hang otherwise).

    Returns None when ``join`` is True, else the ProcessContext. Raises ProcessRaisedException /
    ProcessExitedException when a child fails (see :meth:`ProcessContext.join`).
    """
    from . import _configure_forkserver
    ctx = multiprocessing.get_context(start_method)
    if start_method == "forkserver":
        _configure_forkserver(ctx)
    error_files, processes = [], []
    for i in range(nprocs):
        fd, error_file = tempfile.mkstemp(prefix="cltorch_spawn_")
        os.close(fd)            # stays empty unless the child has an error to report
        error_files.append(error_file)
        p = ctx.Process(target=_wrap, args=(fn, i, args, error_file), daemon=daemon)
        p.start()
        processes.append(p)
    context = ProcessContext(processes, error_files)
    if not join:
        return context
    try:
        while not context.join():
            pass
    finally:
        for f in error_files:
            try:
                os.unlink(f)
            except FileNotFoundError:
                pass


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """:func:`start_processes` with PyTorch's ``spawn`` signature (``start_method="spawn"`` by default)."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)
