"""The op registry, grad-mode state, and the dispatcher through which Tensor methods reach ops.

An op is registered once with its forward and its derivative (:class:`Op`). Calling it through
:func:`call` runs the forward with gradient recording off, then, if grad mode is on and a tensor
input requires grad, hands the op, its context and its inputs to the recorder that
``cltorch.autograd`` installs (``set_recorder``). So this floor knows nothing of the graph, and
autograd knows ops only through this registry.
"""
import threading

__all__ = ["Op", "register", "REGISTRY", "call", "is_grad_enabled", "set_grad_enabled_raw",
           "is_inference_mode_enabled", "Ctx"]

REGISTRY = {}


class _GradState(threading.local):
    def __init__(self):
        self.enabled = True
        self.inference = False


_state = _GradState()


def is_grad_enabled():
    return _state.enabled


def set_grad_enabled_raw(mode):
    prev = _state.enabled
    _state.enabled = bool(mode)
    return prev


def is_inference_mode_enabled():
    return _state.inference


def set_inference_raw(mode):
    prev = _state.inference
    _state.inference = bool(mode)
    return prev


class Ctx:
    """Per-call context: what the forward keeps for the backward.

    ``save_for_backward(*tensors)`` records each tensor with its storage version, and
    ``saved_tensors`` checks the versions, raising PyTorch's "modified by an inplace operation" error.
    Other values are kept as plain attributes.
    """

    __slots__ = ("_saved", "_versions", "op_name", "needs_input_grad", "__dict__")

    def __init__(self, op_name=""):
        self._saved = ()
        self._versions = ()
        self.op_name = op_name
        self.needs_input_grad = ()

    def save_for_backward(self, *tensors):
        self._saved = tensors
        self._versions = tuple(t._storage.version if t is not None else 0 for t in tensors)

    @property
    def saved_tensors(self):
        for i, (t, v) in enumerate(zip(self._saved, self._versions)):
            if t is not None and t._storage.version != v:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by an inplace "
                    f"operation: [{t.dtype.name} tensor of shape {list(t.shape)}], which is output/input {i} "
                    f"of {self.op_name}Backward, is at version {t._storage.version}; expected version {v} "
                    "instead. Hint: the backtrace further above can point at the operation that failed to "
                    "compute its gradient.")
        if self._saved is None:
            raise RuntimeError("Trying to backward through the graph a second time (or directly access saved "
                               "tensors after they have already been freed). Saved intermediate values of the "
                               "graph are freed when you call .backward() or autograd.grad(). Specify "
                               "retain_graph=True if you need to backward through the graph a second time.")
        return self._saved

    def free(self):
        self._saved = None


class Op:
    """A registered op: ``forward(ctx, *args, **kw)`` computes outputs (a Tensor or a tuple of them)
    without recording; ``backward(ctx, *grad_outputs)`` returns one gradient per positional argument
    (None where not differentiable), written with differentiable tensor ops so that
    ``create_graph=True`` gives higher-order gradients. ``backward=None`` marks a non-differentiable op.
    """

    __slots__ = ("name", "forward", "backward", "differentiable_outputs", "doc")

    def __init__(self, name, forward, backward=None, differentiable_outputs=None, doc=None):
        self.name = name
        self.forward = forward
        self.backward = backward
        self.differentiable_outputs = differentiable_outputs   # None: all floating outputs
        self.doc = doc

    def __repr__(self):
        return f"Op({self.name})"


def register(name, forward, backward=None, **kw):
    """Register an op under ``name``; returns the Op. Re-registering a name raises."""
    if name in REGISTRY:
        raise ValueError(f"op '{name}' is registered twice")
    op = Op(name, forward, backward, **kw)
    REGISTRY[name] = op
    return op


_recorder = [None]


def set_recorder(fn):
    _recorder[0] = fn


def _needs_grad(args):
    for a in args:
        if a.__class__ in _SCALARS:
            continue
        if getattr(a, "requires_grad", None):
            return True
        if a.__class__ in (list, tuple):
            for b in a:
                if getattr(b, "requires_grad", False):
                    return True
    return False


_SCALARS = frozenset((int, float, bool, type(None), str))


def call(op, *args, **kw):
    """Run a registered op; record it for autograd when grad mode is on and an input requires grad."""
    if _state.enabled and op.backward is not None and _needs_grad(args):
        ctx = Ctx(op.name)
        prev = _state.enabled
        _state.enabled = False
        try:
            out = op.forward(ctx, *args, **kw)
        finally:
            _state.enabled = prev
        return _recorder[0](op, ctx, args, out)
    return op.forward(None, *args, **kw)
