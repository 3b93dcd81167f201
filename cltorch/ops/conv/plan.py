"""Which algorithm runs a convolution: the profile's choice per call, or the one ``set_algorithm`` forces."""
from . import pointwise

_force = [None]

ALGORITHMS = ("direct", "gemm", "igemm")


def set_algorithm(name):
    """Force the convolution algorithm: "direct" (the CPU design), "gemm" (im2col + GEMM), "igemm" (the GPU design),
    or None (choose per call from the device profile; depthwise geometries then run the depthwise kernels of
    ``ops/conv/depthwise.py``). Returns the previous. Raises ValueError for another name."""
    if name not in (None,) + ALGORITHMS:
        raise ValueError(f"unknown convolution algorithm {name!r}; expected 'direct', 'gemm', 'igemm' or None")
    prev = _force[0]
    _force[0] = name
    return prev

def _depthwise(rt, geom, cin_per_group, cout_per_group):
    """Whether a convolution runs the depthwise kernels (``ops/conv/depthwise.py``): no algorithm forced and a
    depthwise geometry (groups > 1, one input channel per group, a small channel multiplier)."""
    if _force[0] is not None:
        return False
    from .depthwise import eligible
    return eligible(rt, geom, cin_per_group, cout_per_group)

def _algo(rt, cin, cout, geom):
    """"direct", "gemm" or "igemm" for a convolution whose GEMM has K = cin*KH*KW and cout output channels: the
    forced one; 1x1 convolutions "gemm" (plain GEMMs, ``pointwise.py``); the profile's ``[conv] design = "igemm"``
    (GPU profiles) "igemm" while its launch fits the work-group limits (groups in dimension 2); other profiles with
    local-memory GEMM tiles "gemm"; else "direct" up to ``[conv] direct_max_k`` and ``direct_max_co``."""
    if _force[0] is not None:
        return _force[0]
    prof = rt.profile
    if pointwise.applies(geom):
        return "gemm"
    if prof.get_value("conv", "design", "") == "igemm":
        from ...backend import geometry
        if geom.G <= geometry.limits(rt).max_groups[2]:
            return "igemm"
    if prof.get_value("gemm", "design", "cpu") == "gpu":      # GPUs: the GPU GEMM design
        return "gemm"
    kmax = int(prof.get_value("conv", "direct_max_k", 1024))
    comax = int(prof.get_value("conv", "direct_max_co", 128))
    if cin * geom.KS <= kmax and cout <= comax:
        return "direct"
    return "gemm"

