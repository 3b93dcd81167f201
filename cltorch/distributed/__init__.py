"""``cltorch.distributed``: PyTorch's ``torch.distributed`` on MPI (mpi4py over MPICH, Open MPI or a site's MPI).

Start the processes with ``mpiexec -n N python train.py`` or ``python -m cltorch.distributed.run
--nproc-per-node N train.py``, then ``dist.init_process_group("mpi")``. The files, one per concern:

- ``_group.py``: process groups (init, ranks, ``new_group``, destroy);
- ``_collectives.py``: the collectives and point-to-point ops (header check, deterministic sums, staging);
- ``_staging.py``: tensor memory as host buffers (cpu storage directly; device tensors through pinned buffers);
- ``_work.py``: ``Work`` (async ops) and the rule that keeps MPI's call order rank-independent;
- ``_objects.py``: object collectives; ``_watch.py``: timeouts and failed ranks; ``run.py``: the launcher;
  ``mpiexec.py``: what differs between MPI launchers (Open MPI's flags, per-rank environments, death reports).

Names of ``torch.distributed`` that cltorch does not provide (stores, device meshes, ``all_reduce_coalesced``...)
raise NotImplementedError naming what is missing; unknown names raise AttributeError.
"""
import os

from ._types import (Backend, DistBackendError, DistError, DistNetworkError, DistStoreError, GroupMember,  # noqa
                     ReduceOp, group, default_pg_timeout)
from ._group import (ProcessGroup, destroy_process_group, get_backend, get_global_rank, get_group_rank,  # noqa
                     get_node_local_rank, get_process_group_ranks, get_rank, get_world_size, init_process_group,
                     is_available, is_initialized, is_mpi_available, new_group)
from ._work import Work  # noqa: F401
from ._collectives import (P2POp, all_gather, all_gather_into_tensor, all_reduce, all_to_all,  # noqa: F401
                           all_to_all_single, barrier, batch_isend_irecv, broadcast, gather, irecv, isend,
                           monitored_barrier, recv, reduce, reduce_scatter, reduce_scatter_tensor, scatter, send)
from ._objects import all_gather_object, broadcast_object_list, gather_object, scatter_object_list  # noqa: F401

__all__ = ["is_available", "is_initialized", "is_mpi_available", "is_gloo_available", "is_nccl_available",
           "is_ucc_available", "is_xccl_available", "is_backend_available", "is_torchelastic_launched",
           "init_process_group", "destroy_process_group", "new_group", "get_rank", "get_world_size", "get_backend",
           "get_global_rank", "get_group_rank", "get_process_group_ranks", "get_node_local_rank",
           "ReduceOp", "Backend", "GroupMember", "group", "ProcessGroup", "Work", "DistError", "DistBackendError",
           "DistNetworkError", "DistStoreError", "all_reduce", "broadcast", "reduce", "all_gather",
           "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor", "gather", "scatter", "all_to_all",
           "all_to_all_single", "barrier", "monitored_barrier", "send", "recv", "isend", "irecv", "P2POp",
           "batch_isend_irecv", "broadcast_object_list", "all_gather_object", "gather_object",
           "scatter_object_list", "default_pg_timeout"]


def is_gloo_available():
    """False: cltorch has no Gloo backend (every group runs on MPI; backend='gloo' is accepted and runs on MPI)."""
    return False


def is_nccl_available():
    """False: NCCL is CUDA-only."""
    return False


def is_ucc_available():
    return False


def is_xccl_available():
    return False


def is_backend_available(backend):
    """True for "mpi" when mpi4py is installed."""
    return str(backend).lower() == "mpi" and is_available()


def is_torchelastic_launched():
    """Whether this process was started by ``torchrun`` (it sets TORCHELASTIC_RUN_ID), as PyTorch answers."""
    return os.getenv("TORCHELASTIC_RUN_ID") is not None


# names of torch.distributed that cltorch does not provide: calling them raises, naming what is missing
_NOT_PROVIDED = frozenset("""
new_subgroups get_default_backend_for_device all_reduce_coalesced all_gather_coalesced init_device_mesh DeviceMesh
Store TCPStore FileStore HashStore PrefixStore
""".split())
_CALLABLES = frozenset(__all__) | _NOT_PROVIDED


def _missing(name):
    def fn(*args, **kwargs):
        raise NotImplementedError(f"cltorch.distributed does not provide {name}: its MPI backend has no stores, "
                                  "device meshes or coalesced collectives")
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Raises NotImplementedError: ``{name}`` is not provided by cltorch.distributed."
    return fn


def __getattr__(name):
    if name in _NOT_PROVIDED:
        return _missing(name)
    raise AttributeError(f"module 'cltorch.distributed' has no attribute {name!r}")
