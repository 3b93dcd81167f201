# Stochastic weight averaging with SWALR and update_bn on a small BatchNorm model; no main guard.
import numpy as np
import cltorch as torch
import cltorch.nn as nn
import cltorch.optim as optim
from cltorch.optim.swa_utils import AveragedModel, SWALR, update_bn
from cltorch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
rng = np.random.default_rng(0)
X = torch.from_numpy(rng.standard_normal((64, 5)).astype(np.float32))
Y = torch.from_numpy((rng.standard_normal((64, 1)) > 0).astype(np.float32))
loader = DataLoader(TensorDataset(X, Y), batch_size=16, shuffle=True)

model = nn.Sequential(nn.Linear(5, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 1))
optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=10)
swa_model = AveragedModel(model)
swa_scheduler = SWALR(optimizer, swa_lr=0.05, anneal_epochs=2)
loss_fn = nn.BCEWithLogitsLoss()
swa_start = 4
snapshots = []
lrs = []

for epoch in range(10):
    for xb, yb in loader:
        optimizer.zero_grad()
        loss_fn(model(xb), yb).backward()
        optimizer.step()
    if epoch >= swa_start:
        swa_model.update_parameters(model)
        snapshots.append([p.detach().numpy().copy() for p in model.parameters()])
        swa_scheduler.step()
    else:
        scheduler.step()
    lrs.append(optimizer.param_groups[0]["lr"])

update_bn(loader, swa_model)

# the averaged parameters are the plain mean of the snapshots
assert int(swa_model.n_averaged.item()) == len(snapshots) == 6
for avg, *snaps in zip(swa_model.module.parameters(), *snapshots):
    expected = np.mean(np.stack(snaps), axis=0)
    assert np.allclose(avg.detach().numpy(), expected, rtol=1e-5, atol=1e-6), (avg, expected)

# after the annealing epochs the learning rate sits at swa_lr
assert abs(lrs[-1] - 0.05) < 1e-12, lrs
# update_bn: the running mean is the mean of the BatchNorm inputs over the whole data set
bn = swa_model.module[1]
h = swa_model.module[0](X).detach().numpy()
assert np.allclose(bn.running_mean.numpy(), h.mean(0), rtol=1e-4, atol=1e-5), (bn.running_mean, h.mean(0))
swa_model.eval()
out = swa_model(X)
print("swa model output", out.shape, "lrs", [round(v, 4) for v in lrs])
assert out.shape == (64, 1)
