# A small Vision Transformer the way public ViT-for-CIFAR scripts write it (vit-pytorch style): a strided conv
# cuts 32x32x3 images into 4x4 patches, a class token and learned position embeddings are added, then pre-norm
# blocks of multi-head self-attention (one qkv Linear, reshape/permute into heads, softmax(q k^T / sqrt(d)) v)
# and a GELU MLP; the class token's LayerNorm'd output feeds a Linear head. Patch 4, dim 64, depth 6, 4 heads,
# 10 classes, AdamW with weight decay and gradient clipping, random images. With PyTorch installed, torch's
# model is given the same initial weights (through numpy) and trained on the same batches: every step's loss
# must agree to float32 tolerance.
import math

import numpy as np

import cltorch as torch
import cltorch.nn as nn
import cltorch.nn.functional as F

STEPS = 5


def build(nn, F, torch):
    class Attention(nn.Module):
        def __init__(self, dim, heads):
            super().__init__()
            self.heads = heads
            self.scale = (dim // heads) ** -0.5
            self.qkv = nn.Linear(dim, dim * 3, bias=False)
            self.proj = nn.Linear(dim, dim)

        def forward(self, x):
            B, N, C = x.shape
            qkv = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            attn = (q @ k.transpose(-2, -1)) * self.scale
            attn = attn.softmax(dim=-1)
            out = (attn @ v).transpose(1, 2).reshape(B, N, C)
            return self.proj(out)

    class Block(nn.Module):
        def __init__(self, dim, heads, mlp_ratio=2):
            super().__init__()
            self.norm1 = nn.LayerNorm(dim)
            self.attn = Attention(dim, heads)
            self.norm2 = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, dim * mlp_ratio), nn.GELU(), nn.Linear(dim * mlp_ratio, dim))

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            x = x + self.mlp(self.norm2(x))
            return x

    class ViT(nn.Module):
        def __init__(self, image_size=32, patch=4, dim=64, depth=6, heads=4, num_classes=10):
            super().__init__()
            n = (image_size // patch) ** 2
            self.patch_embed = nn.Conv2d(3, dim, kernel_size=patch, stride=patch)
            self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
            self.pos_embed = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
            self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(depth)])
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, num_classes)

        def forward(self, img):
            x = self.patch_embed(img).flatten(2).transpose(1, 2)          # (B, N, dim)
            cls = self.cls_token.expand(x.shape[0], -1, -1)
            x = torch.cat((cls, x), dim=1) + self.pos_embed
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.norm(x)[:, 0])

    return ViT()


rng = np.random.default_rng(0)
batches = [(rng.standard_normal((16, 3, 32, 32)).astype(np.float32), rng.integers(0, 10, 16).astype(np.int64))
           for _ in range(STEPS)]

torch.manual_seed(0)
device = torch.device("cl" if torch.cl.is_available() else "cpu")
model = build(nn, F, torch).to(device)
init_state = {k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()}
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
criterion = nn.CrossEntropyLoss()

losses = []
for xb, yb in batches:
    x, y = torch.from_numpy(xb).to(device), torch.from_numpy(yb).to(device)
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    losses.append(loss.item())
print("cltorch losses:", " ".join(f"{v:.6f}" for v in losses))
assert all(math.isfinite(v) for v in losses), losses
assert abs(losses[0] - math.log(10)) < 0.5, losses[0]      # near-uniform predictions from a fresh init

try:
    import torch as real_torch
except ImportError:
    real_torch = None

if real_torch is not None:
    real_torch.manual_seed(1)                  # any seed: every weight is overwritten below
    ref = build(real_torch.nn, real_torch.nn.functional, real_torch)
    ref.load_state_dict({k: real_torch.from_numpy(v) for k, v in init_state.items()})
    ropt = real_torch.optim.AdamW(ref.parameters(), lr=1e-3, weight_decay=0.05)
    ref_losses = []
    for xb, yb in batches:
        ropt.zero_grad()
        loss = real_torch.nn.CrossEntropyLoss()(ref(real_torch.from_numpy(xb)), real_torch.from_numpy(yb))
        loss.backward()
        real_torch.nn.utils.clip_grad_norm_(ref.parameters(), 1.0)
        ropt.step()
        ref_losses.append(loss.item())
    print("torch losses:  ", " ".join(f"{v:.6f}" for v in ref_losses))
    np.testing.assert_allclose(losses, ref_losses, rtol=2e-4, atol=1e-5)
    # and the weights after the last step. Adam moves an element whose gradient is rounding noise by about lr
    # either way, so a few such elements may differ by up to lr; all others must agree closely.
    for k, v in ref.state_dict().items():
        ours, want = model.state_dict()[k].cpu().numpy(), v.numpy()
        off = ~np.isclose(ours, want, rtol=1e-3, atol=2e-5)
        assert off.mean() <= 1e-3, f"{k}: {off.sum()} of {off.size} elements differ from torch"
        np.testing.assert_allclose(ours, want, rtol=0, atol=1e-3, err_msg=k)
    print("losses and final weights match torch")
