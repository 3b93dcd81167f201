"""``embedding``: the rows of a weight at integer ids; its weight gradient is a GEMM with the one-hot matrix (a
fixed summation order) up to ``_ONE_HOT_MAX`` elements, else ``index_add``."""
from ... import _dtype as D
from ..._dispatch import call, register
from ..._tensor import Tensor
from .common import _same_device
from .slices import _index_add_op, _index_select_fwd


def _embedding_fwd(ctx, input, weight, padding_idx):
    flat = input.reshape(-1)
    out = _index_select_fwd(None, weight, 0, flat)
    if ctx is not None:
        ctx.save_for_backward(input)
        ctx.num, ctx.padding_idx = weight._shape[0], padding_idx
    return out.reshape(tuple(input._shape) + (weight._shape[1],))


def _embedding_bwd(ctx, g):
    (input,) = ctx.saved_tensors
    flat = input.reshape(-1)
    g2 = g.reshape(-1, g._shape[-1])
    if ctx.padding_idx is not None:
        g2 = g2.masked_fill((flat == ctx.padding_idx).unsqueeze(-1), 0)
    if ctx.num * flat._shape[0] <= _ONE_HOT_MAX:
        # a GEMM with the one-hot matrix sums each row's occurrences in a fixed order, so the gradient is the same
        # on every run; index_add's float atomics add repeated ids in whatever order the device runs them, and
        # AdamW turns those last-bit differences into visible ones in rarely-updated rows
        from ..creation import arange
        from ..linalg import matmul_nd
        onehot = (flat.unsqueeze(0) == arange(ctx.num, device=g.device).unsqueeze(1)).to(g.dtype)
        return None, matmul_nd(onehot, g2), None
    from ..creation import zeros
    z = zeros((ctx.num, g._shape[-1]), dtype=g.dtype, device=g.device)
    return None, call(_index_add_op, z, 0, flat, g2, 1), None


_ONE_HOT_MAX = 1 << 22   # elements of the (num_embeddings, tokens) one-hot matrix above which index_add is used


_embedding_op = register("embedding", _embedding_fwd, _embedding_bwd)


def embedding(input, weight, padding_idx=None):  # noqa: A002
    """Rows of the 2-D ``weight`` at the integer ``input``: shape ``input.shape + (embedding_dim,)``. The weight
    gradient accumulates every occurrence (index_add) and skips rows equal to ``padding_idx`` (negative counts
    from the end). Out-of-range indices raise IndexError."""
    if not isinstance(input, Tensor) or input.dtype not in (D.int64, D.int32):
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           f"Long, Int; but got {getattr(input, 'dtype', type(input))} instead (while checking "
                           "arguments for embedding)")
    if weight.dim() != 2:
        raise RuntimeError(f"'weight' must be 2-D, got {weight.dim()}-D")
    _same_device(weight, input)
    if padding_idx is not None:
        n = weight._shape[0]
        if padding_idx < -n or padding_idx >= n:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx %= n
    return call(_embedding_op, input, weight, padding_idx)
