"""``grad``, ``grad_and_value``, ``vjp``, ``jvp``, ``linearize``, ``jacrev``, ``jacfwd`` and ``hessian`` of
``torch.func``, built on cltorch's reverse-mode autograd (``cltorch.autograd.grad``).

How the transforms nest. Each call wraps the differentiated inputs in fresh graph nodes (``x.detach()
.requires_grad_()``, or ``x.view_as(x)`` when the graph must reach ``x``), runs the function under
``enable_grad`` and takes the gradient. The gradient keeps its graph (``create_graph=True``) when another
``cltorch.func`` transform encloses this one (so ``grad(grad(f))``, ``jacfwd(jacrev(f))``, MAML's inner step work) or
when the function's graph reaches a tensor that requires grad from outside: a differentiated input itself, or a
tensor the function captures (a module's parameters), so ``y = grad(f)(x); y.sum().backward()`` works, as
PyTorch's transforms compose with ``torch.autograd``. Otherwise results come back detached, as PyTorch's do.

Forward mode. There is no forward-mode AD here, so ``jvp``/``linearize`` use the double-vjp trick (exact, not a
finite difference): ``g(u) = u^T J`` is linear in ``u``, and ``J t`` is the gradient of ``g(u) . t`` with respect to
``u``. ``jacfwd`` computes the same Jacobian as ``jacrev`` (one reverse pass per output element); its values are
PyTorch's, its cost is reverse mode's.
"""
import functools

from .._dispatch import is_grad_enabled
from .._tensor import Tensor
from ..autograd import grad as _ag_grad, enable_grad
from ..autograd.graph import AccumulateGrad
from ..ops.creation import zeros, zeros_like
from ..ops.joins import stack
from ._pytree import tree_flatten, tree_unflatten, spec_str

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "linearize", "jacrev", "jacfwd", "hessian"]

_DEPTH = [0]       # how many cltorch.func differentiation transforms are running now


class _level:
    def __enter__(self):
        _DEPTH[0] += 1

    def __exit__(self, *exc):
        _DEPTH[0] -= 1


def _keep_graph(tensors):
    return _DEPTH[0] > 0 or (is_grad_enabled() and any(isinstance(t, Tensor) and t.requires_grad for t in tensors))


def _reaches_outside(outs, prepared):
    """True when the graph of ``outs`` reaches a leaf that requires grad other than the
    ``prepared`` inputs (a tensor the function captured), so results must keep their graph."""
    mine = {id(t) for t in prepared}
    stack, seen = [], set()
    for o in outs:
        if isinstance(o, Tensor) and o.requires_grad:
            if o.grad_fn is None:
                if id(o) not in mine:
                    return True
            else:
                stack.append(o.grad_fn)
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, AccumulateGrad):
            if id(n.variable) not in mine:
                return True
            continue
        stack.extend(e[0] for e in n.edges if e is not None)
    return False


def _prepare(x, keep):
    if not isinstance(x, Tensor):
        raise ValueError(f"Thing passed to transform API must be Tensor, got {type(x)}")
    if keep and x.requires_grad:
        return x.view_as(x)
    return x.detach().requires_grad_(True)


def _detach_tree(tree, keep):
    if keep:
        return tree
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([v.detach() if isinstance(v, Tensor) else v for v in leaves], spec)


def _wrap_argnum(argnum, n):
    if not isinstance(argnum, int) or isinstance(argnum, bool):
        raise RuntimeError(f"argnum must be int, got: {type(argnum)}")
    if 0 <= argnum < n:
        return argnum
    if -n <= argnum < 0:
        return argnum + n
    raise RuntimeError(f"Got argnum={argnum}, but only {n} positional inputs")


def _norm_argnums(argnums, n):
    if isinstance(argnums, int) and not isinstance(argnums, bool):
        return _wrap_argnum(argnums, n)
    if isinstance(argnums, tuple):
        if len(argnums) == 0:
            raise RuntimeError("argnums must be non-empty")
        out = tuple(_wrap_argnum(a, n) for a in argnums)
        if len(set(out)) != len(out):
            raise RuntimeError(f"argnums elements must be unique, got {argnums}")
        return out
    raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")


def _diff_args(args, argnums):
    """(normalized argnums, the differentiated part of args as one pytree)."""
    a = _norm_argnums(argnums, len(args))
    return a, (args[a] if isinstance(a, int) else tuple(args[i] for i in a))


def _replace(args, argnums, new):
    if isinstance(argnums, int):
        return tuple(new if i == argnums else v for i, v in enumerate(args))
    return tuple(new[argnums.index(i)] if i in argnums else v for i, v in enumerate(args))


def _grads(outs, inputs, cots, keep):
    """Gradients of ``outs`` (weighted by ``cots``) w.r.t. ``inputs``; zeros where an input is unused."""
    pairs = [(o, c) for o, c in zip(outs, cots) if o.requires_grad]
    res = [None] * len(inputs)
    if pairs:
        res = _ag_grad([o for o, _ in pairs], inputs, [c for _, c in pairs], retain_graph=True, create_graph=keep,
                       allow_unused=True)
    return [r if r is not None else zeros_like(i) for r, i in zip(res, inputs)]


def _argnum_leaves(args, argnums):
    """The positions ``argnums`` selects and their Tensor leaves with the tree spec; ValueError for a leaf that
    is not a Tensor (torch.func's message)."""
    an, diff = _diff_args(args, argnums)
    leaves, spec = tree_flatten(diff)
    for v in leaves:
        if not isinstance(v, Tensor):
            raise ValueError(f"Thing passed to transform API must be Tensor, got {type(v)}")
    return an, leaves, spec


def _call_on(func, args, kwargs, an, new, has_aux, api):
    """``func`` called with the arguments at ``an`` replaced by ``new``: ``(output, aux)``."""
    return _split_aux(func(*_replace(args, an, new), **kwargs), has_aux, api)


def _split_aux(out, has_aux, api):
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise RuntimeError(f"{api}: output of function f should be a tuple: (output, aux) if has_aux is True")
    return out


# ------------------------------------------------------------------------------------------------ grad
def grad_and_value(func, argnums=0, has_aux=False):
    """PyTorch's ``torch.func.grad_and_value``: a function returning ``(gradient, value)`` of ``func`` (or
    ``(gradient, (value, aux))`` with ``has_aux=True``, where ``func`` returns ``(value, aux)``).

    ``func`` must return a 0-d floating Tensor. ``argnums`` (int, or non-empty tuple of unique ints, negative counts
    from the end) picks the positional arguments to differentiate; each may be a Tensor or a pytree (tuple, list,
    dict) of Tensors, and the gradient has the same structure (a tuple of them for a tuple ``argnums``). Inputs
    the output does not depend on get zero gradients. Raises RuntimeError for a bad ``argnums``, a non-Tensor or
    non-0-d output, or a malformed ``(output, aux)``; ValueError for a non-Tensor differentiated argument."""
    api = "grad_and_value(f)(*args)"

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        an, leaves, spec = _argnum_leaves(args, argnums)
        keep = _keep_graph(leaves)
        outer_grad = is_grad_enabled()
        with _level(), enable_grad():
            new = [_prepare(v, keep) for v in leaves]
            out, aux = _call_on(func, args, kwargs, an, tree_unflatten(new, spec), has_aux, api)
            if not isinstance(out, Tensor):
                raise RuntimeError(f"{api}: Expected f(*args) to return a Tensor, got {type(out)}")
            if out.dim() != 0:
                raise RuntimeError(f"{api}: Expected f(*args) to return a scalar Tensor, got tensor with "
                                   f"{out.dim()} dims. Maybe you wanted to use the vjp or jacrev APIs instead?")
            keep = keep or (outer_grad and _reaches_outside([out], new))
            g = _grads([out], new, [None], keep)
        g = tree_unflatten(g, spec)
        out = out if keep else out.detach()
        if has_aux:
            return g, (out, _detach_tree(aux, keep))
        return g, out
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """PyTorch's ``torch.func.grad``: a function returning the gradient of ``func`` (a 0-d Tensor) with respect to
    the arguments ``argnums`` (``(gradient, aux)`` with ``has_aux=True``). Arguments and errors as
    :func:`grad_and_value`. Nests: ``grad(grad(f))`` is the second derivative."""
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, v = gv(*args, **kwargs)
        return (g, v[1]) if has_aux else g
    return wrapper


# ------------------------------------------------------------------------------------------------ vjp
def _check_out_tensors(out_leaves, api):
    if not out_leaves or (len(out_leaves) == 1 and out_leaves[0] is None):
        raise RuntimeError(f"{api}: Expected f to be a function that has non-empty output (got output = "
                           f"{out_leaves})")
    for o in out_leaves:
        if not isinstance(o, Tensor):
            raise RuntimeError(f"{api}: expected f(*primals) to return only tensors, got unsupported type {type(o)}")


def vjp(func, *primals, has_aux=False):
    """PyTorch's ``torch.func.vjp``: ``(func(*primals), vjp_fn)`` (``(output, vjp_fn, aux)`` with ``has_aux``).

    ``primals``: Tensors or pytrees of Tensors. ``vjp_fn(cotangents)`` takes cotangents with the output's structure
    and shapes and returns a tuple with one gradient ``cotangents^T J`` per primal (in the primal's structure); it
    may be called several times. Raises RuntimeError for non-Tensor outputs or cotangents whose structure or shapes
    differ from the output's."""
    api = "vjp(f, *primals)"
    leaves, spec = tree_flatten(primals)
    keep = _keep_graph(leaves)
    outer_grad = is_grad_enabled()
    with _level(), enable_grad():
        new = [_prepare(v, keep) for v in leaves]
        out = func(*tree_unflatten(new, spec))
        out, aux = _split_aux(out, has_aux, api)
        out_leaves, out_spec = tree_flatten(out)
        _check_out_tensors(out_leaves, api)
        keep = keep or (outer_grad and _reaches_outside(out_leaves, new))

    def vjp_fn(cotangents, *, retain_graph=True, create_graph=None):
        c_leaves, c_spec = tree_flatten(cotangents)
        if c_spec != out_spec:
            raise RuntimeError("Expected pytree structure of cotangents to be the same as pytree structure of outputs "
                               f"to the function. cotangents: {spec_str(c_spec)}, primal output: "
                               f"{spec_str(out_spec)}")
        for i, (c, o) in enumerate(zip(c_leaves, out_leaves)):
            if not isinstance(c, Tensor):
                raise RuntimeError(f"vjp_fn: Expected cotangents to only contain Tensors, got {type(c)}")
            if tuple(c.shape) != tuple(o.shape):
                raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {c.shape} and output[{i}] has "
                                   f"a shape of {o.shape}.")
        cg = create_graph if create_graph is not None else keep or _keep_graph(c_leaves)
        with _level():
            g = _grads(out_leaves, new, c_leaves, cg)
        return tuple(tree_unflatten(g, spec))

    out = _detach_tree(out, keep)
    if has_aux:
        return out, vjp_fn, _detach_tree(aux, keep)
    return out, vjp_fn


# ------------------------------------------------------------------------------------------------ jvp, linearize
def _check_tuple_of_tensors(x, what, api):
    if not isinstance(x, tuple):
        raise RuntimeError(f"{api}: Expected {what} to be a tuple. E.g. it should be valid to call f(*{what}).")
    leaves, spec = tree_flatten(x)
    if not leaves:
        raise RuntimeError(f"{api}: Expected {what} to contain at least one Tensor.")
    for v in leaves:
        if not isinstance(v, Tensor):
            raise RuntimeError(f"{api}: Expected {what} to only contain Tensors, got {type(v)}")
    return leaves, spec


class _Linear:
    """The first reverse pass of the double-vjp trick: ``g = u^T J`` for dummy cotangents ``u``."""

    def __init__(self, func, leaves, spec, api, has_aux):
        self.api = api
        outer_grad = is_grad_enabled()
        with _level(), enable_grad():
            self.new = [_prepare(v, True) for v in leaves]
            out = func(*tree_unflatten(self.new, spec))
            self.out, self.aux = _split_aux(out, has_aux, api)
            self.out_leaves, self.out_spec = tree_flatten(self.out)
            for o in self.out_leaves:
                if not isinstance(o, Tensor):
                    raise RuntimeError(f"{api}: expected f(*args) to return only tensors, got unsupported type "
                                       f"{type(o)}")
            self.outside = outer_grad and _reaches_outside(self.out_leaves, self.new)
            self.us = [zeros_like(o).requires_grad_(True) if o.requires_grad else None for o in self.out_leaves]
            live = [(o, u) for o, u in zip(self.out_leaves, self.us) if u is not None]
            self.g = [None] * len(self.new)
            if live:
                self.g = list(_ag_grad([o for o, _ in live], self.new, [u for _, u in live], retain_graph=True,
                                       create_graph=True, allow_unused=True))

    def apply(self, tangents, keep, strict=False):
        pairs = [(g, t) for g, t in zip(self.g, tangents) if g is not None and g.requires_grad]
        us = [u for u in self.us if u is not None]
        res = [None] * len(us)
        if pairs and us:
            with _level():
                res = list(_ag_grad([g for g, _ in pairs], us, [t for _, t in pairs], retain_graph=True,
                                    create_graph=keep, allow_unused=True))
        it = iter(res)
        out = []
        for o, u in zip(self.out_leaves, self.us):
            r = next(it) if u is not None else None
            if r is None:
                if strict:
                    raise RuntimeError("jvp(f, primals, tangents, strict=True): The output of f is independent of "
                                       "the inputs. This is not allowed with strict=True.")
                r = zeros_like(o)
            out.append(r)
        return tree_unflatten(out, self.out_spec)


def _check_tangents(p_leaves, p_spec, t_leaves, t_spec, api):
    if p_spec != t_spec:
        raise RuntimeError(f"{api}: Expected primals and tangents to have the same python structure. For example, if "
                           f"primals is a tuple of 3 tensors, tangents also must be. Got primals with structure "
                           f"{spec_str(p_spec)} and tangents with structure {spec_str(t_spec)}")
    for p, t in zip(p_leaves, t_leaves):
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(f"{api}: Expected primals and tangents to have same shape, got a primal of shape "
                               f"{p.shape} and a tangent of shape {t.shape}")


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """PyTorch's ``torch.func.jvp``: ``(func(*primals), J @ tangents)`` (``(output, jvp_out, aux)`` with
    ``has_aux``). ``primals`` and ``tangents``: tuples of the same structure and shapes (pytrees of Tensors).

    Exact, by the double-vjp trick (two reverse passes; needs double backward of ``func``'s ops, which cltorch's
    ops have). Outputs independent of the inputs get zero tangents, or RuntimeError with ``strict=True``. Raises
    RuntimeError for non-tuple or mismatched primals/tangents and non-Tensor outputs."""
    api = "jvp(f, primals, tangents)"
    p_leaves, p_spec = _check_tuple_of_tensors(primals, "primals", api)
    t_leaves, t_spec = _check_tuple_of_tensors(tangents, "tangents", api)
    _check_tangents(p_leaves, p_spec, t_leaves, t_spec, api)
    keep = _keep_graph(p_leaves + t_leaves)
    lin = _Linear(func, p_leaves, p_spec, api, has_aux)
    keep = keep or lin.outside
    jv = lin.apply(t_leaves, keep, strict)
    out = _detach_tree(lin.out, keep)
    if has_aux:
        return out, jv, _detach_tree(lin.aux, keep)
    return out, jv


def linearize(func, *primals):
    """PyTorch's ``torch.func.linearize``: ``(func(*primals), jvp_fn)`` where ``jvp_fn(*tangents)`` returns
    ``J @ tangents`` at ``primals`` (tangents with the primals' structure and shapes); ``func`` runs once and the
    first reverse pass of the double-vjp trick is shared by every ``jvp_fn`` call."""
    api = "linearize(f, *primals)"
    p_leaves, p_spec = tree_flatten(primals)
    for v in p_leaves:
        if not isinstance(v, Tensor):
            raise RuntimeError(f"{api}: Expected primals to only contain Tensors, got {type(v)}")
    keep = _keep_graph(p_leaves)
    lin = _Linear(func, p_leaves, p_spec, api, False)
    keep = keep or lin.outside

    def jvp_fn(*tangents):
        t_leaves, t_spec = tree_flatten(tangents)
        _check_tangents(p_leaves, p_spec, t_leaves, t_spec, "linearize jvp_fn")
        return lin.apply(t_leaves, keep or _keep_graph(t_leaves))

    return _detach_tree(lin.out, keep), jvp_fn


# ------------------------------------------------------------------------------------------------ jacobians
def _jacobian(func, argnums, has_aux, api, args, kwargs):
    an, leaves, spec = _argnum_leaves(args, argnums)
    keep = _keep_graph(leaves)
    outer_grad = is_grad_enabled()
    with _level(), enable_grad():
        new = [_prepare(v, keep) for v in leaves]
        out, aux = _call_on(func, args, kwargs, an, tree_unflatten(new, spec), has_aux, api)
        out_leaves, out_spec = tree_flatten(out)
        for o in out_leaves:
            if not isinstance(o, Tensor):
                raise RuntimeError(f"{api}: Expected f(*args) to return only Tensors, got {type(o)}")
        keep = keep or (outer_grad and _reaches_outside(out_leaves, new))
        jacs = []
        for o in out_leaves:
            n = o.numel()
            if not o.requires_grad or n == 0:
                per_in = [zeros(tuple(o.shape) + tuple(x.shape), dtype=x.dtype, device=x.device) for x in new]
            else:
                rows = [[] for _ in new]
                for k in range(n):
                    e = zeros(n, dtype=o.dtype, device=o.device)
                    e[k] = 1
                    for r, g in zip(rows, _grads([o], new, [e.view(tuple(o.shape))], keep)):
                        r.append(g)
                per_in = [stack(r).reshape(tuple(o.shape) + tuple(x.shape)) for r, x in zip(rows, new)]
            jacs.append(tree_unflatten(per_in, spec))
    jac = tree_unflatten(jacs, out_spec)
    if has_aux:
        return jac, _detach_tree(aux, keep)
    return jac


def _check_chunk(chunk_size, api):
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"{api}: `chunk_size` should be greater than 0.")


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None, _preallocate_and_copy=False):
    """PyTorch's ``torch.func.jacrev``: a function returning the Jacobian of ``func`` with respect to the arguments
    ``argnums`` (``(jacobian, aux)`` with ``has_aux``), by one reverse pass per output element.

    For an output of shape ``O`` and an input of shape ``I`` the block has shape ``O + I``; blocks nest as the
    outputs' structure, then the ``argnums`` structure (a tuple for a tuple ``argnums``, the argument's pytree
    otherwise). ``chunk_size`` (None or a positive int) is accepted and does not change the values (the rows are
    computed one by one). Errors as :func:`grad` (bad ``argnums``, non-Tensor outputs)."""
    _check_chunk(chunk_size, "jacrev")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return _jacobian(func, argnums, has_aux, "jacrev(f, ...)(*args)", args, kwargs)
    return wrapper


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """PyTorch's ``torch.func.jacfwd``: the same Jacobian as :func:`jacrev` (shapes ``O + I``, nesting, ``has_aux``,
    errors), computed here by reverse mode (there is no forward-mode AD): the values are PyTorch's, the cost is one
    reverse pass per output element. ``randomness`` ('error', 'different', 'same') as PyTorch's: with 'error' a
    random draw inside ``func`` raises RuntimeError; the other two let it draw (``func`` runs once)."""
    from ._vmap import _check_randomness_arg, _RandomGuard
    _check_randomness_arg(randomness)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with _RandomGuard("error" if randomness == "error" else "different"):
            return _jacobian(func, argnums, has_aux, "jacfwd(f, ...)(*args)", args, kwargs)
    return wrapper


def hessian(func, argnums=0):
    """PyTorch's ``torch.func.hessian``: ``jacfwd(jacrev(func, argnums), argnums)``; for an output of shape ``O`` and
    an input of shape ``I`` the block has shape ``O + I + I``."""
    return jacfwd(jacrev(func, argnums), argnums)
