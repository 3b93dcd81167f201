"""cpu tensors wait only where a storage is exposed (issue 16; DESIGN.md decision 2, session-5 amendment).

Every op family launches its kernels on host memory without waiting, and ends with one rule,
``Runtime.finish_if_exposed``: it waits when the op handed a kernel memory numpy or another process shares
(``from_numpy``, ``.numpy()``, ``np.asarray``, shared memory). Checked here, for each family, on the cpu device,
against PyTorch (the oracle) or numpy:

1. memory shared with numpy is never stale: an op reading it is done before it returns (numpy's later writes cannot
   reach it), an op writing it is visible to numpy at once;
2. every host read (item, tolist, numpy, repr, save, comparisons with Python scalars, DataLoader collation) waits
   for the queue;
3. temporaries and inputs a queued kernel uses stay alive until it finishes;
4. deferred device checks (index bounds, cross_entropy targets) do not make the op wait (session 7): as on
   ``cl:N``, their errors, naming the bad value, are raised at the next synchronization (the next host read);
5. shared memory (multiprocessing) and ``cltorch.save`` see finished data.
"""
import gc
import io

import numpy as np
import pytest

import cltorch
import cltorch.nn.functional as F
from conftest import assert_close

torch = pytest.importorskip("torch")
tF = torch.nn.functional

RT = cltorch.backend.cpu_runtime


def _rng(seed):
    return np.random.default_rng(seed)


def _randn(seed, *shape):
    return _rng(seed).standard_normal(shape).astype(np.float32)


def _lstm_weights():
    return [_randn(40 + i, *s) * 0.3 for i, s in enumerate([(120, 20), (120, 30), (120,), (120,)])]


def _lstm(lib, x, h, c, w):
    mk = (lambda a: cltorch.from_numpy(a)) if lib is cltorch else torch.from_numpy
    if lib is cltorch and not isinstance(x, cltorch.Tensor):
        x, h, c = mk(x), mk(h), mk(c)
    ws = [cltorch.tensor(a) if lib is cltorch else torch.tensor(a) for a in w]
    fn = cltorch.lstm_cell if lib is cltorch else torch.lstm_cell
    return fn(x, (h, c), *ws)[0]


# Each family: (name, input arrays, op(lib, *tensors) -> tensor). ``lib`` is cltorch or torch; inputs are float32
# unless the family needs indices. Sizes keep every op on its kernels (above the small-op numpy paths).
FAMILIES = [
    ("gemm", lambda: [_randn(1, 96, 80), _randn(2, 80, 72)], lambda lib, a, b: a @ b),
    ("reduction", lambda: [_randn(3, 300, 257)], lambda lib, a: a.sum(1)),
    ("softmax", lambda: [_randn(4, 200, 129)], lambda lib, a: a.softmax(1)),
    ("conv", lambda: [_randn(5, 2, 3, 20, 20), _randn(6, 4, 3, 3, 3)],
     lambda lib, x, w: (F if lib is cltorch else tF).conv2d(x, w, padding=1)),
    ("pool", lambda: [_randn(7, 2, 3, 40, 40)], lambda lib, x: (F if lib is cltorch else tF).max_pool2d(x, 2)),
    ("index", lambda: [_randn(8, 300, 64), _rng(9).integers(0, 300, 500)],
     lambda lib, a, i: a.index_select(0, i)),
    ("sort", lambda: [_randn(10, 64, 300)], lambda lib, a: a.sort(1)[0]),
    ("scan", lambda: [_randn(11, 64, 300)], lambda lib, a: a.cumsum(1)),
    ("fft", lambda: [_randn(12, 16, 97)], lambda lib, a: lib.fft.rfft(a).abs()),   # 97: Bluestein (temporaries)
    ("rnn", lambda: [_randn(13, 8, 20), _randn(14, 8, 30), _randn(15, 8, 30)],
     lambda lib, x, h, c: _lstm(lib, x, h, c, _lstm_weights())),
    ("cat", lambda: [_randn(16, 300, 200), _randn(17, 100, 200)], lambda lib, a, b: lib.cat([a, b]) * 2),
    ("layer_norm", lambda: [_randn(18, 300, 200)],
     lambda lib, a: (F if lib is cltorch else tF).layer_norm(a, (200,))),
]
IDS = [f[0] for f in FAMILIES]


def _queued_on(storages):
    """The storages among ``storages`` that a kernel queued since the last synchronize still uses (the runtime
    holds each until then): empty when every kernel touching them has finished."""
    held = {id(x) for x in RT()._keepalive}
    return [st for st in storages if id(st) in held]


def _torch_ref(op, arrays):
    ts = [torch.from_numpy(a.copy()) for a in arrays]
    return op(torch, *ts).numpy()


def _ours(op, tensors):
    return op(cltorch, *tensors)


@pytest.mark.parametrize("name,make,op", FAMILIES, ids=IDS)
def test_private_memory_queues_and_host_reads_wait(name, make, op):
    """On memory numpy does not share, a family's kernels stay queued after the op; a host read waits for them."""
    arrays = make()
    ts = [cltorch.tensor(a) for a in arrays]
    rt = RT()
    rt.synchronize()
    r = _ours(op, ts)
    if name not in ("index",):       # index_select on cpu is a numpy gather (no kernel): nothing to queue
        assert rt.pending, f"{name}: a cpu op on private memory waited at the op"
    assert_close(r.numpy(), _torch_ref(op, arrays), rtol=1e-4, atol=1e-4)
    assert not rt.pending


@pytest.mark.parametrize("name,make,op", FAMILIES, ids=IDS)
def test_reading_numpy_shared_memory_finishes_at_the_op(name, make, op):
    """Inputs from ``from_numpy``: the op is done when it returns, so numpy's writes after it cannot reach it."""
    arrays = make()
    expect = _torch_ref(op, arrays)
    ts = [cltorch.from_numpy(a) for a in arrays]
    r = _ours(op, ts)
    assert not _queued_on([t._storage for t in ts]), f"{name}: returned with kernels on numpy's memory queued"
    for a in arrays:
        a[...] = 7 if a.dtype.kind == "f" else 0     # numpy overwrites its memory after the call
    assert_close(r.numpy(), expect, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name,make,op", FAMILIES, ids=IDS)
def test_inputs_and_temporaries_outlive_queued_kernels(name, make, op):
    """Nothing but the queue holds the inputs (and each op's temporaries) once the op returns; freeing them and
    reusing the memory must not change the queued result."""
    arrays = make()
    expect = _torch_ref(op, arrays)
    RT().synchronize()
    r = _ours(op, [cltorch.tensor(a) for a in arrays])
    gc.collect()
    junk = [cltorch.full((a.size,), 1e6) for a in arrays for _ in range(3)]    # likely reuses freed memory
    assert_close(r.numpy(), expect, rtol=1e-4, atol=1e-4)
    del junk


def _write_cases():
    """Ops that write an existing (exposed) storage, one per family that has such a form: (name, fn(t) writing t
    in place from queued private inputs, the value numpy must see)."""
    a, b = _randn(20, 64, 48), _randn(21, 48, 32)
    x = _randn(22, 64, 32)
    idx = _rng(23).integers(0, 64, 100)
    src = _randn(24, 100, 32)

    def gemm(t):
        cltorch.mm(cltorch.tensor(a), cltorch.tensor(b), out=t)

    def scan(t):
        cltorch.cumsum(cltorch.tensor(x), 1, out=t)

    def sort(t):
        cltorch.sort(cltorch.tensor(x), 1, out=(t, cltorch.empty(64, 32, dtype=cltorch.int64)))

    def index_add(t):
        t.zero_().index_add_(0, cltorch.tensor(idx), cltorch.tensor(src))

    def copy(t):
        t.copy_(cltorch.tensor(x).tanh())

    def pointwise(t):
        t.mul_(0).add_(cltorch.tensor(x).exp())

    ia = np.zeros((64, 32), np.float32)
    np.add.at(ia, idx, src)
    return [("gemm", gemm, a @ b), ("scan", scan, np.cumsum(x, 1)), ("sort", sort, np.sort(x, 1)),
            ("index_add", index_add, ia), ("copy", copy, np.tanh(x)), ("pointwise", pointwise, np.exp(x))]


@pytest.mark.parametrize("case", _write_cases(), ids=lambda c: c[0])
@pytest.mark.parametrize("expose", ["from_numpy", "numpy", "asarray", "array_interface"])
def test_writing_numpy_shared_memory_is_visible_at_once(case, expose):
    name, fn, expect = case
    if expose == "from_numpy":
        arr = np.zeros((64, 32), np.float32)
        t = cltorch.from_numpy(arr)
    else:
        t = cltorch.zeros(64, 32)
        arr = {"numpy": lambda: t.numpy(), "asarray": lambda: np.asarray(t),
               "array_interface": lambda: np.array(t, copy=False)}[expose]()
    fn(t)
    assert not _queued_on([t._storage]), f"{name}: an op writing memory numpy shares returned with kernels queued"
    np.testing.assert_allclose(arr, expect, rtol=1e-4, atol=1e-4)   # numpy's own view, no host read of ours


def test_optimizer_step_on_numpy_shared_parameters_and_gradients():
    """The fused optimizer step writes parameters (and reads gradients) numpy shares: done at the step."""
    pa, ga = _randn(30, 5000), _randn(31, 5000)
    p = cltorch.nn.Parameter(cltorch.from_numpy(pa))
    p.grad = cltorch.from_numpy(ga)
    pt = torch.nn.Parameter(torch.tensor(pa))
    pt.grad = torch.tensor(ga)
    cltorch.optim.SGD([p], lr=0.1, momentum=0.9).step()
    torch.optim.SGD([pt], lr=0.1, momentum=0.9).step()
    assert not _queued_on([p._storage, p.grad._storage])
    ga[:] = 1e3                                # later writes to the gradient cannot reach the step
    np.testing.assert_allclose(pa, pt.detach().numpy(), rtol=1e-6, atol=1e-6)
    # private parameters: the step stays queued, and the next read waits for it
    q = cltorch.nn.Parameter(cltorch.tensor(_randn(32, 5000)))
    q.grad = cltorch.tensor(ga)
    qt = torch.nn.Parameter(torch.tensor(_randn(32, 5000)))
    qt.grad = torch.tensor(ga)
    opt = cltorch.optim.Adam([q], lr=0.01)
    RT().synchronize()
    opt.step()
    assert RT().pending
    torch.optim.Adam([qt], lr=0.01).step()
    assert_close(q.detach().numpy(), qt.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_random_fill_of_numpy_shared_memory_is_visible_at_once():
    arr = np.zeros(20000, np.float32)
    t = cltorch.from_numpy(arr)
    cltorch.manual_seed(3)
    t.normal_()
    assert not _queued_on([t._storage])
    cltorch.manual_seed(3)
    ref = cltorch.empty(20000).normal_()       # the same stream on private memory: queued, then read
    np.testing.assert_array_equal(arr, ref.numpy())
    assert abs(float(arr.mean())) < 0.05 and abs(float(arr.std()) - 1) < 0.05


def test_every_host_read_waits_for_the_queue():
    x = _randn(40, 300, 257)
    s_ref = x.astype(np.float64).sum(1)
    t = cltorch.tensor(x)
    rt = RT()

    def queued():
        rt.synchronize()
        r = t.sum(1)
        assert rt.pending
        return r
    np.testing.assert_allclose(queued().tolist(), s_ref, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(queued().numpy(), s_ref, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(np.asarray(queued()), s_ref, rtol=1e-4, atol=1e-3)
    assert abs(queued()[5].item() - s_ref[5]) < 1e-3
    r = queued()
    assert f"{s_ref[0]:.2f}"[:5] in repr(r)
    big = queued()
    assert bool((big > -1e9).all()) and not bool((big == float(s_ref[0]) + 1e6).any())
    buf = io.BytesIO()
    cltorch.save(queued(), buf)
    buf.seek(0)
    np.testing.assert_allclose(cltorch.load(buf).numpy(), s_ref, rtol=1e-4, atol=1e-3)
    from cltorch.utils.data import DataLoader, TensorDataset
    rt.synchronize()
    rows = cltorch.tensor(x).softmax(1)
    assert rt.pending
    batches = [b for (b,) in DataLoader(TensorDataset(rows), batch_size=100)]
    e = np.exp(x - x.max(1, keepdims=True))
    assert_close(cltorch.cat(batches).numpy(), e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_deferred_errors_raise_at_the_next_host_read():
    """A target or index out of range is a flag the kernel sets (``Runtime.defer_check``): the cpu op returns without
    waiting for it, and the error, naming the bad value, is raised at the next synchronization (a host read of the
    result, ``cltorch.cl.synchronize()``); the runtime is usable afterwards."""
    rt = RT()
    x_np = _randn(51, 8, 5)
    x = cltorch.tensor(x_np)
    rt.synchronize()
    loss = F.cross_entropy(x, cltorch.tensor([0, 1, 2, 3, 4, 5, 0, 1]))
    assert rt.pending, "cross_entropy waited for its target check at the op"
    with pytest.raises(IndexError, match="Target 5 is out of bounds"):
        loss.item()
    good = [0, 1, 2, 3, 4, 4, 0, 1]
    expect = tF.cross_entropy(torch.from_numpy(x_np), torch.tensor(good)).item()
    assert abs(F.cross_entropy(x, cltorch.tensor(good)).item() - expect) < 1e-6     # the flag was cleared
    a_np = _randn(50, 10, 4)
    a = cltorch.tensor(a_np)
    rt.synchronize()
    r = a.clone().index_add_(0, cltorch.tensor([1, 10]), cltorch.ones(2, 4))      # the put kernel
    assert rt.pending, "index_add_ waited for its bounds check at the op"
    with pytest.raises(IndexError, match="index 10 is out of bounds"):
        r.numpy()
    a.clone().scatter_(0, cltorch.tensor([[0, 0, 0, 12]]), cltorch.ones(1, 4))
    assert rt.pending
    with pytest.raises(IndexError, match="index 12 is out of bounds"):
        cltorch.cl.synchronize()
    with pytest.raises(IndexError, match="index 10 is out of bounds"):      # cpu gathers run in numpy: at the op
        a.index_select(0, cltorch.tensor([1, 10]))
    loss = F.cross_entropy(cltorch.tensor(x_np, requires_grad=True), cltorch.tensor([0, 1, 2, 3, 4, -3, 0, 1]))
    with pytest.raises(IndexError, match="Target -3 is out of bounds"):
        loss.backward()                       # the backward kernel skips the bad row; the next read raises
        loss.item()
    assert_close(a.index_select(0, cltorch.tensor([9, 0])).numpy(), a_np[[9, 0]])


def test_a_cpu_training_step_on_numpy_shared_parameters_is_never_stale():
    """cross_entropy no longer waits: the step's writes into parameters numpy shares are still done when the
    optimizer step returns (numpy's own view, no host read of ours), and equal PyTorch's."""
    w_np, b_np = _randn(70, 20, 5) * 0.3, _randn(71, 5) * 0.1
    x_np = _randn(72, 32, 20)
    tgt = _rng(73).integers(0, 5, 32)
    w, b = cltorch.nn.Parameter(cltorch.from_numpy(w_np)), cltorch.nn.Parameter(cltorch.from_numpy(b_np))
    wt, bt = torch.nn.Parameter(torch.tensor(w_np)), torch.nn.Parameter(torch.tensor(b_np))
    opt = cltorch.optim.SGD([w, b], lr=0.5, momentum=0.9)
    opt_t = torch.optim.SGD([wt, bt], lr=0.5, momentum=0.9)
    for _ in range(3):
        opt.zero_grad()
        F.cross_entropy((cltorch.tensor(x_np) @ w + b).relu(), cltorch.tensor(tgt)).backward()
        opt.step()
        opt_t.zero_grad()
        tF.cross_entropy((torch.tensor(x_np) @ wt + bt).relu(), torch.tensor(tgt)).backward()
        opt_t.step()
        assert not _queued_on([w._storage, b._storage])
        np.testing.assert_allclose(w_np, wt.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(b_np, bt.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_numpy_aliases_and_views_never_see_stale_data():
    """In-place kernels on views of memory numpy shares are visible through numpy at once; a private tensor that a
    queued kernel mutates is read whole by np.asarray and .numpy(); memory exposed later is written at the op."""
    rt = RT()
    n = 100_000                                   # kernels, not the small numpy forms
    src_np = _randn(74, n)
    arr = np.zeros(n + 20, np.float32)
    t = cltorch.from_numpy(arr)
    v = t[10:n + 10]
    v.add_(cltorch.tensor(src_np))
    np.testing.assert_array_equal(arr[10:n + 10], src_np)
    assert not arr[:10].any() and not arr[n + 10:].any()
    t.add_(1)
    np.testing.assert_array_equal(arr[10:n + 10], src_np + np.float32(1))
    p = cltorch.zeros(n)
    rt.synchronize()
    p.add_(cltorch.tensor(src_np)).mul_(2)
    assert rt.pending
    np.testing.assert_array_equal(np.asarray(p), src_np * np.float32(2))
    view = p.numpy()
    p.sub_(cltorch.tensor(src_np))                # p is exposed now: done at the op
    np.testing.assert_array_equal(view, src_np)


def test_shared_memory_counts_as_exposed():
    """A storage in shared memory (other processes map it) is written at the op, as numpy-shared memory is."""
    t = cltorch.zeros(64, 32).share_memory_()
    x = _randn(60, 64, 48)
    w = _randn(61, 48, 32)
    cltorch.mm(cltorch.tensor(x), cltorch.tensor(w), out=t)
    assert not _queued_on([t._storage])
    view = np.frombuffer(t._storage.shm.mm, np.float32, count=64 * 32).reshape(64, 32)   # the raw mapping
    np.testing.assert_allclose(view, x @ w, rtol=1e-4, atol=1e-4)
    t.add_(cltorch.tensor(x).sum(1, keepdim=True))      # reduction then pointwise, into shared memory
    assert not _queued_on([t._storage])
    np.testing.assert_allclose(view, x @ w + x.sum(1, keepdims=True), rtol=1e-4, atol=1e-3)


def test_shared_memory_reaches_a_worker_process_finished():
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    x = _randn(62, 2000)
    t = cltorch.zeros(2000).share_memory_()
    RT().synchronize()
    t.copy_(cltorch.tensor(x).tanh())
    q = ctx.SimpleQueue()
    p = ctx.Process(target=_child_sum, args=(t, q))
    p.start()
    got = q.get()
    p.join(60)
    assert p.exitcode == 0
    assert abs(got - float(np.tanh(x).astype(np.float64).sum())) < 1e-2


def _child_sum(t, q):
    q.put(float(np.asarray(t.numpy(), np.float64).sum()))


def test_threads_each_wait_for_their_own_exposed_ops():
    """The exposure note is per thread: one thread's wait does not swallow another's."""
    import threading
    errors = []

    def work(seed):
        try:
            for i in range(20):
                arr = np.zeros((64, 32), np.float32)
                t = cltorch.from_numpy(arr)
                a, b = _randn(seed + i, 64, 48), _randn(seed + i + 1, 48, 32)
                cltorch.mm(cltorch.tensor(a), cltorch.tensor(b), out=t)
                np.testing.assert_allclose(arr, a @ b, rtol=1e-4, atol=1e-4)
        except Exception as e:      # noqa: BLE001 - reported below
            errors.append(e)
    ths = [threading.Thread(target=work, args=(100 * k,)) for k in range(3)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    assert not errors, errors[0]
