"""``cltorch.distributed``: a stub, so that ``import torch.distributed as dist`` lines run. Not implemented yet
(an MPI backend is planned).

``is_available()`` and ``is_initialized()`` are False and ``ReduceOp``/``Backend`` exist for import-time
references (``dist.ReduceOp.SUM``). Every other public name of ``torch.distributed`` (``init_process_group``,
``get_rank``, ``all_reduce``, ``barrier``, ...) raises NotImplementedError when called; a name that
``torch.distributed`` does not have raises AttributeError.
"""
import enum

__all__ = ["is_available", "is_initialized", "ReduceOp", "Backend", "GroupMember", "group"]

_MSG = "cltorch.distributed is not implemented yet (MPI backend planned): {name}() cannot run"


def is_available():
    """False: no process-group backend is built into cltorch yet."""
    return False


def is_initialized():
    """False: no process group can be initialized."""
    return False


def is_torchelastic_launched():
    """Whether this process was started by ``torchrun`` (it sets TORCHELASTIC_RUN_ID), as PyTorch answers."""
    import os
    return os.getenv("TORCHELASTIC_RUN_ID") is not None


class ReduceOp(enum.Enum):
    """The reduction of a collective (``dist.ReduceOp.SUM``...), as in PyTorch."""
    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"
    PREMUL_SUM = "premul_sum"
    UNUSED = "unused"


class Backend(str):
    """A backend name (``dist.Backend.GLOO``...), lower-cased as in PyTorch."""
    UNDEFINED = "undefined"
    GLOO = "gloo"
    NCCL = "nccl"
    UCC = "ucc"
    MPI = "mpi"

    def __new__(cls, name):
        return str.__new__(cls, name.lower())


class GroupMember:
    """``dist.GroupMember.WORLD``: the default group's placeholder (no group exists until the backend lands)."""
    WORLD = object()
    NON_GROUP_MEMBER = -100


class group:  # noqa: N801 (PyTorch's name)
    WORLD = GroupMember.WORLD


# torch.distributed's callable public names; each raises until the backend lands.
_CALLABLES = frozenset("""
init_process_group destroy_process_group new_group new_subgroups get_rank get_world_size get_backend
get_global_rank get_group_rank get_process_group_ranks get_default_backend_for_device barrier monitored_barrier
broadcast broadcast_object_list all_reduce all_reduce_coalesced reduce all_gather all_gather_into_tensor
all_gather_object all_gather_coalesced gather gather_object scatter scatter_object_list reduce_scatter
reduce_scatter_tensor all_to_all all_to_all_single send recv isend irecv batch_isend_irecv P2POp
get_node_local_rank is_gloo_available is_nccl_available is_mpi_available is_ucc_available is_xccl_available
is_backend_available init_device_mesh DeviceMesh ProcessGroup Store TCPStore FileStore HashStore PrefixStore Work
""".split())


def _missing(name):
    def fn(*args, **kwargs):
        raise NotImplementedError(_MSG.format(name=name))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Raises NotImplementedError: cltorch.distributed is not implemented yet (``{name}``)."
    return fn


def __getattr__(name):
    if name in _CALLABLES:
        return _missing(name)
    raise AttributeError(f"module 'cltorch.distributed' has no attribute {name!r} (cltorch.distributed is a stub "
                         "until its MPI backend lands)")
