"""Memory formats: ``contiguous_format``, ``channels_last``, ``channels_last_3d``, ``preserve_format``.

A memory format names an order of strides. ``channels_last`` lays a 4-d (N, C, H, W) tensor out as NHWC: C
has stride 1, then W, H, N (PyTorch's ``get_channels_last_strides_2d``: no clamping of size-0 or size-1 dims);
``channels_last_3d`` does the same for 5-d (N, C, D, H, W) as NDHWC. ``preserve_format`` is an instruction
to the ``*_like`` factories, ``clone`` and ``.to``: keep the input's format, which here means channels_last
(or channels_last_3d) when the input is in it and not plainly contiguous, else contiguous. (PyTorch also
keeps any other dense permuted layout as it is; cltorch makes those contiguous: the values are the same.)
"""

__all__ = ["memory_format", "contiguous_format", "channels_last", "channels_last_3d", "preserve_format",
           "format_strides", "is_contiguous_as", "suggest_format"]


class memory_format:
    """PyTorch's ``torch.memory_format``: one of four singletons, compared with ``is``."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "cltorch." + self.name

    def __reduce__(self):
        return (_by_name, (self.name,))


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")

_ALL = {f.name: f for f in (contiguous_format, channels_last, channels_last_3d, preserve_format)}
# dim order from fastest to slowest stride, per format and rank
_ORDER = {channels_last: (4, (1, 3, 2, 0)), channels_last_3d: (5, (1, 4, 3, 2, 0))}


def _by_name(name):
    return _ALL[name]


def _check(fmt):
    if not isinstance(fmt, memory_format):
        raise TypeError(f"memory_format must be a cltorch.memory_format, got {type(fmt).__name__}")


def format_strides(shape, fmt):
    """Strides of a dense tensor of ``shape`` in format ``fmt`` (contiguous_format or a channels_last one).

    Raises RuntimeError when a channels_last format meets the wrong rank (PyTorch: "required rank 4 tensor
    to use channels_last format")."""
    _check(fmt)
    if fmt is contiguous_format or fmt is preserve_format:
        st, acc = [], 1
        for s in reversed(shape):
            st.append(acc)
            acc *= max(s, 1)
        return tuple(reversed(st))
    rank, order = _ORDER[fmt]
    if len(shape) != rank:
        raise RuntimeError(f"required rank {rank} tensor to use {fmt.name} format")
    st, acc = [0] * rank, 1
    for d in order:
        st[d] = acc
        acc *= shape[d]
    return tuple(st)


def is_contiguous_as(shape, stride, fmt):
    """True when (shape, stride) is dense in format ``fmt``; size-1 dims may have any stride (PyTorch's rule)."""
    _check(fmt)
    if fmt is preserve_format:
        raise RuntimeError("is_contiguous() does not accept memory_format=preserve_format")
    if fmt is contiguous_format:
        order = tuple(reversed(range(len(shape))))
    else:
        rank, order = _ORDER[fmt]
        if len(shape) != rank:
            return False
    acc = 1
    for d in order:
        if shape[d] != 1:
            if stride[d] != acc:
                return False
            acc *= shape[d]
    return True


def _strides_like(shape, stride, order):
    """PyTorch's reading of a layout from strides (``is_channels_last_strides_2d``/``_3d``): walking the dims in
    the format's order, the strides must not decrease (a dim's extent counted when its size exceeds 1); a size-0
    dim, a stride-0 channel dim, or a batch stride equal to the channel stride (an N111 tensor, ambiguous) reads
    as contiguous, which is the default for ambiguous cases."""
    if stride[1] == 0:
        return False
    lo = 0
    for d in order:
        if shape[d] == 0 or stride[d] < lo:
            return False
        if d == 0 and lo == stride[1]:
            return False
        lo = stride[d] * shape[d] if shape[d] > 1 else stride[d]
    return True


def suggest_format(t):
    """The format ``preserve_format`` keeps for tensor ``t`` (PyTorch's ``suggest_memory_format``): channels_last
    for a 4-d (channels_last_3d for a 5-d) tensor whose strides read so, else contiguous_format."""
    shape, stride = t._shape, t._stride
    for fmt, (rank, order) in _ORDER.items():
        if len(shape) == rank and (_strides_like(shape, stride, order) or
                                   (0 in shape and stride == format_strides(shape, fmt))):   # empty: exact strides
            return fmt
    return contiguous_format
