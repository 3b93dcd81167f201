# A small VAE the way the PyTorch examples write it, with torch.distributions: the encoder gives
# Normal(mu, std), the latent is rsample()d, the KL term is kl_divergence against Normal(0, 1), and the
# decoder is a Bernoulli over pixels from its logits. Then a tiny REINFORCE update with Categorical.
# No main guard; synthetic binary "images".
import numpy as np

import cltorch as torch
import cltorch.distributions as D
import cltorch.nn as nn
import cltorch.nn.functional as F
from cltorch.distributions import Categorical, Normal, kl_divergence

torch.manual_seed(0)
rng = np.random.default_rng(0)

# 4 prototype patterns of 32 pixels, each image a prototype with 5% of its pixels flipped
protos = rng.random((4, 32)) > 0.5
idx = rng.integers(0, 4, 256)
flips = rng.random((256, 32)) < 0.05
data = torch.tensor((protos[idx] ^ flips).astype(np.float32))


class VAE(nn.Module):
    def __init__(self, d_in=32, d_hidden=64, d_latent=4):
        super().__init__()
        self.enc = nn.Linear(d_in, d_hidden)
        self.mu = nn.Linear(d_hidden, d_latent)
        self.logvar = nn.Linear(d_hidden, d_latent)
        self.dec1 = nn.Linear(d_latent, d_hidden)
        self.dec2 = nn.Linear(d_hidden, d_in)

    def forward(self, x):
        h = F.relu(self.enc(x))
        mu, logvar = self.mu(h), self.logvar(h)
        q = D.Normal(mu, torch.exp(0.5 * logvar))
        z = q.rsample()
        logits = self.dec2(F.relu(self.dec1(z)))
        return q, logits


def elbo(model, x):
    q, logits = model(x)
    prior = D.Normal(torch.zeros_like(q.loc), torch.ones_like(q.scale))
    rec = D.Bernoulli(logits=logits).log_prob(x).sum(-1)
    kl = D.kl_divergence(q, prior).sum(-1)
    return (rec - kl).mean()


model = VAE()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
with torch.no_grad():
    start = elbo(model, data).item()
for step in range(100):
    batch = data[(step * 64) % 256:(step * 64) % 256 + 64]
    loss = -elbo(model, batch)
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    end = elbo(model, data).item()
print(f"ELBO {start:.2f} -> {end:.2f}")
assert end > start + 8.0, (start, end)
assert end > -14.0, end          # well above the -22 nats of an uninformed Bernoulli(0.5) decoder

# REINFORCE on a 3-armed bandit where only action 2 pays
policy = nn.Linear(1, 3)
nn.init.zeros_(policy.weight)
nn.init.zeros_(policy.bias)            # start from the uniform policy
popt = torch.optim.SGD(policy.parameters(), lr=0.1)
state = torch.ones(16, 1)
p_before = F.softmax(policy(state[:1]), -1)[0, 2].item()
for step in range(30):
    dist = Categorical(logits=policy(state))
    action = dist.sample()
    reward = (action == 2).float()
    loss = -(dist.log_prob(action) * (reward - reward.mean())).mean() - 0.01 * dist.entropy().mean()
    popt.zero_grad()
    loss.backward()
    popt.step()
p_after = F.softmax(policy(state[:1]), -1)[0, 2].item()
print(f"P(rewarded action) {p_before:.3f} -> {p_after:.3f}")
assert abs(p_before - 1 / 3) < 1e-6 and p_after > 0.6, (p_before, p_after)
assert kl_divergence(Normal(0.0, 1.0), Normal(0.0, 1.0)).item() == 0.0
