"""Each direction's entry (``run_conv``, ``run_conv_t``, ``run_conv_w``): empty shapes, 16-bit inputs computed in
float32, and the algorithm ``plan.py`` chooses (depthwise, direct, im2col + GEMM, implicit GEMM)."""
from ... import _dtype as D
from ..._tensor import Tensor
from . import direct, igemm, im2col
from .plan import _algo, _depthwise


def _compute(fn, *ts):
    """Run fn on float32/float64 tensors; float16 goes through float32 and comes back."""
    half = any(t is not None and t.dtype is D.float16 for t in ts)
    if half:
        ts = tuple(None if t is None else t.float() for t in ts)
        return fn(*ts).half()
    return fn(*ts)


def _empty_out(shape, like):
    from ..elementwise import pointwise
    t = Tensor._empty(shape, like.dtype, like.device)
    if t.numel():
        pointwise("0", [], like.dtype, like.dtype, out=t, shape=t._shape)
    return t


def run_conv(x, w, b, geom):
    N, O = x._shape[0], w._shape[0]
    shape = (N, O) + geom.out_sp
    if N == 0 or O == 0 or geom.P == 0:
        return Tensor._empty(shape, x.dtype, x.device)
    if x._shape[1] == 0:
        y = _empty_out(shape, x)
        return y if b is None else y + b.reshape(1, O, 1, 1, 1)

    def f(x, w, b):
        rt = x._runtime()
        if _depthwise(rt, geom, w._shape[1], O // geom.G):
            from .depthwise import forward
            return forward(x, w, b, geom)
        algo = _algo(rt, x._shape[1] // geom.G, O // geom.G, geom)
        if algo == "igemm":
            return igemm.conv(x, w, b, geom, False)
        if algo == "direct":
            return direct._direct(x, w, b, geom, False, shape)
        return im2col._gemm_conv(x, w, b, geom)
    return _compute(f, x, w, b)


def run_conv_t(u, w, b, geom):
    N, O, Cg = u._shape[0], w._shape[0], w._shape[1]
    shape = (N, geom.G * Cg) + geom.in_sp
    if N == 0 or Cg == 0 or geom.Pin == 0:
        return Tensor._empty(shape, u.dtype, u.device)
    if O == 0 or geom.P == 0:
        z = _empty_out(shape, u)
        return z if b is None else z + b.reshape(1, -1, 1, 1, 1)

    def f(u, w, b):
        rt = u._runtime()
        if _depthwise(rt, geom, Cg, O // geom.G):
            from .depthwise import transposed
            return transposed(u, w, b, geom)
        algo = _algo(rt, O // geom.G, Cg, geom)
        if algo == "igemm":
            return igemm.conv(u, w, b, geom, True)
        if algo == "direct":
            return direct._direct(u, w, b, geom, True, shape)
        return im2col._gemm_conv_t(u, w, b, geom)
    return _compute(f, u, w, b)


def run_conv_w(x, u, geom, wshape, with_bias=False):
    """The weight gradient v (and, with_bias, the bias gradient sum of u over n, h, w): (v, gb or None)."""
    O = u._shape[1]
    if any(s == 0 for s in wshape) or x._shape[0] == 0 or geom.P == 0:
        v = Tensor._empty(wshape, x.dtype, x.device) if any(s == 0 for s in wshape) else _empty_out(wshape, x)
        return v, (_empty_out((O,), x) if with_bias else None)

    def f(x, u):
        if _depthwise(x._runtime(), geom, wshape[1], O // geom.G):
            from .depthwise import weight_grad
            v, gb = weight_grad(x, u, geom, wshape, with_bias)
            return v if gb is None else (v, gb)
        algo = _algo(x._runtime(), x._shape[1] // geom.G, O // geom.G, geom)
        if algo == "igemm":
            v = igemm.weight_grad(x, u, geom, wshape)
            return v if not with_bias else (v, u.sum((0, 2, 3, 4)))
        if algo == "direct":
            if direct._wgrad_as_conv_pays(x, u, geom):
                v = direct._wgrad_as_conv(x, u, geom, wshape)
                return v if not with_bias else (v, u.sum((0, 2, 3, 4)))
            v, gb = direct._direct_conv_w(x, u, geom, wshape, with_bias)
            return v if gb is None else (v, gb)
        v = im2col._gemm_conv_w(x, u, geom, wshape)
        return v if not with_bias else (v, u.sum((0, 2, 3, 4)))

    half = x.dtype is D.float16
    out = f(x.float(), u.float()) if half else f(x, u)
    if not isinstance(out, tuple):
        out = (out, None)
    if half:
        out = tuple(None if t is None else t.half() for t in out)
    return out

