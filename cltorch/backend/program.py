"""Kernel programs: Mako rendering, building, and the in-memory and on-disk caches.

A program is rendered from a template in ``cl_kernels/`` with a few parameters (expression, dtypes,
rank, layout class; never shapes). Built programs are memoised per device in this process, and their
binaries are kept on disk under :func:`cltorch.backend.paths.cache_dir`, keyed by the SHA-256 of the
source, the build options, the device name and the driver version, so a second process compiles
nothing. A cache file carries a checksum of its payload: a truncated or corrupted file is detected,
removed and rebuilt. Files are written to a temporary name and renamed, so concurrent processes that
build the same program never see a half-written file.
"""
import atexit
import hashlib
import os
import struct
import tempfile
import threading
import warnings
from multiprocessing import parent_process
from pathlib import Path

from mako.lookup import TemplateLookup

from .forked import FORKED
from .paths import cache_dir, kernels_dir

__all__ = ["KernelBuildError", "render", "build_program", "save_binaries", "stats", "reset_stats"]

_STATS = {"builds": 0, "disk_hits": 0, "memory_hits": 0, "renders": 0}
# Intel's CPU runtime logs "Device build started ... Reload Program Binary Object." for every build, from a binary
# too, and pyopencl turns any non-empty log into a warning that only says to set PYOPENCL_COMPILER_OUTPUT=1 to see
# it: every run on that runtime would print it. That line is dropped around our own builds (a filter set once at
# import would not survive code that restores the warning filters, as pytest does after each test); a failed build
# still raises KernelBuildError with its log, and PYOPENCL_COMPILER_OUTPUT=1 still shows each log.
_COMPILER_NOTE = "Non-empty compiler output encountered"


def _built(prg, **kw):
    """``prg.build(**kw)`` without pyopencl's warning that a build log is not empty."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_COMPILER_NOTE)
        return prg.build(**kw)

_lookup = None
_lock = threading.RLock()
_MAGIC = b"CLTK1\0"


class KernelBuildError(RuntimeError):
    """An OpenCL program failed to build. ``.log`` is the build log, ``.template`` the template name."""

    def __init__(self, template, device, log, source):
        self.template, self.log, self.source = template, log, source
        numbered = "\n".join(f"{i + 1:4d}  {line}" for i, line in enumerate(source.splitlines()))
        super().__init__(f"OpenCL build of kernel template '{template}' failed on {device}:\n"
                         f"--- build log ---\n{log}\n--- kernel source ---\n{numbered}")


def stats():
    """Counters since import: ``builds`` (programs compiled from source), ``disk_hits`` (programs loaded
    from our binary cache), ``memory_hits`` (programs found in this process) and ``renders``."""
    return dict(_STATS)


def reset_stats():
    for k in _STATS:
        _STATS[k] = 0


def _get_lookup():
    global _lookup
    if _lookup is None:
        _lookup = TemplateLookup(directories=[str(kernels_dir())], strict_undefined=True)
    return _lookup


_render_cache = {}


def render(template, **params):
    """The OpenCL source of ``template`` (a file name in cl_kernels/) rendered with ``params``."""
    key = (template, tuple(sorted((k, _hashable(v)) for k, v in params.items())))
    src = _render_cache.get(key)
    if src is None:
        _STATS["renders"] += 1
        src = _get_lookup().get_template(template).render(**params)
        _render_cache[key] = src
    return src


def _hashable(v):
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(_hashable(x) for x in v)
    return v


def _disk_key(source, options, info):
    h = hashlib.sha256()
    for part in (source, " ".join(options), info.name, info.driver_version, info.platform, info.opencl_version):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def _read_binary(path):
    """The payload of a cache file, or None if it is missing, truncated or corrupted (then it is removed)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    head = len(_MAGIC) + 8 + 32
    if len(data) >= head and data.startswith(_MAGIC):
        (n,) = struct.unpack("<Q", data[len(_MAGIC):len(_MAGIC) + 8])
        digest = data[len(_MAGIC) + 8:head]
        payload = data[head:]
        if len(payload) == n and hashlib.sha256(payload).digest() == digest:
            return payload
    try:
        path.unlink()
    except OSError:
        pass
    return None


def _write_binary(path, payload):
    path.parent.mkdir(parents=True, exist_ok=True)
    blob = _MAGIC + struct.pack("<Q", len(payload)) + hashlib.sha256(payload).digest() + payload
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def build_program(ctx, info, source, options=(), template="<source>"):
    """Build ``source`` for one device, using our binary cache on disk; returns a pyopencl Program.

    Raises KernelBuildError with the build log and the numbered source when the compiler fails.
    """
    import pyopencl as cl
    dev = info.cl_device
    key = _disk_key(source, options, info)
    path = Path(cache_dir()) / f"{key}.bin"
    use_disk = os.environ.get("CLTORCH_NO_DISK_CACHE") != "1"
    if use_disk:
        payload = _read_binary(path)
        if payload is not None:
            try:
                prg = _built(cl.Program(ctx, [dev], [payload]), options=list(options))
                _STATS["disk_hits"] += 1
                return prg
            except cl.Error:
                try:
                    path.unlink()
                except OSError:
                    pass
    prg = cl.Program(ctx, source)
    try:
        _built(prg, options=list(options), devices=[dev])
    except cl.RuntimeError as e:
        try:
            log = prg.get_build_info(dev, cl.program_build_info.LOG)
        except Exception:
            log = str(e)
        raise KernelBuildError(template, info.name, log or str(e), source) from None
    _STATS["builds"] += 1
    if use_disk:
        with _lock:
            if not _at_exit[0]:
                atexit.register(save_binaries)
                _at_exit[0] = True
            _pending[path] = (prg, os.getpid())
        if parent_process() is not None:
            # A process that multiprocessing started (a DataLoader or pool worker) leaves through os._exit, or is
            # terminated by its parent: atexit never runs there, so it writes each binary when it builds it.
            save_binaries(quiet=True)
    return prg


_at_exit = [False]   # the exit handler is registered


_pending = {}   # cache path -> (program built from source in this process, pid), written by save_binaries


def save_binaries(quiet=False):
    """Write the binaries of the programs this process compiled to the disk cache; runs at exit.

    Asking PoCL for a program's binary compiles every kernel in it to machine code (measured on the digits
    example: 22 s for its 22 programs, against 12 s to build them and 9 s to compile the kernels its first step
    launches), so it is not done on the first training step's path but once, when the process ends. A process
    killed before then simply compiles again next time. Returns the number of programs written. A forked child
    (``forked``) writes nothing and drops nothing: its programs are the parent's.
    """
    if FORKED[0]:
        return 0
    import pyopencl as cl
    with _lock:
        todo = [(path, prg) for path, (prg, pid) in _pending.items() if pid == os.getpid()]  # never a forked child
        _pending.clear()
    if len(todo) > 3 and not quiet:
        import sys
        print(f"cltorch: saving {len(todo)} newly compiled kernel programs to {cache_dir()} (once per machine)",
              file=sys.stderr, flush=True)
    written = 0
    for path, prg in todo:
        try:
            binaries = prg.get_info(cl.program_info.BINARIES)
        except cl.Error:
            continue
        if binaries and binaries[0]:
            _write_binary(path, bytes(binaries[0]))
            written += 1
    return written
