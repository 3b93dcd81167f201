"""Device faults: telling a lost OpenCL context from an ordinary error, and the error that says so.

A kernel that faults on a GPU (reads or writes out of bounds) does not fail where it is launched: the launch
returns at once, and the fault surfaces at a later, unrelated call, after which the driver refuses every call
on that context. What the drivers return then (public reports and our H200 run, docs/DESIGN.md session 8):

- NVIDIA: ``CL_OUT_OF_RESOURCES`` (-5) at the next enqueue or ``clFinish`` (the H200 run: at a
  ``clEnqueueWriteBuffer``, then at every call of that process), sometimes ``CL_INVALID_COMMAND_QUEUE`` (-36),
  ``CL_MEM_OBJECT_ALLOCATION_FAILURE`` (-4) at an allocation, or the undocumented -9999 (illegal address);
- Intel's GPU runtime (NEO): ``CL_OUT_OF_RESOURCES`` from ``clFinish`` after a GPU hang or page fault;
- AMD ROCm: the HSA runtime prints "Memory access fault by GPU" and aborts the process (nothing to catch);
- an event of a command that terminated abnormally reports a negative execution status.

None of these codes means "lost" by itself: ``CL_OUT_OF_RESOURCES`` is also a launch that needs more registers
than a work-group has, and ``CL_MEM_OBJECT_ALLOCATION_FAILURE`` a genuinely full device. So after any driver
error, :func:`probe` runs a known-good operation on the same queue (a 4-byte write and read-back of a buffer
made when the runtime was, and a finish): if that fails too, the context is lost. The runtime is then marked
dead (``Runtime.fault``): this error is raised at once by every later call on that device, with no further
driver call (some drivers hang on calls after a fault).

The error is :class:`AcceleratorError`, PyTorch's class for device errors such as CUDA's illegal memory access
(``torch.AcceleratorError``, a RuntimeError). Its message names the last kernels queued on the device before
the failure (a ring of ``RECENT`` launches that ``Runtime.launch`` keeps: one deque append per launch) and, as
CUDA's ``CUDA_LAUNCH_BLOCKING``, says to rerun with ``CLTORCH_LAUNCH_BLOCKING=1``: each launch then waits for
its kernel, so the fault is reported at the kernel that caused it, which the message names.
"""
import numpy as np

__all__ = ["AcceleratorError", "RECENT", "probe", "lost_message", "kernel_label"]

RECENT = 16          # launches remembered per device for the message (Runtime._recent)


class AcceleratorError(RuntimeError):
    """An error of the device itself (``torch.AcceleratorError``'s counterpart): the device's OpenCL context is
    lost, most likely because a kernel faulted (an out-of-bounds access). Raised at the call where the driver
    first refused, usually a later and unrelated one, and then at once by every later call on that device. The
    message names the device, the driver's error, the kernels queued last before it, and how to find the
    kernel at fault (``CLTORCH_LAUNCH_BLOCKING=1``). The device cannot be used again in this process."""


def kernel_label(k):
    """``kernel 'name' (template)`` for a kernel, from what ``Runtime.kernel`` recorded (no driver call), else
    its function name."""
    src = getattr(k, "_cltorch_src", None)
    if src is not None:
        return f"kernel '{src[1]}' ({src[0]})"
    try:
        return f"kernel '{k.function_name}'"
    except Exception:  # noqa: BLE001  (a dead context may refuse even this)
        return "a kernel"


def probe(rt):
    """True when the device of runtime ``rt`` still works: a 4-byte write and read-back of its probe buffer on
    its queue, then a finish, all succeed and the value comes back. Any driver error: False. Uses pyopencl's
    own write/read (not ``cl.enqueue_copy``, which a capture may be recording)."""
    import pyopencl as cl
    from pyopencl import _cl
    rt._probe_count += 1
    want = np.array([0x5EED0000 + (rt._probe_count & 0xFFFF)], np.uint32)
    got = np.zeros(1, np.uint32)
    try:
        _cl._enqueue_write_buffer(rt.queue, rt._probe_buf, want, is_blocking=True)
        _cl._enqueue_read_buffer(rt.queue, rt._probe_buf, got, is_blocking=True)
        rt.queue.finish()
    except cl.Error:
        return False
    return bool(got[0] == want[0])


def _status(ev):
    """An event's execution status, or None when the driver does not say."""
    try:
        return int(ev.command_execution_status)
    except Exception:  # noqa: BLE001
        return None


def lost_message(rt, err, at_kernel=None):
    """The message of the AcceleratorError for runtime ``rt``, whose context was found lost after the driver
    error ``err``. ``at_kernel``: the (kernel, global size, local size) whose own wait failed (launch blocking
    mode), else None."""
    dev = f"cl:{rt.index} ({rt.info.name})"
    lines = [f"OpenCL device error on {dev}: the device's context is lost. The driver refused a call ({err}), "
             "and a 4-byte test write and read-back on the same queue failed too. Most likely a kernel faulted "
             "(read or wrote out of bounds); a GPU reports such a fault asynchronously, at a later and unrelated "
             "call, and then refuses every call."]
    if at_kernel is not None:
        k, gs, ls = at_kernel
        lines.append(f"CLTORCH_LAUNCH_BLOCKING=1 waits for each kernel as it is launched: the kernel at fault is "
                     f"{kernel_label(k)}, global size {tuple(gs)}, local size "
                     f"{tuple(ls) if ls is not None else None}.")
    recent = list(rt._recent)
    if recent:
        lines.append(f"The last {len(recent)} kernels queued on {dev} before it, oldest first:")
        for k, gs, ls, ev in recent:
            st = _status(ev)
            note = f"  [the driver reports it failed: status {st}]" if st is not None and st < 0 else ""
            lines.append(f"  {kernel_label(k)}, global size {tuple(gs)}, local size "
                         f"{tuple(ls) if ls is not None else None}{note}")
    else:
        lines.append(f"No kernel had been queued on {dev} by this process.")
    if at_kernel is None:
        lines.append("To find the kernel at fault, rerun with CLTORCH_LAUNCH_BLOCKING=1: each launch then waits "
                     "for its kernel, so this error is raised at the kernel that faulted, and names it.")
    lines.append(f"Every later call on {dev} raises this error: the device cannot be used again in this process "
                 "(its tensors are lost); restart the process.")
    return "\n".join(lines)
