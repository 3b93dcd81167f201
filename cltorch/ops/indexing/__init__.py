"""Advanced indexing, gather/scatter and the other index ops, each registered once with its derivative.

Ops: ``x[adv]`` get and set (integer tensors, lists, bool masks, mixed with slices, None and Ellipsis),
``index_select``, ``gather``, ``scatter`` (tensor or value, ``reduce='add'|'multiply'``), ``scatter_add``,
``scatter_reduce`` (sum, prod, mean, amax, amin; ``include_self``), ``index_add``, ``index_copy``,
``index_fill``, ``index_put``/``index_put_`` (``accumulate``), ``masked_select``, ``masked_scatter``,
``nonzero``/``argwhere`` (``as_tuple``), ``take``, ``take_along_dim``, and ``embedding`` (its weight
gradient skips ``padding_idx``).

Result shapes follow PyTorch (and numpy): the index tensors broadcast together to shape B; when all
advanced dims are adjacent, B replaces them in place, otherwise B comes first. A bool mask over k dims is
replaced by its k ``nonzero`` coordinate vectors.

Kernels (``cl_kernels/index.cl.mako``): one gather/put kernel over an iteration space in which every
operand (output or values, the indexed tensor, each index tensor) has its own strides, so every op above
is a launch of it with different strides; accumulating puts use atomics (int32/int64 atomics, a
compare-and-swap loop for floats, max/min and products; 8- and 16-bit dtypes accumulate in a 32-bit
temporary). ``nonzero``, ``masked_select`` and ``masked_scatter`` are stream compactions: count per chunk,
scan the counts (``sortscan``), write. Their output size needs one small read, as in PyTorch.

Bounds: an out-of-range index raises IndexError naming the index, the dim and the size. On a device the
kernel never reads or writes out of bounds: the first work-item to meet a bad index records it in a
16-byte flag buffer, read once after the launch (one small synchronous read per launch).

cpu tensors: pure data movement (indexing get, assignment puts, index_select, gather, masked_select,
nonzero, take) runs in numpy with no OpenCL, so DataLoader workers can use it (DESIGN.md, decision 3);
accumulating ops run the kernels on the host's OpenCL device.

Modules: ``advanced.py`` (``x[adv]``, index_put, take), ``slices.py`` (index_select/add/copy/fill),
``scatter_gather.py`` (gather, scatter, scatter_add, scatter_reduce), ``masked.py`` (nonzero, masked_select,
masked_scatter), ``embedding.py``; ``launch.py`` holds the kernels' launches, ``common.py`` the checks and numpy
helpers they share.
"""
from .advanced import advanced_getitem, advanced_setitem, index_put, index_put_, take
from .embedding import embedding
from .masked import argwhere, masked_scatter, masked_scatter_, masked_select, nonzero
from .scatter_gather import (gather, scatter, scatter_, scatter_add, scatter_add_, scatter_reduce, scatter_reduce_,
                             take_along_dim)
from .slices import index_add, index_add_, index_copy, index_copy_, index_fill, index_fill_, index_select

__all__ = ["index_select", "gather", "scatter", "scatter_add", "scatter_reduce", "index_add", "index_copy",
           "index_fill", "index_put", "masked_select", "masked_scatter", "nonzero", "argwhere", "take",
           "take_along_dim"]
