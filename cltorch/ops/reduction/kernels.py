"""The reduction kernels, built once per signature: the CPU design's ``red`` (``cl_kernels/reduction.cl.mako``) and
the GPU design's ``red_rows`` / ``red_cols`` (``cl_kernels/reduction_gpu.cl.mako``). Both take the same kernel
arguments: out, out_off, [iout, iout_off], in, in_off, [iin, iin_off], M, R, C, nred, then (size, stride) of each
kept and each reduced dim."""
import numpy as np

__all__ = ["cpu_kernel", "gpu_kernel", "arg_dtypes"]

_kernels = {}


def arg_dtypes(arg, arg_in, rk, rr):
    """The scalar argument dtypes of a reduction kernel (None for buffers)."""
    return [None, np.int64] + ([None, np.int64] if arg else []) + [None, np.int64] + \
        ([None, np.int64] if arg_in else []) + [np.int64] * (4 + 2 * rk + 2 * rr)


def _common(in_dt, map_dt, acc_dt, out_dt, map_expr, combine, identity, finish, better, arg_in, rk, rr, last):
    return dict(in_type=in_dt.cl, map_type=map_dt.cl, acc_type=acc_dt.cl, out_type=out_dt.cl, map_expr=map_expr,
                combine=combine or "a", identity=identity, finish=finish, arg=better is not None,
                better=better or "0", arg_in=arg_in, rk=rk, rr=rr, last=last,
                types=tuple(sorted({in_dt.cl, map_dt.cl, acc_dt.cl, out_dt.cl})), pro=(), pro_expr="")


def cpu_kernel(rt, in_dt, map_dt, acc_dt, out_dt, map_expr, combine, identity, finish, better, arg_in, rk, rr, last,
               vmode="", vw=1):
    """The CPU design's kernel (one work-item per output and partial; see reduction.cl.mako)."""
    key = ("cpu", rt.index, in_dt.cl, map_dt.cl, acc_dt.cl, out_dt.cl, map_expr, combine, identity, finish, better,
           arg_in, rk, rr, last, vmode, vw)
    k = _kernels.get(key)
    if k is None:
        k = rt.kernel("reduction.cl.mako", "red", arg_dtypes(better is not None, arg_in, rk, rr),
                      vmode=vmode, vw=vw, **_common(in_dt, map_dt, acc_dt, out_dt, map_expr, combine, identity,
                                                    finish, better, arg_in, rk, rr, last))
        _kernels[key] = k
    return k


def gpu_kernel(rt, design, in_dt, map_dt, acc_dt, out_dt, map_expr, combine, identity, finish, better, arg_in, rk,
               rr, last, *, team, vw, nacc, lsize, valign, rcont, xchg):
    """The GPU design's ``red_rows`` or ``red_cols`` (see reduction_gpu.cl.mako for the parameters)."""
    key = ("gpu", design, rt.index, in_dt.cl, map_dt.cl, acc_dt.cl, out_dt.cl, map_expr, combine, identity, finish,
           better, arg_in, rk, rr, last, team, vw, nacc, lsize, valign, rcont, xchg)
    k = _kernels.get(key)
    if k is None:
        k = rt.kernel("reduction_gpu.cl.mako", "red_" + design, arg_dtypes(better is not None, arg_in, rk, rr),
                      design=design, team=team, vw=vw, nacc=nacc, lsize=lsize, valign=bool(valign),
                      rcont=bool(rcont), xchg=xchg, vmode="gpu" if valign and vw > 1 else "",
                      **_common(in_dt, map_dt, acc_dt, out_dt, map_expr, combine, identity, finish, better, arg_in,
                                rk, rr, last))
        _kernels[key] = k
    return k
