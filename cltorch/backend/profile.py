"""Device profiles: tuning values and quirks from ``devices/*.toml``.

A profile file has a ``[match]`` table and any number of value tables::

    [match]
    class = "cpu"            # optional: cpu, nvidia, amd, intel, apple
    name = "EPYC|Xeon"       # optional: a regular expression searched in the device name
    priority = 10            # optional: ties among equal specificity

    [elementwise]
    local_size = 256

Profiles are merged in order of specificity: ``default.toml`` (no match table), then files matching
the class, then files matching the device name. A tuned profile written by ``cltorch probe --tune``
into the user's config dir is merged last, so it is preferred. ``CLTORCH_PROFILE`` names one more
profile file to merge on top (used to run a side under a deliberately different profile).
"""
import copy
import os
import re
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from .paths import config_dir, profiles_dir

__all__ = ["Profile", "load_profile"]


class Profile(dict):
    """A merged profile: a dict of tables, plus ``sources`` (the files that matched, in merge order)."""

    def __init__(self, data, sources):
        super().__init__(data)
        self.sources = sources

    def get_value(self, table, key, default=None):
        return self.get(table, {}).get(key, default)

    @property
    def name(self):
        return "+".join(Path(s).stem for s in self.sources) or "none"


def _merge(dst, src):
    for k, v in src.items():
        if k == "match":
            continue
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            _merge(dst[k], v)
        else:
            dst[k] = copy.deepcopy(v)


def _read(path):
    with open(path, "rb") as f:
        return tomllib.load(f)


def _specificity(match, info):
    """None when the file does not match; else (level, priority) where level 0=default, 1=class, 2=name."""
    if not match:
        return (0, 0)
    level = 0
    if "class" in match:
        if match["class"] != info.cls:
            return None
        level = 1
    if "name" in match:
        if not re.search(match["name"], info.name, re.I):
            return None
        level = 2
    if "platform" in match:
        if not re.search(match["platform"], info.platform, re.I):
            return None
        level = max(level, 1)
    return (level, match.get("priority", 0))


def tuned_profile_path(info):
    safe = re.sub(r"[^A-Za-z0-9]+", "-", info.name).strip("-").lower()
    return config_dir() / f"tuned-{safe}.toml"


def load_profile(info, extra_dirs=()):
    """The merged profile for a DeviceInfo (see the module docstring for the rule)."""
    cands = []
    for d in (profiles_dir(), *extra_dirs):
        for p in sorted(Path(d).glob("*.toml")):
            data = _read(p)
            spec = _specificity(data.get("match"), info)
            if spec is not None:
                cands.append((spec, str(p), data))
    cands.sort(key=lambda c: c[0])
    tuned = tuned_profile_path(info)
    if tuned.is_file():
        cands.append(((9, 0), str(tuned), _read(tuned)))
    env = os.environ.get("CLTORCH_PROFILE")
    if env:
        cands.append(((10, 0), env, _read(env)))
    merged, sources = {}, []
    for _, path, data in cands:
        _merge(merged, data)
        sources.append(path)
    return Profile(merged, sources)
