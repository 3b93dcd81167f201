# A word-level language model the way PyTorch's word_language_model example writes it: Embedding -> 2-layer LSTM
# with dropout -> Linear, batchify, truncated BPTT with repackage_hidden, clip_grad_norm_, plain SGD on the raw
# parameters. The corpus is synthetic and deterministic: a Markov chain over 40 words in which each word has three
# likely successors, so a model that learns the structure beats the unigram baseline by far.
import math
import time

import numpy as np

import cltorch as torch
import cltorch.nn as nn

torch.manual_seed(0)
device = torch.device("cl" if torch.cl.is_available() else "cpu")

NTOKENS = 40
rng = np.random.default_rng(0)
successors = np.stack([rng.choice(NTOKENS, 3, replace=False) for _ in range(NTOKENS)])
probs = np.array([0.6, 0.3, 0.1])


def make_corpus(n, seed):
    r = np.random.default_rng(seed)
    out = np.empty(n, dtype=np.int64)
    w = 0
    for i in range(n):
        out[i] = w
        w = successors[w, r.choice(3, p=probs)]
    return out


train_ids = torch.from_numpy(make_corpus(16000, 1))
val_ids = torch.from_numpy(make_corpus(3000, 2))
counts = np.bincount(train_ids.numpy(), minlength=NTOKENS) + 1
unigram = counts / counts.sum()
val_np = val_ids.numpy()
unigram_ppl = math.exp(-np.mean(np.log(unigram[val_np])))


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    data = data.view(bsz, -1).t().contiguous()
    return data.to(device)


bptt = 20
train_data = batchify(train_ids, 20)
val_data = batchify(val_ids, 10)


def get_batch(source, i):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].reshape(-1)
    return data, target


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.2):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nlayers, self.nhid = nlayers, nhid
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output).view(-1, self.decoder.out_features)
        return nn.functional.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


model = RNNModel(NTOKENS, 32, 64, 2).to(device)
criterion = nn.NLLLoss()


def evaluate(data_source):
    model.eval()
    total_loss = 0.0
    hidden = model.init_hidden(10)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, bptt):
            data, targets = get_batch(data_source, i)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)


lr = 20.0
t0 = time.time()
first_ppl = math.exp(evaluate(val_data))
for epoch in range(1, 16):
    model.train()
    hidden = model.init_hidden(20)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
        data, targets = get_batch(train_data, i)
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
    val_ppl = math.exp(evaluate(val_data))
    print(f"epoch {epoch}: valid ppl {val_ppl:.2f} (unigram {unigram_ppl:.2f}, untrained {first_ppl:.2f}, "
          f"{time.time() - t0:.1f} s)")
    if val_ppl < 0.3 * unigram_ppl:
        break

assert first_ppl > 0.8 * unigram_ppl, (first_ppl, unigram_ppl)
assert val_ppl < 0.3 * unigram_ppl, f"valid perplexity {val_ppl:.2f} not well below the unigram's {unigram_ppl:.2f}"
