"""``cltorch.utils.model_zoo``: ``load_url``, PyTorch's older name for ``cltorch.hub.load_state_dict_from_url``."""
from ..hub import load_state_dict_from_url as load_url  # noqa: F401

__all__ = ["load_url"]
