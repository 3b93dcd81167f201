"""``spectral_norm`` / ``remove_spectral_norm`` (PyTorch's ``torch.nn.utils.spectral_norm``, the hook form).

``weight`` becomes ``weight_orig / sigma``, sigma the largest singular value of ``weight_orig`` viewed as a matrix
(dim ``dim`` first, the rest flattened), estimated by power iteration on the buffers ``weight_u`` (rows) and
``weight_v`` (columns). In training mode every forward runs ``n_power_iterations`` steps and updates the buffers
in place; in eval mode the stored vectors are used. State-dict keys are PyTorch's: ``weight_orig``, ``weight_u``,
``weight_v``."""
import cltorch as torch
from .. import functional as F
from ..parameter import Parameter

__all__ = ["SpectralNorm", "spectral_norm", "remove_spectral_norm"]


class SpectralNorm:
    """The forward pre-hook that recomputes ``module.<name>`` (see the module doc)."""

    def __init__(self, name="weight", n_power_iterations=1, dim=0, eps=1e-12):
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name, self.dim, self.n_power_iterations, self.eps = name, dim, n_power_iterations, eps

    def reshape_weight_to_matrix(self, weight):
        """``weight`` as (weight.shape[dim], -1)."""
        if self.dim != 0:
            weight = weight.permute(self.dim, *[d for d in range(weight.dim()) if d != self.dim])
        return weight.reshape(weight.shape[0], -1)

    def _power(self, weight_mat, u, v, n):
        with torch.no_grad():
            for _ in range(n):
                v.copy_(F.normalize(torch.mv(weight_mat.t(), u), dim=0, eps=self.eps))
                u.copy_(F.normalize(torch.mv(weight_mat, v), dim=0, eps=self.eps))

    def compute_weight(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        weight_mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            self._power(weight_mat, u, v, self.n_power_iterations)
            u, v = u.clone(), v.clone()
        sigma = torch.dot(u, torch.mv(weight_mat, v))
        return weight / sigma

    def remove(self, module):
        with torch.no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module, do_power_iteration=module.training))

    @staticmethod
    def apply(module, name, n_power_iterations, dim, eps):
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters.get(name)
        if not isinstance(weight, Parameter):
            raise TypeError(f"spectral_norm: module.{name} must be a Parameter")
        with torch.no_grad():
            weight_mat = fn.reshape_weight_to_matrix(weight)
            h, w = weight_mat.shape
            u = F.normalize(torch.randn(h, device=weight.device, dtype=weight.dtype), dim=0, eps=fn.eps)
            v = F.normalize(torch.randn(w, device=weight.device, dtype=weight.dtype), dim=0, eps=fn.eps)
        delattr(module, name)
        module.register_parameter(name + "_orig", weight)
        setattr(module, name, weight.detach())
        module.register_buffer(name + "_u", u)
        module.register_buffer(name + "_v", v)
        module.register_forward_pre_hook(fn)
        return fn


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Apply spectral normalization to ``module.<name>`` (see the module doc) and return ``module``. ``dim`` defaults
    to 1 for ConvTranspose layers, else 0. Raises RuntimeError when already applied to ``name``, ValueError for
    ``n_power_iterations <= 0``."""
    if dim is None:
        from ..modules.conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module, name="weight"):
    """Undo :func:`spectral_norm`: ``module.<name>`` becomes a Parameter holding the current normalized weight.
    Raises ValueError when ``module`` has no spectral_norm on ``name``."""
    for k, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, SpectralNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")
