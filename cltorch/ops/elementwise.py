"""The strided elementwise launcher: one template (``cl_kernels/elementwise.cl.mako``) for every pointwise op.

``pointwise(expr, operands, out_dtype, compute)`` broadcasts the tensor operands, collapses dims that
are contiguous with each other for every operand, and launches the kernel keyed by the expression,
the operand dtypes, the output dtype and the collapsed rank (0 = the contiguous fast path). Shapes,
strides and offsets are runtime arguments, so one program serves every shape of a signature.

Python scalars become kernel arguments; a 0-d cpu tensor mixes with any device (PyTorch's rule) and is
read as a scalar. Tensors on two different devices raise RuntimeError naming both.
"""
import math
import re

import numpy as np

from .. import _dtype as D
from .. import backend
from ..backend import geometry
from .._storage import Storage, host_address
from .._tensor import Tensor, contiguous_strides

__all__ = ["pointwise", "plan_of", "broadcast_shapes", "common_device", "as_operand", "gpu_layout"]

_NP_SCALAR = {"float": np.float32, "double": np.float64, "half": np.float32, "long": np.int64, "int": np.int32,
              "short": np.int16, "char": np.int8, "uchar": np.uint8, "bfloat16": np.float32}


def broadcast_shapes(*shapes):
    """PyTorch's broadcast rule; raises RuntimeError naming both shapes on a mismatch."""
    out = ()
    for s in shapes:
        s = tuple(s)
        if s == out:
            continue
        nd = max(len(out), len(s))
        a = (1,) * (nd - len(out)) + out
        b = (1,) * (nd - len(s)) + s
        res = []
        for j, (x, y) in enumerate(zip(a, b)):
            if x == y or y == 1:
                res.append(x)
            elif x == 1:
                res.append(y)
            else:
                raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b ({y}) at "
                                   f"non-singleton dimension {j}: shapes {list(out)} and {list(s)} are not "
                                   "broadcastable")
        out = tuple(res)
    return out


def common_device(tensors):
    """The device of the operands: 0-d cpu tensors adapt to the others; two other devices raise."""
    dev = None
    for t in tensors:
        if t.device.type == "cpu" and not t._shape:
            continue
        if dev is None:
            dev = t.device
        elif t.device != dev:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"{dev} and {t.device}!")
    return dev if dev is not None else tensors[0].device


def as_operand(x, dev):
    """A 0-d cpu tensor used with another device becomes a Python scalar."""
    if isinstance(x, Tensor) and x.device != dev and x.device.type == "cpu" and not x._shape:
        return x.item()
    return x


def _collapse(shape, strides_list):
    """Drop size-1 dims and merge adjacent dims contiguous for every operand. Returns (shape, strides_list)."""
    dims = [i for i, s in enumerate(shape) if s != 1]
    if not dims:
        return (), [() for _ in strides_list]
    sh = [shape[dims[0]]]
    sts = [[st[dims[0]]] for st in strides_list]
    for i in dims[1:]:
        s = shape[i]
        if all(st[-1] == st_full[i] * s for st, st_full in zip(sts, strides_list)):
            sh[-1] *= s
            for st, st_full in zip(sts, strides_list):
                st[-1] = st_full[i]
        else:
            sh.append(s)
            for st, st_full in zip(sts, strides_list):
                st.append(st_full[i])
    return tuple(sh), [tuple(st) for st in sts]


def _bstrides(t, shape):
    """t's strides broadcast to ``shape`` (0 for broadcast dims)."""
    nd = len(shape)
    off = nd - len(t._shape)
    st = [0] * nd
    for i, (s, v) in enumerate(zip(t._shape, t._stride)):
        st[off + i] = v if s != 1 else 0
    return st


_kernels = {}


_VEC_UNSAFE = ("?", "<", ">", "=", "!", "&&", "||", "_f(", "_d(", "_l(", "_i(", "(float)", "(double)", "(long)",
               "(int)", "(uchar)", "isnan", "isinf", "isfinite", "signbit", "%", "&", "|", "^", "~", "rint",
               "trunc", "floor", "ceil", "fabs", "copysign", "fmod", "pow(", "atan2", "hypot", "fmax", "fmin")


# Small cpu ops whose result IEEE arithmetic fixes exactly (+, -, *, /, comparisons, casts) run in numpy:
# bit-identical to the kernel (which is built with FP_CONTRACT OFF), without a kernel launch and sync, and
# without OpenCL (so DataLoader workers' transforms stay cheap). Everything else runs on the OpenCL CPU device.
# On a machine without an OpenCL CPU device (GPUs only) they run in numpy whatever their size (an initialiser's
# ``mul_(gain)`` on a large weight), and the rest raises NoDeviceError naming what to install.
_HOST_MAX = 1 << 16
_HOST_TOKENS = re.compile(r"^(x\d|[-+*/() ]|==|!=|<=|>=|<|>|\d+\.\d*f?|\d+)*$")
_host_codes = {}


def _host_code(expr, cts, out_dtype):
    """A Python function of the operands computing ``expr`` with numpy, or None when the expression is not one
    whose result IEEE arithmetic fixes exactly (see above)."""
    key = (expr, tuple(cts), out_dtype)
    if key in _host_codes:
        return _host_codes[key]
    code = None
    flat = expr.replace(" ", "")
    compares = any(op in flat for op in ("<", ">", "=="))
    arith = re.search(r"[-+*/]", flat.replace("e-", "").replace("e+", "")) is not None
    # C comparisons give int 0/1 that arithmetic may use; numpy's give bool: keep a comparison alone
    # half and bfloat16 compute in float in the kernel; numpy would round every intermediate: kernel only
    if _HOST_TOKENS.match(flat) and not (compares and arith) and \
            not any(c is D.float16 or c is D.bfloat16 for c in cts):
        if "/" not in expr or all(c.is_floating_point for c in cts):
            args = ", ".join(f"x{i}" for i in range(len(cts)))
            code = eval(f"lambda {args}: " + re.sub(r"(\d+\.\d*)f", r"\1", expr))  # noqa: S307 - whitelisted
    _host_codes[key] = code
    return code


try:   # numpy >= 2: enter its "ignore all floating-point errors" state without building it per call
    from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj
    _IGNORE = _make_extobj(all="ignore")

    def _quietly(fn, args):
        """fn(*args) with numpy's floating-point warnings off (kernels do not warn either)."""
        token = _extobj_contextvar.set(_IGNORE)
        try:
            return fn(*args)
        finally:
            _extobj_contextvar.reset(token)
except ImportError:  # pragma: no cover - older numpy
    def _quietly(fn, args):
        """fn(*args) with numpy's floating-point warnings off (kernels do not warn either)."""
        with np.errstate(all="ignore"):
            return fn(*args)


def _host_pointwise(fn, ops, cts, out, shape):
    """``out = fn(*ops)`` in numpy: tensors as views of their host memory (0-d ones as numpy scalars), each cast
    to its compute dtype, Python scalars as numpy scalars of it; the result is cast into ``out``."""
    args = []
    for x, ct in zip(ops, cts):
        if isinstance(x, Tensor):
            if x._shape:
                v = x._host_view()
                if v.dtype != ct.np:
                    v = v.astype(ct.np)
            else:
                st = x._storage
                st.host_sync()
                v = st.host[x._offset]
                if x.dtype is not ct:
                    v = ct.np.type(v)
        else:
            v = ct.np.type(x)
        args.append(v)
    res = _quietly(fn, args)
    if out.dtype is D.bool:
        res = np.not_equal(res, 0)
    np.copyto(out._host_view(), res, casting="unsafe")
    return out


def _vector_safe(expr, spec, out_dtype):
    """True when ``expr`` means the same on vector types: float arithmetic and math functions only, every tensor
    operand already in the compute type, and the output of that type (no casts, comparisons or selects)."""
    if out_dtype not in (D.float32, D.float64):
        return False
    for kind, st, ct in spec:
        if ct != out_dtype.cl or (kind == "t" and st != ct):
            return False
    return not any(tok in expr for tok in _VEC_UNSAFE)


# storage types' sizes in bytes, for the GPU design's vector width (complex float2/double2: element by element)
_SIZES = {"float": 4, "double": 8, "half": 2, "bfloat16": 2, "long": 8, "int": 4, "short": 2, "char": 1, "uchar": 1}


def gpu_layout(rt, types):
    """The contiguous path's GPU design, or None where the profile's ``[elementwise] design`` is the CPU one.

    ``types``: the storage types (OpenCL names) of the output and the tensor operands. Returns ``(gvec, epi)``:
    elements per vector access, the most elements of the widest type that fit ``vector_bytes`` (16: one 16-byte
    load or store per lane; 1 for complex storage), and elements per work-item, ``elems_per_item`` (8) rounded to
    whole vectors. Work-group g covers ``L * epi`` consecutive elements, its lanes reading consecutive vectors
    (``cl_kernels/elementwise.cl.mako``). This is PyTorch's CUDA vectorized elementwise loop
    (``aten/src/ATen/native/cuda/CUDALoops.cuh``: 16 bytes over the element size per access, 8 elements per thread
    when operands are wider than a byte, all loads issued before the arithmetic, one block per chunk and no
    grid-stride loop). The caller falls back to ``gvec = 1`` (the same layout, element by element) where an
    operand's offset is not a multiple of gvec."""
    prof = rt.profile
    if prof.get_value("elementwise", "design", "cpu") != "gpu":
        return None
    size = max(_SIZES.get(t, 0) for t in types) if all(t in _SIZES for t in types) else 0
    gvec = 1
    if size:
        gvec = max(1, min(8, int(prof.get_value("elementwise", "vector_bytes", 16)) // size))
        while gvec & (gvec - 1):         # a power of two: OpenCL's vector sizes 2, 4, 8
            gvec &= gvec - 1
    epi = int(prof.get_value("elementwise", "elems_per_item", 8))
    return gvec, max(gvec, epi // gvec * gvec)


def _aligned(t, vw):
    """Vector loads need the element offset, and the host address for cpu tensors, aligned to vw elements."""
    if t._offset % vw:
        return False
    st = t._storage
    if st.host is None or st._block is not None:    # device buffers and pooled cpu blocks start aligned
        return True
    st.align_host()      # what the launch would do anyway: decide on the memory the kernel will see
    return host_address(st.host) % (vw * t.dtype.itemsize) == 0


def _queued(operands, out):
    """True when a kernel is still queued or running on the runtime of a cpu operand's (or ``out``'s) storage
    (``Runtime.idle``): the numpy form would wait for it, so the op queues its kernel behind it instead."""
    if out is not None:
        rt = out._storage._rt
        if rt is not None and rt.pending:
            return not rt.idle()
    for x in operands:
        if isinstance(x, Tensor):
            rt = x._storage._rt
            if rt is not None and rt.pending:
                return not rt.idle()
    return False


def pointwise(expr, operands, out_dtype, compute, out=None, op_compute=None, shape=None, _kernel=False):
    """Launch ``out = expr(x0, x1, ...)`` elementwise.

    operands: Tensors and Python scalars; ``x{i}`` in ``expr`` is operand i cast to ``compute`` (a dtype),
    or to ``op_compute[i]`` when given. out_dtype: the output dtype (bool outputs store ``expr != 0``).
    out: an existing tensor to write (its shape must equal the broadcast shape), else a new one.
    Returns the output tensor.

    Every launch decision depends only on the operands' dtypes, shapes, strides and devices (and offsets'
    alignment), so it is made once per such signature and kept as a :class:`_Plan`; a repeated call only
    allocates the output, sets the buffers and offsets, and enqueues.

    Small exact ops on cpu storages run in numpy (``_host_code``) while no kernel is queued on their runtime;
    otherwise (``_queued``) they queue their kernel like any other op (``_kernel=True`` forces that path).
    """
    pkey = _plan_key(expr, operands, out_dtype, compute, out, op_compute, shape)
    remake = (expr, out_dtype, compute, op_compute, shape)    # the arguments the key was made of
    if not _kernel:
        plan = _plans.get(pkey)
        if plan is not None:
            res = plan.run(operands, out)
            if res is not None:
                return res
    tens = [x for x in operands if isinstance(x, Tensor)]
    if out is not None:
        dev = out.device
        for t in tens:
            if t.device != dev and not (t.device.type == "cpu" and not t._shape):
                raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two "
                                   f"devices, {dev} and {t.device}!")
    else:
        dev = common_device(tens) if tens else None
    ops = [as_operand(x, dev) for x in operands]
    tens = [x for x in ops if isinstance(x, Tensor)]
    if shape is None:
        shape = broadcast_shapes(*[t._shape for t in tens]) if tens else ()
    if out is None:
        out = Tensor._empty(shape, out_dtype, dev)
    n = 1
    for s in shape:
        n *= s
    if n == 0:
        return out
    cts = op_compute or [compute] * len(ops)
    if (n <= _HOST_MAX or not backend.cpu_device_present()) and out._storage.host is not None and \
            all(t._storage.host is not None for t in tens):    # (any size where no OpenCL CPU device is: GPUs only)
        code = None if _kernel else _host_code(expr, cts, out_dtype)
        if code is not None:
            if all(a is b for a, b in zip(ops, operands)) and pkey not in _plans:
                _plans[pkey] = _Plan(out, shape, code=code, cts=cts, ops=ops, remake=remake)
            if not _queued(tens, out):
                return _host_pointwise(code, ops, cts, out, shape)
            _kernel = True
    spec = []
    for x, ct in zip(ops, cts):
        if isinstance(x, Tensor):
            spec.append(("t", x.dtype.cl, ct.cl))
        else:
            spec.append(("s", ct.cl, ct.cl))
    # strides: output first, then tensor operands
    strides = [_bstrides(out, shape)] + [_bstrides(t, shape) for t in tens]
    cshape, cstr = _collapse(shape, strides)
    if len(cshape) > 1:        # dense operands that all share the output's (permuted) layout: one contiguous run
        order = sorted(range(len(shape)), key=lambda d: -strides[0][d])
        permuted = _collapse([shape[d] for d in order], [[st[d] for d in order] for st in strides])
        if len(permuted[0]) <= 1:
            cshape, cstr = permuted
    rank = len(cshape)
    if rank <= 1 and all((len(s) == 0 or s[0] == 1) for s in cstr):
        rank = 0
    rt = out._storage.runtime()
    vw = gvec = 0
    layout = gpu_layout(rt, [out_dtype.cl] + [s[1] for s in spec if s[0] == "t"]) if rank == 0 else None
    if layout is not None:
        gvec = layout[0]
        if gvec > 1 and not all(_aligned(t, gvec) for t in [out] + tens):
            gvec = 1                      # the same layout element by element
    elif rank == 0 and _vector_safe(expr, spec, out_dtype):
        vw = rt.profile.get_value("elementwise", "vector_width", 1)
        if vw > 1 and not all(_aligned(t, vw) for t in [out] + tens):
            vw = 0
        vw = vw if vw > 1 else 0
    key = (expr, tuple(spec), out_dtype.cl, out_dtype is D.bool, rank, rt.index, vw, gvec)
    entry = _kernels.get(key)
    if entry is None:
        types = {out_dtype.cl} | {s[1] for s in spec} | {s[2] for s in spec}
        argd = [None, np.int64]
        for kind, st, ct in spec:
            argd += [None, np.int64] if kind == "t" else [_NP_SCALAR[ct]]
        argd += [np.int64] * (1 + rank + rank * (1 + len(tens)))
        epi = rt.profile.get_value("elementwise", "elems_per_item", 1) if rank == 0 else 1
        if vw:
            epi = max(vw, (epi // vw) * vw)
        if gvec:
            epi = max(gvec, (layout[1] // gvec) * gvec)
        run = rt.profile.get_value("elementwise", "strided_run", 1) if rank else 1
        k = rt.kernel("elementwise.cl.mako", "ew", argd, operands=tuple(spec), out_type=out_dtype.cl,
                      expr=expr, rank=rank, to_bool=out_dtype is D.bool, types=tuple(sorted(types)), epi=epi,
                      vw=vw, run=run, **({"gvec": gvec} if gvec else {}))
        ls = geometry.local1(rt, rt.profile.get_value("elementwise", "local_size", 64), k)
        entry = _kernels[key] = (k, ls, epi, run)
    k, ls, epi, run = entry
    args = [out._storage.cl_buffer(), out._offset]
    for x, (kind, st, ct) in zip(ops, spec):
        if kind == "t":
            args += [x._storage.cl_buffer(), x._offset]
        else:
            args.append(x)
    args.append(n)
    if rank:
        args += list(cshape)
        for d in range(rank):
            for st in cstr:
                args.append(st[d])
    if rank:
        inner = cshape[-1]
        items = (n // inner) * ((inner + run - 1) // run)
    else:
        items = (n + epi - 1) // epi
    gs = ((items + ls - 1) // ls) * ls
    rt.launch(k, (gs,), (ls,), *args)
    sync = out._storage.host is not None or any(t._storage.host is not None for t in tens)
    if sync:
        rt.finish_if_exposed()   # memory numpy shares is never stale (the one cpu wait rule)
    if all(a is b for a, b in zip(ops, operands)):
        tail = args[2 + len(ops) + len(tens):]       # after out's and each operand's (buffer, offset) or value
        plan = _Plan(out, shape, kernel=k, gs=(gs,), ls=(ls,), tail=tail, vw=max(vw, gvec if gvec > 1 else 0),
                     sync=sync)
        host_plan = _plans.get(pkey) if _kernel else None
        if host_plan is not None and host_plan.code is not None:
            host_plan.kplan = plan      # the queued form of a numpy-form plan
        else:
            _plans[pkey] = plan
    return out


def plan_of(expr, operands, out_dtype, compute):
    """The plan ``pointwise(expr, operands, out_dtype, compute)`` recorded for these operands' signature, or None
    (for callers that keep it next to their own per-signature state)."""
    return _plans.get(_plan_key(expr, operands, out_dtype, compute, None, None, None))


def _plan_key(expr, operands, out_dtype, compute, out, op_compute, shape):
    """What a launch decision depends on: Tensors by (dtype, shape, strides, device), scalars by type."""
    key = [expr, out_dtype, compute, shape, tuple(op_compute) if op_compute else None]
    if out is not None:
        key.append((out.dtype, out._shape, out._stride, out.device))
    for x in operands:
        if isinstance(x, Tensor):
            key.append((x.dtype, x._shape, x._stride, x.device))
        else:
            key.append(type(x))
    return tuple(key)


_plans = {}


class _Plan:
    """A recorded launch of ``pointwise`` for one operand signature (see ``_plan_key``).

    ``run`` repeats it: a new output (or the given one), then the host numpy expression (``code``) or the kernel
    with the recorded sizes and strides. A numpy-form plan runs as its kernel (``kplan``, recorded on first need
    through ``remake``, pointwise's arguments) while a kernel is queued on its operands' runtime. Returns None where
    the signature's plan does not apply to these operands (an offset no longer aligned for the vector path), or the
    runtime's profile is no longer the one the plan was made under (deterministic mode, a configuration swapped in);
    the caller then takes the general path.
    """

    __slots__ = ("shape", "stride", "dtype", "device", "numel", "code", "cts", "reads", "kernel", "gs", "ls", "tail",
                 "vw", "sync", "rt", "np_dtype", "np_strides", "kplan", "remake", "nbytes", "profile")

    def __init__(self, out, shape, code=None, cts=None, ops=(), kernel=None, gs=None, ls=None, tail=None, vw=0,
                 sync=True, remake=None):
        self.shape, self.stride, self.dtype, self.device = shape, contiguous_strides(shape), out.dtype, out.device
        self.numel = math.prod(shape)
        self.code, self.cts = code, cts
        # host reads, per operand: None (a Python scalar), "0d" (a numpy scalar), the element count of a contiguous
        # tensor (a slice of the storage's array, reshaped when not 1-D), or "view" (a strided view)
        self.reads = [None if not isinstance(x, Tensor) else "0d" if not x._shape else
                      math.prod(x._shape) if x._stride == contiguous_strides(x._shape) else "view" for x in ops]
        self.kernel, self.gs, self.ls, self.tail, self.vw, self.sync = kernel, gs, ls, tail, vw, sync
        self.rt = out._storage.runtime() if kernel is not None else None
        self.profile = self.rt.profile if kernel is not None else None
        self.np_dtype = np.dtype(self.dtype.np)
        self.np_strides = tuple(st * self.np_dtype.itemsize for st in self.stride)
        self.kplan, self.remake = None, remake
        self.nbytes = self.numel * out.dtype.itemsize      # > 0: empty launches record no plan

    def run(self, operands, out):
        if self.code is not None:
            if not _queued(operands, out):
                return self._run_host(operands, out)
            kp = self.kplan
            res = kp.run(operands, out) if kp is not None else None
            if res is None:
                expr, out_dtype, compute, op_compute, shape = self.remake
                res = pointwise(expr, list(operands), out_dtype, compute, out=out, op_compute=op_compute,
                                shape=shape, _kernel=True)
            return res
        vw, host, rt = self.vw, self.sync, self.rt  # sync: cpu storages, whose buffers and alignment need host memory
        if rt.profile is not self.profile or vw and out is not None and not _aligned(out, vw):
            return None
        args = []
        for x in operands:
            if isinstance(x, Tensor):
                st = x._storage
                if vw and (x._offset % vw or host and st._block is None and not _aligned(x, vw)):
                    return None
                args.append(st.cl_buffer() if host else st.buf)
                args.append(x._offset)
            else:
                args.append(x)
        if out is None:
            if host:
                st = Storage.empty(self.numel, self.dtype, self.device, True)
            else:           # a device output: Storage.empty's own steps, its runtime and dtype checks done once here
                st = Storage(self.device, self.dtype, self.numel, None, rt.alloc(self.nbytes), rt, self.nbytes)
            out = Tensor._make(st, self.shape, self.stride)
        ost = out._storage
        rt.launch(self.kernel, self.gs, self.ls, ost.cl_buffer() if host else ost.buf, out._offset, *args, *self.tail)
        if host:
            rt.finish_if_exposed()
        return out

    def _run_host(self, operands, out):
        """The numpy form (see ``_host_code``): operands read as the plan recorded, the result cast into out.
        Operands that kernels may still be writing are read after waiting for them (measured: numpy plus the wait
        beats queueing a kernel behind them for these sizes on PoCL)."""
        args = []
        for x, read, ct in zip(operands, self.reads, self.cts):
            if read is None:
                args.append(ct.np.type(x))
                continue
            st = x._storage
            rt = st._rt
            if rt is not None and rt.pending:
                st.host_sync()
            if read.__class__ is int:
                v = st.host[x._offset:x._offset + read]
                if len(x._shape) != 1:
                    v = v.reshape(x._shape)
                if x.dtype is not ct:
                    v = v.astype(ct.np)
            elif read == "0d":
                v = st.host[x._offset]
                if x.dtype is not ct:
                    v = ct.np.type(v)
            else:
                v = x._host_view()
                if x.dtype is not ct:
                    v = v.astype(ct.np)
            args.append(v)
        res = _quietly(self.code, args)
        if self.dtype is D.bool:
            res = np.not_equal(res, 0)
        if out is not None:
            np.copyto(out._host_view(), res, casting="unsafe")
            return out
        if res.__class__ is np.ndarray and res.base is None and res.dtype == self.np_dtype and \
                res.shape == self.shape and res.strides == self.np_strides:
            host = res.reshape(-1)        # numpy's fresh result becomes the storage: nothing else holds it
        else:
            host = np.empty(self.numel, self.dtype.np)
            np.copyto(host if len(self.shape) == 1 else host.reshape(self.shape), res, casting="unsafe")
        return Tensor._make(Storage(self.device, self.dtype, self.numel, host=host), self.shape, self.stride)


def contiguous_like(shape):
    return contiguous_strides(shape)
