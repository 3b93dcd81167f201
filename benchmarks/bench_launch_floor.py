"""The floors under the eager path (issue 16): what a Python launch of one 1,000-element float32 add costs through
pyopencl alone, per OpenCL device, and what the Python around it (a function call, a Tensor and its Storage, a
pooled buffer) costs on this machine. Every eager row (bench_autograd.py, bench_elementwise.py's queued add) is
read as "floor + X".

Rows, per device (``cl:0`` PoCL and ``cl:1`` Intel here):

- ``enqueue, args set once``: ``pyopencl.enqueue_nd_range_kernel`` of the add kernel that ``a + b`` builds, its
  arguments set once beforehand: the cost of one launch through pyopencl and the driver, nothing else.
- ``enqueue + set_args``: the same with ``Kernel.__call__`` (set every argument, then enqueue), as every eager
  launch does (each call has a new output buffer): the launch floor of any eager Python path.
- ``enqueue + set_args + pooled output``: the same with a new output buffer from the runtime's pool each call
  (allocated, used, freed by refcount): what one eager op that makes a new tensor cannot go below.
- ``eager a + b``: the whole op (``a + b`` on the tensors: dispatch, promotion, plan, output tensor, launch), the
  same kernel; its excess over the row above is cltorch's own per-op host cost.

Host-only rows (no OpenCL): an empty Python function call; ``Tensor._make`` of a device Storage (the metadata
an op's result costs); ``Storage.__init__`` alone.

Each row is the median of ``--reps`` batches of ``--inner`` calls; the device queue is finished after each batch.
Two figures per row: the wall time per call of a batch including that finish (the sustained rate: on a CPU device
the kernels run on the same cores as Python, so this includes their execution and the machine's other load), and
the calling thread's CPU time per call (the host cost of the launch alone, what a Python launch path adds).

    python benchmarks/bench_launch_floor.py [--devices cl:0,cl:1] [--reps 7] [--inner 2000]
"""
import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import _anchors as A  # noqa: E402


def _median(fn, reps, inner, after=None):
    """(wall seconds per call including ``after()``, the calling thread's CPU seconds per call): medians of ``reps``
    batches of ``inner`` calls. The thread's CPU time is the host cost of the call alone; the wall time of a batch
    with its final queue finish is the sustained rate, which on a CPU device includes executing the kernels on the
    same cores (and the machine's other load)."""
    fn()
    if after:
        after()
    walls, cpus = [], []
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.thread_time()
        for _ in range(inner):
            fn()
        c1 = time.thread_time()
        if after:
            after()
        walls.append((time.perf_counter() - t0) / inner)
        cpus.append((c1 - c0) / inner)
    return statistics.median(walls), statistics.median(cpus)


def device_floors(device, reps=7, inner=2000):
    """{row: (wall, thread CPU) seconds per call} for the add kernel of ``a + b`` (1,000 float32) on ``device``."""
    import pyopencl as cl
    import cltorch
    from cltorch.ops import elementwise as E
    a, b = cltorch.ones(1000, device=device), cltorch.ones(1000, device=device)
    E.pointwise("x0 + x1", [a, b], a.dtype, a.dtype)    # the add's kernel, its plan under exactly the key below
    cltorch.cl.synchronize()
    plan = E._plans.get(E._plan_key("x0 + x1", [a, b], a.dtype, a.dtype, None, None, None))
    if plan is None or plan.kernel is None:
        raise RuntimeError(f"no kernel plan recorded for a + b on {device}")
    rt, k, gs, ls, tail = plan.rt, plan.kernel, plan.gs, plan.ls, plan.tail
    q = rt.queue
    ab, bb = a._storage.buf, b._storage.buf
    out = rt.alloc(4000)
    k.set_args(out, 0, ab, 0, bb, 0, *tail)
    enqueue = cl.enqueue_nd_range_kernel

    def once():
        enqueue(q, k, gs, ls)

    def set_each():
        k(q, gs, ls, out, 0, ab, 0, bb, 0, *tail)

    pool = rt.pool

    def pooled():
        o = pool.allocate(4000)
        k(q, gs, ls, o, 0, ab, 0, bb, 0, *tail)
    def eager():
        a + b
    fin = rt.synchronize
    return {"enqueue, args set once": _median(once, reps, inner, fin),
            "enqueue + set_args": _median(set_each, reps, inner, fin),
            "enqueue + set_args + pooled output": _median(pooled, reps, inner, fin),
            "eager a + b (the whole op)": _median(eager, reps, inner, fin)}


def host_floors(reps=7, inner=20000):
    """{row: (wall, thread CPU) seconds per call} of the Python an eager op pays besides its launch (no OpenCL calls)."""
    import cltorch
    from cltorch._storage import Storage
    from cltorch._tensor import Tensor
    dev = cltorch.device("cl:0")
    st = Storage.empty(1000, cltorch.float32, dev)
    shape, stride = (1000,), (1,)

    def empty_call():
        pass

    def call():
        empty_call()

    def make():
        Tensor._make(st, shape, stride)

    rt = st._rt
    f32 = cltorch.float32

    def storage():
        Storage(dev, f32, 1000, buf=None, rt=rt)
    return {"Python function call": _median(call, reps, inner),
            "Tensor._make (metadata of one result)": _median(make, reps, inner),
            "Storage(...) (no buffer)": _median(storage, reps, inner)}


def run(devices=("cl:0", "cl:1"), reps=7, inner=2000, out=print):
    import cltorch
    rows = {}
    for d in devices:
        try:
            name = cltorch.cl.get_device_name(d)
        except Exception as e:     # a device this machine lacks
            out(f"{d}: unavailable ({e})")
            continue
        for k, v in device_floors(d, reps, inner).items():
            rows[(d, name, k)] = v
    for k, v in host_floors(reps, inner * 10).items():
        rows[("host", "", k)] = v
    return rows


def suite(quick=False, device="cl:0"):
    """Rows for benchmarks/run.py: each floor on ``device`` and the host rows, main-thread CPU µs per call as
    ``ours`` (the wall time, kernels' execution included, in the note); no bar."""
    rows = []
    for (d, name, k), (wall, cpu) in run([device], 1 if quick else 7, 200 if quick else 2000,
                                         out=lambda *a: None).items():
        rows.append(A.case(f"{k} ({d})" if d != "host" else k, "us", cpu * 1e6,
                           note=f"wall {wall * 1e6:.2f} us per call (batch + finish)"))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", default="cl:0,cl:1")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--inner", type=int, default=2000)
    ap.add_argument("--quick", action="store_true", help="smoke mode (benchmarks/run.py --quick): 1 batch of 200")
    a = ap.parse_args(argv)
    if a.quick:
        a.reps, a.inner = 1, 200
    load = os.getloadavg()[0]
    rows = run([d.strip() for d in a.devices.split(",") if d.strip()], a.reps, a.inner)
    print(f"load {load:.1f} (1-min average at start); medians of {a.reps} batches")
    print("| device | row | wall us per call (batch + finish) | main-thread CPU us per call |")
    print("|---|---|---|---|")
    for (d, name, k), (wall, cpu) in rows.items():
        print(f"| {d} {name[:28]} | {k} | {wall * 1e6:.2f} | {cpu * 1e6:.2f} |")


if __name__ == "__main__":
    main()
