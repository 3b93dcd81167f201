"""Names that exist before any process group: ``ReduceOp``, ``Backend``, ``GroupMember``, ``group`` and the
error types (PyTorch's ``DistError`` family). No MPI here."""
import enum
from datetime import timedelta

__all__ = ["ReduceOp", "Backend", "GroupMember", "group", "DistError", "DistBackendError", "DistNetworkError",
           "DistStoreError", "default_pg_timeout"]

default_pg_timeout = timedelta(minutes=30)     # PyTorch's default for every backend but NCCL


class ReduceOp(enum.Enum):
    """The reduction of a collective (``dist.ReduceOp.SUM``...), as in PyTorch. ``BAND``/``BOR``/``BXOR`` take
    integer or bool tensors; ``AVG`` floating point ones; ``PREMUL_SUM`` is not provided (NotImplementedError)."""
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
    """A backend name (``dist.Backend.MPI``...), lower-cased as in PyTorch. cltorch runs every process group on
    MPI; ``init_process_group`` accepts "gloo" and "nccl" too and runs them on MPI (README, differences)."""
    UNDEFINED = "undefined"
    GLOO = "gloo"
    NCCL = "nccl"
    UCC = "ucc"
    MPI = "mpi"

    def __new__(cls, name):
        return str.__new__(cls, name.lower())


class GroupMember:
    """``dist.GroupMember.WORLD`` (the default group, also ``dist.group.WORLD``) and ``NON_GROUP_MEMBER`` (what
    ``new_group`` returns on ranks outside the new group)."""
    WORLD = None
    NON_GROUP_MEMBER = -100


class group:  # noqa: N801 (PyTorch's name)
    WORLD = None


class DistError(RuntimeError):
    """Base of the errors raised by ``cltorch.distributed`` (PyTorch's ``torch.distributed.DistError``)."""


class DistBackendError(DistError):
    """The transport failed: a collective timed out, a peer rank died or raised, or ranks disagreed on a
    collective's shapes or dtypes."""


class DistNetworkError(DistError):
    """A network-level failure (kept for PyTorch's name; MPI reports its failures as DistBackendError)."""


class DistStoreError(DistError):
    """A store failure (kept for PyTorch's name; cltorch's MPI groups use no store)."""
