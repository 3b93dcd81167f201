"""``cltorch.nn``: PyTorch's modelling layer (``torch.nn``) written on cltorch's public API.

``Module`` and the containers, the layers a modern model uses, ``functional``, ``init``, ``utils`` and
``attention``, at the paths where a PyTorch user looks for them.
"""
from .parameter import Parameter, Buffer  # noqa: F401
from .modules import *  # noqa: F401,F403
from . import functional, init, utils, attention  # noqa: F401
from . import parallel  # noqa: F401,E402
from .parallel import DataParallel  # noqa: F401,E402
from ._uninitialized import UninitializedParameter, UninitializedBuffer  # noqa: F401,E402
from .modules.lazy import (LazyLinear, LazyConv1d, LazyConv2d, LazyConv3d, LazyConvTranspose1d,  # noqa: F401,E402
                           LazyConvTranspose2d, LazyConvTranspose3d, LazyBatchNorm1d, LazyBatchNorm2d,
                           LazyBatchNorm3d, LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d)
from .modules.sync_batchnorm import SyncBatchNorm  # noqa: F401,E402
from .modules.adaptive import AdaptiveLogSoftmaxWithLoss  # noqa: F401,E402
from .modules.more_layers import (Fold, LPPool1d, LPPool2d, LPPool3d, FeatureAlphaDropout,  # noqa: F401,E402
                                  CrossMapLRN2d, NLLLoss2d)
from .modules.linear_cross_entropy import LinearCrossEntropyLoss, LinearCrossEntropyOptions  # noqa: F401,E402
from . import grad  # noqa: F401,E402
