"""The Tensor methods PyTorch has that the other op modules do not attach: aliases, in-place forms, in-place
metadata ops, host callables, legacy constructors, and clear errors for layouts cltorch has no support for.

Every in-place form that writes values goes through pointwise's one in-place mechanism (``_inplace_via``: under
autograd the op runs out of place and ``autograd.inplace_rebase`` writes it back and makes self the output, which
raises PyTorch's RuntimeError for a leaf that requires grad; without autograd the result's dtype and shape are
checked against self's with ``check_inplace`` and copied in, bumping the version counter). Aliases of in-place
methods that already exist (``divide_`` -> ``div_``) forward to them. The in-place metadata ops (``squeeze_``,
``t_``, ``as_strided_``...) take the out-of-place view's geometry and, under autograd, its grad_fn.
"""
import warnings

from .. import _dtype as D
from .._dispatch import is_grad_enabled
from .._storage import Storage
from .._tensor import Tensor, contiguous_strides
from ._util import method, size_args
from . import pointwise as P
from . import linalg as L
from . import views as V
from .pointwise import _inplace_via

__all__ = []


def _named(name, fn):
    fn.__name__ = fn.__qualname__ = name
    return fn


def _forward(alias, target):
    """``Tensor.alias`` calls ``Tensor.target`` (looked up at call time, so a later wrapper of target is used)."""
    f = _named(alias, lambda self, *args, **kw: getattr(self, target)(*args, **kw))
    f.__doc__ = f"PyTorch's ``Tensor.{alias}``: the alias of ``Tensor.{target}``."
    method(alias, f)


def _via(name, fn):
    """``Tensor.name_``: ``fn(self, ...)`` written into self through pointwise's in-place mechanism."""
    g = _inplace_via(_named(name, lambda self, *args, **kw: fn(self, *args, **kw)))
    g.__doc__ = (f"PyTorch's ``Tensor.{name}_``: ``self.{name}(...)`` written into self; the result's dtype must "
                 "cast to self's (RuntimeError otherwise). Returns self.")
    method(name + "_", _named(name + "_", g))


# ----------------------------------------------------------------------------- out-of-place aliases and forms
for _a, _t in (("absolute", "abs"), ("arccos", "acos"), ("arccosh", "acosh"), ("arcsin", "asin"),
               ("arcsinh", "asinh"), ("arctan", "atan"), ("arctanh", "atanh"), ("fix", "trunc"), ("ger", "outer")):
    _forward(_a, _t)

method("float_power", lambda self, exponent: P.float_power(self, exponent))
method("addbmm", lambda self, batch1, batch2, *, beta=1, alpha=1: L.addbmm(self, batch1, batch2, beta=beta,
                                                                           alpha=alpha))
method("addmv", lambda self, mat, vec, *, beta=1, alpha=1: L.addmv(self, mat, vec, beta=beta, alpha=alpha))


def hardshrink(input, lambd=0.5):  # noqa: A002
    """PyTorch's ``hardshrink``: ``x`` where ``|x| > lambd`` (strictly), else 0; same dtype and shape."""
    return P.where((input > lambd).logical_or(input < -lambd), input, 0)


def prelu(input, weight):  # noqa: A002
    """PyTorch's ``prelu``: ``x`` where ``x > 0``, else ``weight * x``. ``weight`` has 1 entry, or C entries
    for C = input.shape[1] (input.shape[0] for a 1-d input), of input's dtype. RuntimeError for any other count
    or dtype."""
    if weight.dtype is not input.dtype:
        raise RuntimeError(f"prelu: Type promoting not supported. Got {input.dtype.name.capitalize()} and "
                           f"{weight.dtype.name.capitalize()}")
    if weight.numel() == 1:
        w = weight.reshape(())
    else:
        if input.dim() == 0:
            raise RuntimeError("Not allow zero-dim input tensor.")
        ch = 1 if input.dim() >= 2 else 0
        if weight.numel() != input.shape[ch]:
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                               f"{weight.numel()} and channel size = {input.shape[ch]}.")
        w = weight.reshape((-1,) + (1,) * (input.dim() - ch - 1))
    return P.where(input > 0, input, input * w)


method("hardshrink", hardshrink)
method("prelu", prelu)


def _histogram(self, bins=100, *, range=None, weight=None, density=False):  # noqa: A002
    from .aten_extras import histogram
    return histogram(self, bins, range=range, weight=weight, density=density)


method("histogram", _histogram)
method("narrow_copy", lambda self, dim, start, length: V.clone(self.narrow(dim, start, length)).contiguous())


# ----------------------------------------------------------------------------- predicates and metadata
def _is_nonzero(self):
    """PyTorch's ``Tensor.is_nonzero``: the truth of a one-element tensor; RuntimeError for 0 or >1 elements."""
    n = self.numel()
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(self.item())


def _dim_order(self, *, ambiguity_check=False):
    """PyTorch's ``Tensor.dim_order``: the dims from outermost to innermost (by stride, descending; ties keep
    dim order). ``ambiguity_check=True`` raises RuntimeError when the order is not unique: two dims share a
    stride, or a dim has size 1 (its stride is arbitrary); a list of memory formats there raises
    NotImplementedError."""
    if not isinstance(ambiguity_check, bool):
        raise NotImplementedError("dim_order(ambiguity_check=<list of memory formats>) is not supported by "
                                  "cltorch: pass True or False")
    st = self._stride
    if ambiguity_check and (len(set(st)) != len(st) or 1 in self._shape):
        raise RuntimeError("The tensor does not have unique dim order, or cannot map to exact one of the given "
                           "memory formats.")
    return tuple(sorted(range(len(st)), key=lambda i: -st[i]))


def _is_set_to(self, tensor):
    """True when both tensors view the same storage with the same offset, sizes and strides."""
    return (self._storage is tensor._storage and self._offset == tensor._offset and self._shape == tensor._shape
            and self._stride == tensor._stride)


def _as_subclass(self, cls):
    """PyTorch's ``Tensor.as_subclass(cls)``: a ``cls`` instance over the same storage and geometry that stays in
    self's autograd graph. TypeError when cls is not a subclass of Tensor."""
    if not (isinstance(cls, type) and issubclass(cls, Tensor)):
        raise TypeError(f"as_subclass: expected a subclass of cltorch.Tensor, got {cls!r}")
    t = cls._make(self._storage, self._shape, self._stride, self._offset, self._requires_grad)
    t.grad_fn, t._output_nr, t._base = self.grad_fn, self._output_nr, self._base
    return t


def _record_stream(self, stream):
    """PyTorch's ``Tensor.record_stream``: keeps the memory from reuse by another stream's work until that work
    ends. cltorch runs each device's work on one in-order queue and frees a Storage only when no tensor refers
    to it and its queued work is done, so the guarantee already holds; returns None."""
    return None


def _module_load(self, other, assign=False):
    """PyTorch's ``Tensor.module_load``: what ``Module.load_state_dict`` puts in place of self: ``other``
    detached (``assign=True``) or self with other's values copied in (detached)."""
    if assign:
        return other.detach()
    from .._dispatch import _state
    prev = _state.enabled
    _state.enabled = False
    try:
        self.copy_(other)
    finally:
        _state.enabled = prev
    return self.detach()


method("is_neg", lambda self: False)      # cltorch has no lazy negation bit
method("is_signed", lambda self: self.dtype.is_signed)
method("is_nonzero", _is_nonzero)
method("is_same_size", lambda self, other: self._shape == other._shape)
method("dim_order", _dim_order)
method("is_set_to", _is_set_to)
method("as_subclass", _as_subclass)
method("record_stream", _record_stream)
method("module_load", _module_load)
method("const_data_ptr", lambda self: self.data_ptr())


class TypedStorage:
    """What ``Tensor.storage()`` returns: PyTorch's TypedStorage face of a tensor's whole storage (a new wrapper
    per call, as PyTorch's). ``size()``/``len()`` count elements, ``nbytes()`` bytes; ``data_ptr()`` is the
    address ``Tensor.data_ptr()`` counts from; ``tolist()``/indexing read the values (a device-to-host copy);
    ``untyped()`` gives the Storage that ``Tensor.untyped_storage()`` returns."""

    def __init__(self, storage):
        self._storage = storage

    dtype = property(lambda self: self._storage.dtype)
    device = property(lambda self: self._storage.device)

    def size(self):
        return self._storage.size

    __len__ = size

    def element_size(self):
        return self._storage.dtype.itemsize

    def nbytes(self):
        return self._storage.size * self._storage.dtype.itemsize

    def data_ptr(self):
        return Tensor._make(self._storage, (self._storage.size,)).data_ptr()

    def untyped(self):
        return self._storage

    def tolist(self):
        return Tensor._make(self._storage, (self._storage.size,)).tolist()

    def __getitem__(self, i):
        return Tensor._make(self._storage, (self._storage.size,))[i].item()

    def __repr__(self):
        return f"cltorch.TypedStorage(dtype={self.dtype}, device={self.device}) of size {self.size()}"


method("storage", lambda self: TypedStorage(self._storage))
Tensor.output_nr = property(lambda self: self._output_nr, doc="Which output of its grad_fn this tensor is.")


def _new(self, *args, device=None):
    """PyTorch's legacy ``Tensor.new``: ``new()`` an empty 1-d tensor, ``new(2, 3)`` / ``new(Size)`` an
    uninitialized tensor of that shape, ``new(sequence)`` a tensor of that data, ``new(tensor)`` that tensor
    (same dtype required) -- all of self's dtype, on self's device unless ``device`` is given. TypeError for a
    Python number or a tensor of another dtype."""
    from .creation import empty, tensor as _tensor
    dev = self.device if device is None else device
    if not args:
        return empty((0,), dtype=self.dtype, device=dev)
    if len(args) == 1 and isinstance(args[0], Tensor):
        t = args[0]
        if t.dtype is not self.dtype:
            raise TypeError(f"new(): expected a tensor of dtype {self.dtype}, got {t.dtype}")
        return t if device is None else t.to(dev)
    from .._tensor import Size
    if all(isinstance(a, int) and not isinstance(a, bool) for a in args) or \
            (len(args) == 1 and isinstance(args[0], Size)):
        return empty(size_args(args), dtype=self.dtype, device=dev)
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        return _tensor(args[0], dtype=self.dtype, device=dev)
    raise TypeError(f"new(): data must be a sequence (got {type(args[0]).__name__})")


method("new", _new)


def _resize_check(self, sizes):
    n = 1
    for s in sizes:
        n *= s
    if n != self.numel():
        raise RuntimeError(f"requested resize to {'x'.join(map(str, sizes))} ({n} elements in total), but the given "
                           f"tensor has a size of {'x'.join(map(str, self._shape))} ({self.numel()} elements). "
                           "autograd's resize can only change the shape of a given tensor, while preserving the "
                           "number of elements.")


def _resize(self, *sizes):
    """PyTorch's deprecated out-of-place ``Tensor.resize``: a reshape to ``sizes`` (differentiable); warns
    UserWarning; RuntimeError when the element count changes."""
    sizes = size_args(sizes)
    warnings.warn("non-inplace resize is deprecated", UserWarning, stacklevel=2)
    _resize_check(self, sizes)
    return self.contiguous().view(sizes)


def _resize_as(self, tensor):
    """PyTorch's deprecated ``Tensor.resize_as``: ``self.resize(tensor.size())``."""
    sizes = tuple(tensor._shape)
    warnings.warn("non-inplace resize_as is deprecated", UserWarning, stacklevel=2)
    _resize_check(self, sizes)
    return self.contiguous().view(sizes)


method("resize", _resize)
method("resize_as", _resize_as)


# ----------------------------------------------------------------------------- in-place forms that write values
for _a, _t in (("absolute_", "abs_"), ("arccos_", "acos_"), ("arccosh_", "acosh_"), ("arcsin_", "asin_"),
               ("arcsinh_", "asinh_"), ("arctan_", "atan_"), ("arctanh_", "atanh_"), ("fix_", "trunc_"),
               ("negative_", "neg_"), ("divide_", "div_"), ("multiply_", "mul_"), ("subtract_", "sub_"),
               ("greater_", "gt_"), ("greater_equal_", "ge_"), ("less_", "lt_"), ("less_equal_", "le_"),
               ("not_equal_", "ne_")):
    _forward(_a, _t)

for _n in ("clamp_max", "heaviside", "hypot", "logical_and", "logical_or", "logical_xor", "logical_not",
           "mvlgamma", "nan_to_num", "nextafter", "sgn"):
    _via(_n, (lambda n: lambda self, *args, **kw: getattr(self, n)(*args, **kw))(_n))
_via("addmm", L.addmm)
_via("addmv", L.addmv)
_via("addbmm", L.addbmm)
_via("baddbmm", L.baddbmm)
_float_power_via = _inplace_via(_named("float_power", lambda self, exponent: P.float_power(self, exponent)))


def _float_power_(self, exponent):
    """PyTorch's ``Tensor.float_power_``: float_power computes in float64 (complex128), so self must have that
    dtype; RuntimeError otherwise (float32 included, as in PyTorch)."""
    cx = self.dtype.is_complex or (isinstance(exponent, Tensor) and exponent.dtype.is_complex) or \
        isinstance(exponent, complex)
    need = D.complex128 if cx else D.float64
    if self.dtype is not need:
        names = {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long", "int32": "Int",
                 "complex64": "ComplexFloat", "complex128": "ComplexDouble"}     # PyTorch's scalar type names
        raise RuntimeError(f"the base given to float_power_ has dtype {names.get(self.dtype.name, self.dtype.name)} "
                           f"but the operation's result requires dtype {names[need.name]}")
    return _float_power_via(self, exponent)


method("float_power_", _float_power_)
_conj_physical_via = _inplace_via(_named("conj_physical", lambda self: self.conj_physical()))
method("conj_physical_", _named("conj_physical_", lambda self: _conj_physical_via(self) if self.dtype.is_complex
                                else self))     # a real tensor is its own conjugate


def _fill_diagonal_(self, fill_value, wrap=False):
    """PyTorch's ``Tensor.fill_diagonal_``: writes ``fill_value`` at ``[i, i, ..., i]``; a tall 2-d matrix with
    ``wrap=True`` restarts the diagonal every ``cols + 1`` rows. RuntimeError for fewer than 2 dims, or more than 2
    of unequal sizes. Works through a strided view of self, so autograd sees a view's in-place fill."""
    if self.dim() < 2:
        raise RuntimeError("dimensions must larger than 1")
    h, w = self._shape[0], self._shape[1]
    if self.dim() > 2 and any(s != h for s in self._shape):
        raise RuntimeError("all dimensions of input must be of equal length")
    st = sum(self._stride)
    n = min(h, w) if self.dim() == 2 else h
    V.as_strided(self, (n,), (st,), self._offset).fill_(fill_value)
    if wrap and self.dim() == 2 and h > w + 1:
        step = w + 1
        rest = (self.numel() + step - 1) // step - n
        if rest > 0:    # from row w + 1, column 0: the rows below the first square restart the diagonal
            V.as_strided(self, (rest,), (st,), self._offset + self._stride[0] * step).fill_(fill_value)
    return self


method("fill_diagonal_", _fill_diagonal_)


# ----------------------------------------------------------------------------- host callables (map_, apply_)
def _host_map(self, name, fn, others):
    if self.requires_grad:
        raise RuntimeError(f"Can't call {name}() on Variable that requires grad. Use var.detach().{name}() instead.")
    from .creation import tensor as _tensor
    cols = [self.detach().cpu().reshape(-1).tolist()]
    for o in others:
        cols.append(o.detach().expand(self._shape).cpu().reshape(-1).tolist())
    vals = [fn(*xs) for xs in zip(*cols)]
    for v in vals:
        if not isinstance(v, (int, float, complex)) and not hasattr(v, "__float__"):
            raise TypeError(f"{name}(): the callable must return a number, not {type(v).__name__}")
    if not self.dtype.is_floating_point and not self.dtype.is_complex and self.dtype is not D.bool:
        vals = [int(v) for v in vals]   # PyTorch truncates a float result into an integer tensor
    res = _tensor(vals, dtype=self.dtype).reshape(self._shape)
    return self.copy_(res)


def _apply_(self, callable):  # noqa: A002
    """PyTorch's ``Tensor.apply_``: ``callable(x)`` for every element, on the host (Python values from a copy;
    the results are written back into self, on any device). Slow: one Python call per element. RuntimeError
    when self requires grad."""
    return _host_map(self, "apply_", callable, ())


def _map_(self, tensor, callable):  # noqa: A002
    """PyTorch's ``Tensor.map_``: ``self[i] = callable(self[i], tensor[i])`` on the host, ``tensor`` broadcast to
    self's shape (RuntimeError if it cannot be). RuntimeError when self requires grad."""
    return _host_map(self, "map_", callable, (tensor,))


def _map2_(self, x, y, callable):  # noqa: A002
    """PyTorch's ``Tensor.map2_``: ``self[i] = callable(self[i], x[i], y[i])`` on the host, x and y broadcast to
    self's shape. RuntimeError when self requires grad."""
    return _host_map(self, "map2_", callable, (x, y))


method("apply_", _apply_)
method("map_", _map_)
method("map2_", _map2_)


# ----------------------------------------------------------------------------- in-place metadata ops
def _leaf_check(self):
    if is_grad_enabled() and self._requires_grad and self.grad_fn is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")


def _meta_inplace(name, view_fn):
    """``Tensor.name``: self takes the geometry of ``view_fn(self, ...)`` (a view of self) and, under autograd,
    its grad_fn -- PyTorch's in-place view ops. The version counter is bumped."""
    def f(self, *args, **kw):
        _leaf_check(self)
        v = view_fn(self, *args, **kw)
        self._shape, self._stride, self._offset = v._shape, v._stride, v._offset
        if v.grad_fn is not None:
            self.grad_fn, self._output_nr, self._requires_grad = v.grad_fn, v._output_nr, True
        self._storage.version += 1
        return self
    f.__doc__ = f"PyTorch's ``Tensor.{name}``: the out-of-place view's geometry taken by self; returns self."
    method(name, _named(name, f))


def _as_strided_checked(self, size, stride, storage_offset=None):
    size, stride = tuple(size), tuple(stride)
    off = self._offset if storage_offset is None else int(storage_offset)
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape: {len(size)} sizes, {len(stride)} strides")
    if off < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {off}")
    need = 0 if 0 in size else off + 1 + sum((n - 1) * s for n, s in zip(size, stride))
    if need > self._storage.size:
        isz = self.dtype.itemsize
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {off}, and "
                           f"itemsize {isz} requiring a storage size of {need * isz} are out of bounds for storage "
                           f"of size {self._storage.size * isz}")
    return V.as_strided(self, size, stride, off)


_meta_inplace("squeeze_", lambda self, dim=None: self.squeeze() if dim is None else self.squeeze(dim))
_meta_inplace("unsqueeze_", lambda self, dim: self.unsqueeze(dim))
_meta_inplace("t_", lambda self: self.t())
_meta_inplace("transpose_", lambda self, dim0, dim1: self.transpose(dim0, dim1))
_meta_inplace("swapaxes_", lambda self, axis0, axis1: self.transpose(axis0, axis1))
_meta_inplace("swapdims_", lambda self, dim0, dim1: self.transpose(dim0, dim1))
_meta_inplace("as_strided_", _as_strided_checked)


def _set_(self, source=None, storage_offset=0, size=None, stride=None):
    """PyTorch's ``Tensor.set_``: self views ``source``'s memory. ``set_()``: an empty storage (shape (0,));
    ``set_(tensor)``: the tensor's storage, offset, sizes and strides; ``set_(storage, offset=0, size=None,
    stride=None)``: that storage (``Tensor.untyped_storage()`` or ``Tensor.storage()``), the whole of it by
    default. RuntimeError for a dtype or device mismatch, or a geometry past the storage's end (PyTorch grows the
    storage there; cltorch does not), or for a leaf that requires grad; NotImplementedError for a tensor with
    autograd history."""
    _leaf_check(self)
    if is_grad_enabled() and self.grad_fn is not None:
        raise NotImplementedError("set_() on a tensor with autograd history is not supported by cltorch: call it "
                                  "on a detached tensor")
    if source is None:
        st, shape, strides, off = Storage.empty(0, self.dtype, self.device), (0,), (1,), 0
    elif isinstance(source, Tensor):
        st, shape, strides, off = source._storage, source._shape, source._stride, source._offset
    elif isinstance(source, (Storage, TypedStorage)):
        st, off = (source._storage if isinstance(source, TypedStorage) else source), int(storage_offset)
        shape = (st.size - off,) if size is None else size_args((size,) if isinstance(size, int) else size)
        strides = contiguous_strides(shape) if stride is None else tuple(stride)
    else:
        raise TypeError(f"set_(): expected a Tensor or a Storage, got {type(source).__name__}")
    if st.dtype is not self.dtype:
        raise RuntimeError(f"Could not set tensor of type {st.dtype} to a tensor of type {self.dtype}")
    if st.device != self.device:
        raise RuntimeError(f"Attempted to set the storage of a tensor on device \"{self.device}\" to a storage on "
                           f"different device \"{st.device}\"")
    if len(strides) != len(shape):
        raise RuntimeError(f"mismatch in length of strides and shape: {len(shape)} sizes, {len(strides)} strides")
    need = 0 if 0 in shape else off + 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    if off < 0 or need > st.size:
        raise RuntimeError(f"set_: sizes {list(shape)}, strides {list(strides)}, storage offset {off} reach past "
                           f"the storage's {st.size} elements (cltorch does not grow a storage in set_)")
    self._storage, self._shape, self._stride, self._offset = st, tuple(shape), tuple(strides), off
    self._base = None
    st.version += 1
    return self


method("set_", _set_)


# ----------------------------------------------------------------------------- layouts and devices cltorch lacks
def _unsupported(name, feature):
    def f(self, *args, **kw):
        raise NotImplementedError(f"Tensor.{name}: {feature} not supported by cltorch")
    f.__doc__ = f"Raises NotImplementedError: {feature} not supported by cltorch."
    method(name, _named(name, f))


_SPARSE = "sparse tensors are"
for _n in ("to_sparse", "to_sparse_coo", "to_sparse_csr", "to_sparse_csc", "to_sparse_bsr", "to_sparse_bsc",
           "_to_sparse", "_to_sparse_csr", "_to_sparse_csc", "_to_sparse_bsr", "_to_sparse_bsc", "indices",
           "values", "_indices", "_values", "_nnz", "_dimI", "_dimV", "crow_indices", "col_indices", "ccol_indices",
           "row_indices", "coalesce", "is_coalesced", "_coalesced_", "sparse_mask", "smm", "sspaddmm",
           "sparse_resize_", "sparse_resize_and_clear_", "resize_as_sparse_"):
    _unsupported(_n, _SPARSE)
for _n in ("int_repr", "q_scale", "q_zero_point", "q_per_channel_scales", "q_per_channel_zero_points",
           "q_per_channel_axis", "qscheme"):
    _unsupported(_n, "quantized tensors are")
_unsupported("to_mkldnn", "MKL-DNN tensors are")
_unsupported("to_padded_tensor", "nested tensors are")
_unsupported("xpu", "XPU devices are")
_unsupported("ipu", "IPU devices are")
_unsupported("mtia", "MTIA devices are")
method("to_dense", lambda self, dtype=None, *, masked_grad=None: self if dtype is None else self.to(dtype))
method("sparse_dim", lambda self: 0)              # a strided tensor: every dim is dense, as PyTorch answers
method("dense_dim", lambda self: self.dim())
method("dequantize", lambda self: self)           # PyTorch: a non-quantized tensor dequantizes to itself
Tensor.is_xla = property(lambda self: False)
Tensor.is_distributed = lambda self: False
