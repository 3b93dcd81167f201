"""A small decoder-only transformer on the text of Python's own documentation (``pydoc_data.topics``, real
English prose shipped with CPython), at the character level.

Token Embedding plus learned positions; pre-norm blocks of LayerNorm, causal ``F.scaled_dot_product_attention``
and a GELU MLP; weight tying. AdamW with param groups (no weight decay on norms, biases and embeddings),
linear warmup then cosine decay, ``clip_grad_norm_``. Prints the unigram, bigram and trigram baselines of the
same 90/10 split, train and validation loss, and a generated sample.

    python examples/train_charlm.py --device cl --epochs 1 --seed 0 [--time-limit 300]
"""
import argparse
import math
import time

import numpy as np

import cltorch as torch
import cltorch.nn as nn
import cltorch.nn.functional as F


def load_text():
    """The documentation topics as one string (sorted by topic name, so the order is fixed)."""
    from pydoc_data.topics import topics
    return "\n\n".join(topics[k] for k in sorted(topics))


def ngram_baselines(train, val, vocab):
    """Cross-entropy (nats/char) on ``val`` of add-k smoothed unigram, bigram and trigram models fit on ``train``
    (k chosen from {1, 0.1, 0.01, 0.001} on the validation text, which only flatters the baselines)."""
    V = len(vocab)
    t = np.asarray(train, dtype=np.int64)
    v = np.asarray(val, dtype=np.int64)
    uni = np.bincount(t, minlength=V).astype(np.float64)
    out = {}
    best = min((-(np.log((uni[v] + k) / (uni.sum() + k * V))).mean()) for k in (1, 0.1, 0.01, 0.001))
    out["unigram"] = best
    big = np.zeros((V, V))
    np.add.at(big, (t[:-1], t[1:]), 1)
    rows = big.sum(1)
    out["bigram"] = min(-(np.log((big[v[:-1], v[1:]] + k) / (rows[v[:-1]] + k * V))).mean()
                        for k in (1, 0.1, 0.01, 0.001))
    tri = {}
    keys = t[:-2] * V + t[1:-1]
    idx = keys * V + t[2:]
    cnt_tri = np.unique(idx, return_counts=True)
    cnt_ctx = np.unique(keys, return_counts=True)
    tri_map = dict(zip(cnt_tri[0].tolist(), cnt_tri[1].tolist()))
    ctx_map = dict(zip(cnt_ctx[0].tolist(), cnt_ctx[1].tolist()))
    vk = (v[:-2] * V + v[1:-1]).tolist()
    vi = ((v[:-2] * V + v[1:-1]) * V + v[2:]).tolist()
    tc = np.array([tri_map.get(i, 0) for i in vi], dtype=np.float64)
    cc = np.array([ctx_map.get(k, 0) for k in vk], dtype=np.float64)
    out["trigram"] = min(-(np.log((tc + k) / (cc + k * V))).mean() for k in (1, 0.1, 0.01, 0.001))
    del tri
    return out


class Block(nn.Module):
    def __init__(self, d, heads, dropout):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))  # GPT-2
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).reshape(B, T, C)
        x = x + self.drop(self.proj(y))
        return x + self.drop(self.mlp(self.ln2(x)))


class CharTransformer(nn.Module):
    """(B, T) token ids -> (B, T, vocab) logits; the output layer shares the embedding matrix."""

    def __init__(self, vocab, d=128, heads=4, layers=3, block=128, dropout=0.0):
        super().__init__()
        self.block = block
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(block, d)
        self.blocks = nn.ModuleList([Block(d, heads, dropout) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight  # weight tying
        self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, 0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, 0.0, 0.02)

    def forward(self, idx):
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


def param_groups(model, weight_decay):
    """Weight decay on the matrices of Linear layers only; none on norms, biases and embeddings."""
    decay, no_decay = [], []
    seen = set()
    for mod_name, mod in model.named_modules():
        for name, p in mod.named_parameters(recurse=False):
            if id(p) in seen:
                continue
            seen.add(id(p))
            (decay if isinstance(mod, nn.Linear) and name == "weight" and mod is not model.head else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def batches(data, block, batch, gen, device):
    """Random (input, target) windows of ``block`` characters, drawn with the cltorch generator."""
    starts = torch.randint(0, len(data) - block - 1, (batch,), generator=gen).numpy()
    x = np.stack([data[s:s + block] for s in starts])
    y = np.stack([data[s + 1:s + 1 + block] for s in starts])
    return torch.from_numpy(x).to(device), torch.from_numpy(y).to(device)


@torch.no_grad()
def estimate_loss(model, data, block, batch, iters, device, seed):
    model.eval()
    g = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(iters):
        x, y = batches(data, block, batch, g, device)
        logits = model(x)
        losses.append(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item())
    model.train()
    return float(np.mean(losses))


@torch.no_grad()
def generate(model, start, n, device, gen, temperature=0.8):
    model.eval()
    idx = torch.tensor([start], device=device)
    for _ in range(n):
        logits = model(idx[:, -model.block:])[:, -1, :] / temperature
        probs = F.softmax(logits, dim=-1)
        nxt = torch.multinomial(probs, 1, generator=gen)
        idx = torch.cat([idx, nxt], dim=1)
    return idx[0].tolist()


def main(argv=None):
    ap = argparse.ArgumentParser(description="Train a character-level transformer on Python's documentation.")
    ap.add_argument("--device", default="cl")
    ap.add_argument("--epochs", type=float, default=4.0, help="passes over the training text (in windows)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--max-steps", type=int, default=None)
    ap.add_argument("--time-limit", type=float, default=280.0, help="stop training after this many seconds")
    ap.add_argument("--eval-every", type=int, default=200)
    ap.add_argument("--sample-chars", type=int, default=200)
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    text = load_text()
    vocab = sorted(set(text))
    stoi = {c: i for i, c in enumerate(vocab)}
    data = np.array([stoi[c] for c in text], dtype=np.int64)
    n = int(0.9 * len(data))
    train, val = data[:n], data[n:]
    base = ngram_baselines(train, val, vocab)
    print(f"{len(text):,} characters, vocabulary {len(vocab)}; split 90/10")
    print("baselines on the validation split (nats/char): " +
          ", ".join(f"{k} {v:.3f}" for k, v in base.items()))
    print(f"target: validation loss below bigram - 0.3 = {base['bigram'] - 0.3:.3f}")

    model = CharTransformer(len(vocab), args.d_model, args.heads, args.layers, args.block).to(device)
    opt = torch.optim.AdamW(param_groups(model, 0.1), lr=args.lr, betas=(0.9, 0.99))
    steps = args.max_steps or max(1, int(args.epochs * len(train) / (args.batch_size * args.block)))

    plan = {"steps": steps}   # shortened once the step time is known, so the cosine ends within --time-limit

    def lr_lambda(s):
        if s < args.warmup:
            return (s + 1) / args.warmup
        p = min(1.0, (s - args.warmup) / max(1, plan["steps"] - args.warmup))
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
    gen = torch.Generator().manual_seed(args.seed)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"model: {nparams:,} parameters, {args.layers} layers, d={args.d_model}, block {args.block}; "
          f"{steps} steps planned, time limit {args.time_limit:.0f} s")
    try:
        from tqdm import tqdm
        bar = None if args.no_progress else tqdm(total=steps, desc="train", leave=False)
    except ImportError:
        bar = None
    train_start = time.perf_counter()
    val_loss = float("nan")
    step = 0
    for step in range(1, steps + 1):
        x, y = batches(train, args.block, args.batch_size, gen, device)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if bar is not None:
            bar.update(1)
        if step == 1:
            print(f"first step {time.perf_counter() - t0:.1f} s after start, loss {loss.item():.3f}")
            train_start = time.perf_counter()   # the first step pays for kernel builds: time from the second
        if step == 11:
            per_step = (time.perf_counter() - train_start) / 10
            fit = int(args.time_limit / per_step * 0.95)
            if fit < plan["steps"]:
                plan["steps"] = max(fit, args.warmup + 1)
                print(f"{per_step * 1e3:.0f} ms/step: the schedule is shortened to {plan['steps']} steps to end "
                      f"within {args.time_limit:.0f} s")
        if step % args.eval_every == 0:
            val_loss = estimate_loss(model, val, args.block, args.batch_size, 4, device, 1)
            msg = f"step {step}: train loss {loss.item():.3f}, val loss {val_loss:.3f}, " \
                  f"{(time.perf_counter() - train_start) / step * 1e3:.0f} ms/step"
            (bar.write(msg) if bar is not None else print(msg))
        if time.perf_counter() - train_start > args.time_limit or step >= plan["steps"]:
            break
    if bar is not None:
        bar.close()
    train_loss = estimate_loss(model, train, args.block, args.batch_size, 8, device, 2)
    val_loss = estimate_loss(model, val, args.block, args.batch_size, 8, device, 3)
    elapsed = time.perf_counter() - train_start
    print(f"after {step} steps ({elapsed:.0f} s, {elapsed / step * 1e3:.0f} ms/step): train loss {train_loss:.3f}, "
          f"val loss {val_loss:.3f} (bigram {base['bigram']:.3f}, trigram {base['trigram']:.3f})")
    verdict = "beats" if val_loss < base["bigram"] - 0.3 else "does not beat"
    print(f"validation loss {verdict} the bigram baseline minus 0.3 nats ({base['bigram'] - 0.3:.3f})")
    if args.sample_chars:
        out = generate(model, [stoi[c] for c in "The "], args.sample_chars, device, gen)
        print("sample:\n" + "".join(vocab[i] for i in out))
    return val_loss, base


if __name__ == "__main__":
    main()
