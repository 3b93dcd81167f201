"""PyTorch's ``torch.compiler``: cltorch compiles no graphs, so ``is_compiling()`` is always False and the
decorators that steer the compiler (``disable``, ``allow_in_graph``, ``assume_constant_result``) return the function
unchanged. ``compile`` is ``cltorch.compile`` (eager, with a one-time note)."""
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
    """False: code never runs under a graph compiler here."""
    return False


def is_dynamo_compiling():
    return False


def is_exporting():
    return False


def reset():
    """Nothing to reset: no compiled graphs are cached."""
