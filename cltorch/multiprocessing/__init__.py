"""``cltorch.multiprocessing``: Python's ``multiprocessing`` with cpu tensors shared, not copied.

Mirrors ``torch.multiprocessing``: every name of ``multiprocessing`` (``Process``, ``Queue``,
``SimpleQueue``, ``Pipe``, ``Pool``, ``Manager``, ``get_context``, ``set_start_method``,
``get_start_method``, ...) plus ``spawn``/``start_processes`` (:mod:`.spawn`) and the sharing strategies.
Importing it (``import cltorch`` does) registers the reductions of :mod:`.reductions`: a cpu tensor sent
to another process (``Process`` arguments, queues, pipes, pools) moves into shared memory and arrives as
a view of the same pages, so ``model.share_memory()`` plus ``Process(target=train, args=(model,))`` is
Hogwild training, as in PyTorch. Device (``cl:N``) tensors cannot be shared and raise RuntimeError.

**Default start method: ``forkserver``** (``spawn`` where the platform lacks it), where PyTorch on Linux
uses ``fork``. A child forked from a process that has used OpenCL hangs on PoCL (DESIGN decision 3), and
every cpu op beyond small exact arithmetic runs on the OpenCL CPU device, so a forked Hogwild child
could not train. The fork server is started with cltorch preloaded and without the user's ``__main__``
(as the DataLoader's): a child starts in a fraction of a second and opens its own OpenCL context. As
with ``spawn`` in PyTorch, the script needs the ``if __name__ == "__main__":`` guard, and targets must
be picklable (module-level functions). ``set_start_method("fork")`` is allowed: a forked child that then
touches OpenCL raises RuntimeError naming the cause, instead of hanging. The start method set here is
this module's own; Python's ``multiprocessing`` keeps its default.
"""
import multiprocessing
import multiprocessing.context as _mpc
import multiprocessing.process as _mpp

from .. import _shm
from .reductions import init_reductions
from .spawn import (ProcessContext, ProcessException, ProcessExitedException, ProcessRaisedException,  # noqa
                    SpawnContext, spawn, start_processes)


def _configure_forkserver(ctx, preload=("cltorch",)):
    """Preloads ``preload`` (cltorch by default: imports only, no OpenCL) in the fork server instead of the
    user's ``__main__``, so the server never runs user code that might use OpenCL (its forked children would
    hang on PoCL) and a child starts in milliseconds instead of re-importing numpy, pyopencl and cltorch.
    Left alone when the server already runs or the user set a preload list."""
    try:
        from multiprocessing import forkserver
        server = forkserver._forkserver
        if getattr(server, "_forkserver_pid", None) is None and \
                getattr(server, "_preload_modules", None) == ["__main__"]:
            ctx.set_forkserver_preload(list(preload))
    except (ImportError, AttributeError):  # pragma: no cover
        pass


def _initial_method():
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


class Process(_mpp.BaseProcess):
    """``multiprocessing.Process`` started with this module's start method (forkserver unless set)."""

    _start_method = None

    @staticmethod
    def _Popen(process_obj):
        ctx = _default_context.get_context()
        if getattr(ctx, "_name", None) == "forkserver":
            _configure_forkserver(ctx)
        return ctx.Process._Popen(process_obj)

    @staticmethod
    def _after_fork():
        return _default_context.get_context().Process._after_fork()


class _DefaultContext(_mpc.DefaultContext):
    Process = Process

    def get_context(self, method=None):
        ctx = super().get_context(method)
        if method == "forkserver":
            _configure_forkserver(ctx)
        return ctx


_default_context = _DefaultContext(_mpc._concrete_contexts[_initial_method()])

_names = [n for n in dir(_default_context) if not n.startswith("_")]
globals().update((n, getattr(_default_context, n)) for n in _names)

# re-exported for PyTorch's names: what multiprocessing's package has beyond the context's methods
from multiprocessing import (AuthenticationError, BufferTooShort, ProcessError, TimeoutError)  # noqa: E402,F401


def set_sharing_strategy(new_strategy):
    """Sets how cpu tensors are shared from now on: ``"file_descriptor"`` (default: anonymous memory passed
    as a descriptor, freed with its last user) or ``"file_system"`` (a named /dev/shm segment, unlinked when
    the sharing process drops it). Raises ValueError for another name."""
    _shm.set_sharing_strategy(new_strategy)


def get_sharing_strategy():
    """The current sharing strategy (``"file_descriptor"`` unless set)."""
    return _shm.sharing_strategy()


def get_all_sharing_strategies():
    """The strategies this platform supports."""
    return set(_shm.STRATEGIES)


init_reductions()

__all__ = sorted(set(_names) | {"Process", "AuthenticationError", "BufferTooShort", "ProcessError", "TimeoutError",
                                "spawn", "start_processes", "ProcessContext", "SpawnContext", "ProcessException",
                                "ProcessRaisedException", "ProcessExitedException", "set_sharing_strategy",
                                "get_sharing_strategy", "get_all_sharing_strategies", "init_reductions"})
