"""PyTorch's ``torch.profiler.profiler`` path (everything is defined in ``cltorch.profiler``)."""
from . import profile, schedule, tensorboard_trace_handler, ProfilerAction, supported_activities  # noqa: F401
