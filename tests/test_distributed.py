"""cltorch.distributed over MPI: 2 and 3 ranks started by mpiexec (and by cltorch's launcher) inside pytest.

The rank programs are in tests/_dist_worker.py; each checks its results against numpy or a single-process run
and prints "OK <rank>". Here: the job's exit status, those lines, and for the failure modes the error text and
the time the job took."""
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

import cltorch
import cltorch.distributed as dist
from cltorch.distributed import mpiexec
from conftest import two_platforms_or_skip

pytest.importorskip("mpi4py")
HERE = Path(__file__).resolve().parent
WORKER = str(HERE / "_dist_worker.py")
pytestmark = pytest.mark.skipif(mpiexec.find() is None, reason="no mpiexec (pip install mpich)")


def run(n, *args, launcher=False, env=None, timeout=240, launcher_args=()):
    e = dict(os.environ)
    e.pop("CLTORCH_DIST_RUNDIR", None)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        e.pop(k, None)
    e.update(env or {})
    if launcher:
        cmd = [sys.executable, "-m", "cltorch.distributed.run", "--nproc-per-node", str(n), *launcher_args, WORKER,
               *args]
    else:
        cmd = mpiexec.command() + ["-n", str(n), sys.executable, WORKER, *args]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=e, cwd=str(HERE.parent))
    return p.returncode, p.stdout + p.stderr, time.monotonic() - t0


def assert_ok(rc, out, n):
    assert rc == 0, out[-4000:]
    for r in range(n):
        assert f"OK {r}" in out, out[-4000:]


def test_collectives_two_ranks_cpu_and_device():
    devs = "cpu" + (",cl:0" if cltorch.cl.device_count() else "")
    rc, out, _ = run(2, "collectives", devs)
    assert_ok(rc, out, 2)


def test_collectives_three_ranks():
    rc, out, _ = run(3, "collectives", "cpu")
    assert_ok(rc, out, 3)


def test_ddp_two_ranks_matches_single_process_and_is_bit_identical():
    rc, out, _ = run(2, "ddp", "cpu")
    assert_ok(rc, out, 2)
    assert out.count("identical on all ranks") == 2, out[-3000:]


def test_launcher_names_a_killed_rank():
    rc, out, took = run(2, "kill", launcher=True, env={"DIST_TEST_TIMEOUT": "20"})
    assert rc != 0
    assert "rank 1 (local rank 1" in out and "SIGKILL" in out, out[-3000:]
    assert took < 60


def test_raising_rank_stops_the_others_naming_it():
    rc, out, took = run(2, "raise", env={"DIST_TEST_TIMEOUT": "30"})
    assert rc != 0
    assert "rank 1 failed (ValueError: rank one gives up); rank 0 stopped in all_reduce" in out, out[-3000:]
    assert took < 25          # well within the 30 s timeout: the notice arrives at once


def test_hung_rank_times_out_naming_where_it_is():
    rc, out, took = run(2, "hang", env={"DIST_TEST_TIMEOUT": "2"})
    assert rc != 0
    assert "timed out on rank 0 after 2" in out and "rank 1 is past all_reduce #2" in out, out[-3000:]
    assert took < 25          # the sleeping rank would take 30 s; the abort ends the job


def test_mixed_vendor_ddp_two_platforms():
    a, b = two_platforms_or_skip()            # PoCL and Intel's runtime here; NVIDIA and PoCL on the GPU run
    rc, out, _ = run(2, "mixed", launcher=True, launcher_args=("--devices", f"{a},{b}"), timeout=400)
    assert_ok(rc, out, 2)
    assert out.count("identical on all ranks") == 2, out[-3000:]


# ------------------------------------------------------------------ one process (world size 1), no mpiexec
def test_single_process_world_and_api():
    assert dist.is_available() and not dist.is_initialized()
    with pytest.raises(ValueError, match="has not been initialized"):
        dist.get_rank()
    with pytest.raises(ValueError, match="backend 'xyz' is not provided"):
        dist.init_process_group("xyz")
    had_rank = "RANK" in os.environ
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    try:
        assert dist.is_initialized() and dist.get_rank() == 0 and dist.get_world_size() == 1
        assert os.environ["LOCAL_RANK"] == "0" and dist.get_node_local_rank() == 0
        assert dist.get_backend() == "mpi"
        with pytest.raises(RuntimeError, match="twice"):
            dist.init_process_group("mpi")
        x = cltorch.tensor([1.5, 2.5])
        dist.all_reduce(x, op=dist.ReduceOp.AVG)
        np.testing.assert_array_equal(x.numpy(), [1.5, 2.5])
        with pytest.raises(TypeError, match="AVG needs a floating point"):
            dist.all_reduce(cltorch.tensor([1, 2]), op=dist.ReduceOp.AVG)
        with pytest.raises(NotImplementedError, match="PREMUL_SUM"):
            dist.all_reduce(cltorch.tensor([1.0]), op=dist.ReduceOp.PREMUL_SUM)
        with pytest.raises(ValueError, match="tensor_list has 2 tensors, the group has 1"):
            dist.all_gather([cltorch.zeros(1), cltorch.zeros(1)], cltorch.zeros(1))
        with pytest.raises(ValueError, match="global rank 3 is not part of group"):
            dist.broadcast(cltorch.zeros(1), src=3)
        with pytest.raises(NotImplementedError, match="TCPStore"):
            dist.TCPStore()
        w = dist.barrier(async_op=True)
        assert w.wait() and w.is_completed()
        # objects and the remaining collectives at world size 1
        objs = [None, 3]
        dist.broadcast_object_list(objs, src=0)
        assert objs == [None, 3]
        out = [None]
        dist.gather_object({"a": 1}, out, dst=0)
        assert out == [{"a": 1}]
        so = [None]
        dist.scatter_object_list(so, ["x"], src=0)
        assert so == ["x"]
        y = cltorch.zeros(3)
        dist.reduce_scatter(y, [cltorch.tensor([1.0, 2.0, 3.0])], op=dist.ReduceOp.MAX)
        np.testing.assert_array_equal(y.numpy(), [1, 2, 3])
        outs = [cltorch.zeros(2)]
        dist.all_to_all(outs, [cltorch.tensor([4.0, 5.0])])
        np.testing.assert_array_equal(outs[0].numpy(), [4, 5])
        h = cltorch.from_numpy(np.array([1.0, 2.0], np.float16))      # (PoCL has no fp16 kernels)
        dist.all_reduce(h, op=dist.ReduceOp.AVG)
        np.testing.assert_array_equal(h.numpy().astype(np.float32), [1, 2])
        b = cltorch.tensor([True, False])
        dist.all_reduce(b)
        np.testing.assert_array_equal(b.numpy(), [True, False])
        dist.monitored_barrier(timeout=timedelta(seconds=5))
    finally:
        dist.destroy_process_group()
    assert not dist.is_initialized()
    assert had_rank or "RANK" not in os.environ


def test_ddp_needs_a_process_group():
    from cltorch.nn.parallel import DistributedDataParallel
    with pytest.raises(RuntimeError, match="needs a process group"):
        DistributedDataParallel(cltorch.nn.Linear(2, 2))


def test_launcher_command_line():
    from cltorch.distributed import run as launcher
    args = launcher.parse_args(["--nproc_per_node", "2", "--devices", "cl:0,cl:1", "--master-port", "1234",
                                "train.py", "--lr", "0.1"])
    cmd = launcher.build_command(args, "/tmp/x")
    s = " ".join(cmd)
    assert cmd[:len(mpiexec.command())] == mpiexec.command()

    def env(k, v):
        return " ".join(mpiexec.rank_env(cmd[0], {k: v}))
    assert s.count(" : ") == 1 and env("RANK", 1) in s and env("LOCAL_RANK", 0) in s
    assert env("CLTORCH_DEVICE", "cl:1") in s and env("MASTER_PORT", 1234) in s and s.endswith("train.py --lr 0.1")
    with pytest.raises(SystemExit):
        launcher.parse_args(["--nnodes", "2", "train.py"])


def test_mpiexec_flags_follow_the_implementation(tmp_path):
    """Open MPI (``--version``: "mpiexec (OpenRTE) 4.1.4" / "(Open MPI) 5.0.3") gets --oversubscribe and, as root,
    --allow-run-as-root, and -x NAME=VALUE per rank; Hydra (MPICH, Intel MPI) none of the flags and -env."""
    for text, impl in (("mpiexec (OpenRTE) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/",
                        "openmpi"), ("mpiexec (Open MPI) 5.0.3", "openmpi"),
                       ("HYDRA build details:\n    Version:   4.2.0", "hydra")):
        fake = tmp_path / f"mpiexec-{len(text)}"
        fake.write_text(f"#!/bin/sh\ncat <<'END'\n{text}\nEND\n")
        fake.chmod(0o755)
        assert mpiexec.implementation(str(fake)) == impl
        cmd = mpiexec.command(str(fake))
        root = os.geteuid() == 0
        assert cmd == [str(fake)] + ((["--allow-run-as-root"] if root else []) + ["--oversubscribe"]
                                     if impl == "openmpi" else [])
        assert mpiexec.rank_env(str(fake), {"RANK": 1}) == (["-x", "RANK=1"] if impl == "openmpi"
                                                           else ["-env", "RANK", "1"])
    line = "mpiexec noticed that process rank 1 with PID 4242 on node vm exited on signal 9 (Killed)."
    assert mpiexec.reported_death(line) == (1, 4242)
    assert mpiexec.reported_death("=   PID 4242 RUNNING AT vm") == (None, 4242)
    assert mpiexec.reported_death("OK 1") is None
