"""README's test command: the test suite once per working OpenCL CPU runtime of this machine.

    python tools/test_matrix.py [pytest arguments]        (default: -q tests)

Pass 1 runs pytest with the devices in their default order: ``cl:0`` is the default device and ``cpu`` the first
working OpenCL CPU runtime (PoCL where its compiler builds for this CPU, else Intel's CPU runtime), and it runs the
Oclgrind checks of tests/test_kernel_configs.py. Every other working CPU runtime (an OpenCL platform) gets one
more pass with ``CLTORCH_PLATFORM`` naming it, which makes its device ``cl:0`` and ``cpu``. No runtime runs twice:
a device whose compiler cannot build for this CPU (pip's PoCL 3.0 on CPUs newer than its LLVM 14) and a simulator
(Oclgrind) get no pass of their own, and the runner says why. It prints the plan first and, at the end, each
pass's pytest summary line and time. Exit status: 0 when every pass passed, else the first failing pass's.
"""
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _plan():
    """``(passes, notes)``: passes are ``(title, CLTORCH_PLATFORM or None)``; notes say what got no pass and why."""
    from cltorch.backend import devices
    listed = devices.list_devices()
    notes = []
    cpu_platforms = []                 # in cl:N order: PoCL first where it works
    for d in listed:
        if d.cls != "cpu":
            notes.append(f"cl:{d.index} {d.name} ({d.platform}): a GPU, pass 1's cl:0 when it is the default device "
                         "(CLTORCH_TEST_DEVICES=all runs the device tests on every listed device)")
        elif d.platform not in [p for p, _ in cpu_platforms]:
            cpu_platforms.append((d.platform, d))
        else:
            notes.append(f"cl:{d.index} {d.name} ({d.platform}, driver {d.driver_version}): the same platform as "
                         "a pass below (CLTORCH_PLATFORM selects platforms by name)")
    for name, platform, reason in devices.unusable_devices():
        notes.append(f"{name} ({platform}): left out, its OpenCL compiler cannot build a kernel: {reason}")
    for name, platform in devices.simulators():
        notes.append(f"{name} ({platform}): a simulator, no pass of its own; pass 1 runs the Oclgrind checks "
                     "(tests/test_kernel_configs.py)")
    passes = []
    for i, (platform, d) in enumerate(cpu_platforms):
        what = f"{platform}: {d.name}, driver {d.driver_version}"
        if i == 0:
            passes.append((f"{what} (default device order; with the Oclgrind checks)", None))
        else:
            passes.append((what, "^" + re.escape(platform) + "$"))
    if not cpu_platforms:
        title = "default device order (no OpenCL CPU device: arithmetic on cpu tensors raises)" if listed else None
        passes = [(title, None)] if title else []
    return passes, notes


def _run(args, env):
    """Run pytest, echoing its output; returns (exit status, its last non-empty line, seconds)."""
    t0 = time.time()
    p = subprocess.Popen([sys.executable, "-m", "pytest", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    tail = b""
    while True:
        chunk = os.read(p.stdout.fileno(), 65536)
        if not chunk:
            break
        sys.stdout.buffer.write(chunk)
        sys.stdout.flush()
        tail = (tail + chunk)[-4096:]
    rc = p.wait()
    lines = [ln.strip("= ") for ln in tail.decode(errors="replace").splitlines() if ln.strip()]
    # pytest's summary line ("5564 passed, 71 skipped ... in 3002.31s"), not what a process printed after it
    summary = [ln for ln in lines if _SUMMARY.search(ln)]
    return rc, (summary or lines or [""])[-1], time.time() - t0


_SUMMARY = re.compile(r"\b(passed|failed|errors?|skipped|deselected|no tests ran)\b.* in [0-9.]+s")


def _fmt(seconds):
    m, s = divmod(int(round(seconds)), 60)
    return f"{m} min {s:02d} s"


def main(argv):
    args = argv or ["-q", "tests"]
    # the children find the drivers themselves (cltorch registers pip's drivers per process) and get their
    # platform only from this runner
    env = {k: v for k, v in os.environ.items() if k not in ("OCL_ICD_VENDORS", "CLTORCH_PLATFORM")}
    os.environ.pop("CLTORCH_PLATFORM", None)
    passes, notes = _plan()
    if not passes:
        from cltorch.backend.runtime import install_hint
        print(f"test matrix: no OpenCL device. {install_hint()}")
        return 1
    print(f"test matrix: {len(passes)} pass{'es' if len(passes) != 1 else ''} of pytest {' '.join(args)}")
    for i, (title, platform) in enumerate(passes, 1):
        print(f"  pass {i}: {title}" + (f"  [CLTORCH_PLATFORM={platform}]" if platform else ""))
    for note in notes:
        print(f"  no pass: {note}")
    sys.stdout.flush()
    results = []
    for i, (title, platform) in enumerate(passes, 1):
        print(f"\n=== test matrix pass {i}: {title}", flush=True)
        penv = dict(env, CLTORCH_PLATFORM=platform) if platform else env
        results.append(_run(args, penv))
    print("\ntest matrix summary:")
    for i, ((title, _), (rc, last, secs)) in enumerate(zip(passes, results), 1):
        print(f"  pass {i} ({title.split(' (')[0]}): {last or f'exit {rc}'}; {_fmt(secs)} in all")
    print(f"  total {_fmt(sum(r[2] for r in results))}")
    return next((rc for rc, _, _ in results if rc), 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
