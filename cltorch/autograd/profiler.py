"""PyTorch's ``torch.autograd.profiler`` path: ``profile`` and ``record_function`` (see ``cltorch.profiler``: the
regions run normally, and results such as ``key_averages()`` raise NotImplementedError)."""
from ..profiler import profile as _profile, record_function  # noqa: F401

__all__ = ["profile", "record_function", "emit_nvtx", "emit_itt"]


class profile(_profile):  # noqa: N801 (PyTorch's name)
    """``torch.autograd.profiler.profile(enabled=True, use_cuda=False, ...)``: see ``cltorch.profiler.profile``."""

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False, with_flops=False,
                 profile_memory=False, with_stack=False, with_modules=False, use_kineto=False, use_cpu=True,
                 experimental_config=None, acc_events=False, custom_trace_id_callback=None):
        super().__init__(record_shapes=record_shapes)
        self.enabled = enabled


class emit_nvtx:  # noqa: N801
    """Raises NotImplementedError on entry: there are no NVTX ranges without CUDA."""

    def __init__(self, enabled=True, record_shapes=False):
        self.enabled = enabled

    def __enter__(self):
        if self.enabled:
            raise NotImplementedError("cltorch.autograd.profiler.emit_nvtx: NVTX ranges need CUDA, which cltorch "
                                      "does not use")
        return self

    def __exit__(self, *exc):
        return False


class emit_itt(emit_nvtx):  # noqa: N801
    """Raises NotImplementedError on entry: cltorch emits no Intel ITT ranges."""

    def __enter__(self):
        if self.enabled:
            raise NotImplementedError("cltorch.autograd.profiler.emit_itt: ITT ranges are not emitted by cltorch")
        return self
