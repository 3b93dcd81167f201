"""cltorch.multiprocessing: shared cpu tensors seen across processes, spawn's error transport, the start method.

Children are started by the module's default (forkserver) unless a test says otherwise; their targets are
module-level functions of this file, which the children import by name.
"""
import multiprocessing.reduction
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cltorch
import cltorch.multiprocessing as mp
import cltorch.nn as nn

N_KERNEL = 70_000   # above the numpy path's 65,536 elements: the child's op runs as an OpenCL kernel

TIMEOUT = 60


# ------------------------------------------------------------------------------------------ children
def _child_write(t, q):
    t[0] = 42.0                                    # host (numpy) write
    t.add_(cltorch.ones(t.shape[0]).exp())         # kernel over the zero-copy buffer of the shared pages
    q.put("done")


def _child_from_queue(inq, outq, done):
    t = inq.get()
    outq.put((t.is_shared(), type(t).__name__, t.requires_grad))
    with cltorch.no_grad():
        t.mul_(3)
    w = cltorch.full((4,), 7.0)                    # a tensor made here, sent back while we stay alive
    outq.put((t.detach()[1:3], w))
    done.wait(TIMEOUT)


def _child_fork_opencl(t, q):
    try:
        (t @ t).tanh().sum().item()
        q.put("no error")
    except RuntimeError as e:
        q.put(str(e))


def _spawn_fn(i, t, fail):
    t[i] = i + 10
    if fail and i == 1:
        raise ValueError(f"child {i} failed on purpose")


def _pool_fill(args):
    t, i = args
    t[i] = float(i * i)
    return i


# ------------------------------------------------------------------------------------------ tests
def test_share_memory_in_place():
    a = cltorch.arange(12, dtype=cltorch.float32)
    v = a[2:6]
    assert not a.is_shared() and not v.is_shared()
    assert v.share_memory_() is v
    assert a.is_shared() and v.is_shared()          # the whole storage moved
    np.testing.assert_array_equal(a.numpy(), np.arange(12, dtype=np.float32))
    v.fill_(-1)
    np.testing.assert_array_equal(a.numpy()[2:6], -1)
    (a.exp() + a).sum().item()                       # kernels run on the shared pages
    assert a.share_memory_() is a and a.is_shared()


def test_share_memory_numpy_alias_matches_torch():
    torch = pytest.importorskip("torch")
    for lib in (torch, cltorch):
        x = np.zeros(3, np.float32)
        t = lib.from_numpy(x)
        t.share_memory_()
        t[0] = 1
        assert x[0] == 0                             # the storage moved; the numpy array keeps the old memory
        assert t.is_shared()


def test_device_tensor_cannot_be_shared():
    cl = cltorch.ones(3, device="cl:0")
    assert not cl.is_shared()
    with pytest.raises(RuntimeError, match="OpenCL device memory"):
        cl.share_memory_()
    with pytest.raises(RuntimeError, match="OpenCL device"):
        nn.Linear(2, 2).to("cl:0").share_memory()
    with pytest.raises(RuntimeError, match="cannot send a tensor on OpenCL device"):
        multiprocessing.reduction.ForkingPickler.dumps(cl)


def test_non_leaf_requiring_grad_is_refused():
    x = cltorch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="non-leaf"):
        multiprocessing.reduction.ForkingPickler.dumps(x * 2)
    multiprocessing.reduction.ForkingPickler.dumps((x * 2).detach())


def test_module_share_memory_shares_parameters_buffers_and_grads():
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    m(cltorch.randn(5, 3)).sum().backward()
    before = {k: v.detach().clone() for k, v in m.state_dict().items()}
    params = list(m.parameters())
    assert m.share_memory() is m
    assert [p for p in m.parameters()] == params      # same Parameter objects
    assert all(p.is_shared() and p.grad.is_shared() for p in params)
    assert len(list(m.buffers())) == 3 and all(b.is_shared() for b in m.buffers())
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k].numpy())


def test_child_writes_are_seen_by_parent():
    t = cltorch.zeros(N_KERNEL).share_memory_()
    q = mp.Queue()
    p = mp.Process(target=_child_write, args=(t, q))
    p.start()
    assert q.get(timeout=TIMEOUT) == "done"
    p.join(TIMEOUT)
    assert p.exitcode == 0
    expect = np.full(N_KERNEL, np.e, np.float32)
    expect[0] += 42
    np.testing.assert_allclose(t.numpy(), expect, rtol=1e-6)


def test_queue_passes_shared_tensor_both_ways():
    inq, outq, done = mp.Queue(), mp.Queue(), mp.Event()
    t = nn.Parameter(cltorch.arange(5, dtype=cltorch.float32))
    p = mp.Process(target=_child_from_queue, args=(inq, outq, done))
    p.start()
    try:
        inq.put(t)                                   # not shared yet: sending moves it into shared memory
        assert outq.get(timeout=TIMEOUT) == (True, "Parameter", True)
        view, w = outq.get(timeout=TIMEOUT)
        assert t.is_shared()
        with cltorch.no_grad():
            np.testing.assert_array_equal(t.detach().numpy(), np.arange(5) * 3)
        assert view._storage is t._storage           # back home: the same storage, not a second mapping
        np.testing.assert_array_equal(view.numpy(), [3, 6])
        np.testing.assert_array_equal(w.numpy(), [7, 7, 7, 7])
        assert w.is_shared()
    finally:
        done.set()
        p.join(TIMEOUT)
    assert p.exitcode == 0


def test_file_system_strategy():
    torch = pytest.importorskip("torch")
    assert mp.get_all_sharing_strategies() == torch.multiprocessing.get_all_sharing_strategies()
    assert mp.get_sharing_strategy() == "file_descriptor"
    with pytest.raises(ValueError, match="sharing strategy"):
        mp.set_sharing_strategy("nope")
    mp.set_sharing_strategy("file_system")
    try:
        t = cltorch.zeros(N_KERNEL).share_memory_()
        assert t._storage.shm.name is not None
        q = mp.Queue()
        p = mp.Process(target=_child_write, args=(t, q))
        p.start()
        assert q.get(timeout=TIMEOUT) == "done"
        p.join(TIMEOUT)
        assert t[0].item() == pytest.approx(42 + np.e)
    finally:
        mp.set_sharing_strategy("file_descriptor")


def test_spawn_child_traceback_reaches_parent():
    t = cltorch.zeros(3).share_memory_()
    with pytest.raises(mp.ProcessRaisedException) as ei:
        mp.spawn(_spawn_fn, args=(t, True), nprocs=2, start_method="forkserver")
    msg = str(ei.value)
    assert "-- Process 1 terminated with the following error:" in msg
    assert "Traceback (most recent call last)" in msg and "_spawn_fn" in msg
    assert "ValueError: child 1 failed on purpose" in msg
    assert ei.value.error_index == 1 and ei.value.pid > 0


def test_spawn_default_start_method_and_join_false():
    t = cltorch.zeros(2).share_memory_()
    ctx = mp.spawn(_spawn_fn, args=(t, False), nprocs=2, join=False)
    assert isinstance(ctx, mp.ProcessContext) and len(ctx.pids()) == 2
    while not ctx.join(TIMEOUT):
        pass
    np.testing.assert_array_equal(t.numpy(), [10, 11])


def test_pool_maps_into_shared_tensor():
    t = cltorch.zeros(4).share_memory_()
    with mp.Pool(2) as pool:
        assert sorted(pool.map(_pool_fill, [(t, i) for i in range(4)])) == [0, 1, 2, 3]
    np.testing.assert_array_equal(t.numpy(), [0, 1, 4, 9])


def test_forked_child_using_opencl_raises_instead_of_hanging():
    t = cltorch.randn(64, 64).share_memory_()
    (t @ t).sum().item()                            # the parent has used OpenCL
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child_fork_opencl, args=(t, q))
    p.start()
    msg = q.get(timeout=TIMEOUT)
    p.join(TIMEOUT)
    assert "forked child" in msg and "forkserver" in msg


def test_names_match_torch_multiprocessing():
    torch = pytest.importorskip("torch")
    missing = [n for n in torch.multiprocessing.__all__ if not hasattr(mp, n)]
    assert not missing
    for n in ("spawn", "start_processes", "ProcessContext", "ProcessRaisedException", "ProcessExitedException"):
        assert hasattr(mp, n)
    assert mp.get_start_method() in ("forkserver", "spawn")


def test_unguarded_script_fails_clearly(tmp_path):
    """Without the main guard the child re-runs the script's top level; multiprocessing stops it with its
    message about the guard, and nothing hangs."""
    script = tmp_path / "unguarded.py"
    script.write_text(textwrap.dedent("""
        import cltorch as torch
        import cltorch.multiprocessing as mp

        def work(t):
            t.add_(1)

        t = torch.zeros(3)
        t.share_memory_()
        p = mp.Process(target=work, args=(t,))
        p.start()
        p.join()
        print("exitcode", p.exitcode, t.tolist())
    """))
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert "exitcode 1" in r.stdout, (r.stdout, r.stderr)
    assert "__main__" in r.stderr and "bootstrapping phase" in r.stderr


def test_pickle_without_multiprocessing_still_copies():
    t = cltorch.arange(3, dtype=cltorch.float32).share_memory_()
    u = pickle.loads(pickle.dumps(t))
    u.add_(1)
    np.testing.assert_array_equal(t.numpy(), [0, 1, 2])
    assert not u.is_shared()
