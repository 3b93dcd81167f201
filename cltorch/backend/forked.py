"""A process forked from one that used OpenCL: nothing in it reaches the driver.

A forked child inherits the parent's OpenCL handles (contexts, queues, buffers, kernels, programs, events) as
Python objects, but not the driver threads behind them, and on NVIDIA the handles name objects of the parent's
GPU context through file descriptors the two processes share. What goes wrong when a child calls the driver:

- PoCL and other drivers hang at the child's first kernel (DESIGN decision 3);
- on NVIDIA, a child that releases an inherited handle destroys the parent's object: the H200 run's forked
  DataLoader worker died with a segmentation fault while dropping its inherited runtimes in the after-fork
  hook (the parent saw EOFError), and the parent's context was dead from then on (``OUT_OF_RESOURCES`` at
  every call, 20 tests in that worker).

So in a forked child (``in_forked_child``):

- the inherited runtimes are kept and marked dead with the fork error (``Runtime.fault_on_use``): any call on
  them (a launch, a copy, a synchronize, an allocation, a build) raises the RuntimeError ``FORK_MESSAGE``
  before reaching the driver, and new runtimes are refused (``runtime()`` raises it too);
- no inherited pyopencl object is ever released: the runtimes, the buffers of storages that die in the child
  (``Storage.__del__``), the cpu block pool's blocks, and at the child's normal interpreter exit every live
  pyopencl object (module caches are torn down then) go to :func:`hold`, a list whose own reference count is
  raised once so that even interpreter finalization never drops it. A child started by ``multiprocessing``
  leaves through ``os._exit`` and releases nothing anyway;
- the program cache writes nothing (``program.save_binaries``).

The parent, right before forking, finishes the queues that have work pending (``before_fork``), so that the
cpu tensors the child inherits hold finished results (the child cannot wait for the parent's kernels).
"""
import ctypes
import gc

__all__ = ["FORK_MESSAGE", "in_forked_child", "hold", "mark_forked"]

FORK_MESSAGE = ("OpenCL was used in the parent process, and this process was started by fork(): OpenCL cannot be "
                "used in a forked child (PoCL and other drivers hang there, and on NVIDIA a child that touches "
                "the parent's context can destroy it). Start worker processes with the 'spawn' or 'forkserver' "
                "start method (DataLoader(multiprocessing_context='forkserver'), the default), or keep the work "
                "in the child on the host (numpy).")

FORKED = [False]     # set in a child forked after its parent used OpenCL (read directly on hot paths)

# Objects never to be released in this process. The list's own count is raised once, so no teardown frees it.
_held = []
ctypes.pythonapi.Py_IncRef(ctypes.py_object(_held))


def in_forked_child():
    """True in a process forked after its parent had used OpenCL."""
    return FORKED[0]


def hold(*objs):
    """Keep ``objs`` alive for the rest of the process (an inherited handle must never be released here)."""
    _held.extend(o for o in objs if o is not None)


def _cl_types():
    import pyopencl as cl
    from pyopencl import _cl
    return (cl.MemoryObjectHolder, cl.Kernel, _cl._Program, cl.Context, cl.CommandQueue, cl.Event, cl.Sampler,
            _cl.MemoryPool, _cl.SVMAllocation)


def _hold_all_at_exit():
    """At a forked child's normal interpreter exit (atexit, registered by :func:`mark_forked`): hold every live
    pyopencl object, before module teardown would release the ones in module-level caches."""
    try:
        types = _cl_types()
    except Exception:  # noqa: BLE001
        return
    _held.extend(o for o in gc.get_objects() if isinstance(o, types))


def mark_forked():
    """Called in the child right after a fork, when the parent had used OpenCL."""
    if not FORKED[0]:
        FORKED[0] = True
        import atexit
        atexit.register(_hold_all_at_exit)
