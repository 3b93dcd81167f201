"""``cltorch.nn.utils``: gradient clipping, parameter/vector conversion, weight and spectral normalization,
parametrizations (orthogonal included), pruning, Conv/Linear + BatchNorm fusion, ``stateless.functional_call``
and ``skip_init``, as in ``torch.nn.utils``."""
from . import clip_grad, convert_parameters  # noqa: F401
from .clip_grad import (clip_grad_norm_, clip_grad_norm, clip_grad_value_, get_total_norm,  # noqa: F401
                        clip_grads_with_norm_)
from .convert_parameters import parameters_to_vector, vector_to_parameters  # noqa: F401
from .weight_norm import weight_norm, remove_weight_norm  # noqa: F401
from .spectral_norm import spectral_norm, remove_spectral_norm  # noqa: F401
from . import parametrize, parametrizations, fusion, stateless, prune  # noqa: F401
from .fusion import fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights  # noqa
from .init import skip_init  # noqa: F401

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_",
           "parameters_to_vector", "vector_to_parameters", "weight_norm", "remove_weight_norm", "spectral_norm",
           "remove_spectral_norm", "fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
           "fuse_linear_bn_weights", "skip_init"]
from . import rnn  # noqa: F401,E402
