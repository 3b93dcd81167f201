"""``python -m cltorch.distributed.run``: torchrun's command line, starting the ranks through MPI's ``mpiexec``.

    python -m cltorch.distributed.run --nproc-per-node 2 train.py --epochs 5
    python -m cltorch.distributed.run --nproc-per-node 2 --devices cl:0,cl:1 train.py
    python -m cltorch.distributed.run --nproc-per-node 2 -m mypackage.train

Each rank is one MPMD section of a single ``mpiexec`` command, with torchrun's environment (``RANK``,
``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``, ``ROLE_RANK``, ``MASTER_ADDR``,
``MASTER_PORT``) and, with ``--devices``, its own ``CLTORCH_DEVICE`` (the device that "cl" means in that rank).
Ranks write their pid (and their uncaught exception) to a run folder; when the job fails, the launcher names the
rank that failed first (from mpiexec's report of the pid it saw die, or the exception file) and exits with
mpiexec's status.

torchrun flags accepted: ``--nnodes`` (1 only: for several hosts, run ``mpiexec`` with a host file yourself),
``--nproc-per-node``/``--nproc_per_node`` (a number, "cpu" or "auto" = the CPU count), ``--node-rank``,
``--master-addr``, ``--master-port``, ``--standalone``, ``--rdzv-backend``/``--rdzv-endpoint``/``--rdzv-id``/
``--rdzv-conf`` (MPI does the rendezvous; accepted), ``--max-restarts`` (0 only), ``--monitor-interval``,
``--start-method``, ``--role``, ``--log-dir``, ``-r/--redirects``, ``-t/--tee`` (not provided unless 0),
``--local-addr``, ``-m/--module``, ``--no-python``, ``--run-path``. cltorch's own: ``--devices``,
``--mpiexec`` (the launcher binary; default the one next to this Python, then PATH), ``--mpiexec-args``.
What differs between MPI implementations (Open MPI's root and oversubscription flags, the per-rank environment
flag, how a dead rank is reported) is in ``mpiexec.py``.
"""
import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

from . import mpiexec as _mpiexec

__all__ = ["main", "build_command", "parse_args"]


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m cltorch.distributed.run",
                                 description="torchrun's command line on MPI: starts N ranks with mpiexec.")
    ap.add_argument("--nnodes", default="1")
    ap.add_argument("--nproc-per-node", "--nproc_per_node", dest="nproc_per_node", default="1")
    ap.add_argument("--node-rank", "--node_rank", dest="node_rank", type=int, default=0)
    ap.add_argument("--master-addr", "--master_addr", dest="master_addr", default="127.0.0.1")
    ap.add_argument("--master-port", "--master_port", dest="master_port", type=int, default=29500)
    ap.add_argument("--standalone", action="store_true")
    ap.add_argument("--rdzv-backend", "--rdzv_backend", dest="rdzv_backend", default="static")
    ap.add_argument("--rdzv-endpoint", "--rdzv_endpoint", dest="rdzv_endpoint", default="")
    ap.add_argument("--rdzv-id", "--rdzv_id", dest="rdzv_id", default="none")
    ap.add_argument("--rdzv-conf", "--rdzv_conf", dest="rdzv_conf", default="")
    ap.add_argument("--max-restarts", "--max_restarts", dest="max_restarts", type=int, default=0)
    ap.add_argument("--monitor-interval", "--monitor_interval", dest="monitor_interval", type=float, default=0.1)
    ap.add_argument("--start-method", "--start_method", dest="start_method", default="spawn")
    ap.add_argument("--role", default="default")
    ap.add_argument("--log-dir", "--log_dir", dest="log_dir", default=None)
    ap.add_argument("-r", "--redirects", default="0")
    ap.add_argument("-t", "--tee", default="0")
    ap.add_argument("--local-addr", "--local_addr", dest="local_addr", default=None)
    ap.add_argument("-m", "--module", action="store_true")
    ap.add_argument("--no-python", "--no_python", dest="no_python", action="store_true")
    ap.add_argument("--run-path", "--run_path", dest="run_path", action="store_true")
    ap.add_argument("--devices", default=None, help="comma-separated device per local rank, e.g. cl:0,cl:1 "
                                                    "(sets CLTORCH_DEVICE in each rank; cycled when shorter)")
    ap.add_argument("--mpiexec", default=None, help="the MPI launcher (default: next to this Python, then PATH)")
    ap.add_argument("--mpiexec-args", dest="mpiexec_args", default="", help="extra mpiexec arguments, one string")
    ap.add_argument("training_script")
    ap.add_argument("training_script_args", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    if str(args.nnodes) not in ("1", "1:1"):
        ap.error(f"--nnodes {args.nnodes}: several nodes are not provided by this launcher; run mpiexec with a host "
                 "file (mpiexec -f hosts -n N python train.py): cltorch.distributed reads MPI's ranks")
    if args.max_restarts:
        ap.error("--max-restarts: restarting failed ranks (torchelastic) is not provided: MPI jobs end when a rank "
                 "fails")
    if args.redirects not in ("0", "") or args.tee not in ("0", ""):
        ap.error("--redirects/--tee are not provided: mpiexec forwards every rank's output (use --mpiexec-args "
                 "'-prepend-rank' to label lines)")
    if args.module and args.no_python:
        ap.error("Don't use both the '--no-python' flag and the '--module' flag at the same time.")
    n = args.nproc_per_node
    if n in ("cpu", "auto"):
        n = os.cpu_count() or 1
    try:
        args.nproc_per_node = int(n)
    except ValueError:
        ap.error(f"--nproc-per-node {n!r}: expected a number, 'cpu' or 'auto' ('gpu' and 'xpu' name CUDA/XPU)")
    if args.nproc_per_node < 1:
        ap.error("--nproc-per-node must be at least 1")
    return args


def build_command(args, rundir):
    """The mpiexec command line: one MPMD section per rank with its environment."""
    n = args.nproc_per_node
    if args.no_python:
        cmd = [args.training_script]
    elif args.module:
        cmd = [sys.executable, "-u", "-m", args.training_script]
    else:
        cmd = [sys.executable, "-u", args.training_script]
    cmd += list(args.training_script_args)
    devices = [d.strip() for d in args.devices.split(",") if d.strip()] if args.devices else []
    try:
        out = _mpiexec.command(args.mpiexec)
    except RuntimeError as e:
        raise SystemExit(f"cltorch.distributed.run: {e}") from None
    launcher = out[0]
    out += shlex.split(args.mpiexec_args)
    port = args.master_port
    addr = args.master_addr
    if args.rdzv_endpoint:
        addr, _, p = args.rdzv_endpoint.partition(":")
        port = int(p) if p else port
    for r in range(n):
        env = {"RANK": r, "LOCAL_RANK": r, "WORLD_SIZE": n, "LOCAL_WORLD_SIZE": n, "GROUP_RANK": 0,
               "ROLE_RANK": r, "ROLE_NAME": args.role, "ROLE_WORLD_SIZE": n, "MASTER_ADDR": addr,
               "MASTER_PORT": port, "CLTORCH_DIST_RUNDIR": rundir, "TORCHELASTIC_RESTART_COUNT": 0,
               "TORCHELASTIC_MAX_RESTARTS": 0, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        if devices:
            env["CLTORCH_DEVICE"] = devices[r % len(devices)]
        if r:
            out.append(":")
        out += ["-n", "1"] + _mpiexec.rank_env(launcher, env) + cmd
    return out


def _pump(src, dst, seen):
    for line in iter(src.readline, b""):
        death = _mpiexec.reported_death(line.decode(errors="replace"))
        if death and "death" not in seen:
            seen["death"] = death
        dst.write(line)
        dst.flush()


def diagnose(rundir, n, rc, seen):
    """The launcher's closing message for a failed job: which rank failed first, and how."""
    pids, errors = {}, {}
    for r in range(n):
        for kind, d in (("pid", pids), ("error", errors)):
            p = os.path.join(rundir, f"rank{r}.{kind}")
            if os.path.exists(p):
                with open(p, errors="replace") as f:
                    d[r] = f.read().strip()
    sig = ""
    if rc > 128 or rc in (9, 15, 6, 11):
        s = rc - 128 if rc > 128 else rc
        try:
            sig = f" (signal {s}, {signal.Signals(s).name})"
        except ValueError:
            sig = f" (status {rc})"
    dead_rank, dead_pid = seen.get("death", (None, None))
    for r, p in pids.items():
        if (dead_pid is not None and p == str(dead_pid)) or (dead_pid is None and r == dead_rank):
            return (f"cltorch.distributed.run: rank {r} (local rank {r}, pid {p}) ended abnormally{sig}; mpiexec "
                    "stopped the other ranks")
    if errors:
        r = min(errors)
        return f"cltorch.distributed.run: rank {r} failed: {errors[r]}"
    missing = [r for r in range(n) if r not in pids]
    if missing:
        return (f"cltorch.distributed.run: ranks {missing} never reached init_process_group; the job ended with "
                f"status {rc}{sig}")
    return f"cltorch.distributed.run: the job failed with status {rc}{sig}"


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    rundir = tempfile.mkdtemp(prefix="cltorch-run-")
    cmd = build_command(args, rundir)
    seen = {}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    ts = [threading.Thread(target=_pump, args=(proc.stdout, sys.stdout.buffer, seen), daemon=True),
          threading.Thread(target=_pump, args=(proc.stderr, sys.stderr.buffer, seen), daemon=True)]
    for t in ts:
        t.start()
    try:
        rc = proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        rc = proc.wait()
    for t in ts:
        t.join(timeout=5)
    if rc != 0:
        print(diagnose(rundir, args.nproc_per_node, rc, seen), file=sys.stderr, flush=True)
    shutil.rmtree(rundir, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
