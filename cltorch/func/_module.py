"""The module helpers of ``torch.func``: ``functional_call``, ``stack_module_state``,
``replace_all_batch_norm_modules_``, and the identity-like ``functionalize`` and ``debug_unwrap``."""
from ..nn.modules.normalization import _BatchNorm
from ..nn.utils.stateless import functional_call as _stateless_call
from ..ops.joins import stack

__all__ = ["functional_call", "stack_module_state", "replace_all_batch_norm_modules_", "functionalize",
           "debug_unwrap"]


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """PyTorch's ``torch.func.functional_call``: ``module(*args, **kwargs)`` with the given parameters and buffers (a
    dict of dotted names -> Tensor, or a tuple of such dicts with disjoint keys) standing in for the module's own
    for this call. ``args``: one argument or a tuple of them. See :func:`cltorch.nn.utils.stateless.functional_call`
    for ``tie_weights``/``strict`` and the errors (ValueError for keys in several dicts, RuntimeError for
    ``strict`` mismatches, AttributeError for unknown names)."""
    return _stateless_call(module, parameter_and_buffer_dicts, args, kwargs, tie_weights=tie_weights, strict=strict)


def _stacked_leaf(tensors, name):
    req = [t.requires_grad for t in tensors]
    if any(req) and not all(req):
        raise RuntimeError(f"Expected {name} from each model to have the same .requires_grad")
    out = stack([t.detach() for t in tensors])
    return out.requires_grad_(True) if all(req) else out


def stack_module_state(models):
    """PyTorch's ``torch.func.stack_module_state``: ``(params, buffers)``, two dicts from each parameter's / buffer's
    dotted name to the models' tensors stacked along a new leading dim (shape ``(len(models), *shape)``), for
    ``vmap(functional_call...)`` over an ensemble. Stacked parameters are new leaf tensors that require grad when the
    models' do. Raises RuntimeError for no models, mixed training/eval modes, models of different classes, or a
    parameter that requires grad in some models only."""
    models = list(models)
    if len(models) == 0:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or not any(m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    if not all(type(m) is type(models[0]) for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")
    all_p = [dict(m.named_parameters()) for m in models]
    all_b = [dict(m.named_buffers()) for m in models]
    params = {k: _stacked_leaf([p[k] for p in all_p], k) for k in all_p[0]}
    buffers = {k: _stacked_leaf([b[k] for b in all_b], k) for k in all_b[0]}
    return params, buffers


def replace_all_batch_norm_modules_(root):
    """PyTorch's ``torch.func.replace_all_batch_norm_modules_``: in place, every BatchNorm module under ``root``
    (``root`` included) that tracks running stats stops doing so: ``running_mean``, ``running_var`` and
    ``num_batches_tracked`` become None and ``track_running_stats`` False (so it normalizes with batch statistics
    in train and eval mode). Returns ``root``."""
    for m in root.modules():
        if isinstance(m, _BatchNorm) and m.track_running_stats:
            m.running_mean = None
            m.running_var = None
            m.num_batches_tracked = None
            m.track_running_stats = False
    return root


def functionalize(func, *, remove="mutations"):
    """PyTorch's ``torch.func.functionalize``. It rewrites mutations (and, with ``remove='mutations_and_views'``,
    views) into out-of-place ops for graph-capture backends and does not change the results. cltorch runs eagerly,
    where the rewrite has nothing to change, so this returns ``func`` itself (which is semantically correct: same
    outputs and same input mutations). RuntimeError for any other ``remove``."""
    if remove not in ("mutations", "mutations_and_views"):
        raise RuntimeError(f"functionalize(f, remove='mutations'): received invalid argument for remove={remove}. "
                           "Valid options are:\n     remove='mutations': all inplace and out= operators will be "
                           "removed from the program, and replaced with their out-of-place equivalents.\n     "
                           "remove='mutations_and_views': In addition to the above, all aliasing operators {view} "
                           "will be replaced with their non-aliasing counterparts, {view}_copy.\n")
    return func


def debug_unwrap(tensor, *, recurse=True):
    """PyTorch's ``torch.func.debug_unwrap``: the plain tensor under functorch's wrappers. cltorch's transforms
    pass plain tensors to the function (no wrapper objects), so this returns ``tensor`` unchanged."""
    return tensor
