"""Rank programs for tests/test_distributed.py, started by ``mpiexec -n N python tests/_dist_worker.py MODE``.

Each mode checks its results against numpy (or a single-process run) on every rank and prints ``OK <rank>`` at
the end; any failed assertion raises, which fails the job."""
import hashlib
import os
import sys
import time
from datetime import timedelta

import numpy as np

import cltorch as torch
import cltorch.distributed as dist
import cltorch.nn as nn
import cltorch.nn.functional as F


def data(r, n, dtype=np.float32, shape=None):
    a = (np.arange(n) * (r + 1) + r).astype(dtype)
    return a if shape is None else a.reshape(shape)


def t_(a, dev):
    return torch.from_numpy(np.array(a, copy=True)).to(dev)      # a copy: collectives write in place


def check(got, ref, what):
    got = got.cpu().numpy() if hasattr(got, "cpu") else np.asarray(got)
    assert got.shape == np.asarray(ref).shape, (what, got.shape, np.asarray(ref).shape)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=0, err_msg=what)


def collectives(dev):
    r, n = dist.get_rank(), dist.get_world_size()
    per = [data(q, 12) for q in range(n)]
    ops = {dist.ReduceOp.SUM: np.sum, dist.ReduceOp.AVG: np.mean, dist.ReduceOp.MAX: np.max,
           dist.ReduceOp.MIN: np.min, dist.ReduceOp.PRODUCT: np.prod}
    for op, f in ops.items():
        x = t_(per[r], dev)
        dist.all_reduce(x, op=op)
        check(x, f(np.stack(per), 0).astype(np.float32), f"all_reduce {op} {dev}")
    xi = t_(data(r, 7, np.int64), dev)
    dist.all_reduce(xi)
    check(xi, sum(data(q, 7, np.int64) for q in range(n)), "all_reduce int64")
    # a strided (non-contiguous) tensor and a 2-D one
    base = t_(data(r, 24, shape=(4, 6)), dev)
    view = base[:, ::2]
    dist.all_reduce(view)
    ref = sum(data(q, 24, shape=(4, 6)) for q in range(n))
    full = data(r, 24, shape=(4, 6)).copy()
    full[:, ::2] = ref[:, ::2]
    check(base, full, "all_reduce strided")
    # deterministic sum: random data, bit-identical on every rank
    rnd = np.random.default_rng(r).standard_normal(10001).astype(np.float32) * 10 ** r
    x = t_(rnd, dev)
    dist.all_reduce(x)
    got = [None] * n
    dist.all_gather_object(got, x.cpu().numpy().tobytes())
    assert len(set(got)) == 1, "all_reduce results differ between ranks"
    allr = [None] * n
    dist.all_gather_object(allr, rnd)
    np.testing.assert_allclose(x.cpu().numpy(), np.sum(np.stack(allr).astype(np.float64), 0), rtol=1e-5, atol=1e-3)
    # broadcast from the last rank
    y = t_(data(r, 5), dev)
    dist.broadcast(y, src=n - 1)
    check(y, data(n - 1, 5), "broadcast")
    # reduce to rank 1
    z = t_(data(r, 6), dev)
    dist.reduce(z, dst=1, op=dist.ReduceOp.MAX)
    check(z, np.max(np.stack([data(q, 6) for q in range(n)]), 0) if r == 1 else data(r, 6), "reduce")
    # all_gather / all_gather_into_tensor
    outs = [torch.zeros(3, 2, device=dev) for _ in range(n)]
    dist.all_gather(outs, t_(data(r, 6, shape=(3, 2)), dev))
    for q in range(n):
        check(outs[q], data(q, 6, shape=(3, 2)), "all_gather")
    big = torch.zeros(n * 4, device=dev)
    dist.all_gather_into_tensor(big, t_(data(r, 4), dev))
    check(big, np.concatenate([data(q, 4) for q in range(n)]), "all_gather_into_tensor")
    # reduce_scatter_tensor
    inp = t_(data(r, 3 * n), dev)
    out = torch.zeros(3, device=dev)
    dist.reduce_scatter_tensor(out, inp)
    check(out, sum(data(q, 3 * n) for q in range(n))[3 * r:3 * r + 3], "reduce_scatter_tensor")
    # gather / scatter
    gl = [torch.zeros(4, device=dev) for _ in range(n)] if r == 0 else None
    dist.gather(t_(data(r, 4), dev), gl, dst=0)
    if r == 0:
        for q in range(n):
            check(gl[q], data(q, 4), "gather")
    sc = torch.zeros(5, device=dev)
    dist.scatter(sc, [t_(data(q, 5) * 10, dev) for q in range(n)] if r == 1 else None, src=1)
    check(sc, data(r, 5) * 10, "scatter")
    # all_to_all_single, even and uneven splits
    a2a_in = t_(np.arange(2 * n, dtype=np.float32) + 100 * r, dev)
    a2a_out = torch.zeros(2 * n, device=dev)
    dist.all_to_all_single(a2a_out, a2a_in)
    check(a2a_out, np.concatenate([np.arange(2 * r, 2 * r + 2, dtype=np.float32) + 100 * q for q in range(n)]),
          "all_to_all_single")
    in_splits = [q + 1 for q in range(n)]              # rank r sends q+1 rows to rank q
    out_splits = [r + 1] * n                           # and receives r+1 rows from each
    src = t_(np.repeat(np.arange(n, dtype=np.float32)[:, None] + 10 * r, 1, 1).repeat(in_splits, 0)
             .reshape(-1, 1).repeat(2, 1), dev)
    dst = torch.zeros(sum(out_splits), 2, device=dev)
    dist.all_to_all_single(dst, src, out_splits, in_splits)
    check(dst, np.concatenate([np.full((r + 1, 2), r + 10 * q, np.float32) for q in range(n)]), "uneven all_to_all")
    # send/recv, isend/irecv around a ring; recv from any source returns the sender
    nxt, prv = (r + 1) % n, (r - 1) % n
    buf = torch.zeros(3, device=dev)
    ws = [dist.isend(t_(data(r, 3), dev), nxt, tag=3), dist.irecv(buf, prv, tag=3)]
    for w in ws:
        w.wait()
    check(buf, data(prv, 3), "isend/irecv ring")
    if r == 0:
        for _ in range(n - 1):
            b = torch.zeros(2, device=dev)
            s = dist.recv(b)
            check(b, data(s, 2), "recv any source")
    else:
        dist.send(t_(data(r, 2), dev), 0)
    # async ops overlap; Work API
    w1 = dist.all_reduce(t1 := t_(data(r, 8), dev), async_op=True)
    w2 = dist.broadcast(t2 := t_(data(r, 8), dev), src=0, async_op=True)
    w2.wait()
    w1.wait()
    assert w1.is_completed() and w1.is_success() and w1.exception() is None
    check(t1, sum(data(q, 8) for q in range(n)), "async all_reduce")
    check(t2, data(0, 8), "async broadcast")
    # objects
    objs = [{"rank": r}, [r] * 3] if r == 0 else [None, None]
    dist.broadcast_object_list(objs, src=0)
    assert objs == [{"rank": 0}, [0, 0, 0]], objs
    got = [None] * n
    dist.all_gather_object(got, ("x", r))
    assert got == [("x", q) for q in range(n)], got
    dist.barrier()
    # groups
    g = dist.new_group([0, n - 1])
    if r in (0, n - 1):
        x = t_(data(r, 4), dev)
        dist.all_reduce(x, group=g)
        check(x, data(0, 4) + data(n - 1, 4), "group all_reduce")
        assert dist.get_world_size(g) == 2
    else:
        assert g == dist.GroupMember.NON_GROUP_MEMBER and dist.get_rank(g) == -1
    # mismatches: shapes, dtypes, different collectives, p2p
    for bad, what in ((lambda: dist.all_reduce(torch.ones(3 + r, device=dev)), "the shapes differ"),
                      (lambda: dist.all_reduce(torch.ones(3, device=dev, dtype=torch.float32 if r else torch.int32)),
                       "the dtypes differ"),
                      (lambda: dist.broadcast(torch.ones(2, device=dev), src=r), "the root rank"),
                      (lambda: (dist.barrier() if r == 0 else dist.all_reduce(torch.ones(2, device=dev))),
                       "different collectives")):
        try:
            bad()
        except dist.DistBackendError as e:
            assert what in str(e), str(e)
            assert "rank 0 " in str(e) and "rank 1 " in str(e), str(e)
        else:
            raise AssertionError(f"no error for a mismatch ({what})")
    if r == 0:
        dist.send(torch.ones(4, device=dev), 1, tag=9)
    elif r == 1:
        try:
            dist.recv(torch.ones(5, device=dev), 0, tag=9)
        except dist.DistBackendError as e:
            assert "rank 0 sent float32 [4]" in str(e), str(e)
        else:
            raise AssertionError("no error for a p2p mismatch")
    dist.barrier()


def small_model():
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 64, 10))


def digits():
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
    from train_digits import load_digits_arrays
    images, y = load_digits_arrays()
    return (images / 16.0).astype(np.float32)[:, None], y


def digest(model):
    return hashlib.sha256(b"".join(p.detach().cpu().numpy().tobytes() for p in model.parameters())).hexdigest()


def ddp(dev, steps=50, batch=16, bucket_cap_mb=None):
    from cltorch.nn.parallel import DistributedDataParallel as DDP
    r, n = dist.get_rank(), dist.get_world_size()
    x, y = digits()
    torch.manual_seed(1234 + r)                      # different init per rank: DDP must broadcast rank 0's
    kw = {} if bucket_cap_mb is None else {"bucket_cap_mb": bucket_cap_mb}
    model = DDP(small_model().to(dev), **kw)
    assert list(model.state_dict())[0].startswith("module.")
    if bucket_cap_mb is not None:
        assert len(model._get_bucket_sizes()) >= 3, model._get_bucket_sizes()
    torch.manual_seed(1234)
    ref = small_model().to(dev)                      # rank 0's init, rebuilt locally for the single-process run
    if r == 0:
        assert digest(ref) == digest(model.module)
    ref.load_state_dict(model.module.state_dict())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1)
    rng = np.random.default_rng(0)
    for step in range(steps):
        idx = rng.choice(len(y), n * batch, replace=False)     # the same global batch on every rank
        mine = idx[r * batch:(r + 1) * batch]
        opt.zero_grad()
        F.cross_entropy(model(t_(x[mine], dev)), t_(y[mine], dev)).backward()
        opt.step()
        ropt.zero_grad()
        F.cross_entropy(ref(t_(x[idx], dev)), t_(y[idx], dev)).backward()
        ropt.step()
    got = [None] * n
    dist.all_gather_object(got, digest(model.module))
    assert len(set(got)) == 1, f"parameters differ between ranks: {got}"
    worst = max(float(np.abs(p.detach().cpu().numpy() - q.detach().cpu().numpy()).max())
                for p, q in zip(model.module.parameters(), ref.parameters()))
    scale = max(float(np.abs(q.detach().cpu().numpy()).max()) for q in ref.parameters())
    assert worst <= 2e-5 * scale, f"DDP differs from the single-process global-batch run by {worst} (scale {scale})"
    print(f"ddp rank {r}: identical on all ranks, max |ddp - single| = {worst:.2e}", flush=True)


def ddp_features(dev):
    """no_sync accumulation, find_unused_parameters, the unused-parameter error, set_epoch."""
    from cltorch.nn.parallel import DistributedDataParallel as DDP
    from cltorch.utils.data import DistributedSampler
    r, n = dist.get_rank(), dist.get_world_size()

    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 2)
            self.b = nn.Linear(3, 2)

        def forward(self, x, use_b=True):
            return self.a(x) + (self.b(x) if use_b else 0)
    torch.manual_seed(0)
    m = DDP(Two().to(dev))
    xs = [t_(np.full((2, 3), q + 1.0, np.float32), dev) for q in range(n)]
    # no_sync: two local backwards, then one synced: grads = mean over ranks of the accumulated sums
    with m.no_sync():
        m(xs[r]).sum().backward()
    local = m.module.a.weight.grad.cpu().numpy().copy()
    assert not np.allclose(local, 0)
    m(xs[r]).sum().backward()
    accum = [None] * n
    dist.all_gather_object(accum, local * 2)
    check(m.module.a.weight.grad, np.mean(accum, 0), "no_sync accumulation")
    # without find_unused_parameters an unused parameter makes the next forward raise, naming it
    m(xs[r], use_b=False).sum().backward()
    try:
        m(xs[r])
    except RuntimeError as e:
        assert "b.weight" in str(e) and "find_unused_parameters" in str(e), str(e)
    else:
        raise AssertionError("no error for an unused parameter")
    torch.manual_seed(0)
    m2 = DDP(Two().to(dev), find_unused_parameters=True)
    m2.zero_grad()
    m2(xs[r], use_b=(r == 0)).sum().backward()       # b used on rank 0 only: its grad is averaged with zeros
    check(m2.module.b.weight.grad, np.full((2, 3), 2.0, np.float32) / n, "find_unused_parameters (used on rank 0)")
    m2.zero_grad(set_to_none=True)
    m2(xs[r], use_b=False).sum().backward()          # b unused everywhere: its grad stays None
    assert m2.module.b.weight.grad is None and m2.module.a.weight.grad is not None
    s = DistributedSampler(list(range(10)), shuffle=True, seed=0)
    e0 = list(s)
    s.set_epoch(1)
    assert list(s) != e0 and len(e0) == -(-10 // n)
    both = [None] * n
    dist.all_gather_object(both, e0)
    assert set(sum(both, [])) == set(range(10)), both          # the shares cover the dataset


def main():
    mode = sys.argv[1]
    timeout = float(os.environ.get("DIST_TEST_TIMEOUT", "60"))
    dist.init_process_group("mpi", timeout=timedelta(seconds=timeout))
    r = dist.get_rank()
    if mode == "collectives":
        for dev in sys.argv[2].split(","):
            collectives(dev)
    elif mode == "ddp":
        ddp(sys.argv[2], bucket_cap_mb=0.004)       # 4 KB buckets: several async reductions overlap backward
        ddp_features(sys.argv[2])
    elif mode == "mixed":
        dev = "cl"
        name = torch.cl.get_device_name(torch.device(dev)) if hasattr(torch.cl, "get_device_name") else dev
        print(f"rank {r} on {os.environ.get('CLTORCH_DEVICE')} {name}", flush=True)
        ddp(dev, steps=10)
    elif mode == "kill":
        x = torch.ones(4)
        for i in range(1000):
            if r == 1 and i == 3:
                os.kill(os.getpid(), 9)
            dist.all_reduce(x)
            time.sleep(0.01)
    elif mode == "raise":
        dist.all_reduce(torch.ones(2))
        if r == 1:
            raise ValueError("rank one gives up")
        dist.all_reduce(torch.ones(2))
    elif mode == "hang":
        dist.all_reduce(torch.ones(2))
        if r == 1:
            time.sleep(30)
        dist.all_reduce(torch.ones(2))
    print(f"OK {r}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
