"""``cltorch.autograd.functional``: ``vjp``, ``jvp``, ``vhp``, ``hvp``, ``jacobian`` and ``hessian``, built on
``cltorch.autograd.grad``, with ``torch.autograd.functional``'s signatures and output structure.

- ``vjp(f, x, v)``: one reverse pass, ``v^T J``.
- ``jvp(f, x, v)``: the "double-vjp" trick: ``g(u) = u^T J`` is linear in ``u``, so ``J v`` is the gradient of
  ``g(u) . v`` with respect to ``u`` (two reverse passes, needs double backward of ``f``'s ops).
- ``jacobian``: one vjp per output element (``strategy="reverse-mode"``; ``vectorize`` is accepted and computes the
  same rows one by one). Shape ``out.shape + in.shape`` per (output, input) pair; tuples when ``inputs`` or the
  outputs are tuples, as PyTorch nests them.
- ``hessian(f, x)``: the jacobian of ``f``'s gradient (``f`` returns one element).
- ``vhp``/``hvp``: ``v^T H`` / ``H v`` (equal for a symmetric Hessian), through ``vjp`` of the gradient.

``strict=True`` raises RuntimeError when an output does not depend on an input (PyTorch's check); otherwise such
gradients are zeros. ``strategy="forward-mode"`` raises NotImplementedError (no forward-mode AD here).
"""
from .._tensor import Tensor
from . import grad as _grad, enable_grad

__all__ = ["vjp", "jvp", "vhp", "hvp", "jacobian", "hessian"]


def _as_tuple(x, name, fn_name):
    is_tuple = isinstance(x, tuple)
    t = x if is_tuple else (x,)
    for i, e in enumerate(t):
        if not isinstance(e, Tensor):
            if is_tuple:
                raise TypeError(f"The {name} given to {fn_name} must be either a Tensor or a tuple of Tensors but the"
                                f" value at index {i} has type {type(e)}.")
            raise TypeError(f"The {name} given to {fn_name} must be either a Tensor or a tuple of Tensors but the "
                            f"given {name} has type {type(e)}.")
    return is_tuple, t


def _prep(inputs, create_graph):
    with enable_grad():
        return tuple(x.detach().requires_grad_(True) if not create_graph or not x.requires_grad else
                     x.view_as(x) for x in inputs)


def _zeros_for_none(grads, refs, strict, what):
    from ..ops.creation import zeros_like
    out = []
    for i, (g, r) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                raise RuntimeError(f"The output of the user-provided function is independent of input {i}. This is"
                                   f" not allowed in strict mode{what}.")
            g = zeros_like(r)
        out.append(g)
    return tuple(out)


def _grad_safe(outputs, inputs, grad_outputs, create_graph, retain_graph=None):
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    return _grad([o for o, _ in pairs], inputs, [g for _, g in pairs], create_graph=create_graph,
                 retain_graph=retain_graph if retain_graph is not None else True, allow_unused=True)


def _finish(x, create_graph):
    if create_graph:
        return x
    return tuple(e.detach() for e in x)


def _untuple(is_tuple, t):
    return t if is_tuple else t[0]


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T J)``. ``v``: like the outputs; may be omitted when the output has one element."""
    tup_in, inputs = _as_tuple(inputs, "inputs", "vjp")
    inputs = _prep(inputs, create_graph)
    with enable_grad():
        out = func(*inputs)
        tup_out, outs = _as_tuple(out, "outputs of the user-provided function", "vjp")
        if v is None:
            if len(outs) != 1 or outs[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the user-provided function returns a single "
                                   "Tensor with a single element.")
            from ..ops.creation import ones_like
            vs = (ones_like(outs[0]),)
        else:
            _, vs = _as_tuple(v, "v", "vjp")
            if len(vs) != len(outs):
                raise RuntimeError(f"v is a tuple of invalid length: should be {len(outs)} but got {len(vs)}.")
            for i, (a, b) in enumerate(zip(vs, outs)):
                if a.shape != b.shape:
                    raise RuntimeError(f"Entry {i} in v has invalid size: should be {tuple(b.shape)} but got "
                                       f"{tuple(a.shape)}.")
        g = _grad_safe(outs, inputs, vs, create_graph)
    g = _zeros_for_none(g, inputs, strict, "")
    return _untuple(tup_out, _finish(outs, create_graph)), _untuple(tup_in, _finish(g, create_graph))


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), J v)`` by the double-vjp trick. ``v``: like the inputs; may be omitted for a one-element
    input."""
    from ..ops.creation import zeros_like, ones_like
    tup_in, inputs = _as_tuple(inputs, "inputs", "jvp")
    if v is None:
        if len(inputs) != 1 or inputs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the user-provided function is a single "
                               "Tensor with a single element.")
        vs = (ones_like(inputs[0]),)
    else:
        _, vs = _as_tuple(v, "v", "jvp")
        for i, (a, b) in enumerate(zip(vs, inputs)):
            if a.shape != b.shape:
                raise RuntimeError(f"Entry {i} in v has invalid size: should be {tuple(b.shape)} but got "
                                   f"{tuple(a.shape)}.")
    inputs = _prep(inputs, create_graph)
    with enable_grad():
        out = func(*inputs)
        tup_out, outs = _as_tuple(out, "outputs of the user-provided function", "jvp")
        us = tuple(zeros_like(o).requires_grad_(True) for o in outs)
        g = _grad_safe(outs, inputs, us, create_graph=True)
        pairs = [(gi, vi) for gi, vi in zip(g, vs) if gi is not None and gi.requires_grad]
        if pairs:
            jv = _grad([p for p, _ in pairs], us, [q for _, q in pairs], create_graph=create_graph,
                       retain_graph=True, allow_unused=True)
        else:
            jv = (None,) * len(us)
    jv = _zeros_for_none(jv, outs, strict, " (an output is independent of every input)")
    return _untuple(tup_out, _finish(outs, create_graph)), _untuple(tup_out, _finish(jv, create_graph))


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: ``out.shape + in.shape`` for each (output, input) pair."""
    from ..ops.creation import zeros_like
    from ..ops.joins import stack
    if strategy == "forward-mode":
        raise NotImplementedError("jacobian(strategy='forward-mode') is not provided: cltorch has no forward-mode AD")
    if strategy != "reverse-mode":
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode".')
    tup_in, inputs = _as_tuple(inputs, "inputs", "jacobian")
    inputs = _prep(inputs, create_graph)
    with enable_grad():
        out = func(*inputs)
        tup_out, outs = _as_tuple(out, "outputs of the user-provided function", "jacobian")
        result = []
        for i, o in enumerate(outs):
            flat = o.reshape(-1)
            rows = [[] for _ in inputs]
            for j in range(flat.numel()):
                if o.requires_grad:
                    g = _grad((flat[j],), inputs, retain_graph=True, create_graph=create_graph, allow_unused=True)
                else:
                    g = (None,) * len(inputs)
                for k, (gk, x) in enumerate(zip(g, inputs)):
                    if gk is None:
                        if strict:
                            raise RuntimeError(f"Output {i} of the user-provided function is independent of input "
                                               f"{k}. This is not allowed in strict mode.")
                        gk = zeros_like(x)
                    rows[k].append(gk)
            per_in = []
            for k, x in enumerate(inputs):
                if rows[k]:
                    jk = stack(rows[k]).reshape(tuple(o.shape) + tuple(x.shape))
                else:
                    jk = zeros_like(x).reshape((0,) + tuple(x.shape)).reshape(tuple(o.shape) + tuple(x.shape))
                per_in.append(jk if create_graph else jk.detach())
            result.append(tuple(per_in))
    if tup_out:
        return tuple(_untuple(tup_in, r) for r in result)
    return _untuple(tup_in, result[0])


def _scalar_func(func, name):
    def f(*xs):
        y = func(*xs)
        if isinstance(y, tuple) or not isinstance(y, Tensor) or y.numel() != 1:
            raise RuntimeError(f"The function given to {name} should return a single Tensor with a single element.")
        return y.reshape(())
    return f


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a function returning one element: the jacobian of its gradient. Shape ``in.shape * 2`` per
    input pair; a tuple of tuples for tuple inputs."""
    tup_in, ins = _as_tuple(inputs, "inputs", "hessian")
    f = _scalar_func(func, "hessian")

    def gradient(*xs):
        with enable_grad():
            y = f(*xs)
            g = _grad((y,), xs, create_graph=True, allow_unused=True) if y.requires_grad else (None,) * len(xs)
        return _zeros_for_none(g, xs, strict, " (the function is independent of an input)")

    return jacobian(lambda *xs: _untuple(tup_in, gradient(*xs)), _untuple(tup_in, ins), create_graph=create_graph,
                    strict=strict, strategy=outer_jacobian_strategy)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T H)`` for a function returning one element."""
    tup_in, ins = _as_tuple(inputs, "inputs", "vhp")
    f = _scalar_func(func, "vhp")
    ins = _prep(ins, create_graph)
    with enable_grad():
        y = f(*ins)
        g = _grad((y,), ins, create_graph=True, allow_unused=True)
        g = _zeros_for_none(g, ins, strict, "")
        if v is None:
            if len(ins) != 1 or ins[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the input to the user-provided function is a "
                                   "single Tensor with a single element.")
            from ..ops.creation import ones_like
            vs = (ones_like(ins[0]),)
        else:
            _, vs = _as_tuple(v, "v", "vhp")
        r = _grad_safe(g, ins, vs, create_graph)
    r = _zeros_for_none(r, ins, strict, "")
    return (y if create_graph else y.detach()), _untuple(tup_in, _finish(r, create_graph))


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), H v)`` for a function returning one element (the Hessian is symmetric, so this is
    ``vhp``'s product)."""
    return vhp(func, inputs, v, create_graph, strict)
