"""Autocast for public functions that are composites rather than one registered op (``linear`` is a GEMM and an
add, ``mse_loss`` a few pointwise ops and a mean): each function named in ``_dispatch.AUTOCAST_OPS`` and defined in
an op module is wrapped once, at import, where it is defined and where Tensor methods point at it, so every later
import (``cltorch.*``, ``nn.functional``) sees the wrapper. Outside an autocast region the wrapper is one attribute
test. Inside one, its inputs are cast by the policy and the function runs with autocast off, as PyTorch runs an op
below its autocast dispatch key (so ``linear``'s inner GEMM and bias add are not cast again)."""
import functools

from .. import _dispatch
from .._tensor import Tensor
from . import (linalg, conv, attention, softmax, losses, norms, joins, activations, rnn, reductions, pointwise,
               tensor_methods_extra)

_MODULES = (linalg, conv, attention, softmax, losses, norms, joins, activations, rnn, reductions, pointwise,
            tensor_methods_extra)


def _wrap(fn, name):
    @functools.wraps(fn)
    def autocast_wrapper(*args, **kw):
        if _dispatch._state.ac is None:
            return fn(*args, **kw)
        dt = _dispatch._device_type(args, kw)
        pol = _dispatch.autocast_policy(dt, name) if dt is not None else None
        if pol is None:
            return fn(*args, **kw)
        args, kw = _dispatch.autocast_args(pol, dt, args, kw)
        prev = _dispatch.set_autocast_state(None)
        try:
            return fn(*args, **kw)
        finally:
            _dispatch.set_autocast_state(prev)
    autocast_wrapper._autocast_original = fn
    return autocast_wrapper


def install(modules, tensor_methods=True, aliases=()):
    """Wrap, in each of ``modules``, the functions defined there whose names ``_dispatch.AUTOCAST_OPS`` lists
    (and every other name in those modules, in the modules ``aliases`` (namespaces that re-export them: ``cltorch``,
    ``cltorch.linalg``), and Tensor attribute, bound to the same function). Used here for the op modules and by
    ``cltorch.amp`` for the modules above this floor. Returns how many."""
    names = set()
    for table in _dispatch.AUTOCAST_OPS.values():
        names.update(table)
    wrapped = {}
    for mod in modules:
        for name in names:
            fn = mod.__dict__.get(name)
            if callable(fn) and getattr(fn, "__module__", None) == mod.__name__ and not isinstance(fn, type):
                if hasattr(fn, "_autocast_original"):
                    continue
                w = wrapped.get(id(fn))
                if w is None:
                    w = wrapped[id(fn)] = (fn, _wrap(fn, name))
                setattr(mod, name, w[1])
    originals = {id(f): w for f, w in wrapped.values()}
    for mod in list(modules) + list(aliases):   # aliases and re-imports of the same function objects elsewhere
        for k, v in list(mod.__dict__.items()):
            w = originals.get(id(v))
            if w is not None:
                setattr(mod, k, w)
    for k in list(vars(Tensor)) if tensor_methods else ():
        w = originals.get(id(vars(Tensor)[k]))
        if w is not None:
            setattr(Tensor, k, w)
    return len(originals)


N_WRAPPED = install(_MODULES)
