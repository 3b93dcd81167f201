# A training loop written for mixed precision on CUDA, run where CUDA is absent: the AMP flags turn off, the
# model and inputs use channels_last, and a bfloat16 round trip checks the storage dtype.
import warnings

import cltorch as torch
import cltorch.nn as nn
import cltorch.nn.functional as F

warnings.filterwarnings("ignore", category=FutureWarning)   # torch.cuda.amp.* are deprecated aliases

torch.manual_seed(0)
use_amp = torch.cuda.is_available()
device = torch.device("cuda" if use_amp else "cpu")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(2, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 4 * 4, 2)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.relu(self.conv2(x))
        return self.fc(torch.flatten(x, 1))


# two classes: a bright top half or a bright bottom half
n = 64
labels = torch.randint(0, 2, (n,))
images = torch.randn(n, 2, 8, 8) * 0.3
images[labels == 0, :, :4, :] += 1.0
images[labels == 1, :, 4:, :] += 1.0
images = images.to(device).to(memory_format=torch.channels_last)
labels = labels.to(device)
assert images.is_contiguous(memory_format=torch.channels_last) and not images.is_contiguous()
assert images.stride() == (128, 1, 16, 2)

model = Net().to(device)
model = model.to(memory_format=torch.channels_last)
assert model.conv1.weight.is_contiguous(memory_format=torch.channels_last)
optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
scaler = torch.cuda.amp.GradScaler(enabled=use_amp)

# the same model on contiguous inputs computes the same outputs
with torch.no_grad():
    a = model(images[:4])
    b = model(images[:4].contiguous())
assert (a - b).abs().max().item() < 1e-5, (a - b).abs().max()

losses = []
for epoch in range(15):
    optimizer.zero_grad(set_to_none=True)
    with torch.cuda.amp.autocast(enabled=use_amp):
        out = model(images)
        loss = F.cross_entropy(out, labels)
    assert out.dtype == torch.float32       # autocast off: fp32 all the way
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
    scaler.step(optimizer)
    scaler.update()
    losses.append(loss.item())

print("loss", losses[0], "->", losses[-1])
assert scaler.get_scale() == 1.0 and not scaler.is_enabled()
assert losses[-1] < 0.5 * losses[0], losses
acc = (model(images).argmax(1) == labels).float().mean().item()
assert acc > 0.9, acc

# bfloat16 storage round trip: round to nearest even on the way in, exact on the way out
w = model.fc.weight.detach()
w16 = w.to(torch.bfloat16)
assert w16.dtype == torch.bfloat16 and w16.element_size() == 2
back = w16.float()
assert ((back - w).abs() <= w.abs() * 2 ** -8).all()
assert (back.bfloat16().float() == back).all()
halfway = torch.tensor([1.00390625, 1.01171875, -2.5]).bfloat16()
assert halfway.tolist() == [1.0, 1.015625, -2.5], halfway.tolist()
print("ok")
