"""DataLoader: batches from a dataset, in the main process or in worker processes over shared memory.

Mirrors ``torch.utils.data.DataLoader``'s signature, argument errors, ``len()`` rules and iteration
semantics. The worker machinery is cltorch's own; see :class:`DataLoader` for how it differs inside.
"""
import itertools
import math
import multiprocessing as mp
import multiprocessing.connection as mp_connection
import os
import queue
import signal
import threading
import time
import warnings
import weakref

import cltorch
from ...multiprocessing import _configure_forkserver

from . import _pickle, _shm, _start
from ._collate import default_collate, default_convert
from ._pin import pin_memory as _pin_memory
from ._worker import (MP_STATUS_CHECK_INTERVAL, ExceptionWrapper, _IterableDatasetStopIteration,
                      _ResumeIteration, _WorkerReady, _worker_loop)
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader", "default_collate", "default_convert"]

# Seconds a worker gets to leave by itself at shutdown before it is terminated.
_SHUTDOWN_GRACE = 1.0


class _DatasetKind:
    Map = 0
    Iterable = 1

    @staticmethod
    def create_fetcher(kind, dataset, auto_collation, collate_fn, drop_last):
        if kind == _DatasetKind.Map:
            return _MapDatasetFetcher(dataset, auto_collation, collate_fn, drop_last)
        return _IterableDatasetFetcher(dataset, auto_collation, collate_fn, drop_last)


class _MapDatasetFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset, self.auto_collation, self.collate_fn, self.drop_last = (dataset, auto_collation,
                                                                              collate_fn, drop_last)
        getitems = getattr(dataset, "__getitems__", None)
        self._getitems = getitems if callable(getitems) else None

    def fetch(self, possibly_batched_index):
        if self.auto_collation:
            if self._getitems is not None:
                data = self._getitems(possibly_batched_index)
            else:
                ds = self.dataset
                data = [ds[i] for i in possibly_batched_index]
        else:
            data = self.dataset[possibly_batched_index]
        return self.collate_fn(data)


class _IterableDatasetFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset, self.auto_collation, self.collate_fn, self.drop_last = (dataset, auto_collation,
                                                                              collate_fn, drop_last)
        self.dataset_iter = iter(dataset)
        self.ended = False

    def fetch(self, possibly_batched_index):
        if self.ended:
            raise StopIteration
        if self.auto_collation:
            data = []
            for _ in possibly_batched_index:
                try:
                    data.append(next(self.dataset_iter))
                except StopIteration:
                    self.ended = True
                    break
            if len(data) == 0 or (self.drop_last and len(data) < len(possibly_batched_index)):
                raise StopIteration
        else:
            data = next(self.dataset_iter)
        return self.collate_fn(data)


class _InfiniteConstantSampler(Sampler):
    """The sampler of an IterableDataset: ``None`` forever (the dataset decides when to stop)."""

    def __iter__(self):
        while True:
            yield None


def _default_context():
    """forkserver where the platform has it, else spawn (never fork: see the DataLoader docstring)."""
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        _configure_forkserver(ctx, preload=("cltorch", "cltorch.utils.data"))
        return ctx
    return mp.get_context("spawn")


class DataLoader:
    r"""Iterates over a dataset in batches, in the main process or in ``num_workers`` worker processes.

    Arguments (PyTorch's): ``dataset``, ``batch_size=1``, ``shuffle=None``, ``sampler``, ``batch_sampler``,
    ``num_workers=0``, ``collate_fn`` (default :func:`default_collate`, or :func:`default_convert` when
    ``batch_size=None``), ``pin_memory=False``, ``drop_last=False``, ``timeout=0``, ``worker_init_fn``,
    ``multiprocessing_context``, ``generator``, and keyword-only ``prefetch_factor`` (2 per worker when
    ``num_workers > 0``), ``persistent_workers=False``, ``pin_memory_device=""`` (accepted, unused: the
    pinned batch goes to any device), ``in_order=True``.

    Raises PyTorch's ValueError for invalid combinations: ``batch_sampler`` with ``batch_size``,
    ``shuffle``, ``sampler`` or ``drop_last``; ``sampler`` with ``shuffle``; ``batch_size=None`` with
    ``drop_last``; any sampler or shuffle with an IterableDataset; ``prefetch_factor`` or
    ``persistent_workers`` or ``multiprocessing_context`` without workers; negative ``num_workers``,
    ``timeout`` or ``prefetch_factor``; and an unknown start method.

    ``len(loader)`` is ``len(batch_sampler)`` (``ceil(n / batch_size)``, or ``n // batch_size`` with
    ``drop_last``), ``len(sampler)`` without batching, and for an IterableDataset ``len(dataset)`` divided
    the same way (a warning follows if more batches than that arrive).

    **Workers.** Each worker is a process with its own copy of the dataset; batch ``i`` goes to worker
    ``i % num_workers`` and batches are returned in sampler order (``in_order=True``) whichever worker
    finishes first; ``in_order=False`` returns them as they come. Inside a worker,
    :func:`get_worker_info` gives ``id``, ``num_workers``, ``seed`` and ``dataset``, and Python's
    ``random``, cltorch's global generator and numpy's global generator are seeded from
    ``base_seed + id`` (``base_seed`` is drawn from ``generator`` or the global generator per iterator).
    An :class:`IterableDataset` yields its data once per worker unless it shards itself with
    ``get_worker_info()``.

    Batches come back through POSIX shared memory: ``default_collate`` stacks each batch directly into a
    shared segment, the worker sends only the segment's name, and the main process maps it and wraps it
    with ``cltorch.from_numpy`` (zero copies on the way back, nothing unpickled element by element).
    The dataset's large arrays and cpu tensors go to the workers the same way, mapped copy-on-write.
    Segments are unlinked as soon as they are mapped, so none outlives its tensors, and an iterator that
    ends, breaks, raises or is garbage-collected also sweeps any segment a dying worker left behind.

    An exception in a worker is re-raised in the main process with the worker's id and traceback. A
    worker that dies (killed by a signal, ``os._exit``, out of memory) raises a RuntimeError naming the
    worker, its pid, exit code and what that code suggests (only SIGKILL points at the out-of-memory
    killer) as soon as the main process waits for data (each wait watches the
    workers' process sentinels, so there is no polling delay). ``timeout > 0`` raises RuntimeError when
    no batch arrives within that many seconds.

    **Start method (DESIGN decision 3), chosen by measurement.** On PoCL, OpenCL in a child forked from a
    process that used OpenCL hangs, so the two candidates were (a) workers started clean, by
    ``forkserver`` (``spawn`` where forkserver is missing), each opening its own OpenCL context when it
    first computes, and (b) ``fork``-started workers in which cpu tensor ops take a host (numpy) path.
    (a) is the default. Measured on the 2-core PoCL machine (``benchmarks/bench_dataloader.py
    --startup``), the first batch of a fresh 2-worker iterator arrives after 0.04-0.10 s with fork,
    0.11-0.34 s with forkserver and 1.9-2.5 s with spawn; the fork server itself starts once per process
    (~2.3 s: it imports cltorch, never the user's ``__main__``, so user code that touches OpenCL at
    import time cannot poison it). When ``__getitem__`` does tensor arithmetic, each worker's first op adds
    its OpenCL context and two program loads from the on-disk kernel cache (0 builds): +0.6-1.1 s to
    the first batch. ``persistent_workers=True`` pays that once per loader; the next epoch's first batch
    then takes 0.01-0.25 s. (Ranges: repeated runs on a shared, loaded machine.) (b) would save those start-up costs, but it needs a host implementation of
    every op a transform may call, which cltorch does not have: any op without one would hang or raise in
    a forked worker, while a clean worker runs every op. Every cpu op that runs on OpenCL pays a kernel
    launch and a queue sync (0.1-0.5 ms each on PoCL, against about 21 us per sample for torch's whole
    DataLoader here). So in a transform prefer numpy, or few large tensor ops. Indexing, views and
    collation never touch OpenCL in a worker.

    **No ``if __name__ == "__main__":`` guard needed.** A worker never imports or runs the user's
    ``__main__`` (spawn and forkserver would run a script's top level again in each child: see ``_start``).
    The dataset, ``collate_fn`` and ``worker_init_fn`` go to the workers through cloudpickle: what is defined
    in ``__main__`` (a script's body, a notebook, ``python -c``), lambdas, closures and local classes travel
    by value with the globals they use; what lives in an importable module travels by reference. A batch
    may hold instances of classes of the script's ``__main__``; they are rebuilt with the main process's
    class. What cannot be pickled at all (a lock, a socket, an open connection) raises the pickling error's
    type, naming the object's path (e.g. ``dataset.conn``) and the fix, before any worker starts. With
    ``multiprocessing_context="fork"`` pure data loading works, and a dataset that computes on cpu tensors
    gets cltorch's RuntimeError about OpenCL in a forked child, re-raised here with the worker's traceback,
    instead of a hang.

    ``pin_memory=True`` runs a thread that receives the batches and copies them with
    ``Tensor.pin_memory()`` into page-locked OpenCL host buffers (``CL_MEM_ALLOC_HOST_PTR``), so
    ``batch.to(device, non_blocking=True)`` is a DMA enqueue. Objects with their own ``pin_memory()``
    method are pinned with it.
    """

    __initialized = False

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None,
                 persistent_workers=False, pin_memory_device="", in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; "
                             "use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing."
                             "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None.")
        elif num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")

        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order

        if isinstance(dataset, IterableDataset):
            self._dataset_kind = _DatasetKind.Iterable
            if shuffle not in {False, None}:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, "
                                 f"but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, "
                                 f"but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        else:
            shuffle = bool(shuffle)
            self._dataset_kind = _DatasetKind.Map

        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, "
                                 "sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive "
                             "with drop_last")

        if sampler is None:
            if self._dataset_kind == _DatasetKind.Iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self.__initialized = True
        self._IterableDataset_len_called = None
        self._iterator = None
        self.check_worker_number_rationality()

    @property
    def multiprocessing_context(self):
        return self.__multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, multiprocessing_context):
        if multiprocessing_context is not None:
            if self.num_workers > 0:
                if isinstance(multiprocessing_context, str):
                    valid = mp.get_all_start_methods()
                    if multiprocessing_context not in valid:
                        raise ValueError("multiprocessing_context option should specify a valid start method "
                                         f"in {valid!r}, but got multiprocessing_context={multiprocessing_context!r}")
                    multiprocessing_context = mp.get_context(multiprocessing_context)
                if not isinstance(multiprocessing_context, mp.context.BaseContext):
                    raise TypeError("multiprocessing_context option should be a valid context object or a string "
                                    "specifying the start method, but got "
                                    f"multiprocessing_context={multiprocessing_context}")
            else:
                raise ValueError("multiprocessing_context can only be used with multi-process loading "
                                 f"(num_workers > 0), but got num_workers={self.num_workers}")
        self.__multiprocessing_context = multiprocessing_context

    def __setattr__(self, attr, val):
        if self.__initialized and attr in ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
                                           "persistent_workers"):
            raise ValueError(f"{attr} attribute should not be set after {self.__class__.__name__} is initialized")
        super().__setattr__(attr, val)

    def _get_iterator(self):
        if self.num_workers == 0:
            return _SingleProcessDataLoaderIter(self)
        self.check_worker_number_rationality()
        return _MultiProcessingDataLoaderIter(self)

    def __iter__(self):
        if self.persistent_workers and self.num_workers > 0:
            if self._iterator is None or self._iterator._res.shut:
                self._iterator = self._get_iterator()
            else:
                self._iterator._reset(self)
            return self._iterator
        return self._get_iterator()

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self):
        if self._dataset_kind == _DatasetKind.Iterable:
            length = self._IterableDataset_len_called = len(self.dataset)
            if self.batch_size is not None:
                length = length // self.batch_size if self.drop_last else math.ceil(length / self.batch_size)
            return length
        return len(self._index_sampler)

    def check_worker_number_rationality(self):
        """Warns when ``num_workers`` exceeds the CPUs this process may use (PyTorch's check)."""
        if self.num_workers <= 1:
            return
        try:
            cpus = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cpus = os.cpu_count()
        if cpus is not None and self.num_workers > cpus:
            warnings.warn(f"This DataLoader will create {self.num_workers} worker processes in total. Our "
                          f"suggested max number of worker in current system is {cpus}, which is smaller than what "
                          "this DataLoader is going to create. Please be aware that excessive worker creation might "
                          "get DataLoader running slow or even freeze, lower the worker number to avoid potential "
                          "slowness/freeze if necessary.", stacklevel=2)


class _BaseDataLoaderIter:
    def __init__(self, loader):
        self._dataset = loader.dataset
        self._dataset_kind = loader._dataset_kind
        self._IterableDataset_len_called = loader._IterableDataset_len_called
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._num_workers = loader.num_workers
        self._prefetch_factor = loader.prefetch_factor
        self._pin_memory = loader.pin_memory
        self._timeout = loader.timeout
        self._collate_fn = loader.collate_fn
        self._in_order = loader.in_order
        self._sampler_iter = iter(self._index_sampler)
        self._base_seed = int(cltorch.empty((), dtype=cltorch.int64).random_(generator=loader.generator).item()) \
            if loader.generator is not None else int(cltorch.empty((), dtype=cltorch.int64).random_().item())
        self._persistent_workers = loader.persistent_workers
        self._num_yielded = 0

    def __iter__(self):
        return self

    def _reset(self, loader, first_iter=False):
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0
        self._IterableDataset_len_called = loader._IterableDataset_len_called

    def _next_index(self):
        return next(self._sampler_iter)

    def _next_data(self):
        raise NotImplementedError

    def __next__(self):
        data = self._next_data()
        self._num_yielded += 1
        if self._dataset_kind == _DatasetKind.Iterable and self._IterableDataset_len_called is not None \
                and self._num_yielded > self._IterableDataset_len_called:
            msg = (f"Length of IterableDataset {self._dataset} was reported to be {self._IterableDataset_len_called}"
                   f"(when accessing len(dataloader)), but {self._num_yielded} samples have been fetched. ")
            if self._num_workers > 0:
                msg += ("For multiprocessing data-loading, this could be caused by not properly configuring the "
                        "IterableDataset replica at each worker (shard it with get_worker_info()).")
            warnings.warn(msg, stacklevel=2)
        return data

    def __len__(self):
        return len(self._index_sampler)

    def __getstate__(self):
        raise NotImplementedError(f"{self.__class__.__name__} cannot be pickled")


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    def __init__(self, loader):
        super().__init__(loader)
        assert self._timeout == 0
        assert self._num_workers == 0
        self._dataset_fetcher = _DatasetKind.create_fetcher(self._dataset_kind, self._dataset,
                                                            self._auto_collation, self._collate_fn, self._drop_last)

    def _next_data(self):
        index = self._next_index()
        data = self._dataset_fetcher.fetch(index)
        if self._pin_memory:
            data = _pin_memory(data)
        return data


# ------------------------------------------------------------------------------------------ multi-process
class _Fatal:
    """Carries an exception from the pin thread to the main thread, to be raised there as is."""

    def __init__(self, exc):
        self.exc = exc


def _exit_text(code):
    if code is None:
        return "an unknown exit code (it closed its pipe but is still running)"
    text = f"exit code {code}"
    if code < 0:
        try:
            text += f" (killed by signal {signal.Signals(-code).name})"
        except ValueError:
            text += f" (killed by signal {-code})"
    return text


def _exit_cause(code):
    """What a worker's exit status says about why it ended (a Python exception never gets here: the worker
    sends it, with its traceback, as an ExceptionWrapper)."""
    if code == -signal.SIGKILL:
        return ("SIGKILL is what the out-of-memory killer sends (the kernel log, `dmesg`, says so when it did): "
                "lower batch_size, prefetch_factor or num_workers, or keep less in the dataset; or something else "
                "killed the worker.")
    if code is not None and code < 0:
        return "A signal ended it: a crash in native code (SIGSEGV, SIGBUS, SIGABRT) or a kill from outside."
    if code is not None and code > 0:
        return ("It ended itself (sys.exit or os._exit in the dataset, collate_fn or worker_init_fn), or failed "
                "before it could report an error: any traceback it printed is on stderr above.")
    return "It left before it was asked to (code 0: sys.exit(0) or os._exit(0) in the dataset?)."


class _Workers:
    """The processes, pipes and shared-memory names of one multi-process iterator, and their cleanup.

    Kept apart from the iterator so that the pin thread and the GC finalizer hold no reference to it.
    """

    def __init__(self, num_workers, prefix):
        self.n = num_workers
        self.prefix = prefix            # names of batch segments made by this iterator's workers
        self.owned = []                 # dataset segments made by the main process
        self.procs = []
        self.index_queues = []
        self.readers = []
        self.gone = [False] * num_workers
        self.expected_exit = [False] * num_workers
        self.ready = 0
        self.shut = False
        self.pin_thread = None
        self.pin_done = threading.Event()
        self.pin_queue = None
        self._wake_r, self._wake_w = mp.Pipe(duplex=False)
        self._lock = threading.Lock()
        _pickle.register_returns(prefix, num_workers)

    # ---------------------------------------------------------------- receiving
    def recv(self, timeout):
        """The next message ``(worker_id, generation, index, data)``, or None when ``timeout`` (None:
        forever) passes or :meth:`wake` is called. Raises RuntimeError when a worker dies unexpectedly."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            watch = {self._wake_r: -1}
            for wid in range(self.n):
                if not self.gone[wid]:
                    watch[self.readers[wid]] = wid
                    watch[self.procs[wid].sentinel] = wid
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = mp_connection.wait(list(watch), remaining)
            if not ready:
                return None
            for obj in ready:
                if obj is self._wake_r:
                    while self._wake_r.poll():
                        self._wake_r.recv_bytes()
                    return None
            exited = []
            for obj in ready:
                wid = watch[obj]
                if isinstance(obj, int):
                    exited.append(wid)
                    continue
                try:
                    blob = obj.recv_bytes()
                except (EOFError, OSError):
                    self._on_exit(wid)
                    break
                gen, idx, data = _pickle.loads(blob)
                if isinstance(data, _WorkerReady):
                    self._on_ready()
                    break
                return wid, gen, idx, data
            else:
                for wid in exited:
                    if not self.gone[wid] and not self.readers[wid].poll(0):
                        self._on_exit(wid)

    def _on_ready(self):
        self.ready += 1
        if self.ready == self.n:  # every worker has mapped the dataset: drop the names now
            for name in self.owned:
                _shm.unlink(name)

    def _on_exit(self, wid):
        self.gone[wid] = True
        if self.expected_exit[wid]:
            return
        p = self.procs[wid]
        p.join(timeout=5.0)
        raise RuntimeError(f"DataLoader worker {wid} (pid {p.pid}) exited unexpectedly with "
                           f"{_exit_text(p.exitcode)}. {_exit_cause(p.exitcode)}")

    def wake(self):
        try:
            self._wake_w.send_bytes(b"w")
        except OSError:
            pass

    # ---------------------------------------------------------------- pin thread
    def pin_loop(self):
        done, out = self.pin_done, self.pin_queue
        while not done.is_set():
            try:
                item = self.recv(MP_STATUS_CHECK_INTERVAL)
            except BaseException as e:  # a worker died: hand the error to the main thread
                out.put(_Fatal(e))
                return
            if item is None:
                continue
            wid, gen, idx, data = item
            if not isinstance(data, (ExceptionWrapper, _IterableDatasetStopIteration)) and idx is not None:
                try:
                    data = _pin_memory(data)
                except Exception:
                    data = ExceptionWrapper(where="in pin memory thread")
            out.put((wid, gen, idx, data))

    # ---------------------------------------------------------------- shutdown
    def shutdown(self):
        """Stops the pin thread and every worker, then removes every name this iterator made. Idempotent."""
        with self._lock:
            if self.shut:
                return
            self.shut = True
        try:
            if self.pin_thread is not None:
                self.pin_done.set()
                self.wake()
                if self.pin_thread is not threading.current_thread():
                    self.pin_thread.join(timeout=MP_STATUS_CHECK_INTERVAL + 1.0)
            for wid, q in enumerate(self.index_queues):
                self.expected_exit[wid] = True
                if self.procs[wid].is_alive():
                    try:
                        q.put(None)
                    except (OSError, ValueError):
                        pass
            # Read (and so unlink) what the workers still send while they leave.
            deadline = time.monotonic() + _SHUTDOWN_GRACE
            while any(p.is_alive() for p in self.procs) and time.monotonic() < deadline:
                objs = [r for r in self.readers if not r.closed] + [p.sentinel for p in self.procs if p.is_alive()]
                ready = mp_connection.wait(objs, max(0.0, deadline - time.monotonic()))
                self._drain([r for r in ready if not isinstance(r, int)])
            for p in self.procs:
                if p.is_alive():
                    p.terminate()
            for p in self.procs:
                p.join(timeout=2.0)
                if p.is_alive():
                    p.kill()
                    p.join(timeout=2.0)
            self._drain(self.readers)
        finally:
            for q in self.index_queues:
                try:
                    q.cancel_join_thread()
                    q.close()
                except (OSError, ValueError):
                    pass
            for r in self.readers:
                r.close()
            for name in self.owned:
                _shm.unlink(name)
            _pickle.unregister_returns(self.prefix)
            _shm.sweep(self.prefix)
            for c in (self._wake_r, self._wake_w):
                c.close()
            for p in self.procs:
                try:
                    p.close()
                except ValueError:
                    pass

    @staticmethod
    def _drain(readers):
        for r in readers:
            try:
                while not r.closed and r.poll(0):
                    _pickle.loads(r.recv_bytes())  # maps and unlinks the segments; the data is dropped
            except (EOFError, OSError):
                pass
            except Exception:  # a message that cannot be rebuilt here (e.g. a class we cannot import)
                pass


def _raise_unpicklable(exc, method, dataset, collate_fn, worker_init_fn):
    """Re-raises ``exc`` (a failure to pickle the workers' payload) naming the part that cannot be pickled and
    the fix; same exception type where it takes one message, else the original with the text as a note."""
    found = _pickle.find_unpicklable([("dataset", dataset), ("collate_fn", collate_fn),
                                      ("worker_init_fn", worker_init_fn)])
    if found is None:    # not a pickling problem (e.g. no room for the shared-memory segments)
        raise exc
    path, obj, exc = found
    what = f"{path} (a {type(obj).__module__}.{type(obj).__qualname__})"
    msg = (f"DataLoader workers (started by {method}) receive the dataset, collate_fn and worker_init_fn pickled, "
           f"and {what} cannot be pickled: {type(exc).__name__}: {exc}. Keep such objects out of what the workers "
           "receive: open files, sockets, locks, connections and processes in the worker instead (lazily in "
           "__getitem__, or in worker_init_fn), or give the object's owner __getstate__/__setstate__ that drop "
           "and re-create them; or use num_workers=0.")
    try:
        new = type(exc)(msg)
    except Exception:  # noqa: BLE001 - a type that does not take one message
        exc.add_note(msg)
        raise exc from None
    raise new from exc


class _MultiProcessingDataLoaderIter(_BaseDataLoaderIter):
    def __init__(self, loader):
        super().__init__(loader)
        assert self._num_workers > 0
        assert self._prefetch_factor > 0
        ctx = loader.multiprocessing_context or _default_context()
        self._worker_init_fn = loader.worker_init_fn
        self._generation = 0
        res = self._res = _Workers(self._num_workers, _shm.new_prefix())
        self._finalizer = weakref.finalize(self, res.shutdown)
        payload = (self._dataset_kind, self._dataset, self._auto_collation, self._collate_fn, self._drop_last,
                   self._worker_init_fn)
        forked = ctx.get_start_method() == "fork"
        if not forked:
            try:
                payload, res.owned = _pickle.dumps_dataset(payload, res.prefix)
            except Exception as e:
                _raise_unpicklable(e, ctx.get_start_method(), self._dataset, self._collate_fn, self._worker_init_fn)
        try:
            for wid in range(self._num_workers):
                iq = ctx.Queue()
                iq.cancel_join_thread()
                reader, writer = ctx.Pipe(duplex=False)
                w = _start.worker_process(ctx, target=_worker_loop, name=f"cltorch DataLoader worker {wid}",
                                          args=(payload, not forked, iq, writer, wid, self._num_workers,
                                                self._base_seed, res.prefix))
                w.daemon = True
                w.start()
                writer.close()   # the worker holds the only write end: its death shows as EOF
                res.index_queues.append(iq)
                res.readers.append(reader)
                res.procs.append(w)
        except BaseException:
            res.shutdown()
            raise
        if self._pin_memory:
            res.pin_queue = queue.Queue()
            res.pin_thread = threading.Thread(target=res.pin_loop, name="cltorch DataLoader pin memory",
                                              daemon=True)
            res.pin_thread.start()
        self._reset(loader, first_iter=True)

    def _reset(self, loader, first_iter=False):
        super()._reset(loader, first_iter)
        self._send_idx = 0
        self._rcvd_idx = 0
        self._task_info = {}
        self._tasks_outstanding = 0
        self._workers_status = [True] * self._num_workers
        self._worker_tasks = [0] * self._num_workers
        self._worker_queue_idx_cycle = itertools.cycle(range(self._num_workers))
        if not first_iter:
            self._generation += 1
            for q in self._res.index_queues:
                q.put(_ResumeIteration(self._generation))
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    def _get_data(self):
        res = self._res
        if res.pin_thread is not None:
            while True:
                try:
                    item = res.pin_queue.get(timeout=self._timeout if self._timeout > 0 else MP_STATUS_CHECK_INTERVAL)
                except queue.Empty:
                    if self._timeout > 0:
                        raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds") from None
                    if not res.pin_thread.is_alive():
                        self._shutdown_workers()
                        raise RuntimeError("Pin memory thread exited unexpectedly") from None
                    continue
                if isinstance(item, _Fatal):
                    self._shutdown_workers()
                    raise item.exc
                return item
        try:
            item = res.recv(self._timeout if self._timeout > 0 else None)
        except RuntimeError:
            self._shutdown_workers()
            raise
        if item is None:
            raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")
        return item

    def _next_data(self):
        while True:
            while self._rcvd_idx < self._send_idx:
                info = self._task_info.get(self._rcvd_idx)
                if info is not None:
                    if len(info) == 2 or self._workers_status[info[0]]:
                        break
                    del self._task_info[self._rcvd_idx]  # its worker's IterableDataset ended: no data
                self._rcvd_idx += 1
            else:
                if not self._persistent_workers:
                    self._shutdown_workers()
                raise StopIteration
            info = self._task_info[self._rcvd_idx]
            if len(info) == 2:
                del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
                return self._process_data(info[1])
            if self._res.shut:
                raise RuntimeError("DataLoader iterator was shut down")
            wid, gen, idx, data = self._get_data()
            if idx is None:  # a worker failed to start
                self._shutdown_workers()
                data.reraise()
            if gen != self._generation:
                continue     # from an epoch that was abandoned (persistent workers)
            self._tasks_outstanding -= 1
            self._worker_tasks[wid] -= 1
            if isinstance(data, _IterableDatasetStopIteration):
                if self._persistent_workers:
                    self._workers_status[data.worker_id] = False
                else:
                    self._mark_worker_as_unavailable(data.worker_id)
                self._try_put_index()
                continue
            if idx != self._rcvd_idx:
                if self._in_order:
                    self._task_info[idx] += (data,)
                    continue
                del self._task_info[idx]
                return self._process_data(data)
            del self._task_info[idx]
            self._rcvd_idx += 1
            return self._process_data(data)

    def _try_put_index(self):
        max_tasks = self._prefetch_factor * self._num_workers
        assert self._tasks_outstanding < max_tasks
        active = sum(self._workers_status)
        for _ in range(self._num_workers):
            wid = next(self._worker_queue_idx_cycle)
            if self._workers_status[wid] and (self._in_order or self._worker_tasks[wid] < max_tasks // active):
                break
        else:
            return
        try:
            index = self._next_index()
        except StopIteration:
            return
        self._res.index_queues[wid].put((self._generation, self._send_idx, index,
                                         _pickle.take_returns(self._res.prefix, wid)))
        self._task_info[self._send_idx] = (wid,)
        self._worker_tasks[wid] += 1
        self._tasks_outstanding += 1
        self._send_idx += 1

    def _process_data(self, data):
        self._try_put_index()
        if isinstance(data, ExceptionWrapper):
            data.reraise()
        return data

    def _mark_worker_as_unavailable(self, worker_id):
        self._workers_status[worker_id] = False
        res = self._res
        res.expected_exit[worker_id] = True
        try:
            res.index_queues[worker_id].put(None)
        except (OSError, ValueError):
            pass

    def _shutdown_workers(self):
        self._res.shutdown()
