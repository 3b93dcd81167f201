"""``cltorch.backends.cuda``: PyTorch's CUDA backend flags. No CUDA here: ``is_built()`` is False.

``matmul.allow_tf32`` (and ``matmul.fp32_precision``) is ``cltorch.set_float32_matmul_precision`` seen from here, as
in torch: True for "high" and "medium", False for "highest" (the default), and setting it sets the precision. It
lets float32 matrix products run on TF32 matrix units where a device has them and they passed their probe
(``cltorch.ops.gemm.mma``: NVIDIA tensor cores); elsewhere float32 stays float32.
``matmul.allow_fp16_reduced_precision_reduction``, ``matmul.allow_bf16_reduced_precision_reduction`` and the
scaled-dot-product-attention switches are accepted, kept and change nothing (16-bit products always accumulate in
float32; the attention kernel is chosen with ``cltorch.nn.attention.sdpa_kernel``).
"""
from .. import _runtime_settings as _settings

__all__ = ["is_built", "matmul", "cufft_plan_cache", "preferred_linalg_library", "preferred_blas_library",
           "enable_flash_sdp", "flash_sdp_enabled", "enable_mem_efficient_sdp", "mem_efficient_sdp_enabled",
           "enable_math_sdp", "math_sdp_enabled", "enable_cudnn_sdp", "cudnn_sdp_enabled"]


def is_built():
    """False: cltorch is not built with CUDA."""
    return False


class _MatmulFlags:
    """``torch.backends.cuda.matmul``: ``allow_tf32`` and ``fp32_precision`` read and set the float32 matmul
    precision (``cltorch.set_float32_matmul_precision``); the other flags keep what is set."""

    def __init__(self):
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True

    @property
    def allow_tf32(self):
        """True when float32 matrix products may use TF32 matrix units (precision "high" or "medium")."""
        return _settings.get_float32_matmul_precision() != "highest"

    @allow_tf32.setter
    def allow_tf32(self, value):
        _settings.set_float32_matmul_precision("high" if value else "highest")

    @property
    def fp32_precision(self):
        """torch's newer spelling: "tf32" when TF32 is allowed, else "ieee"."""
        return "tf32" if self.allow_tf32 else "ieee"

    @fp32_precision.setter
    def fp32_precision(self, value):
        if value not in ("ieee", "tf32", "none"):
            raise RuntimeError(f"Invalid precision {value!r}: expected 'ieee', 'tf32' or 'none'")
        self.allow_tf32 = value == "tf32"

    def __repr__(self):
        return f"cltorch.backends.cuda.matmul(allow_tf32={self.allow_tf32})"


class _PlanCache:
    """``cufft_plan_cache``: no cuFFT here, so the cache is always empty."""
    max_size = 0
    size = 0

    def clear(self):
        pass

    def __getitem__(self, device):
        return self


matmul = _MatmulFlags()
cufft_plan_cache = _PlanCache()
_sdp = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def preferred_linalg_library(backend=None):
    """Returns the (accepted, unused) choice; cltorch's linear algebra does not call cuSOLVER or MAGMA."""
    return backend or "default"


def preferred_blas_library(backend=None):
    return backend or "default"


def enable_flash_sdp(enabled):
    _sdp["flash"] = bool(enabled)


def flash_sdp_enabled():
    return _sdp["flash"]


def enable_mem_efficient_sdp(enabled):
    _sdp["mem_efficient"] = bool(enabled)


def mem_efficient_sdp_enabled():
    return _sdp["mem_efficient"]


def enable_math_sdp(enabled):
    _sdp["math"] = bool(enabled)


def math_sdp_enabled():
    return _sdp["math"]


def enable_cudnn_sdp(enabled):
    _sdp["cudnn"] = bool(enabled)


def cudnn_sdp_enabled():
    return _sdp["cudnn"]
