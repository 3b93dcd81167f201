"""Fused softmax and log_softmax over any dim: the ops, their derivatives and the public functions.

Forward: max-subtraction (so logits of any size are stable), the sum of ``exp(x - max)``, the write; backward: one
kernel with the explicit formulas

* softmax:     ``grad_in = y * (g - sum(g * y, dim))``
* log_softmax: ``grad_in = g - exp(y) * sum(g, dim)``

Two designs, chosen by the device's profile (``[softmax] design``): the CPU design (``cpu.py``,
``cl_kernels/softmax.cl.mako``; also every profile's rows along a non-last dim, where neighbouring work-items read
neighbouring rows) and the GPU design for rows along the last dim (``team.py``, ``cl_kernels/softmax_team.cl.mako``:
a team of lanes per row, the row in registers). Both add in one order (32 stripes, then a balanced tree), so every
configuration and both designs give the same bits. When the backward itself runs with grad mode on
(``create_graph=True``) it is composed from differentiable ops instead, so double (and higher) backward works.

``common.py`` holds the launch helpers the other fused-kernel modules share (norms, losses, attention, rnn).
"""
import warnings

from ... import _dtype as D
from ..._dispatch import call, register, is_grad_enabled
from ..._tensor import Tensor
from .._util import method
from . import cpu, team
from .common import (kernel, local_size, launch, is_host, compute_dtype, types_of, rows3, wrap_dim,  # noqa: F401
                     design)

__all__ = ["softmax", "log_softmax"]


def _softmax_raw(x, dim, log, safe=False):
    """Kernel launch: softmax/log_softmax of floating ``x`` along ``dim`` (already wrapped); new tensor."""
    if x.dim() == 0:
        x1 = _softmax_raw(x.reshape(1), 0, log, safe)
        return x1.reshape(())
    out = Tensor._empty(x._shape, x.dtype, x.device)
    if x.numel() == 0:
        return out
    x, outer, R, inner, so, sr, si = rows3(x, dim)
    if inner == 1 and design(out._runtime(), "softmax") == "gpu":
        team.softmax_fwd(out, x, outer, R, so, sr, log, safe)
    else:
        cpu.forward(out, x, outer, R, inner, so, sr, si, log, safe)
    return out


def _softmax_bwd_raw(g, y, dim, log, safe=False):
    """Kernel launch of the softmax/log_softmax backward (no autograd); ``safe`` only selects the forward's
    program (the backward formula is the same)."""
    gi = Tensor._empty(y._shape, y.dtype, y.device)
    if y.numel() == 0:
        return gi
    if y.dim() == 0:
        return _softmax_bwd_raw(g.reshape(1), y.reshape(1), 0, log, safe).reshape(())
    if g.dtype is not y.dtype:
        g = g.to(y.dtype)
    if g._shape != y._shape:
        g = g.expand(y._shape)
    g, outer, R, inner, gso, gsr, gsi = rows3(g, dim)
    y, _, _, _, yso, ysr, ysi = rows3(y, dim)
    if inner == 1 and design(gi._runtime(), "softmax") == "gpu":
        team.softmax_bwd(gi, g, gso, gsr, y, yso, ysr, outer, R, log)
    else:
        cpu.backward(gi, g, gso, gsr, gsi, y, yso, ysr, ysi, outer, R, inner, log, safe)
    return gi


def _sm_fwd(ctx, x, dim, log, safe):
    out = _softmax_raw(x, dim, log, safe)
    if ctx is not None:
        ctx.save_for_backward(out)
        ctx.dim, ctx.log, ctx.safe = dim, log, safe
    return out


def _sm_bwd(ctx, g):
    (y,) = ctx.saved_tensors
    if is_grad_enabled():
        return softmax_backward_composed(g, y, ctx.dim, ctx.log), None, None, None
    return _softmax_bwd_raw(g, y, ctx.dim, ctx.log, ctx.safe), None, None, None


def softmax_backward_composed(g, y, dim, log):
    """The softmax/log_softmax backward written with differentiable ops (for double backward)."""
    if y.dim() == 0:
        return g * 0 if not log else g - y.exp() * g
    if log:
        return g - y.exp() * g.sum(dim, keepdim=True)
    return y * (g - (g * y).sum(dim, keepdim=True))


_softmax_op = register("softmax", _sm_fwd, _sm_bwd)


def _implicit_dim(ndim, name):
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X "
                  "as an argument.", UserWarning, stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def _prep(input, dim, dtype, name):
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument 'input' must be Tensor, not {type(input).__name__}")
    if dim is None:
        dim = _implicit_dim(input.dim(), name)
    if dtype is not None:
        dtype = D.to_dtype(dtype)
        if input.dtype is not dtype:
            input = input.to(dtype)
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"\"{name}_lastdim_kernel_impl\" not implemented for "
                           f"'{input.dtype.name.capitalize()}': {name} needs a floating point input "
                           "(pass dtype=cltorch.float32)")
    return input, wrap_dim(dim, input.dim())


def softmax(input, dim=None, dtype=None, *, _stacklevel=3):  # noqa: A002
    """Softmax along ``dim``: ``exp(x - max) / sum(exp(x - max))``, one fused kernel.

    input: a floating tensor of any shape (any strides); dim: the dim to normalise (negative allowed);
    dtype: cast the input to this dtype first (as PyTorch does). Returns a tensor of input's shape.
    Raises IndexError for a dim out of range and RuntimeError for integer inputs without ``dtype``.
    A row containing NaN or +inf gives NaN, as in PyTorch; a row of all -inf gives NaN too.
    """
    input, dim = _prep(input, dim, dtype, "softmax")
    return call(_softmax_op, input, dim, False, False)


def log_softmax(input, dim=None, dtype=None, *, _stacklevel=3):  # noqa: A002
    """log(softmax(x)) along ``dim`` computed stably as ``x - max - log(sum(exp(x - max)))``; one kernel.

    Same arguments, shapes and errors as :func:`softmax`.
    """
    input, dim = _prep(input, dim, dtype, "log_softmax")
    return call(_softmax_op, input, dim, True, False)


def safe_softmax(input, dim):
    """Softmax where a row that is entirely -inf gives zeros (and zero gradients) instead of NaN, as torch's
    internal ``_safe_softmax`` that SDPA's math path uses."""
    input, dim = _prep(input, dim, None, "softmax")
    return call(_softmax_op, input, dim, False, True)


method("softmax", lambda self, dim=None, dtype=None: softmax(self, dim, dtype))
method("log_softmax", lambda self, dim=None, dtype=None: log_softmax(self, dim, dtype))
