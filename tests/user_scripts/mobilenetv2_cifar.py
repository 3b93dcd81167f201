# MobileNetV2 the way torchvision's mobilenet_v2 and the CIFAR training repos write it: a stem conv, then
# inverted residual blocks (1x1 expansion conv -> 3x3 depthwise conv with groups=C -> 1x1 linear projection,
# each conv followed by BatchNorm, ReLU6 after the first two; a skip connection when stride is 1 and the channels
# match), a 1x1 conv to the last channels, global average pooling, dropout and a Linear classifier. Width 0.35
# (channels rounded to multiples of 8), CIFAR strides (the stem and the second stage keep stride 1), batch 16 of
# random 32x32 images, SGD with momentum and weight decay, Kaiming init as torchvision does. With PyTorch
# installed, torch's model starts from the same weights (through numpy) and trains on the same batches, in
# float32 and in float64. The first loss must agree to float32 rounding. After that, this model is chaotic at
# float32 (BatchNorm over 4x4 maps of a batch of 16, with channels that ReLU6 nearly silences, amplifies rounding:
# torch's own float32 losses leave its float64 ones by ~1% within four steps), so the later losses, the BatchNorm
# running statistics and the eval-mode outputs must stay as close to torch's float64 run as torch's float32 run
# does (within 4x its distance).
import math

import numpy as np

import cltorch as torch
import cltorch.nn as nn

STEPS = 3


def _make_divisible(v, divisor=8, min_value=None):
    min_value = min_value or divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


def build(nn, width_mult=0.35, num_classes=10):
    class ConvBNReLU(nn.Sequential):
        def __init__(self, in_planes, out_planes, kernel_size=3, stride=1, groups=1):
            padding = (kernel_size - 1) // 2
            super().__init__(
                nn.Conv2d(in_planes, out_planes, kernel_size, stride, padding, groups=groups, bias=False),
                nn.BatchNorm2d(out_planes),
                nn.ReLU6(inplace=True),
            )

    class InvertedResidual(nn.Module):
        def __init__(self, inp, oup, stride, expand_ratio):
            super().__init__()
            hidden_dim = int(round(inp * expand_ratio))
            self.use_res_connect = stride == 1 and inp == oup
            layers = []
            if expand_ratio != 1:
                layers.append(ConvBNReLU(inp, hidden_dim, kernel_size=1))
            layers.extend([
                ConvBNReLU(hidden_dim, hidden_dim, stride=stride, groups=hidden_dim),      # depthwise
                nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False),
                nn.BatchNorm2d(oup),
            ])
            self.conv = nn.Sequential(*layers)

        def forward(self, x):
            if self.use_res_connect:
                return x + self.conv(x)
            return self.conv(x)

    class MobileNetV2(nn.Module):
        def __init__(self):
            super().__init__()
            input_channel = _make_divisible(32 * width_mult)
            self.last_channel = _make_divisible(1280 * max(1.0, width_mult))
            # t, c, n, s  (CIFAR variant: stride 1 in the stem and the second stage)
            settings = [[1, 16, 1, 1], [6, 24, 2, 1], [6, 32, 3, 2], [6, 64, 4, 2], [6, 96, 3, 1],
                        [6, 160, 3, 2], [6, 320, 1, 1]]
            features = [ConvBNReLU(3, input_channel, stride=1)]
            for t, c, n, s in settings:
                output_channel = _make_divisible(c * width_mult)
                for i in range(n):
                    features.append(InvertedResidual(input_channel, output_channel, s if i == 0 else 1, t))
                    input_channel = output_channel
            features.append(ConvBNReLU(input_channel, self.last_channel, kernel_size=1))
            self.features = nn.Sequential(*features)
            self.classifier = nn.Sequential(nn.Dropout(0.0), nn.Linear(self.last_channel, num_classes))
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out")
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.ones_(m.weight)
                    nn.init.zeros_(m.bias)
                elif isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, 0, 0.01)
                    nn.init.zeros_(m.bias)

        def forward(self, x):
            x = self.features(x)
            x = nn.functional.adaptive_avg_pool2d(x, (1, 1)).reshape(x.shape[0], -1)
            return self.classifier(x)

    return MobileNetV2()


rng = np.random.default_rng(0)
batches = [(rng.standard_normal((16, 3, 32, 32)).astype(np.float32), rng.integers(0, 10, 16).astype(np.int64))
           for _ in range(STEPS)]

torch.manual_seed(0)
device = torch.device("cl" if torch.cl.is_available() else "cpu")
model = build(nn).to(device)
n_depthwise = sum(1 for m in model.modules() if isinstance(m, nn.Conv2d) and m.groups > 1)
assert n_depthwise == 17, n_depthwise
init_state = {k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()}
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=4e-5)
criterion = nn.CrossEntropyLoss()

model.train()
losses = []
for xb, yb in batches:
    x, y = torch.from_numpy(xb).to(device), torch.from_numpy(yb).to(device)
    optimizer.zero_grad()
    output = model(x)
    loss = criterion(output, y)
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
print("cltorch losses:", " ".join(f"{v:.6f}" for v in losses))
assert all(math.isfinite(v) for v in losses), losses
model.eval()
with torch.no_grad():
    eval_out = model(torch.from_numpy(batches[0][0]).to(device)).cpu().numpy()

try:
    import torch as real_torch
except ImportError:
    real_torch = None


def run_torch(dtype):
    ref = build(real_torch.nn)
    ref.load_state_dict({k: real_torch.from_numpy(v) for k, v in init_state.items()})
    ref = ref.to(dtype)
    ropt = real_torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9, weight_decay=4e-5)
    ref.train()
    out = []
    for xb, yb in batches:
        ropt.zero_grad()
        loss = real_torch.nn.CrossEntropyLoss()(ref(real_torch.from_numpy(xb).to(dtype)), real_torch.from_numpy(yb))
        loss.backward()
        ropt.step()
        out.append(loss.item())
    ref.eval()
    with real_torch.no_grad():
        ev = ref(real_torch.from_numpy(batches[0][0]).to(dtype)).double().numpy()
    return np.array(out), {k: v.double().numpy() for k, v in ref.state_dict().items()}, ev


def as_close_as_torch(name, ours, t32, t64, floor, atol=1e-6):
    """ours's distance from the float64 run <= 4x torch float32's distance (plus a float32-rounding floor)."""
    ours, t32, t64 = (np.asarray(a, dtype=np.float64) for a in (ours, t32, t64))
    d_ours, d_t32 = np.abs(ours - t64).max(), np.abs(t32 - t64).max()
    scale = np.abs(t64).max()
    assert d_ours <= 4 * d_t32 + floor * scale + atol, (f"{name}: cltorch is {d_ours:.3g} from torch's float64 run, torch's "
                                                 f"float32 run {d_t32:.3g} (scale {scale:.3g})")
    return d_ours, d_t32


if real_torch is not None:
    l32, s32, e32 = run_torch(real_torch.float32)
    l64, s64, e64 = run_torch(real_torch.float64)
    print("torch float32: ", " ".join(f"{v:.6f}" for v in l32))
    print("torch float64: ", " ".join(f"{v:.6f}" for v in l64))
    assert abs(losses[0] - l32[0]) <= 1e-5 * abs(l32[0]), (losses[0], l32[0])
    print("loss distance from float64 (cltorch, torch f32): %.3g %.3g" % as_close_as_torch("losses", losses, l32, l64, 1e-5))
    ours = {k: v.cpu().numpy() for k, v in model.state_dict().items()}
    for k in s64:
        if "running" in k:     # BatchNorm statistics updated in train mode
            as_close_as_torch(k, ours[k], s32[k], s64[k], 1e-5)
        elif k.endswith("num_batches_tracked"):
            assert int(ours[k]) == int(s32[k]) == STEPS, (k, ours[k], s32[k])
    print("eval output distance from float64 (cltorch, torch f32): %.3g %.3g"
          % as_close_as_torch("eval-mode outputs", eval_out, e32, e64, 1e-5))
    print("losses, BatchNorm statistics and eval-mode outputs are as close to torch float64 as torch float32 is")

    # The first step is not chaotic yet: the features (train mode, batch statistics) and every parameter's gradient
    # from the initial weights, against torch float64, as close as torch float32 comes.
    # ReLU6's gradient mask is discrete: a pre-activation within rounding distance of 0 or 6 takes either branch
    # in float32 (torch's own float32 run flips a few of them against its float64 run, and which ones depends
    # on every rounding upstream), and one flipped element moves every gradient below it by ~0.1-1%. So torch's
    # runs take cltorch's branches: each ReLU6 passes the gradient exactly where cltorch's did (its values differ
    # from the clamp only at those elements, by less than the rounding that flipped them).
    masks = {}

    def first_step(lib, dtype=None):
        m = build(lib.nn)
        m.load_state_dict({k: lib.from_numpy(v.copy()) for k, v in init_state.items()})
        for name, mod in m.named_modules():
            if isinstance(mod, lib.nn.ReLU6):
                if lib is torch:
                    mod.register_forward_hook(lambda mo, i, o, n=name: masks.__setitem__(
                        n, ((o > 0) & (o < 6)).cpu().numpy()))
                else:
                    mod.inplace = False
                    mod.register_forward_hook(lambda mo, i, o, n=name: real_torch.where(
                        real_torch.from_numpy(masks[n]), i[0], o.detach()))
        x = lib.from_numpy(batches[0][0])
        if lib is torch:
            m, x = m.to(device), x.to(device)
        else:
            m, x = m.to(dtype), x.to(dtype)
        m.train()
        feats = m.features(x)
        out = m.classifier(nn.functional.adaptive_avg_pool2d(feats, 1).flatten(1) if lib is torch else
                           real_torch.nn.functional.adaptive_avg_pool2d(feats, 1).flatten(1))
        lib.nn.functional.cross_entropy(out, lib.from_numpy(batches[0][1]).to(x.device)).backward()
        f = feats.detach().cpu().double().numpy() if lib is torch else feats.detach().double().numpy()
        return f, {k: p.grad.cpu().double().numpy() if lib is torch else p.grad.double().numpy()
                   for k, p in m.named_parameters()}
    f_ours, g_ours = first_step(torch)
    f32, g32 = first_step(real_torch, real_torch.float32)
    f64, g64 = first_step(real_torch, real_torch.float64)
    print("features distance from float64 (cltorch, torch f32): %.3g %.3g"
          % as_close_as_torch("features", f_ours, f32, f64, 1e-6))
    worst = max(as_close_as_torch(k + ".grad", g_ours[k], g32[k], g64[k], 1e-5)[0] / (np.abs(g64[k]).max() + 1e-30)
                for k in g64 if not k.endswith(".bias") or "classifier" in k)   # BN biases' gradients are ~0
    print(f"first-step gradients as close to torch float64 as torch float32's (worst relative {worst:.3g})")
