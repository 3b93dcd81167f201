"""Train a small CNN on scikit-learn's handwritten digits (8x8 real scans, shipped with scikit-learn).

The script is plain PyTorch with one changed import line (``import cltorch as torch``): Conv2d, BatchNorm2d,
ReLU, MaxPool2d, Dropout and Linear; a DataLoader with 2 workers and pinned memory; AdamW with a OneCycle
schedule; a checkpoint (model, optimizer and scheduler state) that ``--resume`` continues from.

    python examples/train_digits.py --device cl --epochs 30 --seed 0 [--plot loss.png] [--resume]
"""
import argparse
import importlib.util
import os
import time
from pathlib import Path

import numpy as np

import cltorch as torch
import cltorch.nn as nn
import cltorch.nn.functional as F
from cltorch.utils.data import DataLoader, TensorDataset


class DigitsCNN(nn.Module):
    """(N, 1, 8, 8) -> (N, 10) logits."""

    def __init__(self, dropout=0.25):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.MaxPool2d(2),                                   # 32 x 4 x 4
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(dropout), nn.Linear(32 * 4 * 4, 64), nn.ReLU(),
                                  nn.Linear(64, 10))

    def forward(self, x):
        return self.head(self.features(x))


def load_digits_arrays():
    """scikit-learn's handwritten digits: (images (1797, 8, 8) float64 in 0..16, labels (1797,) int64).

    Read from the file scikit-learn ships them in (``sklearn/datasets/data/digits.csv.gz``, 64 pixels and the
    label per row), found without importing scikit-learn, whose import takes about 2 s here: more than the
    whole warm start of this example. Falls back to ``sklearn.datasets.load_digits`` if the file moves.
    """
    spec = importlib.util.find_spec("sklearn")
    if spec is None:
        raise SystemExit("the digits data ship with scikit-learn: pip install scikit-learn "
                         "(or pip install '.[examples]')")
    path = Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz"
    if path.is_file():
        data = np.loadtxt(path, delimiter=",")
        return data[:, :64].reshape(-1, 8, 8), data[:, 64].astype(np.int64)
    from sklearn.datasets import load_digits
    d = load_digits()
    return d.images, d.target.astype(np.int64)


def load_digits_split(seed, test_fraction=0.2):
    """The 1,797 scans as float32 images (N, 1, 8, 8) in [0, 1] with int64 labels, split into train and test
    with the same share of every class in both (stratified), shuffled by ``seed``.
    Returns (x_train, x_test, y_train, y_test)."""
    images, y = load_digits_arrays()
    x = (images / 16.0).astype(np.float32)[:, None]
    rng = np.random.default_rng(seed)
    test = np.zeros(len(y), bool)
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        test[idx[:int(round(test_fraction * len(idx)))]] = True
    tr, te = rng.permutation(np.flatnonzero(~test)), rng.permutation(np.flatnonzero(test))
    return x[tr], x[te], y[tr], y[te]


def evaluate(model, loader, device):
    model.eval()
    correct = total = 0
    loss_sum = 0.0
    with torch.no_grad():
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            out = model(xb)
            loss_sum += F.cross_entropy(out, yb, reduction="sum").item()
            correct += (out.argmax(1) == yb).sum().item()
            total += yb.shape[0]
    return loss_sum / total, correct / total


def save_checkpoint(path, model, opt, sched, epoch, history):
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                "epoch": epoch, "history": history}, path)


def resume_schedule(sched, saved):
    """Continue the OneCycle schedule ``sched`` (built for this run's ``--epochs``) from the checkpoint's scheduler
    state ``saved``.

    A schedule of the same length is restored as saved. A run resumed with a different ``--epochs`` keeps the new
    schedule's length and phases (a OneCycle state carries its ``total_steps``, and stepping past it raises) and
    restores only what stays valid: the number of steps already taken. The learning rate (and AdamW's beta1) are
    then set to the new schedule's values at that step, so training to a larger ``--epochs`` continues the one
    cycle stretched over the whole run, as if it had been started with that many epochs.
    """
    if saved.get("total_steps") == sched.total_steps:
        sched.load_state_dict(saved)
        return
    done = saved["last_epoch"]
    if done >= sched.total_steps:
        # Nothing left to train (the epoch loop is empty); keep the saved state as it is.
        sched.load_state_dict(saved)
        return
    fresh = sched.state_dict()
    sched.load_state_dict({**saved, "total_steps": fresh["total_steps"],
                           "_schedule_phases": fresh["_schedule_phases"]})
    sched.last_epoch = done - 1
    sched.step()              # recomputes lr / momentum for step `done` on the longer schedule
    print(f"scheduler rebuilt for {sched.total_steps} steps (was {saved['total_steps']}), continuing at step "
          f"{done}, lr {sched.get_last_lr()[0]:.3g}")


def main(argv=None):
    ap = argparse.ArgumentParser(description="Train a small CNN on scikit-learn's digits with cltorch.")
    ap.add_argument("--device", default="cl", help="cpu, cl, cl:N, cl:amd ... (default: cl)")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--checkpoint", default="digits_ckpt.pt")
    ap.add_argument("--resume", action="store_true", help="continue from --checkpoint")
    ap.add_argument("--plot", default=None, help="write loss/accuracy curves to this PNG (needs matplotlib)")
    ap.add_argument("--max-steps", type=int, default=None, help="stop after this many steps (smoke tests)")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)

    t_start = time.perf_counter()
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    device = torch.device(args.device)
    xtr, xte, ytr, yte = load_digits_split(args.seed)
    train = TensorDataset(torch.from_numpy(xtr), torch.from_numpy(ytr))
    test = TensorDataset(torch.from_numpy(xte), torch.from_numpy(yte))
    g = torch.Generator().manual_seed(args.seed)
    train_loader = DataLoader(train, batch_size=args.batch_size, shuffle=True, num_workers=args.workers,
                              pin_memory=True, generator=g, persistent_workers=args.workers > 0, drop_last=True)
    test_loader = DataLoader(test, batch_size=256)

    model = DigitsCNN().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-2)
    steps_per_epoch = len(train_loader)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, epochs=args.epochs,
                                                steps_per_epoch=steps_per_epoch)
    start_epoch, history = 0, []
    if args.resume and os.path.exists(args.checkpoint):
        ck = torch.load(args.checkpoint, map_location=device)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optimizer"])
        start_epoch, history = ck["epoch"], ck["history"]
        print(f"resumed from {args.checkpoint} at epoch {start_epoch}")
        resume_schedule(sched, ck["scheduler"])

    try:
        from tqdm import tqdm
    except ImportError:  # tqdm is in the examples extra
        tqdm = None
    print(f"device {device} ({torch.cl.get_device_name(device)}), {len(train)} train / {len(test)} test images")
    step = 0
    first_step_time = None
    for epoch in range(start_epoch, args.epochs):
        model.train()
        it = train_loader
        if tqdm is not None and not args.no_progress:
            it = tqdm(train_loader, desc=f"epoch {epoch + 1}/{args.epochs}", leave=False)
        running = 0.0
        for xb, yb in it:
            xb = xb.to(device, non_blocking=True)
            yb = yb.to(device, non_blocking=True)
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            if first_step_time is None:
                running_loss = loss.item()
                first_step_time = time.perf_counter() - t_start
                print(f"first step done {first_step_time:.2f} s after start (loss {running_loss:.3f})")
            running += loss.item() if step % 10 == 0 else 0.0
            if args.max_steps and step >= args.max_steps:
                break
        test_loss, acc = evaluate(model, test_loader, device)
        history.append({"epoch": epoch + 1, "test_loss": test_loss, "test_acc": acc})
        print(f"epoch {epoch + 1:3d}  test loss {test_loss:.4f}  test accuracy {acc * 100:.2f}%")
        save_checkpoint(args.checkpoint, model, opt, sched, epoch + 1, history)
        if args.max_steps and step >= args.max_steps:
            break
    total = time.perf_counter() - t_start
    final_acc = history[-1]["test_acc"] if history else float("nan")
    print(f"final test accuracy {final_acc * 100:.2f}% in {total:.1f} s (first step at {first_step_time:.2f} s)")
    if args.plot:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            ep = [h["epoch"] for h in history]
            fig, ax = plt.subplots(1, 2, figsize=(9, 3.5))
            ax[0].plot(ep, [h["test_loss"] for h in history])
            ax[0].set_xlabel("epoch")
            ax[0].set_ylabel("test loss")
            ax[1].plot(ep, [100 * h["test_acc"] for h in history])
            ax[1].set_xlabel("epoch")
            ax[1].set_ylabel("test accuracy (%)")
            fig.tight_layout()
            fig.savefig(args.plot)
            print(f"wrote {args.plot}")
        except ImportError:
            print("matplotlib is not installed: no plot")
    return final_acc


if __name__ == "__main__":
    main()
