"""dtypes: the ten element types, the complex dtypes' names, PyTorch's type promotion, finfo and iinfo.

Each :class:`dtype` knows its numpy dtype (host storage) and its OpenCL C type name (kernels).
``bfloat16`` is stored as its 16-bit patterns; on the host that is ``ml_dtypes.bfloat16`` (a numpy dtype
whose casts round to nearest even, as PyTorch's), in kernels a ``ushort`` that the elementwise template
widens to float on load and rounds back on store (OpenCL C has no bfloat16 type).
``complex64`` (and ``complex128``, where the device has fp64) are storage dtypes: numpy complex on the host,
``float2`` / ``double2`` (interleaved re, im) in kernels. Their arithmetic is lowered onto real ops over
``view_as_real`` views (``cltorch/ops/complex.py``). ``complex32`` is a name only: asking for it raises
NotImplementedError.
Promotion follows PyTorch's ``result_type``: tensors of higher dimension win over 0-d tensors,
which win over Python scalars, and only the *category* (bool < integer < floating) of a
lower-priority operand can raise the result's type.
"""
import numpy as np

import ml_dtypes

__all__ = ["dtype", "float32", "float16", "float64", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
           "float", "half", "double", "long", "int", "short", "complex32", "complex64", "complex128", "chalf",
           "cfloat", "cdouble", "finfo", "iinfo", "get_default_dtype", "set_default_dtype", "promote_types",
           "result_type", "is_complex", "default_complex"]

_builtin_bool = bool
_builtin_float = float
_builtin_int = int


class dtype:
    """An element type. Compare with ``is`` or ``==``; ``repr`` is ``cltorch.float32`` etc."""

    __slots__ = ("name", "np", "cl", "itemsize", "is_floating_point", "is_signed", "_rank", "_kind")

    def __init__(self, name, np_dtype, cl_type, kind, rank):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.cl = cl_type
        self.itemsize = self.np.itemsize
        self._kind = kind            # 0 bool, 1 integer, 2 floating
        self._rank = rank            # order within the lattice used for promotion
        self.is_floating_point = kind == 2
        self.is_signed = name not in ("bool", "uint8")

    @property
    def is_complex(self):
        return self._kind == 3

    def to_real(self):
        return _REAL_OF.get(self.name, self)

    def to_complex(self):
        """The complex dtype with this floating dtype's parts (float16 and bfloat16: complex32, a name only)."""
        if self._kind == 3:
            return self
        if self is bfloat16:
            return complex32
        for c, r in _REAL_OF.items():
            if r is self:
                return _NAMES[c]
        raise RuntimeError(f"to_complex is only defined for floating dtypes, got {self}")

    def __repr__(self):
        return "cltorch." + self.name

    def __reduce__(self):
        return (_by_name, (self.name,))


float32 = dtype("float32", np.float32, "float", 2, 11)
float16 = dtype("float16", np.float16, "half", 2, 10)
float64 = dtype("float64", np.float64, "double", 2, 12)
int64 = dtype("int64", np.int64, "long", 1, 6)
int32 = dtype("int32", np.int32, "int", 1, 5)
int16 = dtype("int16", np.int16, "short", 1, 4)
int8 = dtype("int8", np.int8, "char", 1, 2)
uint8 = dtype("uint8", np.uint8, "uchar", 1, 3)
bool = dtype("bool", np.bool_, "uchar", 0, 0)  # noqa: A001 - PyTorch's name
bfloat16 = dtype("bfloat16", ml_dtypes.bfloat16, "bfloat16", 2, 10)
# complex dtypes (kind 3): complex64 / complex128 are stored as float2 / double2; complex32 is a name only (its numpy
# dtype is kept for itemsize)
complex32 = dtype("complex32", np.float32, "none", 3, 20)        # two float16 halves: 4 bytes
complex64 = dtype("complex64", np.complex64, "float2", 3, 21)
complex128 = dtype("complex128", np.complex128, "double2", 3, 22)

float = float32   # noqa: A001
half = float16
double = float64
long = int64
int = int32       # noqa: A001
short = int16
chalf = complex32
cfloat = complex64
cdouble = complex128

ALL = (float32, float16, float64, bfloat16, int64, int32, int16, int8, uint8, bool)
COMPLEX = (complex32, complex64, complex128)
_NAMES = {d.name: d for d in ALL + COMPLEX}
_FROM_NP = {d.np: d for d in ALL + (complex64, complex128)}
_REAL_OF = {"complex32": float16, "complex64": float32, "complex128": float64}


def _no_complex(d):
    return NotImplementedError(f"{d} tensors are not supported: cltorch stores complex64 and complex128 only "
                               "(no complex32 / ComplexHalf storage)")


def default_complex():
    """The complex dtype of the default float dtype (complex64 for float32, complex128 for float64)."""
    return complex128 if _default[0] is float64 else complex64


def is_complex(t):
    """PyTorch's ``torch.is_complex(input)``: True when ``input``'s dtype is complex64 or complex128.
    Raises TypeError when ``input`` is not a tensor."""
    d = getattr(t, "dtype", None)
    if not isinstance(d, dtype) or not hasattr(t, "dim"):
        raise TypeError(f"is_complex(): argument 'input' (position 1) must be Tensor, not {type(t).__name__}")
    return d.is_complex


def _by_name(name):
    return _NAMES[name]


def from_numpy_dtype(npd):
    """The cltorch dtype for a numpy dtype; raises TypeError for unsupported ones."""
    npd = np.dtype(npd)
    try:
        return _FROM_NP[npd]
    except KeyError:
        if npd.kind == "c":
            raise _no_complex(f"numpy {npd}") from None
        if npd == np.uint16 or npd == np.uint32 or npd == np.uint64:
            raise TypeError(f"can't convert np.ndarray of type numpy.{npd}. The only supported types are: "
                            "float64, float32, float16, int64, int32, int16, int8, uint8, and bool.") from None
        raise TypeError(f"unsupported numpy dtype {npd}") from None


def host_values(a, d):
    """``a`` (a numpy array or scalar) ready to be stored as dtype ``d`` by a numpy cast: values headed for
    bfloat16 pass through float32 first, as PyTorch converts (double -> float -> bfloat16, each rounding to
    nearest even), where ml_dtypes would round a double once."""
    if d is bfloat16 and np.asarray(a).dtype not in (np.float32, bfloat16.np, np.bool_, np.float16):
        return np.asarray(a, dtype=np.float32)
    return a


def to_dtype(d):
    """Accepts a cltorch dtype, a numpy dtype, a Python type or a name; returns a cltorch dtype. Raises
    NotImplementedError for complex32 (no ComplexHalf storage)."""
    if isinstance(d, dtype):
        if d is complex32:
            raise _no_complex(d)
        return d
    if d is _builtin_float:
        return get_default_dtype()
    if d is _builtin_int:
        return int64
    if d is _builtin_bool:
        return bool
    if d is complex:
        return default_complex()
    if isinstance(d, str) and d in _NAMES:
        return to_dtype(_NAMES[d])
    return from_numpy_dtype(d)


_default = [float32]


def get_default_dtype():
    """The default floating dtype (float32 unless changed by :func:`set_default_dtype`)."""
    return _default[0]


def set_default_dtype(d):
    """Sets the default floating dtype. Raises TypeError for a non-floating dtype."""
    d = to_dtype(d)
    if not d.is_floating_point:
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _default[0] = d


# The promotion lattice: for two dtypes of the same category the larger wins; uint8 with a signed
# integer gives the next signed type that holds both (PyTorch: uint8 + int8 -> int16), and float16 with
# bfloat16 gives float32 (neither holds the other).
def promote_types(a, b):
    """PyTorch's ``promote_types`` for two dtypes."""
    a, b = to_dtype(a), to_dtype(b)
    if a is b:
        return a
    if a._kind == 3 or b._kind == 3:      # complex: the complex type of the promoted real parts
        ra, rb = a.to_real(), b.to_real()
        r = promote_types(ra, rb)
        return r.to_complex() if r.is_floating_point else (a if a._kind == 3 else b)
    if a._kind != b._kind:
        return a if a._kind > b._kind else b
    if a._kind == 1 and {a, b} == {uint8, int8}:
        return int16
    if a._rank == b._rank:          # float16 and bfloat16
        return float32
    return a if a._rank > b._rank else b


def _category(x):
    if isinstance(x, _builtin_bool):
        return 0
    if isinstance(x, _builtin_int):
        return 1
    if isinstance(x, _builtin_float):
        return 2
    if isinstance(x, (np.bool_,)):
        return 2        # PyTorch reads a numpy bool scalar argument as a float: int32 + np.True_ is float32
    if isinstance(x, np.integer):
        return 1
    if isinstance(x, np.floating):
        return 2
    if isinstance(x, (complex, np.complexfloating)):
        return 3
    raise TypeError(f"unsupported operand type {type(x).__name__}")


def result_type(*operands):
    """PyTorch's ``result_type`` over tensors and Python scalars.

    Priority: tensors with dim > 0, then 0-d tensors, then Python scalars. A lower-priority group can
    only lift the result to its category's default (int64 for int scalars, the default float dtype
    for float scalars, or its own dtype for 0-d tensors).
    """
    dims = [None, None, None]   # best dtype per priority group: 0 = dim>0 tensor, 1 = 0-d tensor, 2 = scalar
    for x in operands:
        d = getattr(x, "dtype", None)
        if isinstance(d, dtype) and hasattr(x, "dim"):
            g = 0 if x.dim() > 0 else 1
        else:
            g = 2
            c = _category(x)
            d = (bool, int64, get_default_dtype(), default_complex())[c]
        dims[g] = d if dims[g] is None else promote_types(dims[g], d)
    res = None
    for d in dims:
        if d is not None and (res is None or d._kind > res._kind):
            # a lower group lifting a floating result to complex gives that float's complex type (PyTorch)
            res = res.to_complex() if res is not None and d._kind == 3 and res.is_floating_point else d
    return res


class finfo:
    """Machine limits of a floating dtype: bits, eps, max, min, tiny (smallest normal), resolution
    (``10 ** -digits``, as PyTorch). A complex dtype gives its real part's limits, as PyTorch."""

    def __init__(self, type=None):  # noqa: A002
        t = type if type is not None else get_default_dtype()
        t = t.to_real() if isinstance(t, dtype) else to_dtype(t)
        if not t.is_floating_point:
            raise TypeError(f"finfo needs a floating dtype, got {t}")
        f = ml_dtypes.finfo(t.np) if t is bfloat16 else np.finfo(t.np)
        self.dtype = t.name
        self.bits = f.bits
        self.eps = _builtin_float(f.eps)
        self.max = _builtin_float(f.max)
        self.min = _builtin_float(f.min)
        self.tiny = self.smallest_normal = _builtin_float(f.tiny)
        self.resolution = _builtin_float(10.0 ** -f.precision)

    def __repr__(self):
        return f"finfo(resolution={self.resolution}, min={self.min}, max={self.max}, eps={self.eps}, " \
               f"smallest_normal={self.tiny}, tiny={self.tiny}, dtype={self.dtype})"


class iinfo:
    """Limits of an integer dtype: bits, min, max."""

    def __init__(self, type):  # noqa: A002
        t = to_dtype(type)
        if t.is_floating_point or t.is_complex:
            raise TypeError(f"iinfo needs an integer dtype, got {t}")
        if t is bool:
            self.bits, self.min, self.max = 8, 0, 1
        else:
            i = np.iinfo(t.np)
            self.bits, self.min, self.max = i.bits, _builtin_int(i.min), _builtin_int(i.max)
        self.dtype = t.name

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"
