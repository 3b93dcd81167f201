"""The MPI launcher: which ``mpiexec``, which MPI it belongs to, and the flags that MPI needs.

One place for what differs between MPI implementations, used by ``python -m cltorch.distributed.run`` and by the
tests that start ranks:

- which binary: the one next to this Python (pip's ``mpich`` puts it there), then ``mpiexec`` or ``mpirun`` on
  PATH;
- which implementation: ``mpiexec --version`` names it (Open MPI: ``mpiexec (OpenRTE) 4.1.4`` or ``mpiexec (Open
  MPI) 5.0.x``; MPICH and Intel MPI: Hydra's ``HYDRA build details``);
- Open MPI refuses to start as root unless told (``--allow-run-as-root``; containers and CI machines run as
  root) and refuses more ranks than the host has cores unless told (``--oversubscribe``); MPICH's Hydra needs
  neither;
- a rank's own environment in an MPMD section: Hydra's ``-env NAME VALUE``, Open MPI's ``-x NAME=VALUE``;
- how the launcher reports a rank that died: Hydra prints the pid (``PID 123 RUNNING AT host``), Open MPI the rank
  and pid (``process rank 1 with PID 123 on node host exited on signal 9``).
"""
import functools
import os
import re
import shutil
import subprocess
import sys

__all__ = ["find", "implementation", "command", "rank_env", "reported_death"]

OPENMPI, HYDRA, UNKNOWN = "openmpi", "hydra", "unknown"


def find(given=None):
    """The launcher's path: ``given``, else the ``mpiexec`` next to this Python, else ``mpiexec``/``mpirun`` on
    PATH, else None."""
    if given:
        return given
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.exists(here):
        return here
    return shutil.which("mpiexec") or shutil.which("mpirun")


@functools.lru_cache(maxsize=None)
def implementation(path):
    """``"openmpi"``, ``"hydra"`` (MPICH, Intel MPI, MVAPICH) or ``"unknown"``, from ``path --version``."""
    try:
        r = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30,
                           stdin=subprocess.DEVNULL)
        text = (r.stdout + r.stderr).lower()
    except (OSError, subprocess.SubprocessError):
        return UNKNOWN
    if "open mpi" in text or "openrte" in text or "open-mpi" in text:
        return OPENMPI
    if "hydra" in text or "mpich" in text or "intel(r) mpi" in text:
        return HYDRA
    return UNKNOWN


def command(given=None):
    """``[mpiexec, flags...]``: the launcher with the flags its MPI needs to start ranks here (Open MPI: as root,
    ``--allow-run-as-root``; always ``--oversubscribe``, as a test or a small machine may ask for more ranks than
    cores). Raises RuntimeError when no launcher is found."""
    path = find(given)
    if path is None:
        raise RuntimeError("no mpiexec found: pip install mpich (or mpi4py built with your MPI, whose mpiexec is "
                           "then on PATH)")
    out = [path]
    if implementation(path) == OPENMPI:
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            out.append("--allow-run-as-root")
        out.append("--oversubscribe")
    return out


def rank_env(path, env):
    """The arguments that give one MPMD section the environment ``env`` (a dict) under the launcher at ``path``."""
    out = []
    for k, v in env.items():
        out += ["-x", f"{k}={v}"] if implementation(path) == OPENMPI else ["-env", k, str(v)]
    return out


_HYDRA_DEATH = re.compile(r"PID (\d+) RUNNING AT")
_OPENMPI_DEATH = re.compile(r"process rank (\d+) with PID (\d+) on node \S+ exited on signal")


def reported_death(line):
    """``(rank, pid)`` of a rank the launcher reports dead in one line of its output (either may be None), or
    None when the line reports none. Open MPI names the rank (and a pid, 0 when it has none); Hydra the pid."""
    m = _OPENMPI_DEATH.search(line)
    if m:
        return int(m.group(1)), (int(m.group(2)) or None)
    m = _HYDRA_DEATH.search(line)
    if m:
        return None, int(m.group(1))
    return None
