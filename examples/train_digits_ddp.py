"""Data-parallel training of the digits CNN with DistributedDataParallel over MPI.

Plain PyTorch DDP code with ``import cltorch as torch``. Each rank trains on its DistributedSampler share of the
training set; gradients are averaged across ranks during backward; at the end every rank checks that its
parameters are bit-identical to rank 0's, and rank 0 reports the test accuracy.

    mpiexec -n 2 python examples/train_digits_ddp.py --epochs 5
    python -m cltorch.distributed.run --nproc-per-node 2 examples/train_digits_ddp.py --epochs 5
    python -m cltorch.distributed.run --nproc-per-node 2 --devices cl:0,cl:1 examples/train_digits_ddp.py --device cl

``--device cl`` takes each rank's device from CLTORCH_DEVICE (set per rank by the launcher's ``--devices``),
else ``cl:LOCAL_RANK`` when that many devices exist, else ``cl``.
"""
import argparse
import hashlib
import os
import sys
import time
from pathlib import Path

import numpy as np

import cltorch as torch
import cltorch.distributed as dist
import cltorch.nn as nn
import cltorch.nn.functional as F
from cltorch.nn.parallel import DistributedDataParallel as DDP
from cltorch.utils.data import DataLoader, DistributedSampler, TensorDataset

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_digits import DigitsCNN, load_digits_split  # noqa: E402


def pick_device(arg):
    if arg != "cl" or os.environ.get("CLTORCH_DEVICE"):
        return arg
    local = int(os.environ.get("LOCAL_RANK", "0"))
    return f"cl:{local}" if torch.cl.device_count() > local else "cl"


def params_digest(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def main(argv=None):
    ap = argparse.ArgumentParser(description="DDP training of the digits CNN on cltorch over MPI.")
    ap.add_argument("--device", default="cpu", help="cpu, cl, cl:N (default: cpu)")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=32, help="per rank")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-steps", type=int, default=None)
    ap.add_argument("--workers", type=int, default=0, help="DataLoader worker processes per rank")
    args = ap.parse_args(argv)

    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(pick_device(args.device))
    torch.manual_seed(args.seed + rank)          # different dropout masks per rank; weights come from rank 0
    x_tr, x_te, y_tr, y_te = load_digits_split(args.seed)
    train = TensorDataset(torch.from_numpy(x_tr), torch.from_numpy(y_tr))
    sampler = DistributedSampler(train, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler, drop_last=True,
                        num_workers=args.workers)

    model = DDP(DigitsCNN().to(device))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    step, t0 = 0, time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)                  # a new shuffle each epoch, the same on every rank
        model.train()
        total = torch.zeros((), device=device)
        seen = 0
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            total += loss.detach()
            step += 1
            seen += 1
            if args.max_steps and step >= args.max_steps:
                break
        dist.all_reduce(total, op=dist.ReduceOp.AVG)
        if rank == 0:
            print(f"epoch {epoch}: mean loss per step {total.item() / max(seen, 1):.4f} "
                  f"({time.perf_counter() - t0:.1f} s)", flush=True)
        if args.max_steps and step >= args.max_steps:
            break
    digests = [None] * world
    dist.all_gather_object(digests, params_digest(model.module))
    if rank == 0:
        model.eval()
        with torch.no_grad():
            pred = model(torch.from_numpy(x_te).to(device)).argmax(1).cpu().numpy()
        print(f"{world} ranks, {step} steps, test accuracy {(pred == y_te).mean():.3f}; parameters identical on "
              f"all ranks: {len(set(digests)) == 1} ({digests[0]})", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
