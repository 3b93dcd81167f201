# A PyTorch-style training script using lazy layers, SyncBatchNorm (one process), Fold/Unfold, LPPool2d,
# FeatureAlphaDropout and an adaptive softmax head; only the import differs from torch.
import cltorch as torch
import cltorch.nn as nn
import cltorch.nn.functional as F

torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else ("cl" if torch.cl.is_available() else "cpu")


class Net(nn.Module):
    def __init__(self, n_classes=50):
        super().__init__()
        self.conv = nn.LazyConv2d(8, 3, padding=1)
        self.bn = nn.LazyBatchNorm2d()
        self.pool = nn.LPPool2d(2, 2)
        self.drop = nn.FeatureAlphaDropout(0.1)
        self.fc = nn.LazyLinear(32)
        self.head = nn.AdaptiveLogSoftmaxWithLoss(32, n_classes, cutoffs=[10, 30])

    def forward(self, x, y):
        x = F.selu(self.bn(self.conv(x)))
        x = self.drop(self.pool(x))
        # a round trip through Unfold/Fold with non-overlapping blocks is the identity
        b = x.shape[0]
        x = nn.Fold(x.shape[-2:], 2, stride=2)(nn.Unfold(2, stride=2)(x))
        return self.head(self.fc(x.reshape(b, -1)), y)


model = Net().to(device)
x = torch.randn(16, 3, 8, 8, device=device)
y = torch.randint(0, 50, (16,), device=device)
model(x, y)   # dummy batch: materializes the lazy layers
model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
assert type(model.bn) is nn.SyncBatchNorm
assert not any(isinstance(p, nn.UninitializedParameter) for p in model.parameters())
assert type(model.fc) is nn.Linear and model.fc.in_features == 8 * 4 * 4
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
losses = []
for step in range(30):
    opt.zero_grad()
    out = model(x, y)
    out.loss.backward()
    opt.step()
    losses.append(out.loss.item())
print("loss", losses[0], "->", losses[-1])
assert losses[-1] < 0.5 * losses[0], losses
torch.save(model.state_dict(), "m.pt")
sd = torch.load("m.pt")
assert list(sd.keys()) == list(model.state_dict().keys())
print("done")
