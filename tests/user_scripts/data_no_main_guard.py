# A tutorial-style training script with no `if __name__ == "__main__":` guard: the Dataset class, its
# collate_fn and worker_init_fn live in the script body, and the DataLoader uses two worker processes.
import numpy as np

import cltorch as torch
import cltorch.nn as nn
import cltorch.nn.functional as F
from cltorch.utils.data import DataLoader, Dataset, get_worker_info

N_SAMPLES = 96
rng = np.random.default_rng(0)
FEATURES = rng.standard_normal((N_SAMPLES, 8)).astype(np.float32)
WEIGHTS = rng.standard_normal(8).astype(np.float32)
LABELS = (FEATURES @ WEIGHTS > 0).astype(np.int64)


class PointsDataset(Dataset):
    def __init__(self, features, labels):
        self.features = features
        self.labels = labels
        self.scale = 1.0

    def __len__(self):
        return len(self.features)

    def __getitem__(self, idx):
        x = torch.from_numpy(self.features[idx]) * self.scale
        return x, int(self.labels[idx]), idx


def collate(batch):
    xs, ys, idxs = zip(*batch)
    return torch.stack(xs), torch.tensor(ys), torch.tensor(idxs)


def init_worker(worker_id):
    get_worker_info().dataset.scale = 1.0 + 0.0 * worker_id


dataset = PointsDataset(FEATURES, LABELS)
loader = DataLoader(dataset, batch_size=16, shuffle=True, num_workers=2, collate_fn=collate,
                    worker_init_fn=init_worker)

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)

epoch_losses = []
for epoch in range(2):
    seen = []
    total = 0.0
    for x, y, idx in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(y)
        seen.extend(idx.tolist())
    assert sorted(seen) == list(range(N_SAMPLES)), f"epoch {epoch}: indices seen {sorted(seen)}"
    epoch_losses.append(total / N_SAMPLES)
    print(f"epoch {epoch}: loss {epoch_losses[-1]:.4f}")

assert epoch_losses[1] < epoch_losses[0], epoch_losses
print("ok")
