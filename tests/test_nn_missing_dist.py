"""SyncBatchNorm across ranks: 2 and 3 ranks started by mpiexec must match one BatchNorm2d over the whole batch
(outputs, input and parameter gradients, running statistics); the rank program is
tests/_nn_missing_syncbn_worker.py."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

import cltorch
from cltorch.distributed import mpiexec

pytest.importorskip("mpi4py")
HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.skipif(mpiexec.find() is None, reason="no mpiexec (pip install mpich)")


@pytest.mark.parametrize("n,dev", [(2, "cpu"), (3, "cl:0")])
def test_sync_batchnorm_matches_whole_batch(n, dev):
    if dev != "cpu" and not cltorch.cl.device_count():
        pytest.skip("no OpenCL device")
    e = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "CLTORCH_DIST_RUNDIR")}
    p = subprocess.run(mpiexec.command() + ["-n", str(n), sys.executable, str(HERE / "_nn_missing_syncbn_worker.py"), dev],
                       capture_output=True, text=True, timeout=300, env=e, cwd=str(HERE.parent))
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    for r in range(n):
        assert f"OK {r}" in out, out[-4000:]
