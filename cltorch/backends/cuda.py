"""``cltorch.backends.cuda``: PyTorch's CUDA backend flags. No CUDA here: ``is_built()`` is False.

``matmul.allow_tf32``, ``matmul.allow_fp16_reduced_precision_reduction``, ``matmul.allow_bf16_reduced_precision_
reduction`` and the scaled-dot-product-attention switches are accepted, kept and change nothing: cltorch's GEMM
computes float32 in float32, and its attention kernel is chosen with ``cltorch.nn.attention.sdpa_kernel``.
"""
__all__ = ["is_built", "matmul", "cufft_plan_cache", "preferred_linalg_library", "preferred_blas_library",
           "enable_flash_sdp", "flash_sdp_enabled", "enable_mem_efficient_sdp", "mem_efficient_sdp_enabled",
           "enable_math_sdp", "math_sdp_enabled", "enable_cudnn_sdp", "cudnn_sdp_enabled"]


def is_built():
    """False: cltorch is not built with CUDA."""
    return False


class _MatmulFlags:
    """``torch.backends.cuda.matmul``: accepted flags (attributes keep what is set)."""

    def __init__(self):
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True
        self.fp32_precision = "ieee"

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
