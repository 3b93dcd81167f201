"""The norms' GPU design (``cl_kernels/norm_team.cl.mako``): norm.cl.mako's kernels with a team of lanes per (row,
chunk) instead of one work-item, chosen by the device profile's ``[norm] design = "gpu"``.

The chunks are the CPU design's (``launch._chunks``: from the row length and the active profile's ``chunk`` and
``max_chunks``), and inside a chunk lane t holds the CPU design's stripes t S .. t S + S - 1 (S = 32 / lanes): the
designs add in the same order and give the same bits. Lanes by chunk length (the ``[norm] lanes`` rows, as
softmax's; 32 where a chunk's elements are not adjacent in groups of 8: batch_norm with H*W % 8 != 0); for rows
whose elements are adjacent (layer/rms/group norm) a lane keeps up to ``[norm] cache`` values per array in
registers, so a chunk that fits (the forward holds x, the backward g and x) is read once per kernel; batch_norm's
chunks stream (reading a chunk twice where the CPU design's kernel reads it twice too). LayerNorm rows of up to ``chunk`` elements are one chunk: one kernel forward, one
backward. Rows of several chunks (batch_norm's channels) take a first kernel for the chunks' sums and a second that
combines a row's sums in chunk order and writes its chunk.

Sources: the usual GPU layer norm (a warp or a block per row, the row kept in registers: PyTorch's and Apex's
vectorized layer_norm kernels), batch norm statistics as per-channel partial sums over (N, H, W) slices combined in
a second pass (cuDNN's and PyTorch's two-kernel batch_norm_collect_statistics).
"""
from ..softmax.common import kernel
from ..softmax.team import plan

__all__ = ["team", "STREAM_GROUPS"]

# groups of 32 a batch_norm lane streams at once (each with its own (sample, position) pair: 64 spilled registers
# in ptxas's sm_90 report of clang's PTX, 8 do not)
STREAM_GROUPS = 8


def team(rt, which, args, params, CH, flat):
    """The :class:`~cltorch.ops.softmax.team.Team` of norm_team.cl.mako's ``which`` ("part", "fwd", "bwd_part",
    "bwd") for chunks of CH elements (``params``: the template parameters norm.cl.mako's kernels take; ``flat``: a
    row's elements are adjacent, A == 1). Rows that are not flat (batch_norm) stream their chunks: a lane walks its
    elements' (sample, position) pairs, and keeping a chunk in registers would keep each element's address too."""
    arrays = 2 if which.startswith("bwd") else 1

    def build(tpr, ls, k, cached, xchg):
        return kernel(rt, "norm_team.cl.mako", "norm_team_" + which, args, TPR=tpr, LS=ls, K=k,
                      cached=cached and flat, flat=flat, xchg=xchg, which=which, **params)
    return plan(rt, "norm", CH, arrays, (which, flat, tuple(sorted(params.items()))), build,
                tpr=None if params["vec"] else 32, kcap=None if flat else STREAM_GROUPS)
