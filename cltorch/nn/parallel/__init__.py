"""``cltorch.nn.parallel``: PyTorch's ``torch.nn.parallel`` entry points.

``DataParallel`` runs on one device (cltorch has no multi-device replication yet); ``DistributedDataParallel``
runs over ``cltorch.distributed`` (MPI).
"""
from .data_parallel import DataParallel, data_parallel  # noqa: F401
from .distributed import DistributedDataParallel  # noqa: F401

__all__ = ["DataParallel", "data_parallel", "DistributedDataParallel"]
