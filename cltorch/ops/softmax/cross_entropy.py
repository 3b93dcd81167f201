"""cross_entropy's GPU design (``[loss] design = "gpu"``): class-index targets over rows along the last dim run on the
softmax row teams (``cl_kernels/softmax_team.cl.mako``'s ce_team_fwd / ce_team_bwd; see ``team.py``).

The forward's max and sum of exp(x - max) are log_softmax's, so a row's loss is ``-w[t] * log_softmax(x)[t]`` to the
bit; it writes loss.cl.mako's per-row outputs (loss, logsumexp, target weight, the out-of-range flag), which the
reduction and the backward take as from the CPU design. The backward has no sums over a row: a team's lanes write
neighbouring elements. The CPU design (loss.cl.mako) adds a row sequentially, so the design is the active profile's
(deterministic mode: the CPU design on every device)."""
import numpy as np

from .common import kernel, launch, is_host, compute_dtype, types_of
from .team import plan

__all__ = ["enabled", "forward", "backward"]

_L = np.int64


def enabled(rt, mode, inner):
    """Whether cross_entropy (``mode`` "ce"; "nll" reads one element per row) with ``inner`` positions per sample
    runs on the team design (rows along the last dim only: ``inner`` == 1)."""
    return mode == "ce" and inner == 1 and rt.profile.get_value("loss", "design", "cpu") == "gpu"


def _scalar(ct):
    return np.float64 if ct.cl == "double" else np.float32


def _params(x, t, w, eps, which, contig, tpr, ls, k, cached, xchg):
    ct = compute_dtype(x.dtype)
    return dict(T=x.dtype.cl, CT=ct.cl, TT=t.dtype.cl, has_w=w is not None, smooth=eps > 0, log=True, safe=False,
                TPR=tpr, LS=ls, K=k, cached=cached, contig=contig, which=which, xchg=xchg,
                types=types_of(x.dtype, ct, t.dtype))


def forward(loss, lse, wt, err, x3, so, sc, t, w, n, C, ignore_index, eps):
    """Launch ce_team_fwd over the n rows (C classes, row stride so, class stride sc) of x3."""
    rt = loss._runtime()
    ct = compute_dtype(x3.dtype)
    args = [None, None, None, None, None, _L, _L, _L, None, _L, None, _L, _L, _L, _L, _scalar(ct)]
    contig = sc == 1

    def build(tpr, ls, k, cached, xchg):
        return kernel(rt, "softmax_team.cl.mako", "ce_team_fwd", args,
                      **_params(x3, t, w, eps, "ce_fwd", contig, tpr, ls, k, cached, xchg))
    tm = plan(rt, "softmax", C, 1, ("ce_fwd", x3.dtype.cl, t.dtype.cl, w is not None, eps > 0, contig), build)
    xb = x3._storage.cl_buffer()
    launch(rt, tm.kernel, tm.work_items(n), tm.ls, loss._storage.cl_buffer(), lse._storage.cl_buffer(),
           wt._storage.cl_buffer(), err._storage.cl_buffer(), xb, x3._offset, so, sc, t._storage.cl_buffer(),
           t._offset, w._storage.cl_buffer() if w is not None else xb, w._offset if w is not None else 0, n, C,
           int(ignore_index), _scalar(ct)(eps), host=is_host(x3, t))


def backward(gi, g, gstride, den, x3, so, sc, t, w, lse, n, C, ignore_index, eps):
    """Launch ce_team_bwd: the input gradient of the n rows into the contiguous gi."""
    rt = gi._runtime()
    ct = compute_dtype(x3.dtype)
    args = [None, _L, None, _L, _L, None, None, _L, _L, _L, None, _L, None, _L, None, None, _L, _L, _L, _scalar(ct),
            np.int32]
    contig = sc == 1
    wsum = w.to(ct).sum().reshape(1) if w is not None and eps > 0 else None

    def build(tpr, ls, k, cached, xchg):
        return kernel(rt, "softmax_team.cl.mako", "ce_team_bwd", args,
                      **_params(x3, t, w, eps, "ce_bwd", contig, tpr, ls, k, cached, xchg))
    tm = plan(rt, "softmax", C, 1, ("ce_bwd", x3.dtype.cl, t.dtype.cl, w is not None, eps > 0, contig), build)
    xb = x3._storage.cl_buffer()
    lb = lse._storage.cl_buffer()
    launch(rt, tm.kernel, tm.work_items(n), tm.ls, gi._storage.cl_buffer(), gi._offset, g._storage.cl_buffer(),
           g._offset, gstride, den._storage.cl_buffer() if den is not None else lb, xb, x3._offset, so, sc,
           t._storage.cl_buffer(), t._offset, w._storage.cl_buffer() if w is not None else xb,
           w._offset if w is not None else 0, lb, wsum._storage.cl_buffer() if wsum is not None else lb, n, C,
           int(ignore_index), _scalar(ct)(eps), np.int32(1 if den is not None else 0), host=is_host(gi, g, x3))
