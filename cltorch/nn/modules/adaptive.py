"""``AdaptiveLogSoftmaxWithLoss`` (Grave et al., "Efficient softmax approximation for GPUs"), PyTorch's
``torch.nn.modules.adaptive``: a head Linear over the shortlist classes plus one entry per tail cluster, and per
cluster a two-Linear projection (``in -> in // div_value**(i+1) -> cluster size``). Same submodules, state-dict
keys and initialisation as PyTorch's."""
from collections import namedtuple

import numpy as np

import cltorch as torch
from .. import functional as F
from .container import ModuleList, Sequential
from .linear import Linear
from .module import Module

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """``AdaptiveLogSoftmaxWithLoss(in_features, n_classes, cutoffs, div_value=4.0, head_bias=False, device=None,
    dtype=None)``.

    ``forward(input, target)``: input (N, in_features) with target (N,) int64, or (in_features,) with a 0-d
    target; returns ``(output, loss)``: the target log-probabilities (N,) (or 0-d) and their negated mean.
    ``log_prob(input)`` (N, n_classes) and ``predict(input)`` (N,) as PyTorch. Raises ValueError for bad cutoffs
    and RuntimeError for mismatched shapes or targets outside [0, n_classes - 1].
    """

    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False, device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted in an increasing "
                             "order, where each value is between 1 and n_classes-1")
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, device=device, dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(in_features // (div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hsz, bias=False, device=device, dtype=dtype),
                                        Linear(hsz, osz, bias=False, device=device, dtype=dtype)))

    def reset_parameters(self):
        self.head.reset_parameters()
        for i2h, h2o in self.tail:
            i2h.reset_parameters()
            h2o.reset_parameters()

    def forward(self, input_, target_):
        if target_.dim() == 1:
            if input_.size(0) != target_.size(0):
                raise RuntimeError("Input and target should have the same size in the batch dimension.")
            if input_.dim() != 2:
                raise RuntimeError(f"1D target tensor expects 2D input tensors, but found inputs with size "
                                   f"{input_.size()}")
        elif target_.dim() == 0:
            if input_.dim() != 1:
                raise RuntimeError(f"0D target tensor expects 1D input tensors, but found inputs with size "
                                   f"{input_.size()}")
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        batched = target_.dim() > 0
        x = input_ if batched else input_.unsqueeze(0)
        tgt = (target_ if batched else target_.unsqueeze(0)).cpu().numpy().astype(np.int64)
        if tgt.size and (tgt.min() < 0 or tgt.max() > self.n_classes - 1):
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                               f"[{tgt.min()}, {tgt.max()}] were found. ")
        # the head entry each row reads: its class in the shortlist, else its cluster's entry
        cluster = np.searchsorted(np.asarray(self.cutoffs), tgt, side="right")     # 0: shortlist, i: tail i-1
        head_idx = np.where(cluster == 0, tgt, self.shortlist_size + cluster - 1)
        head_lp = F.log_softmax(self.head(x), dim=1)
        output = head_lp.gather(1, torch.from_numpy(head_idx).to(x.device).unsqueeze(1)).squeeze(1)
        for i in range(1, self.n_clusters + 1):
            rows = np.nonzero(cluster == i)[0]
            if rows.size == 0:
                continue
            r = torch.from_numpy(rows.astype(np.int64)).to(x.device)
            rel = torch.from_numpy(tgt[rows] - self.cutoffs[i - 1]).to(x.device)
            lp = F.log_softmax(self.tail[i - 1](x.index_select(0, r)), dim=1).gather(1, rel.unsqueeze(1))
            output = output.index_add(0, r, lp.squeeze(1))
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _get_full_log_prob(self, input, head_output):  # noqa: A002
        head_lp = F.log_softmax(head_output, dim=1)
        parts = [head_lp[:, :self.shortlist_size]]
        for i in range(self.n_clusters):
            entry = head_lp[:, self.shortlist_size + i:self.shortlist_size + i + 1]
            parts.append(F.log_softmax(self.tail[i](input), dim=1) + entry)
        return torch.cat(parts, dim=1)

    def log_prob(self, input):  # noqa: A002
        """Log-probabilities of every class: input (N, in_features) -> (N, n_classes)."""
        return self._get_full_log_prob(input, self.head(input))

    def predict(self, input):  # noqa: A002
        """The most probable class of each row: input (N, in_features) -> (N,) int64."""
        head_output = self.head(input)
        output = head_output.argmax(dim=1)
        outside = (output >= self.shortlist_size).cpu().numpy()
        if not outside.any():
            return output
        rows = torch.from_numpy(np.nonzero(outside)[0].astype(np.int64)).to(input.device)
        full = self._get_full_log_prob(input.index_select(0, rows), head_output.index_select(0, rows))
        return output.index_copy(0, rows, full.argmax(dim=1))
