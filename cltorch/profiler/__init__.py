"""``cltorch.profiler``: PyTorch's profiler entry points, so that scripts that wrap their steps in them run.

``profile`` (a context manager with ``step()``, ``start()``/``stop()``, ``schedule``) and ``record_function`` (a
context manager and decorator) are accepted, and the code inside runs normally. Their results are not provided:
cltorch does not record op-level events, so ``key_averages``, ``events``, ``table``, ``export_chrome_trace``,
``export_stacks`` and ``tensorboard_trace_handler`` raise NotImplementedError rather than return empty tables.
Per-kernel device time is available with ``CLTORCH_PROFILE_KERNELS=1`` and
``cltorch.backend.runtime(0).kernel_profile()``.
"""
import enum
import functools

__all__ = ["profile", "record_function", "ProfilerActivity", "ProfilerAction", "schedule",
           "tensorboard_trace_handler", "supported_activities"]

_MSG = ("cltorch.profiler: {what} is not provided: cltorch does not record op-level profiler events. For per-kernel "
        "device time set CLTORCH_PROFILE_KERNELS=1 and call cltorch.backend.runtime(0).kernel_profile()")


def _missing(what):
    raise NotImplementedError(_MSG.format(what=what))


class ProfilerActivity(enum.Enum):
    CPU = 0
    CUDA = 1
    XPU = 2
    MTIA = 3
    HPU = 4
    PrivateUse1 = 5


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def supported_activities():
    """The activities cltorch accepts (none is recorded; see the module docstring)."""
    return {ProfilerActivity.CPU}


def schedule(*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0):
    """PyTorch's step schedule: a function of the step number returning a ``ProfilerAction``."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise ValueError("Invalid profiler schedule arguments")

    def fn(step):
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        cycle = wait + warmup + active
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        pos = step % cycle
        if pos < wait:
            return ProfilerAction.NONE
        if pos < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if pos < cycle - 1 else ProfilerAction.RECORD_AND_SAVE
    return fn


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False):
    """Raises NotImplementedError: there are no profiler traces to write."""
    _missing("tensorboard_trace_handler")


class profile:  # noqa: N801 (PyTorch's name)
    """A profiling region whose code runs normally; its results raise NotImplementedError (module docstring)."""

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, execution_trace_observer=None, acc_events=False, use_cuda=None,
                 custom_trace_id_callback=None, **kwargs):
        self.activities = set(activities) if activities else supported_activities()
        self.schedule = schedule
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self.enabled = kwargs.get("enabled", True)

    def start(self):
        return self

    def stop(self):
        return None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def step(self):
        """Advances the step counter (the schedule's clock)."""
        self.step_num += 1

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        _missing("profile.key_averages()")

    def events(self):
        _missing("profile.events()")

    def table(self, *args, **kwargs):
        _missing("profile.table()")

    def export_chrome_trace(self, path):
        _missing("profile.export_chrome_trace()")

    def export_stacks(self, path, metric="self_cpu_time_total"):
        _missing("profile.export_stacks()")

    def export_memory_timeline(self, path, device=None):
        _missing("profile.export_memory_timeline()")

    def add_metadata(self, key, value):
        pass

    def add_metadata_json(self, key, value):
        pass


class record_function:  # noqa: N801 (PyTorch's name)
    """Names a region for the profiler (``with record_function("step"):`` or ``@record_function("f")``); the code
    inside runs normally and nothing is recorded."""

    def __init__(self, name, args=None):
        self.name = name
        self.args = args

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            with record_function(self.name, self.args):
                return fn(*a, **k)
        return wrapper
