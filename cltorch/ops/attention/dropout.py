"""Dropout inside the fused attention kernels: the Philox4x32-10 counters of one call, drawn from the default
generator (``cltorch.ops.random``), and the same keep mask rebuilt on the host for the composed double backward.

Each attention weight (bh, i, j) takes word ``(bh * L + i) * S4 + j`` of the stream (S4 = S rounded up to 4):
block ``ctr0 + word // 4``, key from the seed; it is kept (and scaled by 1 / (1 - p)) when the word is at least
ceil(p * 2^32). Both fused designs (CPU and flash) read the same words, so a seed gives the same mask on every
device and design; the generator's offset advances by the blocks used.
"""
import math

import numpy as np

__all__ = ["setup_dropout", "drop_types", "drop_args", "keep_tensor"]


def setup_dropout(cfg, p):
    """Draw this call's Philox counters (one block of four words per four attention weights of each padded row)
    and record them in ``cfg`` (``dropout``, ``drop_args``, ``drop_seed``)."""
    from .. import random as R
    from .. import _philox_ref as REF
    sp4 = (cfg.S + 3) // 4 * 4
    nblocks = cfg.B0 * cfg.H * cfg.L * sp4 // 4
    g = R.default_generator
    seed = g._seed
    ctr0 = g._take(nblocks)
    k0, k1 = REF.key_from_seed(seed)
    thr = int(math.ceil(p * 2.0 ** 32))
    cfg.dropout = float(p)
    cfg.drop_args = (int(k0), int(k1), int(ctr0), thr, 1.0 / (1.0 - p), sp4)
    cfg.drop_seed = seed


def drop_types(np_ct, cfg):
    """The kernels' dropout argument types (none without dropout)."""
    return [np.uint32, np.uint32, np.uint64, np.uint32, np_ct, np.int64] if cfg.dropout is not None else []


def drop_args(np_ct, cfg):
    """The kernels' dropout arguments: key, first counter, threshold, scale, padded row length."""
    if cfg.dropout is None:
        return []
    k0, k1, ctr0, thr, pscale, sp4 = cfg.drop_args
    return [np.uint32(k0), np.uint32(k1), np.uint64(ctr0), np.uint32(thr), np_ct(pscale), np.int64(sp4)]


def keep_tensor(cfg, like):
    """The fused kernels' dropout multipliers (keep / (1 - p), or 0) as a (..., L, S) tensor, recomputed on the
    host from the same Philox words (cltorch.ops._philox_ref); used by the composed double backward."""
    from .. import _philox_ref as REF
    from ..creation import tensor
    k0, k1, ctr0, thr, pscale, sp4 = cfg.drop_args
    BH = cfg.B0 * cfg.H
    words = REF.random_words(cfg.drop_seed, ctr0, BH * cfg.L * sp4 // 4).reshape(BH, cfg.L, sp4)[:, :, :cfg.S]
    keep = np.where(words >= np.uint32(thr), pscale, 0.0).reshape(tuple(cfg.qbatch) + (cfg.L, cfg.S))
    return tensor(keep, dtype=like.dtype, device=like.device)
