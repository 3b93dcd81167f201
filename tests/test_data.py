"""cltorch.utils.data in the main process: datasets, samplers, collation, DataLoader arguments and len().

Expected values come from numpy or from PyTorch's documented rules, never from our own output.
Worker processes are tested in test_data_workers.py.
"""
import collections
import math
import warnings

import numpy as np
import pytest

import cltorch
from cltorch.utils import data
from cltorch.utils.data import (BatchSampler, ChainDataset, ConcatDataset, DataLoader, Dataset, DistributedSampler,
                                IterableDataset, RandomSampler, Sampler, SequentialSampler, StackDataset, Subset,
                                SubsetRandomSampler, TensorDataset, WeightedRandomSampler, default_collate,
                                default_convert, get_worker_info, random_split)


def arr(t):
    return np.array(t.tolist())


class Squares(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return i * i


class Stream(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


# ----------------------------------------------------------------------------------------------- datasets
def test_dataset_add_and_abstract_methods():
    a, b = Squares(3), Squares(2)
    c = a + b
    assert isinstance(c, ConcatDataset) and [c[i] for i in range(5)] == [0, 1, 4, 0, 1]
    s = Stream(2) + Stream(3)
    assert isinstance(s, ChainDataset) and list(s) == [0, 1, 0, 1, 2] and len(s) == 5
    with pytest.raises(NotImplementedError):
        Dataset()[0]
    with pytest.raises(NotImplementedError):
        iter(IterableDataset())
    with pytest.raises(TypeError):
        len(Dataset())


def test_tensor_dataset():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    y = np.array([3, 1, 4, 1])
    ds = TensorDataset(cltorch.from_numpy(x), cltorch.from_numpy(y))
    assert len(ds) == 4
    xi, yi = ds[2]
    np.testing.assert_array_equal(arr(xi), x[2])
    assert yi.item() == 4 and yi.dim() == 0
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        TensorDataset(cltorch.zeros(3, 2), cltorch.zeros(4))


def test_stack_dataset_tuple_dict_and_errors():
    a, b = Squares(4), [10, 20, 30, 40]
    t = StackDataset(a, b)
    assert len(t) == 4 and t[2] == (4, 30)
    assert t.__getitems__([3, 0]) == [(9, 40), (0, 10)]
    d = StackDataset(sq=a, tens=b)
    assert d[1] == {"sq": 1, "tens": 20}
    assert d.__getitems__([0, 3]) == [{"sq": 0, "tens": 10}, {"sq": 9, "tens": 40}]
    with pytest.raises(ValueError, match="Size mismatch"):
        StackDataset(a, [1, 2])
    with pytest.raises(ValueError, match="Size mismatch"):
        StackDataset(x=a, y=[1])
    with pytest.raises(ValueError):
        StackDataset(a, y=b)


def test_concat_dataset_indexing():
    c = ConcatDataset([Squares(3), [7, 8], Squares(4)])
    assert c.cumulative_sizes == [3, 5, 9] and len(c) == 9
    want = [0, 1, 4, 7, 8, 0, 1, 4, 9]
    assert [c[i] for i in range(9)] == want
    assert [c[-i] for i in range(1, 10)] == want[::-1]
    with pytest.raises(ValueError, match="absolute value of index"):
        c[-10]
    with pytest.raises(IndexError):
        c[9]
    with pytest.raises(AssertionError, match="empty"):
        ConcatDataset([])
    with pytest.raises(AssertionError, match="IterableDataset"):
        ConcatDataset([Stream(2)])


def test_chain_dataset():
    ch = ChainDataset([Stream(2), Stream(3)])
    assert list(ch) == [0, 1, 0, 1, 2] and len(ch) == 5
    with pytest.raises(AssertionError):
        list(ChainDataset([Stream(1), Squares(2)]))


def test_subset_and_getitems_delegation():
    calls = []

    class WithGetitems(Squares):
        def __getitems__(self, idx):
            calls.append(list(idx))
            return [self[i] for i in idx]

    s = Subset(WithGetitems(10), [9, 2, 5])
    assert len(s) == 3 and [s[i] for i in range(3)] == [81, 4, 25]
    assert s.__getitems__([2, 0]) == [25, 81] and calls == [[5, 9]]
    plain = Subset(Squares(10), [1, 3])
    assert plain.__getitems__([1, 0]) == [9, 1]
    # the DataLoader fetches a batch with one __getitems__ call
    calls.clear()
    out = list(DataLoader(s, batch_size=2))
    assert calls == [[9, 2], [5]]
    assert [arr(b).tolist() for b in out] == [[81, 4], [25]]


def test_random_split_lengths_fractions_and_errors():
    n = 50
    parts = random_split(range(n), [10, 15, 25], generator=cltorch.Generator().manual_seed(3))
    assert [len(p) for p in parts] == [10, 15, 25]
    assert sorted(i for p in parts for i in p) == list(range(n))
    again = random_split(range(n), [10, 15, 25], generator=cltorch.Generator().manual_seed(3))
    assert [list(p) for p in parts] == [list(p) for p in again]
    other = random_split(range(n), [10, 15, 25], generator=cltorch.Generator().manual_seed(4))
    assert [list(p) for p in parts] != [list(p) for p in other]
    # fractions: floor each, then hand out the remainder from the first split on
    for size, fr in [(7, [0.5, 0.5]), (10, [0.34, 0.33, 0.33]), (3, [0.2, 0.2, 0.6])]:
        floors = [math.floor(size * f) for f in fr]
        for k in range(size - sum(floors)):
            floors[k % len(floors)] += 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = [len(p) for p in random_split(range(size), fr, generator=cltorch.Generator().manual_seed(0))]
        assert got == floors
    with pytest.warns(UserWarning, match="Length of split at index 1 is 0"):   # floors [0, 0, 2] + 1 -> [1, 0, 2]
        random_split(range(3), [0.05, 0.05, 0.9], generator=cltorch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="Sum of input lengths"):
        random_split(range(10), [4, 5])
    with pytest.raises(ValueError, match="not between 0 and 1"):
        random_split(range(10), [1.5, -0.5])


# ----------------------------------------------------------------------------------------------- samplers
def test_sequential_and_base_sampler():
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3] and len(SequentialSampler(range(4))) == 4
    with pytest.raises(NotImplementedError):
        iter(Sampler())


def test_random_sampler_seeded_epochs_and_replacement():
    a = RandomSampler(range(30), generator=cltorch.Generator().manual_seed(11))
    b = RandomSampler(range(30), generator=cltorch.Generator().manual_seed(11))
    ea1, ea2, ea3 = list(a), list(a), list(a)
    assert sorted(ea1) == list(range(30)) and sorted(ea2) == list(range(30))
    assert ea1 != ea2 and ea2 != ea3
    assert [list(b), list(b), list(b)] == [ea1, ea2, ea3]
    # num_samples beyond n: whole permutations, then the start of one more
    c = list(RandomSampler(range(5), num_samples=12, generator=cltorch.Generator().manual_seed(0)))
    assert len(c) == 12 and sorted(c[:5]) == list(range(5)) and sorted(c[5:10]) == list(range(5))
    assert len(set(c[10:])) == 2
    r = RandomSampler(range(7), replacement=True, num_samples=1000, generator=cltorch.Generator().manual_seed(0))
    draws = list(r)
    assert len(r) == 1000 and len(draws) == 1000 and set(draws) == set(range(7))
    counts = np.bincount(draws, minlength=7)
    assert counts.min() > 100 and counts.max() < 190   # 1000/7 = 143 each
    with pytest.raises(TypeError, match="replacement should be a boolean"):
        RandomSampler(range(3), replacement=1)
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        RandomSampler(range(3), num_samples=0)
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        RandomSampler([], num_samples=None)


def test_random_sampler_without_generator_follows_global_seed():
    cltorch.manual_seed(5)
    first = list(RandomSampler(range(40)))
    cltorch.manual_seed(5)
    assert list(RandomSampler(range(40))) == first and sorted(first) == list(range(40))


def test_subset_random_sampler():
    idx = [10, 20, 30, 40, 50]
    s = SubsetRandomSampler(idx, generator=cltorch.Generator().manual_seed(1))
    e1, e2 = list(s), list(s)
    assert sorted(e1) == idx and sorted(e2) == idx and len(s) == 5
    s2 = SubsetRandomSampler(idx, generator=cltorch.Generator().manual_seed(1))
    assert list(s2) == e1


def test_weighted_random_sampler():
    w = [0.0, 1.0, 3.0, 0.0, 6.0]
    s = WeightedRandomSampler(w, 5000, generator=cltorch.Generator().manual_seed(2))
    draws = list(s)
    assert len(s) == 5000 and len(draws) == 5000
    counts = np.bincount(draws, minlength=5)
    assert counts[0] == 0 and counts[3] == 0
    expect = np.array(w) / sum(w) * 5000
    assert np.all(np.abs(counts - expect)[[1, 2, 4]] < 5 * np.sqrt(expect[[1, 2, 4]]))
    no_rep = list(WeightedRandomSampler([1, 1, 1, 1, 5], 4, replacement=False,
                                        generator=cltorch.Generator().manual_seed(0)))
    assert len(set(no_rep)) == 4
    with pytest.raises(ValueError, match="num_samples"):
        WeightedRandomSampler(w, 0)
    with pytest.raises(ValueError, match="replacement"):
        WeightedRandomSampler(w, 3, replacement="yes")
    with pytest.raises(ValueError, match="1d sequence"):
        WeightedRandomSampler([[1.0, 2.0]], 3)


def test_batch_sampler():
    assert list(BatchSampler(range(7), 3, False)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(BatchSampler(range(7), 3, True)) == [[0, 1, 2], [3, 4, 5]]
    assert list(BatchSampler(range(6), 3, False)) == [[0, 1, 2], [3, 4, 5]]
    assert len(BatchSampler(range(7), 3, False)) == 3 and len(BatchSampler(range(7), 3, True)) == 2
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="batch_size should be a positive integer"):
            BatchSampler(range(3), bad, False)
    with pytest.raises(ValueError, match="drop_last should be a boolean"):
        BatchSampler(range(3), 2, 0)


def test_distributed_sampler_partition_padding_and_epochs():
    n, reps = 10, 3
    shards = [DistributedSampler(range(n), num_replicas=reps, rank=r, shuffle=False) for r in range(reps)]
    # ceil(10/3) = 4 each; padded with the first two indices; rank r takes every 3rd from r
    assert [len(s) for s in shards] == [4, 4, 4]
    padded = list(range(n)) + [0, 1]
    assert [list(s) for s in shards] == [padded[r::reps] for r in range(reps)]
    dropped = [DistributedSampler(range(n), num_replicas=reps, rank=r, shuffle=False, drop_last=True)
               for r in range(reps)]
    assert [len(s) for s in dropped] == [3, 3, 3]
    assert sorted(i for s in dropped for i in s) == list(range(9))
    # shuffled: every replica uses seed + epoch, so together they cover the data once per epoch
    sh = [DistributedSampler(range(12), num_replicas=4, rank=r, seed=7) for r in range(4)]
    e0 = [list(s) for s in sh]
    assert sorted(sum(e0, [])) == list(range(12))
    assert [list(s) for s in sh] == e0          # same epoch, same order
    for s in sh:
        s.set_epoch(1)
    e1 = [list(s) for s in sh]
    assert sorted(sum(e1, [])) == list(range(12)) and e1 != e0
    twin = DistributedSampler(range(12), num_replicas=4, rank=2, seed=7)
    twin.set_epoch(1)
    assert list(twin) == e1[2]
    with pytest.raises(ValueError, match="Invalid rank 3"):
        DistributedSampler(range(4), num_replicas=3, rank=3)
    with pytest.raises(ValueError, match="Invalid rank -1"):
        DistributedSampler(range(4), num_replicas=3, rank=-1)
    with pytest.raises((RuntimeError, ValueError)):    # no process group: world size and rank are unknown
        DistributedSampler(range(4))


# ----------------------------------------------------------------------------------------------- collation
Point = collections.namedtuple("Point", "x y")


def test_default_collate_types():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = a + 10
    t = default_collate([cltorch.from_numpy(a), cltorch.from_numpy(b)])
    assert t.shape == (2, 2, 3) and t.dtype == cltorch.float32
    np.testing.assert_array_equal(arr(t), np.stack([a, b]))
    n = default_collate([a, b])                       # numpy arrays -> tensor
    assert isinstance(n, cltorch.Tensor) and n.dtype == cltorch.float32
    np.testing.assert_array_equal(arr(n), np.stack([a, b]))
    f = default_collate([1.5, 2.5])
    assert f.dtype == cltorch.float64 and f.tolist() == [1.5, 2.5]
    i = default_collate([1, 2, 3])
    assert i.dtype == cltorch.int64 and i.tolist() == [1, 2, 3]
    bo = default_collate([True, False])
    assert bo.dtype == cltorch.bool and bo.tolist() == [True, False]
    s = default_collate([np.float32(1.5), np.float32(2.0)])
    assert s.dtype == cltorch.float32 and s.tolist() == [1.5, 2.0]
    assert default_collate(["a", "b"]) == ["a", "b"] and default_collate([b"x", b"y"]) == [b"x", b"y"]
    d = default_collate([{"v": 1, "s": "p"}, {"v": 2, "s": "q"}])
    assert d["v"].tolist() == [1, 2] and d["s"] == ["p", "q"]
    od = default_collate([collections.OrderedDict(k=1.0), collections.OrderedDict(k=2.0)])
    assert isinstance(od, collections.OrderedDict) and od["k"].tolist() == [1.0, 2.0]
    p = default_collate([Point(1, 2.0), Point(3, 4.0)])
    assert isinstance(p, Point) and p.x.tolist() == [1, 3] and p.y.tolist() == [2.0, 4.0]
    tup = default_collate([(1, "a"), (2, "b")])
    assert isinstance(tup, list) and tup[0].tolist() == [1, 2] and tup[1] == ("a", "b")  # the zipped column
    lst = default_collate([[1, 2], [3, 4]])
    assert isinstance(lst, list) and [x.tolist() for x in lst] == [[1, 3], [2, 4]]
    nested = default_collate([{"a": [np.ones(2), 1]}, {"a": [np.zeros(2), 2]}])
    np.testing.assert_array_equal(arr(nested["a"][0]), [[1, 1], [0, 0]])
    # int and float tensors promote as cltorch.stack does (int64 + float32 -> float32)
    mixed = default_collate([cltorch.tensor([1, 2]), cltorch.tensor([0.5, 1.5])])
    assert mixed.dtype == cltorch.float32 and mixed.tolist() == [[1.0, 2.0], [0.5, 1.5]]
    # device tensors and tensors that need grad are stacked by cltorch.stack
    dev = default_collate([cltorch.tensor([1.0, 2.0], device="cl"), cltorch.tensor([3.0, 4.0], device="cl")])
    assert dev.device.type == "cl" and dev.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    w = cltorch.ones(2, requires_grad=True)
    g = default_collate([w, w * 2])
    assert g.requires_grad and g.tolist() == [[1.0, 1.0], [2.0, 2.0]]
    # a non-contiguous tensor collates by value
    tr = cltorch.from_numpy(np.arange(6, dtype=np.int64).reshape(2, 3)).t()
    np.testing.assert_array_equal(arr(default_collate([tr, tr])), np.stack([np.arange(6).reshape(2, 3).T] * 2))


def test_default_collate_errors():
    with pytest.raises(TypeError, match="default_collate: batch must contain tensors, numpy arrays, numbers, "
                                        "dicts or lists; found <class 'object'>"):
        default_collate([object(), object()])
    with pytest.raises(TypeError, match="found <U1"):
        default_collate([np.array(["a"]), np.array(["b"])])
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
        default_collate([[1, 2], [3]])
    with pytest.raises(RuntimeError, match=r"stack expects each tensor to be equal size, but got \[2\] at entry 0 "
                                           r"and \[3\] at entry 1"):
        default_collate([cltorch.zeros(2), cltorch.zeros(3)])


def test_default_convert():
    a = np.arange(4, dtype=np.int32)
    t = default_convert(a)
    assert isinstance(t, cltorch.Tensor) and t.dtype == cltorch.int32 and t.tolist() == [0, 1, 2, 3]
    a[0] = 9
    assert t.tolist()[0] == 9                        # shares memory, like torch.as_tensor
    s = default_convert(np.float64(2.5))
    assert isinstance(s, cltorch.Tensor) and s.dim() == 0 and s.item() == 2.5
    strs = np.array(["x", "y"])
    assert default_convert(strs) is strs
    out = default_convert({"a": np.ones(2), "b": (np.zeros(1), "s"), "c": Point(np.ones(1), 3)})
    assert isinstance(out["a"], cltorch.Tensor) and isinstance(out["b"], list) and out["b"][1] == "s"
    assert isinstance(out["c"], Point) and isinstance(out["c"].x, cltorch.Tensor) and out["c"].y == 3
    assert default_convert("text") == "text" and default_convert(5) == 5
    x = cltorch.ones(2)
    assert default_convert(x) is x


# ----------------------------------------------------------------------------------------------- DataLoader
def test_dataloader_argument_errors():
    ds = Squares(10)
    bs = BatchSampler(SequentialSampler(ds), 2, False)
    cases = [
        (dict(num_workers=-1), "num_workers option should be non-negative"),
        (dict(timeout=-1), "timeout option should be non-negative"),
        (dict(prefetch_factor=2), "prefetch_factor option could only be specified in multiprocessing"),
        (dict(num_workers=1, prefetch_factor=-1), "prefetch_factor option should be non-negative"),
        (dict(persistent_workers=True), "persistent_workers option needs num_workers > 0"),
        (dict(sampler=SequentialSampler(ds), shuffle=True), "sampler option is mutually exclusive with shuffle"),
        (dict(batch_sampler=bs, batch_size=3), "batch_sampler option is mutually exclusive"),
        (dict(batch_sampler=bs, shuffle=True), "batch_sampler option is mutually exclusive"),
        (dict(batch_sampler=bs, sampler=SequentialSampler(ds)), "batch_sampler option is mutually exclusive"),
        (dict(batch_sampler=bs, drop_last=True), "batch_sampler option is mutually exclusive"),
        (dict(batch_size=None, drop_last=True), "batch_size=None option disables auto-batching"),
        (dict(multiprocessing_context="fork"), "multiprocessing_context can only be used with multi-process"),
        (dict(num_workers=1, multiprocessing_context="no-such-method"), "should specify a valid start method"),
    ]
    for kw, msg in cases:
        with pytest.raises(ValueError, match=msg):
            DataLoader(ds, **kw)
    with pytest.raises(TypeError, match="valid context object"):
        DataLoader(ds, num_workers=1, multiprocessing_context=42)
    for kw, msg in [(dict(shuffle=True), "expected unspecified shuffle option"),
                    (dict(sampler=SequentialSampler(ds)), "expected unspecified sampler option"),
                    (dict(batch_sampler=bs), "expected unspecified batch_sampler option")]:
        with pytest.raises(ValueError, match=msg):
            DataLoader(Stream(4), **kw)
    dl = DataLoader(ds, batch_size=2)
    for attr in ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers"):
        with pytest.raises(ValueError, match=f"{attr} attribute should not be set after DataLoader is initialized"):
            setattr(dl, attr, None)
    dl.num_workers = 0                                # other attributes stay settable


def test_dataloader_len_rules_and_batches():
    ds = Squares(10)
    assert len(DataLoader(ds)) == 10
    assert len(DataLoader(ds, batch_size=4)) == 3 and len(DataLoader(ds, batch_size=4, drop_last=True)) == 2
    assert len(DataLoader(ds, batch_size=None)) == 10
    assert len(DataLoader(ds, batch_sampler=BatchSampler(range(10), 3, False))) == 4
    got = [arr(b).tolist() for b in DataLoader(ds, batch_size=4)]
    assert got == [[0, 1, 4, 9], [16, 25, 36, 49], [64, 81]]
    unbatched = list(DataLoader(ds, batch_size=None))
    assert unbatched == [i * i for i in range(10)]        # default_convert leaves ints alone
    it = iter(DataLoader(ds, batch_size=3))
    assert len(it) == 4
    # IterableDataset: len(dataset) divided by the batch size; more batches than that warn
    assert len(DataLoader(Stream(10), batch_size=4)) == 3
    assert len(DataLoader(Stream(10), batch_size=4, drop_last=True)) == 2
    assert [arr(b).tolist() for b in DataLoader(Stream(5), batch_size=2)] == [[0, 1], [2, 3], [4]]
    assert [arr(b).tolist() for b in DataLoader(Stream(5), batch_size=2, drop_last=True)] == [[0, 1], [2, 3]]

    class Liar(Stream):
        def __len__(self):
            return 2

    dl = DataLoader(Liar(4), batch_size=1)
    assert len(dl) == 2
    with pytest.warns(UserWarning, match="was reported to be 2"):
        assert len(list(dl)) == 4


def test_dataloader_shuffle_follows_generator():
    ds = Squares(20)
    a = [arr(b).tolist() for b in DataLoader(ds, batch_size=5, shuffle=True,
                                             generator=cltorch.Generator().manual_seed(9))]
    b = [arr(b).tolist() for b in DataLoader(ds, batch_size=5, shuffle=True,
                                             generator=cltorch.Generator().manual_seed(9))]
    assert a == b and sorted(sum(a, [])) == sorted(i * i for i in range(20))
    assert sum(a, []) != [i * i for i in range(20)]


def test_get_worker_info_in_main_process():
    assert get_worker_info() is None
    info = data._worker.WorkerInfo(id=1, num_workers=2, seed=5, dataset=None)
    assert info.id == 1 and "num_workers=2" in repr(info)
    with pytest.raises(RuntimeError, match="Cannot assign attributes to WorkerInfo objects"):
        info.id = 3


class Pinnable:
    def __init__(self, v):
        self.v, self.pinned = v, False

    def pin_memory(self):
        p = Pinnable(self.v)
        p.pinned = True
        return p


def test_pin_memory_main_process():
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    ds = TensorDataset(cltorch.from_numpy(x))
    (b,) = next(iter(DataLoader(ds, batch_size=4, pin_memory=True)))
    assert b.is_pinned()
    np.testing.assert_array_equal(arr(b), x)
    out = next(iter(DataLoader([Pinnable(1), Pinnable(2)], batch_size=None, pin_memory=True)))
    assert isinstance(out, Pinnable) and out.pinned and out.v == 1
    from cltorch.utils.data._pin import pin_memory
    nested = pin_memory({"a": (cltorch.ones(2), "s"), "p": Point(cltorch.zeros(1), Pinnable(3))})
    assert nested["a"][0].is_pinned() and nested["a"][1] == "s" and isinstance(nested["a"], list)
    assert nested["p"].x.is_pinned() and nested["p"].y.pinned
