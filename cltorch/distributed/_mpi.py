"""The one place that imports mpi4py, with a clear error when it is missing, and the dtype maps."""
import numpy as np

__all__ = ["MPI", "available", "mpi_op", "reduce_view"]


def available():
    """True when mpi4py can be imported (without importing it, which would start MPI)."""
    import importlib.util
    return importlib.util.find_spec("mpi4py") is not None


_M = []


def _load():
    if _M:
        return _M[0]
    try:
        from mpi4py import MPI as m
    except ImportError as e:     # pragma: no cover - the test extra installs it
        raise RuntimeError("cltorch.distributed needs mpi4py and an MPI library: pip install mpi4py mpich "
                           "(or pip install 'cltorch[distributed]'); on a cluster, build mpi4py against the site's "
                           f"MPI ({e})") from e
    _M.append(m)
    return m


class _Lazy:
    def __getattr__(self, name):
        m = _load()
        globals()["MPI"] = m
        return getattr(m, name)


MPI = _Lazy()


def mpi():
    return _load()


def mpi_op(op, npdtype):
    """The MPI.Op of ReduceOp ``op`` for elements of numpy dtype ``npdtype`` (already widened by reduce_view)."""
    from ._types import ReduceOp
    m = _load()
    kind = np.dtype(npdtype).kind
    if op in (ReduceOp.SUM, ReduceOp.AVG):
        return m.LOR if kind == "b" else m.SUM
    if op is ReduceOp.PRODUCT:
        return m.LAND if kind == "b" else m.PROD
    if op is ReduceOp.MIN:
        if kind == "c":
            raise TypeError("all_reduce: ReduceOp.MIN is not defined for complex tensors")
        return m.MIN
    if op is ReduceOp.MAX:
        if kind == "c":
            raise TypeError("all_reduce: ReduceOp.MAX is not defined for complex tensors")
        return m.MAX
    if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR):
        if kind not in "iub":
            raise TypeError(f"{op} needs an integer or bool tensor, got numpy dtype {np.dtype(npdtype)}")
        return {ReduceOp.BAND: m.BAND, ReduceOp.BOR: m.BOR, ReduceOp.BXOR: m.BXOR}[op]
    if op is ReduceOp.PREMUL_SUM:
        raise NotImplementedError("ReduceOp.PREMUL_SUM is not provided by cltorch.distributed (multiply the "
                                  "tensor by the factor and use ReduceOp.SUM)")
    raise ValueError(f"unknown reduce op {op!r}")


def wire_dtype(npdtype):
    """The numpy dtype that travels through an MPI reduction: float16 and bfloat16 are widened to float32 (MPI
    has no arithmetic on them), bool goes as uint8 with logical ops; everything else as itself."""
    d = np.dtype(npdtype)
    if d.itemsize == 2 and d.kind in "fV" or d.name == "bfloat16":
        return np.dtype(np.float32)
    if d.kind == "b":
        return np.dtype(np.uint8)
    return d
