"""cltorch.optim: PyTorch's optimizers and learning-rate schedulers, with fused in-place OpenCL steps.

Mirrors ``torch.optim``: :class:`Optimizer`, SGD, Adam, AdamW, RMSprop, Adagrad, Adamax, NAdam, RAdam, and
``cltorch.optim.lr_scheduler``. Every algorithm's update is one kernel template (``cl_kernels/optim.cl.mako``)
that runs in place on the parameter and state storage; one launch updates up to ``slots`` parameters (8, or a
device profile's ``[optim] slots``).
"""
from . import lr_scheduler
from . import swa_utils
from .adadelta import Adadelta
from .adafactor import Adafactor
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .asgd import ASGD
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .rprop import Rprop
from .sgd import SGD
from .sparse_adam import SparseAdam

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam",
           "lr_scheduler",
           "Adadelta", "Adafactor", "ASGD", "LBFGS", "Rprop", "SparseAdam", "swa_utils"]
