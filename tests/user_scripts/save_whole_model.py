# Whole-model checkpoints, the way many tutorials write them: train a little, torch.save(model, ...) and a
# dict holding the optimizer's state and a numpy array, then load both back with weights_only=False. The
# default torch.load (weights_only=True) refuses the whole model and names its class. If real torch is
# installed, it loads the same file and computes the same outputs.
import pickle

import numpy as np

import cltorch as torch
import cltorch.nn as nn
import cltorch.optim as optim

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 2))
opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
loss_fn = nn.CrossEntropyLoss()

rng = np.random.default_rng(0)
x = torch.from_numpy(rng.standard_normal((32, 6)).astype(np.float32))
y = torch.from_numpy((rng.standard_normal(32) > 0).astype(np.int64))
for epoch in range(5):
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()

model.eval()
with torch.no_grad():
    expected = model(x).numpy()

torch.save(model, "model.pt")
torch.save({"epoch": epoch, "optimizer": opt.state_dict(), "np": np.arange(3), "loss": loss.item()}, "ckpt.pt")

restored = torch.load("model.pt", weights_only=False)
assert type(restored) is nn.Sequential and not restored.training
with torch.no_grad():
    got = restored(x).numpy()
assert np.array_equal(got, expected), np.abs(got - expected).max()

ckpt = torch.load("ckpt.pt", weights_only=False)
assert ckpt["epoch"] == 4 and np.array_equal(ckpt["np"], np.arange(3))
opt2 = optim.SGD(restored.parameters(), lr=0.1, momentum=0.9)
opt2.load_state_dict(ckpt["optimizer"])
buf = ckpt["optimizer"]["state"][0]["momentum_buffer"]
assert np.array_equal(buf.numpy(), opt.state[model[0].weight]["momentum_buffer"].numpy())

try:
    torch.load("model.pt")
except pickle.UnpicklingError as e:
    assert "torch.nn.Sequential" in str(e) and "weights_only" in str(e), e
else:
    raise AssertionError("the default weights_only=True load of a whole model should refuse it")

try:
    import torch as real_torch
except ImportError:
    real_torch = None
if real_torch is not None and real_torch is not torch:
    theirs = real_torch.load("model.pt", weights_only=False)
    assert isinstance(theirs, real_torch.nn.Sequential)
    with real_torch.no_grad():
        out = theirs(real_torch.from_numpy(x.numpy())).numpy()
    assert np.allclose(out, expected, rtol=1e-5, atol=1e-6), np.abs(out - expected).max()
    print("real torch loads the cltorch model: max diff", float(np.abs(out - expected).max()))
print("ok: loss", round(ckpt["loss"], 4))
