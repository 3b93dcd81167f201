"""Helpers shared by the layer modules: factory kwargs and PyTorch's ``_ntuple`` argument expansion."""
import collections.abc
from itertools import repeat

import cltorch as torch

__all__ = ["empty_param", "_single", "_pair", "_triple", "_ntuple"]


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
