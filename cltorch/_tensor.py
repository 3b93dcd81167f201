"""Tensor: metadata (shape, strides, storage offset, dtype, device), Python protocols, host access.

Pure Python: a Tensor is a view (shape, stride, offset in elements) of a :class:`Storage`. Arithmetic
methods are attached by the op modules in ``cltorch/ops`` through the registry; this file holds only
what needs no kernel: metadata, views' bookkeeping, conversion to numpy and Python values, repr.
"""
import math

import numpy as np

from . import _dtype as D
from . import _memory_format as MF
from ._device import canonical, device as Device
from ._storage import Storage
from . import _runtime_settings as _RS

__all__ = ["Tensor", "Size", "contiguous_strides", "set_reducer"]

# How a Tensor pickles: set by the serialization layer above this floor (``set_reducer``), so this file imports
# nothing from upper floors.
_reducer = [None]


def set_reducer(fn):
    """Install ``fn(tensor) -> (callable, args)`` as every Tensor's ``__reduce_ex__``."""
    _reducer[0] = fn


class Size(tuple):
    """The shape of a tensor: a tuple of ints with ``numel()``."""

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n

    def __repr__(self):
        return f"cltorch.Size({list(self)})"

    def __getitem__(self, i):
        r = tuple.__getitem__(self, i)
        return Size(r) if isinstance(i, slice) else r

    def __add__(self, other):
        return Size(tuple(self) + tuple(other))


def contiguous_strides(shape):
    st, acc = [], 1
    for s in reversed(shape):
        st.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(st))


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


class Tensor:
    """A strided view of a storage on a device. See PyTorch's ``torch.Tensor``."""

    __slots__ = ("_storage", "_shape", "_stride", "_offset", "dtype", "device", "_requires_grad", "grad",
                 "grad_fn", "_retains_grad", "_hooks", "_base", "_output_nr", "_post_acc_hooks",
                 "__weakref__", "__dict__")
    __array_priority__ = 1000

    def __init__(self, *args, **kw):
        raise TypeError("use cltorch.tensor(...), cltorch.empty(...) or another factory to make a Tensor")

    @classmethod
    def _make(cls, storage, shape, stride=None, offset=0, requires_grad=False):
        t = object.__new__(cls)
        t._storage = storage
        t._shape = tuple(shape)
        t._stride = contiguous_strides(shape) if stride is None else tuple(stride)
        t._offset = offset
        t.dtype = storage.dtype
        t.device = storage.device
        t._requires_grad = requires_grad
        t.grad = None
        t.grad_fn = None
        t._retains_grad = False
        t._hooks = None
        t._base = None
        t._output_nr = 0
        t._post_acc_hooks = None
        return t

    @classmethod
    def _empty(cls, shape, dtype, device):
        shape = tuple(shape)
        return cls._make(Storage.empty(_prod(shape), dtype, device), shape)

    def _view(self, shape, stride, offset):
        """A tensor sharing this storage (no autograd bookkeeping; ops/views.py records that)."""
        t = Tensor._make(self._storage, shape, stride, offset)
        t._base = self if self._base is None else self._base
        return t

    def _runtime(self):
        return self._storage.runtime()

    # ------------------------------------------------------------------ metadata
    @property
    def shape(self):
        return Size(self._shape)

    def size(self, dim=None):
        if dim is None:
            return Size(self._shape)
        return self._shape[self._wrap(dim)]

    def stride(self, dim=None):
        if dim is None:
            return self._stride
        return self._stride[self._wrap(dim)]

    def dim(self):
        return len(self._shape)

    ndimension = dim

    @property
    def ndim(self):
        return len(self._shape)

    def numel(self):
        return _prod(self._shape)

    nelement = numel

    def storage_offset(self):
        return self._offset

    def element_size(self):
        return self.dtype.itemsize

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def nbytes(self):
        return self.numel() * self.dtype.itemsize

    @property
    def is_cuda(self):
        """False: cltorch has no CUDA devices (``is_cl`` is True on OpenCL devices)."""
        return False

    # devices and layouts cltorch never has: False, as PyTorch answers on a machine without them
    is_xpu = is_mps = is_meta = is_ipu = is_vulkan = is_mtia = is_maia = property(lambda self: False)
    is_quantized = is_mkldnn = is_nested = is_sparse_csr = property(lambda self: False)

    @property
    def is_cpu(self):
        return self.device.type == "cpu"

    @property
    def is_cl(self):
        return self.device.type == "cl"

    @property
    def is_sparse(self):
        return False

    @property
    def layout(self):
        return "strided"

    def is_floating_point(self):
        return self.dtype.is_floating_point

    def is_complex(self):
        """True when the dtype is complex (complex64, complex128)."""
        return self.dtype.is_complex

    def get_device(self):
        return -1 if self.device.type == "cpu" else self.device.index

    def data_ptr(self):
        if self._storage.host is not None:
            return self._storage.host.ctypes.data + self._offset * self.dtype.itemsize
        return id(self._storage) * 1024 + self._offset * self.dtype.itemsize

    def untyped_storage(self):
        return self._storage

    def _wrap(self, dim, ndim=None):
        n = len(self._shape) if ndim is None else ndim
        lo, hi = (-1, 0) if n == 0 else (-n, n - 1)
        if not isinstance(dim, int):
            raise TypeError(f"dim must be an int, got {type(dim).__name__}")
        if dim < lo or dim > hi:
            raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but got {dim})")
        return dim % n if n else 0

    def is_contiguous(self, memory_format=None):
        """True when the strides are the row-major (or, with ``memory_format``, that format's) dense strides;
        size-1 dims may have any stride. ``memory_format=preserve_format`` raises RuntimeError, as PyTorch."""
        if memory_format is not None and memory_format is not MF.contiguous_format:
            return MF.is_contiguous_as(self._shape, self._stride, memory_format)
        acc = 1
        for s, st in zip(reversed(self._shape), reversed(self._stride)):
            if s != 1 and st != acc:
                return 0 in self._shape          # an empty tensor is contiguous, as in PyTorch
            acc *= s
        return True

    def _is_dense(self):
        """True when the elements fill a contiguous span in some order (a permutation of contiguous)."""
        dims = sorted((st, s) for s, st in zip(self._shape, self._stride) if s != 1)
        acc = 1
        for st, s in dims:
            if st != acc:
                return False
            acc *= s
        return True

    def _overlaps(self):
        """True when two indices may reach the same element (a stride-0 or overlapping expand)."""
        dims = sorted((st, s) for s, st in zip(self._shape, self._stride) if s != 1)
        reach = 0
        for st, s in dims:
            if st <= reach:
                return True
            reach += st * (s - 1)
        return False

    # ------------------------------------------------------------------ autograd flags
    @property
    def requires_grad(self):
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        if value and not (self.dtype.is_floating_point or self.dtype.is_complex):
            raise RuntimeError("only Tensors of floating point and complex dtype can require gradients")
        if not value and self.grad_fn is not None:
            raise RuntimeError("you can only change requires_grad flags of leaf variables. If you want to use a "
                               "computed variable in a subgraph that doesn't require differentiation use "
                               "var_no_grad = var.detach().")
        self._requires_grad = bool(value)

    def requires_grad_(self, requires_grad=True):
        self.requires_grad = requires_grad
        return self

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def data(self):
        t = Tensor._make(self._storage, self._shape, self._stride, self._offset)
        return t

    @data.setter
    def data(self, other):
        self._storage, self._shape, self._stride, self._offset = \
            other._storage, other._shape, other._stride, other._offset
        self.dtype, self.device = other.dtype, other.device

    @property
    def _version(self):
        return self._storage.version

    def is_inference(self):
        """PyTorch's ``Tensor.is_inference()``: True when the storage was allocated inside ``inference_mode``
        (views share their base's answer)."""
        return self._storage.inference

    # ------------------------------------------------------------------ host access
    def _host_view(self):
        """A numpy array with this tensor's values. Shares memory for cpu tensors; a copy for device ones."""
        st = self._storage
        isz = self.dtype.itemsize
        if st.host is not None:
            st.host_sync()
            base = st.host
            if not base.size:
                return np.empty(self._shape, self.dtype.np)
            # np.ndarray over the storage's buffer: a view (shares memory), ~1 us against ~20 us for as_strided
            return np.ndarray(self._shape, base.dtype, buffer=base, offset=self._offset * isz,
                              strides=[s * isz for s in self._stride])
        if self.numel() == 0:
            return np.empty(self._shape, self.dtype.np)
        span = 1 + sum((s - 1) * st_ for s, st_ in zip(self._shape, self._stride))
        flat = st.read(self._offset, span)
        return np.lib.stride_tricks.as_strided(flat, self._shape, [s * isz for s in self._stride]).copy()

    def _to_numpy_copy(self):
        a = self._host_view()
        return np.array(a, copy=True) if self._storage.host is not None else a

    def numpy(self, force=False):
        """The values as a numpy array. For a cpu tensor it shares memory, as in PyTorch."""
        if self.requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                               "instead.")
        if self.dtype is D.bfloat16:
            raise TypeError("Got unsupported ScalarType BFloat16")
        if self.device.type != "cpu":
            if force:
                return self._host_view()
            raise TypeError(f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to copy "
                            "the tensor to host memory first.")
        self._storage.exposed = True
        a = self._host_view()
        if self.dtype is D.bool:
            a = a.view(np.bool_)
        return a

    def tolist(self):
        a = self._host_view()
        if self.dtype is D.bool:
            a = a.astype(bool)
        elif self.dtype is D.bfloat16:
            a = a.astype(np.float32)      # exact; Python floats, as PyTorch gives
        return a.tolist()

    def item(self):
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar")
        v = self._host_view().reshape(-1)[0]
        if self.dtype is D.bool:
            return bool(v)
        if self.dtype is D.bfloat16:
            return float(v)
        return v.item()

    def __array__(self, dtype=None, copy=None):
        if self.dtype is D.bfloat16:
            raise TypeError("Got unsupported ScalarType BFloat16")
        if self.device.type == "cpu":
            self._storage.exposed = True      # the array shares the storage's memory, as numpy() does
            a = self._host_view()
        else:
            a = self.detach().cpu().numpy()
        if self.dtype is D.bool:
            a = a.astype(np.bool_)
        return a.astype(dtype) if dtype is not None else a

    def __len__(self):
        if not self._shape:
            raise TypeError("len() of a 0-d tensor")
        return self._shape[0]

    def __iter__(self):
        if not self._shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._shape[0]))

    def __bool__(self):
        if self.numel() != 1:
            raise RuntimeError(f"Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.item())

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self.dtype.is_floating_point or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __complex__(self):
        return complex(self.item())

    def __format__(self, spec):
        if self.dim() == 0 or (spec and self.numel() == 1):
            return format(self.item(), spec)
        return format(repr(self), spec)

    def __hash__(self):
        return id(self)

    def __reduce_ex__(self, proto):
        if _reducer[0] is None:
            raise TypeError("cannot pickle a cltorch Tensor before cltorch.serialization is loaded")
        return _reducer[0](self)

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        with _no_grad():
            t = self.clone()
        t._requires_grad = self._requires_grad
        if self.grad is not None:
            t.grad = self.grad.__deepcopy__(memo)
        memo[id(self)] = t
        return t

    # ------------------------------------------------------------------ pinned memory
    def is_pinned(self):
        return self._storage.pinned

    def pin_memory(self):
        """A cpu copy in page-locked OpenCL host memory (CL_MEM_ALLOC_HOST_PTR), for non_blocking copies: the OpenCL
        CPU device's, or, on a machine without one (GPUs only), the default device's."""
        if self.device.type != "cpu":
            raise RuntimeError(f"cannot pin '{self.device}' memory: only cpu tensors can be pinned")
        if self._storage.pinned:
            return self
        from . import backend
        rt = backend.cpu_runtime() if backend.cpu_device_present() else backend.runtime(backend.default_index())
        n = self.numel()
        buf, raw = rt.pinned_buffer(n * self.dtype.itemsize)
        arr = raw[:n * self.dtype.itemsize].view(self.dtype.np)
        arr[...] = np.ascontiguousarray(self._host_view()).reshape(-1)
        st = Storage(self.device, self.dtype, n, host=arr)
        st._hostbuf = buf
        st.pinned = True
        return Tensor._make(st, self._shape)

    # ------------------------------------------------------------------ shared memory
    def is_shared(self):
        """True when this tensor's storage is in shared memory (``share_memory_``, or received from another
        process through ``cltorch.multiprocessing``). Always False for device (``cl:N``) tensors, which
        cannot be shared."""
        return self._storage.shm is not None

    def share_memory_(self):
        """Moves the storage of this cpu tensor into shared memory, in place, and returns ``self``.

        A no-op when it is shared already. Every view of the storage shares with it; processes that
        receive the tensor through ``cltorch.multiprocessing`` (``Process`` args, ``Queue``, ``Pipe``,
        ``Pool``, ``spawn``) map the same memory instead of copying it, so their in-place writes show
        here. See ``Storage.share_memory_``.

        Raises:
            RuntimeError: for a device (``cl:N``) tensor: OpenCL cannot share device memory between
                processes.
        """
        self._storage.share_memory_()
        return self

    # ------------------------------------------------------------------ repr
    def __repr__(self):
        return _format(self)

    __str__ = __repr__


class _no_grad:
    def __enter__(self):
        from ._dispatch import set_grad_enabled_raw
        self.prev = set_grad_enabled_raw(False)

    def __exit__(self, *a):
        from ._dispatch import set_grad_enabled_raw
        set_grad_enabled_raw(self.prev)


_PO = _RS.print_options


def _format(t):
    a = t._host_view()
    prec = _PO["precision"]           # torch.set_printoptions (cltorch._runtime_settings)
    _np_opts = {"threshold": _RS._np_threshold(), "edgeitems": _PO["edgeitems"]}
    if _PO["linewidth"] != 80:
        _np_opts["max_line_width"] = _PO["linewidth"]
    if t.dtype is D.bfloat16:
        a = a.astype(np.float32)
    if t.dtype is D.bool:
        body = np.array2string(a.astype(bool), separator=", ", prefix="tensor(",
                               formatter={"bool": lambda v: "True" if v else "False"})
    elif t.dtype.is_complex:      # PyTorch's style: each part formatted as a float, "1.5000+2.0000j"
        parts = np.concatenate([a.real.reshape(-1), a.imag.reshape(-1)])
        fin = parts[np.isfinite(parts)]
        if fin.size and np.all(fin == np.round(fin)) and np.abs(fin).max() < 1e8:
            f1 = lambda v: f"{v:.0f}." if np.isfinite(v) else str(v)  # noqa: E731
        else:
            big = fin.size and (np.abs(fin).max() >= 1e8 or ((fin != 0).any() and np.abs(fin[fin != 0]).min() < 1e-4))
            big = big if _PO["sci_mode"] is None else _PO["sci_mode"]
            f1 = (lambda v: f"{v:.{prec}e}") if big else (lambda v: f"{v:.{prec}f}")  # noqa: E731
        cfmt = lambda v: f1(v.real) + ("-" if np.signbit(v.imag) else "+") + f1(abs(v.imag)) + "j"  # noqa: E731
        body = np.array2string(a, separator=", ", prefix="tensor(", formatter={"complex_kind": cfmt},
                               **_np_opts)
    elif t.dtype.is_floating_point:
        fin = a[np.isfinite(a)] if a.size else a
        if _PO["sci_mode"] is not True and fin.size and np.all(fin == np.round(fin)) and np.abs(fin).max() < 1e8:
            fmt = lambda v: (f"{v:.0f}." if np.isfinite(v) else str(v).replace("inf", "inf"))  # noqa: E731
        else:
            nz = np.abs(fin[fin != 0])     # PyTorch's rule: max > 1e8, min < 1e-4 or max/min > 1000
            big = fin.size and (np.abs(fin).max() >= 1e8 or (bool(nz.size) and (
                nz.min() < 1e-4 or nz.max() / nz.min() > 1000.0)))
            sci = _PO["sci_mode"]
            big = big if sci is None else sci
            fmt = (lambda v: f"{v:.{prec}e}") if big else (lambda v: f"{v:.{prec}f}")
        body = np.array2string(a, separator=", ", prefix="tensor(", formatter={"float_kind": fmt},
                               **_np_opts)
    else:
        body = np.array2string(a, separator=", ", prefix="tensor(", **_np_opts)
    extras = []
    if t.device.type != "cpu":
        extras.append(f"device='{t.device}'")
    default_dt = {D.get_default_dtype(), D.int64, D.bool, D.default_complex()}
    if t.dtype not in default_dt or (t.numel() == 0 and t.dtype is not D.get_default_dtype()):
        extras.append(f"dtype={t.dtype!r}")
    if t.numel() == 0 and t.dim() != 1:
        extras.append(f"size={tuple(t.shape)}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    return "tensor(" + body + "".join(", " + e for e in extras) + ")"


def _is_tensor(x):
    return isinstance(x, Tensor)


# re-exported helpers used by factories
def _canonical(d):
    return canonical(d)


Device = Device
math = math
