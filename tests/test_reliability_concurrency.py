"""Reliability (issue 10): faults and concurrency.

- 4 processes started at once with an empty kernel cache (CLTORCH_CACHE_DIR) build the same kernels; all succeed,
  give bit-identical results, and leave only whole cache files (no temporaries).
- 2 Python threads x 1,000 ops on the same device at once give the right answers (the pin-memory thread of the
  DataLoader relies on it). Kernels are shared objects: their arguments must not cross between threads.

Not repeated here: truncated cache binaries (test_backend.py), SIGKILL mid-save (test_serialization.py), killed or
hanging DataLoader workers (test_data_workers.py).
"""
import os
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import cltorch as torch
from conftest import DEVICES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_WORKER = textwrap.dedent("""
    import hashlib, os, sys, time
    go = sys.argv[1]
    while not os.path.exists(go):          # start together
        time.sleep(0.002)
    import numpy as np
    import cltorch as torch
    from cltorch import backend
    rng = np.random.default_rng(0)
    outs = []
    a = torch.tensor(rng.standard_normal((33, 17)).astype(np.float32), device="cl:0")
    b = torch.tensor(rng.standard_normal((17, 9)).astype(np.float32), device="cl:0")
    y = (a @ b).tanh() * 3.5 - 1
    outs += [y, y.sum(1), torch.softmax(y, 1)]
    h = hashlib.sha256()
    for o in outs:
        h.update(o.cpu().numpy().tobytes())
    print(h.hexdigest(), backend.stats()["builds"], backend.stats()["disk_hits"])
""")


def test_concurrent_cold_builds_agree(tmp_path):
    cache = tmp_path / "cltorch-cache"
    env = dict(os.environ, CLTORCH_CACHE_DIR=str(cache),
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("CLTORCH_NO_DISK_CACHE", None)
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(go)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT) for _ in range(4)]
    time.sleep(0.3)
    go.touch()
    results = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0, err[-3000:]
    lines = [out.split() for out, _ in results]
    assert len({ln[0] for ln in lines}) == 1, lines                   # identical results, bit for bit
    assert all(int(ln[1]) + int(ln[2]) > 0 for ln in lines)          # each process built or loaded programs
    files = sorted(os.listdir(cache))
    assert files and all(f.endswith(".bin") for f in files), files    # no temporaries left behind
    # every binary written in the race is whole (length and checksum), so later processes load them
    from pathlib import Path
    from cltorch.backend import program
    assert all(program._read_binary(Path(cache) / f) is not None for f in files)


def _thread_work(tid, device, n, errors, barrier):
    """n ops: elementwise, reductions, matmul, indexing and in-place updates on this thread's own tensors, checked
    against numpy every 50 ops; the kernels (same dtypes and shapes in both threads) are shared."""
    try:
        rng = np.random.default_rng(tid)
        a_np = rng.standard_normal((16, 16)).astype(np.float32)
        a = torch.tensor(a_np, device=device)
        idx_np = rng.permutation(16)
        idx = torch.tensor(idx_np, device=device)
        acc, acc_np = a.clone(), a_np.copy()
        barrier.wait()
        for i in range(n):
            k = i % 5
            if k == 0:
                acc, acc_np = acc * 0.5 + (tid + 1), acc_np * np.float32(0.5) + np.float32(tid + 1)
            elif k == 1:
                acc, acc_np = torch.tanh(acc) - a, np.tanh(acc_np) - a_np
            elif k == 2:
                acc, acc_np = acc @ a * 0.1, (acc_np @ a_np) * np.float32(0.1)
            elif k == 3:
                acc, acc_np = acc[idx] + acc.sum(0), acc_np[idx_np] + acc_np.sum(0)
            else:
                acc.mul_(0.9)
                acc_np = acc_np * np.float32(0.9)
            if i % 50 == 49:
                got = acc.cpu().numpy()
                if not np.allclose(got, acc_np, rtol=1e-3, atol=1e-3):
                    errors.append(f"thread {tid} op {i}: max diff {np.abs(got - acc_np).max()}")
                    return
    except Exception as e:  # pragma: no cover - reported below
        errors.append(f"thread {tid}: {type(e).__name__}: {e}")


@pytest.mark.parametrize("device", DEVICES)
def test_two_threads_same_device(device):
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)          # switch threads often: races show up within the 1,000 ops
    try:
        errors, barrier = [], threading.Barrier(2)
        ts = [threading.Thread(target=_thread_work, args=(t, device, 1000, errors, barrier)) for t in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        assert not any(t.is_alive() for t in ts), "a thread hung"
    finally:
        sys.setswitchinterval(old)
    assert not errors, errors
