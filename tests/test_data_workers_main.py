"""DataLoader workers and the user's ``__main__``: scripts without an ``if __name__ == "__main__":`` guard,
notebooks (``python -c``), ``python -m``; objects defined in the script travel by value, the worker never runs
the script; what cannot travel is named in the error, with the fix.

Each script case is a real file run in its own interpreter (cwd: an empty folder). Its top level appends the
pid of the process running it to a log; every script ends by checking that only its own process ran it, and
checks its values against numpy or plain Python.
"""
import multiprocessing as mp
import os
import pickle
import socket
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import cltorch
from cltorch.utils.data import DataLoader, Dataset, _pickle, _start

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PRELUDE = """\
import os
import numpy as np
import cltorch as torch
from cltorch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info

with open(os.environ["RUN_LOG"], "a") as _log:     # every process that executes this top level says so
    _log.write(f"{os.getpid()}\\n")
"""

EPILOGUE = """
with open(os.environ["RUN_LOG"]) as _log:
    ran = _log.read().split()
assert ran == [str(os.getpid())], f"the script's top level ran in other processes too: {ran}"
print("ok")
"""

SCRIPTS = {
    # Dataset class, collate_fn (returning a class of the script), worker_init_fn and an exception class, all in
    # the script body.
    "body": """
class Batch:
    def __init__(self, x, ids):
        self.x, self.ids = x, ids

class Squares(Dataset):
    def __init__(self, n):
        self.n, self.offset = n, 0
    def __len__(self):
        return self.n
    def __getitem__(self, i):
        return torch.tensor([float(i * i + self.offset)]), i

def collate(samples):
    xs, ids = zip(*samples)
    return Batch(torch.cat(xs), list(ids))

def init(worker_id):
    get_worker_info().dataset.offset = 1000 * (worker_id + 1)

class BadSample(Exception):
    pass

class Raises(Dataset):
    def __len__(self):
        return 2
    def __getitem__(self, i):
        raise BadSample(f"sample {i} is bad")

# --- run
got = {}
for b in DataLoader(Squares(12), batch_size=3, num_workers=2, collate_fn=collate, worker_init_fn=init):
    assert type(b) is Batch, type(b)
    for v, i in zip(b.x.tolist(), b.ids):
        got[i] = v
# batch k (samples 3k..3k+2) comes from worker k % 2, whose init set offset 1000 * (id + 1)
assert got == {i: i * i + 1000.0 * ((i // 3) % 2 + 1) for i in range(12)}, got
try:
    list(DataLoader(Raises(), num_workers=1))
except BadSample as e:
    assert "Caught BadSample in DataLoader worker process 0" in str(e) and "sample 0 is bad" in str(e), str(e)
else:
    raise AssertionError("the worker's exception was not re-raised")
""",
    "lambda_collate": """
class Rows(Dataset):
    def __len__(self):
        return 10
    def __getitem__(self, i):
        return torch.from_numpy(np.arange(4, dtype=np.float32) + i)

dl = DataLoader(Rows(), batch_size=4, num_workers=2, collate_fn=lambda s: torch.stack([r * 2 - 1 for r in s]))
out = np.concatenate([b.numpy() for b in dl])
np.testing.assert_array_equal(out, (np.arange(4, dtype=np.float32)[None, :] + np.arange(10)[:, None]) * 2 - 1)
""",
    # the dataset reads the script's globals: a constant, a helper function and a 160 KB array (shared memory)
    "script_globals": """
SCALE = 3.0
TABLE = np.arange(40000, dtype=np.float32).reshape(400, 100)

def shift(row):
    return row - SCALE

class FromTable(Dataset):
    def __len__(self):
        return len(TABLE)
    def __getitem__(self, i):
        return torch.from_numpy(shift(TABLE[i] * SCALE))

out = np.concatenate([b.numpy() for b in DataLoader(FromTable(), batch_size=50, num_workers=2)])
np.testing.assert_array_equal(out, TABLE * 3.0 - 3.0)
""",
    # a class made inside a function (closing over its argument) and a collate_fn that is a closure
    "closure": """
def make_dataset(shift):
    class Shifted(Dataset):
        def __len__(self):
            return 10
        def __getitem__(self, i):
            return i + shift
    return Shifted()

def make_collate(scale):
    def collate(samples):
        return [s * scale for s in samples]
    return collate

got = [v for b in DataLoader(make_dataset(100), batch_size=3, num_workers=2, collate_fn=make_collate(2)) for v in b]
assert got == [(i + 100) * 2 for i in range(10)], got
""",
    # the main process trains on cl:0 (OpenCL in use before and while the workers start) and the workers run
    # kernels (exp) of their own
    "train_on_device": """
torch.manual_seed(0)
model = torch.nn.Linear(6, 1).to("cl:0")
opt = torch.optim.SGD(model.parameters(), lr=0.05)
rng = np.random.default_rng(0)
X = (0.3 * rng.standard_normal((64, 6))).astype(np.float32)
W = rng.standard_normal(6).astype(np.float32)

class ExpFeatures(Dataset):
    def __len__(self):
        return len(X)
    def __getitem__(self, i):
        x = torch.from_numpy(X[i]).exp()            # a kernel in the worker
        return x, (x * torch.from_numpy(W)).sum(), i

losses, seen = [], []
for epoch in range(3):
    total = 0.0
    for x, y, idx in DataLoader(ExpFeatures(), batch_size=16, shuffle=True, num_workers=2):
        np.testing.assert_allclose(x.numpy(), np.exp(X[idx.numpy()]), rtol=1e-6)
        x, y = x.to("cl:0"), y.to("cl:0")
        loss = ((model(x).squeeze(1) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += loss.item()
        seen += idx.tolist()
    losses.append(total)
assert sorted(seen) == sorted(list(range(64)) * 3)
assert losses[-1] < losses[0], losses
""",
    "persistent": """
class Pid(Dataset):
    def __len__(self):
        return 12
    def __getitem__(self, i):
        return i, os.getpid()

dl = DataLoader(Pid(), batch_size=2, shuffle=True, num_workers=2, persistent_workers=True,
                generator=torch.Generator().manual_seed(1))
pids = []
for epoch in range(3):
    idx = []
    for i, p in dl:
        idx += i.tolist()
        pids += p.tolist()
    assert sorted(idx) == list(range(12)), idx
assert len(set(pids)) == 2 and os.getpid() not in pids, set(pids)
""",
    # an IterableDataset defined in the script, sharded with get_worker_info()
    "iterable": """
class Counting(IterableDataset):
    def __iter__(self):
        info = get_worker_info()
        return iter(range(info.id, 20, info.num_workers))

assert sorted(DataLoader(Counting(), batch_size=None, num_workers=2)) == list(range(20))
""",
}


def _env(tmp_path):
    env = dict(os.environ, RUN_LOG=str(tmp_path / "ran.log"))
    env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def _run(args, tmp_path, timeout=240):
    return subprocess.run([sys.executable, *args], cwd=tmp_path, env=_env(tmp_path), capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def _check(proc):
    assert proc.returncode == 0 and proc.stdout.split()[-1:] == ["ok"], \
        f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-4000:]}"


def _guarded(script):
    """The same script with the statements after its definitions (from the line ``# --- run``) under a guard."""
    defs, run = script.split("# --- run\n")
    return defs + "if __name__ == '__main__':\n" + textwrap.indent(run, "    ")


@pytest.mark.parametrize("case", list(SCRIPTS))
def test_script_without_main_guard(case, tmp_path):
    script = tmp_path / f"{case}.py"
    script.write_text(PRELUDE + SCRIPTS[case] + EPILOGUE)
    _check(_run([str(script)], tmp_path))


def test_script_with_main_guard_still_works(tmp_path):
    script = tmp_path / "guarded.py"
    script.write_text(PRELUDE + _guarded(SCRIPTS["body"] + EPILOGUE))
    _check(_run([str(script)], tmp_path))


def test_notebook_like_main_without_a_file(tmp_path):
    """``python -c``: a ``__main__`` with no file (as in a notebook or an ``exec``) defines the dataset."""
    _check(_run(["-c", PRELUDE + SCRIPTS["body"] + EPILOGUE], tmp_path))


def test_script_run_as_module(tmp_path):
    """``python -m``: multiprocessing would import the module again in each worker (init_main_from_name)."""
    (tmp_path / "train_mod.py").write_text(PRELUDE + SCRIPTS["script_globals"] + EPILOGUE)
    _check(_run(["-m", "train_mod"], tmp_path))


UNPICKLABLE = """
import threading

class Guarded(Dataset):
    def __init__(self):
        self.lock = threading.Lock()
    def __len__(self):
        return 4
    def __getitem__(self, i):
        with self.lock:
            return i

list(DataLoader(Guarded(), num_workers=2))
"""


def test_unpicklable_dataset_names_the_object_and_the_fix(tmp_path):
    script = tmp_path / "locked.py"
    script.write_text(PRELUDE + UNPICKLABLE)
    proc = _run([str(script)], tmp_path)
    assert proc.returncode == 1
    err = proc.stderr
    assert "TypeError: DataLoader workers (started by forkserver) receive the dataset" in err, err[-3000:]
    assert "dataset.lock (a _thread.lock) cannot be pickled" in err and "cannot pickle '_thread.lock'" in err
    assert "__getstate__" in err and "num_workers=0" in err and "worker_init_fn" in err
    assert "out-of-memory" not in err and "exited unexpectedly" not in err


# ------------------------------------------------------------------------------------------ in-process parts
class HoldsSocket(Dataset):
    def __init__(self):
        self.meta = {"name": "x", "conn": socket.socket()}

    def __len__(self):
        return 1

    def __getitem__(self, i):
        return i


def test_find_unpicklable_paths():
    ds = HoldsSocket()
    lock = threading.Lock()
    try:
        def collate(batch):               # a closure over a lock: cloudpickle sends closures by value
            with lock:
                return batch
        path, obj, err = _pickle.find_unpicklable([("dataset", ds), ("collate_fn", collate)])
        assert path == "dataset.meta['conn']" and obj is ds.meta["conn"] and isinstance(err, TypeError)
        ds.meta["conn"].close()
        del ds.meta["conn"]
        path, obj, err = _pickle.find_unpicklable([("dataset", ds), ("collate_fn", collate)])
        assert path == "collate_fn (closure variable 'lock')" and obj is lock
        assert _pickle.find_unpicklable([("dataset", ds), ("collate_fn", lambda b: b)]) is None
    finally:
        ds.meta.get("conn", socket.socket()).close()


def test_unpicklable_error_in_process_keeps_its_type():
    ds = HoldsSocket()
    try:
        with pytest.raises(TypeError, match=r"dataset\.meta\['conn'\] \(a socket\.socket\) cannot be pickled"):
            list(DataLoader(ds, num_workers=1))
    finally:
        ds.meta["conn"].close()


def test_lambda_and_local_class_travel_by_value():
    class Local(Dataset):                 # not importable: a local class
        def __len__(self):
            return 6

        def __getitem__(self, i):
            return cltorch.tensor([i, i * 10])

    got = [b.tolist() for b in DataLoader(Local(), batch_size=3, num_workers=2, collate_fn=lambda s: cltorch.stack(s))]
    assert got == [[[0, 0], [1, 10], [2, 20]], [[3, 30], [4, 40], [5, 50]]]


def test_main_classes_in_batches_travel_by_name(monkeypatch):
    """A worker's copy of a class defined in ``__main__`` was rebuilt from its value; a batch that holds one (or
    an instance) is rebuilt in the main process with the main process's own class."""
    main = sys.modules["__main__"]
    cls = type("ScriptBatch", (), {"__module__": "__main__"})
    monkeypatch.setattr(main, "ScriptBatch", cls, raising=False)
    copy = type("ScriptBatch", (), {"__module__": "__main__"})    # the worker's copy: same name, other object
    inst = copy()
    inst.v = 3
    back = _pickle.loads(_pickle.dumps_batch((copy, inst)))
    assert back[0] is cls and type(back[1]) is cls and back[1].v == 3
    local = type("Local", (), {"__module__": "__main__", "__qualname__": "f.<locals>.Local"})
    with pytest.raises((pickle.PicklingError, AttributeError)):   # as torch: a local class cannot come back
        _pickle.dumps_batch(local())


def test_worker_processes_omit_the_main_module_from_their_preparation():
    from multiprocessing import spawn
    plain = spawn.get_preparation_data("x")
    main = sys.modules["__main__"]
    if getattr(main, "__file__", None) or getattr(main.__spec__, "name", None):
        assert {"init_main_from_path", "init_main_from_name"} & set(plain)
    with _start._without_main():
        data = spawn.get_preparation_data("x")
    assert not {"init_main_from_path", "init_main_from_name"} & set(data)
    assert {k: v for k, v in plain.items() if not k.startswith("init_main")} == data
    assert {"init_main_from_path", "init_main_from_name"} & set(spawn.get_preparation_data("x")) == \
        {"init_main_from_path", "init_main_from_name"} & set(plain)     # a pass-through again
    assert type(_start.worker_process(mp.get_context("forkserver"), target=print)).__name__ == "_ForkServerProcess"
    assert type(_start.worker_process(mp.get_context("spawn"), target=print)).__name__ == "_SpawnProcess"
    assert type(_start.worker_process(mp.get_context("fork"), target=print)) is mp.get_context("fork").Process


def test_spawn_workers_without_main(tmp_path):
    """The same holds for an explicit ``multiprocessing_context="spawn"`` (a fresh interpreter per worker)."""
    script = tmp_path / "spawned.py"
    script.write_text(PRELUDE + SCRIPTS["lambda_collate"].replace("num_workers=2", "num_workers=2, "
                                                                  "multiprocessing_context='spawn'") + EPILOGUE)
    _check(_run([str(script)], tmp_path))
