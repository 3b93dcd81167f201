"""Where the kernel templates, the device profiles and the caches live.

``cl_kernels/`` and ``devices/`` sit at the top of the source tree and are installed as package data
(``cltorch/cl_kernels``, ``cltorch/devices``), so both an editable and a plain install find them.
"""
import os
from pathlib import Path

_pkg = Path(__file__).resolve().parent.parent


def _find(name):
    for cand in (_pkg / name, _pkg.parent / name):
        if cand.is_dir():
            return cand
    raise FileNotFoundError(f"cltorch: cannot find its '{name}' folder next to {_pkg}; reinstall the package")


def kernels_dir():
    """The folder of the Mako kernel templates."""
    return _find("cl_kernels")


def profiles_dir():
    """The folder of the shipped device profiles (*.toml)."""
    return _find("devices")


def cache_dir():
    """Our on-disk kernel binary cache; ``CLTORCH_CACHE_DIR`` overrides the platformdirs default."""
    env = os.environ.get("CLTORCH_CACHE_DIR")
    if env:
        return Path(env)
    import platformdirs
    return Path(platformdirs.user_cache_dir("cltorch")) / "kernels"


def config_dir():
    """Where ``cltorch probe --tune`` writes tuned profiles; ``CLTORCH_CONFIG_DIR`` overrides it."""
    env = os.environ.get("CLTORCH_CONFIG_DIR")
    if env:
        return Path(env)
    import platformdirs
    return Path(platformdirs.user_config_dir("cltorch"))
