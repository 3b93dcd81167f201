"""``cltorch.nn.utils.rnn``: packed sequences for the recurrent layers, as ``torch.nn.utils.rnn``.

A :class:`PackedSequence` holds a batch of variable-length sequences time-major without padding: ``data`` has
``sum(lengths)`` rows, the ``batch_sizes[t]`` rows of step t (the sequences longer than t, longest first) one after
another. ``batch_sizes`` is a cpu int64 tensor; ``sorted_indices`` maps the packed batch order to the caller's
(None when the input was already sorted by decreasing length), ``unsorted_indices`` is its inverse.

Packing and padding are one ``index_select`` each (row indices worked out on the host from the lengths), so they
are differentiable in the data and cost one launch whatever the number of steps.
"""
from collections import namedtuple

import numpy as np

import cltorch as torch

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence",
           "unpad_sequence", "pack_sequence", "unpack_sequence"]

_Fields = namedtuple("PackedSequence_", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])


def invert_permutation(permutation):
    """The inverse of a 1-D permutation tensor (``out[permutation[i]] = i``); None gives None."""
    if permutation is None:
        return None
    return permutation.argsort()


class PackedSequence(_Fields):
    """A packed batch of sequences (see the module docstring). Build it with :func:`pack_padded_sequence` or
    :func:`pack_sequence`; ``data`` moves with ``.to()`` (batch_sizes stays on the cpu, as in PyTorch)."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:
            raise ValueError("PackedSequence needs batch_sizes (build it with pack_padded_sequence or pack_sequence)")
        if not isinstance(batch_sizes, torch.Tensor):
            batch_sizes = torch.as_tensor(batch_sizes, dtype=torch.int64)
        if batch_sizes.device.type != "cpu" or batch_sizes.dim() != 1:
            raise ValueError(f"batch_sizes should be a 1-D cpu int64 tensor, got shape {list(batch_sizes.shape)} on "
                             f"{batch_sizes.device}")
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        """A PackedSequence with ``data.to(*args, **kwargs)`` (indices follow data's device)."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        dev = data.device
        si = None if self.sorted_indices is None else self.sorted_indices.to(dev)
        ui = None if self.unsorted_indices is None else self.unsorted_indices.to(dev)
        return type(self)(data, self.batch_sizes, si, ui)

    def cpu(self):
        return self.to("cpu")

    def double(self):
        return self.to(dtype=torch.float64)

    def float(self):
        return self.to(dtype=torch.float32)

    def half(self):
        return self.to(dtype=torch.float16)

    def long(self):
        return self.to(dtype=torch.int64)

    def int(self):
        return self.to(dtype=torch.int32)

    def short(self):
        return self.to(dtype=torch.int16)

    def char(self):
        return self.to(dtype=torch.int8)

    def byte(self):
        return self.to(dtype=torch.uint8)

    @property
    def is_cuda(self):
        return self.data.is_cuda

    def is_pinned(self):
        return self.data.is_pinned()


def _lengths_list(lengths):
    if isinstance(lengths, torch.Tensor):
        if lengths.dim() != 1:
            raise RuntimeError(f"'lengths' argument should be a 1D tensor, got {lengths.dim()}D")
        return [int(v) for v in lengths.tolist()]
    return [int(v) for v in lengths]


def _batch_sizes(lengths):
    """PyTorch's batch_sizes for lengths sorted in decreasing order: ``bs[t] = #{lengths > t}``."""
    ln = np.asarray(lengths, dtype=np.int64)
    return (ln[None, :] > np.arange(int(ln[0]))[:, None]).sum(1)


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):  # noqa: A002
    """Packs a padded batch: input (T, B, *) (or (B, T, *) with batch_first) and the B lengths (a list or a 1-D
    cpu int64 tensor). With ``enforce_sorted=True`` lengths must be non-increasing (RuntimeError otherwise); with
    False the batch is sorted here and the permutation kept in ``sorted_indices``. Lengths must be in
    ``1..T`` (RuntimeError). Returns a :class:`PackedSequence`."""
    ln = _lengths_list(lengths)
    T = input.shape[1] if batch_first else input.shape[0]
    B = input.shape[0] if batch_first else input.shape[1]
    if len(ln) != B:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {len(ln)} (batch_size={B})")
    if any(v <= 0 for v in ln):
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' that is "
                           "<= 0")
    if max(ln) > T:
        raise RuntimeError(f"Expected sequence length to be at most {T} (the padded length), got {max(ln)}")
    if enforce_sorted:
        if any(a < b for a, b in zip(ln, ln[1:])):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You "
                               "can pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep "
                               "this requirement if you do not need ONNX exportability.")
        order = np.arange(B)
        sorted_indices = None
    else:
        order = np.argsort(-np.asarray(ln, dtype=np.int64), kind="stable")
        sorted_indices = torch.as_tensor(order.astype(np.int64)).to(input.device)
    sl = [ln[i] for i in order]
    bs = _batch_sizes(sl)
    # row t*B + order[b] of the time-major padded input, for b < bs[t]
    rows = np.concatenate([t * B + order[:b] for t, b in enumerate(bs)]).astype(np.int64)
    x = input.transpose(0, 1) if batch_first else input
    flat = x.reshape(T * B, *x.shape[2:])
    data = torch.index_select(flat, 0, torch.as_tensor(rows).to(input.device))
    return PackedSequence(data, torch.as_tensor(bs.astype(np.int64)), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """Inverse of :func:`pack_padded_sequence`: returns (padded (T, B, *) or (B, T, *), lengths (B,) cpu int64),
    batch in the caller's original order. ``total_length`` pads to that many steps (ValueError if it is less
    than the longest sequence)."""
    data, bs_t, _, unsorted = sequence
    bs = np.asarray(bs_t.tolist(), dtype=np.int64)
    T, B = len(bs), int(bs[0]) if len(bs) else 0
    if total_length is not None:
        if total_length < T:
            raise ValueError("Expected total_length to be at least the length of the longest sequence in input, but "
                             f"got total_length={total_length} and max sequence length being {T}")
        T_out = int(total_length)
    else:
        T_out = T
    n = data.shape[0]
    # padded row (t, b) reads packed row offs[t] + b, or the padding row n
    idx = np.full((T_out, B), n, dtype=np.int64)
    off = 0
    for t, b in enumerate(bs):
        idx[t, :b] = off + np.arange(b)
        off += b
    pad = torch.full((1, *data.shape[1:]), padding_value, dtype=data.dtype, device=data.device)
    ext = torch.cat([data, pad], 0)
    out = torch.index_select(ext, 0, torch.as_tensor(idx.reshape(-1)).to(data.device))
    out = out.reshape(T_out, B, *data.shape[1:])
    lengths = (bs[None, :] > np.arange(B)[:, None]).sum(1) if B else np.zeros(0, np.int64)
    lengths = torch.as_tensor(lengths.astype(np.int64))
    if unsorted is not None:
        out = torch.index_select(out, 1, unsorted)
        lengths = lengths[unsorted.cpu()]
    if batch_first:
        out = out.transpose(0, 1)
    return out, lengths


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Pads a list of (L_i, *) tensors to (max L, B, *) (or (B, max L, *) with batch_first) with
    ``padding_value``, on the ``padding_side`` ("right" or "left"; ValueError otherwise)."""
    if padding_side not in ("right", "left"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    if isinstance(sequences, torch.Tensor):
        sequences = sequences.unbind(0)
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    L = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        k = L - s.shape[0]
        if k:
            p = torch.full((k, *s.shape[1:]), padding_value, dtype=s.dtype, device=s.device)
            s = torch.cat([s, p] if padding_side == "right" else [p, s], 0)
        padded.append(s)
    return torch.stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of the B unpadded sequences of a padded (T, B, *) (or (B, T, *)) batch, given their lengths."""
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [x[i, :n] for i, n in enumerate(_lengths_list(lengths))]


def pack_sequence(sequences, enforce_sorted=True):
    """Packs a list of (L_i, *) tensors (``pad_sequence`` then ``pack_padded_sequence``)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences):
    """The list of sequences in a PackedSequence, in their original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
