"""PyTorch's ``torch.nn.modules.utils`` path: ``_single``, ``_pair``, ``_triple``, ``_ntuple`` (in ``_factory.py``)."""
from ._factory import _ntuple, _single, _pair, _triple  # noqa: F401

_quadruple = _ntuple(4, "_quadruple")
