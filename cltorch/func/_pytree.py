"""The nested-container helpers ``cltorch.func`` needs: flatten a pytree of tuples, lists, namedtuples and dicts into
its leaves and a structure spec, rebuild it, and broadcast a prefix tree (``in_dims``/``out_dims``) over a spec.

A spec is ``None`` for a leaf, else ``(node type, dict keys or None, tuple of child specs)``; two specs compare equal
exactly when the structures match. Leaves are anything else (tensors, numbers, None, strings, ``cltorch.Size``).
"""

__all__ = ["tree_flatten", "tree_unflatten", "tree_map", "broadcast_prefix", "spec_str", "num_leaves"]


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _is_node(x):
    return type(x) in (tuple, list) or _is_namedtuple(x) or isinstance(x, dict)


def _flat(x, leaves):
    if type(x) in (tuple, list) or _is_namedtuple(x):
        return (type(x), None, tuple(_flat(c, leaves) for c in x))
    if isinstance(x, dict):
        keys = tuple(x.keys())
        return (type(x), keys, tuple(_flat(x[k], leaves) for k in keys))
    leaves.append(x)
    return None


def tree_flatten(x):
    """``(leaves, spec)`` of a pytree, leaves in depth-first order (dicts in insertion order)."""
    leaves = []
    spec = _flat(x, leaves)
    return leaves, spec


def _build(spec, it):
    if spec is None:
        return next(it)
    kind, keys, children = spec
    vals = [_build(c, it) for c in children]
    if keys is not None:
        pairs = list(zip(keys, vals))
        try:
            return kind(pairs)
        except TypeError:          # e.g. defaultdict: its first argument is the factory
            return dict(pairs)
    if kind in (tuple, list):
        return kind(vals)
    return kind(*vals)             # namedtuple


def tree_unflatten(leaves, spec):
    """Rebuild the pytree of ``spec`` from ``leaves`` (as many as the spec has)."""
    it = iter(leaves)
    out = _build(spec, it)
    rest = sum(1 for _ in it)
    if rest:
        raise ValueError(f"tree_unflatten: {rest} leaves left over for structure {spec_str(spec)}")
    return out


def tree_map(fn, x):
    leaves, spec = tree_flatten(x)
    return tree_unflatten([fn(v) for v in leaves], spec)


def num_leaves(spec):
    if spec is None:
        return 1
    return sum(num_leaves(c) for c in spec[2])


def _bcast(prefix, spec, out):
    if not _is_node(prefix):
        out.extend([prefix] * num_leaves(spec))
        return True
    if spec is None:
        return False
    kind, keys, children = spec
    if isinstance(prefix, dict):
        if keys is None or set(prefix.keys()) != set(keys):
            return False
        return all(_bcast(prefix[k], c, out) for k, c in zip(keys, children))
    if keys is not None or len(prefix) != len(children):
        return False
    return all(_bcast(p, c, out) for p, c in zip(prefix, children))


def broadcast_prefix(prefix, spec):
    """One value per leaf of ``spec``: a non-container ``prefix`` entry stands for the whole subtree under it.
    None when ``prefix`` is not a prefix of the structure."""
    out = []
    return out if _bcast(prefix, spec, out) else None


def spec_str(spec):
    """A short readable form of a spec: ``*`` for a leaf, ``(*, [*, *])``, ``{'a': *}``."""
    if spec is None:
        return "*"
    kind, keys, children = spec
    inner = [spec_str(c) for c in children]
    if keys is not None:
        return "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(keys, inner)) + "}"
    if kind is list:
        return "[" + ", ".join(inner) + "]"
    name = "" if kind is tuple else kind.__name__
    return name + "(" + ", ".join(inner) + ("," if kind is tuple and len(inner) == 1 else "") + ")"
