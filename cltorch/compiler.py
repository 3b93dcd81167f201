"""PyTorch's ``torch.compiler``. ``compile`` is ``cltorch.compile`` (capture and replay of recorded kernels, see
``cltorch/_capture``); ``is_compiling()`` is True while a compiled function or a ``cltorch.cl.graph`` block is
being captured; ``reset()`` drops the captured graphs. The decorators that steer a tracing compiler (``disable``,
``allow_in_graph``, ``assume_constant_result``) return the function unchanged: capture records kernels, not
Python, so there is nothing to steer (a function marked ``disable`` still has its kernels recorded)."""
__all__ = ["compile", "disable", "allow_in_graph", "assume_constant_result", "is_compiling", "is_dynamo_compiling",
           "is_exporting", "reset"]


def compile(*args, **kwargs):  # noqa: A001
    from . import compile as _compile
    return _compile(*args, **kwargs)


def _returns_fn(fn=None, *args, **kwargs):
    if fn is None or not callable(fn):
        return lambda f: f
    return fn


def disable(fn=None, recursive=True, *, reason=None):
    """Returns ``fn`` (nothing is compiled, so nothing needs disabling); works as ``@disable`` and ``@disable()``."""
    return _returns_fn(fn)


def allow_in_graph(fn):
    return fn


def assume_constant_result(fn):
    return fn


def is_compiling():
    """True while this thread runs a function under capture (cltorch.compile's capture runs, cltorch.cl.graph)."""
    from ._capture import is_capturing
    return is_capturing()


def is_dynamo_compiling():
    return False


def is_exporting():
    return False


def reset():
    """Drop every compiled function's captured graphs; the next calls capture again."""
    from ._capture.compile import reset as _reset
    _reset()
