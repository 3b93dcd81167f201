"""The DataLoader worker process: its loop, ``get_worker_info``, seeding, and exception transport."""
import queue
import random
import signal
import sys
import traceback

from . import _pickle

__all__ = ["WorkerInfo", "get_worker_info", "ExceptionWrapper"]

# Seconds between checks that the main process is still alive while a worker waits for work.
MP_STATUS_CHECK_INTERVAL = 2.0


class WorkerInfo:
    """What :func:`get_worker_info` returns inside a worker: ``id``, ``num_workers``, ``seed``, ``dataset``.

    ``seed`` is ``base_seed + id``; ``dataset`` is this worker's own copy of the dataset. Read-only.
    """

    __initialized = False

    def __init__(self, **kwargs):
        for k, v in kwargs.items():
            setattr(self, k, v)
        self.__keys = tuple(kwargs.keys())
        self.__initialized = True

    def __setattr__(self, key, val):
        if self.__initialized:
            raise RuntimeError(f"Cannot assign attributes to {self.__class__.__name__} objects")
        return super().__setattr__(key, val)

    def __repr__(self):
        items = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__keys)
        return f"{self.__class__.__name__}({items})"


_worker_info = None


def get_worker_info():
    """In a DataLoader worker: its :class:`WorkerInfo` (``id``, ``num_workers``, ``seed``, ``dataset``).
    In the main process: ``None``.

    Use it in an :class:`IterableDataset`'s ``__iter__`` to give each worker its own shard (otherwise every
    worker yields the whole dataset), or in ``worker_init_fn`` to configure the worker's dataset copy.
    """
    return _worker_info


class KeyErrorMessage(str):
    """A str whose repr is itself, so a re-raised KeyError shows the worker's traceback readably."""

    def __repr__(self):
        return self


class ExceptionWrapper:
    """An exception caught in a worker (or the pin thread), carried to the main process with its traceback.

    :meth:`reraise` raises an exception of the same type whose message is
    ``"Caught <Type> in DataLoader worker process <id>.\\nOriginal Traceback (most recent call last): ..."``;
    when the type cannot be rebuilt from one message argument, a RuntimeError with that message.
    """

    def __init__(self, exc_info=None, where="in background"):
        if exc_info is None:
            exc_info = sys.exc_info()
        self.exc_type = exc_info[0]
        self.exc_name = exc_info[0].__name__
        self.exc_msg = "".join(traceback.format_exception(*exc_info))
        self.where = where

    def __reduce__(self):
        exc_type = self.exc_type
        # the batch pickler sends a class of the script's __main__ by its name; anything else must pickle here
        if exc_type.__module__ != "__main__" or "<locals>" in exc_type.__qualname__:
            try:
                import pickle
                pickle.dumps(exc_type)
            except Exception:
                exc_type = None
        return (_rebuild_wrapper, (exc_type, self.exc_name, self.exc_msg, self.where))

    def reraise(self):
        msg = f"Caught {self.exc_name} {self.where}.\nOriginal {self.exc_msg}"
        exc_type = self.exc_type
        if exc_type is None:
            raise RuntimeError(msg)
        if exc_type is KeyError:
            msg = KeyErrorMessage(msg)
        try:
            exc = exc_type(msg)
        except Exception:
            raise RuntimeError(msg) from None
        raise exc


def _rebuild_wrapper(exc_type, exc_name, exc_msg, where):
    w = ExceptionWrapper.__new__(ExceptionWrapper)
    w.exc_type, w.exc_name, w.exc_msg, w.where = exc_type, exc_name, exc_msg, where
    return w


class _WorkerReady:
    """First message of a worker: it has mapped the dataset (the main process may unlink its segments)."""

    def __init__(self, worker_id):
        self.worker_id = worker_id


class _IterableDatasetStopIteration:
    """A worker's IterableDataset is exhausted."""

    def __init__(self, worker_id):
        self.worker_id = worker_id


class _ResumeIteration:
    """Sent to persistent workers at the start of a new epoch: restart the dataset iterator."""

    def __init__(self, generation):
        self.generation = generation


def _numpy_seed(base_seed, worker_id):
    """numpy's global seed for a worker, mixed from base_seed and worker_id with numpy's SeedSequence."""
    import numpy as np
    entropy = [worker_id, base_seed & 0xFFFFFFFF, (base_seed >> 32) & 0xFFFFFFFF]
    return np.random.SeedSequence(entropy).generate_state(4)


def _seed_worker(seed, base_seed, worker_id):
    random.seed(seed)
    import cltorch
    cltorch.manual_seed(seed)
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        return
    np.random.seed(_numpy_seed(base_seed, worker_id))


def _worker_loop(payload, pickled, index_queue, result_conn, worker_id, num_workers, base_seed, prefix):
    """Runs in the worker process until it receives ``None`` or its parent dies.

    ``payload`` is ``(dataset_kind, dataset, auto_collation, collate_fn, drop_last, worker_init_fn)``, as
    bytes from :func:`_pickle.dumps_dataset` when ``pickled`` (spawn/forkserver: the process was started by
    ``_start`` without the user's ``__main__``, and what was defined there arrives by value), else the objects
    (fork).
    Tasks are ``(generation, index, sampler indices, names of segments handed back)``; messages to the main
    process are ``(generation, index, data)`` pickled by :func:`_pickle.dumps_batch`. Batch segments are
    named ``<prefix>w<worker_id>_<n>``.
    """
    global _worker_info
    from multiprocessing import parent_process
    from .dataloader import _DatasetKind

    # Ctrl-C reaches the whole process group; the main process handles it and shuts the workers down.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = parent_process()

    def send(msg):
        try:
            data = _pickle.dumps_batch(msg)
        except Exception:
            data = _pickle.dumps_batch((msg[0], msg[1], ExceptionWrapper(
                where=f"in DataLoader worker process {worker_id} while sending a batch to the main process")))
        try:
            result_conn.send_bytes(data)
        except (BrokenPipeError, ConnectionResetError, EOFError):
            return False
        return True

    _pickle.set_batch_prefix(f"{prefix}w{worker_id}_", owner=(prefix, worker_id))
    seed = base_seed + worker_id
    try:
        _seed_worker(seed, base_seed, worker_id)
        if pickled:
            payload = _pickle.loads(payload)
        dataset_kind, dataset, auto_collation, collate_fn, drop_last, worker_init_fn = payload
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
        if not send((None, None, _WorkerReady(worker_id))):
            return
        if worker_init_fn is not None:
            worker_init_fn(worker_id)
        fetcher = _DatasetKind.create_fetcher(dataset_kind, dataset, auto_collation, collate_fn, drop_last)
    except Exception:
        send((None, None, ExceptionWrapper(where=f"in DataLoader worker process {worker_id} while starting")))
        return

    iteration_end = False
    pending_error = None
    while True:
        try:
            r = index_queue.get(timeout=MP_STATUS_CHECK_INTERVAL)
        except queue.Empty:
            if parent is not None and not parent.is_alive():
                break
            continue
        except (EOFError, OSError):  # the main process is gone
            break
        if r is None:  # shutdown
            break
        if isinstance(r, _ResumeIteration):
            iteration_end = False
            try:
                fetcher = _DatasetKind.create_fetcher(dataset_kind, dataset, auto_collation, collate_fn, drop_last)
            except Exception:  # e.g. iter(dataset) failed: report it with the next batch
                pending_error = ExceptionWrapper(where=f"in DataLoader worker process {worker_id}")
            continue
        gen, idx, index, returned = r
        if returned:
            _pickle.release(returned)
        if pending_error is not None:
            data, pending_error = pending_error, None
        elif iteration_end:
            data = _IterableDatasetStopIteration(worker_id)
        else:
            try:
                data = fetcher.fetch(index)
            except StopIteration:
                if dataset_kind != _DatasetKind.Iterable:
                    data = ExceptionWrapper(where=f"in DataLoader worker process {worker_id}")
                else:
                    data = _IterableDatasetStopIteration(worker_id)
                    iteration_end = True
            except Exception:
                data = ExceptionWrapper(where=f"in DataLoader worker process {worker_id}")
                _pickle.discard_batch_segments()
        ok = send((gen, idx, data))
        del data
        if not ok:
            break
    _pickle.unlink_all()
    try:
        result_conn.close()
    except OSError:
        pass
