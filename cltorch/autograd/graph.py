"""The dynamic tape: graph nodes, the recorder the dispatcher calls, and the backward engine.

Each recorded op call becomes a :class:`Node` holding the op, its context (saved tensors) and one edge
per tensor input: ``(next_node, input_nr)``. Leaves get an :class:`AccumulateGrad` node. The engine
counts dependencies and runs nodes from a ready queue, never recursing, so a graph 10,000 ops deep is
fine. Saved tensors are freed as nodes run unless ``retain_graph``.
"""
import sys
import threading

from .. import _dtype as D
from .._dispatch import Ctx, is_grad_enabled, set_grad_enabled_raw, set_recorder, _state as _grad_state
from .._tensor import Tensor, contiguous_strides
from ..ops.elementwise import pointwise

__all__ = ["Node", "AccumulateGrad", "run_backward", "RemovableHandle"]


class _AnomalyState(threading.local):
    on = False          # per thread; a class default, so reading it needs no failed attribute lookup


_anomaly = _AnomalyState()


def anomaly_enabled():
    return _anomaly.on


class RemovableHandle:
    _next = 0

    def __init__(self, store):
        self.store = store
        RemovableHandle._next += 1
        self.id = RemovableHandle._next

    def remove(self):
        self.store.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.remove()


def _camel(name):
    return "".join(p.capitalize() for p in name.strip("_").split("_"))


class Node:
    """A recorded op call: ``next_functions`` are (node, input_nr) pairs; ``name()`` is e.g. 'MulBackward0'."""

    __slots__ = ("op", "ctx", "edges", "structure", "out_meta", "pre_hooks", "hooks", "retains", "_name",
                 "__weakref__", "_metadata")

    def __init__(self, op, ctx, edges, structure, out_meta):
        self.op = op
        self.ctx = ctx
        self.edges = edges            # flat list: (node, input_nr) or None, one per tensor input
        self.structure = structure    # per positional arg: None (not a tensor), -1 (one tensor) or n (a list);
        #                               None as a whole when every positional arg is one tensor (the common case)
        self.out_meta = out_meta      # per output: (shape, dtype, device) or None
        self.pre_hooks = None         # {output_nr: {id: fn}} tensor hooks of non-leaf outputs
        self.hooks = None
        self.retains = None           # {output_nr: weakref to tensor} for retain_grad
        self._name = None
        self._metadata = None

    @property
    def metadata(self):
        """A dict for the user's (and anomaly mode's) notes on this node, made on first use."""
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    def name(self):
        if self._name is None:
            self._name = _camel(self.op.name) + "Backward0"
        return self._name

    @property
    def next_functions(self):
        return tuple((e[0], e[1]) if e is not None else (None, 0) for e in self.edges)

    def register_hook(self, fn):
        if self.hooks is None:
            self.hooks = {}
        h = RemovableHandle(self.hooks)
        self.hooks[h.id] = fn
        return h

    def register_prehook(self, fn):
        return self._add_pre_hook(0, fn)

    def _add_pre_hook(self, nr, fn):
        if self.pre_hooks is None:
            self.pre_hooks = {}
        store = self.pre_hooks.setdefault(nr, {})
        h = RemovableHandle(store)
        store[h.id] = fn
        return h

    def apply(self, grads):
        """Run the op's backward on the output gradients; returns one gradient per edge."""
        ctx = self.ctx
        if ctx is None or ctx._saved is None:
            raise RuntimeError("Trying to backward through the graph a second time (or directly access saved tensors "
                               "after they have already been freed). Saved intermediate values of the graph are "
                               "freed when you call .backward() or autograd.grad(). Specify retain_graph=True if you "
                               "need to backward through the graph a second time or if you need to access saved "
                               "tensors after calling backward.")
        if ctx.saved_outputs is not None and _grad_state.enabled:
            res = self._backward_recording(ctx, grads)
        else:
            res = self.op.backward(ctx, *grads)
        if not isinstance(res, tuple):
            res = (res,)
        if self.structure is None:      # one gradient per positional arg, each a tensor's
            n = len(self.edges)
            return res if len(res) == n else (res + (None,) * (n - len(res)))[:n]
        flat = []
        for s, r in zip(self.structure, res):
            if s is None:
                continue
            if s == -1:
                flat.append(r)
            else:
                rs = list(r) if r is not None else [None] * s
                flat.extend(rs)
        # args beyond what backward returned get no gradient
        n = sum(1 if s == -1 else s for s in self.structure if s is not None)
        flat += [None] * (n - len(flat))
        return flat

    def _backward_recording(self, ctx, grads):
        """The op's backward under create_graph: the outputs it saved (kept without this node, see ``record``) are
        handed to it as this node's outputs again, so the gradient it records leads back through this node."""
        plain = ctx._saved
        full = list(plain)
        for j, nr in ctx.saved_outputs:
            t = _alias(plain[j])
            t._requires_grad = True
            t.grad_fn = self
            t._output_nr = nr
            full[j] = t
        ctx._saved = tuple(full)
        try:
            return self.op.backward(ctx, *grads)
        finally:
            ctx._saved = plain

    def __repr__(self):
        return f"<{self.name()} object>"

    def __call__(self, *grads):
        return self.apply(list(grads))


class AccumulateGrad:
    """The node of a leaf tensor: adds incoming gradients into ``variable.grad``."""

    __slots__ = ("variable", "pre_hooks", "hooks", "__weakref__", "_metadata")
    edges = ()
    out_meta = None
    metadata = Node.metadata

    def __init__(self, variable):
        self.variable = variable
        self.pre_hooks = None
        self.hooks = None
        self._metadata = None

    def name(self):
        return "AccumulateGrad"

    @property
    def next_functions(self):
        return ()

    def __repr__(self):
        return "<AccumulateGrad object>"


def _edge(t):
    if not t._requires_grad:
        return None
    if t.grad_fn is not None:
        return (t.grad_fn, t._output_nr)
    acc = t.__dict__.get("_acc")
    if acc is None:
        acc = AccumulateGrad(t)
        t.__dict__["_acc"] = acc
    return (acc, 0)


def record(op, ctx, args, out):
    """Called by the dispatcher after a forward ran with recording off: attach a Node to the outputs."""
    edges, needs = [], []
    for a in args:      # the common case first: every positional argument is one tensor
        if not isinstance(a, Tensor):
            edges = None
            break
        if not a._requires_grad:
            edges.append(None)
            needs.append(False)
        else:
            edges.append((a.grad_fn, a._output_nr) if a.grad_fn is not None else _edge(a))
            needs.append(True)
    if edges is not None:
        structure = None
        ctx.needs_input_grad = tuple(needs)
    else:
        edges, structure, needs = [], [], []
        for a in args:
            if isinstance(a, Tensor):
                e = _edge(a)
                edges.append(e)
                structure.append(-1)
                needs.append(e is not None)
            elif type(a) in (list, tuple) and a and all(isinstance(b, Tensor) for b in a):
                es = [_edge(b) for b in a]
                edges.extend(es)
                structure.append(len(a))
                needs.append(any(e is not None for e in es))
            else:
                structure.append(None)
                needs.append(False)
        ctx.needs_input_grad = tuple(needs)
    diff = op.differentiable_outputs
    meta = []
    node = Node(op, ctx, edges, structure, meta)
    if out.__class__ is Tensor:     # one output
        if out.dtype._kind >= 2 and (diff is None or 0 in diff):   # floating or complex
            meta.append((out._shape, out.dtype, out.device))
            out._requires_grad = True
            out.grad_fn = node
            out._output_nr = 0
        else:
            meta.append(None)
    else:
        for i, o in enumerate(out if out.__class__ is tuple else (out,)):
            if isinstance(o, Tensor) and o.dtype._kind >= 2 and (diff is None or i in diff):   # floating or complex
                meta.append((o._shape, o.dtype, o.device))
                o._requires_grad = True
                o.grad_fn = node
                o._output_nr = i
            else:
                meta.append(None)
    saved = ctx._saved
    if saved:
        _unlink_saved_outputs(ctx, saved, node)
    if _anomaly.on:
        import traceback
        node.metadata["traceback_"] = "".join(traceback.format_stack()[:-3])
    return out


set_recorder(record)


def _alias(t):
    """A tensor over t's memory, shape, strides and offset, with none of its autograd state."""
    a = Tensor._make(t._storage, t._shape, t._stride, t._offset)
    a.dtype, a.device, a._base = t.dtype, t.device, t._base
    return a


def _unlink_saved_outputs(ctx, saved, node):
    """An op that saved its own output (tanh, sigmoid, exp, softmax...) would make a reference cycle: output ->
    node -> ctx -> output, so a graph dropped without a backward (a forward under grad mode whose loss is never
    used) would wait for Python's cycle collector to free its buffers. The ctx keeps such an output as a plain alias
    of its memory (the storage, so its version counter, is the same) and ``Node.apply`` re-attaches the node when a
    backward records (create_graph), as PyTorch's SavedVariable does."""
    outs = None
    for j, t in enumerate(saved):
        if t is not None and t.grad_fn is node and not t.__dict__:
            if outs is None:
                outs, full = [], list(saved)
            full[j] = _alias(t)
            outs.append((j, t._output_nr))
    if outs is not None:
        ctx._saved = tuple(full)
        ctx.saved_outputs = tuple(outs)


# ---------------------------------------------------------------------------------------------------- engine
def _zeros_meta(meta):
    shape, dtype, device = meta
    from ..ops.creation import zeros
    return zeros(shape, dtype=dtype, device=device)


def _accum(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def _check_nan(node, grads):
    for i, g in enumerate(grads):
        if g is not None and g.dtype.is_floating_point and g.isnan().any().item():
            tb = node.metadata.get("traceback_", "")
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output."
                               + (f"\nTraceback of forward call that caused the error:\n{tb}" if tb else ""))


def _fit(g, shape, dtype):
    """Reduce a broadcast gradient to the input's shape and dtype."""
    if g._shape != shape:
        from ..ops.views import sum_to_size
        g = sum_to_size(g, shape)
    if g.dtype is not dtype and dtype._kind >= 2:      # to a floating or complex input's dtype
        g = g.to(dtype)
    return g


def run_backward(roots, grad_roots, retain_graph=False, create_graph=False, inputs=None, allow_unused=False,
                 accumulate=True):
    """Back-propagate from ``roots`` (tensors) seeded with ``grad_roots``.

    accumulate=True adds into leaves' ``.grad`` (``Tensor.backward``); with ``inputs`` given and
    accumulate=False, returns the gradients of ``inputs`` instead (``autograd.grad``).
    """
    prev = set_grad_enabled_raw(create_graph)
    try:
        return _run(roots, grad_roots, retain_graph, create_graph, inputs, allow_unused, accumulate)
    finally:
        set_grad_enabled_raw(prev)


def _run(roots, grad_roots, retain_graph, create_graph, inputs, allow_unused, accumulate):
    # One pass counts, per reachable node, the edges that reach it; then nodes run from a ready stack once all
    # their gradients have arrived. Dicts are keyed by the node objects themselves (identity hashing); each
    # node's incoming gradients are one list, one slot per output.
    capture = {}        # (node, output_nr) -> indices into ``inputs`` (autograd.grad / backward(inputs=...))
    if inputs is not None:
        for k, t in enumerate(inputs):
            if not t.requires_grad:
                raise RuntimeError("One of the differentiated Tensors does not require grad")
            capture.setdefault(_edge(t), []).append(k)
    start = []
    for r, g in zip(roots, grad_roots):
        if not r.requires_grad:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
        start.append((_edge(r), g))
    deps = {}           # node -> edges reaching it; a node is pushed the first time one does
    stack = [e[0] for e, _ in start]
    roots = set(stack)
    while stack:
        for e in stack.pop().edges:
            if e is not None:
                nxt = e[0]
                d = deps.get(nxt)
                if d is None:
                    deps[nxt] = 1
                    if nxt not in roots:
                        stack.append(nxt)
                else:
                    deps[nxt] = d + 1
    # with inputs given, run only nodes that lead to a capture point
    needed = None
    if inputs is not None:
        needed = {k[0] for k in capture}
        for n in _postorder([e[0] for e, _ in start]):
            if any(e is not None and e[0] in needed for e in n.edges):
                needed.add(n)
    buffers = {}
    for (n, nr), g in start:
        buf = buffers.get(n)
        if buf is None:
            buf = buffers[n] = [None] * _n_outputs(n)
        buf[nr] = _accum(buf[nr], g)
    results = [None] * (len(inputs) if inputs is not None else 0)
    ready = []
    for e, _ in start:
        if e[0] not in deps and e[0] not in ready:
            ready.append(e[0])
    anomaly = anomaly_enabled()
    # A leaf whose incoming gradient a pending node also holds (add's backward hands one tensor to both operands)
    # would have to copy it into .grad; it waits in ``deferred`` until that node has run and let go of it, so
    # .grad takes the tensor itself (_grad_for_leaf), one kernel less. Each is retried after every node.
    deferred = []
    defer = not create_graph and not capture
    while ready or deferred:
        if deferred:
            for j in range(len(deferred) - 1, -1, -1):
                # references when no one else holds it: the entry's list and getrefcount's argument
                if not ready or sys.getrefcount(deferred[j][1]) <= 2:
                    item = deferred.pop(j)
                    _accumulate_leaf(item[0], item.pop(), capture, results, accumulate, inputs is None, create_graph)
            item = None
            if not ready:
                continue
        node = ready.pop()
        buf = buffers.pop(node, None)
        if node.__class__ is AccumulateGrad:
            if defer and ready and buf is not None and node.pre_hooks is None and sys.getrefcount(buf[0]) > 2:
                deferred.append([node, buf.pop()])   # the list's and getrefcount's argument's references, and more
            else:
                # popped, not read: the engine must hold no reference to the gradient (see _grad_for_leaf)
                _accumulate_leaf(node, buf.pop() if buf is not None else None, capture, results, accumulate,
                                 inputs is None, create_graph)
            buf = None
            continue
        if needed is not None and node not in needed:
            continue
        out_meta = node.out_meta
        grads = buf if buf is not None else [None] * len(out_meta)
        if node.pre_hooks or node.retains or capture:
            _output_hooks(node, grads, capture, results, create_graph)
        for i, g in enumerate(grads):
            if g is None and out_meta[i] is not None and getattr(node.ctx, "materialize_grads", True):
                grads[i] = _zeros_meta(out_meta[i])
        in_grads = node.apply(grads)
        if node.hooks:
            for fn in list(node.hooks.values()):
                r = fn(in_grads, grads)
                if r is not None:
                    in_grads = list(r)
        if anomaly:
            _check_nan(node, in_grads)
        if not retain_graph:
            node.ctx.free()
        for e, g in zip(node.edges, in_grads):
            if e is None:
                continue
            nxt, nr = e
            if g is not None:
                if nxt.__class__ is AccumulateGrad:
                    v = nxt.variable
                    if g._shape != v._shape or g.dtype is not v.dtype:
                        g = _fit(g, v._shape, v.dtype)
                    b = buffers.get(nxt)
                    if b is None:
                        b = buffers[nxt] = [None]
                else:
                    meta = nxt.out_meta[nr]
                    if meta is not None and (g._shape != meta[0] or g.dtype is not meta[1]):
                        g = _fit(g, meta[0], meta[1])
                    b = buffers.get(nxt)
                    if b is None:
                        b = buffers[nxt] = [None] * len(nxt.out_meta)
                old = b[nr]
                b[nr] = g if old is None else old + g
            d = deps[nxt] - 1
            deps[nxt] = d
            if d == 0:
                ready.append(nxt)
        grads = in_grads = g = b = old = buf = None   # the engine keeps no gradient past its node: see _grad_for_leaf
    if inputs is not None and not allow_unused and not accumulate:
        for k, r in enumerate(results):
            if r is None:
                raise RuntimeError("One of the differentiated Tensors appears to not have been used in the graph. "
                                   "Set allow_unused=True if this is the desired behavior.")
    return results


def _n_outputs(node):
    return 1 if node.__class__ is AccumulateGrad else len(node.out_meta)


def _accumulate_leaf(node, g, capture, results, accumulate, everything, create_graph):
    """A leaf's AccumulateGrad: its tensor pre-hooks, capture for ``autograd.grad``, then ``.grad`` (in place once it
    exists) and the post-accumulate-grad hooks. ``everything``: no ``inputs`` were named, so every leaf accumulates."""
    if node.pre_hooks:
        for fn in list(node.pre_hooks.get(0, {}).values()):
            r = fn(g)
            if r is not None:
                g = r
    cap = capture.get((node, 0)) if capture else None
    if cap:
        for k in cap:
            results[k] = g
    if accumulate and g is not None and (everything or cap is not None):
        v = node.variable
        if v.grad is None:
            v.grad = g if create_graph else _grad_for_leaf(g)
        else:
            v.grad = v.grad + g if create_graph else _add_into(v.grad, g)
        if v._post_acc_hooks:
            for fn in list(v._post_acc_hooks.values()):
                fn(v)


def _add_into(acc, g):
    """``acc += g`` for a leaf's existing ``.grad`` (the engine runs with grad mode off, so nothing records). A
    contiguous float32/float64 ``acc`` of g's dtype and shape takes the elementwise kernel straight away (what add_
    launches after its operand checks, which these cannot fail: same shape and dtype, no overlapping elements);
    anything else goes through ``add_``."""
    if acc.dtype is g.dtype and acc._shape == g._shape and acc.dtype._kind == 2 and acc.dtype is not D.float16 and \
            acc.is_contiguous():
        pointwise("x0 + x1", [acc, g], acc.dtype, acc.dtype, out=acc)
        acc._storage.version += 1
        return acc
    return acc.add_(g)


def _output_hooks(node, grads, capture, results, create_graph):
    """Per output of a non-leaf node, in place on ``grads``: the tensor hooks, retain_grad, and capture."""
    for i in range(len(grads)):
        g = grads[i]
        if node.pre_hooks and i in node.pre_hooks:
            for fn in list(node.pre_hooks[i].values()):
                r = fn(g)
                if r is not None:
                    g = r
        if node.retains and i in node.retains:
            t = node.retains[i]()
            if t is not None and g is not None:
                # PyTorch's retains-grad hook: a copy the first time, then accumulated as a leaf's grad is
                gg = g if create_graph else g.detach()
                t.grad = gg.clone() if t.grad is None else t.grad + gg
        cap = capture.get((node, i)) if capture else None
        if cap:
            for k in cap:
                results[k] = g
        grads[i] = g


def _grad_for_leaf(g):
    """What a leaf keeps as its first ``.grad``: g's memory without a copy when nothing else can see it, else a
    copy (PyTorch's AccumulateGrad does the same by use count). g qualifies when the engine holds the only
    reference to it (the caller's variable, this parameter, getrefcount's own argument), it is the contiguous
    whole of its storage, and only g (and g's base, held only by g) reference that storage. So ``linear``'s
    weight gradient, the transpose of a transposed product, is kept as it is. Returns a tensor cut from the graph.
    """
    if sys.getrefcount(g) <= 3 and g._offset == 0 and g.numel() == g._storage.size and g.is_contiguous():
        base = g._base
        if base is None:
            if sys.getrefcount(g._storage) <= 2:
                # a tensor the engine's kernels made (never recorded, no hooks): kept itself, else a new one
                return g if g.grad_fn is None and not g._requires_grad and not g.__dict__ and \
                    g._stride == contiguous_strides(g._shape) else Tensor._make(g._storage, g._shape)
        elif sys.getrefcount(base) <= 3 and sys.getrefcount(g._storage) <= 3:   # base: g._base, local, argument
            return Tensor._make(g._storage, g._shape)
    if g.is_contiguous() and g.dtype._kind == 2 and g.dtype is not D.float16:
        # clone's result for a contiguous g, as one elementwise copy: on cpu it queues behind the kernels that made g
        # instead of waiting for them to copy in numpy
        return pointwise("x0", [g], g.dtype, g.dtype)
    return g.detach().clone()


def _postorder(roots):
    out, seen = [], set()
    stack = [(r, False) for r in roots]
    while stack:
        n, done = stack.pop()
        if done:
            out.append(n)
            continue
        if n in seen:
            continue
        seen.add(n)
        stack.append((n, True))
        for e in n.edges:
            if e is not None and e[0] not in seen:
                stack.append((e[0], False))
    return out


Ctx = Ctx
D = D
