"""Helpers shared by the layer modules: factory kwargs and PyTorch's ``_ntuple`` argument expansion."""
import collections.abc
import importlib
from itertools import repeat

import cltorch as torch

__all__ = ["empty_param", "_single", "_pair", "_triple", "_ntuple", "forward_names"]


def empty_param(shape, device=None, dtype=None):
    """An uninitialised tensor for a parameter or buffer (``device``/``dtype`` as the layers' kwargs)."""
    return torch.empty(tuple(shape), device=device, dtype=dtype)


def _ntuple(n, name="parse"):
    def parse(x):
        if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
            return tuple(x)
        return tuple(repeat(x, n))
    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")


def forward_names(module_name, where):
    """A module-level ``__getattr__`` (PEP 562) for ``module_name`` that answers the names in ``where``
    (name -> sibling module, e.g. ``{"LazyLinear": ".lazy"}``) from the module that defines them, on first use.
    PyTorch exports e.g. ``LazyLinear`` from ``nn.modules.linear``; here ``lazy.py`` imports ``linear.py``, so a
    plain import back would be a cycle. Other names raise AttributeError as usual."""
    package = module_name.rpartition(".")[0]

    def __getattr__(name):
        sub = where.get(name)
        if sub is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        return getattr(importlib.import_module(sub, package), name)
    return __getattr__
