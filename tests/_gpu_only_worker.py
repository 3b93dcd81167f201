"""Worker of tests/test_gpu_only_machine.py: what a GPU user does with cpu tensors, as one script.

``python _gpu_only_worker.py MODE FOLDER``; MODE is ``normal`` (this machine's devices as they are) or ``gpu-only``
(a machine whose only OpenCL device is a GPU: the device list keeps its first device and reports it as a GPU, class
'gpu', so no OpenCL CPU device is listed; it still computes on the real OpenCL device here, with the profile of what
it really is, so both modes train with the same tables). The script seeds, builds a small CNN on cpu, saves and
loads it, moves it to 'cl', trains a few Adam steps from a pinned DataLoader, and prints one JSON line: the initial
weights' digests, the losses, the final weights, and (gpu-only) what cpu arithmetic raised and what ``cltorch
devices`` said about cpu tensors.
"""
import dataclasses
import hashlib
import importlib
import io
import json
import sys
from contextlib import redirect_stdout

mode, folder = sys.argv[1], sys.argv[2]
if mode == "gpu-only":
    from cltorch.backend import devices
    R = importlib.import_module("cltorch.backend.runtime")
    listed = devices.list_devices()
    del listed[1:]
    real_profile = R.load_profile
    R.load_profile = lambda info: real_profile(dataclasses.replace(info, cls="cpu", is_gpu=False))
    for info in listed:
        info.cls, info.is_gpu = "gpu", True

import cltorch as torch                      # noqa: E402
import cltorch.nn as nn                      # noqa: E402
import cltorch.nn.functional as F            # noqa: E402
from cltorch import backend                  # noqa: E402
from cltorch.utils.data import DataLoader, TensorDataset   # noqa: E402


def digest(t):
    return hashlib.sha256(t.detach().cpu().numpy().tobytes()).hexdigest()


def make():
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Dropout(0.25), nn.Linear(4 * 4 * 4, 3))


out = {"cpu_device": backend.cpu_device_present()}
torch.manual_seed(0)
model = make()
nn.init.orthogonal_(model[-1].weight)
out["init"] = {k: digest(v) for k, v in model.state_dict().items()}
x = torch.randn(32, 1, 8, 8)
y = torch.randint(0, 3, (32,))
x[:, :, 0] = x[:, :, 0] * 0.5 + 1.0          # exact ops on a cpu tensor (host)
torch.save({"model": model.state_dict(), "x": x, "y": y}, f"{folder}/ckpt.pt")
ck = torch.load(f"{folder}/ckpt.pt")
model = make()
model.load_state_dict(ck["model"])
out["loaded"] = {k: digest(v) for k, v in model.state_dict().items()}
out["data"] = [digest(ck["x"]), digest(ck["y"])]
model.to("cl")
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
loader = DataLoader(TensorDataset(ck["x"], ck["y"]), batch_size=8, shuffle=True, pin_memory=True,
                    generator=torch.Generator().manual_seed(1))
losses = []
for xb, yb in loader:
    xb, yb = xb.to("cl", non_blocking=True), yb.to("cl", non_blocking=True)
    loss = F.cross_entropy(model(xb), yb)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
out["losses"] = losses
out["final"] = {k: v.cpu().tolist() for k, v in model.state_dict().items()}
if mode == "gpu-only":
    try:
        x.exp()
        out["arith_error"] = None
    except RuntimeError as e:
        out["arith_error"] = f"{type(e).__name__}: {e}"
    from cltorch.cli import devices as cli_devices
    text = io.StringIO()
    with redirect_stdout(text):
        cli_devices.run(type("Args", (), {"json": False})())
    out["devices_text"] = text.getvalue()
    out["cpu_runtime_made"] = R._cpu_rt[0] is not None
print(json.dumps(out))
