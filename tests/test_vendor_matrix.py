"""The vendor matrix's controls: CLTORCH_PLATFORM (which platform is 'cl', 'cl:0' and 'cpu'), profile matching by
type/platform/vendor/name with its reasons, CLTORCH_PROFILE_ONLY, and what ``cltorch devices`` says about them."""
import json
import os
import subprocess
import sys

import pytest

from cltorch import backend
from cltorch.backend.devices import device_info_from_props
from cltorch.backend.profile import load_profile, match_reasons
from conftest import child_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHILD = ("from cltorch import backend; ds = backend.list_devices(); "
         "print(ds[0].platform); print(ds[backend.cpu_index()].platform); print(ds[backend.default_index()].platform)")


def _py(code, **env):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_env(**env),
                          timeout=300)


def _platforms():
    from cltorch.backend.devices import simulators
    return sorted({d.platform for d in backend.list_devices()} | {p for _, p in simulators()})


@pytest.mark.parametrize("want", ["Intel", "Oclgrind", "Portable"])
def test_platform_preference_moves_cl0_cl_and_cpu(want):
    have = [p for p in _platforms() if want.lower() in p.lower()]
    if not have:
        pytest.skip(f"no usable {want} platform here (`cltorch devices` lists what it left out and why; Oclgrind: "
                    "pip install 'cltorch[vendors]')")
    r = _py(CHILD, CLTORCH_PLATFORM=want)
    assert r.returncode == 0, r.stderr
    first, cpu, default = r.stdout.split("\n")[:3]
    assert want.lower() in first.lower() and want.lower() in cpu.lower() and want.lower() in default.lower()


def test_platform_preference_matching_nothing_raises_naming_the_platforms():
    r = _py(CHILD, CLTORCH_PLATFORM="NoSuchVendor")
    assert r.returncode != 0
    assert "CLTORCH_PLATFORM='NoSuchVendor' matches no usable OpenCL platform" in r.stderr
    for d in backend.list_devices():
        assert repr(d.platform) in r.stderr


def test_match_keys_and_reasons():
    gpu = device_info_from_props(0, dict(name="NVIDIA GeForce RTX 3080", vendor="NVIDIA Corporation",
                                         vendor_id=0x10DE, is_cpu=False, platform="NVIDIA CUDA"))
    assert match_reasons({"class": "nvidia", "type": "gpu"}, gpu) == ["class = nvidia", "type = gpu"]
    assert match_reasons({"type": "cpu"}, gpu) is None
    assert match_reasons({"platform": "CUDA", "vendor": "nvidia", "name": "RTX"}, gpu) == \
        ["platform ~ 'CUDA'", "vendor ~ 'nvidia'", "name ~ 'RTX'"]
    assert match_reasons({"vendor": "AMD"}, gpu) is None
    with pytest.raises(ValueError, match="unknown keys.*'platfrom'"):
        match_reasons({"platfrom": "x"}, gpu)
    p = load_profile(gpu)
    assert [os.path.basename(s) for s in p.sources] == ["default.toml", "gpu.toml", "nvidia.toml"]
    assert p.reasons[0].startswith("the defaults") and p.reasons[2] == "class = nvidia, type = gpu"


def test_profile_only_needs_files(monkeypatch, tmp_path):
    info = backend.list_devices()[0]
    monkeypatch.setenv("CLTORCH_PROFILE_ONLY", "1")
    monkeypatch.delenv("CLTORCH_PROFILE", raising=False)
    with pytest.raises(ValueError, match="CLTORCH_PROFILE_ONLY=1 needs CLTORCH_PROFILE"):
        load_profile(info)
    f = tmp_path / "mine.toml"
    f.write_text("[elementwise]\nlocal_size = 3\n")
    monkeypatch.setenv("CLTORCH_PROFILE", str(f))
    p = load_profile(info)
    assert [os.path.basename(s) for s in p.sources] == ["default.toml", "mine.toml"]
    assert p.get_value("elementwise", "local_size") == 3 and p.get_value("gemm", "design") == "gpu"   # default's
    monkeypatch.setenv("CLTORCH_PROFILE", str(tmp_path / "missing.toml"))
    with pytest.raises(FileNotFoundError, match="missing.toml"):
        load_profile(info)


def test_cltorch_devices_names_profile_files_and_why():
    r = subprocess.run([sys.executable, "-m", "cltorch", "devices", "--json"], capture_output=True, text=True,
                       timeout=300, cwd=ROOT, env=child_env())
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    for row in rows:
        files = [os.path.basename(f["file"]) for f in row["profile_files"]]
        assert files[0] == "default.toml" and all(f["why"] for f in row["profile_files"])
        if "portable computing language" in row["platform"].lower():
            assert "pocl-cpu.toml" in files
        if row["platform"].startswith("Intel(R) OpenCL") and row["class"] == "cpu":
            assert "intel-cpu.toml" in files and "pocl-cpu.toml" not in files
        if "oclgrind" in row["platform"].lower():
            assert files[-1] == "oclgrind.toml" and "pocl-cpu.toml" not in files
    r = subprocess.run([sys.executable, "-m", "cltorch", "devices"], capture_output=True, text=True, timeout=300,
                       cwd=ROOT, env=child_env())
    assert "Device profiles" in r.stdout and "default.toml: the defaults" in r.stdout
