"""The reduction launcher: one template (``cl_kernels/reduction.cl.mako``) for every reduction.

``reduce(x, dim, keepdim, ...)`` takes map, combine and finish expressions over any set of dims. The
kept dims and the reduced dims are each collapsed; work-item (o, c) reduces every C-th element of
output o, so when few outputs exist (a full reduction) the work splits into C interleaved partial
accumulators and a second pass combines them. Arg-reductions carry (value, index) pairs; ties go to
the lower index, so ``max(dim)`` returns the first index, as PyTorch does.
"""
import numpy as np

from ... import _dtype as D
from ..._tensor import Tensor
from ..elementwise import _collapse

__all__ = ["reduce", "normalize_dims"]


def normalize_dims(dim, ndim):
    """A sorted tuple of non-negative dims. None or () means all dims. IndexError for out of range,
    RuntimeError for a repeated dim (PyTorch's errors)."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (list, tuple)):
        dims = list(dim)
        if not dims:
            return tuple(range(ndim))
    else:
        dims = [dim]
    out = []
    n = max(ndim, 1)
    for d in dims:
        d = int(d)
        if d < -n or d >= n:
            lo, hi = -n, n - 1
            raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but got {d})")
        d %= n
        if d in out:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        out.append(d)
    if ndim == 0:
        return ()
    return tuple(sorted(out))


_kernels = {}


def _kernel(rt, in_dt, map_dt, acc_dt, out_dt, map_expr, combine, identity, finish, better, arg_in, rk, rr, last,
            vmode="", vw=1):
    key = (rt.index, in_dt.cl, map_dt.cl, acc_dt.cl, out_dt.cl, map_expr, combine, identity, finish, better, arg_in,
           rk, rr, last, vmode, vw)
    k = _kernels.get(key)
    if k is None:
        arg = better is not None
        argd = [None, np.int64] + ([None, np.int64] if arg else []) + [None, np.int64] + \
               ([None, np.int64] if arg_in else []) + [np.int64] * (4 + 2 * rk + 2 * rr)
        types = tuple(sorted({in_dt.cl, map_dt.cl, acc_dt.cl, out_dt.cl}))
        k = rt.kernel("reduction.cl.mako", "red", argd, in_type=in_dt.cl, map_type=map_dt.cl, acc_type=acc_dt.cl,
                      out_type=out_dt.cl, map_expr=map_expr, combine=combine or "a", identity=identity,
                      finish=finish, arg=arg, better=better or "0", arg_in=arg_in, rk=rk, rr=rr, last=last,
                      types=types, vmode=vmode, vw=vw, pro=(), pro_expr="")
        _kernels[key] = k
    return k


def reduce(x, dim=None, keepdim=False, *, map_expr="x", combine="a + b", identity="0", finish="acc",
           acc_dtype=None, out_dtype=None, map_dtype=None, better=None, name="reduce"):
    """Reduce ``x`` over ``dim`` (int, tuple or None for all).

    acc = identity; for each element x (cast to map_dtype): b = map_expr; a = combine (or, with
    ``better``, keep (b, index) when the predicate over b, bi, a, ai holds). The result is ``finish``
    over ``acc`` and ``nred`` (the number of reduced elements), cast to out_dtype. Returns the output,
    or (values, indices) when ``better`` is given.

    The launch decisions depend only on x's dtype, shape, strides, device and alignment and on the
    arguments, so they are made once per such signature (a :class:`_ReducePlan`), as ``pointwise`` does.
    """
    acc_dtype = acc_dtype or x.dtype
    out_dtype = out_dtype or acc_dtype
    map_dtype = map_dtype or acc_dtype
    dims = dim if dim.__class__ is tuple and _is_sorted_dims(dim, len(x._shape)) else normalize_dims(dim, x.dim())
    key = (x.dtype, x._shape, x._stride, x.device, dims, keepdim, map_expr, combine, identity, finish, acc_dtype,
           out_dtype, map_dtype, better, _vector_aligned(x))
    plan = _plans.get(key)
    if plan is None:
        if x.dtype._kind == 3 or acc_dtype._kind == 3:
            raise NotImplementedError(f"{name} is not implemented for complex tensors in cltorch (sum and mean are; "
                                      "they reduce the view_as_real view)")
        plan = _ReducePlan(x, dims, keepdim, map_expr, combine, identity, finish, acc_dtype, out_dtype, map_dtype,
                           better, name)
        _plans[key] = plan
    return plan.run(x)


_plans = {}
_vw = {}


def _is_sorted_dims(dims, nd):
    prev = -1
    for d in dims:
        if d.__class__ is not int or d <= prev or d >= nd:
            return False
        prev = d
    return bool(dims) or nd == 0


def _vector_aligned(x):
    """Whether x's data allows the vector forms (its runtime's profile says how wide they are)."""
    dev = x.device
    vw = _vw.get(dev)
    if vw is None:
        vw = _vw[dev] = x._storage.runtime().profile.get_value("reduction", "vector_width", 1)
    if vw <= 1:
        return True
    from ..elementwise import _aligned
    return _aligned(x, vw)


class _ReducePlan:
    """The launches of one reduction signature (see ``reduce``); ``run(x)`` repeats them on x's data."""

    def __init__(self, x, dims, keepdim, map_expr, combine, identity, finish, acc_dtype, out_dtype, map_dtype,
                 better, name):
        nd = x.dim()
        kept = [d for d in range(nd) if d not in dims]
        if keepdim:
            oshape = tuple(1 if d in dims else s for d, s in enumerate(x._shape))
        else:
            oshape = tuple(x._shape[d] for d in kept)
        kshape, (kstr,) = _collapse(tuple(x._shape[d] for d in kept), [tuple(x._stride[d] for d in kept)])
        rshape, (rstr,) = _collapse(tuple(x._shape[d] for d in dims), [tuple(x._stride[d] for d in dims)])
        M = 1
        for s in oshape:
            M *= s
        R = 1
        for d in dims:
            R *= x._shape[d]
        arg = better is not None
        self.oshape, self.out_dtype, self.arg, self.device = oshape, out_dtype, arg, x.device
        self.kind, self.fill, self.launches = "launch", None, []
        if M == 0:
            self.kind = "empty"
            return
        if R == 0:
            if arg:
                raise IndexError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0, or the "
                                 f"reduced dims to have non-zero size; got shape {list(x._shape)}")
            self.kind, self.fill = "fill", identity_value(identity, finish, out_dtype)  # an empty reduction
            return
        rt = x._storage.runtime()
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
            vmode, vw = _vector_mode(x, prof, kshape, kstr, rshape, rstr, map_dtype, acc_dtype,
                                     out_dtype if C == 1 else acc_dtype, (map_expr, combine, finish, identity))
            if C > 1 and vmode != "inner":
                vmode, vw = "", 1
        geometry = []
        for s_, st in zip(kshape, kstr):
            geometry += [s_, st]
        for s_, st in zip(rshape, rstr):
            geometry += [s_, st]
        self.rt, self.C, self.M, self.acc_dtype = rt, C, M, acc_dtype
        # each launch: (kernel, global size, local size, what its output is, what it reads, the argument tail)
        if vmode == "outer":
            k = _kernel(rt, x.dtype, map_dtype, acc_dtype, out_dtype, map_expr, combine, identity, finish, better,
                        False, rk, rr, True, vmode, vw)
            items = M // vw
            self.launches.append((k, (((items + ls - 1) // ls) * ls,), (ls,), "out", "x", [M, R, 1, R] + geometry))
        elif C == 1:
            k = _kernel(rt, x.dtype, map_dtype, acc_dtype, out_dtype, map_expr, combine, identity, finish, better,
                        False, rk, rr, True, vmode, vw)
            self.launches.append((k, (((M + ls - 1) // ls) * ls,), (ls,), "out", "x", [M, R, 1, R] + geometry))
        else:
            k = _kernel(rt, x.dtype, map_dtype, acc_dtype, acc_dtype, map_expr, combine, identity, "acc", better,
                        False, rk, rr, False, vmode, vw)
            self.launches.append((k, (((M * C + ls - 1) // ls) * ls,), (ls,), "part", "x", [M, R, C, R] + geometry))
            # second pass: combine the C partials of each output (contiguous rows of ``part``)
            k2 = _kernel(rt, acc_dtype, acc_dtype, acc_dtype, out_dtype, "x", combine, identity, finish, better,
                         arg, 1, 1, True)
            self.launches.append((k2, (((M + ls - 1) // ls) * ls,), (ls,), "out", "part",
                                  [M, C, 1, R, M, C, C, 1]))

    def run(self, x):
        out = Tensor._empty(self.oshape, self.out_dtype, self.device)
        iout = Tensor._empty(self.oshape, D.int64, self.device) if self.arg else None
        if self.kind != "launch":
            if self.kind == "fill":
                from ..pointwise import full_like_value
                full_like_value(out, self.fill)
            return (out, iout) if self.arg else out
        rt = self.rt
        arg = self.arg
        if self.C > 1:
            part = Tensor._empty((self.M, self.C), self.acc_dtype, self.device)
            ipart = Tensor._empty((self.M, self.C), D.int64, self.device) if arg else None
        for k, gs, ls, dst, src, tail in self.launches:
            if dst == "out":
                args = [out._storage.cl_buffer(), 0] + ([iout._storage.cl_buffer(), 0] if arg else [])
            else:
                args = [part._storage.cl_buffer(), 0] + ([ipart._storage.cl_buffer(), 0] if arg else [])
            if src == "x":
                args += [x._storage.cl_buffer(), x._offset]
            else:
                args += [part._storage.cl_buffer(), 0] + ([ipart._storage.cl_buffer(), 0] if arg else [])
            args += tail
            rt.launch(k, gs, ls, *args)
        if x._storage.host is not None:
            rt.finish_if_exposed()   # cpu tensors wait only for memory numpy shares
        return (out, iout) if arg else out


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


def identity_value(identity, finish, dt):
    """The value an empty reduction gives (sum: 0, prod: 1, mean: nan...)."""
    env = {"INFINITY": float("inf"), "NAN": float("nan")}
    try:
        v = float(eval(identity.replace("f", "") if identity.endswith("f") else identity, {}, env))  # noqa: S307
    except Exception:
        v = 0.0
    if "nred" in finish:
        return float("nan")
    return v
