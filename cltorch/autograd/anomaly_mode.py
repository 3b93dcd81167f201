"""PyTorch's ``torch.autograd.anomaly_mode`` path (``detect_anomaly`` is defined in ``cltorch.autograd``)."""
from . import detect_anomaly, set_detect_anomaly  # noqa: F401

__all__ = ["detect_anomaly", "set_detect_anomaly"]
