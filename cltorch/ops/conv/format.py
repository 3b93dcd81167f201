"""Memory formats of the convolutions' outputs and gradients (PyTorch's rule), kept apart from the kernels' glue.

The kernels read any strides and write NC(D)HW. As PyTorch, a convolution whose input or weight is channels_last
returns its output in that format (the public wrappers copy it once: :func:`_out_format`; a 3-d convolution's
output stays contiguous, as PyTorch's CPU conv3d gives it), and its backward returns each gradient in the format
of the tensor it is the gradient of (channels_last or channels_last_3d: what PyTorch's AccumulateGrad leaves in a
leaf's ``.grad``), so a channels_last model gets channels_last ``.grad`` tensors. Contiguous inputs take none of
these copies.
"""
from ..._memory_format import channels_last, channels_last_3d, contiguous_format, format_strides, suggest_format


def _reads_as(t, fmt):
    """Whether ``t`` (4-d for channels_last, 5-d for channels_last_3d) has exactly ``fmt``'s strides (and not
    plain contiguous ones), or, when it has neither exactly, strides that read as ``fmt``."""
    shape, stride = tuple(t._shape), tuple(t._stride)
    exact = format_strides(shape, fmt)
    if stride == exact:
        return exact != format_strides(shape, contiguous_format)
    return not t.is_contiguous() and suggest_format(t) is fmt


def _layout(t):
    """channels_last / channels_last_3d when the lifted (5-d) tensor ``t`` is in it, else None (contiguous or any
    other layout: the gradient stays as computed). A 4-d tensor lifted at dim 2 is read without that dim."""
    if t.dim() != 5:
        return None
    if t._shape[2] == 1 and _reads_as(t.squeeze(2), channels_last):
        return channels_last
    return channels_last_3d if _reads_as(t, channels_last_3d) else None


def _to_layout(g, fmt):
    """``g`` (5-d) with exactly ``fmt``'s strides (from :func:`_layout`; a copy when it has other strides, as
    PyTorch's AccumulateGrad gives a leaf's .grad the leaf's strides); None passes."""
    if fmt is None or g is None:
        return g
    if fmt is channels_last:
        g4 = g.squeeze(2)
        if tuple(g4._stride) == format_strides(tuple(g4._shape), fmt):
            return g
        return g4.clone(memory_format=fmt).unsqueeze(2)
    if tuple(g._stride) == format_strides(tuple(g._shape), fmt):
        return g
    return g.clone(memory_format=fmt)


def _out_format(y, x, w, nd):
    """The batched output ``y`` of a 2-d convolution with channels_last strides when the input ``x`` or the weight
    ``w`` is channels_last (PyTorch's rule; values unchanged). 1-d and 3-d outputs stay contiguous, as PyTorch's
    CPU convolutions give them (its conv3d ignores channels_last_3d)."""
    if nd != 2 or y.dim() != 4:
        return y
    if (_reads_as(x, channels_last) or _reads_as(w, channels_last)) and \
            tuple(y._stride) != format_strides(tuple(y._shape), channels_last):
        y = y.clone(memory_format=channels_last)
    return y
