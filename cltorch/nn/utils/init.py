"""``skip_init`` (PyTorch's ``torch.nn.utils.init``)."""
import inspect

__all__ = ["skip_init"]


def skip_init(module_cls, *args, **kwargs):
    """Build ``module_cls(*args, **kwargs)`` whose parameters' values are unspecified (PyTorch leaves them
    uninitialised). cltorch has no meta device, so the layer's own initialisation runs; callers must not rely on
    the values either way. Raises RuntimeError when ``module_cls`` takes no ``device`` argument, as in PyTorch."""
    from ..modules.module import Module
    if not issubclass(module_cls, Module):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    return module_cls(*args, **kwargs)
