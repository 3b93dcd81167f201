"""``cltorch.compile``: capture a function's device work, check it, fuse it, and replay it per input signature.

This is the front of the ``_capture`` package (the floor of ``cltorch.compile`` itself): it knows Modules and
Optimizers by their attributes (``_parameters``/``_modules``, ``param_groups``/``state``) and imports
``cltorch.optim`` only to mark optimizer steps, lazily. Below it, ``trace`` records and ``graph`` replays.

Per guard signature (see :meth:`CompiledFunction._key`) a call goes through four stages, as TinyJit does:

1. **eager warm-up**: the first call runs eagerly, so lazily made state (gradients, optimizer moments) exists;
2. **capture A**, 3. **capture B**: two eager runs under a recorder, each on private static copies of the tensor
   inputs. The traces must match up to buffer renaming: a difference means Python-side state or control flow
   changes between calls, and a scalar kernel argument that differs (a random-number offset, a value read from
   a host tensor) is a value replay would freeze. Either falls back to eager for this signature with a one-time
   message naming the op; so do host reads (``.item()``), kernels on ``cpu`` tensors and an lr scheduler stepped
   inside the function. Scalars inside an optimizer's ``step`` (lr, bias corrections from the step count) may
   vary: they are re-derived per replay, and the step's host state (step counters) advances as in eager. A
   fused-kernel optimizer's step is its ``_group_plan`` per group (the host half of its eager ``step``), whose
   scalars are set on the recorded launches; a step composed of tensor ops (ASGD) is re-run in a dry run
   that records the arguments it would launch with, without launching.
4. **replay**: the kernels are re-pointed at the new inputs' buffers (or the inputs are copied into the static
   ones), the trace (fused, see ``fusion``) is enqueued, the parameters' ``.grad`` are set to the tensors the
   capture left there (whose buffers the replay writes), and tensor outputs are fresh tensors (the kernels that
   write them are re-pointed at a new buffer per call, or the result is copied), so a later replay never
   overwrites them; outputs that are parameters, gradients or optimizer states are those tensors.

A step that creates state on its first call (an optimizer's moments) changes its own guards, so a training
step replays from its fifth call: eager, eager (the new signature's warm-up), capture, capture, replay.
"""
import functools
import sys
import warnings
from collections import OrderedDict

from .. import _dispatch
from .._storage import Storage
from .._tensor import Tensor, _no_grad
from . import trace as _trace
from .fusion import fuse, _live_buffers
from .graph import Graph

__all__ = ["CompiledFunction", "compile_fn", "CACHE_SIZE", "reset", "stats"]

CACHE_SIZE = 8          # captured signatures per compiled function (torch's default recompile limit is 8)
MAX_RETRIES = 2         # traces that differ from the previous one before a signature falls back
_all = []               # weak list of compiled functions, for reset()
_STATS = {"captures": 0, "replays": 0, "fallbacks": 0}


def stats():
    """Counters since import: captures made, replays run, signatures fallen back to eager."""
    return dict(_STATS)


def reset():
    """Drop every compiled function's captured graphs (``torch.compiler.reset``)."""
    import weakref  # noqa: F401
    for ref in list(_all):
        cf = ref()
        if cf is not None:
            cf.cache.clear()



def _modes():
    """The autocast regions ((device type, dtype) pairs) and deterministic mode: both change which kernels a call
    runs, so a trace recorded under one is not replayed under another."""
    import sys
    st = _dispatch.autocast_state()
    rtm = sys.modules.get("cltorch.backend.runtime")
    return (tuple(sorted((k, v[0].name) for k, v in st.items())) if st else (),
            bool(rtm.DETERMINISTIC[0]) if rtm is not None else False)

class Unsupported(RuntimeError):
    """What ``fullgraph=True`` raises where the default falls back to eager (torch._dynamo's Unsupported)."""


# ---------------------------------------------------------------------- what a function closes over
def _is_module(x):
    return hasattr(x, "_parameters") and hasattr(x, "_modules") and hasattr(x, "forward")


def _is_optimizer(x):
    return hasattr(x, "param_groups") and hasattr(x, "state") and hasattr(x, "step")


def _is_tensor(x):
    return isinstance(x, Tensor)


def _roots(fn):
    """The objects ``fn`` can reach without arguments: bound self, partial arguments, closure cells, the globals
    its code (and nested code) names, its defaults."""
    out = []
    f = fn
    while True:
        if isinstance(f, functools.partial):
            out += list(f.args) + list(f.keywords.values())
            f = f.func
        elif hasattr(f, "__self__") and hasattr(f, "__func__"):
            out.append(f.__self__)
            f = f.__func__
        else:
            break
    code = getattr(f, "__code__", None)
    if code is None:
        if hasattr(f, "__call__") and not isinstance(f, type):
            out.append(f)
        return out
    for c in f.__closure__ or ():
        try:
            out.append(c.cell_contents)
        except ValueError:
            pass
    g = getattr(f, "__globals__", {})
    stack = [code]
    while stack:
        co = stack.pop()
        for name in co.co_names:
            v = g.get(name)
            if v is not None and not isinstance(v, type(sys)):
                out.append(v)
        stack += [c for c in co.co_consts if hasattr(c, "co_names")]
    out += list(f.__defaults__ or ())
    return out


def _classify(roots):
    """(modules, optimizers, loose tensors) among ``roots``, looking one level into containers and plain
    objects (``self.model``, ``self.opt`` of a trainer object) and at schedulers' optimizers."""
    mods, opts, tens, seen = [], [], [], set()

    def visit(x, depth):
        if id(x) in seen or x is None or isinstance(x, (int, float, str, bytes, bool, type)) or callable(x) and \
                not (_is_module(x) or hasattr(x, "__dict__")):
            return
        seen.add(id(x))
        if _is_tensor(x):
            tens.append(x)
        elif _is_module(x):
            mods.append(x)
        elif _is_optimizer(x):
            opts.append(x)
        elif hasattr(x, "optimizer") and _is_optimizer(getattr(x, "optimizer", None)):
            visit(x.optimizer, depth)
        elif depth < 1:
            if isinstance(x, (list, tuple, set)):
                for v in x:
                    visit(v, depth + 1)
            elif isinstance(x, dict):
                for v in x.values():
                    visit(v, depth + 1)
            elif hasattr(x, "__dict__") and not isinstance(x, type(sys)) and not callable(x):
                for v in vars(x).values():
                    visit(v, depth + 1)

    for r in roots:
        visit(r, 0)
    return mods, opts, tens


def _walk(mods):
    """Every submodule of ``mods`` once, and their parameters and buffers (tensors, once each)."""
    seen, ms, ts, tseen = set(), [], [], set()
    stack = list(reversed(mods))
    while stack:
        m = stack.pop()
        if id(m) in seen:
            continue
        seen.add(id(m))
        ms.append(m)
        for d in (m._parameters, m._buffers):
            for t in d.values():
                if t is not None and id(t) not in tseen:
                    tseen.add(id(t))
                    ts.append(t)
        stack += [c for c in reversed(list(m._modules.values())) if c is not None]
    return ms, ts


def _hyper(opts):
    """The optimizers' hyperparameters (every group's options but the params) as a comparable tuple."""
    out = []
    for o in opts:
        for g in o.param_groups:
            out.append(tuple(sorted((k, v if isinstance(v, (int, float, bool, str, type(None))) else
                                     tuple(v) if isinstance(v, tuple) else id(v))
                                    for k, v in g.items() if k != "params")))
    return tuple(out)


def _flags(opts):
    """What of the hyperparameters picks a kernel variant: each number's zero-ness, every other option as is."""
    out = []
    for o in opts:
        for g in o.param_groups:
            out.append(tuple(sorted((k, (v != 0) if isinstance(v, (int, float)) and not isinstance(v, bool) else
                                     v if isinstance(v, (bool, str, type(None))) else type(v).__name__)
                                    for k, v in g.items() if k != "params")))
    return tuple(out)


# ---------------------------------------------------------------------- pytrees of arguments and outputs
def _flatten(x, leaves):
    if isinstance(x, (list, tuple)):
        return (type(x), tuple(_flatten(v, leaves) for v in x))
    if isinstance(x, dict):
        return (dict, tuple((k, _flatten(v, leaves)) for k, v in x.items()))
    leaves.append(x)
    return None


def _unflatten(spec, it):
    if spec is None:
        return next(it)
    kind, items = spec
    if kind is dict:
        return {k: _unflatten(s, it) for k, s in items}
    vals = [_unflatten(s, it) for s in items]
    if kind is tuple or kind is list:
        return kind(vals)
    try:
        return kind(*vals)         # namedtuples
    except TypeError:
        return kind(vals)


def _sig(x):
    if _is_tensor(x):
        return ("T", x.dtype, x._shape, x._stride, x.device, x.requires_grad)
    if isinstance(x, (int, float, bool, str, type(None))):
        return (type(x), x)
    return ("obj", type(x), id(x))


# ---------------------------------------------------------------------- the compiled function
class _Fallback(Exception):
    pass


class _Entry:
    """The capture state of one guard signature."""

    __slots__ = ("stage", "prev", "retries", "graph", "statics", "out_spec", "out_leaves", "exit_grads",
                 "entry_grads", "regions", "rederive", "hyper", "reason", "launches_eager", "prev_rng", "rng")

    def __init__(self):
        self.stage = 0
        self.prev = None
        self.retries = 0
        self.graph = None
        self.reason = None
        self.hyper = None
        self.launches_eager = None
        self.prev_rng = None
        self.rng = None


class CompiledFunction:
    """A function compiled by :func:`compile_fn`; call it as the function. ``graphs()`` gives the replayable
    graphs per signature (their ``launch_count``)."""

    def __init__(self, fn, *, fullgraph=False, fuse=True, name=None):
        import weakref
        self.fn = fn
        self.fullgraph = fullgraph
        self.fuse = fuse
        self.name = name or getattr(fn, "__qualname__", repr(fn))
        self.cache = OrderedDict()
        self._noted = set()
        self._classified = (None, None)
        _all.append(weakref.ref(self))
        functools.update_wrapper(self, fn, updated=())

    # ------------------------------------------------------------------ guards
    def _objects(self):
        roots = _roots(self.fn)
        rid = tuple(id(r) for r in roots)
        if self._classified[0] != rid:
            self._classified = (rid, _classify(roots))
        return rid, self._classified[1]

    def _key(self, args, kwargs):
        rid, (mods, opts, loose) = self._objects()
        ms, ts = _walk(mods)
        seen = {id(t) for t in ts}
        for o in opts:
            for g in o.param_groups:
                for p in g["params"]:
                    if id(p) not in seen:
                        seen.add(id(p))
                        ts.append(p)
        ts += [t for t in loose if id(t) not in seen]
        leaves = []
        spec = _flatten((args, kwargs), leaves)
        key = [spec, tuple(_sig(x) for x in leaves), _dispatch.is_grad_enabled(), rid,
               tuple(m.training for m in ms),
               tuple((id(t._storage), t._shape, t._stride, t.dtype, t.requires_grad, t.grad is None) for t in ts),
               _flags(opts), _modes()]
        for o in opts:
            key.append(tuple(id(v._storage) for st in o.state.values() if st.__class__ is dict
                             for v in st.values() if isinstance(v, Tensor) and v._storage.host is None))
        return tuple(key), leaves, spec, ms, ts, opts

    # ------------------------------------------------------------------ call
    def __call__(self, *args, **kwargs):
        if _trace.current() is not None:          # called inside another capture: just run
            return self.fn(*args, **kwargs)
        try:
            key, leaves, spec, ms, ts, opts = self._key(args, kwargs)
            hash(key)
        except TypeError:
            return self._eager_note("unhashable arguments", args, kwargs)
        entry = self.cache.get(key)
        if entry is None:
            if len(self.cache) >= CACHE_SIZE:
                return self._eager_note(f"more than {CACHE_SIZE} input signatures (cache size limit); new "
                                        "signatures run eagerly", args, kwargs)
            entry = self.cache[key] = _Entry()
        else:
            self.cache.move_to_end(key)
        if entry.reason is not None:
            return self.fn(*args, **kwargs)
        if entry.stage == 3:
            return self._replay(entry, leaves, spec, ts, opts)
        if entry.stage == 0:
            entry.stage = 1
            return self.fn(*args, **kwargs)
        try:
            return self._capture(entry, leaves, spec, ts, opts)
        except _Fallback as fb:
            entry.reason = fb.args[0]
            _STATS["fallbacks"] += 1
            self._note(fb.args[0])
            return fb.args[1] if len(fb.args) > 1 else None

    def _eager_note(self, why, args, kwargs):
        if self.fullgraph:
            raise Unsupported(f"cltorch.compile({self.name}, fullgraph=True): {why}")
        self._note(why)
        return self.fn(*args, **kwargs)

    def _note(self, why):
        if why not in self._noted:
            self._noted.add(why)
            warnings.warn(f"cltorch.compile: {self.name} runs eagerly for this input signature: {why}",
                          RuntimeWarning, stacklevel=3)

    # ------------------------------------------------------------------ capture
    def _fail(self, why, result):
        if self.fullgraph:
            raise Unsupported(f"cltorch.compile({self.name}, fullgraph=True): {why}")
        raise _Fallback(why, result)

    def _capture(self, entry, leaves, spec, ts, opts):
        statics, sleaves = [], []
        for x in leaves:
            if _is_tensor(x):
                if x.device.type == "cpu":
                    self._fail("a cpu tensor argument: cpu ops partly run in numpy and wait where memory is "
                               "shared, so only cl devices are captured", self.fn(*_unflatten(spec, iter(leaves))[0],
                                                                  **_unflatten(spec, iter(leaves))[1]))
                if x.requires_grad:
                    args, kwargs = _unflatten(spec, iter(leaves))
                    self._fail("an argument that requires grad (its .grad would land on the static copy)",
                               self.fn(*args, **kwargs))
                with _no_grad():
                    s = x.detach().clone()
                statics.append((s, x))
                sleaves.append(s)
            else:
                sleaves.append(x)
        args, kwargs = _unflatten(spec, iter(sleaves))
        by_param = {id(t): t for t in ts}
        grads_before = {id(t): t.grad for t in ts}
        gver_before = {id(t): (t.grad._storage.version if t.grad is not None else None) for t in ts}
        gen = _default_generator()
        rng_before = (gen._seed, gen._offset)
        hyper_before = _hyper(opts)
        sver = [s._storage.version for s, _ in statics]
        live_before = _live_buffers() if entry.prev is not None else set()     # before the run that may be kept
        rec = _trace.Recorder(execute=True)
        handles = self._step_hooks(rec, opts)
        try:
            with rec:
                out = self.fn(*args, **kwargs)
        finally:
            for h in handles:
                h.remove()
        _STATS["captures"] += 1
        tr = rec.trace
        tr_rng = (rng_before, (gen._seed, gen._offset))
        if any(s._storage.version != v for (s, _), v in zip(statics, sver)):
            with _no_grad():
                for s_, x_ in statics:
                    x_.copy_(s_)          # this call's in-place writes land where eager would have put them
            self._fail("the function writes a tensor argument in place (replay works on a static copy of each "
                       "argument)", out)
        if tr.unsupported:
            self._fail(tr.unsupported[0], out)
        if _hyper(opts) != hyper_before:
            self._fail("the function changes optimizer hyperparameters (an lr scheduler stepped inside it?): call "
                       "scheduler.step() outside the compiled function", out)
        grads_changed = any(t.grad is not grads_before[id(t)] or
                            (t.grad is not None and t.grad._storage.version != gver_before[id(t)]) for t in ts) or \
            any(gr is not None for r in tr.regions for _, gr in r[0][3])      # a step saw gradients
        oleaves = []
        ospec = _flatten(out, oleaves)
        for o in oleaves:
            if _is_tensor(o):
                if o.requires_grad and not grads_changed:
                    self._fail("an output that requires grad, with no backward inside: replay cannot build an "
                               "autograd graph (compile the whole training step, or run under no_grad())", out)
                if o.device.type == "cpu":
                    self._fail("a cpu tensor output", out)
        for r in tr.regions:
            if r[0][1] or r[0][2]:
                self._fail(f"{type(r[0][0]).__name__}.step() called with arguments (a closure?)", out)
        if entry.prev is None:
            entry.prev, entry.prev_rng = tr, tr_rng
            return out
        why, varying = _trace.compare(entry.prev, tr)
        if why is None:
            in_region = set()
            for _, a, b in tr.regions:
                in_region.update(range(a, b))
            bad = [(i, j) for i, j in varying if i not in in_region]
            rng = _rng_plan(entry.prev, tr, entry.prev_rng, tr_rng, bad) if bad else None
            if rng is not None:
                bad = []
            if bad:
                k = tr.entries[bad[0][0]][2]
                lab = _trace.kernel_label(k)
                hint = " (random numbers: the generator's offset advances each call)" if "philox" in lab else ""
                self._fail(f"a scalar argument of {lab} changes between calls{hint}: replay would freeze it", out)
        if why is not None:
            entry.retries += 1
            if entry.retries > MAX_RETRIES:
                self._fail(why, out)
            entry.prev, entry.prev_rng = tr, tr_rng
            return out
        # the two runs agree: keep the second
        entry.rng = rng if why is None else None
        entry.launches_eager = tr.launches()
        entry.rederive = bool([1 for i, _ in varying])
        if self.fuse:
            tr, remap = fuse(tr)
            if entry.rng is not None:
                entry.rng = (entry.rng[0], entry.rng[1], [(remap[i], rel) for i, rel in entry.rng[2]])
        try:
            entry.graph = Graph(tr)
        except ValueError as e:
            self._fail(str(e), out)
        bufs = tr.buffers()
        g = entry.graph
        entry.statics = [(s._storage.buf, s._offset, s, s.is_contiguous(), g.slot(s._storage.buf)) for s, _ in statics]
        entry.entry_grads = [(by_param[pid], g) for pid, g in grads_before.items()
                             if g is not None and id(g._storage.buf) in bufs]
        entry.exit_grads = [(t, t.grad) for t in ts]
        entry.regions = [(r[0][0], r[0][3], a, b, _plan_map(r[0][0], tr.entries, a, b)) for r, a, b in
                         ((reg, reg[1], reg[2]) for reg in tr.regions)]
        entry.hyper = _hyper(opts)
        state = list(ts) + [t.grad for t in ts if t.grad is not None] + \
            [v for o in opts for st in o.state.values() if isinstance(st, dict) for v in st.values() if _is_tensor(v)]
        state_ids = {id(t) for t in state}
        state_bufs = {id(t._storage.buf) for t in state if t._storage.buf is not None}
        entry.out_spec = ospec
        static_bufs = {id(s._storage.buf) for s, _ in statics}
        static_slots = {id(b): slot for b, _, _, _, slot in entry.statics if slot is not None}
        leaves_out = []
        for o in oleaves:
            if not _is_tensor(o):
                leaves_out.append(("v", o))
            elif id(o) in state_ids:
                leaves_out.append(("t", o))
            else:
                st = o._storage
                mine = id(st.buf) not in static_bufs and id(st.buf) not in live_before and id(st.buf) not in state_bufs
                slot = g.slot(st.buf) if mine else None
                if slot is not None:     # made by the capture, used only by preset kernels: a fresh buffer per call
                    leaves_out.append(("r", slot, st.size, o._offset, o._shape, o._stride, o.dtype, o.device))
                else:
                    # a static argument's buffer (an argument returned, or a view of one) is read where the
                    # kernels were last pointed: the slot's current buffer
                    src = static_slots.get(id(st.buf)) or [st.buf]
                    leaves_out.append(("c", src, o._offset, o._shape, o._stride, o.dtype, o.device))
        entry.out_leaves = leaves_out
        entry.prev = None
        entry.stage = 3
        # this call's outputs keep the captured buffers: the next replay re-points ("r") or copies ("c")
        return out

    @staticmethod
    def _outputs(entry):
        """The outputs of a replay, enqueued before it: "r" leaves get a fresh storage that the graph's kernels
        are re-pointed at (one per buffer, so outputs sharing one still do), "c" leaves a copy after it."""
        outs, fresh = [], {}
        for leaf in entry.out_leaves:
            kind = leaf[0]
            if kind == "r":
                slot, size, off, shape, stride, dtype, device = leaf[1:]
                st = fresh.get(id(slot))
                if st is None:
                    st = fresh[id(slot)] = Storage.empty(size, dtype, device)
                    entry.graph.rebind(slot, st.buf)
                outs.append(Tensor._make(st, shape, stride, off))
            else:
                outs.append(leaf)
        return outs

    @staticmethod
    def _finish_outputs(entry, outs):
        res = [(_copy_out(*o[1:]) if o[0] == "c" else o[1]) if isinstance(o, tuple) else o for o in outs]
        return _unflatten(entry.out_spec, iter(res))

    @staticmethod
    def _step_hooks(rec, opts):
        """Mark each optimizer step as a trace region tagged (optimizer, args, kwargs, grads at the step)."""
        if not opts:
            return []
        from ..optim.optimizer import register_optimizer_step_pre_hook, register_optimizer_step_post_hook

        def pre(opt, args, kwargs):
            grads = [(p, p.grad) for g in opt.param_groups for p in g["params"]]
            rec.begin_region((opt, tuple(args), dict(kwargs), grads))

        def post(opt, args, kwargs):
            if rec._region is not None:
                rec.end_region()

        return [register_optimizer_step_pre_hook(pre), register_optimizer_step_post_hook(post)]

    # ------------------------------------------------------------------ replay
    def _replay(self, entry, leaves, spec, ts, opts):
        g = entry.graph
        ti = 0
        for x in leaves:
            if _is_tensor(x):
                buf, off, s, contig, slot = entry.statics[ti]
                ti += 1
                xb = x._storage.buf
                if slot is not None and x._offset == off and x._stride == s._stride and xb is not None:
                    g.rebind(slot, xb)      # the kernels read the argument where it is: no copy
                    continue
                if slot is not None:
                    g.rebind(slot, buf)
                if contig and x.is_contiguous():
                    n = s.numel() * s.dtype.itemsize
                    if n:
                        rt = s._storage.runtime()
                        with rt.lock:
                            rt.copy(buf, x._storage.buf, byte_count=n, src_offset=x._offset * s.dtype.itemsize,
                                    dst_offset=off * s.dtype.itemsize)
                            rt.pending = True
                else:
                    with _no_grad():
                        s.copy_(x)
        for p, eg in entry.entry_grads:
            if p.grad is not eg:
                with _no_grad():
                    eg.copy_(p.grad)
        if entry.regions:
            self._rederive(entry, opts)
        if entry.rng is not None:
            _rng_replay(g, entry.rng)
        outs = self._outputs(entry)
        g.replay()
        _STATS["replays"] += 1
        for p, gr in entry.exit_grads:
            if p.grad is not gr:
                p.grad = gr
        return self._finish_outputs(entry, outs)

    def _rederive(self, entry, opts):
        """Give the graph the scalars of this call's optimizer steps (lr, bias corrections, the step count),
        advancing each optimizer's host state as its ``step`` would. A fused-kernel optimizer's step is its
        ``_group_plan`` per group (the host half that eager runs too), whose scalars go to the recorded
        launches; any other step's Python is run in a dry run that records the arguments it would launch with,
        without launching (only when some scalar varied between the captures or a hyperparameter changed)."""
        g = entry.graph
        dry = None
        for opt, grads, a, b, plan in entry.regions:
            if plan is None:
                if dry is None:
                    dry = entry.rederive or _hyper(opts) != entry.hyper
                if not dry:
                    continue
            saved = [(p, p.grad) for p, gr in grads if p.grad is not gr]
            for p, gr in grads:
                if p.grad is not gr:
                    p.grad = gr
            try:
                ok = self._replan(g, opt, plan) if plan is not None else self._dry_run(g, opt, a, b)
            finally:
                for p, gr in saved:
                    p.grad = gr
            if not ok:
                raise RuntimeError(
                    f"cltorch.compile({self.name}): {type(opt).__name__}.step() no longer launches the work it "
                    "launched when captured; call cltorch.compiler.reset() after changing the optimizer")
        if dry:
            entry.hyper = _hyper(opts)

    @staticmethod
    def _replan(g, opt, plan):
        """One step's ``_group_plan`` per group, its scalars set on the recorded launches (see
        :func:`_plan_map`). False when the parameters no longer share scalars as they did when captured (eager
        would bucket them into other launches)."""
        launches, parts = plan
        sc = {}
        for group in opt.param_groups:
            for p, _, _, s in opt._group_plan(group)[2]:
                sc[id(p)] = s
        new = []
        for i, ps, first, n in launches:
            s = sc.get(id(ps[0]))
            if s is None or len(s) != n or any(sc.get(id(q)) != s for q in ps[1:]):
                return False
            new.append(s)
        if _partition(new) != parts:
            return False
        for (i, ps, first, n), s in zip(launches, new):
            g.set_scalars(i, first, s)
        return True

    @staticmethod
    def _dry_run(g, opt, a, b):
        """Run ``opt.step()`` under a recorder that does not launch, and give its launches' arguments to the
        graph's entries ``a:b``. False when it records other work than the capture did."""
        dry = _trace.Recorder(execute=False)
        with dry:
            opt.step()
        want = g.trace.entries[a:b]
        got = dry.trace.entries
        if dry.trace.unsupported or len(want) != len(got):
            return False
        for w, e in zip(want, got):
            if w[0] != e[0] or (w[0] == "k" and (w[2] is not e[2] or w[3] != e[3])):
                return False
        for i, (w, e) in enumerate(zip(want, got)):
            if w[0] == "k" and g.args_of(a + i) != e[5]:
                g.set_args(a + i, e[5])
        return True

    def graphs(self):
        """The replayable graphs captured so far (one per signature that reached replay)."""
        return [e.graph for e in self.cache.values() if e.graph is not None]

    def fallbacks(self):
        """The reasons signatures fell back to eager."""
        return [e.reason for e in self.cache.values() if e.reason is not None]


def _partition(tails):
    """Which launches share scalars: each launch's index of the first launch with equal scalars."""
    first = {}
    return tuple(first.setdefault(tuple(t), i) for i, t in enumerate(tails))


def _plan_map(opt, entries, a, b):
    """How a fused-kernel optimizer's captured step (entries ``a:b``) takes new scalars: ``([(entry, params
    it updates, position of its first scalar, number of scalars)], which launches share scalars)``. None
    when the optimizer has no ``_group_plan`` or the region holds anything but fused step launches over its
    parameters, each the only parameter on its buffer (then a replay uses the dry run)."""
    if getattr(opt, "_group_plan", None) is None or b <= a:
        return None
    from ..optim import _fused
    by_buf, shared = {}, set()
    for group in opt.param_groups:
        for p in group["params"]:
            k = id(p._storage.buf)
            if k in by_buf and by_buf[k] is not p:
                shared.add(k)
            by_buf[k] = p
    launches, tails = [], []
    for i in range(a, b):
        e = entries[i]
        lay = _fused.launch_layout(e[2]) if e[0] == "k" else None
        if lay is None:
            return None
        bufs = _fused.launch_params(e[5], lay)
        if not bufs or any(id(x) in shared or id(x) not in by_buf for x in bufs):
            return None
        first = len(e[5]) - lay[2] - 1
        launches.append((i, [by_buf[id(x)] for x in bufs], first, lay[2]))
        tails.append(e[5][first:first + lay[2]])
    return launches, _partition(tails)


_PHILOX_OFFSET = 5          # philox_fill's argument positions: 3, 4 the key (from the seed), 5 the counter offset


def _default_generator():
    from ..ops.random import default_generator
    return default_generator


def _rng_plan(tr_a, tr, rng_a, rng_b, varying):
    """When every varying scalar is a Philox counter offset that moved with the default generator (same seed,
    the same consumption per call, each launch's offset the generator's offset at the call's start plus a
    constant): ``(seed, consumed per call, [(entry, offset from the call's start)])``, else None."""
    (seed_a, start_a), (seed_b2, end_a) = rng_a
    (seed_b, start_b), (seed_e, end_b) = rng_b
    if not (seed_a == seed_b2 == seed_b == seed_e):
        return None
    used = (end_b - start_b) & 0xFFFFFFFFFFFFFFFF
    if used != ((end_a - start_a) & 0xFFFFFFFFFFFFFFFF) or used == 0:
        return None
    launches = []
    for i, j in varying:
        src = getattr(tr.entries[i][2], "_cltorch_src", None)
        if src is None or src[1] != "philox_fill" or j != _PHILOX_OFFSET:
            return None
    for i, e in enumerate(tr.entries):
        src = getattr(e[2], "_cltorch_src", None) if e[0] == "k" else None
        if src is not None and src[1] == "philox_fill":
            rel = (int(e[5][_PHILOX_OFFSET]) - start_b) & 0xFFFFFFFFFFFFFFFF
            rel_a = (int(tr_a.entries[i][5][_PHILOX_OFFSET]) - start_a) & 0xFFFFFFFFFFFFFFFF
            if rel >= used or rel != rel_a:
                return None          # not drawn from the default generator during this call
            launches.append((i, rel))
    return seed_b, used, launches


def _rng_replay(g, rng):
    """Give each recorded Philox launch the counter offset (and key) eager would use now, and advance the
    default generator by what one call consumes."""
    from ..ops import _philox_ref as ref
    seed, used, launches = rng
    gen = _default_generator()
    start = gen._offset
    key = ref.key_from_seed(gen._seed) if gen._seed != seed else None
    for i, rel in launches:
        if key is None:
            g.set_scalars(i, _PHILOX_OFFSET, ((start + rel) & ref.MASK64,))
        else:
            g.set_scalars(i, 3, (key[0], key[1], (start + rel) & ref.MASK64))
    gen._take(used)


def _copy_out(src, off, shape, stride, dtype, device):
    """A new tensor holding a copy of the captured output's elements (its strides kept); ``src`` is a one-item
    list holding the buffer to read (a slot's current buffer for arguments)."""
    buf = src[0]
    extent = 1
    for s, st in zip(shape, stride):
        if s == 0:
            extent = 0
            break
        extent += (s - 1) * st
    st_ = Storage.empty(extent, dtype, device)
    if extent:
        rt = st_.runtime()
        isz = dtype.itemsize
        with rt.lock:
            rt.copy(st_.buf, buf, byte_count=extent * isz, src_offset=off * isz)
            rt.pending = True
    return Tensor._make(st_, shape, stride)


def compile_fn(fn, fullgraph=False, fuse=True):
    """``fn`` compiled (a :class:`CompiledFunction`)."""
    return CompiledFunction(fn, fullgraph=fullgraph, fuse=fuse)
