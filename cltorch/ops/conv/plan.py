"""Which algorithm runs a convolution: the profile's choice per call, or the one ``set_algorithm`` forces."""
from . import pointwise

_force = [None]

def set_algorithm(name):
    """Force the convolution algorithm: "direct", "gemm", or None (choose per call; depthwise geometries then run
    the depthwise kernels of ``ops/conv/depthwise.py``). Returns the previous."""
    if name not in (None, "direct", "gemm"):
        raise ValueError(f"unknown convolution algorithm {name!r}; expected 'direct', 'gemm' or None")
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
    """"direct" or "gemm" for a convolution whose GEMM has K = cin*KH*KW and cout output channels."""
    if _force[0] is not None:
        return _force[0]
    prof = rt.profile
    if prof.get_value("gemm", "local", 0) or pointwise.applies(geom):      # GPUs: local-memory GEMM tiles
        return "gemm"
    kmax = int(prof.get_value("conv", "direct_max_k", 1024))
    comax = int(prof.get_value("conv", "direct_max_co", 128))
    if cin * geom.KS <= kmax and cout <= comax:
        return "direct"
    return "gemm"

