"""DataLoader worker processes that start without running the user's ``__main__``.

Why a worker would run it: the ``spawn`` and ``forkserver`` start methods send each child multiprocessing's
"preparation data" before the pickled process object. It names the parent's main module (key
``init_main_from_path`` for a script, ``init_main_from_name`` for ``python -m``), and the child executes that
module's top level as ``__mp_main__`` before it unpickles anything, so that objects pickled by reference to
``__main__`` can be found. In a script without an ``if __name__ == "__main__":`` guard that top level builds
the DataLoader and iterates it again, inside the worker; multiprocessing stops the nested start with
"An attempt has been made to start a new process before the current process has finished its bootstrapping
phase", and the worker dies with exit code 1 before it can report anything.

A DataLoader worker needs nothing from ``__main__``: what the dataset, ``collate_fn`` and ``worker_init_fn``
define there is pickled by value (see ``_pickle.dumps_dataset``). So the processes made here send the
preparation data without those two keys, and everything else (sys.path, working directory, argv, authkey,
logging, start method) as multiprocessing sends it. Each worker is then a clean process: the fork server's
preloaded cltorch, plus what the payload imports.

Mechanism: multiprocessing builds the data in ``multiprocessing.spawn.get_preparation_data``, which every
Popen of spawn and forkserver calls while it starts a child. It is wrapped once; the wrapper drops the main
module's keys only while this module starts a worker in the same thread, and is a plain pass-through for any
other process started by anyone else.
"""
import threading
from contextlib import contextmanager
from multiprocessing import context, forkserver, popen_forkserver, spawn

__all__ = ["worker_process"]

_MAIN_KEYS = ("init_main_from_path", "init_main_from_name")
_state = threading.local()
_install_lock = threading.Lock()
_installed = []


def _install():
    with _install_lock:
        if _installed:
            return
        original = spawn.get_preparation_data

        def get_preparation_data(name):
            data = original(name)
            if getattr(_state, "omit_main", False):
                for key in _MAIN_KEYS:
                    data.pop(key, None)
            return data

        get_preparation_data.__doc__ = original.__doc__
        spawn.get_preparation_data = get_preparation_data
        _installed.append(original)


@contextmanager
def _without_main():
    _install()
    _state.omit_main = True
    try:
        yield
    finally:
        _state.omit_main = False


class _ForkServerPopen(popen_forkserver.Popen):
    def _launch(self, process_obj):
        # Starting the server reads the preparation data too (for a preload list that names __main__): not here.
        forkserver.ensure_running()
        with _without_main():
            super()._launch(process_obj)


class _ForkServerProcess(context.ForkServerProcess):
    @staticmethod
    def _Popen(process_obj):
        return _ForkServerPopen(process_obj)


_PROCESS_CLASSES = {"forkserver": _ForkServerProcess}

try:
    from multiprocessing import popen_spawn_posix
except ImportError:  # pragma: no cover - Windows (no POSIX shared memory: no workers there)
    popen_spawn_posix = None
else:
    class _SpawnPopen(popen_spawn_posix.Popen):
        def _launch(self, process_obj):
            with _without_main():
                super()._launch(process_obj)

    class _SpawnProcess(context.SpawnProcess):
        @staticmethod
        def _Popen(process_obj):
            return _SpawnPopen(process_obj)

    _PROCESS_CLASSES["spawn"] = _SpawnProcess


def worker_process(ctx, **kwargs):
    """A ``Process(**kwargs)`` of start method ``ctx``: for spawn and forkserver one whose child does not run the
    parent's ``__main__``; for fork (whose child inherits everything) ``ctx.Process`` itself."""
    cls = _PROCESS_CLASSES.get(ctx.get_start_method())
    if cls is None:
        return ctx.Process(**kwargs)
    return cls(**kwargs)
