"""cltorch.utils.data with worker processes: arithmetic in workers, shared-memory batches, order, seeding,
sharding, failures (exception, kill, exit, timeout), leak-free shutdown, pinning, persistent workers.

Datasets live at module level, so they travel to the workers by reference (test_data_workers_main.py covers
those of a script's __main__, sent by value). References are numpy.
"""
import gc
import mmap
import multiprocessing as mp
import os
import random
import re
import signal
import threading
import time

import numpy as np
import pytest

import cltorch
from cltorch.utils.data import DataLoader, Dataset, IterableDataset, TensorDataset, default_collate, get_worker_info

MEAN, STD = 0.25, 2.0


def arr(t):
    return np.array(t.tolist())


class Normalized(Dataset):
    """Per-sample tensor arithmetic, as users write transforms."""

    def __init__(self, x):
        self.x = cltorch.from_numpy(x)
        self.mean, self.std = cltorch.tensor(MEAN), cltorch.tensor(STD)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return (self.x[i] - self.mean) / self.std, i


class Slow(Dataset):
    """Index i takes delays[i] seconds; returns (i, worker id, pid)."""

    def __init__(self, delays):
        self.delays = delays

    def __len__(self):
        return len(self.delays)

    def __getitem__(self, i):
        time.sleep(self.delays[i])
        return i, get_worker_info().id, os.getpid()


class Seeds(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        info = get_worker_info()
        return (info.id, info.num_workers, info.seed, random.random(), float(np.random.rand()),
                cltorch.rand(3).tolist(), info.dataset is self)


class Faulty(Dataset):
    """Index ``bad`` misbehaves: raises, kills its worker with a signal, exits, or hangs."""

    def __init__(self, n, bad, how):
        self.n, self.bad, self.how = n, bad, how

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.bad:
            if self.how == "raise":
                raise ValueError(f"bad sample {i}")
            if self.how == "keyerror":
                raise KeyError("missing")
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if self.how == "exit":
                os._exit(3)
            if self.how == "hang":
                time.sleep(60)
        return cltorch.from_numpy(np.full(64, i, np.float32))


class Range(IterableDataset):
    def __init__(self, start, end, shard):
        self.start, self.end, self.shard = start, end, shard

    def __iter__(self):
        info = get_worker_info()
        if info is None or not self.shard:
            return iter(range(self.start, self.end))
        return iter(range(self.start + info.id, self.end, info.num_workers))


class Pids(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        return os.getpid()


class Custom:
    """A batch type with its own pin_memory()."""

    def __init__(self, t):
        self.t, self.pinned = t, False

    def pin_memory(self):
        c = Custom(self.t.pin_memory())
        c.pinned = True
        return c


def custom_collate(samples):
    return Custom(default_collate([s[0] for s in samples]))


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _shm_names():
    try:
        return {n for n in os.listdir("/dev/shm") if n.startswith(("ct", "sem."))}
    except FileNotFoundError:
        return set()


@pytest.fixture
def no_leaks():
    """Yields a list to collect worker pids into; afterwards no worker, segment or semaphore is left."""
    gc.collect()
    before_shm, before_children = _shm_names(), len(mp.active_children())
    pids = []
    yield pids
    gc.collect()
    deadline = time.time() + 5
    while time.time() < deadline and (any(_alive(p) for p in pids) or _shm_names() - before_shm):
        time.sleep(0.05)
    assert not [p for p in pids if _alive(p)], "worker processes left behind"
    assert not (_shm_names() - before_shm), f"shared memory left behind: {_shm_names() - before_shm}"
    assert len(mp.active_children()) <= before_children


# ------------------------------------------------------------------------------------------ values, order
def test_tensor_arithmetic_in_two_workers_matches_numpy(no_leaks):
    x = np.random.default_rng(0).random((40, 16), dtype=np.float32)
    dl = DataLoader(Normalized(x), batch_size=8, num_workers=2)
    got, idx = [], []
    for xb, ib in dl:
        assert xb.shape == (8, 16) and xb.dtype == cltorch.float32
        got.append(arr(xb))
        idx += ib.tolist()
    assert idx == list(range(40))                              # sampler order
    want = (x - np.float32(MEAN)) / np.float32(STD)
    np.testing.assert_array_equal(np.concatenate(got), want)


def test_batches_are_mapped_shared_memory():
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    xb, _ = next(iter(DataLoader(TensorDataset(cltorch.from_numpy(x), cltorch.arange(6)), batch_size=6,
                                 num_workers=1)))
    base = xb.numpy()
    while getattr(base, "base", None) is not None and not isinstance(base, mmap.mmap):
        base = base.base
    assert isinstance(base, mmap.mmap)                          # the batch's storage is the mapping itself
    np.testing.assert_array_equal(xb.numpy(), x)


def test_in_order_despite_uneven_workers_and_in_order_false():
    delays = [0.15 if i % 2 == 0 else 0.0 for i in range(8)]    # worker 0 (even batches) is slow
    dl = DataLoader(Slow(delays), batch_size=1, num_workers=2)
    assert [b[0].item() for b in dl] == list(range(8))
    dl = DataLoader(Slow(delays), batch_size=1, num_workers=2, in_order=False)
    got = [b[0].item() for b in dl]
    assert sorted(got) == list(range(8)) and got != list(range(8))


def test_worker_info_and_seeding_reproducible():
    def run(seed):
        dl = DataLoader(Seeds(), batch_size=None, num_workers=2, generator=cltorch.Generator().manual_seed(seed))
        return list(dl)

    a, b = run(1), run(1)
    assert a == b
    ids = [s[0] for s in a]
    assert ids == [0, 1, 0, 1] and all(s[1] == 2 for s in a)
    assert all(s[6] for s in a)                                 # info.dataset is the worker's dataset
    base = a[0][2]
    # base_seed is one int64 drawn from the loader's generator (PyTorch's rule); seed = base_seed + worker id
    assert base == cltorch.empty((), dtype=cltorch.int64).random_(generator=cltorch.Generator().manual_seed(1)).item()
    assert a[1][2] == base + 1
    # the two workers draw different Python, numpy and cltorch numbers
    assert a[0][3] != a[1][3] and a[0][4] != a[1][4] and a[0][5] != a[1][5]
    # Python's random in worker w is seeded with base_seed + w
    assert a[0][3] == random.Random(base).random() and a[1][3] == random.Random(base + 1).random()


def test_iterable_dataset_duplicates_unless_sharded():
    dup = [b for b in DataLoader(Range(0, 6, shard=False), batch_size=None, num_workers=2)]
    assert sorted(dup) == sorted(list(range(6)) * 2)
    sharded = DataLoader(Range(0, 10, shard=True), batch_size=3, num_workers=2)
    got = sorted(i for b in sharded for i in b.tolist())
    assert got == list(range(10))


# ------------------------------------------------------------------------------------------ failures
def test_worker_exception_reraised_with_traceback_and_id(no_leaks):
    dl = DataLoader(Faulty(8, bad=5, how="raise"), batch_size=2, num_workers=2)
    it = iter(dl)
    no_leaks.extend(p.pid for p in it._res.procs)
    assert next(it).shape == (2, 64) and next(it).shape == (2, 64)
    with pytest.raises(ValueError) as e:
        next(it)
    msg = str(e.value)
    assert "Caught ValueError in DataLoader worker process 0" in msg
    assert "Traceback (most recent call last)" in msg and "bad sample 5" in msg and "__getitem__" in msg
    assert next(it).shape == (2, 64)                            # the loader carries on, like PyTorch's
    del it
    with pytest.raises(KeyError, match="worker process 1"):         # batch 3 goes to worker 3 % 2
        list(DataLoader(Faulty(4, bad=3, how="keyerror"), batch_size=1, num_workers=2))


@pytest.mark.parametrize("how,code,cause", [("kill", "exit code -9 (killed by signal SIGKILL)", "out-of-memory killer"),
                                            ("exit", "exit code 3", "It ended itself (sys.exit or os._exit")])
def test_worker_death_raises_quickly(no_leaks, how, code, cause):
    dl = DataLoader(Faulty(16, bad=6, how=how), batch_size=2, num_workers=2)
    it = iter(dl)
    no_leaks.extend(p.pid for p in it._res.procs)
    t0 = time.time()
    pattern = r"DataLoader worker 1 \(pid \d+\) exited unexpectedly with " + re.escape(code)
    with pytest.raises(RuntimeError, match=pattern) as e:
        for _ in it:
            pass
    assert time.time() - t0 < 5
    assert cause in str(e.value) and (how == "kill") == ("out-of-memory" in str(e.value))


def test_worker_killed_from_outside(no_leaks):
    it = iter(DataLoader(Slow([0.05] * 40), batch_size=1, num_workers=2))
    no_leaks.extend(p.pid for p in it._res.procs)
    next(it)
    os.kill(it._res.procs[0].pid, signal.SIGKILL)
    t0 = time.time()
    with pytest.raises(RuntimeError, match="DataLoader worker 0 .* exited unexpectedly with exit code -9"):
        for _ in it:
            pass
    assert time.time() - t0 < 5


def test_timeout(no_leaks):
    dl = DataLoader(Faulty(4, bad=0, how="hang"), batch_size=1, num_workers=1, timeout=0.5)
    it = iter(dl)
    no_leaks.extend(p.pid for p in it._res.procs)
    t0 = time.time()
    with pytest.raises(RuntimeError, match="DataLoader timed out after 0.5 seconds"):
        next(it)
    assert 0.4 < time.time() - t0 < 4
    del it                                                      # the hanging worker is terminated


# ------------------------------------------------------------------------------------------ shutdown
@pytest.mark.parametrize("how", ["exhaust", "break", "exception", "gc"])
def test_no_leaks_on_any_exit(no_leaks, how):
    x = np.random.default_rng(1).random((64, 32), dtype=np.float32)
    big = np.random.default_rng(2).random((300, 1000), dtype=np.float32)   # > 64 KiB: goes through shm
    dl = DataLoader(TensorDataset(cltorch.from_numpy(x), cltorch.from_numpy(big[:64])), batch_size=4,
                    num_workers=2, pin_memory=(how == "gc"))
    it = iter(dl)
    no_leaks.extend(p.pid for p in it._res.procs)
    if how == "exhaust":
        assert sum(len(b[0]) for b in it) == 64
    elif how == "break":
        for k, _ in enumerate(it):
            if k == 3:
                break
    elif how == "exception":
        with pytest.raises(ZeroDivisionError):
            for k, _ in enumerate(it):
                if k == 2:
                    1 / 0
    else:
        next(it)
        next(it)
    del it


def test_persistent_workers_reuse_processes(no_leaks):
    dl = DataLoader(Pids(), batch_size=2, num_workers=2, persistent_workers=True)
    e1 = [p for b in dl for p in b.tolist()]
    it = iter(dl)
    no_leaks.extend(p.pid for p in it._res.procs)
    e2 = [p for b in it for p in b.tolist()]
    assert len(e1) == 8 and set(e1) == set(e2) and len(set(e1)) == 2
    # an abandoned epoch does not leak stale batches into the next one
    for k, _ in enumerate(dl):
        if k == 0:
            break
    assert len([b for b in dl]) == 4
    del dl, it


# ------------------------------------------------------------------------------------------ pinning
def test_pin_memory_thread_and_custom_batches(no_leaks):
    x = np.arange(48, dtype=np.float32).reshape(12, 4)
    ds = TensorDataset(cltorch.from_numpy(x))
    dl = DataLoader(ds, batch_size=4, num_workers=2, pin_memory=True)
    it = iter(dl)
    no_leaks.extend(p.pid for p in it._res.procs)
    out = [b[0] for b in it]
    assert all(b.is_pinned() for b in out)
    np.testing.assert_array_equal(np.concatenate([arr(b) for b in out]), x)
    dev = out[0].to("cl", non_blocking=True)
    np.testing.assert_array_equal(arr(dev), x[:4])
    cb = list(DataLoader(ds, batch_size=6, num_workers=2, pin_memory=True, collate_fn=custom_collate))
    assert all(isinstance(c, Custom) and c.pinned and c.t.is_pinned() for c in cb)
    np.testing.assert_array_equal(arr(cb[1].t), x[6:])


# ------------------------------------------------------------------------------------------ fork
class Exponentiated(Dataset):
    """A transform that needs an OpenCL kernel (exp), not only IEEE-exact arithmetic (which runs in numpy)."""

    def __init__(self, x):
        self.x = x

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return cltorch.from_numpy(self.x[i]).exp()


def test_forced_fork_with_arithmetic_raises_instead_of_hanging():
    (cltorch.ones(4) * 2).exp().tolist()    # the parent uses OpenCL before forking
    x = np.ones((4, 4), np.float32)
    # small +-*/ transforms run on the host (numpy) and work even under fork
    got = [b for b in DataLoader(Normalized(x), batch_size=2, num_workers=1, multiprocessing_context="fork")]
    assert len(got) == 2
    dl = DataLoader(Exponentiated(x), batch_size=2, num_workers=1, multiprocessing_context="fork", timeout=60)
    t0 = time.time()
    with pytest.raises(RuntimeError) as e:
        list(dl)
    assert "fork" in str(e.value) and "timed out" not in str(e.value)
    assert time.time() - t0 < 30
    # pure data movement works under fork
    got = [b[0] for b in DataLoader(TensorDataset(cltorch.from_numpy(x)), batch_size=2, num_workers=1,
                                    multiprocessing_context="fork")]
    np.testing.assert_array_equal(np.concatenate([arr(b) for b in got]), x)


class BrokenInWorker(Dataset):
    """Unpickles into a dataset that cannot be used: fails when the worker loads it."""

    def __init__(self):
        self.path = "/nonexistent"

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return i

    def __setstate__(self, state):
        raise OSError("dataset file not found in the worker")


def failing_init(worker_id):
    raise ValueError(f"init failed in {worker_id}")


def test_worker_start_failures_are_reported(no_leaks):
    with pytest.raises(OSError, match="while starting(.|\n)*dataset file not found in the worker"):
        list(DataLoader(BrokenInWorker(), num_workers=2))
    with pytest.raises(ValueError, match="init failed in"):
        list(DataLoader(Pids(), num_workers=1, worker_init_fn=failing_init))
    lock = threading.Lock()
    with pytest.raises(TypeError, match=r"collate_fn \(closure variable 'lock'\) \(a _thread.lock\) cannot be "
                                        r"pickled: TypeError: cannot pickle '_thread.lock' object\. Keep such"):
        list(DataLoader(Pids(), num_workers=1, collate_fn=lambda b: (lock, b)[1]))


class Mutating(Dataset):
    """Holds a large array (sent through shared memory, mapped copy-on-write) and writes into it."""

    def __init__(self):
        self.big = np.zeros(100_000, np.float64)
        self.t = cltorch.from_numpy(np.zeros(50_000, np.float32))

    def __len__(self):
        return 8

    def __getitem__(self, i):
        seen = (float(self.big[0]), self.t[0].item())
        self.big[0] += 1
        self.t[0] = self.t[0].item() + 1
        return seen


def test_dataset_copy_per_worker_is_private(no_leaks):
    ds = Mutating()
    got = list(DataLoader(ds, batch_size=None, num_workers=2))
    # each worker counts from 0 in its own copy; the main process's arrays are untouched
    assert [g[0] for g in got] == [0, 0, 1, 1, 2, 2, 3, 3] and [g[1] for g in got] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert ds.big[0] == 0 and ds.t[0].item() == 0


# ------------------------------------------------------------------------------------------ real training run
def _children(pid):
    kids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == pid:
                kids.append(int(d))
    return kids


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds the workers through /proc")
def test_training_example_with_a_killed_worker(tmp_path):
    """examples/train_digits.py (2 workers, pinned memory, persistent workers): SIGKILL one worker mid-run;
    the script must fail fast with the worker's id and exit code, leaving no process or segment behind."""
    import subprocess
    import sys
    pytest.importorskip("sklearn")
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=repo + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-u", os.path.join(repo, "examples", "train_digits.py"), "--device", "cpu",
                             "--epochs", "200", "--workers", "2", "--no-progress",
                             "--checkpoint", str(tmp_path / "ck.pt")],
                            cwd=str(tmp_path), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 180
        line = ""
        for line in proc.stdout:
            if "first step done" in line or time.time() > deadline:
                break
        if proc.poll() is not None or "first step done" not in line:
            proc.kill()
            pytest.fail(f"the example did not start training (rc {proc.wait()}):\n{proc.stderr.read()[-3000:]}")
        servers = [p for p in _children(proc.pid) if "forkserver" in _cmdline(p)]
        assert len(servers) == 1, "the DataLoader's fork server was not found"
        workers = _children(servers[0])
        assert len(workers) == 2
        os.kill(workers[0], signal.SIGKILL)
        t0 = time.time()
        _, err = proc.communicate(timeout=60)
        elapsed = time.time() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0
    assert re.search(rf"RuntimeError: DataLoader worker \d \(pid {workers[0]}\) exited unexpectedly with exit code -9",
                     err), err[-3000:]
    assert elapsed < 15
    deadline = time.time() + 5
    while time.time() < deadline and any(_alive(p) for p in workers):
        time.sleep(0.05)
    assert not [p for p in workers if _alive(p)]
    assert not [n for n in os.listdir("/dev/shm") if n.startswith(f"ct{proc.pid:x}_")]


class Rows(Dataset):
    def __len__(self):
        return 120

    def __getitem__(self, i):
        return cltorch.from_numpy(np.full(1000, i, np.float32))


def test_segments_are_recycled_only_after_the_main_process_drops_them(no_leaks, monkeypatch):
    from cltorch.utils.data import _pickle
    names = []
    real = _pickle._map_batch

    def recording(name, *args):
        mm = real(name, *args)
        names.append((name, int(np.frombuffer(mm, np.float32, 1)[0]) // 4))   # (segment, batch number)
        return mm

    monkeypatch.setattr(_pickle, "_map_batch", recording)
    it = iter(DataLoader(Rows(), batch_size=4, num_workers=2))
    no_leaks.extend(p.pid for p in it._res.procs)
    kept = []
    for k, b in enumerate(it):
        np.testing.assert_array_equal(arr(b), np.repeat(np.arange(4 * k, 4 * k + 4, dtype=np.float32)[:, None],
                                                        1000, axis=1))
        if k % 3 == 0:
            kept.append((k, b))          # held: its segment must never be written again
        del b                            # the last view of an unkept batch: its segment goes back
    assert len(names) == 30 and len({n for n, _ in names}) < 20    # dropped batches' segments came back
    for k, b in kept:
        assert np.all(arr(b) == np.arange(4 * k, 4 * k + 4, dtype=np.float32)[:, None])
    seg_of = {k: n for n, k in names}
    assert len({seg_of[k] for k, _ in kept}) == len(kept)          # held batches never share a segment
    del it, kept


_CACHE_CHILD = """
import sys
import cltorch
from cltorch.utils.data import DataLoader, Dataset

class Exps(Dataset):           # a kernel op (exp) on cpu tensors inside the workers
    def __len__(self):
        return 8
    def __getitem__(self, i):
        y = (cltorch.arange(4.0) * (0.0625 * (i + 1)) + 0.1234567).exp()
        return y, cltorch.backend.stats()["builds"]     # programs this worker compiled from source so far

if __name__ == "__main__":
    import os, signal
    it = iter(DataLoader(Exps(), batch_size=4, num_workers=2))
    batches = [next(it), next(it)]
    for p in it._res.procs:     # workers that never reach their exit handlers (as when they are terminated)
        os.kill(p.pid, signal.SIGKILL)
    print(sum(b.sum().item() for b, _ in batches), max(int(n.max()) for _, n in batches))
    sys.stdout.flush()
    cltorch.backend.program.save_binaries(quiet=True)
    os._exit(0)
"""


def test_kernels_compiled_in_workers_are_cached(tmp_path):
    """Workers may be terminated at shutdown rather than exit, so they write what they compile when they build
    it: a second run finds every program in the cache and compiles nothing."""
    import subprocess
    import sys
    script = tmp_path / "child.py"
    script.write_text(_CACHE_CHILD)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, CLTORCH_CACHE_DIR=str(tmp_path / "kc"),
               PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("CLTORCH_NO_DISK_CACHE", None)
    first = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    files = sorted(p.name for p in (tmp_path / "kc").glob("*.bin"))
    assert files, "nothing was cached"
    assert not [p for p in (tmp_path / "kc").iterdir() if p.name.startswith(".tmp-")]
    total, worker_builds = first.stdout.split()
    assert int(worker_builds) > 0                   # the workers did compile (their exp kernel)
    second = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stdout.split() == [total, "0"]    # same values; the workers loaded everything from the cache
