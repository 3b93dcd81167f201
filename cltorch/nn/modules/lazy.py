"""Lazy modules (PyTorch's ``torch.nn.modules.lazy.LazyModuleMixin`` and the Lazy* layers).

A lazy layer is built without its input size: its parameters and buffers are
:class:`~cltorch.nn.parameter.UninitializedParameter` / ``UninitializedBuffer`` placeholders. The first forward
runs a forward pre-hook that reads the size off the input (``initialize_parameters``), materializes every
placeholder, initialises it as the eager layer does, removes the hooks and turns the module into its eager class
(``cls_to_become``: ``LazyLinear`` becomes ``Linear``). Loading a state dict into a lazy module materializes the
placeholders to the checkpoint's shapes first, so ``load_state_dict`` then ``forward`` works too. State-dict keys
are the eager layer's.
"""
import itertools

import cltorch as torch
from .._uninitialized import UninitializedBuffer, UninitializedParameter, is_lazy
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .linear import Linear
from .normalization import (_NormBase, BatchNorm1d, BatchNorm2d, BatchNorm3d, InstanceNorm1d, InstanceNorm2d,
                            InstanceNorm3d)

__all__ = ["LazyModuleMixin", "LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d",
           "LazyConvTranspose2d", "LazyConvTranspose3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d",
           "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d"]


def _lazy_load_hook(module, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
    """Materialize each placeholder that the checkpoint gives a real tensor for, to that tensor's shape."""
    for name, t in itertools.chain(module._parameters.items(), module._buffers.items()):
        key = prefix + name
        if t is not None and is_lazy(t) and key in state_dict and not is_lazy(state_dict[key]):
            with torch.no_grad():
                t.materialize(state_dict[key].shape)


def _infer_parameters(module, args, kwargs=None):
    """The forward pre-hook: materialize from the first input, then become the eager class."""
    module.initialize_parameters(*args, **(kwargs or {}))
    if module.has_uninitialized_params():
        raise RuntimeError(f"module {module._get_name()} has not been fully initialized")
    module._initialize_hook.remove()
    module._load_hook.remove()
    del module._initialize_hook
    del module._load_hook
    if module.cls_to_become is not None:
        module.__class__ = module.cls_to_become


class LazyModuleMixin:
    """Mix in before a Module class to infer parameter shapes at the first forward (see the module docstring).

    A subclass implements ``initialize_parameters(*input)``, materializing every placeholder (raising otherwise
    gives RuntimeError "module X has not been fully initialized"), and may set ``cls_to_become``.
    """

    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._load_hook = self.register_load_state_dict_pre_hook(_lazy_load_hook)
        self._initialize_hook = self.register_forward_pre_hook(_infer_parameters, with_kwargs=True)

    def initialize_parameters(self, *args, **kwargs):
        raise NotImplementedError(f"initialize_parameters is not implemented for {self.__class__.__name__}")

    def has_uninitialized_params(self):
        """True while any of this module's own parameters or buffers is a placeholder."""
        return any(is_lazy(t) for t in itertools.chain(self._parameters.values(), self._buffers.values()))

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if (keep_vars or is_lazy(p)) else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if (keep_vars or is_lazy(b)) else b.detach()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs, assign=False):
        # run the pre-hooks (materialization) first; placeholders the checkpoint also leaves uninitialised load
        # as nothing (there is nothing to copy), as in PyTorch
        keep = {}
        for store in (self._parameters, self._buffers):
            for name, t in list(store.items()):
                key = prefix + name
                if t is not None and is_lazy(t) and key in state_dict and is_lazy(state_dict[key]):
                    keep[(id(store), name)] = (store, t)
        if not keep:
            return super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                                 unexpected_keys, error_msgs, assign)
        sd = {k: v for k, v in state_dict.items() if not any(k == prefix + n for (_, n) in keep)}
        for (_, name), (store, _t) in keep.items():
            store[name] = None
        try:
            super()._load_from_state_dict(sd, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                          error_msgs, assign)
        finally:
            for (_, name), (store, t) in keep.items():
                store[name] = t

    def _apply(self, fn, recurse=True):
        lazy_buffers = {k: b for k, b in self._buffers.items() if b is not None and is_lazy(b)}
        super()._apply(fn, recurse)
        for k, b in lazy_buffers.items():
            new = self._buffers[k]
            if not is_lazy(new):
                self._buffers[k] = UninitializedBuffer(b.requires_grad, new.device, new.dtype)
        return self

    def _replicate_for_data_parallel(self):
        raise RuntimeError("Modules with uninitialized parameters can't be used with `DataParallel`. Run a dummy "
                           "forward pass to correctly initialize the modules")


class LazyLinear(LazyModuleMixin, Linear):
    """:class:`Linear` whose ``in_features`` is read from the first input's last dim: ``LazyLinear(out_features,
    bias=True, device=None, dtype=None)``; becomes a Linear after the first forward."""

    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__(0, 0, False)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs):  # noqa: A002
        if self.has_uninitialized_params():
            with torch.no_grad():
                self.in_features = input.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()


class _LazyConvXdMixin(LazyModuleMixin):
    _spatial = 0

    def _lazy_init(self, out_channels, bias, device, dtype):
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def _get_in_channels(self, input):  # noqa: A002
        nb = self._spatial + 1
        if input.dim() not in (nb, nb + 1):
            raise RuntimeError(f"Expected {nb}D (unbatched) or {nb + 1}D (batched) input to "
                               f"{self.__class__.__name__}, but got input of size: {input.shape}")
        return input.shape[1] if input.dim() == nb + 1 else input.shape[0]

    def initialize_parameters(self, input, *args, **kwargs):  # noqa: A002
        if not self.has_uninitialized_params():
            return
        self.in_channels = self._get_in_channels(input)
        if self.in_channels % self.groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        with torch.no_grad():
            if self.transposed:
                shape = (self.in_channels, self.out_channels // self.groups, *self.kernel_size)
            else:
                shape = (self.out_channels, self.in_channels // self.groups, *self.kernel_size)
            self.weight.materialize(shape)
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()


def _lazy_conv(name, base, spatial):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        LazyModuleMixin.__init__(self, 0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode,
                                 device, dtype)
        self._lazy_init(out_channels, bias, device, dtype)
    __init__.__doc__ = (f"``{name}(out_channels, kernel_size, ...)``: :class:`{base.__name__}` with in_channels read "
                        "from the first input.")
    return type(name, (_LazyConvXdMixin, base), {"__init__": __init__, "cls_to_become": base, "_spatial": spatial,
                                                  "__doc__": __init__.__doc__, "__module__": __name__})


def _lazy_conv_transpose(name, base, spatial):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True,
                 dilation=1, padding_mode="zeros", device=None, dtype=None):
        LazyModuleMixin.__init__(self, 0, 0, kernel_size, stride, padding, output_padding, groups, False,
                                 dilation, padding_mode, device, dtype)
        self._lazy_init(out_channels, bias, device, dtype)
    __init__.__doc__ = (f"``{name}(out_channels, kernel_size, ...)``: :class:`{base.__name__}` with in_channels read "
                        "from the first input.")
    return type(name, (_LazyConvXdMixin, base), {"__init__": __init__, "cls_to_become": base, "_spatial": spatial,
                                                  "__doc__": __init__.__doc__, "__module__": __name__})


LazyConv1d = _lazy_conv("LazyConv1d", Conv1d, 1)
LazyConv2d = _lazy_conv("LazyConv2d", Conv2d, 2)
LazyConv3d = _lazy_conv("LazyConv3d", Conv3d, 3)
LazyConvTranspose1d = _lazy_conv_transpose("LazyConvTranspose1d", ConvTranspose1d, 1)
LazyConvTranspose2d = _lazy_conv_transpose("LazyConvTranspose2d", ConvTranspose2d, 2)
LazyConvTranspose3d = _lazy_conv_transpose("LazyConvTranspose3d", ConvTranspose3d, 3)


class _LazyNormBase(LazyModuleMixin, _NormBase):
    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None, *,
                 bias=True):
        super().__init__(0, eps, momentum, False, False, device, dtype, bias=False)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = torch.tensor(0, dtype=torch.long, device=device)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input):  # noqa: A002
        if not self.has_uninitialized_params():
            return
        self.num_features = input.shape[1]
        with torch.no_grad():
            for t in (self.weight, self.bias, self.running_mean, self.running_var):
                if t is not None and is_lazy(t):
                    t.materialize((self.num_features,))
            self.reset_parameters()


def _lazy_norm(name, base):
    doc = (f"``{name}(eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None, *, "
           f"bias=True)``: :class:`{base.__name__}` with num_features read from the first input's dim 1.")
    return type(name, (_LazyNormBase, base), {"cls_to_become": base, "__doc__": doc, "__module__": __name__})


LazyBatchNorm1d = _lazy_norm("LazyBatchNorm1d", BatchNorm1d)
LazyBatchNorm2d = _lazy_norm("LazyBatchNorm2d", BatchNorm2d)
LazyBatchNorm3d = _lazy_norm("LazyBatchNorm3d", BatchNorm3d)
LazyInstanceNorm1d = _lazy_norm("LazyInstanceNorm1d", InstanceNorm1d)
LazyInstanceNorm2d = _lazy_norm("LazyInstanceNorm2d", InstanceNorm2d)
LazyInstanceNorm3d = _lazy_norm("LazyInstanceNorm3d", InstanceNorm3d)
