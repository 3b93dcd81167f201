"""cltorch.optim: PyTorch's optimizers and learning-rate schedulers, with fused in-place OpenCL steps.

Mirrors ``torch.optim``: :class:`Optimizer`, SGD, Adam, AdamW, RMSprop, Adagrad, Adamax, NAdam, RAdam, and
``cltorch.optim.lr_scheduler``. Every algorithm's update is one kernel template (``cl_kernels/optim.cl.mako``)
that runs in place on the parameter and state storage; one launch updates up to ``slots`` parameters (8, or a
device profile's ``[optim] slots``).
"""
from . import lr_scheduler
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam",
           "lr_scheduler"]
