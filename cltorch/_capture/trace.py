"""Recording the device work of one run: kernel launches, device copies and fills, host uploads.

While a :class:`Recorder` is installed (``Runtime.capture``, a class attribute of the backend's runtime, and
pyopencl's ``enqueue_copy``/``enqueue_fill_buffer`` wrapped for the capturing thread), every launch that
``Runtime.launch`` sees is appended to the recorder's :class:`Trace` as ``(runtime, kernel, global size, local
size, args)`` and then enqueued as usual (``execute=True``, a capture: the run is an ordinary eager run whose
work is also logged) or not at all (``execute=False``, a dry run that only wants the arguments an op would pass).

What cannot be replayed is noted, not hidden: a host read (a blocking device-to-host copy: ``.item()``,
``.tolist()``, ``.numpy()``, printing) or a kernel that runs on a ``cpu`` tensor's host memory makes the trace
unreplayable and ``Trace.unsupported`` says which op and where (the first user frame outside cltorch).
Deferred device-side checks (``Runtime.defer_check``) are kept with the trace and re-armed at each replay.

The trace holds a reference to every buffer its entries use, so buffers allocated during the capture (the
intermediates) never go back to the memory pool while the trace lives: a replay finds them where the capture
left them (CUDA Graphs' static memory).
"""
import os
import threading
import traceback

import numpy as np

from ..backend.runtime import Runtime as _Runtime, all_runtimes as _all_runtimes

__all__ = ["Recorder", "Trace", "current", "is_capturing", "compare", "user_frame", "kernel_label"]

_state = threading.local()
_active = []          # recorders installed, innermost last (nesting is refused above this module)
_patch_lock = threading.Lock()
_CLTORCH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def current():
    """The recorder installed by this thread, or None."""
    return getattr(_state, "recorder", None)


def is_capturing():
    """True while this thread runs a function under capture (``cltorch.compiler.is_compiling()``)."""
    rec = current()
    return rec is not None and rec.execute


def user_frame():
    """``file:line: code`` of the innermost stack frame outside the cltorch package (where the user called in)."""
    for fr in reversed(traceback.extract_stack()[:-1]):
        if not os.path.abspath(fr.filename).startswith(_CLTORCH_DIR):
            return f"{os.path.basename(fr.filename)}:{fr.lineno}: {(fr.line or '').strip()}"
    return "?"


def _op_frame():
    """The outermost cltorch function of the innermost call into cltorch (the op the user called, e.g. ``item``)."""
    found = None
    for fr in reversed(traceback.extract_stack()[:-1]):
        path = os.path.abspath(fr.filename)
        if path.startswith(_CLTORCH_DIR):
            if "_capture" not in path:
                found = f"{fr.name} ({os.path.relpath(path, os.path.dirname(_CLTORCH_DIR))})"
        elif found is not None:
            return found
    return found


def kernel_label(k):
    """A readable name for a recorded kernel: template and kernel name, and the expression of elementwise ones."""
    src = getattr(k, "_cltorch_src", None)
    if src is None:
        return getattr(k, "function_name", repr(k))
    template, name, params = src[0], src[1], src[2]
    base = template.replace(".cl.mako", "")
    if "expr" in params:
        return f"{base}:{name} `{params['expr']}`"
    return f"{base}:{name}"


def _is_buffer(x):
    import pyopencl as cl
    return isinstance(x, cl.MemoryObjectHolder)


class Trace:
    """The work of one recorded run, in queue order.

    entries: tuples ``("k", rt, kernel, gsize, lsize, args)``, ``("copy", rt, dst, src, kwargs)``,
    ``("fill", rt, buf, pattern, offset, size)`` and ``("upload", rt, buf, host_array, kwargs)``.
    checks: ``(rt, check, key)`` deferred checks to re-arm per replay. regions: ``(tag, first, end)`` entry
    ranges marked by :meth:`Recorder.begin_region` (the optimizer steps). unsupported: the reasons it cannot be
    replayed (empty when it can).
    """

    __slots__ = ("entries", "checks", "regions", "unsupported")

    def __init__(self):
        self.entries = []
        self.checks = []
        self.regions = []
        self.unsupported = []

    def launches(self):
        return sum(1 for e in self.entries if e[0] == "k")

    def buffers(self):
        """Every buffer an entry uses (kernel arguments, copy ends, fill targets)."""
        out = {}
        for e in self.entries:
            if e[0] == "k":
                for a in e[5]:
                    if _is_buffer(a):
                        out[id(a)] = a
            elif e[0] == "copy":
                out[id(e[2])] = e[2]
                out[id(e[3])] = e[3]
            else:
                out[id(e[2])] = e[2]
        return out


class Recorder:
    """Installs itself on the runtime for the calling thread (``with Recorder() as rec: ...``); ``rec.trace``.

    execute: enqueue the work as well as logging it (capture), or only log it (dry run). Launches from other
    threads pass through unrecorded.
    """

    def __init__(self, execute=True):
        self.execute = execute
        self.trace = Trace()
        self.thread = threading.get_ident()
        self._region = None
        self._saved = None

    # ------------------------------------------------------------------ install
    def __enter__(self):
        if current() is not None:
            raise RuntimeError("a capture is already under way in this thread (cltorch.compile or "
                               "cltorch.cl.graph): captures do not nest")
        _state.recorder = self
        with _patch_lock:
            _active.append(self)
            if len(_active) == 1:
                _install_patches()
            _Runtime.capture = _Dispatch
        return self

    def __exit__(self, *exc):
        _state.recorder = None
        with _patch_lock:
            _active.remove(self)
            if not _active:
                _Runtime.capture = None
                _remove_patches()
        if self._region is not None:
            self.end_region()
        return False

    # ------------------------------------------------------------------ regions
    def begin_region(self, tag):
        """Entries from now until :meth:`end_region` belong to region ``tag`` (e.g. an optimizer step)."""
        self._region = (tag, len(self.trace.entries))

    def end_region(self):
        tag, first = self._region
        self._region = None
        self.trace.regions.append((tag, first, len(self.trace.entries)))

    # ------------------------------------------------------------------ hooks
    def unsupported(self, why):
        if not self.trace.unsupported or why not in self.trace.unsupported:
            self.trace.unsupported.append(why)

    def launch(self, rt, k, gsize, lsize, args):
        if not self.execute:              # a dry run only wants the arguments
            self.trace.entries.append(("k", rt, k, tuple(gsize), None if lsize is None else tuple(lsize), args))
            return None
        for a in args:
            if _is_buffer(a) and a.__class__.__name__ != "PooledBuffer":
                import pyopencl as cl
                if a.flags & cl.mem_flags.USE_HOST_PTR:
                    self.unsupported(f"a kernel on a cpu tensor's host memory ({kernel_label(k)}, at {user_frame()}):"
                                     " cpu ops partly run in numpy and wait where memory is shared, so only cl"
                                     " devices are captured")
                    break
        self.trace.entries.append(("k", rt, k, tuple(gsize), None if lsize is None else tuple(lsize), tuple(args)))
        with rt.lock:
            rt.pending = True
            ev = k(rt.queue, gsize, lsize, *args)
        if rt.profiling:
            rt._events.append((k.function_name, gsize, ev))
        return ev

    def defer_check(self, rt, check, key):
        """Keep a deferred check with the trace (re-armed per replay); returns False so it is armed now too."""
        self.trace.checks.append((rt, check, key))
        return not self.execute      # a dry run arms nothing

    def copy(self, orig, queue, dest, src, kwargs):
        rt = _rt_of(queue)
        dbuf, sbuf = _is_buffer(dest), _is_buffer(src)
        if dbuf and sbuf:
            self.trace.entries.append(("copy", rt, dest, src, dict(kwargs)))
        elif dbuf:
            arr = np.array(src, copy=True)          # the bytes as uploaded now; replays upload the same bytes
            self.trace.entries.append(("upload", rt, dest, arr, {k: v for k, v in kwargs.items()
                                                                 if k in ("dst_offset", "byte_count")}))
        else:
            op = _op_frame()
            self.unsupported(f"a host read ({op + ', ' if op else ''}at {user_frame()}): the value depends on the "
                             "device's data, so replaying the launches alone would leave the host side stale")
        if self.execute or not (dbuf or sbuf):
            return orig(queue, dest, src, **kwargs)
        return None

    def fill(self, orig, queue, buf, pattern, offset, size, kwargs):
        rt = _rt_of(queue)
        self.trace.entries.append(("fill", rt, buf, np.array(pattern, copy=True), offset, size))
        if self.execute:
            return orig(queue, buf, pattern, offset, size, **kwargs)
        return None


class _DispatchType:
    """``Runtime.capture`` while any recorder is installed: forwards each hook to the calling thread's recorder,
    and lets other threads' launches through unrecorded."""

    def launch(self, rt, k, gsize, lsize, args):
        rec = current()
        if rec is None:
            with rt.lock:
                rt.pending = True
                return k(rt.queue, gsize, lsize, *args)
        return rec.launch(rt, k, gsize, lsize, args)

    def defer_check(self, rt, check, key):
        rec = current()
        return False if rec is None else rec.defer_check(rt, check, key)


_Dispatch = _DispatchType()
_orig = {}


def _rt_of(queue):
    for rt in _all_runtimes():
        if rt.queue == queue:
            return rt
    return None


def _install_patches():
    import pyopencl as cl
    _orig["copy"] = cl.enqueue_copy
    _orig["fill"] = cl.enqueue_fill_buffer
    ocopy, ofill = _orig["copy"], _orig["fill"]

    def enqueue_copy(queue, dest, src, **kwargs):
        rec = current()
        if rec is None:
            return ocopy(queue, dest, src, **kwargs)
        return rec.copy(ocopy, queue, dest, src, kwargs)

    def enqueue_fill_buffer(queue, mem, pattern, offset, size, **kwargs):
        rec = current()
        if rec is None:
            return ofill(queue, mem, pattern, offset, size, **kwargs)
        return rec.fill(ofill, queue, mem, pattern, offset, size, kwargs)

    cl.enqueue_copy = enqueue_copy
    cl.enqueue_fill_buffer = enqueue_fill_buffer


def _remove_patches():
    import pyopencl as cl
    if _orig:
        cl.enqueue_copy = _orig.pop("copy")
        cl.enqueue_fill_buffer = _orig.pop("fill")


# ---------------------------------------------------------------------- comparing two traces
def _same_scalar(a, b):
    if type(a) is not type(b):
        try:
            return bool(a == b) and np.asarray(a).dtype == np.asarray(b).dtype
        except Exception:   # noqa: BLE001
            return False
    if isinstance(a, float) and a != a:
        return b != b
    try:
        return bool(a == b)
    except Exception:   # noqa: BLE001 - e.g. LocalMemory
        return type(a).__name__ == "LocalMemory" and a.size == b.size


def compare(a, b):
    """Whether traces ``a`` and ``b`` (two runs of one function) do the same work up to buffer renaming.

    Returns ``(None, varying)`` when they match: ``varying`` lists ``(entry index, arg position)`` of scalar
    arguments that differ (the caller decides whether each may vary), or ``(reason, None)`` naming the first
    difference. Buffers must correspond one to one (a buffer of ``a`` always where the same buffer of ``b`` is).
    """
    if len(a.entries) != len(b.entries):
        return (f"the two runs launched different work ({len(a.entries)} and {len(b.entries)} operations): Python "
                "control flow or state differs between calls"), None
    fwd, back = {}, {}

    def same_buf(x, y):
        ix, iy = id(x), id(y)
        if fwd.setdefault(ix, iy) != iy or back.setdefault(iy, ix) != ix:
            return False
        return True

    varying = []
    for i, (ea, eb) in enumerate(zip(a.entries, b.entries)):
        if ea[0] != eb[0] or ea[1] is not eb[1]:
            return f"operation {i} differs between two runs ({ea[0]} and {eb[0]})", None
        if ea[0] == "k":
            _, _, ka, ga, la, aa = ea
            _, _, kb, gb, lb, ab = eb
            if ka is not kb or ga != gb or la != lb or len(aa) != len(ab):
                return (f"launch {i} differs between two runs ({kernel_label(ka)} and {kernel_label(kb)}, "
                        f"global sizes {ga} and {gb})"), None
            for j, (x, y) in enumerate(zip(aa, ab)):
                bx, by = _is_buffer(x), _is_buffer(y)
                if bx != by:
                    return f"launch {i} ({kernel_label(ka)}) passes a buffer in one run and a value in the other", None
                if bx:
                    if not same_buf(x, y):
                        return f"launch {i} ({kernel_label(ka)}) uses different buffers in the two runs", None
                elif not _same_scalar(x, y):
                    varying.append((i, j))
        elif ea[0] == "copy":
            if not (same_buf(ea[2], eb[2]) and same_buf(ea[3], eb[3])) or ea[4] != eb[4]:
                return f"copy {i} differs between two runs", None
        elif ea[0] == "fill":
            if not same_buf(ea[2], eb[2]) or ea[4:] != eb[4:] or not np.array_equal(ea[3], eb[3]):
                return f"fill {i} differs between two runs", None
        else:
            if not same_buf(ea[2], eb[2]) or ea[4] != eb[4] or ea[3].shape != eb[3].shape or \
                    ea[3].dtype != eb[3].dtype or ea[3].tobytes() != eb[3].tobytes():
                return (f"operation {i} uploads host data that changes between calls (a tensor made from Python "
                        "data inside the function?)"), None
    return None, varying
