"""``cltorch.onnx``: present so that ``import torch.onnx`` lines run; ONNX export is not provided.

cltorch has no graph capture (no TorchScript tracer, no ``torch.export``), which ONNX export is built on, so
``export`` and ``dynamo_export`` raise NotImplementedError. To export a model, load its ``state_dict`` (cltorch
saves PyTorch's checkpoint format) into the same model class in PyTorch and export from there.
"""
__all__ = ["export", "dynamo_export", "is_in_onnx_export", "OnnxExporterError", "ExportOptions"]

_MSG = ("ONNX export is not provided by cltorch (it needs graph capture, which cltorch does not have). "
        "Save the state_dict with cltorch.save, load it into the same model in PyTorch and call torch.onnx.export "
        "there.")


class OnnxExporterError(RuntimeError):
    """PyTorch's error type for exporter failures (never raised here: export itself is not provided)."""


class ExportOptions:
    """Accepted for ``dynamo_export(..., export_options=...)``; export itself raises NotImplementedError."""

    def __init__(self, *, dynamic_shapes=None, fake_context=None, onnx_registry=None, diagnostic_options=None):
        self.dynamic_shapes = dynamic_shapes


def export(model, args=(), f=None, *rest, **kwargs):
    """Raises NotImplementedError: ONNX export is not provided (see the module docstring)."""
    raise NotImplementedError(_MSG)


def dynamo_export(model, *args, **kwargs):
    """Raises NotImplementedError: ONNX export is not provided (see the module docstring)."""
    raise NotImplementedError(_MSG)


def is_in_onnx_export():
    """False: no export ever runs."""
    return False
