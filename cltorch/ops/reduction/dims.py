"""PyTorch's dim arguments of a reduction."""

__all__ = ["normalize_dims", "is_sorted_dims"]


def normalize_dims(dim, ndim):
    """A sorted tuple of non-negative dims. None or () means all dims. IndexError for out of range,
    RuntimeError for a repeated dim (PyTorch's errors)."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (list, tuple)):
        dims = list(dim)
        if not dims:
            return tuple(range(ndim))
    else:
        dims = [dim]
    out = []
    n = max(ndim, 1)
    for d in dims:
        d = int(d)
        if d < -n or d >= n:
            lo, hi = -n, n - 1
            raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but got {d})")
        d %= n
        if d in out:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        out.append(d)
    if ndim == 0:
        return ()
    return tuple(sorted(out))


def is_sorted_dims(dims, nd):
    """Whether ``dims`` is already a sorted tuple of distinct valid dims (normalize_dims would return it)."""
    prev = -1
    for d in dims:
        if d.__class__ is not int or d <= prev or d >= nd:
            return False
        prev = d
    return bool(dims) or nd == 0
