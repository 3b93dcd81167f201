"""Fused normalisation layers: layer_norm, rms_norm, group_norm and batch_norm (``cl_kernels/norm.cl.mako``).

Every one is "statistics over a row, then a pointwise transform", so one template serves all four: a row
is the normalized dims (layer/rms norm), one group of one sample (group norm) or one channel over the batch
and spatial dims (batch norm). The forward writes the output and saves the row's mean (as a hi + lo pair, the
corrected two-pass mean of Chan, Golub & LeVeque 1983) and ``rstd = 1 / sqrt(var + eps)`` (biased variance, eps
inside the square root, as PyTorch). The backward uses the standard formulas (Ioffe & Szegedy 2015 for batch
norm; Ba, Kiros & Hinton 2016 for layer norm; Zhang & Sennrich 2019 for RMSNorm; Wu & He 2018 for group norm);
with ``xh = (x - mean) * rstd`` and ``gh = g * weight``::

    grad_x = rstd * (gh - mean(gh) - xh * mean(gh * xh))          (rms_norm: no ``mean(gh)`` term)
    grad_weight = sum(g * xh),  grad_bias = sum(g)                  (over everything but the weight's dims)

A row longer than the profile's ``[norm] chunk`` is cut into chunks (at most ``max_chunks``), one work-item each:
a first kernel writes each chunk's sums, a second adds a row's chunk sums in chunk order and writes its chunk
(one kernel when a row is one chunk), so 48 BatchNorm channels of 16 x 32 x 32 run on 768 work-items, not 48, and
every sum's order depends on the row length and the profile only (see :func:`_chunks`).

When the backward runs with grad mode on (``create_graph=True``) it is composed from differentiable ops,
so double backward works.
"""
import numbers

from ... import _dtype as D
from ..._dispatch import call, register, is_grad_enabled, set_grad_enabled_raw
from .launch import _norm_launch, _norm_bwd_launch, _wgrad_launch

__all__ = ["layer_norm", "rms_norm", "group_norm", "batch_norm", "instance_norm"]

def _cast_back(t, dt):
    return t if t is None or t.dtype is dt else t.to(dt)


# -------------------------------------------------------------------------------------- layer_norm / rms_norm
def _ln_fwd(ctx, x, w, b, M, eps, center):
    xc = x.contiguous()
    nrows = xc.numel() // M if M else 0
    y, mean, rstd, _, params = _norm_launch(xc, w, b, nrows, M, 1, 0, M, 1, M, 1, eps, center,
                                            "col" if (w is not None or b is not None) else "none")
    if ctx is not None:
        ctx.save_for_backward(xc, w, b, mean, rstd)
        ctx.M, ctx.eps, ctx.center, ctx.shape, ctx.params = M, eps, center, x._shape, params
    return y


def _ln_composed(g, x, w, b, M, eps, center, needs):
    x2 = x.reshape(-1, M)
    g2 = g.reshape(-1, M)
    if center:
        xc = x2 - x2.mean(-1, keepdim=True)
    else:
        xc = x2
    rstd = ((xc * xc).mean(-1, keepdim=True) + eps).rsqrt()
    xh = xc * rstd
    gh = g2 * w.reshape(1, M) if w is not None else g2
    inner = gh - xh * (gh * xh).mean(-1, keepdim=True)
    if center:
        inner = inner - gh.mean(-1, keepdim=True)
    gi = (rstd * inner).reshape(x._shape) if needs[0] else None
    gw = (g2 * xh).sum(0).reshape(w._shape) if w is not None and needs[1] else None
    gb = g2.sum(0).reshape(b._shape) if b is not None and needs[2] else None
    return gi, gw, gb


def _ln_bwd(ctx, g):
    x, w, b, mean, rstd = ctx.saved_tensors
    M, eps, center = ctx.M, ctx.eps, ctx.center
    needs = ctx.needs_input_grad
    if is_grad_enabled():
        gi, gw, gb = _ln_composed(g, x, w, b, M, eps, center, needs)
        return gi, gw, gb, None, None, None
    nrows = x.numel() // M if M else 0
    gi, _, _ = _norm_bwd_launch(g, x, w, mean, rstd, nrows, M, 1, 0, M, 1, M, 1, ctx.params)
    gw = gb = None
    if (w is not None and needs[1]) or (b is not None and needs[2]):
        gc = g.to(x.dtype) if g.dtype is not x.dtype else g
        gc = gc.expand(x._shape).contiguous() if gc._shape != x._shape else gc.contiguous()
        sw, sb = _wgrad_launch(gc, x, mean, rstd, nrows, M, ctx.params)
        gw = _cast_back(sw.reshape(w._shape), w.dtype) if w is not None and needs[1] else None
        gb = _cast_back(sb.reshape(b._shape), b.dtype) if b is not None and needs[2] else None
    return gi, gw, gb, None, None, None


_ln_op = register("layer_norm", _ln_fwd, _ln_bwd)


def _normalized(input, normalized_shape, weight, bias, name):
    if isinstance(normalized_shape, numbers.Integral):
        normalized_shape = (int(normalized_shape),)
    ns = tuple(int(s) for s in normalized_shape)
    k = len(ns)
    if k == 0 or input.dim() < k or tuple(input._shape[input.dim() - k:]) != ns:
        raise RuntimeError(f"Given normalized_shape={list(ns)}, expected input with shape [*, "
                           f"{', '.join(str(s) for s in ns)}], but got input of size{list(input._shape)}")
    for t, nm in ((weight, "weight"), (bias, "bias")):
        if t is not None and tuple(t._shape) != ns:
            raise RuntimeError(f"Expected {nm} to be of same shape as normalized_shape, but got {nm} of shape "
                               f"{list(t._shape)} and normalized_shape = {list(ns)}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{name}: expected a floating point input, got {input.dtype.name}")
    M = 1
    for s in ns:
        M *= s
    return M


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):  # noqa: A002
    """Layer normalisation over the trailing ``normalized_shape`` dims (Ba, Kiros & Hinton 2016).

    ``y = (x - mean) / sqrt(var + eps) * weight + bias`` with the biased variance over the normalized dims.
    input: (*, *normalized_shape), floating; weight, bias: normalized_shape or None. Returns input's shape and
    dtype. One fused kernel forward (saving mean and rstd) and one backward (plus a column-sum kernel for the
    weight and bias gradients). Raises RuntimeError when the trailing dims or the affine shapes do not match.
    """
    M = _normalized(input, normalized_shape, weight, bias, "layer_norm")
    return call(_ln_op, input, weight, bias, M, float(eps), True)


def rms_norm(input, normalized_shape, weight=None, eps=None):  # noqa: A002
    """RMS normalisation (Zhang & Sennrich 2019): ``y = x / sqrt(mean(x^2) + eps) * weight`` over the trailing
    ``normalized_shape`` dims. ``eps=None`` uses ``finfo(input.dtype).eps``, as PyTorch. Shapes and errors as
    :func:`layer_norm`."""
    M = _normalized(input, normalized_shape, weight, None, "rms_norm")
    if eps is None:
        eps = float(D.finfo(input.dtype).eps)
    return call(_ln_op, input, weight, None, M, float(eps), False)


# ------------------------------------------------------------------------------------------------ group_norm
def _gn_dims(x, G):
    N, C = x._shape[0], x._shape[1]
    HW = x.numel() // (N * C) if N * C else 0
    return N, C, HW, C // G


def _gn_fwd(ctx, x, w, b, G, eps):
    xc = x.contiguous()
    N, C, HW, Cg = _gn_dims(xc, G)
    affine = "group" if (w is not None or b is not None) else "none"
    y, mean, rstd, _, params = _norm_launch(xc, w, b, N * G, Cg * HW, 1, 0, Cg * HW, G, Cg, max(HW, 1), eps, True,
                                            affine)
    if ctx is not None:
        ctx.save_for_backward(xc, w, b, mean, rstd)
        ctx.G, ctx.eps, ctx.params = G, eps, params
    return y


def _gn_composed(g, x, w, b, G, eps, needs):
    N, C, HW, Cg = _gn_dims(x, G)
    x3 = x.reshape(N, G, Cg * HW)
    xc = x3 - x3.mean(-1, keepdim=True)
    rstd = ((xc * xc).mean(-1, keepdim=True) + eps).rsqrt()
    xh = (xc * rstd).reshape(N, C, HW)
    g3 = g.reshape(N, C, HW)
    gh = g3 * w.reshape(1, C, 1) if w is not None else g3
    ghg = gh.reshape(N, G, Cg * HW)
    xhg = xh.reshape(N, G, Cg * HW)
    gi = rstd * (ghg - ghg.mean(-1, keepdim=True) - xhg * (ghg * xhg).mean(-1, keepdim=True))
    gi = gi.reshape(x._shape) if needs[0] else None
    gw = (g3 * xh).sum((0, 2)) if w is not None and needs[1] else None
    gb = g3.sum((0, 2)) if b is not None and needs[2] else None
    return gi, gw, gb


def _gn_bwd(ctx, g):
    x, w, b, mean, rstd = ctx.saved_tensors
    G, eps = ctx.G, ctx.eps
    needs = ctx.needs_input_grad
    if is_grad_enabled():
        return _gn_composed(g, x, w, b, G, eps, needs) + (None, None)
    N, C, HW, Cg = _gn_dims(x, G)
    gi, _, _ = _norm_bwd_launch(g, x, w, mean, rstd, N * G, Cg * HW, 1, 0, Cg * HW, G, Cg, max(HW, 1), ctx.params)
    gw = gb = None
    if (w is not None and needs[1]) or (b is not None and needs[2]):
        g3 = g.reshape(N, C, HW) if g._shape == x._shape else g.expand(x._shape).reshape(N, C, HW)
        if w is not None and needs[1]:
            mean2 = mean.reshape(2, N, G, 1).to(x.dtype)
            xh = ((x.reshape(N, G, Cg * HW) - mean2[0]) - mean2[1]) * rstd.reshape(N, G, 1).to(x.dtype)
            gw = (g3 * xh.reshape(N, C, HW)).sum((0, 2))
        if b is not None and needs[2]:
            gb = g3.sum((0, 2))
    return gi, gw, gb, None, None


_gn_op = register("group_norm", _gn_fwd, _gn_bwd)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):  # noqa: A002
    """Group normalisation (Wu & He 2018): input (N, C, *) is normalised over each group of ``C / num_groups``
    channels and the spatial dims (biased variance, eps inside the sqrt), then scaled and shifted per channel by
    weight, bias (C,). Raises RuntimeError when C is not divisible by num_groups."""
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.dim()}")
    C = input._shape[1]
    G = int(num_groups)
    if G <= 0 or C % G != 0:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input of "
                           f"shape {list(input._shape)} and num_groups={G}")
    for t, nm in ((weight, "weight"), (bias, "bias")):
        if t is not None and tuple(t._shape) != (C,):
            raise RuntimeError(f"Expected {nm} to be a vector of size equal to the number of channels in input, but "
                               f"got {nm} of shape {list(t._shape)} and input of shape {list(input._shape)}")
    return call(_gn_op, input, weight, bias, G, float(eps))


# ------------------------------------------------------------------------------------------------ batch_norm
def _bn_dims(x):
    N, C = x._shape[0], x._shape[1]
    HW = x.numel() // (N * C) if N * C else 0
    return N, C, HW


def _bn_fwd(ctx, x, w, b, eps):
    xc = x.contiguous()
    N, C, HW = _bn_dims(xc)
    y, mean, rstd, var, params = _norm_launch(xc, w, b, C, HW, N, C * HW, HW, 1, 1, 1, eps, True, "row",
                                              save_var=True)
    if ctx is not None:
        ctx.save_for_backward(xc, w, b, mean, rstd)
        ctx.eps, ctx.params = eps, params
    return y, mean[:C], var


def _bn_composed(g, x, w, b, eps, needs):
    N, C, HW = _bn_dims(x)
    x3 = x.reshape(N, C, HW)
    xc = x3 - x3.mean((0, 2), keepdim=True)
    rstd = ((xc * xc).mean((0, 2), keepdim=True) + eps).rsqrt()
    xh = xc * rstd
    g3 = g.reshape(N, C, HW)
    gh = g3 * w.reshape(1, C, 1) if w is not None else g3
    gi = rstd * (gh - gh.mean((0, 2), keepdim=True) - xh * (gh * xh).mean((0, 2), keepdim=True))
    gi = gi.reshape(x._shape) if needs[0] else None
    gw = (g3 * xh).sum((0, 2)) if w is not None and needs[1] else None
    gb = g3.sum((0, 2)) if b is not None and needs[2] else None
    return gi, gw, gb


def _bn_bwd(ctx, g, g_mean=None, g_var=None):
    x, w, b, mean, rstd = ctx.saved_tensors
    needs = ctx.needs_input_grad
    if is_grad_enabled():
        return _bn_composed(g, x, w, b, ctx.eps, needs) + (None,)
    N, C, HW = _bn_dims(x)
    gi, sg, sgx = _norm_bwd_launch(g, x, w, mean, rstd, C, HW, N, C * HW, HW, 1, 1, 1, ctx.params)
    gw = _cast_back(sgx, w.dtype) if w is not None and needs[1] else None
    gb = _cast_back(sg, b.dtype) if b is not None and needs[2] else None
    return gi, gw, gb, None


_bn_op = register("batch_norm", _bn_fwd, _bn_bwd, differentiable_outputs=(0,))


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,  # noqa: A002
               eps=1e-5):
    """Batch normalisation (Ioffe & Szegedy 2015) of input (N, C, *) per channel.

    training=True (or no running statistics): normalise with the batch mean and biased batch variance, and,
    when running_mean / running_var (C,) are given, update them in place under no_grad with PyTorch's momentum
    rule ``running = (1 - momentum) * running + momentum * batch_stat``, using the UNBIASED batch variance for
    ``running_var``. training=False: normalise with the running statistics. weight, bias: (C,) or None.
    Raises ValueError in training with one value per channel, RuntimeError in eval without running stats.
    """
    if input.dim() == 1:   # PyTorch: a 1-D input has no channel dim (C = 0); only an empty one normalises
        for t, nm in ((weight, "weight"), (bias, "bias"), (running_mean, "running_mean"),
                      (running_var, "running_var")):
            if t is not None and t.numel() != 0:
                raise RuntimeError(f"{nm} should contain 0 elements not {t.numel()}")
        if input.numel() == 0:
            return input.clone()
    if input.dim() < 2:
        raise ValueError(f"expected 2D or more input (got {input.dim()}D input)")
    N, C, HW = _bn_dims(input)
    for t, nm in ((weight, "weight"), (bias, "bias"), (running_mean, "running_mean"), (running_var, "running_var")):
        if t is not None and t.numel() != C:
            raise RuntimeError(f"{nm} should contain {C} elements not {t.numel()}")
    if not training:
        if running_mean is None or running_var is None:
            raise RuntimeError("running_mean must be defined in evaluation mode")
        shape = (1, C) + (1,) * (input.dim() - 2)
        rm = running_mean.reshape(shape)
        rv = running_var.reshape(shape)
        y = (input - rm) * (rv + eps).rsqrt()
        if weight is not None:
            y = y * weight.reshape(shape)
        if bias is not None:
            y = y + bias.reshape(shape)
        return _bn_out_format(y, input)
    n = N * HW
    if n <= 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                         f"{input.shape!r}".replace("cltorch.Size", "torch.Size"))
    y, mean, var = call(_bn_op, input, weight, bias, float(eps))
    if running_mean is not None or running_var is not None:
        prev = set_grad_enabled_raw(False)
        try:
            m = float(momentum) if momentum is not None else 0.0
            if running_mean is not None:
                running_mean.mul_(1.0 - m).add_(mean.to(running_mean.dtype) * m)
            if running_var is not None:
                running_var.mul_(1.0 - m).add_(var.to(running_var.dtype) * (m * n / (n - 1)))
        finally:
            set_grad_enabled_raw(prev)
    return _bn_out_format(y, input)


def _bn_out_format(y, x):
    """``y`` channels_last when the 4-d input ``x`` is (PyTorch's batch_norm output format; one copy)."""
    from ..._memory_format import channels_last, format_strides, suggest_format
    if x.dim() == 4 and not x.is_contiguous() and suggest_format(x) is channels_last and \
            tuple(y._stride) != format_strides(tuple(y._shape), channels_last):
        return y.clone(memory_format=channels_last)
    return y


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,  # noqa: A002
                  momentum=0.1, eps=1e-5):
    """Instance normalisation of (N, C, *): group_norm with one group per channel, per sample. With running
    statistics, PyTorch's construction: batch_norm of the (1, N*C, *) view with the running tensors and affine
    parameters repeated N times; the running tensors then take the mean of the N updated copies
    (use_input_stats=False normalises by them)."""
    if running_mean is None and running_var is None and use_input_stats:
        return group_norm(input, input._shape[1], weight, bias, eps)
    n, c = input._shape[0], input._shape[1]
    rep = [t.repeat(n) if t is not None else None for t in (running_mean, running_var, weight, bias)]
    y = batch_norm(input.reshape(1, n * c, *input._shape[2:]), *rep, training=use_input_stats, momentum=momentum,
                   eps=eps)
    if use_input_stats:
        prev = set_grad_enabled_raw(False)
        try:
            for run, r in ((running_mean, rep[0]), (running_var, rep[1])):
                if run is not None:
                    run.copy_(r.view(n, c).mean(0))
        finally:
            set_grad_enabled_raw(prev)
    return y.reshape(input._shape)
