"""OpenCL platforms and devices: enumeration, vendor classing and capabilities.

Every platform is enumerated, not only the first. Each device gets a class (cpu, nvidia, amd, intel,
apple) from its device type, vendor id, vendor name and platform name, and a :class:`DeviceInfo`
record of the capabilities that kernels and error messages need.

Capabilities can be masked for testing with the environment variable ``CLTORCH_MASK_CAPS``
(comma-separated: ``fp16``, ``fp64``), or by a profile's ``[quirks] mask = [...]``.
"""
import os
from dataclasses import dataclass, field

__all__ = ["DeviceInfo", "classify", "list_devices", "device_info_from_props"]

VENDOR_IDS = {0x10DE: "nvidia", 0x1002: "amd", 0x1022: "amd", 0x8086: "intel", 0x1027F00: "apple", 0x106B: "apple"}


def classify(device_type_cpu, vendor_id, vendor, platform_name, name=""):
    """The device class: 'cpu' for any CPU device, else the GPU vendor.

    The device type wins (PoCL's CPU device reports Intel's vendor id 0x8086); then the vendor id;
    then words in the vendor, platform and device names. Unknown GPUs are classed 'gpu'.
    """
    if device_type_cpu:
        return "cpu"
    if vendor_id in VENDOR_IDS:
        return VENDOR_IDS[vendor_id]
    text = f"{vendor} {platform_name} {name}".lower()
    for word, cls in (("nvidia", "nvidia"), ("advanced micro", "amd"), ("amd", "amd"), ("radeon", "amd"),
                      ("intel", "intel"), ("apple", "apple")):
        if word in text:
            return cls
    return "gpu"


@dataclass
class DeviceInfo:
    """What we know of one OpenCL device. Sizes are in bytes."""
    index: int
    name: str
    vendor: str
    vendor_id: int
    platform: str
    cls: str
    is_gpu: bool
    driver_version: str
    opencl_version: str
    opencl_c_version: str
    compute_units: int
    global_mem: int
    local_mem: int
    max_alloc: int
    max_work_group_size: int
    preferred_vector_width_float: int
    fp16: bool
    fp64: bool
    extensions: tuple = field(default_factory=tuple)
    max_work_item_sizes: tuple = ()   # per dimension (CL_DEVICE_MAX_WORK_ITEM_SIZES); () = max_work_group_size each
    cl_device: object = None      # the pyopencl Device (None for recorded fixtures)

    @property
    def is_integrated(self):
        return self.is_gpu and self.cls in ("intel", "apple")


def device_info_from_props(index, props, cl_device=None):
    """Build a DeviceInfo from a plain dict of device properties (as recorded in test fixtures)."""
    exts = tuple(props.get("extensions", "").split())
    mask = set(filter(None, os.environ.get("CLTORCH_MASK_CAPS", "").split(",")))
    is_cpu = bool(props.get("is_cpu"))
    fp64 = ("cl_khr_fp64" in exts or props.get("double_fp_config", 0) != 0) and "fp64" not in mask
    fp16 = ("cl_khr_fp16" in exts) and "fp16" not in mask
    return DeviceInfo(
        index=index, name=props["name"].strip(), vendor=props.get("vendor", "").strip(),
        vendor_id=int(props.get("vendor_id", 0)), platform=props.get("platform", "").strip(),
        cls=classify(is_cpu, int(props.get("vendor_id", 0)), props.get("vendor", ""), props.get("platform", ""),
                     props["name"]),
        is_gpu=not is_cpu, driver_version=props.get("driver_version", ""),
        opencl_version=props.get("version", ""), opencl_c_version=props.get("opencl_c_version", ""),
        compute_units=int(props.get("max_compute_units", 1)), global_mem=int(props.get("global_mem_size", 0)),
        local_mem=int(props.get("local_mem_size", 0)), max_alloc=int(props.get("max_mem_alloc_size", 0)),
        max_work_group_size=int(props.get("max_work_group_size", 1)),
        preferred_vector_width_float=int(props.get("preferred_vector_width_float", 1)),
        fp16=fp16, fp64=fp64, extensions=exts,
        max_work_item_sizes=tuple(int(v) for v in props.get("max_work_item_sizes", ())), cl_device=cl_device)


def _props(dev, platform):
    import pyopencl as cl
    try:
        dfp = dev.double_fp_config
    except cl.Error:
        dfp = 0
    return dict(name=dev.name, vendor=dev.vendor, vendor_id=dev.vendor_id, platform=platform.name,
                is_cpu=bool(dev.type & cl.device_type.CPU), driver_version=dev.driver_version,
                version=dev.version, opencl_c_version=getattr(dev, "opencl_c_version", ""),
                max_compute_units=dev.max_compute_units, global_mem_size=dev.global_mem_size,
                local_mem_size=dev.local_mem_size, max_mem_alloc_size=dev.max_mem_alloc_size,
                max_work_group_size=dev.max_work_group_size, max_work_item_sizes=tuple(dev.max_work_item_sizes),
                preferred_vector_width_float=dev.preferred_vector_width_float,
                extensions=dev.extensions, double_fp_config=dfp)


_cache = []
_unusable = []   # (name, platform, reason) of devices whose compiler failed the check below

_CHECK_SOURCE = "__kernel void cltorch_compiler_check(__global float* a) { a[get_global_id(0)] *= 2.0f; }"
# A wide vector through a builtin, as the Philox, GEMM and norm kernels use them: a compiler that targets a CPU
# without the features its builtin library was built for warns that the vector argument "changes the ABI".
_CHECK_SOURCE_WIDE = ("__kernel void cltorch_compiler_check_wide(__global float16* a) "
                      "{ a[get_global_id(0)] = sqrt(a[get_global_id(0)]); }")
_CHECK_VERSION = "2"    # part of the cached verdict's key: a stricter check re-judges devices judged before
_VERDICTS = "compiler_checks.json"      # beside the kernel cache, kept by backend/probes.py's store


def _compiler_check(dev, platform):
    """None if the device's OpenCL C compiler builds the check kernels cleanly (in a child process: see
    :func:`_check_in_child`), else the reason (the first lines of its build log).

    A driver can list a device it cannot compile for. pip's PoCL 3.0 is built on LLVM 14: on a CPU newer than
    LLVM 14 it names the CPU 'generic' and either every build fails ("unknown target CPU 'generic'", seen on
    AMD Zen 5) or the builds target a CPU without the vector features its builtin library was compiled with:
    the compiler then warns that a wide vector argument "changes the ABI", and larger float64 kernels fail to
    link ("Final linking of kernel gemm_main failed") or come back without their kernels (INVALID_KERNEL_NAME),
    seen on an AMD EPYC with AVX-512. Either way the device is left out of the device list instead of failing
    at the first op. The verdict is cached on disk per platform, device, driver version and check version (a
    check takes about 1 s once per machine; a cached verdict a file read).
    """
    from .probes import stored
    key = "|".join((platform.name, platform.version, dev.name, dev.version, dev.driver_version, _CHECK_VERSION))
    return stored(_VERDICTS, key, lambda: _check_in_child(platform.name, dev.name, dev.driver_version))


_CHILD_CHECK = r"""
import json, sys, warnings
import pyopencl as cl
plat, name, driver, sources = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
devs = [d for p in cl.get_platforms() if p.name == plat for d in p.get_devices()
        if d.name == name and d.driver_version == driver]
if not devs:
    print(json.dumps("the device is not listed by its driver")); sys.exit(0)
dev = devs[0]
try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # a compiler's informational output is no failure
        prg = cl.Program(cl.Context([dev]), "\n".join(sources)).build(devices=[dev])
    log = prg.get_build_info(dev, cl.program_build_info.LOG) or ""
    abi = [ln.split(">:", 1)[-1].split("warning:", 1)[-1].strip() for ln in log.splitlines()
           if "changes the ABI" in ln]     # the message, without the compiler's scratch-file path
    verdict = None if not abi else (
        "the compiler targets a CPU without the vector features of its own builtin library (" + abi[0][:160]
        + "); float64 and wide-vector kernels fail to link")
except Exception as e:
    lines = [ln.strip() for ln in str(e).splitlines()
             if ln.strip() and not ln.startswith(("Build on", "(options:"))]  # the log, not this process's paths
    verdict = "; ".join(ln for ln in lines if "clBuildProgram failed" not in ln)[:300] or type(e).__name__
print(json.dumps(verdict), flush=True)
"""


def _check_in_child(platform_name, device_name, driver_version):
    """Build the check kernels in a child process: a driver whose compiler crashes, or leaves the process to
    abort at exit (pip's PoCL 3.0 beside Intel's runtime, each with its own LLVM, after a build that warned),
    must not take the caller's process with it. None when the build succeeds cleanly, else the reason."""
    import json
    import subprocess
    import sys
    try:
        r = subprocess.run([sys.executable, "-c", _CHILD_CHECK, platform_name, device_name, driver_version,
                            json.dumps([_CHECK_SOURCE, _CHECK_SOURCE_WIDE])],
                           capture_output=True, text=True, timeout=300, env=os.environ.copy())
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"the compiler check did not finish: {e}"[:300]
    for line in reversed(r.stdout.splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    tail = " ".join(r.stderr.split())[-200:]
    return f"the compiler check crashed (exit {r.returncode}): {tail}"


_simulators = []  # (name, platform) of simulator devices left out of the list (see list_devices)


def simulators():
    """Simulator devices (Oclgrind) found but not listed: ``(device name, platform name)``; ``CLTORCH_PLATFORM=
    Oclgrind`` lists them (as ``cl:0``)."""
    list_devices()
    return list(_simulators)


def unusable_devices():
    """The devices that an OpenCL driver lists but whose compiler cannot build a kernel: a list of
    ``(device name, platform name, reason)``; they get no ``cl:N`` index."""
    list_devices()
    return list(_unusable)


def _platform_matches(pattern, platform):
    import re
    return re.search(pattern, platform, re.I) is not None


def list_devices():
    """Every OpenCL device on every platform, in a stable order (the ``cl:N`` order).

    Order: discrete GPUs, integrated GPUs, then CPUs; within a kind PoCL first, Oclgrind (a simulator) last,
    otherwise platform order. A simulator (Oclgrind) is left out (:func:`simulators`) unless CLTORCH_PLATFORM
    names it. ``CLTORCH_PLATFORM`` (a regular expression searched in platform names, e.g.
    ``Intel`` or ``Oclgrind``) puts the matching platforms' devices first: then ``cl`` and ``cl:0`` are that
    platform's first device, and ``cpu`` tensors compute on its first CPU device (how the test matrix runs the
    suite on Intel's CPU runtime); a pattern that matches no usable platform raises RuntimeError naming them. Devices whose compiler cannot build a kernel are left out
    (:func:`unusable_devices`). Drivers installed by pip are found first (:mod:`.drivers`). Returns [] when
    no OpenCL platform is installed (pyopencl raises LogicError/RuntimeError then).
    """
    if _cache:
        return _cache[0]
    found = []
    from . import drivers
    drivers.configure()      # before the first OpenCL call: the ICD loader reads its folder once
    try:
        import pyopencl as cl
        platforms = cl.get_platforms()
    except Exception:  # no ICD loader, or no platform: no devices
        platforms = []
    for p in platforms:
        try:
            devs = p.get_devices()
        except Exception:
            continue
        for d in devs:
            reason = _compiler_check(d, p)
            if reason is None:
                found.append((d, p))
            else:
                _unusable.append((d.name.strip(), p.name.strip(), reason))
    infos = [device_info_from_props(0, _props(d, p), d) for d, p in found]
    prefer = os.environ.get("CLTORCH_PLATFORM")
    # a simulator (Oclgrind) is a checking tool, not a device to compute on: it gets a cl:N index only when
    # CLTORCH_PLATFORM names it (then it is cl:0 and 'cpu'); otherwise simulators() lists it
    for i in [i for i in infos if "oclgrind" in i.platform.lower()]:
        if not (prefer and _platform_matches(prefer, i.platform)):
            infos.remove(i)
            _simulators.append((i.name, i.platform))
    if prefer and infos and not any(_platform_matches(prefer, i.platform) for i in infos):
        names = sorted({i.platform for i in infos}) or ["none"]
        raise RuntimeError(f"CLTORCH_PLATFORM={prefer!r} matches no usable OpenCL platform; the platforms are: "
                           + ", ".join(repr(n) for n in names))

    def rank(info):
        kind = 2 if not info.is_gpu else (1 if info.is_integrated else 0)
        # within a kind: PoCL first (the CPU profiles are measured on it), a simulator (Oclgrind) last
        plat = info.platform.lower()
        first = 0 if prefer and _platform_matches(prefer, info.platform) else 1
        return first, kind, 0 if "portable computing language" in plat else (2 if "oclgrind" in plat else 1)
    infos.sort(key=rank)
    for i, info in enumerate(infos):
        info.index = i
    _cache.append(infos)
    return infos


CLASSES = ("cpu", "nvidia", "amd", "intel", "apple", "gpu")


def available_text():
    devs = list_devices()
    if not devs:
        return "no OpenCL device is installed"
    return "available: 'cpu', 'cl', " + ", ".join(f"'cl:{d.index}' ({d.cls}: {d.name})" for d in devs)


def env_device():
    """The index that plain 'cl' means: the device ``CLTORCH_DEVICE`` names ('cl:N', 'cl:<class>', ...), else 0.

    Raises RuntimeError naming the variable when its value is no OpenCL device string or matches no device."""
    import os
    env = os.environ.get("CLTORCH_DEVICE")
    if not env or env == "cl":
        return 0
    try:
        return resolve(env)
    except RuntimeError as e:
        raise RuntimeError(f"the environment variable CLTORCH_DEVICE={env!r} picks the device that 'cl' means and "
                           f"takes 'cl:N', 'cl:<class>' or 'cl:<class>:N': {e}") from None


def resolve(spec):
    """The device index for a 'cl' spec: 'cl', 'cl:N', 'cl:<class>' or 'cl:<class>:N' (N-th of that class).

    Raises RuntimeError naming the available devices when the spec matches none.
    """
    parts = spec.split(":")
    if parts[0] != "cl" or len(parts) > 3:
        raise RuntimeError(f"invalid OpenCL device string '{spec}'; {available_text()}")
    devs = list_devices()
    if not devs:
        from .runtime import install_hint
        raise RuntimeError(install_hint())
    if len(parts) == 1:
        return env_device()
    sel = parts[1]
    if sel.isdigit() and len(parts) == 2:
        i = int(sel)
        if i >= len(devs):
            raise RuntimeError(f"device 'cl:{i}' does not exist: this machine has {len(devs)} OpenCL "
                               f"device{'s' if len(devs) != 1 else ''}; {available_text()}")
        return i
    if sel in CLASSES:
        of_class = [d.index for d in devs if d.cls == sel]
        n = int(parts[2]) if len(parts) == 3 and parts[2].isdigit() else 0
        if len(parts) == 3 and not parts[2].isdigit():
            raise RuntimeError(f"invalid OpenCL device string '{spec}'; {available_text()}")
        if n >= len(of_class):
            raise RuntimeError(f"device '{spec}': found {len(of_class)} {sel} device(s); {available_text()}")
        return of_class[n]
    raise RuntimeError(f"invalid OpenCL device string '{spec}'; {available_text()}")
