# A CIFAR/ImageNet-example style header: cudnn flags, DataParallel, distributed and onnx imports, then training.
import argparse
import random
import time

import cltorch as torch
import cltorch.backends.cudnn as cudnn
import cltorch.distributed as dist
import cltorch.nn as nn
import cltorch.nn.functional as F
import cltorch.nn.parallel
import cltorch.onnx
import cltorch.optim as optim
import cltorch.utils.data
from cltorch.optim.lr_scheduler import StepLR

parser = argparse.ArgumentParser(description="synthetic CIFAR-style training")
parser.add_argument("--lr", default=0.1, type=float)
parser.add_argument("--seed", default=0, type=int)
args = parser.parse_args([])

random.seed(args.seed)
torch.manual_seed(args.seed)
cudnn.deterministic = True
cudnn.benchmark = True

assert dist.is_available() and not dist.is_initialized()   # MPI backend present; no group started
assert dist.ReduceOp.SUM is not None
device = torch.device("cl" if torch.cl.is_available() else "cpu")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        return self.fc(torch.flatten(x, 1))


model = Net().to(device)
model = torch.nn.DataParallel(model)
criterion = nn.CrossEntropyLoss().to(device)
optimizer = optim.SGD(model.parameters(), args.lr, momentum=0.9, weight_decay=1e-4)
scheduler = StepLR(optimizer, step_size=30, gamma=0.1)

images = torch.randn(32, 3, 8, 8)
target = (images.mean(dim=(1, 2, 3)) > 0).long() + 2 * (images[:, 0].mean(dim=(1, 2)) > 0).long()
dataset = torch.utils.data.TensorDataset(images, target)
loader = torch.utils.data.DataLoader(dataset, batch_size=32, shuffle=True)

losses = []
end = time.time()
model.train()
for step in range(20):
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        output = model(x)
        loss = criterion(output, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    scheduler.step()

assert all(k.startswith("module.") for k in model.state_dict()), list(model.state_dict())[:3]
assert losses[-1] < 0.5 * losses[0], losses
try:
    torch.onnx.export(model, (images[:1],), "model.onnx")
except NotImplementedError as e:
    assert "ONNX export" in str(e)
else:
    raise AssertionError("onnx.export should raise NotImplementedError")
print(f"loss {losses[0]:.3f} -> {losses[-1]:.3f} in {time.time() - end:.1f}s")
