"""Where the compiled MLP step's time goes (issue 16): each replayed kernel's device time, and its GEMMs
standalone against numpy and torch at the same shapes and layouts.

The step is ``bench_mlp.py``'s (784-256-256-10, ReLU, batch 128, SGD), compiled with ``cltorch.compile`` and
warmed past its captures. The script then

1. times whole compiled steps (queued back to back, one sync per batch) and the host time of a call alone;
2. enqueues the graph's work one entry at a time on a profiling queue (``CLTORCH_PROFILE_KERNELS=1`` is set
   here before cltorch is imported) and prints each kernel's device time (median over rounds), with the GEMMs'
   ``M x N x K``, strides, template parameters and GFLOP/s;
3. times each GEMM of the graph standalone (its recorded kernel, and its pack kernels, enqueued ``reps`` times
   between two finishes) beside numpy and torch (``torch.mm``, default threads and one thread) on operands of
   the same layout (a transposed operand is a transposed view, as the kernel reads it).

    python benchmarks/mlp_replay_profile.py [--device cl:0] [--rounds 7]

numpy runs with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (the script re-executes itself without them when
they are set: OpenBLAS reads them at load time). Not part of run.py's table: it explains the MLP rows.
"""
import argparse
import os
import statistics
import sys
import time
from pathlib import Path

if any(v in os.environ for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")) and __name__ == "__main__":
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    os.execve(sys.executable, [sys.executable] + sys.argv, env)
os.environ["CLTORCH_PROFILE_KERNELS"] = "1"

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _anchors as A  # noqa: E402


def _gemm_info(args, params):
    """(M, N, K, strides text) of a recorded gemm_main launch (the CPU design's kernel)."""
    m, n, k = args[17:20]
    st = f"A rs/cs {args[2]}/{args[3]}{' (packed)' if params.get('a_mode') == 'packed' else ''}, B rs {args[8]}"
    return int(m), int(n), int(k), st


def _layout(graph, j, i, args, params, m):
    """(A transposed, B transposed) for the product at entry i whose pack launches start at entry j: read from
    the pack kernels' source strides (lane stride, k stride), else from the main kernel's in-place strides."""
    a_t = params.get("a_mode") != "packed" and int(args[2]) == 1 and m > 1
    b_t = False
    for e in graph.trace.entries[j:i]:
        name, pa = e[2]._cltorch_src[1], graph.args_of(graph.trace.entries.index(e))
        if name.startswith("gemm_pack_a"):
            a_t = int(pa[2]) == 1 and int(pa[3]) != 1
        elif name.startswith("gemm_pack_b"):
            b_t = int(pa[2]) != 1
    return a_t, b_t


def _events_of(graph):
    """Enqueue the graph's entries once, each with its event; [(label, event or None)] (reads the graph's
    private op list: a diagnostic, it must follow Graph.replay's op kinds)."""
    import pyopencl as cl
    from cltorch._capture.trace import kernel_label
    out = []
    for e, op in zip(graph.trace.entries, graph._ops):
        kind = op[0]
        if kind == 0:
            ev = cl.enqueue_nd_range_kernel(op[1], op[2], op[3], op[4])
        elif kind == 1:
            ev = op[2](op[1], op[3], op[4], *op[5])
        elif kind == 2:
            ev = cl.enqueue_copy(op[1], op[2], op[3], **op[4])
        elif kind == 3:
            ev = cl.enqueue_fill_buffer(op[1], op[2], op[3], op[4], op[5])
        else:
            ev = cl.enqueue_copy(op[1], op[2], op[3], is_blocking=False, **op[4])
        out.append((kernel_label(e[2]) if e[0] == "k" else e[0], ev))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cl:0")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=50)
    a = ap.parse_args(argv)
    import pyopencl as cl
    import bench_mlp
    import bench_compile
    from cltorch._capture.trace import kernel_label
    print(A.describe())
    print(f"load {A.load_avg():.2f}")
    step, sync = bench_mlp.ours_step(a.device)
    c = bench_compile._compiled(step, sync)
    graph = c.graphs()[0]
    rt = graph.runtimes[0]
    q = rt.queue

    # 1. whole steps and the host time of one call
    walls, cpus, hosts = [], [], []
    for _ in range(a.rounds):
        sync()
        t0, p0 = time.perf_counter(), time.process_time()
        for _ in range(a.reps):
            c()
        sync()
        walls.append((time.perf_counter() - t0) / a.reps)
        cpus.append((time.process_time() - p0) / a.reps)
        sync()
        t0 = time.perf_counter()
        c()
        hosts.append(time.perf_counter() - t0)
        sync()
    print(f"compiled step {statistics.median(walls) * 1e3:.3f} ms wall, {statistics.median(cpus) * 1e3:.3f} ms "
          f"process CPU per call; one call's host time {statistics.median(hosts) * 1e3:.3f} ms; "
          f"{graph.launch_count} kernels")

    # 2. per-entry device time
    per = []
    for _ in range(a.rounds):
        q.finish()
        evs = _events_of(graph)
        q.finish()
        per.append([(lab, (ev.profile.end - ev.profile.start) * 1e-6 if ev is not None else 0.0) for lab, ev in evs])
        c()             # keep the step's state moving as a real run would
        sync()
    labels = [lab for lab, _ in per[0]]
    med = [statistics.median(r[i][1] for r in per) for i in range(len(labels))]
    total = sum(med)
    gemm_total = 0.0
    gemms = []
    print(f"\n{'#':>3} {'device ms':>9}  kernel")
    for i, (e, lab, t) in enumerate(zip(graph.trace.entries, labels, med)):
        extra = ""
        if e[0] == "k" and lab.startswith("gemm:gemm_main"):
            args = graph.args_of(i)
            params = e[2]._cltorch_src[2]
            m, n, k, st = _gemm_info(args, params)
            fl = 2 * m * n * k / (t * 1e-3) / 1e9 if t else 0.0
            extra = (f"  {m}x{n}x{k} {st}; mr {params['mr']} nv {params['nv']} vw {params['vw']} "
                     f"gs {e[3]} ls {e[4]}; {fl:.0f} GFLOP/s")
            gemm_total += t
            gemms.append((i, m, n, k, args, e))
        elif lab.startswith("gemm:"):
            gemm_total += t
        print(f"{i:>3} {t:9.3f}  {lab}{extra}")
    print(f"sum of device times {total:.3f} ms, of which GEMM (incl. packs) {gemm_total:.3f} ms")

    # 3. GEMMs standalone against numpy and torch
    torch = A.torch()
    rng = np.random.default_rng(0)
    print("\nstandalone (median of rounds, ms per product):")
    for i, m, n, k, args, e in gemms:
        # our kernel as recorded (and the pack launches right before it that feed it)
        j = i
        while j > 0 and graph.trace.entries[j - 1][0] == "k" and \
                kernel_label(graph.trace.entries[j - 1][2]).startswith("gemm:gemm_pack"):
            j -= 1
        ops = graph._ops[j:i + 1]
        ts = []
        for _ in range(a.rounds):
            q.finish()
            t0 = time.perf_counter()
            for _ in range(a.reps):
                for op in ops:
                    if op[0] == 0:
                        cl.enqueue_nd_range_kernel(op[1], op[2], op[3], op[4])
                    else:
                        op[2](op[1], op[3], op[4], *op[5])
            q.finish()
            ts.append((time.perf_counter() - t0) / a.reps)
        # numpy / torch with the same layouts: A is M x K, B is K x N (transposed views where strided so)
        a_t, b_t = _layout(graph, j, i, args, e[2]._cltorch_src[2], m)
        an = rng.standard_normal((k, m) if a_t else (m, k)).astype(np.float32)
        an = an.T if a_t else an
        bn = rng.standard_normal((n, k) if b_t else (k, n)).astype(np.float32)
        bn = bn.T if b_t else bn
        tn = statistics.median(A.time_fn(lambda: an @ bn, None, 0.05) for _ in range(a.rounds))
        row = f"  {m}x{n}x{k}{' A^T' if a_t else ''}{' B^T' if b_t else ''}: ours {statistics.median(ts) * 1e3:.3f}" \
              f" ({j != i and 'with pack, ' or ''}{2 * m * n * k / statistics.median(ts) / 1e9:.0f} GFLOP/s)," \
              f" numpy {tn * 1e3:.3f} ({2 * m * n * k / tn / 1e9:.0f})"
        if torch is not None:
            at = torch.from_numpy(np.ascontiguousarray(an.T)).T if a_t else torch.from_numpy(an)
            bt = torch.from_numpy(np.ascontiguousarray(bn.T)).T if b_t else torch.from_numpy(bn)
            for thr in (torch.get_num_threads(), 1):
                prev = torch.get_num_threads()
                torch.set_num_threads(thr)
                tt = statistics.median(A.time_fn(lambda: torch.mm(at, bt), None, 0.05) for _ in range(a.rounds))
                torch.set_num_threads(prev)
                row += f", torch {thr}t {tt * 1e3:.3f}"
        print(row)


if __name__ == "__main__":
    main()
