"""``LinearCrossEntropyOptions`` (torch 2.13's ``torch.nn.modules.linear_cross_entropy_options``): the settings of
PyTorch's batch-chunked ``linear_cross_entropy``. They choose a memory schedule, not a result; cltorch validates
them as PyTorch does and computes the unchunked product whatever they say."""
import dataclasses

__all__ = ["LinearCrossEntropyOptions"]

_ACC_POLICIES = {"auto", "accurate", "balanced", "compact"}


@dataclasses.dataclass(slots=True, frozen=True)
class LinearCrossEntropyOptions:
    """``LinearCrossEntropyOptions(allow_retain_graph=False, batch_chunk_size=None, chunking_method='auto',
    acc_policy='auto', acc_dtype=None)``. Raises ValueError for an unknown ``acc_policy``, a ``chunking_method``
    other than None, 'auto' or 'aspect_ratio[:k]' (k > 0), a non-positive ``batch_chunk_size``, or an
    ``acc_dtype`` other than None, float16, bfloat16, float32, float64."""

    allow_retain_graph: bool = False
    batch_chunk_size: int = None
    chunking_method: str = "auto"
    acc_policy: str = "auto"
    acc_dtype: object = None

    def __post_init__(self):
        import cltorch as torch
        if self.acc_policy not in _ACC_POLICIES:
            raise ValueError(f"invalid acc_policy: {self.acc_policy!r}")
        if self.chunking_method is not None and self.chunking_method != "auto":
            name, sep, factor = self.chunking_method.partition(":")
            factor = factor if sep else "1"
            if not (name == "aspect_ratio" and factor.isdigit() and int(factor) > 0):
                raise ValueError(f"invalid chunking_method: {self.chunking_method!r}")
        if not (self.batch_chunk_size is None or (isinstance(self.batch_chunk_size, int)
                                                  and self.batch_chunk_size > 0)):
            raise ValueError(f"batch_chunk_size must be positive int or None, got {self.batch_chunk_size!r}")
        if self.acc_dtype is not None and self.acc_dtype not in (torch.float16, torch.bfloat16, torch.float32,
                                                                 torch.float64):
            raise ValueError(f"acc_dtype must be one of {{None, torch.float16, torch.bfloat16, torch.float32, "
                             f"torch.float64}}, got {self.acc_dtype!r}. Pass acc_dtype=None to let the op pick "
                             "automatically.")
