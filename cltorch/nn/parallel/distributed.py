"""``DistributedDataParallel``: not provided until ``cltorch.distributed`` has a backend (MPI planned)."""
from ..modules.module import Module

__all__ = ["DistributedDataParallel"]


class DistributedDataParallel(Module):
    """Raises NotImplementedError: it needs a process group, and ``cltorch.distributed`` is not implemented yet."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 process_group=None, bucket_cap_mb=None, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False, **kwargs):
        raise NotImplementedError("DistributedDataParallel is not provided: cltorch.distributed is not implemented "
                                  "yet (MPI backend planned). For one device, use the module itself or DataParallel.")
