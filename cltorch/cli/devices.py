"""``cltorch devices``: a table of every OpenCL platform and device, or JSON."""
import json
import os

from .. import backend

HINT = ("No OpenCL device found.\n"
        "Install one:\n"
        "  CPU (any OS):   pip install pocl-binary-distribution\n"
        "  NVIDIA:         the NVIDIA driver ships OpenCL (libnvidia-opencl / nvidia-opencl-icd)\n"
        "  AMD:            ROCm (rocm-opencl-runtime) or the AMDGPU-PRO OpenCL driver\n"
        "  Intel:          intel-opencl-icd (Intel compute runtime)\n"
        "  Apple:          OpenCL is part of macOS\n"
        "and check that an ICD loader is installed (ocl-icd-libopencl1 on Debian/Ubuntu).")


def _gib(n):
    return f"{n / 2**30:.1f} GiB"


def _kib(n):
    return f"{n / 1024:.0f} KiB"


def _launch_limits(info, prof):
    """What backend/geometry.py fits and checks every launch against: the device's limits lowered by the
    profile's [limits] (None where there is no limit)."""
    from ..backend.geometry import limits_for
    lim = limits_for(info, prof)
    big = 2 ** 62
    return {"max_work_group_size": lim.max_work_group_size, "max_work_item_sizes": list(lim.max_work_item_sizes),
            "local_mem_size": lim.local_mem_size if lim.local_mem_size < big else None,
            "max_groups": [g if g < big else None for g in lim.max_groups],
            "lowered_by": {k: v for k, v in lim.sources.items()}}


def rows():
    out = []
    for info in backend.list_devices():
        prof = backend.load_profile(info)
        launch = _launch_limits(info, prof)
        out.append({"index": info.index, "device": f"cl:{info.index}", "class": info.cls, "name": info.name,
                    "platform": info.platform, "driver": info.driver_version, "opencl": " ".join(info.opencl_version.split()[:3]),
                    "compute_units": info.compute_units, "global_mem": info.global_mem, "local_mem": info.local_mem,
                    "max_alloc": info.max_alloc, "max_work_group_size": info.max_work_group_size,
                    "max_work_item_sizes": list(info.max_work_item_sizes), "launch_limits": launch,
                    "fp16": info.fp16, "fp64": info.fp64, "profile": prof.name,
                    "profile_files": [{"file": src, "why": why} for src, why in zip(prof.sources, prof.reasons)],
                    "gemm_designs": gemm_designs(info, prof)})
    return out


_DESIGN_NAMES = {"cpu": "CPU design", "gpu": "portable GPU design"}


def gemm_designs(info, prof):
    """Which GEMM design float16, bfloat16 and float32 products use on a device and why: [{dtype, design, why}]
    (matrix units: ops/gemm/mma.py; a probe runs here, once per device and driver, only where they are turned on)."""
    from ..ops.gemm import mma, plan
    try:
        design = plan.design(prof)
    except ValueError as e:
        return [{"dtype": "all", "design": "none", "why": str(e)}]
    rows = mma.report(info, prof, runtime=lambda: backend.runtime(info.index), design=design)
    return [{"dtype": d, "design": _DESIGN_NAMES.get(x) or "matrix unit " + x[len("mma:"):], "why": w}
            for d, x, w in rows]


def _print_gemm_designs(rs):
    print("\nGEMM designs per dtype (float32 takes matrix units only while TF32 is allowed):")
    for r in rs:
        groups = {}
        for g in r["gemm_designs"]:
            groups.setdefault((g["design"], g["why"]), []).append(g["dtype"])
        for (design, why), dts in groups.items():
            print(f"  {r['device']} {', '.join(dts)}: {design}: {why}")


def _print_drivers():
    found = backend.drivers.found_drivers()
    if found:
        print("\nOpenCL drivers registered by cltorch (OCL_ICD_VENDORS=%s):" % os.environ.get("OCL_ICD_VENDORS"))
        for what, lib, where in found:
            print(f"  {what}: {lib}" + (f"  (from {where})" if where != lib else ""))


def _print_profiles(rs):
    """Which profile files each device merged, in order, and why each matched."""
    print("\nDevice profiles (merged in this order; later files override earlier ones):")
    for r in rs:
        print(f"  {r['device']} ({r['platform']}):")
        for f in r["profile_files"]:
            print(f"    {os.path.basename(f['file'])}: {f['why']}")


def _print_unusable():
    from ..backend.devices import simulators
    for name, platform in simulators():
        print(f"not listed: {name} ({platform}): a simulator; CLTORCH_PLATFORM=Oclgrind makes it cl:0 and 'cpu'")
    for name, platform, reason in backend.unusable_devices():
        print(f"left out: {name} ({platform}): its OpenCL compiler cannot build a kernel: {reason}")


def run(args):
    try:
        rs = rows()
    except RuntimeError as e:      # e.g. CLTORCH_PLATFORM naming no platform
        print(f"cltorch devices: {e}")
        return 1
    if not rs:
        _print_unusable()
        print(HINT)
        return 1
    if getattr(args, "json", False):
        print(json.dumps(rs, indent=2))
        return 0
    cols = [("device", "device"), ("class", "class"), ("name", "name"), ("driver", "driver"),
            ("opencl", "OpenCL"), ("compute_units", "CUs"), ("global_mem", "global"), ("local_mem", "local"),
            ("max_work_group_size", "max WG (per dim)"), ("fp16", "fp16"), ("fp64", "fp64"), ("profile", "profile")]
    table = []
    for r in rs:
        row = []
        for k, _ in cols:
            v = r[k]
            if k == "global_mem":
                v = _gib(v)
            elif k == "local_mem":
                v = _kib(v)
            elif k == "max_work_group_size":
                lim = r["launch_limits"]
                v = f"{lim['max_work_group_size']} ({'x'.join(map(str, lim['max_work_item_sizes']))})"
            elif isinstance(v, bool):
                v = "yes" if v else "no"
            row.append(str(v))
        table.append(row)
    widths = [max(len(h), *(len(row[i]) for row in table)) for i, (_, h) in enumerate(cols)]
    print("  ".join(h.ljust(w) for (_, h), w in zip(cols, widths)))
    print("  ".join("-" * w for w in widths))
    for row in table:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)))
    lowered = [(r["device"], r["launch_limits"]["lowered_by"]) for r in rs if r["launch_limits"]["lowered_by"]]
    if lowered:
        print("\nLaunch limits lowered by a profile's [limits] (every launch is fitted and checked against them):")
        for dev, why in lowered:
            print(f"  {dev}: " + "; ".join(f"{k} from {v}" for k, v in why.items()))
    _print_profiles(rs)
    _print_gemm_designs(rs)
    _print_unusable()
    _print_drivers()
    if backend.cpu_device_present():
        cpu = "'cpu' tensors compute on the first OpenCL CPU device (cl:%d)" % backend.cpu_index()
    else:
        from ..backend.runtime import CPU_DEVICE_PIP
        cpu = ("'cpu' tensors: no OpenCL CPU device, so they are created, loaded, initialised and copied on the host "
               "and their arithmetic raises; " + CPU_DEVICE_PIP + " gives one")
    print("\n%s; 'cl' is cl:%d (CLTORCH_DEVICE overrides; CLTORCH_PLATFORM puts a platform's devices first)."
          % (cpu, backend.default_index()))
    return 0
