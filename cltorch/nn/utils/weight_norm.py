"""``weight_norm`` / ``remove_weight_norm`` (PyTorch's ``torch.nn.utils.weight_norm``, the hook form).

``weight`` becomes ``weight_v * (weight_g / ||weight_v||)`` with the norm taken over every dim but ``dim``
(``dim=None``: over the whole tensor). The module's parameters become ``weight_g`` and ``weight_v`` (state-dict
keys as PyTorch's); a forward pre-hook recomputes ``weight`` before every call."""
import cltorch as torch
from ..parameter import Parameter

__all__ = ["WeightNorm", "weight_norm", "remove_weight_norm", "norm_except_dim", "_weight_norm"]


def norm_except_dim(v, pow=2, dim=0):
    """The ``pow``-norm of ``v`` over every dim but ``dim``, keeping dims (shape 1 except at ``dim``);
    ``dim=-1`` gives the norm of the whole tensor (a 0-d tensor), as PyTorch's ``norm_except_dim``."""
    if dim == -1:
        return v.norm(pow)
    dim = dim % v.dim()
    others = tuple(d for d in range(v.dim()) if d != dim)
    if not others:
        return v.abs()  # the norm of one element
    return v.norm(pow, dim=others, keepdim=True)


def _weight_norm(v, g, dim=0):
    """``v * (g / norm_except_dim(v, 2, dim))``: PyTorch's ``torch._weight_norm``."""
    return v * (g / norm_except_dim(v, 2, dim))


class WeightNorm:
    """The forward pre-hook that recomputes ``module.<name>`` from ``<name>_g`` and ``<name>_v``."""

    def __init__(self, name, dim):
        self.name, self.dim = name, -1 if dim is None else dim

    def compute_weight(self, module):
        return _weight_norm(getattr(module, self.name + "_v"), getattr(module, self.name + "_g"), self.dim)

    @staticmethod
    def apply(module, name, dim):
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        if not isinstance(weight, Parameter):
            raise TypeError(f"weight_norm: module.{name} must be a Parameter, got {type(weight).__name__}")
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2, fn.dim).detach()))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module):
        with torch.no_grad():
            weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """Reparametrize ``module.<name>`` as magnitude ``<name>_g`` times direction ``<name>_v`` (see the module doc);
    returns ``module``. Raises RuntimeError when the parameter already has a weight_norm hook."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name="weight"):
    """Undo :func:`weight_norm`: ``module.<name>`` becomes a Parameter holding the current value. Raises ValueError
    when ``module`` has no weight_norm on ``name``."""
    for k, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
