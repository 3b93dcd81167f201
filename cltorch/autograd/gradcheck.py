"""Finite-difference gradient checks (central differences), as PyTorch's gradcheck/gradgradcheck.

Inputs should be float64 (the device needs cl_khr_fp64). The numerical Jacobian perturbs each input
element by ``eps`` and compares with the analytical one from ``autograd.grad`` within
``atol + rtol * |numerical|``. Raises ``GradcheckError`` (a RuntimeError) on mismatch unless
``raise_exception=False``, in which case it returns False.
"""
import numpy as np

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]


class GradcheckError(RuntimeError):
    pass


def _as_tuple(x):
    return tuple(x) if isinstance(x, (list, tuple)) else (x,)


def _flat_outputs(out):
    from .._tensor import Tensor
    return [o for o in _as_tuple(out) if isinstance(o, Tensor) and o.dtype.is_floating_point]


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, nondet_tol=0.0,
              check_undefined_grad=True, fast_mode=False, **kw):
    """Compare analytical and numerical Jacobians of ``func`` at ``inputs``. Returns True when they match."""
    from .. import autograd
    from .._tensor import Tensor
    inputs = _as_tuple(inputs)
    diff = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    outs = _flat_outputs(func(*inputs))
    for oi, o in enumerate(outs):
        on = o.numel()
        # analytical: one backward per output element
        ana = {i: np.zeros((inputs[i].numel(), on)) for i in diff}
        for j in range(on):
            go = np.zeros(on)
            go[j] = 1.0
            from ..ops.creation import tensor
            g = tensor(go.reshape(o.shape), dtype=o.dtype, device=o.device)
            outs2 = _flat_outputs(func(*inputs))
            grads = autograd.grad(outs2[oi], [inputs[i] for i in diff], g, allow_unused=True, retain_graph=False)
            for i, gr in zip(diff, grads):
                if gr is not None:
                    ana[i][:, j] = np.asarray(gr.detach().cpu().tolist(), dtype=np.float64).reshape(-1)
        # numerical
        for i in diff:
            x = inputs[i]
            num = np.zeros((x.numel(), on))
            if not x.is_contiguous():
                raise GradcheckError("gradcheck needs contiguous inputs")
            flat = x.detach().reshape(-1)   # shares x's storage: writes perturb x without autograd
            base = np.asarray(flat.tolist(), dtype=np.float64)

            def value():
                return np.asarray(_flat_outputs(func(*inputs))[oi].detach().tolist(), dtype=np.float64).reshape(-1)
            for k in range(x.numel()):
                flat[k] = base[k] + eps
                plus = value()
                flat[k] = base[k] - eps
                minus = value()
                flat[k] = base[k]
                num[k] = (plus - minus) / (2 * eps)
            if not np.allclose(ana[i], num, atol=atol, rtol=rtol):
                msg = (f"Jacobian mismatch for output {oi} with respect to input {i},\nnumerical:{num}\n"
                       f"analytical:{ana[i]}\n")
                if raise_exception:
                    raise GradcheckError(msg)
                return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
                  gen_non_contig_grad_outputs=False, **kw):
    """Check second derivatives: gradcheck of the function (inputs, grad_outputs) -> grads of func."""
    from .. import autograd
    from .._tensor import Tensor
    from ..ops.creation import tensor
    inputs = _as_tuple(inputs)
    outs = _flat_outputs(func(*inputs))
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = tuple(tensor(rng.standard_normal(tuple(o.shape)), dtype=o.dtype, device=o.device,
                                    requires_grad=True) for o in outs)
    grad_outputs = _as_tuple(grad_outputs)
    diff = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    n_in = len(inputs)

    def first(*args):
        ins, gos = args[:n_in], args[n_in:]
        o = _flat_outputs(func(*ins))
        gs = autograd.grad(o, [ins[i] for i in diff], gos, create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)
    return gradcheck(first, tuple(inputs) + tuple(grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
