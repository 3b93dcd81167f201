"""Parametrizations (PyTorch's ``torch.nn.utils.parametrize``): a tensor of a module computed by small modules.

``register_parametrization(module, "weight", P)`` moves ``module.weight`` to
``module.parametrizations.weight.original`` (or ``original0``, ``original1``, ... when ``P.right_inverse`` returns
a sequence) and makes ``module.weight`` a property that returns ``P(original)`` (chained through every registered
parametrization) on each access, or once per :func:`cached` block. Assigning ``module.weight = t`` stores
``right_inverse(t)`` into the originals. As in PyTorch the module's class is swapped for a subclass
``Parametrized<Class>`` that carries the properties; state-dict keys are PyTorch's
(``parametrizations.weight.original``)."""
from contextlib import contextmanager

import cltorch as torch
from ..modules.container import ModuleDict, ModuleList
from ..modules.module import Module
from ..parameter import Parameter
from ..._tensor import Tensor

__all__ = ["cached", "ParametrizationList", "register_parametrization", "is_parametrized",
           "remove_parametrizations", "type_before_parametrizations", "transfer_parametrizations_and_params"]

_cache_enabled = 0
_cache = {}


@contextmanager
def cached():
    """Within this block every parametrized tensor is computed once, on first access (nests)."""
    global _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache.clear()


def _register(module, name, t):
    if isinstance(t, Parameter):
        module.register_parameter(name, t)
    else:
        module.register_buffer(name, t)


def _assign(dst, src):
    """Write ``src`` into the original tensor ``dst`` (in place, so optimizers keep it)."""
    if tuple(dst.shape) != tuple(src.shape) or dst.dtype != src.dtype:
        raise ValueError(f"parametrization: right_inverse gave shape {tuple(src.shape)} / {src.dtype}; the original "
                         f"is {tuple(dst.shape)} / {dst.dtype} (changing them is not supported)")
    dst.copy_(src)


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order, and the originals they read (``original`` or
    ``original0..n``). ``unsafe=True`` skips PyTorch's consistency checks of the first parametrization."""

    def __init__(self, modules, original, unsafe=False):
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        with torch.no_grad():
            new = original
            for m in reversed(self):
                if hasattr(m, "right_inverse"):
                    try:
                        new = m.right_inverse(new)
                    except NotImplementedError:   # as PyTorch: a map that cannot be inverted keeps the tensor
                        pass
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            with torch.no_grad():
                if new is not original:
                    _assign(original, new)
            _register(self, "original", original)
        else:
            for i, t in enumerate(new):
                if not isinstance(t, Tensor):
                    raise ValueError(f"'right_inverse' must return a Tensor or a sequence of tensors; element {i} "
                                     f"is {type(t).__name__}")
                if isinstance(original, Parameter):
                    t = Parameter(t.detach().clone(), original.requires_grad)
                _register(self, f"original{i}", t)
        if not unsafe:
            z = self()
            if not isinstance(z, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got {type(z).__name__}.")
            if z.dtype != original.dtype or tuple(z.shape) != tuple(original.shape):
                raise ValueError("Registering a parametrization may not change the shape or dtype of the tensor "
                                 f"(got {tuple(z.shape)} / {z.dtype}, expected {tuple(original.shape)} / "
                                 f"{original.dtype}); pass unsafe=True to allow it.")

    def right_inverse(self, value):
        """Store ``value`` as the parametrized tensor: run the right inverses backwards and write the originals."""
        with torch.no_grad():
            for m in reversed(self):
                if hasattr(m, "right_inverse"):
                    value = m.right_inverse(value)
            if self.is_tensor:
                _assign(self.original, value)
            else:
                if len(value) != self.ntensors:
                    raise ValueError(f"'right_inverse' must return a sequence of {self.ntensors} tensors")
                for i, t in enumerate(value):
                    _assign(getattr(self, f"original{i}"), t)

    def forward(self):
        if self.is_tensor:
            x = self[0](self.original)
        else:
            x = self[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for m in list(self)[1:]:
            x = m(x)
        return x


def _inject_new_class(module):
    cls = module.__class__
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), {"__module__": cls.__module__})


def _inject_property(module, tensor_name):
    def get_parametrized(self):
        plist = self.parametrizations[tensor_name]
        if _cache_enabled:
            key = (id(self), tensor_name)
            if key not in _cache:
                _cache[key] = plist()
            return _cache[key]
        return plist()

    def set_original(self, value):
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get_parametrized, set_original))


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """Parametrize ``module.<tensor_name>`` (a parameter or buffer) with the Module ``parametrization`` (see the
    module doc); a second call on the same name chains after the first. Returns ``module``. Raises ValueError when
    ``tensor_name`` is neither a parameter, a buffer nor already parametrized, or when (``unsafe=False``) the
    parametrization changes the tensor's shape or dtype."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        plist = module.parametrizations[tensor_name]
        if not unsafe:
            y = getattr(module, tensor_name)
            x = parametrization(y)
            if not isinstance(x, Tensor) or x.dtype != y.dtype or tuple(x.shape) != tuple(y.shape):
                raise ValueError("Registering a parametrization may not change the shape or dtype of the tensor; "
                                 "pass unsafe=True to allow it.")
        plist.append(parametrization)
        plist.unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        plist = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = plist
    else:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a parametrized element with "
                         f"name '{tensor_name}'")
    return module


def is_parametrized(module, tensor_name=None):
    """True when ``module`` has any parametrization (``tensor_name`` given: one on that tensor)."""
    parametrizations = module.__dict__.get("_modules", {}).get("parametrizations")
    if parametrizations is None or not isinstance(parametrizations, ModuleDict):
        return False
    return len(parametrizations) > 0 if tensor_name is None else tensor_name in parametrizations


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Remove every parametrization of ``module.<tensor_name>``; the tensor becomes a plain parameter (or buffer)
    again holding its parametrized value (``leave_parametrized=True``) or the original. Returns ``module``. Raises
    ValueError when it is not parametrized, or for ``leave_parametrized=False`` with several originals."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with torch.no_grad():
                t = getattr(module, tensor_name)
                if tuple(t.shape) == tuple(original.shape) and t.dtype == original.dtype:
                    original.copy_(t)
                else:
                    original = (Parameter(t.detach().clone(), original.requires_grad)
                                if isinstance(original, Parameter) else t.detach().clone())
    else:
        if not leave_parametrized:
            raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is "
                             "parametrized in terms of a sequence of tensors.")
        with torch.no_grad():
            t = getattr(module, tensor_name)
        original = Parameter(t.detach().clone(), plist.original0.requires_grad) \
            if isinstance(plist.original0, Parameter) else t.detach().clone()
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    _register(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__.__bases__[0]
    return module


def type_before_parametrizations(module):
    """The module's class before parametrizations swapped it (``type(module)`` when none)."""
    return module.__class__.__bases__[0] if is_parametrized(module) else type(module)


def transfer_parametrizations_and_params(from_module, to_module, tensor_name=None):
    """Register ``from_module``'s parametrizations (of ``tensor_name``, or all) on ``to_module`` and copy their
    originals across. Returns ``to_module``."""
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
    for name in names:
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name).detach().clone()))
        for p in from_module.parametrizations[name]:
            register_parametrization(to_module, name, p)
        src, dst = from_module.parametrizations[name], to_module.parametrizations[name]
        with torch.no_grad():
            if src.is_tensor:
                dst.original.copy_(src.original)
            else:
                for i in range(src.ntensors):
                    getattr(dst, f"original{i}").copy_(getattr(src, f"original{i}"))
    return to_module
