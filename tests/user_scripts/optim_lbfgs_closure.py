# Polynomial regression fitted with LBFGS and a closure, as in the PyTorch examples; no main guard.
import numpy as np
import cltorch as torch
import cltorch.nn as nn
import cltorch.optim as optim

torch.manual_seed(0)
rng = np.random.default_rng(0)
x = np.linspace(-1, 1, 200)
y = 0.5 - 1.3 * x + 0.8 * x ** 2 + 2.0 * x ** 3 + 0.05 * rng.standard_normal(x.shape)

degree = 3
features = np.stack([x ** k for k in range(1, degree + 1)], axis=1).astype(np.float32)
X = torch.from_numpy(features)
Y = torch.from_numpy(y.astype(np.float32)).unsqueeze(1)

model = nn.Linear(degree, 1)
criterion = nn.MSELoss()
optimizer = optim.LBFGS(model.parameters(), lr=1, max_iter=50, history_size=10, line_search_fn="strong_wolfe")


def closure():
    optimizer.zero_grad()
    loss = criterion(model(X), Y)
    loss.backward()
    return loss


for epoch in range(5):
    loss = optimizer.step(closure)
    print(f"epoch {epoch}: loss {loss.item():.6f}")

final = criterion(model(X), Y).item()

# the least-squares optimum of the same problem, in float64
A = np.hstack([features.astype(np.float64), np.ones((len(x), 1))])
coef, *_ = np.linalg.lstsq(A, y, rcond=None)
best = float(np.mean((A @ coef - y) ** 2))
print(f"final loss {final:.8f}, least-squares optimum {best:.8f}")
assert final <= best * (1 + 1e-4) + 1e-7, (final, best)
w = model.weight.detach().numpy().ravel()
b = float(model.bias.detach().numpy()[0])
assert np.allclose(w, coef[:degree], atol=1e-3), (w, coef)
assert abs(b - coef[degree]) < 1e-3, (b, coef)
