"""``functional_call`` (PyTorch's ``torch.nn.utils.stateless``): run a module with some of its parameters and
buffers replaced for one call."""
__all__ = ["functional_call"]


def _owner(module, dotted):
    *path, leaf = dotted.split(".")
    for p in path:
        module = getattr(module, p)
    return module, leaf


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """``module(*args, **kwargs)`` with the tensors of ``parameters_and_buffers`` (a dict, or a tuple of dicts, of
    dotted names such as ``"0.weight"`` -> Tensor) standing in for the module's; the module's own tensors are put
    back afterwards, also on error. With ``tie_weights`` a tensor given for one of several tied names replaces all
    of them. ``strict=True`` requires exactly the module's names (RuntimeError otherwise); unknown names raise
    AttributeError/KeyError as in PyTorch."""
    if isinstance(parameters_and_buffers, (list, tuple)):
        merged = {}
        for d in parameters_and_buffers:
            dup = set(merged) & set(d)
            if dup:
                raise ValueError(f"{sorted(dup)} appeared in multiple dictionaries; behavior of functional call "
                                 "is ambiguous")
            merged.update(d)
        parameters_and_buffers = merged
    given = dict(parameters_and_buffers)
    if tie_weights:
        by_id = {}
        for name, t in list(module.named_parameters(remove_duplicate=False)) + \
                list(module.named_buffers(remove_duplicate=False)):
            by_id.setdefault(id(t), []).append(name)
        for names in by_id.values():
            hits = [n for n in names if n in given]
            if hits:
                for n in names:
                    given.setdefault(n, given[hits[0]])
    if strict:
        own = {n for n, _ in module.named_parameters(remove_duplicate=False)} | \
              {n for n, _ in module.named_buffers(remove_duplicate=False)}
        missing, unexpected = sorted(own - set(given)), sorted(set(given) - own)
        if missing or unexpected:
            raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}: missing keys {missing}, "
                               f"unexpected keys {unexpected}")
    saved = []
    try:
        for name, t in given.items():
            owner, leaf = _owner(module, name)
            store = owner._parameters if leaf in owner._parameters else \
                owner._buffers if leaf in owner._buffers else None
            if store is None:
                raise AttributeError(f"{type(owner).__name__} has no parameter or buffer named '{leaf}'")
            saved.append((store, leaf, store[leaf]))
            store[leaf] = t
        if args is None:
            args = ()
        elif not isinstance(args, tuple):
            args = (args,)
        return module(*args, **(kwargs or {}))
    finally:
        for store, leaf, old in reversed(saved):
            store[leaf] = old
