"""Floor 6: automatic differentiation with PyTorch's semantics.

``backward``, ``grad``, grad modes (``no_grad``, ``enable_grad``, ``set_grad_enabled``,
``inference_mode``: context managers and decorators, thread-local), custom ``Function``, tensor hooks,
``retain_grad``, in-place correctness through storage version counters, ``detect_anomaly``, and
``gradcheck``/``gradgradcheck`` (central finite differences in float64).
"""
import functools

from .. import _dtype as D
from .._dispatch import (Ctx, Op, call, is_grad_enabled, set_grad_enabled_raw, set_inference_raw,
                         is_inference_mode_enabled)
from .._tensor import Tensor
from . import graph as _graph
from .graph import Node, AccumulateGrad, run_backward, RemovableHandle
from .gradcheck import gradcheck, gradgradcheck
from .variable import Variable  # noqa: F401  (torch.autograd.Variable)

__all__ = ["backward", "grad", "no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "Function",
           "detect_anomaly", "set_detect_anomaly", "gradcheck", "gradgradcheck", "is_grad_enabled", "Node",
           "inplace_rebase"]


class _GradModeBase:
    """Context manager and decorator that sets grad mode (thread-local) and restores it afterwards."""

    mode = True

    def __enter__(self):
        self._prev = set_grad_enabled_raw(self.mode)
        return self

    def __exit__(self, *exc):
        set_grad_enabled_raw(self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            with self.__class__(*self._args()):
                return fn(*a, **k)
        return wrapper

    def _args(self):
        return ()


class no_grad(_GradModeBase):
    """Disables gradient recording."""
    mode = False


class enable_grad(_GradModeBase):
    """Enables gradient recording (inside a no_grad block)."""
    mode = True


class set_grad_enabled(_GradModeBase):
    """Sets grad mode to ``mode``; takes effect at once (as a call) and as a context manager."""

    def __init__(self, mode):
        self.mode = bool(mode)
        self._prev = set_grad_enabled_raw(self.mode)

    def __enter__(self):
        return self

    def _args(self):
        return (self.mode,)

    def __call__(self, fn):
        set_grad_enabled_raw(self._prev)
        return super().__call__(fn)


class inference_mode(_GradModeBase):
    """Like no_grad (``mode=True``): no recording inside. Also usable as ``@inference_mode()``."""

    def __init__(self, mode=True):
        self.mode = not mode
        self._inf = bool(mode)

    def __enter__(self):
        self._prev = set_grad_enabled_raw(self.mode)
        self._prev_inf = set_inference_raw(self._inf)
        return self

    def __exit__(self, *exc):
        set_grad_enabled_raw(self._prev)
        set_inference_raw(self._prev_inf)
        return False

    def _args(self):
        return (self._inf,)


class detect_anomaly:
    """Inside, a backward that produces NaN raises RuntimeError naming the op, with the forward's traceback."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan

    def __enter__(self):
        self._prev = getattr(_graph._anomaly, "on", False)
        _graph._anomaly.on = self.check_nan
        return self

    def __exit__(self, *exc):
        _graph._anomaly.on = self._prev
        return False


def set_detect_anomaly(mode):
    _graph._anomaly.on = bool(mode)


def is_anomaly_enabled():
    return _graph.anomaly_enabled()


def _make_grads(outputs, grad_outputs, create_graph):
    from ..ops.creation import ones_like
    res = []
    for o, g in zip(outputs, grad_outputs):
        if g is None:
            if o.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            g = ones_like(o)
        elif not isinstance(g, Tensor):
            from ..ops.creation import full_like
            g = full_like(o, g)
        elif g._shape != o._shape:
            raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of {tuple(g._shape)} and output[0] has "
                               f"a shape of {tuple(o._shape)}.")
        res.append(g)
    return res


def _seq(x):
    if x is None:
        return None
    return list(x) if isinstance(x, (list, tuple)) else [x]


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulates gradients of ``tensors`` into the leaves' ``.grad`` (or only into ``inputs``)."""
    tensors = _seq(tensors)
    grads = _seq(grad_tensors) or [None] * len(tensors)
    if retain_graph is None:
        retain_graph = create_graph
    for t in tensors:
        if not t.requires_grad:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
    grads = _make_grads(tensors, grads, create_graph)
    run_backward(tensors, grads, retain_graph, create_graph, inputs=_seq(inputs), allow_unused=True, accumulate=True)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """The gradients of ``outputs`` with respect to ``inputs`` (a tuple), without touching ``.grad``."""
    outputs = _seq(outputs)
    single = isinstance(inputs, Tensor)
    inputs = _seq(inputs)
    go = _seq(grad_outputs) or [None] * len(outputs)
    if retain_graph is None:
        retain_graph = create_graph
    if allow_unused is None:
        allow_unused = materialize_grads
    go = _make_grads(outputs, go, create_graph)
    res = run_backward(outputs, go, retain_graph, create_graph, inputs=inputs, allow_unused=allow_unused,
                       accumulate=False)
    if materialize_grads:
        from ..ops.creation import zeros_like
        res = [r if r is not None else zeros_like(i) for r, i in zip(res, inputs)]
    return tuple(res)


# ------------------------------------------------------------------------------------------------ Function
class FunctionCtx(Ctx):
    """The ``ctx`` of a custom Function: save_for_backward, saved_tensors, needs_input_grad,
    mark_non_differentiable, mark_dirty, set_materialize_grads."""

    def mark_non_differentiable(self, *tensors):
        self.__dict__.setdefault("_non_diff", set()).update(id(t) for t in tensors)

    def mark_dirty(self, *tensors):
        self.__dict__["_dirty"] = tensors

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)


class Function:
    """A custom differentiable op: subclass with static ``forward(ctx, *args)`` and ``backward(ctx, *grads)``,
    call with ``.apply(*args)``."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    @classmethod
    def _backward_adapter(cls, ctx, *grads):
        r = cls.backward(ctx, *grads)
        return r if isinstance(r, tuple) else (r,)

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = FunctionCtx(cls.__name__)
        needs = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        ctx.needs_input_grad = needs
        record = is_grad_enabled() and any(needs)
        prev = set_grad_enabled_raw(False)
        try:
            out = cls.forward(ctx, *args, **kwargs)
        finally:
            set_grad_enabled_raw(prev)
        if not record:
            return out
        nd = ctx.__dict__.get("_non_diff", set())
        outs = out if isinstance(out, tuple) else (out,)
        # outputs that alias inputs become fresh views so the graph attaches to them
        fixed = []
        for o in outs:
            if isinstance(o, Tensor) and any(o is a for a in args):
                o = o.view_as(o) if False else Tensor._make(o._storage, o._shape, o._stride, o._offset)
            fixed.append(o)
        out = tuple(fixed) if isinstance(out, tuple) else fixed[0]
        op = Op(cls.__name__, None, cls._backward_adapter,
                differentiable_outputs=tuple(i for i, o in enumerate(fixed) if id(o) not in nd and
                                             not (isinstance(o, Tensor) and id(outs[i]) in nd)))
        res = _graph.record(op, ctx, args, out)
        ctx.needs_input_grad = needs
        node = (fixed[0] if fixed and isinstance(fixed[0], Tensor) else None)
        if node is not None and node.grad_fn is not None:
            node.grad_fn._name = cls.__name__ + "Backward"
        for o in fixed:
            if isinstance(o, Tensor) and o.grad_fn is not None:
                o.grad_fn._name = cls.__name__ + "Backward"
        return res


# ------------------------------------------------------------------------------------------------ in-place
def inplace_rebase(self, fn, opname):
    """Run an in-place op under autograd: compute ``fn(original self)`` out of place (recorded), write the values
    into self, and make self (or its base, for a view) the output of the new node."""
    if self.is_leaf and self.requires_grad:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    base = self._base
    if base is not None and base.is_leaf and base.requires_grad:
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    link = (base if base is not None else self).__dict__.get("_complex_of")   # self views view_as_real(link)
    if link is not None:
        if link.is_leaf and link.requires_grad:
            raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place "
                               "operation.")
        if link._base is not None:
            raise NotImplementedError("an in-place op on the real view of a complex view, under autograd: apply it "
                                      "to the real view of the complex tensor itself")
        res = inplace_rebase_real(self, fn, opname, base)
        c = call(_vc_op(), base if base is not None else self)      # link's values, through the rebased real view
        link.grad_fn, link._output_nr, link._requires_grad = c.grad_fn, c._output_nr, c._requires_grad
        return res
    return inplace_rebase_real(self, fn, opname, base)


def _vc_op():
    from ..ops.complex import _vc_op as v
    return v


def inplace_rebase_real(self, fn, opname, base):
    """inplace_rebase's work once the leaf checks passed (see there)."""
    from ..ops.views import _copy_into, as_strided, _strided_op
    src = call(_clone_op(), self) if self.requires_grad else self.detach()
    r = fn(src)
    if r._shape != self._shape:
        raise RuntimeError(f"output with shape {list(self._shape)} doesn't match the broadcast shape "
                           f"{list(r._shape)}")
    if r.dtype is not self.dtype:
        r = r.to(self.dtype)
    if base is not None and (base.requires_grad or r.requires_grad):
        if not base.is_contiguous():
            base_view = base
        rel = self._offset - base._offset
        new_base = call(_scatter_op, base, r, self._shape, self._stride, rel)
        prev = set_grad_enabled_raw(False)
        try:
            _copy_into(self, r.detach())
        finally:
            set_grad_enabled_raw(prev)
        self._storage.version += 1
        base.grad_fn, base._output_nr, base._requires_grad = new_base.grad_fn, new_base._output_nr, True
        v = call(_strided_op, base, self._shape, self._stride, self._offset,
                 lambda t, a=self._shape, b=self._stride, o=rel: as_strided(t, a, b, t._offset + o))
        self.grad_fn, self._output_nr, self._requires_grad = v.grad_fn, v._output_nr, True
        return self
    prev = set_grad_enabled_raw(False)
    try:
        _copy_into(self, r.detach())
    finally:
        set_grad_enabled_raw(prev)
    self._storage.version += 1
    self.grad_fn, self._output_nr = r.grad_fn, r._output_nr
    self._requires_grad = r.requires_grad
    return self


def _clone_op():
    from ..ops.views import _clone_op as c
    return c


def _scatter_fwd(ctx, base, r, shape, stride, rel):
    from ..ops.views import _copy_into, _materialize
    out = _materialize(base)
    view = out._view(shape, stride, rel)
    _copy_into(view, r)
    if ctx is not None:
        ctx.geom = (shape, stride, rel)
    return out


def _scatter_bwd(ctx, g):
    shape, stride, rel = ctx.geom
    gc = g.contiguous()
    from ..ops.views import as_strided
    from ..ops.creation import zeros
    g_r = as_strided(gc, shape, stride, gc._offset + rel)
    g_base = call(_scatter_op, gc, zeros(shape, dtype=g.dtype, device=g.device), shape, stride, rel)
    return g_base, g_r, None, None, None


from .._dispatch import register as _register  # noqa: E402

_scatter_op = _register("as_strided_scatter", _scatter_fwd, _scatter_bwd)


# ------------------------------------------------------------------------------------------------ Tensor methods
def _tensor_backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Computes the gradient of this tensor with respect to graph leaves (see ``autograd.backward``)."""
    backward(self, gradient, retain_graph, create_graph, inputs)


def _register_hook(self, hook):
    """Registers ``hook(grad) -> Tensor or None`` called when this tensor's gradient is computed."""
    if not self.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if self.grad_fn is None:
        acc = _graph._edge(self)[0]
        if acc.pre_hooks is None:
            acc.pre_hooks = {}
        store = acc.pre_hooks.setdefault(0, {})
    else:
        node = self.grad_fn
        if node.pre_hooks is None:
            node.pre_hooks = {}
        store = node.pre_hooks.setdefault(self._output_nr, {})
    h = RemovableHandle(store)
    store[h.id] = hook
    return h


def _register_post_accumulate_grad_hook(self, hook):
    if self._post_acc_hooks is None:
        self._post_acc_hooks = {}
    h = RemovableHandle(self._post_acc_hooks)
    self._post_acc_hooks[h.id] = hook
    return h


def _retain_grad(self):
    """Keeps ``.grad`` for a non-leaf tensor after backward."""
    if not self.requires_grad:
        raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
    if self.grad_fn is None:
        return
    import weakref
    node = self.grad_fn
    if node.retains is None:
        node.retains = {}
    node.retains[self._output_nr] = weakref.ref(self)
    self._retains_grad = True


Tensor.backward = _tensor_backward
Tensor.register_hook = _register_hook
Tensor.register_post_accumulate_grad_hook = _register_post_accumulate_grad_hook
Tensor.retain_grad = _retain_grad
Tensor.retains_grad = property(lambda self: self._retains_grad)

D = D
Node, AccumulateGrad = Node, AccumulateGrad
