"""The dynamic tape: graph nodes, the recorder the dispatcher calls, and the backward engine.

Each recorded op call becomes a :class:`Node` holding the op, its context (saved tensors) and one edge
per tensor input: ``(next_node, input_nr)``. Leaves get an :class:`AccumulateGrad` node. The engine
counts dependencies and runs nodes from a ready queue, never recursing, so a graph 10,000 ops deep is
fine. Saved tensors are freed as nodes run unless ``retain_graph``.
"""
import sys
import threading

from .. import _dtype as D
from .._dispatch import Ctx, set_grad_enabled_raw, set_recorder
from .._tensor import Tensor

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
                 "__weakref__", "metadata")

    def __init__(self, op, ctx, edges, structure, out_meta):
        self.op = op
        self.ctx = ctx
        self.edges = edges            # flat list: (node, input_nr) or None, one per tensor input
        self.structure = structure    # per positional arg: None (not a tensor), -1 (one tensor) or n (a list)
        self.out_meta = out_meta      # per output: (shape, dtype, device) or None
        self.pre_hooks = None         # {output_nr: {id: fn}} tensor hooks of non-leaf outputs
        self.hooks = None
        self.retains = None           # {output_nr: weakref to tensor} for retain_grad
        self._name = None
        self.metadata = {}

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
        res = self.op.backward(ctx, *grads)
        if not isinstance(res, tuple):
            res = (res,)
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

    def __repr__(self):
        return f"<{self.name()} object>"

    def __call__(self, *grads):
        return self.apply(list(grads))


class AccumulateGrad:
    """The node of a leaf tensor: adds incoming gradients into ``variable.grad``."""

    __slots__ = ("variable", "pre_hooks", "hooks", "__weakref__", "metadata")
    edges = ()
    out_meta = None

    def __init__(self, variable):
        self.variable = variable
        self.pre_hooks = None
        self.hooks = None
        self.metadata = {}

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
    outs = out if isinstance(out, tuple) else (out,)
    diff = op.differentiable_outputs
    meta = []
    node = Node(op, ctx, edges, structure, meta)
    for i, o in enumerate(outs):
        if isinstance(o, Tensor) and (o.dtype.is_floating_point or o.dtype.is_complex) and (diff is None or i in diff):
            meta.append((o._shape, o.dtype, o.device))
            o._requires_grad = True
            o.grad_fn = node
            o._output_nr = i
        else:
            meta.append(None)
    if anomaly_enabled():
        import traceback
        node.metadata["traceback_"] = "".join(traceback.format_stack()[:-3])
    return out


set_recorder(record)


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


def _fit(g, meta):
    """Reduce a broadcast gradient to the input's shape and dtype."""
    if g is None or meta is None:
        return g
    shape, dtype, device = meta
    if g._shape != shape:
        from ..ops.views import sum_to_size
        g = sum_to_size(g, shape)
    if g.dtype is not dtype and (dtype.is_floating_point or dtype.is_complex):
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
    # capture points for autograd.grad / backward(inputs=...)
    capture = {}
    if inputs is not None:
        for k, t in enumerate(inputs):
            if not t.requires_grad:
                raise RuntimeError(f"One of the differentiated Tensors does not require grad")
            e = _edge(t)
            capture.setdefault((id(e[0]), e[1]), []).append(k)
    # dependency counts over the reachable graph (iterative DFS)
    deps = {}
    start = []
    for r, g in zip(roots, grad_roots):
        if not r.requires_grad:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
        e = _edge(r)
        start.append((e, g))
    seen = set()
    stack = [e[0] for e, _ in start]
    nodes = {}
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        nodes[id(n)] = n
        for e in n.edges:
            if e is not None:
                deps[id(e[0])] = deps.get(id(e[0]), 0) + 1
                if id(e[0]) not in seen:
                    stack.append(e[0])
    # with inputs given, run only nodes that lead to a capture point
    needed = None
    if inputs is not None:
        cap_nodes = {k[0] for k in capture}
        needed = set(cap_nodes)
        # reverse topological marking: iterate until stable (graphs are DAGs; use post-order)
        order = _postorder([e[0] for e, _ in start])
        for n in order:
            if any(e is not None and id(e[0]) in needed for e in n.edges):
                needed.add(id(n))
    buffers = {}
    for e, g in start:
        buf = buffers.setdefault(id(e[0]), {})
        buf[e[1]] = _accum(buf.get(e[1]), g)
    results = [None] * (len(inputs) if inputs is not None else 0)
    ready = [e[0] for e, _ in start if deps.get(id(e[0]), 0) == 0]
    ready_ids = set()
    uniq = []
    for n in ready:
        if id(n) not in ready_ids:
            ready_ids.add(id(n))
            uniq.append(n)
    ready = uniq
    anomaly = anomaly_enabled()
    while ready:
        node = ready.pop()
        buf = buffers.pop(id(node), {})
        nid = id(node)
        if isinstance(node, AccumulateGrad):
            g = buf.pop(0, None)
            if node.pre_hooks:
                for fn in list(node.pre_hooks.get(0, {}).values()):
                    r = fn(g)
                    if r is not None:
                        g = r
            if (nid, 0) in capture:
                for k in capture[(nid, 0)]:
                    results[k] = g
            if accumulate and g is not None and (inputs is None or (nid, 0) in capture):
                v = node.variable
                if v.grad is None:
                    v.grad = g if create_graph else _grad_for_leaf(g)
                else:
                    v.grad = v.grad + g if create_graph else v.grad.add_(g.detach())
                if v._post_acc_hooks:
                    for fn in list(v._post_acc_hooks.values()):
                        fn(v)
            continue
        if needed is not None and nid not in needed:
            continue
        grads = []
        for i, meta in enumerate(node.out_meta):
            g = buf.get(i)
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
            if (nid, i) in capture:
                for k in capture[(nid, i)]:
                    results[k] = g
            if g is None and meta is not None:
                mat = getattr(node.ctx, "materialize_grads", True)
                g = _zeros_meta(meta) if mat else None
            grads.append(g)
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
                meta = nxt.out_meta[nr] if not isinstance(nxt, AccumulateGrad) else \
                    (nxt.variable._shape, nxt.variable.dtype, nxt.variable.device)
                g = _fit(g, meta)
                b = buffers.setdefault(id(nxt), {})
                b[nr] = _accum(b.get(nr), g)
            d = deps[id(nxt)] - 1
            deps[id(nxt)] = d
            if d == 0:
                ready.append(nxt)
        grads = in_grads = g = b = None   # the engine keeps no gradient past its node: see _grad_for_leaf
    if inputs is not None and not allow_unused and not accumulate:
        for k, r in enumerate(results):
            if r is None:
                raise RuntimeError("One of the differentiated Tensors appears to not have been used in the graph. "
                                   "Set allow_unused=True if this is the desired behavior.")
    return results


def _grad_for_leaf(g):
    """What a leaf keeps as its first ``.grad``: g's memory without a copy when nothing else can see it, else a
    copy (PyTorch's AccumulateGrad does the same by use count). g qualifies when the engine holds the only
    reference to it (the caller's variable, this parameter, getrefcount's own argument), it is the contiguous
    whole of its storage, and only g (and g's base, held only by g) reference that storage. So ``linear``'s
    weight gradient, the transpose of a transposed product, is kept as it is. Returns a tensor cut from the graph.
    """
    if sys.getrefcount(g) <= 3 and g._offset == 0 and g.numel() == g._storage.size and g.is_contiguous():
        base = g._base
        if (sys.getrefcount(g._storage) <= 2) if base is None else \
                (sys.getrefcount(base) <= 3 and sys.getrefcount(g._storage) <= 3):   # base: g._base, local, argument
            return Tensor._make(g._storage, g._shape)
    return g.detach().clone()


def _postorder(roots):
    out, seen = [], set()
    stack = [(r, False) for r in roots]
    while stack:
        n, done = stack.pop()
        if done:
            out.append(n)
            continue
        if id(n) in seen:
            continue
        seen.add(id(n))
        stack.append((n, True))
        for e in n.edges:
            if e is not None and id(e[0]) not in seen:
                stack.append((e[0], False))
    return out


Ctx = Ctx
D = D
