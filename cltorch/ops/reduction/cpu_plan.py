"""The CPU design of a reduction's launches (``cl_kernels/reduction.cl.mako``): one work-item per output, or, when
few outputs exist, C interleaved partial accumulators per output and a second pass that combines them; float8
lanes where the profile's ``vector_width`` and the expressions allow (``_vector_mode``).

Work-item (o, c) reduces elements c, c + C, c + 2C, ... of output o, so neighbouring work-items read neighbouring
elements; a float sum adds in blocks of 32 (see reduction.cl.mako)."""
from ... import _dtype as D
from .kernels import cpu_kernel

__all__ = ["plan_cpu"]


def plan_cpu(p, x, s, kshape, kstr, rshape, rstr):
    """Fill plan ``p`` (M outputs of R elements each, spec ``s``) with the CPU design's launches."""
    rt, M, R, arg = p.rt, p.M, p.R, p.arg
    prof = rt.profile
    ls = prof.get_value("reduction", "local_size", 64)
    one_pass = prof.get_value("reduction", "min_outputs_one_pass", 256)
    chunk = prof.get_value("reduction", "chunk", 4096)
    C = 1
    if M < one_pass and R > chunk:
        C = max(1, min((R + chunk - 1) // chunk, (one_pass * 4) // M))
    rk, rr = len(kshape), len(rshape)
    vmode, vw = "", 1
    if not arg:
        vmode, vw = _vector_mode(x, prof, kshape, kstr, rshape, rstr, s.map_dtype, s.acc_dtype,
                                 s.out_dtype if C == 1 else s.acc_dtype, (s.map_expr, s.combine, s.finish, s.identity))
        if C > 1 and vmode != "inner":
            vmode, vw = "", 1
    geometry = []
    for s_, st in zip(kshape, kstr):
        geometry += [s_, st]
    for s_, st in zip(rshape, rstr):
        geometry += [s_, st]
    p.C = C
    common = (s.map_expr, s.combine, s.identity)
    # each launch: (kernel, global size, local size, what its output is, what it reads, the argument tail)
    if vmode == "outer":
        k = cpu_kernel(rt, x.dtype, s.map_dtype, s.acc_dtype, s.out_dtype, *common, s.finish, s.better, False, rk,
                       rr, True, vmode, vw)
        items = M // vw
        p.launches.append((k, (((items + ls - 1) // ls) * ls,), (ls,), "out", "x", [M, R, 1, R] + geometry))
    elif C == 1:
        k = cpu_kernel(rt, x.dtype, s.map_dtype, s.acc_dtype, s.out_dtype, *common, s.finish, s.better, False, rk,
                       rr, True, vmode, vw)
        p.launches.append((k, (((M + ls - 1) // ls) * ls,), (ls,), "out", "x", [M, R, 1, R] + geometry))
    else:
        k = cpu_kernel(rt, x.dtype, s.map_dtype, s.acc_dtype, s.acc_dtype, *common, "acc", s.better, False, rk, rr,
                       False, vmode, vw)
        p.launches.append((k, (((M * C + ls - 1) // ls) * ls,), (ls,), "part", "x", [M, R, C, R] + geometry))
        # second pass: combine the C partials of each output (contiguous rows of ``part``)
        k2 = cpu_kernel(rt, s.acc_dtype, s.acc_dtype, s.acc_dtype, s.out_dtype, "x", s.combine, s.identity, s.finish,
                        s.better, arg, 1, 1, True)
        p.launches.append((k2, (((M + ls - 1) // ls) * ls,), (ls,), "out", "part", [M, C, 1, R, M, C, C, 1]))


def _vector_mode(x, prof, kshape, kstr, rshape, rstr, map_dt, acc_dt, out_dt, exprs):
    """('inner' | 'outer' | '', vw): whether the one-pass reduction can run on vector types (CPU devices)."""
    from ..elementwise import _VEC_UNSAFE, _aligned
    vw = prof.get_value("reduction", "vector_width", 1)
    if vw <= 1 or not (x.dtype is map_dt is acc_dt is out_dt) or x.dtype not in (D.float32, D.float64):
        return "", 1
    if any(tok in e for e in exprs for tok in _VEC_UNSAFE if tok not in ("(float)", "(double)")):
        return "", 1
    if not _aligned(x, vw):
        return "", 1
    R = 1
    for s_ in rshape:
        R *= s_
    if len(rshape) == 1 and rstr[0] == 1 and R >= vw and all(st % vw == 0 for st in kstr):
        return "inner", vw
    if kshape and kstr[-1] == 1 and kshape[-1] % vw == 0 and all(st % vw == 0 for st in kstr[:-1]) and \
            all(st % vw == 0 for st in rstr):
        return "outer", vw
    return "", 1
