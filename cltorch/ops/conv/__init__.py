"""Convolutions: ``conv1d/2d/3d``, ``conv_transpose1d/2d/3d`` (PyTorch's semantics).

Every convolution runs as a 3-d one (``Geom``, ``geom.py``): a 2-d convolution has depth 1 and a 1-d one depth and
height 1, so the ops, kernels and launchers of this package have one code path for all three ranks.

Three registered ops carry everything, and each one's derivative is written with the other two, so
gradients of any order exist (the "convolution triangle"). With the geometry fixed (stride, top/left
padding, dilation, groups, input and output sizes) and ``<a, b>`` the sum of elementwise products:

* ``conv(x, w, b)``  -> y: the forward convolution (cross-correlation, as PyTorch computes it);
* ``conv_t(u, w, b)`` -> z: its adjoint in ``x`` (``<conv(x, w), u> = <x, conv_t(u, w)>``); this is
  ``conv_transpose2d`` and the gradient of ``conv`` with respect to its input;
* ``conv_w(x, u)``   -> v: its adjoint in ``w`` (``<conv(x, w), u> = <w, conv_w(x, u)>``); the
  gradient of ``conv`` with respect to its weight.

so  d conv = (conv_t(g, w), conv_w(x, g), sum g);  d conv_t = (conv(g, w), conv_w(g, u), sum g);
d conv_w = (conv_t(u, g), conv(x, g)).

The package, one thing per module:

* ``args.py``: the arguments checked as PyTorch checks them, and the ``Geom`` they describe;
* ``run.py``: each direction's entry (empty shapes, float16 through float32) running the algorithm that
  ``plan.py`` chooses per call from the device profile (``set_algorithm("direct" | "gemm" | "igemm" | None)``
  forces one; tests use it to check each);
* ``direct.py``: "direct", register-blocked implicit GEMM (no column matrix; ``cl_kernels/conv.cl.mako``), the
  CPU design for the small channel counts of small CNNs;
* ``im2col.py``: "gemm", im2col (or col2im) plus the tuned GEMM of ``cltorch/ops/gemm/``, best when the GEMM
  dimensions are large; the batch runs in chunks so the column matrix stays below ``[conv] col_bytes``;
* ``igemm.py``: "igemm", the GPU design (GPU profiles' ``[conv] design``): implicit GEMM with the gathered input
  staged in local memory (``cl_kernels/conv_igemm.cl.mako``), the strided input gradient phase-decomposed, the
  weight gradient split over the positions and summed in a fixed order;
* ``pointwise.py``: 1x1 convolutions with stride 1 and no padding, whose three directions are plain GEMMs;
* ``depthwise.py``: groups == in_channels with a small channel multiplier, kernels of their own (GPU profiles:
  ``depthwise_tile.py``, the same sums with the patches staged in local memory);
* ``format.py``: channels_last outputs and gradients (PyTorch's rule); ``launch.py``: what the launchers share.

Only float32 and float64 are computed (float16 inputs are computed in float32 and cast back; bfloat16 is widened
to float32 by the dispatcher); integer inputs raise RuntimeError as in PyTorch.
"""
from ..._dispatch import call, register
from .args import _lift, _unlift, conv_geometry, conv_t_geometry
from .format import _layout, _out_format, _to_layout
from .geom import Geom  # noqa: F401  (the geometry tests and the depthwise module name)
from .plan import _depthwise, set_algorithm  # noqa: F401
from .run import run_conv, run_conv_t, run_conv_w

__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"]


# ----------------------------------------------------------------------------------------------- the ops
def _conv_fwd(ctx, x, w, b, geom):
    y = run_conv(x, w, b, geom)
    if ctx is not None:
        ctx.save_for_backward(x, w)
        ctx.geom = geom
        ctx.fmts = (_layout(x), _layout(w))
    return y


def _conv_bwd(ctx, g):
    x, w = ctx.saved_tensors
    need = ctx.needs_input_grad
    geom = ctx.geom
    gx = call(_conv_t_op, g, w, None, geom) if need[0] else None
    need_b = len(need) > 2 and need[2]
    gw = gb = None
    if need[1] and need_b:
        gw, gb = call(_conv_wb_op, x, g, geom, tuple(w._shape))
    elif need[1]:
        gw = call(_conv_w_op, x, g, geom, tuple(w._shape))
    elif need_b:
        gb = g.sum((0, 2, 3, 4))
    fx, fw = getattr(ctx, "fmts", (None, None))
    return _to_layout(gx, fx), _to_layout(gw, fw), gb, None


def _conv_t_fwd(ctx, u, w, b, geom):
    z = run_conv_t(u, w, b, geom)
    if ctx is not None:
        ctx.save_for_backward(u, w)
        ctx.geom = geom
        ctx.fmts = (_layout(u), _layout(w))
    return z


def _conv_t_bwd(ctx, g):
    u, w = ctx.saved_tensors
    need = ctx.needs_input_grad
    geom = ctx.geom
    gu = call(_conv_op, g, w, None, geom) if need[0] else None
    gw = call(_conv_w_op, g, u, geom, tuple(w._shape)) if need[1] else None
    gb = g.sum((0, 2, 3, 4)) if len(need) > 2 and need[2] else None
    fu, fw = getattr(ctx, "fmts", (None, None))
    return _to_layout(gu, fu), _to_layout(gw, fw), gb, None


def _conv_w_fwd(ctx, x, u, geom, wshape):
    v, _ = run_conv_w(x, u, geom, wshape)
    if ctx is not None:
        ctx.save_for_backward(x, u)
        ctx.geom = geom
    return v


def _conv_w_bwd(ctx, g):
    x, u = ctx.saved_tensors
    need = ctx.needs_input_grad
    gx = call(_conv_t_op, u, g, None, ctx.geom) if need[0] else None
    gu = call(_conv_op, x, g, None, ctx.geom) if need[1] else None
    return gx, gu, None, None


def _conv_wb_fwd(ctx, x, u, geom, wshape):
    """(weight gradient, bias gradient) in one pass: the bias gradient is the sum of u over n, h, w."""
    out = run_conv_w(x, u, geom, wshape, True)
    if ctx is not None:
        ctx.save_for_backward(x, u)
        ctx.geom = geom
        ctx.ushape = u._shape
    return out


def _conv_wb_bwd(ctx, gv, gb):
    x, u = ctx.saved_tensors
    need = ctx.needs_input_grad
    gx = call(_conv_t_op, u, gv, None, ctx.geom) if gv is not None and need[0] else None
    gu = None
    if need[1]:
        if gv is not None:
            gu = call(_conv_op, x, gv, gb, ctx.geom)
        elif gb is not None:
            gu = gb.reshape(1, -1, 1, 1, 1).expand(*ctx.ushape)
    return gx, gu, None, None


_conv_op = register("convolution", _conv_fwd, _conv_bwd)
_conv_t_op = register("convolution_transpose", _conv_t_fwd, _conv_t_bwd)
_conv_w_op = register("convolution_weight", _conv_w_fwd, _conv_w_bwd)
_conv_wb_op = register("convolution_weight_bias", _conv_wb_fwd, _conv_wb_bwd)


# ----------------------------------------------------------------------------------------------- public ops
def _conv_nd(name, x, w, b, stride, padding, dilation, groups, nd):
    """conv1d/2d/3d: validate like PyTorch, lift to 3 spatial dims, run the convolution op."""
    x, geom, unbatched = conv_geometry(name, x, w, b, stride, padding, dilation, groups, nd)
    y = _out_format(_unlift(call(_conv_op, _lift(x, nd), _lift(w, nd), b, geom), nd), x, w, nd)
    return y.squeeze(0) if unbatched else y


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """2-D convolution (cross-correlation) as ``torch.nn.functional.conv2d``.

    input: ``(N, C, H, W)`` or unbatched ``(C, H, W)``; weight: ``(O, C/groups, kH, kW)``; bias: ``(O,)``
    or None. stride, dilation: int or pair; padding: int, pair, ``'valid'`` or ``'same'`` (the odd extra
    pad of an even effective kernel goes at the bottom/right; ``'same'`` with stride > 1 raises
    RuntimeError). Output ``(N, O, OH, OW)``, ``OH = (H + 2*pH - dH*(kH-1) - 1) // sH + 1``.
    dtypes: float32 and float64 (float16 is computed in float32); all operands must share dtype and
    device. Raises RuntimeError on bad ranks, channel/group mismatches, non-positive stride or dilation,
    negative padding, or a kernel larger than the padded input. Differentiable to any order.
    """
    return _conv_nd("conv2d", input, weight, bias, stride, padding, dilation, groups, 2)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """1-D convolution as ``torch.nn.functional.conv1d``: input ``(N, C, L)`` or ``(C, L)``, weight
    ``(O, C/groups, k)``; padding int, 1-tuple, ``'valid'`` or ``'same'``. Computed as a 2-D convolution
    with height 1; see :func:`conv2d` for dtypes and errors."""
    return _conv_nd("conv1d", input, weight, bias, stride, padding, dilation, groups, 1)



def _conv_t_nd(name, x, w, b, stride, padding, output_padding, groups, dilation, nd):
    x, geom, unbatched = conv_t_geometry(name, x, w, b, stride, padding, output_padding, groups, dilation, nd)
    z = _out_format(_unlift(call(_conv_t_op, _lift(x, nd), _lift(w, nd), b, geom), nd), x, w, nd)
    return z.squeeze(0) if unbatched else z


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,  # noqa: A002
                     dilation=1):
    """Transposed 2-D convolution as ``torch.nn.functional.conv_transpose2d`` (the adjoint of conv2d in
    its input).

    input ``(N, Cin, H, W)`` or ``(Cin, H, W)``; weight ``(Cin, Cout/groups, kH, kW)``; bias ``(Cout,)``.
    Output size ``(H - 1)*sH - 2*pH + dH*(kH - 1) + output_padding + 1``; output_padding must be smaller
    than the stride or the dilation (RuntimeError otherwise). dtypes as :func:`conv2d`.
    """
    return _conv_t_nd("conv_transpose2d", input, weight, bias, stride, padding, output_padding, groups, dilation,
                      2)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,  # noqa: A002
                     dilation=1):
    """Transposed 1-D convolution as ``torch.nn.functional.conv_transpose1d``; see conv_transpose2d."""
    return _conv_t_nd("conv_transpose1d", input, weight, bias, stride, padding, output_padding, groups, dilation,
                      1)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):  # noqa: A002
    """3-D convolution as ``torch.nn.functional.conv3d``.

    input ``(N, C, D, H, W)`` or unbatched ``(C, D, H, W)``; weight ``(O, C/groups, kD, kH, kW)``; bias
    ``(O,)`` or None; stride, dilation: int or triple; padding int, triple, ``'valid'`` or ``'same'``. Output
    ``(N, O, OD, OH, OW)`` with each size as in :func:`conv2d`. The same kernels as conv2d (implicit GEMM, or
    im2col with one more spatial dim plus the tuned GEMM). dtypes and errors as :func:`conv2d`.
    """
    return _conv_nd("conv3d", input, weight, bias, stride, padding, dilation, groups, 3)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,  # noqa: A002
                     dilation=1):
    """Transposed 3-D convolution as ``torch.nn.functional.conv_transpose3d``: input ``(N, Cin, D, H, W)`` or
    ``(Cin, D, H, W)``, weight ``(Cin, Cout/groups, kD, kH, kW)``; sizes and errors as conv_transpose2d."""
    return _conv_t_nd("conv_transpose3d", input, weight, bias, stride, padding, output_padding, groups, dilation,
                      3)
