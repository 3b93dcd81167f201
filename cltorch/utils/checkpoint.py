"""``cltorch.utils.checkpoint``: activation checkpointing, as ``torch.utils.checkpoint``.

``checkpoint(fn, *args)`` runs ``fn`` without recording a graph, keeps only its inputs, and runs ``fn`` again in
the backward pass (with grad enabled) to get the gradients: memory for recompute. The random-number state is
saved before the forward and restored for the recompute (``preserve_rng_state=True``), so dropout inside draws
the same mask twice (cltorch has one Philox generator for every device, so one state covers them).

Both ``use_reentrant`` variants are built on one ``cltorch.autograd.Function`` whose backward recomputes. They
differ as in PyTorch where a script can see it: with ``use_reentrant=True`` no gradient flows when no tensor input
requires grad (PyTorch warns); with ``False`` gradients reach the parameters used inside ``fn`` regardless, and
keyword arguments are passed to ``fn``. Not provided: ``context_fn`` other than the default (selective
checkpointing) raises NotImplementedError.
"""
import warnings

from ..autograd import Function, backward as _backward
from .. import _tensor
from ..ops.random import get_rng_state, set_rng_state
from .._dispatch import is_grad_enabled, set_grad_enabled_raw

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError", "CheckpointFunction", "detach_variable",
           "noop_context_fn"]

Tensor = _tensor.Tensor


class CheckpointError(RuntimeError):
    """Raised when the recomputation does not match the forward (PyTorch's name)."""


def noop_context_fn():
    """The default ``context_fn``: two empty contexts."""
    import contextlib
    return contextlib.nullcontext(), contextlib.nullcontext()


def detach_variable(inputs):
    """Each tensor of ``inputs`` detached, keeping its ``requires_grad``; other values as they are. Raises
    RuntimeError when ``inputs`` is not a tuple, as PyTorch does."""
    if not isinstance(inputs, tuple):
        raise RuntimeError(f"Only tuple of tensors is supported. Got Unsupported input type: {type(inputs).__name__}")
    out = []
    for x in inputs:
        if isinstance(x, Tensor):
            d = x.detach()
            d.requires_grad_(x.requires_grad)
            out.append(d)
        else:
            out.append(x)
    return tuple(out)


class CheckpointFunction(Function):
    """The recomputing Function: ``apply(fn, preserve_rng_state, kwargs, anchor, *args)``. ``anchor`` is None or a
    tensor that requires grad, so the node is recorded even when no input requires grad (``use_reentrant=False``)."""

    @staticmethod
    def forward(ctx, fn, preserve_rng_state, kwargs, anchor, *args):
        ctx.fn, ctx.kwargs, ctx.args = fn, kwargs, args
        ctx.rng = get_rng_state() if preserve_rng_state else None
        return fn(*args, **kwargs)

    @staticmethod
    def backward(ctx, *grads):
        if ctx.args is None:
            raise RuntimeError("Trying to backward through the graph a second time (or directly access saved tensors "
                               "after they have already been freed). Specify retain_graph=True if you need to "
                               "backward through the graph a second time.")
        inputs = detach_variable(ctx.args)
        saved = None
        if ctx.rng is not None:
            saved = get_rng_state()
            set_rng_state(ctx.rng)
        prev = set_grad_enabled_raw(True)
        try:
            out = ctx.fn(*inputs, **ctx.kwargs)
        finally:
            set_grad_enabled_raw(prev)
            if saved is not None:
                set_rng_state(saved)
        outs = out if isinstance(out, tuple) else (out,)
        pairs = [(o, g) for o, g in zip(outs, grads) if isinstance(o, Tensor) and o.requires_grad and g is not None]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        _backward([o for o, _ in pairs], [g for _, g in pairs])
        ctx.args = None
        ins = tuple(x.grad if isinstance(x, Tensor) and x.requires_grad else None for x in inputs)
        return (None, None, None, None) + ins


def checkpoint(function, *args, use_reentrant=None, context_fn=noop_context_fn, determinism_check="default",
               debug=False, preserve_rng_state=True, **kwargs):
    """``function(*args, **kwargs)``, recomputed in backward instead of keeping its intermediate tensors.

    ``use_reentrant``: pass it explicitly (None warns, as PyTorch does, and means True). Keyword arguments to
    ``function`` need ``use_reentrant=False`` (ValueError otherwise, PyTorch's rule). ``function``'s outputs: a
    tensor or a tuple; outside grad mode it simply runs. Raises NotImplementedError for a non-default
    ``context_fn``.
    """
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. "
                      "use_reentrant=False is recommended; None means True.", stacklevel=2)
        use_reentrant = True
    if context_fn is not noop_context_fn:
        raise NotImplementedError("checkpoint(context_fn=...) (selective activation checkpointing) is not provided "
                                  "by cltorch")
    if use_reentrant and kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if not is_grad_enabled():
        return function(*args, **kwargs)
    if use_reentrant:
        if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", stacklevel=2)
        anchor = None
    else:
        from ..ops.creation import empty
        anchor = empty(0, requires_grad=True)
    return CheckpointFunction.apply(function, preserve_rng_state, kwargs, anchor, *args)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):  # noqa: A002
    """Runs ``functions`` (a Sequential or a list of modules/callables) in ``segments`` chunks: every chunk but the
    last under :func:`checkpoint`, the last normally. Raises ValueError when ``segments`` is not in
    ``1..len(functions)``."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter should be passed "
                      "explicitly; None means True.", stacklevel=2)
        use_reentrant = True
    if hasattr(functions, "children") and not isinstance(functions, (list, tuple)):
        functions = list(functions.children())
    functions = list(functions)
    n = len(functions)
    if not 1 <= segments <= max(n, 1):
        raise ValueError(f"segments must be in 1..{n} (the number of functions), got {segments}")
    size = n // segments

    def run(start, end):
        def f(x):
            for fn in functions[start:end]:
                x = fn(x)
            return x
        return f

    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end + 1), input, use_reentrant=use_reentrant,  # noqa: A001
                           preserve_rng_state=kwargs.get("preserve_rng_state", True))
    return run(end + 1, n)(input)
