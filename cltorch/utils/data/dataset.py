"""Datasets: map-style and iterable, tensor-backed, combined, subsets, and ``random_split``.

Mirrors ``torch.utils.data.dataset``: same names, signatures, errors and behaviour.
"""
import bisect
import itertools
import math
import warnings

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset", "ChainDataset",
           "Subset", "random_split"]


class Dataset:
    """A map-style dataset: ``__getitem__(index)`` returns one sample; ``__len__`` (optional, but the default
    samplers need it) gives the number of samples. ``a + b`` is ``ConcatDataset([a, b])``.

    A subclass may also define ``__getitems__(indices)`` returning the list of samples for a batch of
    indices; the DataLoader then calls it once per batch instead of ``__getitem__`` per index.
    """

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])

    # No __len__ here on purpose (as in PyTorch): len() of a dataset without one raises TypeError.


class IterableDataset(Dataset):
    """A dataset that is a stream: ``__iter__`` yields the samples. ``a + b`` is ``ChainDataset([a, b])``.

    With ``num_workers > 0`` every worker gets its own copy of the dataset and iterates it, so each sample
    comes once *per worker* unless ``__iter__`` shards the stream with :func:`get_worker_info`, e.g.::

        def __iter__(self):
            info = cltorch.utils.data.get_worker_info()
            if info is None:                      # main process: everything
                return iter(range(self.start, self.end))
            return iter(range(self.start + info.id, self.end, info.num_workers))
    """

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other):
        return ChainDataset([self, other])


def _size0(t):
    return t.size(0) if hasattr(t, "size") and callable(t.size) else len(t)


class TensorDataset(Dataset):
    """Sample ``i`` is ``tuple(t[i] for t in tensors)``. All tensors must have the same first dimension
    (AssertionError "Size mismatch between tensors" otherwise)."""

    def __init__(self, *tensors):
        assert all(_size0(tensors[0]) == _size0(t) for t in tensors), "Size mismatch between tensors"
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return _size0(self.tensors[0])


class StackDataset(Dataset):
    """Stacks datasets of equal length side by side: sample ``i`` is ``tuple(d[i] for d in args)``, or
    ``{k: d[i] for k, d in kwargs.items()}``. Raises ValueError for unequal lengths or for args and kwargs
    together."""

    def __init__(self, *args, **kwargs):
        if args:
            if kwargs:
                raise ValueError("Supported either ``tuple``- (via ``args``) or"
                                 "``dict``- (via ``kwargs``) like input/output, but both types are given.")
            self._length = len(args[0])
            if any(self._length != len(d) for d in args):
                raise ValueError("Size mismatch between datasets")
            self.datasets = args
        elif kwargs:
            tmp = list(kwargs.values())
            self._length = len(tmp[0])
            if any(self._length != len(d) for d in tmp):
                raise ValueError("Size mismatch between datasets")
            self.datasets = kwargs
        else:
            raise ValueError("At least one dataset should be passed")

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices):
        n = len(indices)
        if isinstance(self.datasets, dict):
            out = [{} for _ in indices]
            for k, d in self.datasets.items():
                items = _items_of(d, indices)
                for o, v in zip(out, items):
                    o[k] = v
            return out
        cols = [_items_of(d, indices) for d in self.datasets]
        for c in cols:
            if len(c) != n:
                raise ValueError(f"Nested dataset's output size mismatch. Expected {n}, got {len(c)}")
        return [tuple(row) for row in zip(*cols)]

    def __len__(self):
        return self._length


def _items_of(d, indices):
    getitems = getattr(d, "__getitems__", None)
    if callable(getitems):
        items = getitems(indices)
        if len(items) != len(indices):
            raise ValueError(f"Nested dataset's output size mismatch. Expected {len(indices)}, got {len(items)}")
        return items
    return [d[i] for i in indices]


class ConcatDataset(Dataset):
    """Concatenation of map-style datasets: index ``i`` falls into the dataset whose cumulative size first
    exceeds it (``cumulative_sizes``). Negative indices count from the end. IterableDatasets are refused."""

    @staticmethod
    def cumsum(sequence):
        r, s = [], 0
        for e in sequence:
            s += len(e)
            r.append(s)
        return r

    def __init__(self, datasets):
        self.datasets = list(datasets)
        assert len(self.datasets) > 0, "datasets should not be an empty iterable"
        for d in self.datasets:
            assert not isinstance(d, IterableDataset), "ConcatDataset does not support IterableDataset"
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        k = bisect.bisect_right(self.cumulative_sizes, idx)
        if k >= len(self.datasets):
            raise IndexError(f"index {idx} is out of range for ConcatDataset of length {len(self)}")
        local = idx if k == 0 else idx - self.cumulative_sizes[k - 1]
        return self.datasets[k][local]


class ChainDataset(IterableDataset):
    """Chains iterable datasets: iterates each in turn. ``len()`` sums theirs (each must be iterable)."""

    def __init__(self, datasets):
        super().__init__()
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            assert isinstance(d, IterableDataset), "ChainDataset only supports IterableDataset"
            yield from d

    def __len__(self):
        total = 0
        for d in self.datasets:
            assert isinstance(d, IterableDataset), "ChainDataset only supports IterableDataset"
            total += len(d)
        return total


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order: ``Subset(d, idx)[i] == d[idx[i]]``."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        getitems = getattr(self.dataset, "__getitems__", None)
        if callable(getitems):
            return getitems([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=None):
    """Splits ``dataset`` into non-overlapping random :class:`Subset` s of the given ``lengths``.

    ``lengths`` are either counts that sum to ``len(dataset)``, or fractions that sum to 1: each split then
    gets ``floor(frac * len(dataset))`` samples and the remainder is handed out one at a time, round-robin
    from the first split on (PyTorch's rule). The permutation is ``cltorch.randperm(n, generator=generator)``
    (the default generator when None), so one seed gives one split.

    Raises ValueError when a fraction is outside [0, 1] or the lengths do not sum to the dataset's length.
    """
    import cltorch
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        subset_lengths = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            subset_lengths.append(int(math.floor(n * frac)))
        remainder = n - sum(subset_lengths)
        for i in range(remainder):
            subset_lengths[i % len(subset_lengths)] += 1
        lengths = subset_lengths
        for i, length in enumerate(lengths):
            if length == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an empty dataset.")
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    if generator is None:
        generator = getattr(cltorch, "default_generator", None)
    kw = {} if generator is None else {"generator": generator}
    indices = cltorch.randperm(sum(lengths), **kw).tolist()
    return [Subset(dataset, indices[offset - length:offset])
            for offset, length in zip(itertools.accumulate(lengths), lengths)]
