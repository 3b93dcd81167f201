"""cltorch: PyTorch's frontend on OpenCL. ``import cltorch as torch``; devices ``"cpu"``, ``"cl"``, ``"cl:N"``,
``"cl:amd"``... See README.md and DESIGN.md."""
from . import _dtype
from ._dtype import (dtype, float32, float16, float64, int64, int32, int16, int8, uint8, bool, float, half,  # noqa
                     double, long, int, short, finfo, iinfo, get_default_dtype, set_default_dtype, promote_types,
                     result_type as _result_type)
from ._dtype import (bfloat16, complex32, complex64, complex128, chalf, cfloat, cdouble,  # noqa: F401
                     is_complex)
from ._memory_format import (memory_format, contiguous_format, channels_last, channels_last_3d,  # noqa: F401
                             preserve_format)
from ._device import device
from ._tensor import Tensor, Size
from . import backend
from . import ops as _ops  # registers every op and Tensor method
from .ops.pointwise import *  # noqa: F401,F403
from .ops.reductions import *  # noqa: F401,F403
from .ops.views import *  # noqa: F401,F403
from .ops.creation import *  # noqa: F401,F403
from .ops.linalg import *  # noqa: F401,F403
from .ops.random import *  # noqa: F401,F403
from .ops.indexing import *  # noqa: F401,F403
from .ops.joins import *  # noqa: F401,F403
from .ops.sortscan import *  # noqa: F401,F403
from .ops.special_math import *  # noqa: F401,F403
from .ops.compare import *  # noqa: F401,F403
from .ops.shape_ops import *  # noqa: F401,F403
from .ops.complex import *  # noqa: F401,F403
from .ops.statistics import *  # noqa: F401,F403
from .ops.aten_extras import *  # noqa: F401,F403
from .ops.conv import conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d  # noqa: F401
from .ops.pool import max_pool1d, max_pool2d, avg_pool1d  # noqa: F401
from .ops.softmax import softmax, log_softmax  # noqa: F401
from .ops.norms import layer_norm, group_norm, batch_norm, instance_norm, rms_norm  # noqa: F401
from .ops.activations import (relu_, celu, celu_, selu, selu_, threshold, threshold_, rrelu,  # noqa: F401
                              rrelu_)
from .ops.rnn import lstm_cell, gru_cell, rnn_tanh_cell, rnn_relu_cell  # noqa: F401
from . import autograd
from .autograd import no_grad, enable_grad, set_grad_enabled, inference_mode
from ._dispatch import is_grad_enabled, is_inference_mode_enabled
from . import cl
from .backend import AcceleratorError, OutOfMemoryError  # noqa: F401  (torch.AcceleratorError, torch.OutOfMemoryError)
from . import serialization
from . import special  # noqa: E402
from . import linalg  # noqa: E402,F401
from . import fft  # noqa: E402,F401
from .fft._stft import stft, istft  # noqa: E402,F401
from .ops.lapack_api import (svd_legacy as svd, qr_legacy as qr, det, logdet, slogdet, inverse,  # noqa
                              cholesky_legacy as cholesky, cholesky_inverse, cholesky_solve, lu_legacy as lu,
                              lu_solve_legacy as lu_solve, lu_unpack, triangular_solve, pinverse, geqrf,
                              ormqr, orgqr, pca_lowrank, svd_lowrank, matrix_exp)
from .linalg._products import (addr, chain_matmul, frobenius_norm, nuclear_norm, matrix_power,  # noqa: E402,F401
                               vander_torch as vander)
_tensor.set_reducer(lambda t: serialization._reduce_tensor(t))   # how Tensors pickle, set from above floor 4
from . import nn, optim, utils, cuda, backends, accelerator
from .nn._functional_more import grid_sampler, grid_sampler_2d, grid_sampler_3d  # noqa: E402,F401
from . import multiprocessing  # noqa: E402  (after nn: registers Parameter/Buffer reductions)
from . import amp  # noqa: E402
from .amp import autocast  # noqa: F401
from .amp import (is_autocast_enabled, get_autocast_dtype, set_autocast_dtype, set_autocast_enabled,  # noqa: F401
                  clear_autocast_cache, is_autocast_cache_enabled, set_autocast_cache_enabled,
                  autocast_increment_nesting, autocast_decrement_nesting, is_autocast_cpu_enabled,
                  get_autocast_cpu_dtype, get_autocast_gpu_dtype)
from . import cpu  # noqa: E402,F401  (torch.cpu: cpu.amp.autocast)
from ._deterministic import (use_deterministic_algorithms, are_deterministic_algorithms_enabled,  # noqa: F401
                             is_deterministic_algorithms_warn_only_enabled, set_deterministic_debug_mode,
                             get_deterministic_debug_mode)
from . import distributions  # noqa: E402,F401
from . import func  # noqa: E402,F401  (torch.func: grad, vjp, jvp, jacrev, vmap, ...)
from .serialization import save, load

__version__ = "0.1.0"


def result_type(a, b):
    """PyTorch's result_type of two tensors or scalars."""
    return _result_type(a, b)


def is_floating_point(t):
    return t.dtype.is_floating_point


def is_nonzero(t):
    return builtins_bool(t)


import builtins as _builtins  # noqa: E402
builtins_bool = _builtins.bool


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None,
            disable=False):  # noqa: A001
    """PyTorch's ``torch.compile``: capture, fuse and replay a Module's forward or a training-step function.

    See :func:`cltorch._capture.api.compile` for the arguments, guards and what falls back to eager."""
    from ._capture.api import compile as _compile
    return _compile(model, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options,
                    disable=disable)


# top-level names PyTorch scripts call: window functions, runtime settings, thin aliases (additive block)
from .ops.windows import hann_window, hamming_window, bartlett_window, blackman_window, kaiser_window  # noqa
from ._runtime_settings import (set_num_threads, get_num_threads, set_num_interop_threads,  # noqa: E402,F401
                                get_num_interop_threads, set_printoptions, set_default_device, get_default_device,
                                set_float32_matmul_precision, get_float32_matmul_precision)
from .ops.top_level import clamp_min, clamp_max, arctan2, from_dlpack, frombuffer  # noqa: E402,F401
from .ops.top_level import inplace_functions as _inplace_functions  # noqa: E402
for _n, _f in _inplace_functions.items():
    globals().setdefault(_n, _f)
del _n, _f
from .nn.functional import cosine_similarity, pixel_shuffle, pixel_unshuffle  # noqa: E402,F401
from . import testing  # noqa: E402,F401
