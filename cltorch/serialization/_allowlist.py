"""The globals that ``load(weights_only=True)`` may use beyond its defaults: torch's
``add_safe_globals`` / ``get_safe_globals`` / ``clear_safe_globals`` / ``safe_globals`` API, the modules
that are never allowed, and the error message for a global that is not allowed."""
import pickle

from . import _names

# modules never allowed, even when listed (as torch's weights_only unpickler)
_BLOCKED_MODULES = ("sys", "os", "posix", "nt")

_marked = set()


def _check(entry):
    if isinstance(entry, tuple):
        if len(entry) != 2:
            raise ValueError(f"Expected tuple of length 2 (global, str of callable full path), but got tuple of "
                             f"length: {len(entry)}")
        if type(entry[1]) is not str:
            raise TypeError(f"Expected second item in tuple to be str of callable full path, but got: "
                            f"{type(entry[1])}")
    return entry


def add_safe_globals(safe_globals):
    """Marks globals as safe for ``load(weights_only=True)``: listed functions may be called and listed
    classes instantiated and given their state (``__setstate__``, else ``__dict__``) while unpickling.

    Args:
        safe_globals: a list of functions/classes, or of ``(obj, "module.name")`` tuples giving the name
            the checkpoint uses. A function/class is found under ``f"{obj.__module__}.{obj.__qualname__}"``;
            a cltorch object also under its torch names (``cltorch.nn.Linear`` as ``torch.nn.Linear`` and
            ``torch.nn.modules.linear.Linear``), so that files torch wrote load too.

    Raises:
        ValueError / TypeError: a tuple that is not ``(obj, str)``.
    """
    global _marked
    _marked = _marked | {_check(e) for e in safe_globals}


def get_safe_globals():
    """The list of globals added by :func:`add_safe_globals` (or a :class:`safe_globals` block)."""
    return list(_marked)


def clear_safe_globals():
    """Forgets every global added by :func:`add_safe_globals`."""
    global _marked
    _marked = set()


class safe_globals:
    """Context manager: ``with safe_globals([MyClass]): load(f)``; the globals are allowed inside the
    block only (see :func:`add_safe_globals`)."""

    def __init__(self, safe_globals):
        self.safe_globals = [_check(e) for e in safe_globals]

    def __enter__(self):
        add_safe_globals(self.safe_globals)

    def __exit__(self, *exc):
        global _marked
        _marked = _marked - set(self.safe_globals)


def user_allowed():
    """``{"module.name": obj}`` for every global the user allowed, under each name it may have."""
    out = {}
    for e in _marked:
        if isinstance(e, tuple):
            out[e[1]] = e[0]
        else:
            for n in _names.names_of(e):
                out[n] = e
    return out


def is_user_allowed(obj, allowed=None):
    return any(obj is v for v in (user_allowed() if allowed is None else allowed).values())


def refusal(module, name):
    """The ``pickle.UnpicklingError`` for a global that ``weights_only=True`` does not allow."""
    full = f"{module}.{name}"
    if module in _BLOCKED_MODULES:
        return pickle.UnpicklingError(
            f"Weights only load failed. Trying to load unsupported GLOBAL {full} whose module {module} is "
            "blocked (it could run arbitrary code). Load with `weights_only=False` only if you trust the "
            "source of the checkpoint.")
    shown = full[len("builtins."):] if module == "builtins" else full
    return pickle.UnpicklingError(
        f"Weights only load failed. Unsupported global: GLOBAL {shown} was not an allowed global by default. "
        f"Please use `cltorch.serialization.add_safe_globals([{shown}])` or the "
        f"`cltorch.serialization.safe_globals([{shown}])` context manager to allowlist this global if you trust "
        "this class/function. Alternatively, re-run `cltorch.load` with `weights_only=False`, which will likely "
        "succeed but can run arbitrary code: do it only if you got the file from a trusted source.")
