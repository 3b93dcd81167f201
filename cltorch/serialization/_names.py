"""How cltorch's globals are named in a checkpoint, and how torch's names are found in cltorch.

cltorch mirrors torch's public namespaces (``cltorch.nn`` is ``torch.nn``, ``cltorch.optim`` is
``torch.optim``), but not always torch's private files (``BatchNorm1d`` lives in
``cltorch.nn.modules.normalization``, torch's in ``torch.nn.modules.batchnorm``). So:

- writing: a cltorch global ``cltorch.<path>.<Name>`` is written as ``torch.<pkg>.<Name>``, where
  ``cltorch.<pkg>`` is the shortest enclosing package that exports the same object under that name
  (``cltorch.nn.modules.linear.Linear`` -> ``torch.nn.Linear``, ``cltorch.optim.adam.Adam`` ->
  ``torch.optim.Adam``, ``cltorch.nn.functional.gelu`` -> ``torch.nn.functional.gelu``), else as
  ``torch.<path>.<Name>``. torch finds such a name with an import and a ``getattr``, as pickle does.
- reading: a torch global ``torch.<path>.<Name>`` is looked up as ``cltorch.<path>.<Name>``, then in the
  enclosing packages up to ``cltorch.<first>`` (``torch.nn.modules.batchnorm.BatchNorm1d`` is found as
  ``cltorch.nn.modules.BatchNorm1d``); only the root ``cltorch`` for ``torch.<Name>`` and ``torch._<x>.<Name>``.
"""
import importlib
import sys


def _attr(obj, qualname):
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def torch_name(module, qualname, obj):
    """The ``(module, name)`` to write for ``obj`` found as ``module.qualname``; None for non-cltorch
    globals or when ``obj`` is not what that name finds (pickle then raises its own error)."""
    if module != "cltorch" and not module.startswith("cltorch."):
        return None
    mod = sys.modules.get(module)
    if mod is None or _attr(mod, qualname) is not obj:
        return None
    parts = module.split(".")
    if "." not in qualname:
        for i in range(1, len(parts)):
            pkg = sys.modules.get(".".join(parts[:i]))
            if pkg is not None and getattr(pkg, qualname, None) is obj:
                module = ".".join(parts[:i])
                break
    return "torch" + module[len("cltorch"):], qualname


def cltorch_global(module, name):
    """The cltorch object that torch's global ``module.name`` stands for, or None. Imports only
    ``cltorch`` modules."""
    if module != "torch" and not module.startswith("torch."):
        return None
    parts = ("cltorch" + module[len("torch"):]).split(".")
    stop = 1 if len(parts) == 1 or parts[1].startswith("_") else 2
    for i in range(len(parts), stop - 1, -1):
        try:
            mod = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        obj = _attr(mod, name)
        if obj is not None and (i == len(parts) or "." not in name):
            return obj
    return None


def names_of(obj):
    """Every name under which a checkpoint may refer to ``obj``: ``module.qualname``, and for cltorch
    objects the torch name that :func:`torch_name` writes and the torch path of its own module."""
    module, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qual, str):
        raise TypeError(f"cannot name {obj!r}: pass (obj, 'module.name') to say the name it has in the checkpoint")
    out = [f"{module}.{qual}"]
    t = torch_name(module, qual, obj)
    if t is not None:
        out += [f"{t[0]}.{t[1]}", f"torch{module[len('cltorch'):]}.{qual}"]
    return out
