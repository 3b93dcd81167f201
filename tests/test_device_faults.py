"""A lost device context is an error that says what happened (backend/faults.py).

A kernel that faults on a GPU surfaces at a later, unrelated call: on NVIDIA ``OUT_OF_RESOURCES`` at the next
``clEnqueueWriteBuffer``, then at every call. A child process makes cl:0 die that way after some kernels ran
(from then on every driver call on its queue refuses with ``OUT_OF_RESOURCES``, as a lost context does; a dead
device stays dead for the rest of a process, hence the child) and reports the error users get:
``cltorch.AcceleratorError`` naming the kernels queued last and CLTORCH_LAUNCH_BLOCKING, raised again by every
later call without reaching the driver; with CLTORCH_LAUNCH_BLOCKING=1, naming the kernel at fault. An ordinary
refusal on a working context (a full device, a launch the driver refuses) keeps its own error (in this
process: the device stays usable)."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pyopencl as cl
import pytest

import cltorch

OUT_OF_RESOURCES = -5
MEM_OBJECT_ALLOCATION_FAILURE = -4


def _refusal(routine, code=OUT_OF_RESOURCES, cls=cl.RuntimeError):
    return cls(cl._cl._ErrorRecord(routine, code, ""))


CHILD = textwrap.dedent("""
    import json, sys
    import pyopencl as cl
    import cltorch

    rt = cltorch.backend.runtime(0)
    calls = []

    def kill():
        # every driver call on cl:0's queue refuses from now on, as on a lost context; the calls are counted
        q = rt.queue
        def refusing(name, orig, queue_of):
            def f(*args, **kwargs):
                if queue_of(args) is q:
                    calls.append(name)
                    raise cl.RuntimeError(cl._cl._ErrorRecord(name, -5, ""))
                return orig(*args, **kwargs)
            return f
        first = lambda a: a[0]
        cl.enqueue_copy = refusing("clEnqueueWriteBuffer", cl.enqueue_copy, first)
        cl.enqueue_fill_buffer = refusing("clEnqueueFillBuffer", cl.enqueue_fill_buffer, first)
        cl._cl._enqueue_write_buffer = refusing("clEnqueueWriteBuffer", cl._cl._enqueue_write_buffer, first)
        cl._cl._enqueue_read_buffer = refusing("clEnqueueReadBuffer", cl._cl._enqueue_read_buffer, first)
        cl.CommandQueue.finish = refusing("clFinish", cl.CommandQueue.finish, first)
        cl.Kernel.__call__ = refusing("clEnqueueNDRangeKernel", cl.Kernel.__call__, lambda a: a[1])

    x = cltorch.arange(1000, dtype=cltorch.float32, device="cl:0")
    z = cltorch.softmax((x * 2).exp().reshape(10, 100), 1)
    out = {}
    if sys.argv[1] == "lost":
        rt.synchronize()
        last = rt.last_event
        kill()
        try:
            cltorch.tensor([1.0, 2.0], device="cl:0")     # an unrelated upload is where the driver first refuses
        except cltorch.AcceleratorError as e:
            out.update(msg=str(e), cause=type(e.__cause__).__name__, runtime_error=isinstance(e, RuntimeError))
        n = len(calls)
        later = {"add": lambda: x + 1, "item": lambda: z.sum().item(), "cpu": lambda: x.cpu(),
                 "synchronize": lambda: cltorch.cl.synchronize(), "empty": lambda: cltorch.empty(64, device="cl:0"),
                 "to": lambda: cltorch.ones(3).to("cl:0"), "fill_": lambda: x.fill_(0)}
        for name, op in later.items():
            try:
                op()
                out[name] = "no error"
            except cltorch.AcceleratorError as e:
                out[name] = "same" if str(e) == out.get("msg") else str(e)
        out["driver_calls_after"] = len(calls) - n
        out["launched_after"] = rt.last_event is not last
    else:                                                   # CLTORCH_LAUNCH_BLOCKING=1 in the environment
        z.sum().item()
        orig, bad = cl.Kernel.__call__, []
        def call(k, queue, *args, **kwargs):               # the next kernel faults: its own wait reports it
            ev = orig(k, queue, *args, **kwargs)
            if queue is rt.queue and not bad:
                bad.append(k)
                kill()
            return ev
        cl.Kernel.__call__ = call
        try:
            x.exp()
        except cltorch.AcceleratorError as e:
            out.update(msg=str(e), bad=list(bad[0]._cltorch_src[:2]))
    print(json.dumps(out))
""")


def _child(mode, **env):
    if not cltorch.cl.is_available():
        pytest.skip("no OpenCL device")
    r = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=240,
                       env=dict(os.environ, **env))
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_lost_context_raises_accelerator_error_naming_recent_kernels():
    out = _child("lost", CLTORCH_LAUNCH_BLOCKING="0")
    msg = out.get("msg", "")
    assert out["runtime_error"] and out["cause"] == "RuntimeError", out   # the driver's own error, chained
    assert "cl:0" in msg and "context is lost" in msg and "clEnqueueWriteBuffer failed: OUT_OF_RESOURCES" in msg
    assert "rerun with CLTORCH_LAUNCH_BLOCKING=1" in msg, msg
    recent = msg.split("before it, oldest first:")[1]
    assert "(elementwise.cl.mako)" in recent and "softmax" in recent, msg     # the kernels queued last
    # every later call raises the same error at once, without reaching the driver
    for name in ("add", "item", "cpu", "synchronize", "empty", "to", "fill_"):
        assert out[name] == "same", (name, out[name])
    assert out["driver_calls_after"] == 0 and not out["launched_after"], out


def test_launch_blocking_names_the_kernel_at_fault():
    out = _child("blocking", CLTORCH_LAUNCH_BLOCKING="1")
    template, name = out["bad"]
    assert f"the kernel at fault is kernel '{name}' ({template})" in out["msg"], out["msg"]
    assert "clFinish failed: OUT_OF_RESOURCES" in out["msg"], out["msg"]
    assert cltorch.AcceleratorError is cltorch.cl.AcceleratorError


def test_out_of_memory_stays_out_of_memory(monkeypatch):
    """A refused allocation on a context that still works is OutOfMemoryError, and the device stays usable."""
    if not cltorch.cl.is_available():
        pytest.skip("no OpenCL device")
    rt = cltorch.backend.runtime(0)
    x = cltorch.ones(10, device="cl:0")
    real_pool = rt.pool

    class FullPool:
        def allocate(self, n):
            raise _refusal("clEnqueueMigrateMemObjects", MEM_OBJECT_ALLOCATION_FAILURE, cl.MemoryError)

        def free_held(self):
            real_pool.free_held()

    monkeypatch.setattr(rt, "pool", FullPool())
    with pytest.raises(cltorch.OutOfMemoryError) as ei:
        cltorch.empty(1 << 20, device="cl:0")
    assert not isinstance(ei.value, cltorch.AcceleratorError) and "out of memory" in str(ei.value)
    monkeypatch.setattr(rt, "pool", real_pool)
    assert (x * 3).sum().item() == 30.0


def test_refused_launch_on_a_working_context_is_a_launch_error(monkeypatch):
    """OUT_OF_RESOURCES at an enqueue is also a kernel that needs more than the device has: when the context still
    works, the error is LaunchError naming the kernel, and the device stays usable."""
    if not cltorch.cl.is_available():
        pytest.skip("no OpenCL device")
    x = cltorch.arange(10, dtype=cltorch.float32, device="cl:0")
    orig_call = cl.Kernel.__call__

    def refuse_once(k, queue, *args, **kwargs):
        monkeypatch.setattr(cl.Kernel, "__call__", orig_call)
        raise _refusal("clEnqueueNDRangeKernel")
    monkeypatch.setattr(cl.Kernel, "__call__", refuse_once)
    with pytest.raises(cltorch.cl.LaunchError) as ei:
        x.exp()
    assert not isinstance(ei.value, cltorch.AcceleratorError) and "OUT_OF_RESOURCES" in str(ei.value)
    assert (x + 1).sum().item() == 55.0


def test_message_marks_a_kernel_whose_event_failed():
    """The driver's negative execution status of a queued kernel's event marks it in the message."""
    from cltorch.backend import faults

    class FailedEvent:
        command_execution_status = OUT_OF_RESOURCES

    class K:
        _cltorch_src = ("reduce.cl.mako", "red", {}, (), ())

    class Info:
        name = "H200"

    class Rt:
        index = 0
        info = Info()
        _recent = [(K(), (4096,), (256,), FailedEvent())]
    msg = faults.lost_message(Rt(), _refusal("clFinish"))
    assert "kernel 'red' (reduce.cl.mako), global size (4096,), local size (256,)  [the driver reports it failed: " \
           "status -5]" in msg, msg


# Files that may call pyopencl's driver functions directly: the runtime and its helpers, program builds (called by
# Runtime.program, which reports a lost context), the device listing, and the capture package (its wrappers record
# the copies Runtime.copy/fill make; a replay reports a lost context itself).
DRIVER_CALLERS = {
    "cltorch/backend/runtime.py", "cltorch/backend/faults.py", "cltorch/backend/program.py",
    "cltorch/backend/devices.py",
}


def test_driver_calls_go_through_the_runtime():
    """A copy, fill, map, buffer or finish made beside the runtime would meet a lost context with the driver's bare
    OUT_OF_RESOURCES instead of AcceleratorError: ops use Runtime.copy/fill/finish/driver."""
    import re
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    pat = re.compile(r"cl\.enqueue_\w+\(|cl\.Buffer\(|\.queue\.finish\(\)|cl\.Kernel\(|cl\.Program\(")
    bad = []
    for path in (root / "cltorch").rglob("*.py"):
        rel = path.relative_to(root).as_posix()
        if rel in DRIVER_CALLERS or rel.startswith("cltorch/_capture/"):
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if pat.search(line.split("#")[0]):
                bad.append(f"{rel}:{n}: {line.strip()}")
    assert not bad, bad
