"""Loss functions with PyTorch's signatures and ``reduction`` modes ('none', 'mean', 'sum').

``cross_entropy`` and ``nll_loss`` run as fused kernels (``cl_kernels/loss.cl.mako``): for class-index targets
one pass per row computes the log-softmax and the weighted negative log-likelihood (with label smoothing),
saves the row's logsumexp, and a reduce kernel sums the rows (dividing, for 'mean', by the sum of the
targets' class weights, as PyTorch). The backward is one kernel per row that recomputes the softmax from the
saved logsumexp. Out-of-range class indices raise ``IndexError("Target 5 is out of bounds.")``: the kernel
flags them and the flag is read after the launch (which waits for the device). When a backward runs with
grad mode on (``create_graph=True``) it is composed from differentiable ops, so double backward works.

The pointwise losses (mse, l1, smooth_l1, huber, kl_div) are composed from pointwise ops;
``binary_cross_entropy`` and ``binary_cross_entropy_with_logits`` are single pointwise kernels registered
with PyTorch's explicit derivatives (the log clamp at -100 and the ``1e-12`` denominator guard of
binary_cross_entropy, the stable ``log1p(exp(-|x|)) + max(-x, 0)`` form of the logits version).
"""
import warnings

import numpy as np

from .. import _dtype as D
from .._dispatch import call, register, is_grad_enabled
from .._tensor import Tensor
from .elementwise import pointwise, broadcast_shapes, common_device
from .pointwise import softplus, where
from .softmax import (kernel, launch, local_size, is_host, compute_dtype, types_of, rows3, softmax as _softmax,
                      log_softmax as _log_softmax)
from .softmax import cross_entropy as _ce_team

__all__ = ["cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
           "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div"]

_L = np.int64
_REDUCTIONS = ("none", "mean", "sum")


def _legacy_reduction(size_average, reduce, reduction):
    """PyTorch's mapping of the deprecated size_average / reduce flags onto ``reduction``."""
    if size_average is None and reduce is None:
        return reduction
    warnings.warn("size_average and reduce args will be deprecated, please use reduction='" +
                  ("none" if reduce is False else ("mean" if size_average in (None, True) else "sum")) +
                  "' instead.", UserWarning, stacklevel=3)
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def _check_reduction(reduction, extra=()):
    if reduction not in _REDUCTIONS + tuple(extra):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _np_scalar(ct):
    return np.float64 if ct is D.float64 else np.float32


# ------------------------------------------------------------------------------------- row-loss reduction
def _reduce_rows(loss, wt, n, reduction, out_dtype, nden, params):
    """Sum per-row losses (compute dtype, (n,)) into a 0-d tensor of out_dtype; for 'mean' divide by sum(wt)
    (or by nden when wt is None). Returns (out, den) where den (1,) holds the denominator. params: the template
    parameters of the calling loss kernel (the reduce kernel lives in the same program)."""
    dev = loss.device
    ct = loss.dtype
    out = Tensor._empty((), out_dtype, dev)
    den = Tensor._empty((1,), ct, dev)
    rt = out._runtime()
    k = kernel(rt, "loss.cl.mako", "loss_reduce", [None, None, None, None, _L, None, _L, _L, _L, _L, np.int32,
                                                   np.int32, _L], **params)
    CH = int(rt.profile.get_value("loss", "reduce_chunk", 4096))
    host = is_host(loss)
    mean = 1 if reduction == "mean" else 0
    has_wt = 1 if wt is not None else 0
    wbuf = wt._storage.cl_buffer() if wt is not None else loss._storage.cl_buffer()
    if n <= CH:
        launch(rt, k, 1, 1, out._storage.cl_buffer(), den._storage.cl_buffer(), den._storage.cl_buffer(),
               loss._storage.cl_buffer(), 0, wbuf, 0, n, max(n, 1), 1, mean, has_wt, nden, host=host)
        return out, den
    P = (n + CH - 1) // CH
    part = Tensor._empty((2 * P,), ct, dev)
    pb = part._storage.cl_buffer()
    launch(rt, k, P, local_size(rt, "loss", 16), out._storage.cl_buffer(), den._storage.cl_buffer(), pb,
           loss._storage.cl_buffer(), 0, wbuf, 0, n, CH, P, mean, has_wt, nden, host=host)
    launch(rt, k, 1, 1, out._storage.cl_buffer(), den._storage.cl_buffer(), pb, pb, 0, pb, P, P, P, 1, mean,
           has_wt, nden, host=host)
    return out, den


# ------------------------------------------------------------------------------ cross_entropy / nll_loss
_ERR = {}


def _err_buffer(rt, dev):
    e = _ERR.get((rt.index, str(dev)))
    if e is None:
        from .creation import zeros
        e = _ERR[(rt.index, str(dev))] = zeros(2, dtype=D.int64, device=dev)
    return e


def _raise_target_error(err):
    """The deferred check of ce_fwd's flag (see Runtime.defer_check): IndexError naming the first bad target."""
    flag = err._storage.read(0, 2)
    if flag[0]:
        err._storage.write(np.zeros(2, np.int64))
        raise IndexError(f"Target {int(flag[1])} is out of bounds.")


def _ce_fwd(ctx, x, target, weight, ignore_index, reduction, eps, mode):
    """x: (N, C, *) (already batched); target: (N, *) integer."""
    x3, outer, C, inner, so, sc, si = rows3(x, 1)
    n = outer * inner
    ct = compute_dtype(x.dtype)
    dev = x.device
    t = target.contiguous()
    w = weight.contiguous() if weight is not None else None
    if w is not None and w.dtype is not x.dtype:
        w = w.to(x.dtype)
    loss = Tensor._empty((n,), ct, dev)
    lse = Tensor._empty((n,), ct, dev)
    wt = Tensor._empty((n,), ct, dev)
    rt = loss._runtime()
    host = is_host(x, t)
    params = dict(T=x.dtype.cl, CT=ct.cl, TT=t.dtype.cl, mode=mode, has_w=w is not None,
                  smooth=mode == "ce" and eps > 0, types=types_of(x.dtype, ct, t.dtype))
    if n and _ce_team.enabled(rt, mode, inner):
        err = _err_buffer(rt, dev)
        _ce_team.forward(loss, lse, wt, err, x3, so, sc, t, w, n, C, ignore_index, eps)
        rt.defer_check(lambda: _raise_target_error(err), key=("ce", id(err)))
    elif n:
        err = _err_buffer(rt, dev)
        k = kernel(rt, "loss.cl.mako", "ce_fwd", [None, None, None, None, None, _L, _L, _L, _L, None, _L, None, _L,
                                                  _L, _L, _L, _L, _np_scalar(ct)], **params)
        xb = x3._storage.cl_buffer()
        launch(rt, k, n, local_size(rt, "loss"), loss._storage.cl_buffer(), lse._storage.cl_buffer(),
               wt._storage.cl_buffer(), err._storage.cl_buffer(), xb, x3._offset, so, sc, si,
               t._storage.cl_buffer(), t._offset, w._storage.cl_buffer() if w is not None else xb,
               w._offset if w is not None else 0, n, C, inner, int(ignore_index), _np_scalar(ct)(eps), host=host)
        rt.defer_check(lambda: _raise_target_error(err), key=("ce", id(err)))
    if reduction == "none":
        out = loss.reshape(target._shape)
        out = out.to(x.dtype) if out.dtype is not x.dtype else out
        den = None
    else:
        out, den = _reduce_rows(loss, wt, n, reduction, x.dtype, n, params)
    if ctx is not None:
        ctx.save_for_backward(x3, t, w, lse, den)
        ctx.args = (ignore_index, reduction, eps, mode, C, inner, so, sc, si, n)
        ctx.params = params
    return out


def _ce_composed(g, x3, t, w, den, args):
    """The cross_entropy / nll_loss input gradient from differentiable ops (double backward)."""
    ignore_index, reduction, eps, mode, C, inner, so, sc, si, n = args
    from .creation import arange
    N = n // inner if inner else 0
    xv = x3.reshape(N, C, inner)
    tt = t.reshape(N, 1, inner)
    cls = arange(C, device=x3.device).reshape(1, C, 1)
    onehot = (cls == tt).to(x3.dtype)
    valid = (tt != ignore_index).to(x3.dtype)
    wb = w.reshape(1, C, 1).to(x3.dtype) if w is not None else None
    wt = (onehot * wb).sum(1, keepdim=True) if wb is not None else valid
    if reduction == "none":
        gs = g.reshape(N, 1, inner)
    elif reduction == "mean":
        gs = g / den.detach().to(g.dtype)
    else:
        gs = g
    if mode == "ce":
        p = _softmax(xv, 1)
        grad = (1.0 - eps) * wt * (p - onehot)
        if eps > 0:
            W = wb.sum() if wb is not None else float(C)
            grad = grad + (eps / C) * (W * p - (wb if wb is not None else 1.0))
    else:
        grad = -(wt * onehot)
    grad = grad * valid * gs
    return grad.reshape(x3._shape)


def _ce_bwd(ctx, g):
    x3, t, w, lse, den = ctx.saved_tensors
    ignore_index, reduction, eps, mode, C, inner, so, sc, si, n = ctx.args
    if len(ctx.needs_input_grad) > 2 and ctx.needs_input_grad[2]:
        raise RuntimeError("the derivative for 'weight' is not implemented.")
    if is_grad_enabled():
        return _ce_composed(g, x3, t, w, den, ctx.args), None, None, None, None, None, None
    ct = compute_dtype(x3.dtype)
    gi = Tensor._empty(x3._shape, x3.dtype, x3.device)
    if n == 0:
        return gi, None, None, None, None, None, None
    g = g.to(x3.dtype) if g.dtype is not x3.dtype else g
    if reduction == "none":
        g = g.contiguous()
        gstride = 1
    else:
        gstride = 0
    rt = gi._runtime()
    if _ce_team.enabled(rt, mode, inner):
        _ce_team.backward(gi, g, gstride, den if reduction == "mean" else None, x3, so, sc, t, w, lse, n, C,
                          ignore_index, eps)
        return gi, None, None, None, None, None, None
    k = kernel(rt, "loss.cl.mako", "ce_bwd", [None, _L, None, _L, _L, None, None, _L, _L, _L, _L, None, _L, None, _L,
                                              None, _L, _L, _L, _L, _np_scalar(ct), _np_scalar(ct), np.int32],
               **ctx.params)
    wsum = float(C)                   # the kernel sums the weights itself when they are given
    xb = x3._storage.cl_buffer()
    lb = lse._storage.cl_buffer()
    launch(rt, k, n, local_size(rt, "loss"), gi._storage.cl_buffer(), gi._offset, g._storage.cl_buffer(), g._offset,
           gstride, den._storage.cl_buffer() if den is not None else lb, xb, x3._offset, so, sc, si,
           t._storage.cl_buffer(), t._offset, w._storage.cl_buffer() if w is not None else xb,
           w._offset if w is not None else 0, lb, n, C, inner, int(ignore_index), _np_scalar(ct)(eps),
           _np_scalar(ct)(wsum), np.int32(1 if reduction == "mean" else 0), host=is_host(gi, g, x3))
    return gi, None, None, None, None, None, None


_ce_op = register("cross_entropy", _ce_fwd, _ce_bwd)


# probability targets
def _cep_fwd(ctx, x, target, weight, reduction, eps):
    x3, outer, C, inner, so, sc, si = rows3(x, 1)
    n = outer * inner
    ct = compute_dtype(x.dtype)
    dev = x.device
    tg = target.to(x.dtype) if target.dtype is not x.dtype else target
    t3, _, _, _, tso, tsc, tsi = rows3(tg, 1)
    w = weight.contiguous() if weight is not None else None
    if w is not None and w.dtype is not x.dtype:
        w = w.to(x.dtype)
    loss = Tensor._empty((n,), ct, dev)
    lse = Tensor._empty((n,), ct, dev)
    rt = loss._runtime()
    params = dict(T=x.dtype.cl, CT=ct.cl, TT="long", mode="ce", has_w=w is not None, smooth=eps > 0,
                  types=types_of(x.dtype, ct))
    if n:
        k = kernel(rt, "loss.cl.mako", "cep_fwd", [None, None, None, _L, _L, _L, _L, None, _L, _L, _L, _L, None, _L,
                                                   _L, _L, _L, _np_scalar(ct)], **params)
        xb = x3._storage.cl_buffer()
        launch(rt, k, n, local_size(rt, "loss"), loss._storage.cl_buffer(), lse._storage.cl_buffer(), xb,
               x3._offset, so, sc, si, t3._storage.cl_buffer(), t3._offset, tso, tsc, tsi,
               w._storage.cl_buffer() if w is not None else xb, w._offset if w is not None else 0, n, C, inner,
               _np_scalar(ct)(eps), host=is_host(x, t3))
    if reduction == "none":
        out = loss.reshape((outer,) + tuple(x._shape[2:]))
        out = out.to(x.dtype) if out.dtype is not x.dtype else out
    else:
        out, _ = _reduce_rows(loss, None, n, reduction, x.dtype, n, params)
    if ctx is not None:
        ctx.params = params
        ctx.save_for_backward(x3, t3, w, lse)
        ctx.args = (reduction, eps, C, inner, so, sc, si, tso, tsc, tsi, n, outer, x._shape)
    return out


def _cep_bwd(ctx, g):
    x3, t3, w, lse = ctx.saved_tensors
    reduction, eps, C, inner, so, sc, si, tso, tsc, tsi, n, outer, shape = ctx.args
    needs = ctx.needs_input_grad
    if len(needs) > 2 and needs[2]:
        raise RuntimeError("the derivative for 'weight' is not implemented.")
    ct = compute_dtype(x3.dtype)
    wb = w.reshape((1, C) + (1,) * (len(shape) - 2)) if w is not None else None
    if reduction == "none":
        gs = g.reshape((outer, 1) + tuple(shape[2:]))
    elif reduction == "mean":
        gs = g / float(max(n, 1)) if n else g * float("nan")
    else:
        gs = g
    gt = None
    if len(needs) > 1 and needs[1]:
        lp = _log_softmax(x3.reshape(shape), 1)
        gt = -(lp * wb if wb is not None else lp) * (1.0 - eps) * gs
    if is_grad_enabled():
        p = _softmax(x3.reshape(shape), 1)
        tp = t3.reshape(shape) * (1.0 - eps) + eps / C
        wtp = tp * wb if wb is not None else tp
        gx = gs * (p * wtp.sum(1, keepdim=True) - wtp)
        return gx, gt, None, None, None
    gi = Tensor._empty(x3._shape, x3.dtype, x3.device)
    if n == 0:
        return gi, gt, None, None, None
    g = g.to(x3.dtype) if g.dtype is not x3.dtype else g
    if reduction == "none":
        g = g.contiguous()
        gstride, gmul = 1, 1.0
    else:
        gstride, gmul = 0, (1.0 / n if reduction == "mean" else 1.0)
    rt = gi._runtime()
    k = kernel(rt, "loss.cl.mako", "cep_bwd", [None, _L, None, _L, _L, _np_scalar(ct), None, _L, _L, _L, _L, None, _L,
                                               _L, _L, _L, None, _L, None, _L, _L, _L, _np_scalar(ct)], **ctx.params)
    xb = x3._storage.cl_buffer()
    launch(rt, k, n, local_size(rt, "loss"), gi._storage.cl_buffer(), gi._offset, g._storage.cl_buffer(), g._offset,
           gstride, _np_scalar(ct)(gmul), xb, x3._offset, so, sc, si, t3._storage.cl_buffer(), t3._offset, tso, tsc,
           tsi, w._storage.cl_buffer() if w is not None else xb, w._offset if w is not None else 0,
           lse._storage.cl_buffer(), n, C, inner, _np_scalar(ct)(eps), host=is_host(gi, g, x3))
    return gi, gt, None, None, None


_cep_op = register("cross_entropy_prob", _cep_fwd, _cep_bwd)


def _batched(input, target, name, prob):
    """Bring (C,) / () inputs to a batch of one; check shapes as PyTorch does."""
    if input.dim() == 0:
        raise RuntimeError(f"{name}: input tensor should be 1D or more, got 0D")
    unbatched = input.dim() == 1
    if prob:
        if tuple(target._shape) != tuple(input._shape):
            raise RuntimeError(f"Expected target size {list(input._shape)}, got {list(target._shape)}")
        if unbatched:
            return input.unsqueeze(0), target.unsqueeze(0), True
        return input, target, False
    if target.dtype.is_floating_point or target.dtype is D.bool:
        raise RuntimeError(f"expected scalar type Long but found {target.dtype.name.capitalize()}")
    if unbatched:
        if target.dim() != 0:
            raise RuntimeError(f"1D target tensor expected, multi-target not supported; for an unbatched (C,) "
                               f"input the target must be 0-d, got shape {list(target._shape)}")
        return input.unsqueeze(0), target.reshape(1), True
    if target.dim() == 0 or input._shape[0] != target._shape[0]:
        raise ValueError(f"Expected input batch_size ({input._shape[0]}) to match target batch_size "
                         f"({target._shape[0] if target.dim() else 0}).")
    want = (input._shape[0],) + tuple(input._shape[2:])
    if tuple(target._shape) != want:
        raise RuntimeError(f"Expected target size {list(want)}, got {list(target._shape)}")
    return input, target, False


def _check_weight(weight, C):
    if weight is not None and (weight.dim() != 1 or weight.numel() != C):
        raise RuntimeError(f"weight tensor should be defined either for all {C} classes or no classes but got "
                           f"weight tensor of shape: {list(weight._shape)}")


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,  # noqa: A002
                  reduction="mean", label_smoothing=0.0):
    """Cross entropy between logits and targets, as ``torch.nn.functional.cross_entropy``.

    input: (C,), (N, C) or (N, C, d1, ...) logits (floating). target: class indices (an integer tensor of shape
    (), (N,) or (N, d1, ...)) or class probabilities (a floating tensor of input's shape). weight: (C,) class
    weights. ignore_index: class-index targets equal to it contribute nothing (nor to the mean's denominator).
    label_smoothing in [0, 1]: mixes the target with the uniform distribution (Szegedy et al. 2016).
    reduction: 'none' (per-sample losses of target's shape), 'mean' (for class indices divided by the sum of the
    targets' weights, NaN when every target is ignored; for probabilities divided by the number of samples) or
    'sum'. Fused: log-softmax and the weighted NLL in one kernel, and one backward kernel.
    Errors: IndexError for a class index outside [0, C); ValueError for a batch-size mismatch or a bad
    reduction; RuntimeError for other shape mismatches.
    """
    reduction = _check_reduction(_legacy_reduction(size_average, reduce, reduction))
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"cross_entropy: expected a floating point input, got {input.dtype.name}")
    common_device([input, target] + ([weight] if weight is not None else []))
    prob = target.dtype.is_floating_point
    x, t, unb = _batched(input, target, "cross_entropy", prob)
    _check_weight(weight, x._shape[1])
    if prob:
        out = call(_cep_op, x, t, weight, reduction, float(label_smoothing))
    else:
        out = call(_ce_op, x, t, weight, int(ignore_index), reduction, float(label_smoothing), "ce")
    if unb and reduction == "none":
        out = out.reshape(())
    return out


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,  # noqa: A002
             reduction="mean"):
    """Negative log-likelihood of class-index targets given log-probabilities, as
    ``torch.nn.functional.nll_loss``: ``loss_i = -weight[t_i] * input[i, t_i]``. Shapes, ``ignore_index``,
    reductions ('mean' divides by the sum of the targets' weights) and errors as :func:`cross_entropy`."""
    reduction = _check_reduction(_legacy_reduction(size_average, reduce, reduction))
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"nll_loss: expected a floating point input, got {input.dtype.name}")
    common_device([input, target] + ([weight] if weight is not None else []))
    x, t, unb = _batched(input, target, "nll_loss", False)
    _check_weight(weight, x._shape[1])
    out = call(_ce_op, x, t, weight, int(ignore_index), reduction, 0.0, "nll")
    if unb and reduction == "none":
        out = out.reshape(())
    return out


# ------------------------------------------------------------------------------------------ pointwise losses
def _reduce(loss, reduction):
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.mean()


def _size_warning(input, target):
    if tuple(target._shape) != tuple(input._shape):
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size ({input.shape}). "
                      "This will likely lead to incorrect results due to broadcasting. Please ensure they have the "
                      "same size.", UserWarning, stacklevel=3)


def _weighted(loss, weight, input, reduction, mean_by_weight=True):
    if weight is None:
        return _reduce(loss, reduction)
    if tuple(weight._shape) != tuple(input._shape):
        raise ValueError("Weights and input must have the same size.")
    loss = loss * weight
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / weight.sum() if mean_by_weight else loss.mean()


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):  # noqa: A002
    """Mean squared error ``(input - target)^2`` (broadcast, with PyTorch's warning when sizes differ). With
    ``weight`` (input's shape) the 'mean' divides by ``weight.sum()``, as PyTorch 2.13."""
    reduction = _check_reduction(_legacy_reduction(size_average, reduce, reduction))
    _size_warning(input, target)
    d = input - target
    return _weighted(d * d, weight, input, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):  # noqa: A002
    """Mean absolute error ``|input - target|``; ``weight`` as in :func:`mse_loss`."""
    reduction = _check_reduction(_legacy_reduction(size_average, reduce, reduction))
    _size_warning(input, target)
    return _weighted((input - target).abs(), weight, input, reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):  # noqa: A002
    """Smooth L1 (Girshick 2015): ``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta``; beta = 0 is
    the L1 loss. Raises RuntimeError for a negative beta."""
    reduction = _check_reduction(_legacy_reduction(size_average, reduce, reduction))
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    _size_warning(input, target)
    d = input - target
    ad = d.abs()
    if beta == 0:
        return _reduce(ad, reduction)
    return _reduce(where(ad < beta, d * d * (0.5 / beta), ad - 0.5 * beta), reduction)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):  # noqa: A002
    """Huber loss (Huber 1964): ``0.5 d^2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)``. With
    ``weight`` the 'mean' is the mean of the weighted losses, as PyTorch 2.13."""
    reduction = _check_reduction(reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    _size_warning(input, target)
    d = input - target
    ad = d.abs()
    loss = where(ad < delta, d * d * 0.5, (ad - 0.5 * delta) * delta)
    return _weighted(loss, weight, input, reduction, mean_by_weight=False)


# binary cross entropy: one pointwise kernel forward, PyTorch's explicit derivative backward
def _lit(ct, v):
    return f"(({ct.cl}){v!r})"


def _bce_fwd(ctx, x, t, w):
    ct = compute_dtype(x.dtype)
    one, lo = _lit(ct, 1.0), _lit(ct, -100.0)
    expr = f"-(x1 * fmax(log(x0), {lo}) + ({one} - x1) * fmax(log({one} - x0), {lo}))"
    ops = [x, t]
    if w is not None:
        expr = f"x2 * ({expr})"
        ops.append(w)
    if ctx is not None:
        ctx.save_for_backward(x, t, w)
    return pointwise(expr, ops, x.dtype, ct)


def _bce_bwd(ctx, g):
    x, t, w = ctx.saved_tensors
    needs = ctx.needs_input_grad
    gw = g * w if w is not None else g
    gx = gw * (x - t) / ((1 - x) * x).clamp(min=1e-12) if needs[0] else None
    gt = gwt = None
    if len(needs) > 1 and needs[1]:
        gt = gw * ((1 - x).log().clamp(min=-100) - x.log().clamp(min=-100))
    if w is not None and len(needs) > 2 and needs[2]:
        gwt = -g * (t * x.log().clamp(min=-100) + (1 - t) * (1 - x).log().clamp(min=-100))
    return gx, gt, gwt


_bce_op = register("binary_cross_entropy", _bce_fwd, _bce_bwd)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):  # noqa: A002
    """Binary cross entropy of probabilities: ``-w (t log x + (1 - t) log(1 - x))`` with each log clamped at
    -100, as PyTorch. input and target must have the same shape (ValueError otherwise); weight broadcasts to it.
    Inputs outside [0, 1] are not checked (they give NaN)."""
    reduction = _check_reduction(_legacy_reduction(size_average, reduce, reduction))
    if tuple(target._shape) != tuple(input._shape):
        raise ValueError(f"Using a target size ({target.shape}) that is different to the input size "
                         f"({input.shape}) is deprecated. Please ensure they have the same size.")
    if weight is not None:
        broadcast_shapes(weight._shape, input._shape)
    return _reduce(call(_bce_op, input, target, weight), reduction)


def _bcel_fwd(ctx, x, t, w, pw):
    ct = compute_dtype(x.dtype)
    one, zero = _lit(ct, 1.0), _lit(ct, 0.0)
    sp = f"(log1p(exp(-fabs(x0))) + fmax(-x0, {zero}))"          # softplus(-x), stable
    ops = [x, t]
    if pw is not None:
        ops.append(pw)
        lw = f"({one} + (x{len(ops) - 1} - {one}) * x1)"
    else:
        lw = one
    expr = f"({one} - x1) * x0 + {lw} * {sp}"
    if w is not None:
        ops.append(w)
        expr = f"x{len(ops) - 1} * ({expr})"
    if ctx is not None:
        ctx.save_for_backward(x, t, w, pw)
    return pointwise(expr, ops, x.dtype, ct)


def _bcel_bwd(ctx, g):
    x, t, w, pw = ctx.saved_tensors
    needs = ctx.needs_input_grad
    gw = g * w if w is not None else g
    sig = x.sigmoid()
    gx = gt = gpw = None
    if needs[0]:
        if pw is not None:
            gx = gw * (sig * (1 + (pw - 1) * t) - pw * t)
        else:
            gx = gw * (sig - t)
    if len(needs) > 1 and needs[1]:
        spn = softplus(-x)
        gt = gw * (-x + (pw - 1) * spn) if pw is not None else gw * (-x)
    if pw is not None and len(needs) > 3 and needs[3]:
        spn = softplus(-x)
        gpw = gw * t * spn
    gw_ = None
    if w is not None and len(needs) > 2 and needs[2]:
        lw = (1 + (pw - 1) * t) if pw is not None else 1.0
        gw_ = g * ((1 - t) * x + lw * softplus(-x))
    return gx, gt, gw_, gpw


_bcel_op = register("binary_cross_entropy_with_logits", _bcel_fwd, _bcel_bwd)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,  # noqa: A002
                                     reduction="mean", pos_weight=None):
    """Sigmoid + binary cross entropy in one stable kernel: ``w ((1 - t) x + (1 + (p - 1) t) softplus(-x))``
    where p is ``pos_weight`` (broadcast along the last dim, one per class). input and target must have the
    same shape (ValueError otherwise)."""
    reduction = _check_reduction(_legacy_reduction(size_average, reduce, reduction))
    if tuple(target._shape) != tuple(input._shape):
        raise ValueError(f"Target size ({target.shape}) must be the same as input size ({input.shape})")
    return _reduce(call(_bcel_op, input, target, weight, pos_weight), reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):  # noqa: A002
    """Kullback-Leibler divergence with ``input`` holding log-probabilities: pointwise
    ``target * (log(target) - input)`` (0 where target is 0), or with ``log_target=True``
    ``exp(target) * (target - input)``. reduction also takes 'batchmean' (the sum divided by the batch size,
    the mathematical KL divergence); 'mean' divides by every element, with PyTorch's warning."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    elif reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      UserWarning, stacklevel=2)
    _check_reduction(reduction, ("batchmean",))
    if log_target:
        loss = target.exp() * (target - input)
    else:
        pos = target > 0
        safe = where(pos, target, target * 0 + 1)
        loss = where(pos, target * safe.log(), target * 0) - target * input
    if reduction == "batchmean":
        s = loss.sum()
        return s / input._shape[0] if input.dim() != 0 else s
    return _reduce(loss, reduction)
