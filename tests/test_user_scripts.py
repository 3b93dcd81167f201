"""Scripts written the way a PyTorch user writes them, run as a user runs them.

Each file in ``tests/user_scripts/`` is a small training or utility script as found in public PyTorch code (no
``if __name__ == "__main__":`` guard, ``import cltorch.backends.cudnn as cudnn``, whole-model ``save``,
in-place activations, LSTM language models, an LBFGS closure, Hogwild workers, ...), with only its imports
changed from ``torch`` to ``cltorch``. Each runs in its own interpreter, in an empty working directory, and
asserts on what it computes; it must exit 0. A script that needs an optional package names it in a line
``# requires: NAME`` and is skipped where that package is missing.
"""
import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

import cltorch

SCRIPTS = sorted((pathlib.Path(__file__).parent / "user_scripts").glob("*.py"))
ROOT = pathlib.Path(__file__).resolve().parents[1]


def _requirements(path):
    return re.findall(r"^# requires: (\S+)", path.read_text(), flags=re.M)


# (script, default device's platform) pairs with a known, recorded discrepancy: xfail, not skip, so a fix shows
KNOWN = {}   # (mobilenetv2_cifar on Intel's runtime passes since the norm kernels sum rows in chunks: issue 17)


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_user_script(script, tmp_path, request):
    platform = cltorch.cl.get_device_properties(0).platform.lower() if cltorch.cl.device_count() else ""
    for (stem, plat), why in KNOWN.items():
        if script.stem == stem and plat in platform:
            request.applymarker(pytest.mark.xfail(reason=why, strict=False))
    for name in _requirements(script):
        if importlib.util.find_spec(name) is None:
            pytest.skip(f"{script.name} needs the optional package {name!r}")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, (f"{script.name} exited {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}"
                                  f"\n--- stderr\n{proc.stderr[-4000:]}")
