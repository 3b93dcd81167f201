"""Per-device runtime: context, one in-order queue, memory pool, kernels, memory statistics.

One :class:`Runtime` exists per OpenCL device and is made lazily on first use. The ``cpu`` device
(host memory) uses the runtime of the first OpenCL CPU device, so its arithmetic runs there through
``CL_MEM_USE_HOST_PTR`` buffers.
"""
import os
import threading
from collections import deque

import numpy as np

from . import faults, forked, geometry, program
from .devices import list_devices
from .faults import AcceleratorError
from .forked import FORK_MESSAGE, in_forked_child  # noqa: F401  (re-exported by backend)
from .profile import load_profile

_LAUNCH_BLOCKING = os.environ.get("CLTORCH_LAUNCH_BLOCKING") == "1"

__all__ = ["Runtime", "OutOfMemoryError", "AcceleratorError", "NoDeviceError", "runtime", "cpu_runtime",
           "default_index", "all_runtimes"]


class OutOfMemoryError(RuntimeError):
    """A device allocation failed: the device is out of memory, the request exceeds the device's largest
    allocation, or it passes the limit set by ``set_per_process_memory_fraction``."""


class NoDeviceError(RuntimeError):
    """No OpenCL device is installed."""


# what gives a machine an OpenCL CPU device from pip (both are dependencies of cltorch on Linux x86-64)
CPU_DEVICE_PIP = ("`pip install intel-opencl-rt intel-cmplr-lib-rt` (Intel's CPU runtime: any x86-64 CPU, AMD's "
                  "included) or `pip install pocl-binary-distribution` (PoCL, Linux x86-64)")
INSTALL_HINT = ("No OpenCL device was found. Install one: " + CPU_DEVICE_PIP + " gives a CPU device; for GPUs "
                "install the vendor's OpenCL driver (NVIDIA driver, AMD ROCm, Intel compute runtime; Apple ships "
                "OpenCL with macOS).")


def install_hint():
    """INSTALL_HINT, followed by the devices a driver lists but cannot compile for, with the reason."""
    from .devices import unusable_devices
    bad = unusable_devices()
    if not bad:
        return INSTALL_HINT
    lines = [f"  {name} ({platform}): {reason}" for name, platform, reason in bad]
    return (INSTALL_HINT + " These devices are listed by a driver but its compiler cannot build a kernel, so "
            "they were left out:\n" + "\n".join(lines) + "\n(pip's PoCL 3.0 cannot compile for CPUs newer than "
            "LLVM 14 knows, e.g. AMD Zen 4 and Zen 5; Intel's CPU runtime runs there: `pip install intel-opencl-rt "
            "intel-cmplr-lib-rt`.)")


# The templates that read and write bfloat16 (as ushort bit patterns, computing in float); any other template
# rendered with the bfloat16 type raises NotImplementedError before it is built.
BF16_TEMPLATES = frozenset({"elementwise.cl.mako"})
# cltorch.use_deterministic_algorithms(True) sets DETERMINISTIC[0]: programs are rendered with deterministic=True
# and built with these options (see Runtime.program), so the default path's sources and caches are untouched
DETERMINISTIC = [False]
KEEP_MAX = 4096          # queued host storages held before an op's closing finish_if_exposed waits for the queue
DET_OPTIONS = ("-cl-fp32-correctly-rounded-divide-sqrt",)


class _Touched(threading.local):
    exposed = False

    def __init__(self):
        self.keeps = []     # host storages (or pooled blocks) this thread fetched for a launch it has not made yet


class Runtime:
    """Context, queue, pool and kernel cache of one OpenCL device (``info`` is its DeviceInfo)."""

    # The recorder of ``cltorch._capture`` while a capture is under way (a class attribute, so runtimes made
    # during the capture record too), else None: the one test the launch path pays when not recording.
    capture = None

    def __init__(self, info):
        import pyopencl as cl
        import pyopencl.tools as cltools
        self.info = info
        self.index = info.index
        self.profile = self.native_profile = load_profile(info)
        if DETERMINISTIC[0]:
            from .deterministic import profile as _det_profile
            self.profile = _det_profile()
        for cap in self.native_profile.get_value("quirks", "mask", []) or []:
            setattr(info, cap, False)
        self.ctx = cl.Context([info.cl_device])
        import os
        self.profiling = os.environ.get("CLTORCH_PROFILE_KERNELS") == "1"
        props = cl.command_queue_properties.PROFILING_ENABLE if self.profiling else 0
        self.queue = cl.CommandQueue(self.ctx, properties=props)
        self._events = []
        self._keepalive = []
        self._kept = False              # keep() was ever called: launches look for the thread's held storages
        self._touched = _Touched()     # per thread: an exposed host storage was handed to a kernel (finish_if_exposed)
        self._alloc = cltools.ImmediateAllocator(self.queue)
        self.pool = cltools.MemoryPool(self._alloc)
        self._kernels = {}
        self._programs = {}
        self.lock = threading.RLock()
        self.allocated = 0
        self.peak = 0
        self.limit = None            # bytes, from set_per_process_memory_fraction
        self._pending = False        # work queued since the last synchronize (``pending``)
        self.tail = None             # the latest launch's event while it is the last command queued, else None
        self.syncs = 0               # synchronizes so far (the cpu block pool tells blocks kernels may use by it)
        self.last_event = None       # the event of the latest launch (``idle``)
        self._checks = {}            # deferred device-side checks (bounds flags), run at the next synchronize
        self.mf = cl.mem_flags
        self._cl_errors = (cl.MemoryError, cl.RuntimeError, cl.LogicError)
        self._geometry_ok = set()    # (kernel, global, local) triples that passed geometry.check
        # device faults (backend/faults.py): the last launches (kernel, global, local, event) for the message of a
        # lost context; the (error class, message) every call raises once the runtime is dead, else None; a 4-byte
        # buffer that ``faults.probe`` writes and reads back (made and written now: a probe never allocates)
        self._recent = deque(maxlen=faults.RECENT)
        self._lost = None
        self._probe_count = 0
        self._probe_buf = cl.Buffer(self.ctx, self.mf.READ_WRITE, 4)
        self._probe_host = np.zeros(1, np.uint32)     # the initial write reads it after __init__ returns
        cl._cl._enqueue_write_buffer(self.queue, self._probe_buf, self._probe_host, is_blocking=False)

    # ---------------------------------------------------------------- kernels
    def program(self, template, options=(), **params):
        """The built program of ``template`` rendered with ``params`` (memoised per device). In deterministic mode
        (``cltorch.use_deterministic_algorithms``) every program is rendered with ``deterministic=True`` (the
        preamble's own math functions) and built with IEEE-rounded division and sqrt."""
        if DETERMINISTIC[0]:
            params = dict(params, deterministic=True)
            options = tuple(options) + tuple(o for o in DET_OPTIONS if o not in options)
        key = (template, options, tuple(sorted((k, program._hashable(v)) for k, v in params.items())))
        prg = self._programs.get(key)
        if prg is None:
            with self.lock:
                prg = self._programs.get(key)
                if prg is None:
                    src = program.render(template, **params)
                    if "bfloat16" in src and template not in BF16_TEMPLATES:
                        raise NotImplementedError(
                            f"bfloat16 is not supported by the {template.split('.')[0]} kernels yet (bfloat16 is a "
                            "storage dtype with pointwise arithmetic only): convert with .float() first")
                    if self._lost is not None:
                        raise self.dead_error()
                    try:
                        prg = program.build_program(self.ctx, self.info, src, options, template)
                    except (program.KernelBuildError,) + self._cl_errors as e:
                        self.raise_if_lost(e)
                        raise
                    self._programs[key] = prg
        else:
            program._STATS["memory_hits"] += 1
        return prg

    def kernel(self, template, name, arg_dtypes, options=(), **params):
        """A cached ``pyopencl.Kernel`` named ``name`` from ``template``, with scalar arg dtypes set.

        Call it as ``k(rt.queue, global_size, local_size, *args)``. The cache key is the template, its
        parameters and the kernel name, so look it up once per signature and keep it.
        """
        key = (template, name, options, DETERMINISTIC[0],
               tuple(sorted((k, program._hashable(v)) for k, v in params.items())))
        k = self._kernels.get(key)
        if k is None:
            import pyopencl as cl
            prg = self.program(template, options, **params)
            k = self.driver(cl.Kernel, prg, name)
            k.set_scalar_arg_dtypes(arg_dtypes)
            k._cltorch_src = (template, name, params, tuple(arg_dtypes), options)   # for capture and fusion
            self._kernels[key] = k
        return k

    def launch(self, k, gsize, lsize, *args):
        """Enqueue a kernel; marks the queue as having pending work.

        The first launch of a kernel with given sizes is checked against the device's and the kernel's limits
        (``geometry.check``; raises ``LaunchError``), and an enqueue the driver refuses raises ``LaunchError``
        naming the kernel. Holds the runtime's lock: a pyopencl Kernel call sets the arguments on the shared Kernel object and then
        enqueues, and another thread launching the same kernel in between would swap in its own arguments.
        While ``cltorch._capture`` records, the recorder logs the launch and enqueues it (or only logs it)."""
        if self._lost is not None:   # a lost context, or a forked child: raise before any driver call
            raise self.dead_error()
        try:
            fits = (k, gsize, lsize) in self._geometry_ok
        except TypeError:             # a list as a size
            gsize, lsize = tuple(gsize), (tuple(lsize) if lsize is not None else None)
            fits = (k, gsize, lsize) in self._geometry_ok
        if not fits:                  # first time for these sizes: check them against the device and the kernel
            geometry.check(self, k, gsize, lsize, args)
            if len(self._geometry_ok) >= 8192:     # bounded: a process of ever-new shapes re-checks old ones
                self._geometry_ok.clear()
            self._geometry_ok.add((k, gsize, lsize))
        if self.capture is not None:
            return self.capture.launch(self, k, gsize, lsize, args)
        keeps = self._touched.keeps if self._kept else None    # (a device with no host memory never looks)
        with self.lock:
            if keeps:       # what this thread fetched is held from now until the queue finished
                self._keepalive += keeps
                keeps.clear()
            self._pending = True
            try:
                ev = self.last_event = self.tail = k(self.queue, gsize, lsize, *args)
            except self._cl_errors as e:
                raise self.fault(e) or geometry.launch_failed(self, k, gsize, lsize, e) from e
            self._recent.append((k, gsize, lsize, ev))
        if self.profiling:
            self._events.append((k.function_name, gsize, ev))
        if _LAUNCH_BLOCKING:          # wait for the kernel: a fault is reported here, naming this kernel
            self.finish(at_kernel=(k, gsize, lsize))
        return ev

    @property
    def pending(self):
        """True while work queued since the last synchronize may still run."""
        return self._pending

    @pending.setter
    def pending(self, v):
        # code that queues a command other than a kernel launch (a copy, a fill) sets pending itself: the latest
        # launch's event may then no longer be the last command queued, so ``tail`` is unknown until the next launch
        self._pending = v
        if v:
            self.tail = None

    def tail_done(self, ev):
        """True when ``ev`` (a ``tail`` taken earlier) has completed, hence, the queue being in order, every command
        queued before it. None (the tail was unknown) is never done."""
        return ev is not None and self._lost is None and ev.command_execution_status == 0    # CL_COMPLETE

    def idle(self):
        """True when no launched kernel is still queued or running: nothing pending, or the latest launch's event
        complete (the queue is in order). A synchronize then costs next to nothing (numpy forms of small ops use
        it to decide between waiting and queueing their kernel)."""
        if not self._pending:
            return True
        if self._lost is not None:
            raise self.dead_error()
        ev = self.last_event
        return ev is not None and ev.command_execution_status == 0    # CL_COMPLETE

    def kernel_profile(self, reset=True):
        """With CLTORCH_PROFILE_KERNELS=1: {kernel name: (calls, total device ms)} since the last reset."""
        self.finish()
        out = {}
        for name, gs, ev in self._events:
            ms = (ev.profile.end - ev.profile.start) * 1e-6
            c, t = out.get(name, (0, 0.0))
            out[name] = (c + 1, t + ms)
        if reset:
            self._events = []
        return dict(sorted(out.items(), key=lambda kv: -kv[1][1]))

    def keep(self, obj):
        """Hold ``obj`` (a host storage, or the pooled block of one, that a kernel about to be queued uses) until
        the queue has finished the calling thread's next launch: it is held per thread until that launch (another
        thread's synchronize between the fetch and the launch must not drop it), then with the queue's work until
        a synchronize. A thread's own synchronize drops what it holds (fetch buffers right before the launch)."""
        self._kept = True
        self._touched.keeps.append(obj)  # past KEEP_MAX, the op's closing finish_if_exposed waits (not here: the
                                         # op may still enqueue with storages it fetched before this one)

    def touch_exposed(self):
        """Note that the calling thread handed a kernel host memory numpy or another process shares
        (``Storage.cl_buffer`` calls it); the thread's next ``finish_if_exposed`` waits."""
        self._touched.exposed = True

    def finish_if_exposed(self):
        """The one wait rule of ops on cpu tensors (DESIGN.md decision 2, session-5 amendment): call it once at
        the end of an op that launched kernels on host memory. It synchronizes only when (a) since its last call
        this thread's kernels were handed memory shared with numpy or another process (``Storage.exposed`` or
        shared memory: numpy must never see stale data, and numpy's later writes must not reach a kernel still
        queued), or (b) more than ``KEEP_MAX`` queued host storages are held. Otherwise the kernels stay queued, as
        on any device: host reads wait for the queue (``Storage.host_sync``) and the runtime holds queued host
        storages until the next synchronize, so their memory (temporaries included) outlives the kernels. A
        kernel's storages must be fetched with ``Storage.cl_buffer()`` for each enqueue (that both keeps them alive
        and notes exposure). A pending deferred device check (``defer_check``: a target or index out of range) does
        not make it wait: as on ``cl:N``, the error is raised at the next synchronization, which every host read
        of a queued storage is (session-7 amendment; before, cpu waited here so that such errors raised at the op,
        one full wait per cross_entropy call)."""
        t = self._touched
        if t.exposed or len(self._keepalive) + len(t.keeps) > KEEP_MAX:
            t.exposed = False
            self.synchronize()

    def synchronize(self):
        """Wait for the queue, then run the deferred checks (which may raise). The flag is cleared under the lock
        that launches hold, after the finish: a thread that sees it clear knows its own earlier launches are done,
        even when another thread did the finish. A dead runtime (a lost context) raises its AcceleratorError."""
        if self._lost is not None:
            raise self.dead_error()
        with self.lock:
            if self._pending:
                self.finish()
                self._pending = False
            self.syncs += 1
            self._keepalive.clear()   # under the lock: another thread's queued kernel may still need its storage
            self._touched.keeps.clear()   # this thread's: copies and fills it queued with them are finished too
        if self._checks:
            self.run_checks()

    def defer_check(self, check, key=None):
        """Run ``check()`` once the kernels queued so far have finished: at the next synchronize or host read.

        A check reads an error flag that a kernel set on the device (an index or class target out of range) and
        raises the error it describes. Deferring it keeps the queue asynchronous, as CUDA's device-side asserts
        do: the error surfaces at the next synchronization point (``.item()``, ``.numpy()``, ``.cpu()``,
        ``cltorch.cl.synchronize()``), not at the op. ``CLTORCH_LAUNCH_BLOCKING=1`` checks at the op instead.
        ``key``: one pending check per key (a flag buffer that many launches share).
        """
        if self.capture is not None and self.capture.defer_check(self, check, key):
            return
        if _LAUNCH_BLOCKING:
            self.synchronize()
            check()
            return
        self._checks[key if key is not None else object()] = check
        if len(self._checks) > 256:
            self.synchronize()

    def run_checks(self):
        """Run (and drop) the deferred checks; the first failing one raises. Call after the queue finished."""
        checks, self._checks = self._checks, {}
        for check in checks.values():
            check()

    # ---------------------------------------------------------------- memory
    def _oom(self, nbytes, why):
        avail = self.info.global_mem - self.allocated
        if self.limit is not None:
            avail = min(avail, self.limit - self.allocated)
        return OutOfMemoryError(
            f"OpenCL out of memory on {self.info.name} (cl:{self.index}): tried to allocate {_fmt(nbytes)} "
            f"({why}); {_fmt(self.allocated)} allocated by cltorch, {_fmt(max(avail, 0))} available"
            + (f" under the per-process limit of {_fmt(self.limit)}" if self.limit is not None else "")
            + f", device max single allocation {_fmt(self.info.max_alloc)}.")

    def alloc(self, nbytes):
        """A pooled device buffer of at least ``nbytes`` (>= 1). Raises OutOfMemoryError."""
        nbytes = max(int(nbytes), 1)
        if self._lost is not None:
            raise self.dead_error()
        if nbytes > self.info.max_alloc:
            raise self._oom(nbytes, "above the device's max_mem_alloc_size")
        if self.limit is not None and self.allocated + nbytes > self.limit:
            self.pool.free_held()
            raise self._oom(nbytes, "past the limit set by set_per_process_memory_fraction")
        try:
            buf = self.pool.allocate(nbytes)
        except self._cl_errors as e:
            self.pool.free_held()
            try:
                buf = self.pool.allocate(nbytes)
            except self._cl_errors as e2:
                self.raise_if_lost(e2)      # a lost context refuses allocations too: not out of memory
                raise self._oom(nbytes, f"the driver refused: {e}") from None
        self.allocated += nbytes
        if self.allocated > self.peak:
            self.peak = self.allocated
        return buf

    def account(self, nbytes):
        self.allocated += nbytes
        if self.allocated > self.peak:
            self.peak = self.allocated

    def release(self, nbytes):
        self.allocated -= nbytes

    def host_buffer(self, array):
        """A zero-copy ``CL_MEM_USE_HOST_PTR`` buffer over a contiguous numpy array (cpu tensors)."""
        import pyopencl as cl
        if array.nbytes == 0:
            array = np.zeros(1, np.uint8)
        if array.nbytes > self.info.max_alloc:
            raise self._oom(array.nbytes, "a cpu tensor above the OpenCL CPU device's max_mem_alloc_size; "
                                          "split the computation into smaller tensors")
        return self.driver(cl.Buffer, self.ctx, self.mf.READ_WRITE | self.mf.USE_HOST_PTR, hostbuf=array)

    def pinned_buffer(self, nbytes):
        """A page-locked host staging buffer (``CL_MEM_ALLOC_HOST_PTR``) and a numpy view mapped over it."""
        import pyopencl as cl
        buf = self.driver(cl.Buffer, self.ctx, self.mf.READ_WRITE | self.mf.ALLOC_HOST_PTR, size=max(int(nbytes), 1))
        arr, _ = self.driver(cl.enqueue_map_buffer, self.queue, buf, cl.map_flags.READ | cl.map_flags.WRITE, 0,
                             (max(int(nbytes), 1),), np.uint8)
        return buf, arr

    # ---------------------------------------------------------------- driver calls and device faults
    def driver(self, fn, *args, **kwargs):
        """``fn(*args, **kwargs)``, a pyopencl call on this device, raising AcceleratorError instead of the
        driver's error when the device's context turns out lost (``fault``), and at once, with no driver call,
        once it is (or in a forked child). Every call that reaches the driver outside ``launch`` goes through
        here or through :meth:`copy`, :meth:`fill`, :meth:`finish`."""
        if self._lost is not None:
            raise self.dead_error()
        try:
            return fn(*args, **kwargs)
        except self._cl_errors as e:
            self.raise_if_lost(e)
            raise

    def copy(self, dest, src, **kwargs):
        """``pyopencl.enqueue_copy(self.queue, dest, src, **kwargs)`` through :meth:`driver` (looked up per call:
        a capture records the copies it wraps there). The caller sets ``pending`` for a non-blocking copy."""
        import pyopencl as cl
        return self.driver(cl.enqueue_copy, self.queue, dest, src, **kwargs)

    def fill(self, buf, pattern, offset, size, **kwargs):
        """``pyopencl.enqueue_fill_buffer`` on this queue through :meth:`driver` (recorded by a capture). The
        caller sets ``pending``."""
        import pyopencl as cl
        return self.driver(cl.enqueue_fill_buffer, self.queue, buf, pattern, offset, size, **kwargs)

    def finish(self, at_kernel=None):
        """Wait for the queue (``clFinish``), reporting a lost context as AcceleratorError. ``at_kernel``: the
        (kernel, global size, local size) just launched, when CLTORCH_LAUNCH_BLOCKING=1 waits for each kernel."""
        if self._lost is not None:
            raise self.dead_error()
        try:
            self.queue.finish()
        except self._cl_errors as e:
            self.raise_if_lost(e, at_kernel)
            raise

    def fault(self, err, at_kernel=None):
        """After the driver error ``err`` (a pyopencl error) on this device: the AcceleratorError to raise when the
        context is lost, else None (an ordinary error, which the caller raises its own way). Lost means that a
        known-good 4-byte write and read-back on the queue fails too (``faults.probe``); the runtime is then dead:
        every later call raises the same error before reaching the driver, and its handles are never released
        (some drivers hang releasing objects of a faulted context)."""
        if self._lost is None:
            with self.lock:
                if self._lost is None:
                    if faults.probe(self):
                        return None
                    self._lost = (AcceleratorError, faults.lost_message(self, err, at_kernel))
                    forked.hold(self)
        return self.dead_error()

    def raise_if_lost(self, err, at_kernel=None):
        """Raise the AcceleratorError (from ``err``) when the context is lost (``fault``); else return."""
        lost = self.fault(err, at_kernel)
        if lost is not None:
            raise lost from err

    def dead_error(self):
        """The error every call on a dead runtime raises (a new instance each time, with the same message)."""
        cls, msg = self._lost
        return cls(msg)

    def fault_on_use(self, cls, message):
        """Mark this runtime dead with ``cls(message)`` without asking the driver (a forked child's inherited
        runtimes: ``forked``)."""
        self._lost = (cls, message)


def _fmt(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.2f} {unit}" if unit != "B" else f"{n} B"
        n /= 1024


_runtimes = {}
_rt_lock = threading.Lock()
_forked = forked.FORKED


def _before_fork():
    # The parent finishes the queues with work pending, so the cpu tensors a child inherits hold finished results
    # (the child cannot wait for the parent's kernels). No lock: another thread may hold one while it forks.
    for rt in list(_runtimes.values()):
        if rt._pending and rt._lost is None:
            try:
                rt.queue.finish()
            except Exception:  # noqa: BLE001  (a fault is reported at the parent's next call)
                pass


def _after_fork_in_child():
    # Listing the platforms is enough to start PoCL's threads: a child forked after only that hangs at its first
    # kernel too (measured: device_count() then fork, then a matmul in the child), so it counts as use.
    # The inherited runtimes are kept (never released: on NVIDIA a child's release destroys the parent's object)
    # and dead: a storage that still names one raises FORK_MESSAGE at its first call (forked.py).
    from . import devices
    if _runtimes or _forked[0] or devices._cache:
        forked.mark_forked()
        for rt in list(_runtimes.values()):
            forked.hold(rt)
            rt.fault_on_use(RuntimeError, FORK_MESSAGE)
            rt._pending = False       # the parent finished its queues before forking (_before_fork)
        _runtimes.clear()
        _cpu_rt[0] = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)


def runtime(index):
    """The Runtime of device ``cl:index`` (made on first use). Raises RuntimeError in a forked child of a
    process that used OpenCL, instead of hanging."""
    rt = _runtimes.get(index)
    if rt is None:
        if _forked[0]:
            raise RuntimeError(FORK_MESSAGE)
        with _rt_lock:
            rt = _runtimes.get(index)
            if rt is None:
                devs = list_devices()
                if not devs:
                    raise NoDeviceError(install_hint())
                rt = Runtime(devs[index])
                _runtimes[index] = rt
    return rt


def all_runtimes():
    """The runtimes made so far."""
    return list(_runtimes.values())


def cpu_index():
    """Index of the OpenCL CPU device that runs arithmetic on ``cpu`` tensors."""
    for info in list_devices():
        if info.cls == "cpu":
            return info.index
    if not list_devices():
        raise NoDeviceError(install_hint())
    raise NoDeviceError(
        "arithmetic on 'cpu' tensors runs on an OpenCL CPU device, and this machine's OpenCL devices are GPUs only ("
        + ", ".join(f"cl:{d.index} {d.name}" for d in list_devices()) + "). Install one: " + CPU_DEVICE_PIP
        + "; or move the tensors to the GPU first (.to('cl')). Creating, loading, initialising and copying cpu "
        "tensors need no CPU device.")


def cpu_device_present():
    """True when an OpenCL CPU device is listed: arithmetic on ``cpu`` tensors runs there. False on a machine whose
    OpenCL devices are all GPUs: cpu tensors then keep to their host paths (creation, random fills from the numpy
    Philox reference, loading, data movement, copies to and from devices), and their arithmetic raises
    NoDeviceError naming what to install (:func:`cpu_index`)."""
    return _cpu_rt[0] is not None or any(info.cls == "cpu" for info in list_devices())


_cpu_rt = [None]      # the cpu device's Runtime once made (cleared in a forked child, with _runtimes)


def cpu_runtime():
    """The Runtime of the OpenCL CPU device that runs arithmetic on ``cpu`` tensors (memoised: every cpu storage's
    first kernel asks for it, and ``cpu_index`` walks the device list)."""
    rt = _cpu_rt[0]
    if rt is None:
        rt = _cpu_rt[0] = runtime(cpu_index())
    return rt


def default_index():
    """The default 'cl' device: CLTORCH_DEVICE if set, else discrete GPU, integrated GPU, then CPU."""
    devs = list_devices()
    if not devs:
        raise NoDeviceError(install_hint())
    from .devices import env_device
    return env_device()
