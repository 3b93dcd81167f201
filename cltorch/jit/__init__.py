"""``cltorch.jit``: TorchScript's entry points, so that scripts using them run eagerly.

cltorch has no TorchScript compiler: ``script`` and ``trace`` return the function or module unchanged, with a
one-time note on stderr that it runs eagerly (as ``cltorch.compile`` does). The decorators (``ignore``,
``unused``, ``export``, ``script_if_tracing``, ``interface``) return what they decorate. ``save`` and ``load``
raise NotImplementedError: there is no TorchScript archive format here (use ``cltorch.save`` of the model or its
``state_dict``).
"""
import sys

__all__ = ["script", "trace", "trace_module", "ignore", "unused", "export", "script_if_tracing", "interface",
           "is_scripting", "is_tracing", "annotate", "Final", "fork", "wait", "freeze", "optimize_for_inference",
           "save", "load", "ScriptModule", "ScriptFunction", "Attribute"]

_noted = [False]


def _note(what):
    if not _noted[0]:
        print(f"cltorch.jit.{what}: TorchScript is not supported; running eagerly (the function or module is "
              "returned unchanged)", file=sys.stderr)
        _noted[0] = True


def script(obj, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """Returns ``obj`` unchanged (eager execution), with a one-time note."""
    _note("script")
    return obj


def trace(func, example_inputs=None, optimize=None, check_trace=True, check_inputs=None, check_tolerance=1e-5,
          strict=True, _force_outplace=False, _module_class=None, _compilation_unit=None, example_kwarg_inputs=None,
          _store_inputs=True):
    """Returns ``func`` unchanged (eager execution), with a one-time note. ``example_inputs`` are not run."""
    _note("trace")
    return func


def trace_module(mod, inputs, *args, **kwargs):
    """Returns ``mod`` unchanged (eager execution), with a one-time note."""
    _note("trace_module")
    return mod


def freeze(mod, preserved_attrs=None, optimize_numerics=True):
    """Returns ``mod`` unchanged: there is no scripted graph to freeze."""
    return mod


def optimize_for_inference(mod, other_methods=None):
    """Returns ``mod`` unchanged: there is no scripted graph to optimize."""
    return mod


def _decorator(name):
    def deco(fn=None, **kwargs):
        if fn is None or isinstance(fn, bool):   # @ignore(drop=True) / @ignore(True)
            return lambda f: f
        return fn
    deco.__name__ = deco.__qualname__ = name
    deco.__doc__ = f"``@{name}``: returns the function unchanged (no TorchScript compiler runs)."
    return deco


ignore = _decorator("ignore")
unused = _decorator("unused")
export = _decorator("export")
script_if_tracing = _decorator("script_if_tracing")
interface = _decorator("interface")
_script_if_tracing = script_if_tracing


def is_scripting():
    """False: code never runs under the TorchScript compiler here."""
    return False


def is_tracing():
    """False: code never runs under the TorchScript tracer here."""
    return False


def annotate(the_type, the_value):
    """Returns ``the_value`` (a type hint for the TorchScript compiler)."""
    return the_value


class _FinalMeta(type):
    def __getitem__(cls, item):
        return item


class Final(metaclass=_FinalMeta):
    """``jit.Final[int]``: a type hint; subscripting returns the type."""


def Attribute(value, type=None):  # noqa: N802,A002 (PyTorch's names)
    """Returns ``value`` (a TorchScript attribute type hint)."""
    return value


class _Future:
    def __init__(self, value):
        self._value = value

    def wait(self):
        return self._value

    def done(self):
        return True


def fork(func, *args, **kwargs):
    """Runs ``func(*args, **kwargs)`` now (eagerly) and returns a completed future; ``wait(fut)`` gives its
    value."""
    return _Future(func(*args, **kwargs))


def wait(future):
    """The value of a future returned by :func:`fork`."""
    return future.wait()


class ScriptModule:
    """PyTorch's scripted-module type; nothing is an instance of it here (``script`` returns the eager module)."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError("cltorch.jit.ScriptModule cannot be created: TorchScript is not supported "
                                  "(jit.script returns the eager module)")


class ScriptFunction(ScriptModule):
    """PyTorch's scripted-function type; nothing is an instance of it here."""


RecursiveScriptModule = ScriptModule


def save(m, f, _extra_files=None):
    """Raises NotImplementedError: TorchScript archives are not provided (save the model with ``cltorch.save``)."""
    raise NotImplementedError("cltorch.jit.save: TorchScript archives are not provided; save the model or its "
                              "state_dict with cltorch.save")


def load(f, map_location=None, _extra_files=None, _restore_shapes=False):
    """Raises NotImplementedError: TorchScript archives cannot be loaded (there is no TorchScript interpreter)."""
    raise NotImplementedError("cltorch.jit.load: TorchScript archives cannot be loaded (no TorchScript "
                              "interpreter); load a checkpoint saved with torch.save/cltorch.save via cltorch.load")
