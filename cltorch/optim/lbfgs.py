"""L-BFGS with an optional strong-Wolfe line search (``torch.optim.LBFGS``).

References:
* J. Nocedal and S. J. Wright, *Numerical Optimization*, 2nd ed., Springer 2006: Algorithm 7.4 (the L-BFGS
  two-loop recursion), eq. 7.20 (the initial Hessian scaling ``s'y / y'y``), Algorithm 3.5 (line search for
  the strong Wolfe conditions: the bracketing phase), Algorithm 3.6 (``zoom``) and eq. 3.59 (the minimiser of
  the cubic that interpolates two function values and two derivatives).
* The safeguards are those of M. Schmidt's minFunc, which PyTorch's LBFGS follows and whose iterates this
  module reproduces: extrapolation steps bounded to ``[t + 0.01 (t - t_prev), 10 t]``, a zoom step too close
  (within 10% of the bracket) to an end twice in a row is moved to 10% inside, and the zoom stops when the
  bracket times ``max|d|`` is under ``tolerance_change``.
"""
import math

import cltorch as torch

from ._common import check_lr, scalar
from .optimizer import Optimizer

__all__ = ["LBFGS"]


def _cubic_min(p, q, bounds=None):
    """The minimiser of the cubic through ``(t, f, f')`` of the points ``p`` and ``q`` (N&W eq. 3.59), clamped
    to ``bounds`` (default: between the two points). Without a real minimiser (or for coincident points) the
    middle of the bounds."""
    a, b = (p, q) if p[0] <= q[0] else (q, p)     # eq. 3.59 with t_i the larger point: d2 = +sqrt(...)
    lo, hi = bounds if bounds is not None else (a[0], b[0])
    ta, fa, ga = a[0], a[1], a[3]
    tb, fb, gb = b[0], b[1], b[3]
    if ta == tb:
        return (lo + hi) / 2.0
    d1 = ga + gb - 3.0 * (fa - fb) / (ta - tb)
    disc = d1 * d1 - ga * gb
    if disc < 0:
        return (lo + hi) / 2.0
    d2 = math.sqrt(disc)
    den = gb - ga + 2.0 * d2
    if den == 0:
        return (lo + hi) / 2.0
    t = tb - (tb - ta) * (gb + d2 - d1) / den
    if math.isnan(t):
        return (lo + hi) / 2.0
    return min(max(t, lo), hi)


def _strong_wolfe(phi, t, f0, g0, gtd0, d_max, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """A step ``t`` along ``d`` satisfying the strong Wolfe conditions (N&W Algorithms 3.5 and 3.6).

    ``phi(t)`` evaluates the objective at ``x + t d`` and returns ``(f, flat_grad, grad . d)``; ``f0``,
    ``g0``, ``gtd0`` are those at ``t = 0``; ``d_max = max|d|``. At most ``max_ls`` evaluations after the first.
    Returns ``(f, flat_grad, t, evaluations)`` of the best point found.
    """
    start = (0.0, f0, g0, gtd0)
    prev = start
    cur = (t,) + phi(t)
    evals, it = 1, 0
    bracket, done = None, False

    def armijo_fails(pt):
        return pt[1] > f0 + c1 * pt[0] * gtd0

    def curvature_holds(pt):
        return abs(pt[3]) <= -c2 * gtd0

    # Algorithm 3.5: grow the step until an interval known to hold a Wolfe point is found
    while it < max_ls:
        if armijo_fails(cur) or (it > 1 and cur[1] >= prev[1]):
            bracket = [prev, cur]
            break
        if curvature_holds(cur):
            bracket, done = [cur], True
            break
        if cur[3] >= 0:
            bracket = [prev, cur]
            break
        tc = cur[0]
        t = _cubic_min(prev, cur, bounds=(tc + 0.01 * (tc - prev[0]), tc * 10))
        prev = cur
        cur = (t,) + phi(t)
        evals += 1
        it += 1
    if it >= max_ls:
        bracket = [start, cur]

    # Algorithm 3.6 (zoom): shrink the bracket; bracket[lo] is the end with the lower value
    lo, hi = (0, 1) if bracket[0][1] <= bracket[-1][1] else (1, 0)
    insufficient = False
    while not done and it < max_ls:
        a, b = bracket[0][0], bracket[1][0]
        left, right = min(a, b), max(a, b)
        if (right - left) * d_max < tolerance_change:
            break
        t = _cubic_min(bracket[0], bracket[1])
        margin = 0.1 * (right - left)
        if min(right - t, t - left) < margin:
            if insufficient or t >= right or t <= left:
                t = right - margin if abs(t - right) < abs(t - left) else left + margin
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        new = (t,) + phi(t)
        evals += 1
        it += 1
        if armijo_fails(new) or new[1] >= bracket[lo][1]:
            bracket[hi] = new
            lo, hi = (0, 1) if bracket[0][1] <= bracket[1][1] else (1, 0)
        else:
            if curvature_holds(new):
                done = True
            elif new[3] * (bracket[hi][0] - bracket[lo][0]) >= 0:
                bracket[hi] = bracket[lo]
            bracket[lo] = new
    best = bracket[lo]
    return best[1], best[2], best[0], evals


class LBFGS(Optimizer):
    r"""Limited-memory BFGS (Nocedal & Wright, Algorithm 7.4), PyTorch's ``torch.optim.LBFGS``.

    Each ``step(closure)`` runs up to ``max_iter`` iterations on all parameters as one flat vector:

    1. the direction ``d = -H g`` from the two-loop recursion over the last ``history_size`` pairs
       ``(s, y)`` with ``y's > 1e-10``, ``H0 = s'y / y'y`` (``d = -g`` on the very first iteration);
    2. the step: ``t = lr`` (on the very first iteration ``min(1, 1 / sum|g|) * lr``); with
       ``line_search_fn="strong_wolfe"`` the strong-Wolfe line search (``c1=1e-4``, ``c2=0.9``, at most
       ``max_eval`` evaluations in the whole step) chooses ``t``; without, a fixed step of ``t``.
    3. stop when ``max|g| <= tolerance_grad``, ``g'd > -tolerance_change``, ``max|t d| <=
       tolerance_change``, ``|loss - prev_loss| < tolerance_change``, or ``max_iter``/``max_eval`` is
       reached.

    Args:
        params: one group only (ValueError otherwise, as PyTorch); all parameters on one device.
        lr (float or 1-element Tensor, 1); max_iter (20); max_eval (default ``max_iter * 5 // 4``);
        tolerance_grad (1e-7); tolerance_change (1e-9); history_size (100); line_search_fn (None or
        ``"strong_wolfe"``; another string raises RuntimeError at ``step``).

    ``step(closure)``: ``closure()`` must clear the gradients, compute the loss, call ``backward()`` and return
    the loss (a 0-d Tensor or a float); it runs with gradients enabled. Returns the loss of the first
    evaluation, as PyTorch.

    State (in ``state[params[0]]``, PyTorch's keys): ``func_evals``, ``n_iter``, ``d``, ``t``, ``old_dirs``,
    ``old_stps``, ``ro``, ``H_diag``, ``prev_flat_grad``, ``prev_loss``, ``al``. Scalars are Python floats
    here (0-d Tensors in PyTorch; loaded ones are accepted).
    """

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None):
        check_lr(lr)
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                        tolerance_change=tolerance_change, history_size=history_size,
                        line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]
        self._numel_cache = None

    def __setstate__(self, state):
        super().__setstate__(state)
        self._params = self.param_groups[0]["params"]
        self._numel_cache = None

    # ------------------------------------------------------------------ the parameters as one flat vector
    def _numel(self):
        if self._numel_cache is None:
            self._numel_cache = sum(p.numel() for p in self._params)
        return self._numel_cache

    def _gather_flat_grad(self):
        views = []
        for p in self._params:
            if p.grad is None:
                views.append(torch.zeros(p.numel(), dtype=p.dtype, device=p.device))
            else:
                views.append(p.grad.reshape(-1))
        return torch.cat(views, 0)

    def _add_grad(self, step_size, update):
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(update[offset:offset + n].view_as(p), alpha=step_size)
            offset += n

    def _directional_evaluate(self, closure, x, t, d):
        """Loss and flat gradient at ``x + t d``; the parameters are restored to ``x`` after."""
        self._add_grad(t, d)
        loss = float(closure())
        flat_grad = self._gather_flat_grad()
        for p, v in zip(self._params, x):
            p.copy_(v)
        return loss, flat_grad

    # ------------------------------------------------------------------ step
    def step(self, closure):
        """Up to ``max_iter`` L-BFGS iterations; returns the loss of ``closure()``'s first evaluation."""
        if closure is None:
            raise RuntimeError("LBFGS requires a closure that reevaluates the model and returns the loss")

        def evaluate():
            with torch.enable_grad():
                return closure()

        with torch.no_grad():
            return self._run(evaluate)

    def _run(self, closure):
        group = self.param_groups[0]
        lr = scalar(group["lr"])
        max_iter = group["max_iter"]
        max_eval = group["max_eval"]
        tol_grad = group["tolerance_grad"]
        tol_change = group["tolerance_change"]
        line_search_fn = group["line_search_fn"]
        history_size = group["history_size"]

        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if flat_grad.abs().max().item() <= tol_grad:
            return orig_loss

        d = state.get("d")
        t = _opt_float(state.get("t"))
        old_dirs = state.get("old_dirs")
        old_stps = state.get("old_stps")
        ro = [scalar(r) for r in state["ro"]] if state.get("ro") is not None else None
        H_diag = _opt_float(state.get("H_diag"))
        prev_flat_grad = state.get("prev_flat_grad")
        prev_loss = _opt_float(state.get("prev_loss"))

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            # direction: N&W Algorithm 7.4
            if state["n_iter"] == 1:
                d = flat_grad.neg()
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1.0
            else:
                y = flat_grad.sub(prev_flat_grad)
                s = d.mul(t)
                ys = y.dot(s).item()
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / y.dot(y).item()
                k = len(old_dirs)
                al = state.get("al")
                if al is None or len(al) < history_size:
                    al = state["al"] = [None] * history_size
                q = flat_grad.neg()
                for i in range(k - 1, -1, -1):
                    al[i] = old_stps[i].dot(q).item() * ro[i]
                    q.add_(old_dirs[i], alpha=-al[i])
                d = r = q.mul(H_diag)
                for i in range(k):
                    be_i = old_dirs[i].dot(r).item() * ro[i]
                    r.add_(old_stps[i], alpha=scalar(al[i]) - be_i)

            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.clone()
            else:
                prev_flat_grad.copy_(flat_grad)
            prev_loss = loss

            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / flat_grad.abs().sum().item()) * lr
            else:
                t = lr
            gtd = flat_grad.dot(d).item()
            if gtd > -tol_change:      # not a descent direction
                break

            ls_evals = 0
            if line_search_fn is not None:
                if line_search_fn != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                x0 = [p.clone() for p in self._params]

                def phi(step, d=d, x0=x0):
                    f, g = self._directional_evaluate(closure, x0, step, d)
                    return f, g, g.dot(d).item()

                loss, flat_grad, t, ls_evals = _strong_wolfe(phi, t, loss, flat_grad, gtd,
                                                             d.abs().max().item(), max_ls=max_eval - current_evals)
                self._add_grad(t, d)
                opt_cond = flat_grad.abs().max().item() <= tol_grad
            else:
                self._add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:
                    loss = float(closure())
                    flat_grad = self._gather_flat_grad()
                    opt_cond = flat_grad.abs().max().item() <= tol_grad
                    ls_evals = 1
            current_evals += ls_evals
            state["func_evals"] += ls_evals

            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if d.abs().max().item() * abs(t) <= tol_change:
                break
            if abs(loss - prev_loss) < tol_change:
                break

        state["d"] = d
        state["t"] = t
        state["old_dirs"] = old_dirs
        state["old_stps"] = old_stps
        state["ro"] = ro
        state["H_diag"] = H_diag
        state["prev_flat_grad"] = prev_flat_grad
        state["prev_loss"] = prev_loss
        return orig_loss


def _opt_float(v):
    return None if v is None else scalar(v)
