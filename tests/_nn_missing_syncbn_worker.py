"""Rank program for tests/test_nn_missing_dist.py: ``mpiexec -n N python tests/_nn_missing_syncbn_worker.py DEV``.

Rank r holds rows [offset_r, offset_r + 2 + r) of one global batch (unequal counts). SyncBatchNorm's output, input
gradient, summed parameter gradients and running statistics must equal one BatchNorm2d run on the whole batch.
Prints "OK <rank>" at the end; a failed check raises, which fails the job."""
import sys
from datetime import timedelta

import numpy as np

import cltorch as torch
import cltorch.distributed as dist
import cltorch.nn as nn


def main():
    dev = sys.argv[1]
    dist.init_process_group("mpi", timeout=timedelta(seconds=120))
    r, n = dist.get_rank(), dist.get_world_size()
    counts = [2 + q for q in range(n)]
    off = sum(counts[:r])
    rs = np.random.RandomState(0)
    X = (rs.randn(sum(counts), 3, 4, 5) * 2 + 1).astype(np.float32)
    W = rs.randn(*X.shape).astype(np.float32)
    for group in (None, dist.new_group(list(range(n)))):
        ref = nn.BatchNorm2d(3, momentum=0.3).to(dev)
        with torch.no_grad():
            ref.weight.copy_(torch.tensor([0.5, 1.5, -1.0]))
            ref.bias.copy_(torch.tensor([0.1, 0.2, 0.3]))
        sbn = nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(nn.BatchNorm2d(3, momentum=0.3)), group)[0]
        sbn.load_state_dict(ref.state_dict())
        sbn.to(dev)
        xg = torch.from_numpy(X).to(dev).requires_grad_()
        yr = ref(xg)
        (yr * torch.from_numpy(W).to(dev)).sum().backward()
        xl = torch.from_numpy(X[off:off + counts[r]].copy()).to(dev).requires_grad_()
        y = sbn(xl)
        (y * torch.from_numpy(W[off:off + counts[r]].copy()).to(dev)).sum().backward()
        tol = dict(rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(y.detach().cpu().numpy(), yr.detach().cpu().numpy()[off:off + counts[r]], **tol)
        np.testing.assert_allclose(xl.grad.cpu().numpy(), xg.grad.cpu().numpy()[off:off + counts[r]], **tol)
        for name in ("weight", "bias"):
            g = getattr(sbn, name).grad.clone()
            dist.all_reduce(g)
            np.testing.assert_allclose(g.cpu().numpy(), getattr(ref, name).grad.cpu().numpy(), **tol)
        for name in ("running_mean", "running_var"):
            np.testing.assert_allclose(getattr(sbn, name).cpu().numpy(), getattr(ref, name).cpu().numpy(), **tol)
        assert int(sbn.num_batches_tracked.item()) == 1
        sbn.eval()
        ref.eval()
        np.testing.assert_allclose(sbn(xl).detach().cpu().numpy(),
                                   ref(xg).detach().cpu().numpy()[off:off + counts[r]], **tol)
    print(f"OK {r}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
