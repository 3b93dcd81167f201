"""The cpu block pool (``cltorch._storage``) and the queued path of small exact cpu ops (``ops/elementwise.py``).

cpu storages made by ``Storage.empty`` live in pooled, aligned host blocks that keep their zero-copy OpenCL buffer. A
block goes back to the pool only when nothing else reaches its memory (numpy views, memoryviews, ``.numpy()``), and
one that queued kernels may still use goes only to a kernel's output (the in-order queue runs those kernels first),
never to memory the host may write at once. Small exact pointwise ops run in numpy while the queue is idle (nothing
pending, or its latest kernel complete: the wait is free), and queue their kernel (no wait) behind kernels still
running; both give the same bits. Tests that need a kernel still running pin ``Runtime.idle`` to "not while pending"
(``busy_queue``), so they do not depend on how fast the device is.
"""
import gc

import numpy as np
import pytest

import cltorch
from cltorch import _storage as S
from cltorch.backend.runtime import Runtime

torch = pytest.importorskip("torch")

CPU = cltorch.device("cpu")
RT = cltorch.backend.cpu_runtime


@pytest.fixture(autouse=True)
def empty_pool():
    """Each test starts with an empty pool: blocks earlier tests freed would be handed out first (oldest first), and
    a pool already holding POOL_HELD_MAX bytes frees a block instead of keeping it."""
    S.release_host_blocks()


def _randn(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _fresh(n=1000):
    st = S.Storage.empty(n, cltorch.float32, CPU)
    assert st._block is not None and S.host_address(st.host) % S.HOST_ALIGN == 0
    return st


def test_a_freed_cpu_storage_gives_its_block_to_the_next_one():
    RT().synchronize()
    st = _fresh()
    blk = st._block
    st.cl_buffer()                      # the block's buffer is made once and stays with it
    buf = blk[1]
    RT().synchronize()
    del st
    st2 = _fresh()
    assert st2._block is blk and st2.cl_buffer() is buf
    st2.host[:] = 3.0
    np.testing.assert_array_equal(st2.read(0, 1000), np.full(1000, 3.0, np.float32))


@pytest.mark.parametrize("hold", ["slice", "memoryview", "ndarray_buffer", "numpy", "asarray"])
def test_memory_numpy_still_reaches_is_never_reused(hold):
    RT().synchronize()
    t = cltorch.Tensor._make(_fresh(), (1000,))
    t._storage.host[:] = np.arange(1000, dtype=np.float32)
    held = {"slice": lambda: t._storage.host[10:20],
            "memoryview": lambda: memoryview(t._storage.host)[10:20].cast("B").cast("f"),
            "ndarray_buffer": lambda: np.ndarray((10,), np.float32, buffer=t._storage.host, offset=40),
            "numpy": lambda: t.numpy()[10:20],
            "asarray": lambda: np.asarray(t)[10:20]}[hold]()
    blk = t._storage._block
    del t
    gc.collect()
    others = [_fresh() for _ in range(8)]
    assert all(o._block is not blk for o in others)
    for o in others:
        o.host[:] = -1.0
    np.testing.assert_array_equal(np.asarray(held), np.arange(10, 20, dtype=np.float32))


def test_a_block_queued_kernels_use_goes_only_to_a_kernel_output(busy_queue):
    """t's memory is freed while a kernel reading it is queued: a storage the host may write at once gets another
    block, a kernel's output may get it, and the queued kernel still reads t's values."""
    x_np = _randn(0, 1000)
    x = cltorch.tensor(x_np)
    RT().synchronize()
    t = x.tanh()                        # a kernel output in a pooled block
    blk = t._storage._block
    u = t.exp()                         # queued, reads t's block
    assert RT().pending
    del t
    host_side = S.Storage.empty(1000, cltorch.float32, CPU)
    assert host_side._block is not blk
    host_side.host[:] = 1e6             # a direct host write (as an op's flag buffer does) cannot reach the kernels
    kernel_side = S.Storage.empty(1000, cltorch.float32, CPU, for_kernel=True)
    assert kernel_side._block is blk
    del kernel_side
    v = x * 3.0 - 2.0                   # queued behind u, its output may take t's block
    expect_u = torch.from_numpy(x_np).tanh().exp().numpy()
    np.testing.assert_allclose(u.numpy(), expect_u, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(v.numpy(), x_np * np.float32(3.0) - np.float32(2.0))


@pytest.fixture
def busy_queue(monkeypatch):
    """Queued kernels count as still running until a synchronize (on a fast device they may have finished)."""
    monkeypatch.setattr(Runtime, "idle", lambda self: not self.pending)
    monkeypatch.setattr(Runtime, "tail_done", lambda self, ev: False)


class _Gate:
    """Holds the cpu runtime's in-order queue shut: a marker waiting on a user event is queued, so every command queued
    after it stays queued until ``open()`` (deterministic, whatever the device's speed). Open it before any host read."""

    def __init__(self, rt):
        import pyopencl as cl
        self.cl = cl
        self.ev = cl.UserEvent(rt.ctx)
        cl.enqueue_marker(rt.queue, wait_for=[self.ev])
        rt.pending = True               # a command other than a launch: the queue's tail is unknown
        self.shut = True

    def open(self):
        if self.shut:
            self.shut = False
            self.ev.set_status(self.cl.command_execution_status.COMPLETE)


@pytest.fixture
def gate():
    RT().synchronize()
    g = _Gate(RT())
    yield g
    g.open()


def test_a_block_freed_behind_running_kernels_is_reused_once_the_queue_tail_completed(gate):
    """A block freed with kernels queued goes to host-first memory only after the queue's last command at the time
    of the free completed (``Runtime.tail``), without a synchronize: so a cpu step that never syncs reuses its
    blocks, and the host never writes memory a queued kernel still writes."""
    rt = RT()
    n = 100_000                          # above the numpy forms' size: a kernel
    x_np = _randn(91, n)
    x = cltorch.tensor(x_np)
    assert rt.tail is None               # the gate's marker is not a launch
    t = x * 2.0                          # a kernel output, held behind the gate
    blk = t._storage._block
    tail = rt.tail
    assert tail is not None and not rt.tail_done(tail)
    del t
    early = S.Storage.empty(n, cltorch.float32, CPU)
    assert early._block is not blk       # the kernel writing t's block has not run
    early.host[:] = 5.0
    gate.open()
    tail.wait()                          # no synchronize: the tail's completion alone frees the block for the host
    syncs = rt.syncs
    late = S.Storage.empty(n, cltorch.float32, CPU)
    assert late._block is blk and rt.syncs == syncs and rt.pending
    late.host[:] = -1.0                  # the kernel that wrote blk is done: this write is the last one
    rt.synchronize()
    np.testing.assert_array_equal(late.host, np.full(n, -1.0, np.float32))
    np.testing.assert_array_equal(early.host, np.full(n, 5.0, np.float32))


def test_after_a_queued_copy_the_tail_is_unknown_and_freed_blocks_wait_for_a_synchronize(gate):
    """A queued command other than a launch (a buffer copy, which the code queueing it marks by setting
    ``Runtime.pending``) makes the latest launch's event no longer the queue's tail: blocks freed then are not handed
    to host-first memory before a synchronize, even once the last launch completed."""
    rt = RT()
    n = 100_000
    x_np = _randn(92, n)
    src = cltorch.tensor(x_np) * 3.0     # kernel output, held behind the gate
    dst = S.Storage.empty(n, cltorch.float32, CPU, for_kernel=True)
    gate.cl.enqueue_copy(rt.queue, dst.cl_buffer(), src._storage.cl_buffer(), byte_count=n * 4)
    rt.pending = True                    # as every op that queues a copy or fill does
    assert rt.tail is None
    blk = src._storage._block
    launched = rt.last_event
    del src
    gate.open()
    launched.wait()                      # the last launch is done, the copy behind it maybe not
    host_side = S.Storage.empty(n, cltorch.float32, CPU)
    assert host_side._block is not blk
    host_side.host[:] = 7.0
    np.testing.assert_array_equal(dst.read(0, n), x_np * np.float32(3.0))    # read waits for the queue
    late = S.Storage.empty(n, cltorch.float32, CPU)
    assert late._block is blk            # after that synchronize, it is reusable


def test_idle_means_the_latest_kernel_completed():
    rt = RT()
    rt.synchronize()
    assert rt.idle()
    y = cltorch.tensor(_randn(7, 200, 200)).tanh()
    assert rt.pending
    rt.last_event.wait()
    assert rt.idle() and rt.pending        # done, not yet synchronized: numpy forms may run (their wait is free)
    r = y * 2.0                            # the numpy form, after a free wait
    assert not rt.pending
    np.testing.assert_allclose(r.numpy(), np.tanh(_randn(7, 200, 200)) * 2, rtol=1e-6, atol=1e-6)


def _count_finishes(fn):
    n = [0]
    orig = Runtime.synchronize

    def counted(rt):
        n[0] += bool(rt.pending)
        return orig(rt)
    Runtime.synchronize = counted
    try:
        out = fn()
    finally:
        Runtime.synchronize = orig
    return out, n[0]


def test_small_exact_ops_queue_behind_kernels_without_waiting(busy_queue):
    """The 30-op chain's ops on cpu with each tanh still running: each small exact op (y * w, + b) queues its kernel
    behind it, so the chain makes no queue finish until its result is read; the values are PyTorch's."""
    xs = [_randn(i, 1000) for i in range(21)]
    ys = [cltorch.tensor(a) for a in xs]
    RT().synchronize()

    def chain():
        y = ys[0]
        for w, b in zip(ys[1:11], ys[11:]):
            y = (y * w + b).tanh()
        return y
    y, finishes = _count_finishes(chain)
    assert finishes == 0 and RT().pending
    ty = torch.from_numpy(xs[0])
    for w, b in zip(xs[1:11], xs[11:]):
        ty = (ty * torch.from_numpy(w) + torch.from_numpy(b)).tanh()
    np.testing.assert_allclose(y.numpy(), ty.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("expr", ["mul_add", "div_sub", "compare"])
def test_numpy_form_and_queued_kernel_give_the_same_bits(expr, busy_queue):
    a_np, b_np, c_np = _randn(1, 777), _randn(2, 777), _randn(3, 777)
    a, b, c = cltorch.tensor(a_np), cltorch.tensor(b_np), cltorch.tensor(c_np)
    fn = {"mul_add": lambda: a * b + c, "div_sub": lambda: a / b - c * 0.5, "compare": lambda: a > b}[expr]
    RT().synchronize()
    host = fn()                         # nothing queued: numpy
    assert not RT().pending
    c.tanh()                            # a kernel queued
    queued = fn()                       # the kernel, behind it
    assert RT().pending
    np.testing.assert_array_equal(host.numpy(), queued.numpy())


def test_queued_small_ops_on_numpy_shared_memory_finish_at_the_op(busy_queue):
    """With a kernel queued, a small exact op on ``from_numpy`` memory takes the kernel path: it is done when it
    returns (numpy's later writes do not reach it), and an in-place one is visible to numpy at once."""
    a = _randn(4, 500)
    keep = a.copy()
    ta = cltorch.from_numpy(a)
    cltorch.tensor(_randn(5, 500)).tanh()
    assert RT().pending
    r = ta * 2.0 + 1.0
    a[...] = 7.0
    np.testing.assert_array_equal(r.numpy(), keep * np.float32(2.0) + np.float32(1.0))
    cltorch.tensor(_randn(6, 500)).tanh()
    ta.mul_(3.0)
    np.testing.assert_array_equal(a, np.full(500, 21.0, np.float32))


def test_release_host_blocks_empties_the_pool():
    RT().synchronize()
    st = _fresh(4096)
    del st
    assert S.release_host_blocks() >= 4096 * 4
    assert not S._free_blocks and S._held[0] == 0
