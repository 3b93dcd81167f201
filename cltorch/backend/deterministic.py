"""The one profile every device runs under in deterministic mode (``cltorch.use_deterministic_algorithms``).

Reductions, GEMM's K loop, softmax, norms and losses add in an order fixed by their profile values (work-group
sizes, chunks, tiles, vector widths), so devices that run under the same values add in the same order. This
profile is ``default.toml`` with ``cpu.toml`` over it (the CPU tables, which any OpenCL device can run), with the
elementwise template on scalars (the deterministic math functions have float overloads only), the reductions'
GPU design with a fixed group count (its order is then a function of the shape: ``ops/reduction/gpu_plan.py``),
and every key the launchers would otherwise derive from the device's type or size written out.
"""
import copy

from .paths import profiles_dir
from .profile import Profile, _merge, _read

__all__ = ["profile", "OVERRIDES"]

OVERRIDES = {
    "elementwise": {"vector_width": 1},
    # reductions take the GPU design (ops/reduction/gpu_plan.py) with its group count fixed: the order then depends
    # on the shape alone, and a GPU in deterministic mode keeps its work-group reductions
    "reduction": {"vector_width": 1, "design": "gpu", "local_size": 128, "fixed_groups": 512, "accumulators": 4,
                  "load_width": 4, "row_team": 32, "col_lanes": 32, "col_rows": 8, "max_iters": 64,
                  "lane_exchange": "auto"},
    "index": {"local_size": 16, "inner": 32, "compact_chunk": 2048},
    "scan": {"parallel": 128},
    "optim": {"split_barrier": True},
}

_cache = []


def profile():
    """The deterministic profile (a :class:`Profile`; the same object for every device)."""
    if not _cache:
        merged, sources = {}, []
        for name in ("default.toml", "cpu.toml"):
            path = profiles_dir() / name
            data = {k: v for k, v in _read(path).items() if k != "match"}
            _merge(merged, copy.deepcopy(data))
            sources.append(str(path))
        _merge(merged, copy.deepcopy(OVERRIDES))
        _cache.append(Profile(merged, sources + ["deterministic"],
                              ["the defaults (no [match] table)", "the CPU tables",
                               "cltorch.use_deterministic_algorithms(True)"]))
    return _cache[0]
