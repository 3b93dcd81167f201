"""``DataParallel`` on one device, with PyTorch's semantics for that case.

PyTorch's ``DataParallel(module, device_ids, output_device, dim)`` replicates the module on every device in
``device_ids``, splits the batch along ``dim``, and gathers the outputs on ``output_device``. With one device
there is nothing to split: the inputs go to that device and the module runs there, which is what this class
does. The wrapped module is ``self.module``, so ``state_dict`` keys carry PyTorch's ``module.`` prefix.

``device_ids``:
- ``None``: the device of the module's parameters (PyTorch would take every visible GPU; cltorch takes one device,
  so a script written for one GPU runs unchanged).
- one device (``[0]``, ``["cl:0"]``, ``[cltorch.device("cl:1")]``; ints mean ``cl:N``): the module's parameters
  and buffers must already be there (RuntimeError otherwise, as in PyTorch), and tensor inputs are moved there.
- several distinct devices: NotImplementedError (multi-device DataParallel is not provided).
"""
from ..._tensor import Tensor
from ..._device import canonical, device as _device
from ..modules.module import Module

__all__ = ["DataParallel", "data_parallel"]


def _as_device(d):
    if isinstance(d, int) and not isinstance(d, bool):
        d = _device("cl", d)
    return canonical(d)


def _one_device(device_ids, what):
    if device_ids is None:
        return None
    devs = []
    for d in device_ids:
        d = _as_device(d)
        if d not in devs:
            devs.append(d)
    if len(devs) > 1:
        raise NotImplementedError(
            f"{what} over several devices ({', '.join(str(d) for d in devs)}) is not provided by cltorch: "
            "multi-device DataParallel (module replication and batch scatter/gather) is missing; pass one device "
            "or device_ids=None")
    return devs[0] if devs else None


def _move(obj, dev):
    if isinstance(obj, Tensor):
        return obj.to(dev)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_move(o, dev) for o in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_move(o, dev) for o in obj)
    if isinstance(obj, dict):
        return type(obj)((k, _move(v, dev)) for k, v in obj.items())
    return obj


def _module_device(module):
    for t in module.parameters():
        return t.device
    for t in module.buffers():
        return t.device
    return None


class DataParallel(Module):
    """Wraps ``module`` and runs it on one device (see the module docstring).

    Args: ``module``; ``device_ids`` (None or one device); ``output_device`` (the device outputs are moved to;
    default the module's device); ``dim`` (the batch dimension, accepted: with one device no split happens).
    Raises NotImplementedError for several devices; RuntimeError at forward when the module's parameters are not
    on ``device_ids[0]``.
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        self.module = module
        self.dim = dim
        src = _one_device(device_ids, "DataParallel")
        self.device_ids = [] if src is None else [src]
        self.src_device_obj = src
        self.output_device = None if output_device is None else _as_device(output_device)

    def forward(self, *inputs, **kwargs):
        dev = self.src_device_obj
        if dev is None:
            dev = _module_device(self.module)
        else:
            for name, t in list(self.module.named_parameters()) + list(self.module.named_buffers()):
                if canonical(t.device) != dev:
                    raise RuntimeError(f"module must have its parameters and buffers on device {dev} "
                                       f"(device_ids[0]) but found one of them ({name}) on device: {t.device}")
        if dev is not None:
            inputs, kwargs = _move(inputs, dev), _move(kwargs, dev)
        out = self.module(*inputs, **kwargs)
        if self.output_device is not None:
            out = _move(out, self.output_device)
        return out


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0, module_kwargs=None):
    """The functional form of :class:`DataParallel`: ``module(*inputs, **module_kwargs)`` on one device."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    dp = DataParallel(module, device_ids, output_device, dim)
    return dp(*inputs, **(module_kwargs or {}))
