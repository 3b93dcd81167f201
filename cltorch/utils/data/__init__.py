"""``cltorch.utils.data``: datasets, samplers and the DataLoader, as in ``torch.utils.data``.

Workers are processes started by forkserver (spawn where it is missing); batches come back through
POSIX shared memory. See :class:`DataLoader` for the details and the reasons.
"""
from ._collate import default_collate, default_convert
from ._worker import get_worker_info
from .dataloader import DataLoader
from .dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, StackDataset, Subset, TensorDataset,
                      random_split)
from .distributed import DistributedSampler
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,
                      WeightedRandomSampler)

__all__ = ["BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset", "DistributedSampler",
           "IterableDataset", "RandomSampler", "Sampler", "SequentialSampler", "StackDataset", "Subset",
           "SubsetRandomSampler", "TensorDataset", "WeightedRandomSampler", "default_collate", "default_convert",
           "get_worker_info", "random_split"]
