# A small CNN whose activations all run in place (inplace=True), trained for 20 steps: the loss must fall. With
# PyTorch installed, the first loss and every parameter's gradient are compared with torch's from the same weights.
import numpy as np

import cltorch as torch
import cltorch.nn as nn
import cltorch.nn.functional as F


def make_model(nn):
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(8, 8, 3, padding=1), nn.ELU(inplace=True),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.SELU(inplace=True),
        nn.Conv2d(16, 16, 3, padding=1), nn.Hardswish(inplace=True),
        nn.Flatten(),
        nn.Linear(16 * 4 * 4, 32), nn.ReLU(inplace=True),
        nn.Linear(32, 3),
    )


rng = np.random.default_rng(0)
images = rng.standard_normal((24, 1, 8, 8)).astype(np.float32)
labels = rng.integers(0, 3, 24).astype(np.int64)
images[labels == 1, :, :4] += 1.0          # a learnable signal per class
images[labels == 2, :, :, 4:] -= 1.0

torch.manual_seed(0)
model = make_model(nn)
x, y = torch.from_numpy(images), torch.from_numpy(labels)
optimizer = torch.optim.Adam(model.parameters(), lr=0.003)

losses, first_grads = [], None
for step in range(20):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    if step == 0:
        first_grads = [p.grad.numpy().copy() for p in model.parameters()]
    optimizer.step()
    losses.append(loss.item())

print("losses:", " ".join(f"{v:.4f}" for v in losses))
assert all(np.isfinite(losses))
assert losses[-1] < 0.5 * losses[0], losses

try:
    import torch as real_torch
except ImportError:
    real_torch = None

if real_torch is not None:
    ref = make_model(real_torch.nn)
    with real_torch.no_grad():
        torch.manual_seed(0)
        start = make_model(nn)                 # the same initial weights as the trained model had
        for p, q in zip(ref.parameters(), start.parameters()):
            p.copy_(real_torch.from_numpy(q.detach().numpy().copy()))
    ref_loss = real_torch.nn.functional.cross_entropy(ref(real_torch.from_numpy(images)), real_torch.from_numpy(labels))
    ref_loss.backward()
    print(f"first loss: cltorch {losses[0]:.6f}  torch {ref_loss.item():.6f}")
    assert abs(losses[0] - ref_loss.item()) <= 1e-5 * abs(ref_loss.item()) + 1e-6
    for g, p in zip(first_grads, ref.parameters()):
        np.testing.assert_allclose(g, p.grad.numpy(), rtol=1e-4, atol=1e-5)
    print("first-step gradients match torch")
