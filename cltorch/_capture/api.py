"""The public faces of the capture machinery: ``cltorch.compile`` (with ``OptimizedModule``) and
``cltorch.cl.CLGraph`` / ``cltorch.cl.graph`` (CUDA Graph semantics)."""
import sys

from . import trace as _trace
from .compile import CompiledFunction, Unsupported
from .fusion import fuse
from .graph import Graph

__all__ = ["compile", "OptimizedModule", "CLGraph", "graph", "Unsupported"]

MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
CAPTURING_BACKENDS = ("inductor", "cudagraphs")
EAGER_BACKENDS = ("eager", "aot_eager")
_noted = set()


def _note(msg):
    if msg not in _noted:
        _noted.add(msg)
        print(msg, file=sys.stderr)


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None,  # noqa: A001
            disable=False):
    """PyTorch's ``torch.compile``: capture, fuse and replay ``model`` (a Module or a function) per input signature.

    Works as ``compile(fn)``, ``@compile`` and ``@compile(mode=...)``. A Module comes back as an
    :class:`OptimizedModule` whose ``forward`` is compiled (its ``state_dict`` keys get PyTorch's ``_orig_mod.``
    prefix); a function comes back as a :class:`~cltorch._capture.compile.CompiledFunction`.

    What happens per call is described in ``cltorch/_capture/compile.py``: the first call with a new signature
    runs eagerly, the next two are captured and checked against each other, later ones replay the recorded
    kernels (fused chains of pointwise ops included) with the new inputs copied into static buffers. Shapes,
    dtypes, strides, devices and ``requires_grad`` of the arguments, grad mode, the modules' ``training`` flags and
    the identity of the parameters, buffers and optimizer states the function closes over are the guards.

    Args:
        fullgraph: True raises :class:`Unsupported` (a RuntimeError) where the default falls back to eager with a
            one-time warning (a host read such as ``.item()``, a cpu tensor, a scalar that changes per call).
        dynamic: accepted; every distinct shape is its own capture either way (no symbolic shapes), up to 8
            signatures per function, after which new signatures run eagerly.
        backend: ``"inductor"`` (default) and ``"cudagraphs"`` capture and replay; ``"eager"`` and
            ``"aot_eager"`` run the function eagerly. A callable backend (which would receive an FX graph) raises
            NotImplementedError: no FX graph is built here.
        mode: ``None``, ``"default"``, ``"reduce-overhead"``, ``"max-autotune"``, ``"max-autotune-no-cudagraphs"``:
            all take the same path (capture and replay is what reduce-overhead means; kernels are already tuned
            by the device profile). Other values raise RuntimeError, as in PyTorch.
        options: ``{"fusion": False}`` turns off fusing pointwise chains; other keys are reported once and ignored.
        disable: True returns ``model`` unchanged.

    Raises:
        RuntimeError: an unknown ``mode`` or ``backend``, or both ``mode`` and ``options`` given.
        NotImplementedError: a callable ``backend``.
    """
    if model is None:
        def deco(m):
            return compile(m, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options,
                           disable=disable)
        return deco
    if mode not in MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: "
                           + ", ".join(str(m) for m in MODES if m is not None))
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    if callable(backend):
        raise NotImplementedError("cltorch.compile: a callable backend receives an FX graph, and cltorch builds none "
                                  "(it records kernel launches instead); use backend='inductor' or 'eager'")
    if backend not in CAPTURING_BACKENDS + EAGER_BACKENDS:
        raise RuntimeError(f"Invalid backend: {backend!r}; cltorch.compile knows "
                           + ", ".join(repr(b) for b in CAPTURING_BACKENDS + EAGER_BACKENDS))
    fuse_on = True
    for k, v in (options or {}).items():
        if k == "fusion":
            fuse_on = bool(v)
        else:
            _note(f"cltorch.compile: option {k!r} has no counterpart here and is ignored")
    if disable or backend in EAGER_BACKENDS:
        return model
    from .compile import _is_module
    if _is_module(model):
        return OptimizedModule(model, fullgraph=fullgraph, fuse=fuse_on)
    if not callable(model):
        raise TypeError(f"cltorch.compile expects a Module or a callable, got {type(model).__name__}")
    return CompiledFunction(model, fullgraph=fullgraph, fuse=fuse_on)


def _module_base():
    from ..nn.modules.module import Module
    return Module


class _LazyModuleMeta(type):
    """Makes ``OptimizedModule`` a ``cltorch.nn.Module`` subclass on first use (nn is floors above ops)."""
    _cls = None

    def __call__(cls, *args, **kwargs):
        return _optimized_class()(*args, **kwargs)

    def __instancecheck__(cls, obj):
        return isinstance(obj, _optimized_class())


def _optimized_class():
    if _LazyModuleMeta._cls is None:
        Module = _module_base()

        class OptimizedModule(Module):
            """PyTorch's ``torch._dynamo.eval_frame.OptimizedModule``: wraps ``_orig_mod``, whose call (forward
            and hooks) is compiled; attributes it lacks come from ``_orig_mod``."""

            def __init__(self, mod, fullgraph=False, fuse=True):
                super().__init__()
                self._orig_mod = mod
                object.__setattr__(self, "_compiled", CompiledFunction(mod.__call__, fullgraph=fullgraph,
                                                                      fuse=fuse, name=type(mod).__name__))

            def forward(self, *args, **kwargs):
                return self._compiled(*args, **kwargs)

            def __getattr__(self, name):
                try:
                    return super().__getattr__(name)
                except AttributeError:
                    return getattr(self._modules["_orig_mod"], name)

        OptimizedModule.__module__ = "cltorch._capture.api"
        _LazyModuleMeta._cls = OptimizedModule
    return _LazyModuleMeta._cls


class OptimizedModule(metaclass=_LazyModuleMeta):
    """A Module whose forward is compiled (see :func:`compile`); a ``cltorch.nn.Module`` subclass."""


# ---------------------------------------------------------------------- CUDA-Graph-style capture
class CLGraph:
    """``torch.cuda.CUDAGraph`` for OpenCL: record the work of a region once, replay it with ``replay()``.

    Semantics are CUDA Graphs': inputs and outputs are static. Put new data into the tensors the captured code
    read (``static_x.copy_(x)``) and read results from the tensors it returned; each replay overwrites them.
    Every scalar is frozen as captured (an optimizer step's lr and bias corrections included: capture such a
    step only if they do not change, or recapture). Unlike CUDA, the captured region also runs once, eagerly,
    while it is recorded (its results are in the static outputs after the ``with`` block).

    Raises RuntimeError at ``capture_end`` (the end of ``with cltorch.cl.graph(g)``) when the region cannot be
    replayed: a host read (``.item()``, ``print``), a kernel on a cpu tensor; CUDA raises at the op instead.
    """

    def __init__(self, keep_graph=False):
        self._rec = None
        self._graph = None
        self.fuse = True

    def capture_begin(self, pool=None, capture_error_mode="global"):
        if self._rec is not None:
            raise RuntimeError("CLGraph.capture_begin: this graph is already capturing")
        self._graph = None
        self._rec = _trace.Recorder(execute=True)
        self._rec.__enter__()

    def capture_end(self):
        rec, self._rec = self._rec, None
        if rec is None:
            raise RuntimeError("CLGraph.capture_end: capture_begin was not called")
        rec.__exit__(None, None, None)
        tr = rec.trace
        if tr.unsupported:
            raise RuntimeError("CLGraph: the captured region cannot be replayed: " + "; ".join(tr.unsupported))
        if self.fuse:
            tr, _ = fuse(tr)
        self._graph = Graph(tr)

    def replay(self):
        """Enqueue the captured work again (asynchronous, as every launch)."""
        if self._graph is None:
            raise RuntimeError("CLGraph.replay: nothing captured yet (use `with cltorch.cl.graph(g):` first)")
        self._graph.replay()

    def reset(self):
        """Drop the captured work and release its buffers."""
        self._graph = None

    def pool(self):
        """An opaque handle (graphs here do not share memory pools; each keeps its own buffers)."""
        return id(self)

    @property
    def launch_count(self):
        """Kernels one replay enqueues."""
        return 0 if self._graph is None else self._graph.launch_count


class graph:
    """``with cltorch.cl.graph(g): ...`` captures the block into CLGraph ``g`` (``torch.cuda.graph``).

    ``pool`` and ``stream`` are accepted for PyTorch's signature (one in-order queue per device here);
    ``capture_error_mode`` is accepted (captures are per thread: other threads' launches are not recorded).
    """

    def __init__(self, cl_graph, pool=None, stream=None, capture_error_mode="global"):
        if not isinstance(cl_graph, CLGraph):
            raise TypeError(f"cltorch.cl.graph expects a CLGraph, got {type(cl_graph).__name__}")
        self.cl_graph = cl_graph

    def __enter__(self):
        from ..backend import all_runtimes
        for rt in all_runtimes():
            rt.synchronize()
        self.cl_graph.capture_begin()
        return self.cl_graph

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            rec, self.cl_graph._rec = self.cl_graph._rec, None
            if rec is not None:
                rec.__exit__(exc_type, exc, tb)
            return False
        self.cl_graph.capture_end()
        return False
