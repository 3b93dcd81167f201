"""``cltorch.utils``: ``cltorch.utils.data`` (datasets, samplers, DataLoader), as in ``torch.utils``."""
import importlib

__all__ = ["data"]


def __getattr__(name):
    # cltorch.utils.data is imported on first use, so ``import cltorch`` stays light.
    if name == "data":
        return importlib.import_module(".data", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
