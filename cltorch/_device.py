"""Device strings and ``cltorch.device`` objects.

- ``"cpu"``: host memory; arithmetic runs on the host's OpenCL CPU device (zero-copy buffers).
- ``"cl"``: the default OpenCL device (``CLTORCH_DEVICE`` overrides); ``"cl:N"``: the N-th device in
  ``cltorch.cl.device_count()`` order; ``"cl:nvidia"``, ``"cl:amd"``, ``"cl:intel"``, ``"cl:apple"``,
  ``"cl:cpu"`` (each with an optional ``:N``) select by vendor class and resolve to ``cl:N``.
- ``"cuda"`` raises, suggesting ``"cl"``.
"""
from . import backend
from . import _runtime_settings as _rs

__all__ = ["device"]


class device:
    """A device: ``type`` is ``"cpu"`` or ``"cl"``; ``index`` is None for ``cpu`` and for a bare ``cl``.

    ``device("cl:amd")`` resolves the class to its ``cl:N`` index at construction. Raises RuntimeError for
    an unknown string (naming the available devices) and for ``cuda`` (suggesting ``cl``).
    """

    __slots__ = ("type", "index", "_hash")

    def __init__(self, type, index=None):  # noqa: A002
        self._parse(type, index)
        # devices key every plan and promotion cache: hash once (hashing a fresh tuple per lookup cost 13k
        # tuples per 100 training steps)
        self._hash = hash((self.type, self.index))

    def _parse(self, type, index):  # noqa: A002
        if isinstance(type, device):
            self.type, self.index = type.type, type.index
            return
        if isinstance(type, int) and not isinstance(type, bool):
            self.type, self.index = "cl", type
            backend.resolve(f"cl:{type}")
            return
        if not isinstance(type, str):
            raise TypeError(f"device() expects a string, int or device, got {type.__class__.__name__}")
        spec = type.strip()
        if index is not None:
            spec = f"{spec}:{index}"
        head = spec.split(":")[0]
        if head == "cpu":
            if spec not in ("cpu", "cpu:0"):
                raise RuntimeError(f"invalid device string '{spec}'; {backend.available_text()}")
            self.type, self.index = "cpu", None
        elif head in ("cuda", "mps", "xpu", "hip"):
            raise RuntimeError(f"cltorch runs on OpenCL, not '{head}': use device 'cl' (the default OpenCL "
                               f"device) or 'cl:N'; {backend.available_text()}")
        elif head == "cl":
            self.type = "cl"
            self.index = None if spec == "cl" else backend.resolve(spec)
        else:
            raise RuntimeError(f"Expected one of cpu, cl device type at start of device string: {spec}; "
                               f"{backend.available_text()}")

    def __eq__(self, other):
        if other.__class__ is device:
            return self.type == other.type and self.index == other.index
        if isinstance(other, str):
            try:
                other = device(other)
            except RuntimeError:
                return False
        return isinstance(other, device) and self.type == other.type and self.index == other.index

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return f"device(type='{self.type}')" if self.index is None else \
            f"device(type='{self.type}', index={self.index})"

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __reduce__(self):
        return (device, (str(self),))


CPU = device("cpu")
_canon = {}


def canonical(d):
    """The concrete device a tensor lives on: ``cpu`` or ``cl:N`` (a bare ``cl`` resolves to the default)."""
    if d is None:
        dd = _rs._default_device[0]       # torch.set_default_device (None: cpu)
        if dd is None:
            return CPU
        d = dd
    if isinstance(d, device):
        if d.type == "cl" and d.index is None:
            return device("cl", backend.default_index())
        return d
    c = _canon.get(d)
    if c is None:
        c = canonical(device(d))
        if d != "cl":
            _canon[d] = c
    return c
