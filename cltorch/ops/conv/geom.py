"""The geometry of one convolution (:class:`Geom`): every convolution, 1-d, 2-d or 3-d, is a 3-d one, so the
kernels and launchers of this package have one code path for all three ranks."""


class Geom(tuple):
    """(G, sd, sh, sw, pd, ph, pw, dd, dh, dw, D, H, W, OD, OH, OW, KD, KH, KW): groups, stride,
    front/top/left padding, dilation, the input (x) and output (y) spatial sizes and the kernel size of one
    3-D convolution. 1-d and 2-d convolutions are 3-d ones with depth (and height) 1, so one set of kernels
    and launchers serves all three. Immutable."""

    __slots__ = ()

    def __new__(cls, *vals):
        return tuple.__new__(cls, tuple(int(v) for v in vals))

    @classmethod
    def make(cls, groups, stride, lo_pad, dilation, in_sp, out_sp, ks):
        """From per-dim tuples of 1 to 3 entries (the leading dims of a shorter convolution become size 1)."""
        def lift(t, fill):
            t = tuple(t)
            return (fill,) * (3 - len(t)) + t
        return cls(groups, *lift(stride, 1), *lift(lo_pad, 0), *lift(dilation, 1), *lift(in_sp, 1),
                   *lift(out_sp, 1), *lift(ks, 1))

    G = property(lambda s: s[0])
    D = property(lambda s: s[10])
    H = property(lambda s: s[11])
    W = property(lambda s: s[12])
    OD = property(lambda s: s[13])
    OH = property(lambda s: s[14])
    OW = property(lambda s: s[15])
    KD = property(lambda s: s[16])
    KH = property(lambda s: s[17])
    KW = property(lambda s: s[18])
    in_sp = property(lambda s: s[10:13])
    out_sp = property(lambda s: s[13:16])
    KS = property(lambda s: s[16] * s[17] * s[18])      # taps per channel
    P = property(lambda s: s[13] * s[14] * s[15])       # output positions
    Pin = property(lambda s: s[10] * s[11] * s[12])     # input positions

    def launch_args(self):
        """stride, padding and dilation (9 ints) as every kernel takes them."""
        return self[1:10]

    def sizes(self, transposed=False):
        """(D, H, W, OD, OH, OW, KD, KH, KW) of the kernel reading ``in`` and writing ``out`` (transposed: the
        kernel's input is the convolution's output)."""
        i, o = (self.out_sp, self.in_sp) if transposed else (self.in_sp, self.out_sp)
        return i + o + self[16:19]


def _cdiv(a, b):
    return -(-a // b)


def _round_up(a, b):
    return _cdiv(a, b) * b

