# Hogwild training, after PyTorch's examples/mnist_hogwild, on synthetic data: the model's parameters live in
# shared memory, two processes train it at once without locks, and the parent (which never trains) evaluates
# the shared model afterwards. Only the imports differ from the torch version.
import argparse

import cltorch as torch
import cltorch.multiprocessing as mp
import cltorch.nn as nn
import cltorch.nn.functional as F
import cltorch.optim as optim
from cltorch.utils.data import DataLoader, TensorDataset
from cltorch.utils.data.distributed import DistributedSampler


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 4)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


def make_datasets(n_train, n_test, seed=0):
    """Four Gaussian clusters in 32 dimensions: a train and a test set drawn around the same centres."""
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(4, 32, generator=g)
    target = torch.randint(0, 4, (n_train + n_test,), generator=g)
    data = centers[target] + torch.randn(n_train + n_test, 32, generator=g)
    return (TensorDataset(data[:n_train], target[:n_train]), TensorDataset(data[n_train:], target[n_train:]))


def train(rank, args, model, dataset):
    torch.manual_seed(args.seed + rank)
    sampler = DistributedSampler(dataset, num_replicas=args.num_processes, rank=rank)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)
    optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    model.train()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for data, target in loader:
            optimizer.zero_grad()
            loss = F.nll_loss(model(data), target)
            loss.backward()
            optimizer.step()


def test(model, dataset):
    model.eval()
    data, target = dataset.tensors
    with torch.no_grad():
        output = model(data)
        loss = F.nll_loss(output, target).item()
        accuracy = (output.argmax(dim=1) == target).float().mean().item()
    return loss, accuracy


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Hogwild example")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--num-processes", type=int, default=2)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    train_set, test_set = make_datasets(1024, 256)

    model = Net()
    model.share_memory()  # gradients are allocated lazily, so they are not shared here
    assert all(p.is_shared() for p in model.parameters())
    loss0, acc0 = test(model, test_set)

    processes = []
    for rank in range(args.num_processes):
        p = mp.Process(target=train, args=(rank, args, model, train_set))
        p.start()
        processes.append(p)
    for p in processes:
        p.join()
    assert all(p.exitcode == 0 for p in processes), [p.exitcode for p in processes]

    loss1, acc1 = test(model, test_set)
    print(f"test loss {loss0:.4f} -> {loss1:.4f}, accuracy {acc0:.3f} -> {acc1:.3f}")
    # the parent never trained: the drop is the workers' updates, seen through shared memory
    assert loss1 < 0.3 * loss0, (loss0, loss1)
    assert acc1 > 0.9, acc1
