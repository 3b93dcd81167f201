"""Samplers: which indices a DataLoader fetches, and in what order. Mirrors ``torch.utils.data.sampler``.

Random samplers draw from a ``cltorch.Generator`` (counter-based Philox, DESIGN decision 6): given a seeded
generator, one seed gives one sequence of epochs; each ``iter()`` continues the generator, so successive
epochs differ. Without a generator, each ``iter()`` first draws a fresh seed from the global generator
(``cltorch.manual_seed`` makes that reproducible too).
"""
import itertools
import math
import warnings

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
           "BatchSampler"]


class Sampler:
    """Base class: ``__iter__`` yields indices (or batches of indices); ``__len__`` is optional."""

    def __init__(self, data_source=None):
        if data_source is not None:
            warnings.warn("`data_source` argument is not used and will be removed in 2.2.0. "
                          "You may still have custom implementation that utilizes it.")

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """Yields ``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


def _fresh_generator():
    """A generator seeded from the global one (PyTorch: one int64 drawn with ``random_()``)."""
    import cltorch
    seed = int(cltorch.empty((), dtype=cltorch.int64).random_().item())
    g = cltorch.Generator()
    g.manual_seed(seed)
    return g


class RandomSampler(Sampler):
    """A random order of ``range(len(data_source))``.

    Without replacement, each pass is one ``cltorch.randperm(n, generator=...)``; ``num_samples > n``
    concatenates several permutations and cuts the last one. With ``replacement=True`` indices are drawn
    uniformly by ``cltorch.randint`` in chunks of 32. ``num_samples`` defaults to ``len(data_source)``.

    Raises TypeError when ``replacement`` is not a bool and ValueError when ``num_samples`` is not a
    positive int.
    """

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={self.replacement}")
        if not isinstance(self.num_samples, int) or isinstance(self.num_samples, bool) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={self.num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        import cltorch
        n = len(self.data_source)
        g = self.generator if self.generator is not None else _fresh_generator()
        total = self.num_samples
        if self.replacement:
            for start in range(0, total, 32):
                k = min(32, total - start)
                yield from cltorch.randint(0, n, (k,), dtype=cltorch.int64, generator=g).tolist()
        else:
            for _ in range(total // n):
                yield from cltorch.randperm(n, generator=g).tolist()
            rest = total % n
            if rest:
                yield from cltorch.randperm(n, generator=g).tolist()[:rest]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in a random order (one ``randperm`` per pass)."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        import cltorch
        kw = {} if self.generator is None else {"generator": self.generator}
        for i in cltorch.randperm(len(self.indices), **kw).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices in ``[0, len(weights))`` drawn with probabilities proportional to ``weights``
    (``cltorch.multinomial``), with or without replacement.

    Raises ValueError for a non-positive or non-int ``num_samples``, a non-bool ``replacement``, or weights
    that are not 1-D.
    """

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        import cltorch
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        weights_tensor = cltorch.as_tensor(weights, dtype=cltorch.double)
        if len(weights_tensor.shape) != 1:
            raise ValueError("weights should be a 1d sequence but given "
                             f"weights have shape {tuple(weights_tensor.shape)}")
        self.weights = weights_tensor
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self):
        import cltorch
        kw = {} if self.generator is None else {"generator": self.generator}
        rand = cltorch.multinomial(self.weights, self.num_samples, self.replacement, **kw)
        yield from iter(rand.tolist())

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Groups the indices of ``sampler`` into lists of ``batch_size``; the last, shorter one is dropped
    when ``drop_last``. ``len()`` is ``len(sampler) // batch_size`` or its ceiling.

    Raises ValueError for a non-positive or non-int ``batch_size`` and a non-bool ``drop_last``.
    """

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        it = iter(self.sampler)
        bs = self.batch_size
        while True:
            batch = list(itertools.islice(it, bs))
            if len(batch) < bs:
                if batch and not self.drop_last:
                    yield batch
                return
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return math.ceil(len(self.sampler) / self.batch_size)
