"""Reductions over any set of dims, each registered with its dtype rule and derivative.

sum, mean, prod, max/min (values and first-index indices), amax, amin, argmax, argmin, all, any, var and
std (``correction``), the vector norm (registered, with PyTorch's subgradients) and the matrix norms under
``torch.norm`` and ``torch.linalg``, logsumexp (stable, -inf safe), count_nonzero. All
run through the one reduction template (``reduction.reduce``). Integer and bool sums and products
accumulate in int64, as PyTorch's do; float32 accumulates in float32 in interleaved partials.

Gradients follow PyTorch's tie rules: ``max(dim)``/``min(dim)`` send the gradient to the returned
index; the full ``max()``, ``amax`` and ``amin`` split it evenly among ties.
"""
import collections
import math

from .. import _dtype as D
from .._dispatch import call, register
from .._tensor import Tensor
from ._util import method
from .reduction import reduce, normalize_dims

__all__ = ["sum", "mean", "prod", "max", "min", "amax", "amin", "argmax", "argmin", "all", "any", "var", "std",
           "var_mean", "std_mean", "norm", "logsumexp", "count_nonzero", "aminmax"]

_builtin_max, _builtin_min, _builtin_sum = max, min, sum
return_types_max = collections.namedtuple("max", ["values", "indices"])
return_types_min = collections.namedtuple("min", ["values", "indices"])


def _acc_dtype(x, dtype):
    if dtype is not None:
        return D.to_dtype(dtype)
    if not x.dtype.is_floating_point:
        return D.int64
    return x.dtype


def _ct(dt):
    return D.float32 if dt is D.float16 else dt


def _expand_back(g, x, dims, keepdim):
    """Reshape a reduced gradient so it broadcasts against x."""
    if not keepdim:
        for d in dims:
            g = g.unsqueeze(d)
    return g.expand(x._shape)


def _lit(dt, v):
    if dt is D.float32 or dt is D.float16:
        return f"{v}f"
    return str(v)


# ------------------------------------------------------------------------------------------------ sum / mean
def _sum_fwd(ctx, x, dim, keepdim, dtype):
    acc = _acc_dtype(x, dtype)
    if x.device.type == "cpu" and acc is D.int64 and False:
        pass
    cacc = _ct(acc)
    dims = normalize_dims(dim, x.dim())
    if ctx is not None:
        ctx.dims, ctx.keepdim, ctx.shape, ctx.x = dims, keepdim, x._shape, x
    return reduce(x, dims, keepdim, map_expr="x", combine="a + b", identity="0", acc_dtype=cacc, out_dtype=acc,
                  name="sum")


def _sum_bwd(ctx, g):
    return _expand_back(g, ctx.x, ctx.dims, ctx.keepdim), None, None, None


_sum_op = register("sum", _sum_fwd, _sum_bwd)


def _into_out(name, input, out, dtype, compute):
    """PyTorch's ``out=`` of a dim reduction: no autograd, a ``dtype`` that disagrees with out's raises, out is
    resized to the result's shape (a UserWarning when it had elements) and receives the result."""
    from .._dispatch import is_grad_enabled
    if is_grad_enabled() and input.requires_grad:
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic differentiation, "
                           "but one of the arguments requires grad.")
    if dtype is not None and D.to_dtype(dtype) is not out.dtype:
        raise RuntimeError(f"Expected out tensor to have dtype {D.to_dtype(dtype).name}, but got {out.dtype.name} "
                           "instead")
    r = compute()
    if r.dtype.is_floating_point and not (out.dtype.is_floating_point or out.dtype.is_complex):
        raise RuntimeError(f"result type {_scalar_name(r.dtype)} can't be cast to the desired output type "
                           f"{_scalar_name(out.dtype)}")
    if tuple(out.shape) != tuple(r.shape):
        if out.numel():
            import warnings
            warnings.warn(f"An output with one or more elements was resized since it had shape {list(out.shape)}, "
                          f"which does not match the required output shape {list(r.shape)}.", UserWarning)
        out.resize_(r.shape)
    return out.copy_(r)


def sum(input, dim=None, keepdim=False, *, dtype=None, out=None):  # noqa: A001
    """Sum over ``dim`` (int, tuple, or None for all). bool and integer inputs give int64. With ``out``, the sum
    is taken in out's dtype (PyTorch's rule) and written there."""
    if out is not None:
        return _into_out("sum", input, out, dtype, lambda: sum(input, dim, keepdim, dtype=out.dtype))
    if input.dtype._kind == 3:      # complex: the sum of the real view (ops/complex.py)
        from .complex import _c_sum
        return _c_sum(input, dim, keepdim, dtype)
    return call(_sum_op, input, dim, keepdim, dtype)


def _mean_fwd(ctx, x, dim, keepdim, dtype):
    if dtype is None and not x.dtype.is_floating_point:
        raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be either a floating point or "
                           f"complex dtype. Got: {_scalar_name(x.dtype)}")
    acc = D.to_dtype(dtype) if dtype is not None else x.dtype
    dims = normalize_dims(dim, x.dim())
    if ctx is not None:
        ctx.dims, ctx.keepdim, ctx.x = dims, keepdim, x
        n = 1
        for d in dims:
            n *= x._shape[d]
        ctx.n = n
    cacc = _ct(acc)
    return reduce(x, dims, keepdim, map_expr="x", combine="a + b", identity="0",
                  finish=f"acc / ({cacc.cl})nred", acc_dtype=cacc, out_dtype=acc, name="mean")


def _mean_bwd(ctx, g):
    return _expand_back(g, ctx.x, ctx.dims, ctx.keepdim) / _builtin_max(ctx.n, 1), None, None, None


_mean_op = register("mean", _mean_fwd, _mean_bwd)


def mean(input, dim=None, keepdim=False, *, dtype=None, out=None):  # noqa: A002
    """Arithmetic mean over ``dim``. Integer inputs raise RuntimeError unless ``dtype`` is a float dtype."""
    if out is not None:
        return _into_out("mean", input, out, dtype, lambda: mean(input, dim, keepdim, dtype=dtype))
    if input.dtype._kind == 3:      # complex: the mean of the real view (ops/complex.py)
        from .complex import _c_mean
        return _c_mean(input, dim, keepdim, dtype)
    return call(_mean_op, input, dim, keepdim, dtype)


def _prod_fwd(ctx, x, dim, keepdim, dtype):
    acc = _acc_dtype(x, dtype)
    dims = normalize_dims(dim, x.dim())
    out = reduce(x, dims, keepdim, map_expr="x", combine="a * b", identity="1", acc_dtype=_ct(acc), out_dtype=acc,
                 name="prod")
    if ctx is not None:
        ctx.save_for_backward(x, out)
        ctx.dims, ctx.keepdim = dims, keepdim
    return out


def _prod_bwd(ctx, g):
    x, out = ctx.saved_tensors
    # grad = prod / x where x != 0; exact for zeros through products of the others
    ge = _expand_back(g, x, ctx.dims, ctx.keepdim)
    oe = _expand_back(out, x, ctx.dims, ctx.keepdim)
    zeros = (x == 0)
    if not zeros.any().item():
        return ge * oe / x, None, None, None
    # fall back: product of all other elements via exclusive cumprods along a flattened reduced axis
    from .pointwise import where
    safe = where(zeros, 1.0, x)
    nz_prod = prod(safe, dim=ctx.dims if ctx.dims else None, keepdim=True) if ctx.dims else safe.prod()
    nzc = zeros.sum(dim=ctx.dims if ctx.dims else None, keepdim=True)
    nz_prod_e = nz_prod.expand(x._shape) if nz_prod.dim() else nz_prod
    nzc_e = nzc.expand(x._shape) if nzc.dim() else nzc
    grad_in = where(zeros, where(nzc_e == 1, nz_prod_e, 0.0), where(nzc_e == 0, oe / safe, 0.0))
    return ge * grad_in, None, None, None


_prod_op = register("prod", _prod_fwd, _prod_bwd)


def prod(input, dim=None, keepdim=False, *, dtype=None, out=None):  # noqa: A002
    """Product over ``dim`` (one int, or None for all). bool and integer inputs give int64."""
    if out is not None:
        return _into_out("prod", input, out, dtype, lambda: prod(input, dim, keepdim, dtype=out.dtype))
    return call(_prod_op, input, dim, keepdim, dtype)


# ------------------------------------------------------------------------------------------------ max / min
def _better(is_max, floating):
    cmp = ">" if is_max else "<"
    if floating:
        return f"(b {cmp} a) || (isnan(b) && !isnan(a)) || ((b == a || (isnan(b) && isnan(a))) && bi < ai)"
    return f"(b {cmp} a) || (b == a && bi < ai)"


def _minmax_dim_fwd(is_max):
    def fwd(ctx, x, dim, keepdim):
        if x.dim() and x._shape[x._wrap(dim)] == 0:      # other dims may be empty: then so is the result
            raise IndexError(f"{'max' if is_max else 'min'}(): Expected reduction dim {dim} to have non-zero size.")
        dims = normalize_dims(dim, x.dim())
        ct = _ct(x.dtype)
        v, i = reduce(x, dims, keepdim, map_expr="x", identity="0", acc_dtype=ct, out_dtype=x.dtype,
                      better=_better(is_max, ct.is_floating_point), name="max" if is_max else "min")
        if ctx is not None:
            ctx.save_for_backward(i)
            ctx.dims, ctx.keepdim, ctx.shape = dims, keepdim, x._shape
            ctx.x = x
        return v, i
    return fwd


def _minmax_dim_bwd(ctx, g, gi=None):
    (i,) = ctx.saved_tensors
    d = ctx.dims[0] if ctx.dims else 0
    if not ctx.keepdim and len(ctx.shape):
        g = g.unsqueeze(d)
        i = i.unsqueeze(d)
    from .indexing.scatter_gather import _scatter_into_zeros
    return _scatter_into_zeros(ctx.x, d, i, g), None, None


_max_dim_op = register("max_dim", _minmax_dim_fwd(True), _minmax_dim_bwd, differentiable_outputs=(0,))
_min_dim_op = register("min_dim", _minmax_dim_fwd(False), _minmax_dim_bwd, differentiable_outputs=(0,))


def _amax_fwd(is_max):
    def fwd(ctx, x, dim, keepdim):
        if x.dtype.is_complex:          # complex numbers have no order
            raise NotImplementedError(f"{'amax' if is_max else 'amin'}: {x.dtype.name} is not supported")
        dims = normalize_dims(dim, x.dim())
        if x.numel() == 0:
            name = "amax" if is_max else "amin"
            if dim is None or dim == () or dim == []:
                raise RuntimeError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                                   "Specify the reduction dim with the 'dim' argument.")
            for d in dims:          # PyTorch: only an empty reduction dim is an error; the result may be empty
                if x._shape[d] == 0:
                    raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
        ct = _ct(x.dtype)
        if ct.is_floating_point:
            comb = "nan_max_f(a, b)" if is_max else "nan_min_f(a, b)"
            if ct is D.float64:
                comb = comb.replace("_f(", "_d(")
            ident = "-INFINITY" if is_max else "INFINITY"
        else:
            comb = "(b > a ? b : a)" if is_max else "(b < a ? b : a)"
            info = D.iinfo(x.dtype) if x.dtype is not D.bool else None
            ident = str((info.min if is_max else info.max) if info else (0 if is_max else 1))
            if ct is D.int64:
                ident = f"({ident}L)" if not ident.startswith("-9223372036854775808") else "(-9223372036854775807L-1)"
        out = reduce(x, dims, keepdim, map_expr="x", combine=comb, identity=ident, acc_dtype=ct, out_dtype=x.dtype,
                     name="amax")
        if ctx is not None:
            ctx.save_for_backward(x, out)
            ctx.dims, ctx.keepdim = dims, keepdim
        return out
    return fwd


def _amax_bwd(ctx, g):
    x, out = ctx.saved_tensors
    oe = _expand_back(out, x, ctx.dims, ctx.keepdim)
    mask = (x == oe)
    cnt = mask.sum(dim=ctx.dims if ctx.dims else None, keepdim=True)
    ge = _expand_back(g, x, ctx.dims, ctx.keepdim)
    if not ctx.dims:
        cnt = cnt.reshape(())
    return ge * mask / cnt, None, None


_amax_op = register("amax", _amax_fwd(True), _amax_bwd)
_amin_op = register("amin", _amax_fwd(False), _amax_bwd)


def amax(input, dim=(), keepdim=False, *, out=None):  # noqa: A002
    """Maximum over ``dim`` (all dims when empty); NaN propagates; the gradient splits evenly among ties."""
    if out is not None:
        if out.dtype is not input.dtype:
            raise RuntimeError(f"Expected the dtype for input and out to match, but got {_scalar_name(input.dtype)} "
                               f"for input's dtype and {_scalar_name(out.dtype)} for out's dtype.")
        return _into_out("amax", input, out, None, lambda: amax(input, dim, keepdim))
    return call(_amax_op, input, dim if dim != () else None, keepdim)


def amin(input, dim=(), keepdim=False, *, out=None):  # noqa: A002
    """Minimum over ``dim`` (all dims when empty); NaN propagates; the gradient splits evenly among ties."""
    if out is not None:
        if out.dtype is not input.dtype:
            raise RuntimeError(f"Expected the dtype for input and out to match, but got {_scalar_name(input.dtype)} "
                               f"for input's dtype and {_scalar_name(out.dtype)} for out's dtype.")
        return _into_out("amin", input, out, None, lambda: amin(input, dim, keepdim))
    return call(_amin_op, input, dim if dim != () else None, keepdim)


def _minmax(is_max):
    def f(input, dim=None, keepdim=False, *, out=None):  # noqa: A002
        if input.dtype.is_complex:      # complex numbers have no order
            raise NotImplementedError(f"{'max' if is_max else 'min'}: {input.dtype.name} is not supported")
        if isinstance(dim, Tensor):
            from .pointwise import maximum, minimum
            return maximum(input, dim) if is_max else minimum(input, dim)
        if dim is None:
            if input.numel() == 0:
                raise RuntimeError(f"{'max' if is_max else 'min'}(): Expected reduction dim to be specified for "
                                   "input.numel() == 0. Specify the reduction dim with the 'dim' argument.")
            return call(_amax_op if is_max else _amin_op, input, None, False)
        v, i = call(_max_dim_op if is_max else _min_dim_op, input, dim, keepdim)
        return (return_types_max if is_max else return_types_min)(v, i)
    f.__name__ = "max" if is_max else "min"
    f.__doc__ = (f"``{f.__name__}(x)``: the {f.__name__}imum of all elements; ``{f.__name__}(x, dim, keepdim)``: a "
                 "(values, indices) namedtuple, the first index on ties; ``{f.__name__}(x, other)``: elementwise.")
    return f


max = _minmax(True)  # noqa: A001
min = _minmax(False)  # noqa: A001


def argmax(input, dim=None, keepdim=False):  # noqa: A002
    """Index of the maximum (first on ties) over ``dim``, or over the flattened tensor when dim is None."""
    if dim is None:
        return call(_max_dim_op, input.reshape(-1), 0, False)[1].reshape((1,) * input.dim() if keepdim else ())
    return call(_max_dim_op, input, dim, keepdim)[1]


def argmin(input, dim=None, keepdim=False):  # noqa: A002
    """Index of the minimum (first on ties) over ``dim``, or over the flattened tensor when dim is None."""
    if dim is None:
        return call(_min_dim_op, input.reshape(-1), 0, False)[1].reshape((1,) * input.dim() if keepdim else ())
    return call(_min_dim_op, input, dim, keepdim)[1]


def aminmax(input, *, dim=None, keepdim=False):  # noqa: A002
    r = collections.namedtuple("aminmax", ["min", "max"])
    return r(amin(input, dim if dim is not None else (), keepdim), amax(input, dim if dim is not None else (), keepdim))


# ------------------------------------------------------------------------------------------------ logical
def all(input, dim=None, keepdim=False):  # noqa: A001,A002
    """True where every element over ``dim`` is non-zero. Returns bool."""
    dims = normalize_dims(dim, input.dim())
    return reduce(input, dims, keepdim, map_expr="(uchar)(x != 0)", combine="(uchar)(a && b)", identity="1",
                  acc_dtype=D.uint8, out_dtype=D.bool, map_dtype=_ct(input.dtype) if input.dtype is not D.bool
                  else D.uint8, name="all")


def any(input, dim=None, keepdim=False):  # noqa: A001,A002
    """True where some element over ``dim`` is non-zero. Returns bool."""
    dims = normalize_dims(dim, input.dim())
    return reduce(input, dims, keepdim, map_expr="(uchar)(x != 0)", combine="(uchar)(a || b)", identity="0",
                  acc_dtype=D.uint8, out_dtype=D.bool, map_dtype=_ct(input.dtype) if input.dtype is not D.bool
                  else D.uint8, name="any")


def count_nonzero(input, dim=None):  # noqa: A002
    """Number of non-zero elements over ``dim``; int64."""
    dims = normalize_dims(dim, input.dim())
    return reduce(input, dims, False, map_expr="(long)(x != 0)", combine="a + b", identity="0", acc_dtype=D.int64,
                  out_dtype=D.int64, map_dtype=_ct(input.dtype) if input.dtype is not D.bool else D.uint8,
                  name="count_nonzero")


# ------------------------------------------------------------------------------------------------ var / std
def _correction(unbiased, correction):
    if correction is not None:
        return correction
    if unbiased is None:
        return 1
    return 1 if unbiased else 0


def _var_args(dim, unbiased):
    """PyTorch's overloads: ``var(x, True)`` passes ``unbiased`` (a bool is never a dim)."""
    if isinstance(dim, bool):
        return None, dim
    if isinstance(unbiased, (int, tuple, list)) and not isinstance(unbiased, bool):
        return unbiased, None
    return dim, unbiased


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):  # noqa: A002
    """Variance over ``dim`` with ``correction`` (default 1, Bessel's; ``unbiased=False`` means 0).
    Computed in two passes (mean, then squared deviations); N - correction <= 0 gives nan or inf."""
    dim, unbiased = _var_args(dim, unbiased)
    if input.dtype.is_complex:
        raise NotImplementedError(f"var/std: {input.dtype.name} is not supported by cltorch yet")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"std and var only support floating point and complex dtypes, got {input.dtype}")
    c = _correction(unbiased, correction)
    dims = normalize_dims(dim, input.dim())
    n = 1
    for d in dims:
        n *= input._shape[d]
    m = mean(input, dims if dims else None, keepdim=True)
    dev = input - m
    ss = sum(dev * dev, dims if dims else None, keepdim=keepdim)
    return ss / _builtin_max(n - c, 0) if n - c > 0 else ss / 0.0 * (ss * 0 + 1)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):  # noqa: A002
    """Standard deviation: ``sqrt(var(...))`` with the same arguments."""
    return var(input, dim, unbiased, keepdim, correction=correction).sqrt()


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):  # noqa: A002
    dim, unbiased = _var_args(dim, unbiased)
    return var(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):  # noqa: A002
    dim, unbiased = _var_args(dim, unbiased)
    return std(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


# ------------------------------------------------------------------------------------------------ norm, logsumexp
_SCALAR_NAMES = {"float16": "Half", "bfloat16": "BFloat16", "float32": "Float", "float64": "Double", "int64": "Long",
                 "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def _scalar_name(dt):
    """PyTorch's ScalarType name of a dtype, as its error messages print it (Float, Long, ...)."""
    return _SCALAR_NAMES.get(dt.name, dt.name.capitalize())


def _ord_text(ord):  # noqa: A002
    if ord == math.inf:
        return "inf"
    if ord == -math.inf:
        return "-inf"
    return str(ord)


def _vnorm_fwd(ctx, x, ord, dims, keepdim):  # noqa: A002
    a = x.abs()
    if ord == 2:
        out = (x * x).sum(dims, keepdim).sqrt()
    elif ord == 1:
        out = a.sum(dims, keepdim)
    elif ord == math.inf:
        out = a.amax(dims, keepdim)
    elif ord == -math.inf:
        out = a.amin(dims, keepdim)
    elif ord == 0:
        out = (x != 0).to(x.dtype).sum(dims, keepdim)
    else:
        out = (a ** ord).sum(dims, keepdim) ** (1.0 / ord)
    if ctx is not None:
        ctx.save_for_backward(x, out)
        ctx.ord, ctx.dims, ctx.keepdim = ord, dims, keepdim
    return out


def _vnorm_bwd(ctx, g):
    """PyTorch's subgradients (FunctionsManual ``norm_backward``): zero where the norm is zero for p >= 1,
    sgn(x) for p = 1, split evenly among the maxima for +-inf, zero everywhere for p = 0."""
    from .pointwise import where
    x, norm = ctx.saved_tensors
    p = ctx.ord
    if not ctx.keepdim and x.dim():
        for d in ctx.dims:
            g = g.unsqueeze(d)
            norm = norm.unsqueeze(d)
    if p == 0:
        return x.new_zeros(x._shape), None, None, None
    if p == 1:
        return x.sign() * g, None, None, None
    if p == 2:
        return g * where(norm == 0, 0.0, x / norm), None, None, None
    if p in (math.inf, -math.inf):
        a = x.abs()
        mask = ((a == norm) | a.isnan()).to(x.dtype)
        return x.sign() * ((g / mask.sum(ctx.dims, True)) * mask), None, None, None
    if p < 1:
        scaled = x.sign() * where(x == 0, 0.0, x.abs() ** (p - 1))
        return scaled * g * norm ** (1 - p), None, None, None
    scaled = x.sign() * x.abs() ** (p - 1) if p < 2 else x * x.abs() ** (p - 2)
    return scaled * where(norm == 0, 0.0, g / norm ** (p - 1)), None, None, None


_vector_norm_op = register("linalg_vector_norm", _vnorm_fwd, _vnorm_bwd)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):  # noqa: A002
    """``torch.linalg.vector_norm``: ``(sum |x|^ord)^(1/ord)`` over ``dim`` (int, tuple; None or () for all
    dims); ord inf/-inf are max/min of |x|, ord 0 counts non-zeros (its gradient is zero). Floating input only;
    ``dtype`` (a floating dtype that does not narrow the input's) casts first. Raises RuntimeError for integer
    input or dtype and for ord < 0 or inf over an empty reduction (no identity), IndexError for a bad dim.
    Gradients follow PyTorch's ``norm_backward`` subgradients (zero at a zero norm)."""
    if out is not None:
        raise NotImplementedError("linalg.vector_norm: out= is not supported")
    if isinstance(ord, bool) or not isinstance(ord, (int, float)):
        raise TypeError(f"linalg_vector_norm(): argument 'ord' must be Number, not {type(ord).__name__}")
    if x.dtype.is_complex:
        raise NotImplementedError(f"{x.dtype.name} inputs are not supported by cltorch.linalg.vector_norm yet")
    if not x.dtype.is_floating_point:
        raise RuntimeError("linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
                           f"{_scalar_name(x.dtype)}")
    if dtype is not None:
        dt = D.to_dtype(dtype)
        if not dt.is_floating_point:
            raise RuntimeError(f"linalg.vector_norm: dtype should be floating point or complex, but got "
                               f"{_scalar_name(dt)}")
        if D.promote_types(x.dtype, dt) is not dt:
            raise RuntimeError(f"linalg.vector_norm: the dtype of the input ({_scalar_name(x.dtype)}) should "
                               f"be convertible without narrowing to the specified dtype ({_scalar_name(dt)})")
        if dt is not x.dtype:
            x = x.to(dt)
    dims = normalize_dims(dim, x.dim())
    if ord < 0 or ord == math.inf:
        if x.dim() == 0:
            empty = x.numel() == 0
        else:
            empty = 0 in [x._shape[d] for d in dims]
        if empty:
            raise RuntimeError(f"linalg.vector_norm cannot compute the {_ord_text(ord)} norm on an empty tensor "
                               "because the operation does not have an identity")
    ord = float(ord) if not isinstance(ord, int) else ord
    if x.dtype is D.float16 or x.dtype is D.bfloat16:     # accumulate in float32, as PyTorch does; round once
        return call(_vector_norm_op, x.to(D.float32), ord, dims, keepdim).to(x.dtype)
    return call(_vector_norm_op, x, ord, dims, keepdim)


def _matrix_norm_checks(A, dim, dtype, what="linalg.matrix_norm"):
    if A.dim() < 2:
        raise RuntimeError(f"{what}: The input tensor A must have at least 2 dimensions.")
    if isinstance(dim, int) or len(dim) != 2:
        shown = dim if isinstance(dim, int) else " ".join(str(d) for d in dim)
        raise RuntimeError(f"{what}: dim must be a 2-tuple. Got {shown}")
    d0, d1 = (A._wrap(d) for d in dim)
    if d0 == d1:
        raise RuntimeError(f"{what}: dims must be different. Got ({dim[0]}, {dim[1]})")
    if not A.dtype.is_floating_point:
        raise RuntimeError(f"{what}: Expected a floating point or complex tensor as input. Got {_scalar_name(A.dtype)}")
    if dtype is not None:
        dt = D.to_dtype(dtype)
        if not dt.is_floating_point:
            raise RuntimeError(f"{what}: dtype should be floating point or complex, but got {_scalar_name(dt)}")
    return d0, d1


def _maxmin(t, dim, keepdim, largest):
    """amax / amin over one dim; an empty dim gives 0 for the max (PyTorch's matrix norms), an error for the min."""
    if largest:
        if t._shape[dim] == 0:
            return t.sum(dim, keepdim)
        return t.amax(dim, keepdim)
    return t.amin(dim, keepdim)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):  # noqa: A002
    """``torch.linalg.matrix_norm(A, ord='fro', dim=(-2, -1), keepdim=False, *, dtype=None)``.

    Over the two dims ``dim`` of ``A`` (``(*, m, n)``, floating): 'fro' is the vector 2-norm; 'nuc' the sum of
    singular values; 2 / -2 the largest / smallest singular value (``svdvals``); 1 / -1 the max / min column
    sum of |A|; inf / -inf the max / min row sum. Result shape is the batch shape (the two dims kept as size 1
    with ``keepdim``). RuntimeError for fewer than 2 dims, a dim that is not a pair of different dims, an
    unsupported ord, integer input or dtype. Gradients come from the composed ops (svdvals' for 'nuc', ±2)."""
    if out is not None:
        raise NotImplementedError("linalg.matrix_norm: out= is not supported")
    if isinstance(dim, int):
        dim = (dim,)
    dim = tuple(dim)
    if isinstance(ord, str):
        if ord not in ("fro", "nuc"):
            _matrix_norm_checks(A, dim, dtype)
            raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    elif isinstance(ord, bool) or not isinstance(ord, (int, float)) or abs(ord) not in (1, 2, math.inf):
        _matrix_norm_checks(A, dim, dtype)
        raise RuntimeError(f"linalg.matrix_norm: Order {_ord_text(ord)} not supported.")
    d0, d1 = _matrix_norm_checks(A, dim, dtype)
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim, dtype=dtype)
    if dtype is not None and D.to_dtype(dtype) is not A.dtype:
        A = A.to(D.to_dtype(dtype))
    if ord == "nuc" or abs(ord) == 2:
        nd = A.dim()
        if A._shape[d0] == 0 or A._shape[d1] == 0:
            if ord == -2:
                raise IndexError("amin(): Expected reduction dim -1 to have non-zero size.")
            return vector_norm(A, 2, (d0, d1), keepdim)          # every norm of an empty matrix is 0
        M = A.movedim((d0, d1), (nd - 2, nd - 1)) if (d0, d1) != (nd - 2, nd - 1) else A
        from .lapack import svdvals          # same floor, loaded when first needed
        s = svdvals(M)
        r = s.sum(-1) if ord == "nuc" else _maxmin(s, -1, False, ord > 0)
        if keepdim:
            for d in sorted((d0, d1)):
                r = r.unsqueeze(d)
        return r
    # 1, -1: column sums (over d0), then max/min over d1; inf, -inf: row sums, with the dims swapped
    a, b = (d1, d0) if abs(ord) == math.inf else (d0, d1)
    sums = A.abs().sum(a, keepdim)
    if not keepdim and a < b:
        b -= 1
    return _maxmin(sums, b, keepdim, ord > 0)


def norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):  # noqa: A002
    """``torch.norm`` as PyTorch defines it over ``linalg``: a number p is ``linalg.vector_norm`` over ``dim``
    (all elements when None; p=None means 2); 'fro' over at most 2 dims is the vector 2-norm; 'nuc' (and 'fro'
    over more dims) is ``linalg.matrix_norm`` over ``dim`` (all dims when None, which must then be two)."""
    if out is not None:
        raise NotImplementedError("norm: out= is not supported")
    _dim = [dim] if isinstance(dim, int) else dim
    if isinstance(p, str):
        if p == "fro" and (dim is None or isinstance(dim, int) or len(dim) <= 2):
            return vector_norm(input, 2, _dim, keepdim, dtype=dtype)
        if _dim is None:
            _dim = list(range(input.dim()))
        return matrix_norm(input, p, _dim, keepdim, dtype=dtype)
    return vector_norm(input, 2.0 if p is None else p, _dim, keepdim, dtype=dtype)


def logsumexp(input, dim, keepdim=False):  # noqa: A002
    """``log(sum(exp(x)))`` over ``dim``, stable: subtracts the max first; all -inf gives -inf, not nan."""
    from .pointwise import where
    x = input if input.dtype.is_floating_point else input.to(D.get_default_dtype())
    if x.numel() == 0:              # no max to subtract; an empty reduction gives log(0) = -inf (PyTorch)
        return x.exp().sum(dim, keepdim).log()
    m = x.amax(dim, keepdim=True).detach()
    m = where(m.isinf(), 0.0, m)
    s = (x - m).exp().sum(dim, keepdim=True).log() + m
    if not keepdim:
        s = s.squeeze(normalize_dims(dim, x.dim()))
    return s


for _n in ("sum", "mean", "prod", "amax", "amin", "argmax", "argmin", "all", "any", "var", "std", "norm",
           "logsumexp", "count_nonzero", "aminmax"):
    method(_n, globals()[_n])
method("max", max)
method("min", min)
