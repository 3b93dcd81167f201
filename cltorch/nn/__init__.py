"""``cltorch.nn``: PyTorch's modelling layer (``torch.nn``) written on cltorch's public API.

``Module`` and the containers, the layers a modern model uses, ``functional``, ``init``, ``utils`` and
``attention``, at the paths where a PyTorch user looks for them.
"""
from .parameter import Parameter, Buffer  # noqa: F401
from .modules import *  # noqa: F401,F403
from . import functional, init, utils, attention  # noqa: F401
from . import parallel  # noqa: F401,E402
from .parallel import DataParallel  # noqa: F401,E402
