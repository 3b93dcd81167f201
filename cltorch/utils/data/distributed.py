"""DistributedSampler: each of ``num_replicas`` processes gets its own, equally long share of the dataset."""
import math

from .sampler import Sampler

__all__ = ["DistributedSampler"]


def _dist_default(what):
    try:
        import cltorch.distributed as dist
    except ImportError:
        dist = None
    if dist is None or not getattr(dist, "is_available", lambda: False)():
        raise RuntimeError("Requires distributed package to be available")
    return dist.get_world_size() if what == "world_size" else dist.get_rank()


class DistributedSampler(Sampler):
    """Indices for replica ``rank`` of ``num_replicas`` (PyTorch's algorithm).

    Each epoch the whole index list is shuffled with a generator seeded by ``seed + epoch`` (call
    :meth:`set_epoch` at the start of every epoch, or every epoch has the same order), identically on
    every replica; then it is padded by repeating its start (or, with ``drop_last``, cut) to a multiple of
    ``num_replicas``, and replica ``rank`` takes every ``num_replicas``-th index from position ``rank``.
    ``len()`` is ``ceil(n / num_replicas)``, or ``ceil((n - num_replicas) / num_replicas)`` when
    ``drop_last`` and ``n`` is not divisible.

    ``num_replicas`` and ``rank`` default to ``cltorch.distributed``'s world size and rank (RuntimeError
    when that package is unavailable). Raises ValueError for a rank outside ``[0, num_replicas - 1]``.
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        if num_replicas is None:
            num_replicas = _dist_default("world_size")
        if rank is None:
            rank = _dist_default("rank")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(self.dataset)
        if self.drop_last and n % self.num_replicas != 0:
            self.num_samples = math.ceil((n - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            import cltorch
            g = cltorch.Generator()
            g.manual_seed(self.seed + self.epoch)
            indices = cltorch.randperm(n, generator=g).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            if pad <= len(indices):
                indices += indices[:pad]
            else:
                indices += (indices * math.ceil(pad / len(indices)))[:pad]
        else:
            indices = indices[:self.total_size]
        assert len(indices) == self.total_size
        indices = indices[self.rank:self.total_size:self.num_replicas]
        assert len(indices) == self.num_samples
        return iter(indices)

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """Sets the epoch; with ``shuffle=True`` it selects the order (seed + epoch) for all replicas."""
        self.epoch = epoch
