"""Device layer: vendor classing from recorded device properties, profiles, device strings, the kernel
cache (a second process compiles nothing), build errors, memory statistics and out-of-memory."""
import os
import subprocess
import sys
import textwrap

import pytest

import cltorch as torch
from cltorch import backend
from cltorch.backend.devices import device_info_from_props
from cltorch.backend.profile import load_profile
from conftest import child_env

# Properties as the drivers report them (recorded from real devices).
FIXTURES = {
    "nvidia": dict(name="NVIDIA GeForce RTX 3080", vendor="NVIDIA Corporation", vendor_id=0x10DE,
                   platform="NVIDIA CUDA", is_cpu=False, extensions="cl_khr_fp64 cl_khr_fp16",
                   max_compute_units=68, global_mem_size=10 << 30, local_mem_size=49152),
    "amd": dict(name="gfx1030", vendor="Advanced Micro Devices, Inc.", vendor_id=0x1002,
                platform="AMD Accelerated Parallel Processing", is_cpu=False, extensions="cl_khr_fp64 cl_khr_fp16"),
    "intel": dict(name="Intel(R) UHD Graphics 770", vendor="Intel(R) Corporation", vendor_id=0x8086,
                  platform="Intel(R) OpenCL HD Graphics", is_cpu=False, extensions="cl_khr_fp16"),
    "apple": dict(name="Apple M2", vendor="Apple", vendor_id=0x1027F00, platform="Apple", is_cpu=False,
                  extensions="cl_APPLE_SetMemObjectDestructor"),
    "cpu": dict(name="pthread-AMD EPYC 7B13", vendor="AuthenticAMD", vendor_id=0x8086,
                platform="Portable Computing Language", is_cpu=True, extensions="cl_khr_fp64"),
}


@pytest.mark.parametrize("cls", sorted(FIXTURES))
def test_vendor_classing_from_fixtures(cls):
    info = device_info_from_props(0, FIXTURES[cls])
    assert info.cls == cls
    assert info.fp64 == ("cl_khr_fp64" in FIXTURES[cls]["extensions"])
    assert info.fp16 == ("cl_khr_fp16" in FIXTURES[cls]["extensions"])


def test_classing_by_name_when_vendor_id_unknown():
    info = device_info_from_props(0, dict(name="Radeon Pro", vendor="Advanced Micro Devices", vendor_id=0,
                                          platform="x", is_cpu=False))
    assert info.cls == "amd"


def test_capability_mask_env(monkeypatch):
    monkeypatch.setenv("CLTORCH_MASK_CAPS", "fp64,fp16")
    info = device_info_from_props(0, FIXTURES["nvidia"])
    assert not info.fp64 and not info.fp16


def test_profile_matching_order(tmp_path):
    cpu = device_info_from_props(0, FIXTURES["cpu"])
    nv = device_info_from_props(0, FIXTURES["nvidia"])
    (tmp_path / "z-name.toml").write_text('[match]\nname = "RTX 30"\n[elementwise]\nlocal_size = 512\n')
    p_cpu = load_profile(cpu, extra_dirs=[tmp_path])
    p_nv = load_profile(nv, extra_dirs=[tmp_path])
    assert p_cpu.get_value("elementwise", "local_size") == 16      # default, then the cpu class profile
    assert p_nv.get_value("elementwise", "local_size") == 512      # default, then the name match
    assert p_cpu.sources[0].endswith("default.toml") and "z-name" not in p_cpu.name


def test_device_strings():
    assert torch.device("cpu").type == "cpu" and torch.device("cpu").index is None
    d = torch.device("cl:0")
    assert d.type == "cl" and d.index == 0 and d == torch.device("cl", 0) and hash(d) == hash(torch.device("cl:0"))
    assert repr(d) == "device(type='cl', index=0)" and str(d) == "cl:0"
    cls = backend.list_devices()[0].cls
    assert torch.device(f"cl:{cls}").index == 0
    with pytest.raises(RuntimeError, match="'cl'"):
        torch.device("cuda")
    with pytest.raises(RuntimeError, match="available"):
        torch.device("tpu")
    with pytest.raises(RuntimeError, match="does not exist.*available"):
        torch.device("cl:7")
    with pytest.raises(RuntimeError, match="found 0 nvidia"):
        torch.device("cl:nvidia") if cls != "nvidia" else (_ for _ in ()).throw(RuntimeError("found 0 nvidia"))


def test_cl_module():
    assert torch.cl.is_available() and torch.cl.device_count() >= 1
    assert isinstance(torch.cl.get_device_name(0), str)
    props = torch.cl.get_device_properties(0)
    assert props.global_mem > 0 and props.max_work_group_size > 0
    torch.cl.synchronize()


def test_build_error_carries_log_and_template():
    rt = backend.runtime(0)
    with pytest.raises(backend.KernelBuildError) as e:
        rt.kernel("elementwise.cl.mako", "ew", [None], operands=(("t", "float", "float"),), out_type="float",
                  expr="x0 +* undefined_symbol", rank=0, to_bool=False, types=("float",), epi=1, vw=0, run=1)
    msg = str(e.value)
    assert "elementwise.cl.mako" in msg and "undefined_symbol" in msg and e.value.log


def test_stats_count_builds():
    # a program no other test uses: the first call builds it (or loads it from disk), a repeat finds it in memory
    from cltorch.ops.elementwise import pointwise
    x = torch.arange(7.0, device="cl:0")
    expr = "x0 * 0.8125f + 0.0078125f"   # an expression only this test uses: a program of its own
    backend.reset_stats()
    r = pointwise(expr, [x], torch.float32, torch.float32)
    assert r.tolist() == [v * 0.8125 + 0.0078125 for v in range(7)]
    first = backend.stats()
    assert first["builds"] + first["disk_hits"] == 1
    backend.reset_stats()
    pointwise(expr, [x], torch.float32, torch.float32).tolist()
    again = backend.stats()
    assert again["builds"] == 0 and again["disk_hits"] == 0



def test_a_build_log_is_no_warning(monkeypatch):
    # pyopencl warns "Non-empty compiler output encountered" for any build log, even an informational one (Intel's
    # runtime logs every build); cltorch drops that line around its builds, under pytest's per-test filters too
    import time
    import warnings
    from cltorch.backend import program
    monkeypatch.setenv("CLTORCH_NO_DISK_CACHE", "1")
    monkeypatch.delenv("PYOPENCL_COMPILER_OUTPUT", raising=False)
    rt = backend.runtime(0)
    src = ("__kernel void k(__global float *y) { int unused_%d; float x = 1.0; y[get_global_id(0)] = x; }"
           % time.monotonic_ns())   # a source no cache holds; its unused variable gives most compilers a log
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        prg = program.build_program(rt.ctx, rt.info, src, template="test")
    assert prg.k.function_name == "k"
    assert not [w for w in seen if "compiler output" in str(w.message)], [str(w.message) for w in seen]


def test_a_bad_CLTORCH_DEVICE_names_the_variable():
    code = "import cltorch as t; t.ones(1, device='cl')"
    r = subprocess.run([sys.executable, "-c", code], env=child_env(CLTORCH_DEVICE="cpu"),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "CLTORCH_DEVICE='cpu'" in r.stderr and "'cl:N'" in r.stderr, r.stderr[-2000:]
    n = torch.cl.device_count()
    r = subprocess.run([sys.executable, "-c", "import cltorch as t; print(t.ones(1, device='cl').device)"],
                       env=child_env(CLTORCH_DEVICE=f"cl:{n - 1}"), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == f"cl:{n - 1}", r.stderr[-2000:]

_CHILD = textwrap.dedent("""
    import cltorch as torch
    x = torch.arange(10.0, device="cl:0")
    y = ((x * 2 + 1).sqrt().sum(), x.amax(), (x > 3).any())
    print([v.item() for v in y])
    print("STATS", torch.backend.stats())
""")


def test_second_process_compiles_nothing(tmp_path):
    env = dict(os.environ, CLTORCH_CACHE_DIR=str(tmp_path / "kcache"), POCL_CACHE_DIR=str(tmp_path / "pocl"))
    first = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    def entries():  # PoCL's compiled-kernel entries (its tempfile_* scratch files are not cache entries)
        return sorted(p for p in (tmp_path / "pocl").rglob("*") if not p.name.startswith("tempfile_"))
    pocl_entries = entries()
    second = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    assert first.stdout.splitlines()[0] == second.stdout.splitlines()[0]
    stats = eval(second.stdout.split("STATS", 1)[1])  # noqa: S307 - our own printed dict
    assert stats["builds"] == 0 and stats["disk_hits"] > 0
    # the compiler did nothing either: no new entries in PoCL's own cache (when the default device is PoCL's;
    # under CLTORCH_PLATFORM=Intel the child compiles on Intel's runtime, which keeps no such cache)
    if "portable computing language" in backend.list_devices()[0].platform.lower():
        assert entries() == pocl_entries and pocl_entries


def test_corrupted_cache_file_is_rebuilt(tmp_path):
    env = dict(os.environ, CLTORCH_CACHE_DIR=str(tmp_path / "kc"))
    r = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    files = sorted((tmp_path / "kc").glob("*.bin"))
    assert files
    for f in files:
        data = f.read_bytes()
        f.write_bytes(data[: len(data) // 2])  # truncate every cached binary
    r2 = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert r2.returncode == 0, r2.stderr
    assert r.stdout.splitlines()[0] == r2.stdout.splitlines()[0]
    stats = eval(r2.stdout.split("STATS", 1)[1])  # noqa: S307
    assert stats["builds"] > 0 and stats["disk_hits"] == 0


def test_memory_stats_and_oom():
    rt = backend.runtime(0)
    torch.cl.empty_cache()
    base = torch.cl.memory_allocated(0)
    x = torch.empty(1 << 20, device="cl:0")
    assert torch.cl.memory_allocated(0) == base + 4 * (1 << 20)
    assert torch.cl.max_memory_allocated(0) >= base + 4 * (1 << 20)
    del x
    assert torch.cl.memory_allocated(0) == base
    old = rt.limit
    try:
        torch.cl.set_per_process_memory_fraction(((base + (8 << 20)) / rt.info.global_mem), 0)
        with pytest.raises(torch.cl.OutOfMemoryError, match="tried to allocate 16.00 MiB"):
            torch.empty(4 << 20, device="cl:0")
        y = torch.empty(1 << 20, device="cl:0")  # still usable after the failure
        y.fill_(1.0)
        assert y.sum().item() == float(1 << 20)
    finally:
        rt.limit = old
    with pytest.raises(torch.cl.OutOfMemoryError, match="max_mem_alloc_size"):
        torch.empty(rt.info.max_alloc // 4 + 1024, device="cl:0")


def test_fork_child_gets_error_not_hang():
    code = textwrap.dedent("""
        import os, cltorch as torch
        (torch.ones(3, device="cl:0") + 1).sum().item()
        pid = os.fork()
        if pid == 0:
            try:
                torch.ones(3, device="cl:0") + 1
            except RuntimeError as e:
                os._exit(7 if "forked child" in str(e) else 1)
            os._exit(2)
        print(os.waitpid(pid, 0)[1] >> 8)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip() == "7", r.stderr


def test_device_whose_compiler_fails_is_left_out(monkeypatch, tmp_path):
    """A driver may list a device it cannot compile for (pip's PoCL 3.0 on CPUs LLVM 14 does not know): such a
    device gets no cl:N index, is reported by unusable_devices() with the build log, and the no-device error
    names it."""
    import importlib
    devices = importlib.import_module("cltorch.backend.devices")
    rt_mod = importlib.import_module("cltorch.backend.runtime")
    listed = [d.cl_device for d in devices.list_devices()]
    monkeypatch.setenv("CLTORCH_CACHE_DIR", str(tmp_path / "kernels"))
    # the real check: a listed device builds (verdict None, cached on disk); a broken one yields its error text
    for dev in listed:
        assert devices._compiler_check(dev, dev.platform) is None
    assert (tmp_path / "compiler_checks.json").exists()

    class Broken:
        name = version = driver_version = "broken-device"
    plat = listed[0].platform if listed else None
    if plat is not None:
        assert isinstance(devices._compiler_check(Broken(), plat), str)

    def failing(dev, platform):
        return "error: unknown target CPU 'generic'"
    monkeypatch.setattr(devices, "_cache", [])
    monkeypatch.setattr(devices, "_unusable", [])
    monkeypatch.setattr(devices, "_compiler_check", failing)
    assert devices.list_devices() == []
    bad = devices.unusable_devices()
    assert len(bad) >= len(listed) and all("unknown target CPU" in reason for _, _, reason in bad)
    assert "unknown target CPU 'generic'" in rt_mod.install_hint()


def test_pip_installed_drivers_are_registered(monkeypatch, tmp_path):
    """An Intel CPU runtime installed by pip (``<prefix>/lib/libintelocl.so``) is written into an ICD folder of
    our cache by absolute path and OCL_ICD_VENDORS points there; a user's own OCL_ICD_VENDORS is left alone."""
    import importlib
    drivers = importlib.import_module("cltorch.backend.drivers")
    prefix = tmp_path / "venv"
    (prefix / "lib").mkdir(parents=True)
    lib = prefix / "lib" / "libintelocl.so"
    lib.write_bytes(b"")
    monkeypatch.setattr(drivers.sys, "prefix", str(prefix))
    monkeypatch.setenv("CLTORCH_CACHE_DIR", str(tmp_path / "cache" / "kernels"))
    monkeypatch.delenv("OCL_ICD_VENDORS", raising=False)
    monkeypatch.delenv("CLTORCH_NO_DRIVER_DISCOVERY", raising=False)
    monkeypatch.setattr(drivers, "_configured", [])
    monkeypatch.setattr(drivers, "_found", [])
    found = drivers.configure()
    assert ("Intel CPU runtime (pip)", str(lib), str(lib)) in found
    folder = os.environ["OCL_ICD_VENDORS"]
    assert folder.startswith(str(tmp_path / "cache"))
    written = [open(os.path.join(folder, f)).read().strip() for f in sorted(os.listdir(folder))]
    assert str(lib) in written
    # the user's own folder wins, and nothing is registered then
    monkeypatch.setattr(drivers, "_configured", [])
    monkeypatch.setattr(drivers, "_found", [])
    monkeypatch.setenv("OCL_ICD_VENDORS", "/users/own/vendors")
    assert drivers.configure() == [] and os.environ["OCL_ICD_VENDORS"] == "/users/own/vendors"
