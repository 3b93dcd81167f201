"""A replayable :class:`Graph` made from a :class:`~cltorch._capture.trace.Trace`.

Each recorded launch gets its own ``pyopencl.Kernel`` object (a second kernel of the same built program),
whose arguments are set once here; a replay is then a loop of ``enqueue_nd_range_kernel`` calls, with the
recorded device copies, fills and host uploads in their places. The graph holds every buffer the trace uses,
so the intermediates keep their memory between replays (CUDA Graphs' static memory) and the parameters,
gradients and optimizer states the launches update in place are the real tensors' buffers.

Measured on PoCL (2-core Zen 5): a replayed launch costs about 3 us of host time, against 8.5 us for the same
kernel called through pyopencl with its arguments and 20-25 us through cltorch's eager dispatch.
"""
from ..backend import geometry
from .trace import kernel_label

__all__ = ["Graph"]

_chars = {}
_PACKABLE = {bytes([c]) for c in b"cbBhHiIlLfd"}     # what _set_arg_buf_pack_multi packs (pyopencl's invoker)


def _char(dt):
    """The struct format character (as bytes) of a scalar argument dtype (cached)."""
    c = _chars.get(dt)
    if c is None:
        import numpy as np
        c = _chars[dt] = np.dtype(dt).char.encode()
    return c


class Graph:
    """The replayable form of a trace (``Graph(trace)``; ``graph.replay()``).

    ``launch_count``: kernels per replay. ``set_args(i, args)`` replaces entry ``i``'s arguments and
    ``set_scalars(i, first, values)`` some of its scalars (an optimizer step's scalars, Philox offsets, set
    before a replay). Raises ValueError for a trace that cannot be replayed (``trace.unsupported``, or a launch
    outside the device's or its kernel's limits: ``backend.geometry.check``).
    """

    def __init__(self, trace):
        if trace.unsupported:
            raise ValueError("; ".join(trace.unsupported))
        import pyopencl as cl
        self.trace = trace
        self._ops = []           # (kind, queue, payload...)
        self._kernels = {}       # entry index -> (Kernel, has preset args)
        self.runtimes = []
        for i, e in enumerate(trace.entries):
            rt = e[1]
            if rt not in self.runtimes:
                self.runtimes.append(rt)
            if e[0] == "k":
                _, rt, k, gs, ls, args = e
                try:        # fused launches (new kernels) meet the launch limits here, before any replay
                    geometry.check(rt, k, gs, ls, args)
                except geometry.LaunchError as err:
                    raise ValueError(f"launch {i} cannot run: {err}") from err
                kc, preset = self._kernel_for(k, args)
                self._kernels[i] = (kc, preset, args)
                if preset:
                    self._ops.append((0, rt.queue, kc, gs, ls))
                else:
                    self._ops.append((1, rt.queue, kc, gs, ls, args))
            elif e[0] == "copy":
                self._ops.append((2, rt.queue, e[2], e[3], e[4]))
            elif e[0] == "fill":
                self._ops.append((3, rt.queue, e[2], e[3], e[4], e[5]))
            else:
                kw = dict(e[4])
                self._ops.append((4, rt.queue, e[2], e[3], kw))
        self.launch_count = trace.launches()
        self._cl = cl
        self._slots = {}         # buffer id -> [[current buffer], [(kernel, arg position), ...]]
        uses, fixed = {}, set()
        for i, e in enumerate(trace.entries):
            if e[0] == "k" and self._kernels[i][1]:
                for j, a in enumerate(e[5]):
                    if isinstance(a, cl.MemoryObjectHolder):
                        uses.setdefault(id(a), (a, []))[1].append((self._kernels[i][0], j))
            else:
                for a in (e[5] if e[0] == "k" else e[2:4] if e[0] == "copy" else e[2:3]):
                    if isinstance(a, cl.MemoryObjectHolder):
                        fixed.add(id(a))
        self._uses = {k: v for k, v in uses.items() if k not in fixed}

    @staticmethod
    def _kernel_for(k, args):
        """A private Kernel of ``k``'s program with ``args`` set (when the scalar types are known)."""
        import pyopencl as cl
        src = getattr(k, "_cltorch_src", None)
        if src is None:
            return k, False
        kc = cl.Kernel(k.program, k.function_name)
        kc.set_scalar_arg_dtypes(list(src[3]))
        kc.set_args(*args)
        kc._cltorch_src = src
        return kc, True

    def slot(self, buf):
        """A handle for re-pointing every argument that is ``buf`` (see :meth:`rebind`), or None when ``buf`` is
        also used by a copy, fill or upload, or by a kernel whose arguments are set per call."""
        u = self._uses.get(id(buf))
        if u is None or u[0] is not buf:
            return None
        return self._slots.setdefault(id(buf), [buf, u[1]])

    @staticmethod
    def rebind(slot, buf):
        """Point every kernel argument of ``slot`` at ``buf`` (a buffer of at least the same size) from now on.

        OpenCL captures a kernel's arguments when it is enqueued, so replays already queued are unaffected."""
        if slot[0] is buf:
            return
        for kc, j in slot[1]:
            kc.set_arg(j, buf)
        slot[0] = buf

    def labels(self):
        """The kernel labels of the launches, in order (for messages and tests)."""
        return [kernel_label(e[2]) for e in self.trace.entries if e[0] == "k"]

    def set_args(self, i, args):
        kc, preset, old = self._kernels[i]
        if preset:
            kc.set_args(*args)
        else:
            self._ops[i] = self._ops[i][:5] + (tuple(args),)      # one op per trace entry
        self._kernels[i] = (kc, preset, tuple(args))

    def set_scalars(self, i, first, values):
        """Replace entry ``i``'s scalar arguments ``first, first + 1, ...`` by ``values``, setting only those that
        changed (packed as the kernel's generated ``set_args`` packs them, so the bits are the same)."""
        kc, preset, old = self._kernels[i]
        changed = [(first + j, v) for j, v in enumerate(values) if old[first + j] != v]
        if not changed:
            return
        args = list(old)
        for j, v in changed:
            args[j] = v
        args = tuple(args)
        if preset:
            # pyopencl's own invoker sets packed scalars through _set_arg_buf_pack_multi (0.3 us here, against
            # 40 us for Kernel.set_arg with a scalar, which tries the other argument kinds first, and 25 us
            # for set_args of the step kernel's 88 arguments)
            multi = getattr(kc, "_set_arg_buf_pack_multi", None)
            dts = kc._cltorch_src[3]
            flat = []
            for j, v in changed:
                c = _char(dts[j])
                if multi is None or c not in _PACKABLE:
                    flat = None
                    break
                flat += (j, c, v)
            if flat is None:
                kc.set_args(*args)
            else:
                multi(tuple(flat))
        else:
            self._ops[i] = self._ops[i][:5] + (args,)
        self._kernels[i] = (kc, preset, args)

    def args_of(self, i):
        return self._kernels[i][2]

    def replay(self):
        """Enqueue the recorded work in order (nothing waits); re-arms the recorded deferred checks."""
        cl = self._cl
        enq = cl.enqueue_nd_range_kernel
        for rt in self.runtimes:
            if rt._lost is not None:     # a lost context (backend/faults.py): no driver call
                raise rt.dead_error()
        for rt in self.runtimes:
            rt.lock.acquire()
        try:
            try:
                self._enqueue(cl, enq)
            except cl.Error as e:        # a lost context raises AcceleratorError instead of the driver's error
                for rt in self.runtimes:
                    rt.raise_if_lost(e)
                raise
            for rt in self.runtimes:
                rt.pending = True
        finally:
            for rt in self.runtimes:
                rt.lock.release()
        for rt, check, key in self.trace.checks:
            rt.defer_check(check, key)

    def _enqueue(self, cl, enq):
        for op in self._ops:
            kind = op[0]
            if kind == 0:
                enq(op[1], op[2], op[3], op[4])
            elif kind == 1:
                op[2](op[1], op[3], op[4], *op[5])
            elif kind == 2:
                cl.enqueue_copy(op[1], op[2], op[3], **op[4])
            elif kind == 3:
                cl.enqueue_fill_buffer(op[1], op[2], op[3], op[4], op[5])
            else:
                cl.enqueue_copy(op[1], op[2], op[3], is_blocking=False, **op[4])

