"""The console script: ``cltorch devices`` and ``cltorch probe`` (README's device probe), run as a user runs them."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*args, env=None):
    env = dict(os.environ, **(env or {}))
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "cltorch", *args], capture_output=True, text=True, timeout=600,
                          env=env, cwd=ROOT)


def test_devices_lists_every_device_with_its_profile():
    import cltorch
    r = _run("devices")
    assert r.returncode == 0, r.stderr
    for i in range(cltorch.cl.device_count()):
        assert f"cl:{i}" in r.stdout
    assert "profile" in r.stdout.lower() and "fp64" in r.stdout.lower()


def test_probe_quick_passes_and_says_so():
    r = _run("probe", "--quick", "--json")
    assert r.returncode == 0, r.stderr
    entries = json.loads(r.stdout)
    assert entries and all(c["ok"] for e in entries for c in e["checks"])
    assert all(e["bench"]["launch_latency_us"] > 0 for e in entries)
    r = _run("probe", "--quick", "--device", "cl:0")
    assert r.returncode == 0, r.stderr
    n = sum(len(e["checks"]) for e in entries if e["device"] == "cl:0")
    assert r.stdout.strip().splitlines()[-1] == f"{n} of {n} checks passed on 1 device(s)"
