"""Device profiles: tuning values and quirks from ``devices/*.toml``.

A profile file has a ``[match]`` table and any number of value tables::

    [match]
    class = "cpu"            # optional: cpu, nvidia, amd, intel, apple, gpu (the vendor class, devices.classify)
    type = "gpu"             # optional: "cpu" or "gpu" (the OpenCL device type)
    platform = "PoCL|Portable Computing Language"   # optional: a regular expression searched in the platform name
    vendor = "NVIDIA"        # optional: a regular expression searched in the device's vendor string
    name = "EPYC|Xeon"       # optional: a regular expression searched in the device name
    priority = 10            # optional: ties among equal specificity

    [elementwise]
    local_size = 256

Every key given must match. Profiles are merged in order of specificity: ``default.toml`` (no match table),
then files matching by class, device type, platform or vendor (more keys matched: later), then files matching
the device name. So a device gets the generic table for its kind (``cpu.toml``), then its platform's
(``pocl-cpu.toml`` for PoCL, ``intel-cpu.toml`` for Intel's CPU runtime, ``nvidia.toml`` ...), then its
device's. A tuned profile written by ``cltorch probe --tune`` into the user's config dir is merged next, so
it is preferred. ``CLTORCH_PROFILE`` names more profile files (separated by ``os.pathsep``) to merge on top
(used to run a side under a deliberately different profile). With ``CLTORCH_PROFILE_ONLY=1`` the matched
and tuned files are skipped: the profile is ``default.toml`` plus the ``CLTORCH_PROFILE`` files alone, which
is how the tests run a GPU vendor's configuration on a CPU device (``tests/test_kernel_configs.py``).
:attr:`Profile.reasons` says why each file was merged.
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

__all__ = ["Profile", "load_profile", "match_reasons"]


class Profile(dict):
    """A merged profile: a dict of tables, plus ``sources`` (the files that matched, in merge order) and
    ``reasons`` (for each source, why it was merged: the match keys it met, or the environment variable)."""

    def __init__(self, data, sources, reasons=None):
        super().__init__(data)
        self.sources = sources
        self.reasons = list(reasons) if reasons is not None else [""] * len(sources)

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


_REGEX_KEYS = (("platform", "platform"), ("vendor", "vendor"), ("name", "name"))


def match_reasons(match, info):
    """None when a ``[match]`` table does not match the DeviceInfo, else the list of what matched
    (``["class = cpu", "platform ~ 'Portable Computing Language'"]``; empty for a file without a match table)."""
    why = []
    if not match:
        return why
    unknown = set(match) - {"class", "type", "platform", "vendor", "name", "priority"}
    if unknown:
        raise ValueError(f"device profile [match] table: unknown keys {sorted(unknown)}; "
                         "known: class, type, platform, vendor, name, priority")
    if "class" in match:
        if match["class"] != info.cls:
            return None
        why.append(f"class = {info.cls}")
    if "type" in match:
        kind = "gpu" if info.is_gpu else "cpu"
        if match["type"] != kind:
            return None
        why.append(f"type = {kind}")
    for key, attr in _REGEX_KEYS:
        if key in match:
            if not re.search(match[key], getattr(info, attr), re.I):
                return None
            why.append(f"{key} ~ '{match[key]}'")
    return why


def _specificity(match, info):
    """None when the file does not match; else (level, keys, priority) where level 0 = default, 1 = class,
    type, platform or vendor, 2 = device name; ``keys`` counts the match keys met (more: merged later)."""
    why = match_reasons(match, info)
    if why is None:
        return None
    if not match:
        return (0, 0, 0)
    level = 2 if "name" in match else 1
    return (level, len(why), match.get("priority", 0))


def tuned_profile_path(info):
    safe = re.sub(r"[^A-Za-z0-9]+", "-", info.name).strip("-").lower()
    return config_dir() / f"tuned-{safe}.toml"


def load_profile(info, extra_dirs=()):
    """The merged profile for a DeviceInfo (see the module docstring for the rule). Raises ValueError for a
    ``[match]`` table with unknown keys, FileNotFoundError for a missing ``CLTORCH_PROFILE`` file."""
    only = os.environ.get("CLTORCH_PROFILE_ONLY") == "1"
    env = [e for e in os.environ.get("CLTORCH_PROFILE", "").split(os.pathsep) if e]
    if only and not env:
        raise ValueError("CLTORCH_PROFILE_ONLY=1 needs CLTORCH_PROFILE to name the profile file(s) to use")
    cands = []
    for d in (profiles_dir(), *extra_dirs):
        for p in sorted(Path(d).glob("*.toml")):
            data = _read(p)
            match = data.get("match")
            if only and match:
                continue
            spec = _specificity(match, info)
            if spec is not None:
                why = match_reasons(match, info)
                cands.append((spec, str(p), data, ", ".join(why) if why else "the defaults (no [match] table)"))
    cands.sort(key=lambda c: c[0])
    tuned = tuned_profile_path(info)
    if tuned.is_file() and not only:
        cands.append(((9, 0, 0), str(tuned), _read(tuned), "tuned for this device by `cltorch probe --tune`"))
    merged_already = {os.path.realpath(c[1]) for c in cands}
    for e in env:
        if not os.path.isfile(e):
            raise FileNotFoundError(f"CLTORCH_PROFILE names {e!r}, which is not a file")
        if only and os.path.realpath(e) in merged_already:
            continue             # default.toml named again: merging it twice would undo the files between
        cands.append(((10, 0, 0), e, _read(e), "CLTORCH_PROFILE" + (" (CLTORCH_PROFILE_ONLY=1)" if only else "")))
    merged, sources, reasons = {}, [], []
    for _, path, data, why in cands:
        _merge(merged, data)
        sources.append(path)
        reasons.append(why)
    return Profile(merged, sources, reasons)
