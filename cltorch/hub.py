"""``cltorch.hub``: loading models from a local hub directory and checkpoints from URLs, as ``torch.hub``.

Provided: ``load``/``list``/``help`` with ``source="local"`` (a directory holding ``hubconf.py``: its entry points
are plain Python callables), ``download_url_to_file`` and ``load_state_dict_from_url`` (urllib; any URL scheme it
handles, ``file://`` included; files are cached in ``<hub dir>/checkpoints``, and ``check_hash`` compares the
SHA-256 prefix in the file name as PyTorch does), ``get_dir``/``set_dir``.

Not provided: ``source="github"`` (fetching and importing a GitHub repository's code) raises NotImplementedError;
clone the repository and pass its path with ``source="local"``.
"""
import hashlib
import importlib.util
import os
import re
import shutil
import sys
import tempfile
import urllib.parse
import urllib.request

__all__ = ["load", "list", "help", "download_url_to_file", "load_state_dict_from_url", "get_dir", "set_dir"]

_hub_dir = [None]
_HASH = re.compile(r"-([a-f0-9]*)\.")


def get_dir():
    """The hub directory: ``set_dir``'s value, else ``$TORCH_HOME/hub``, else ``~/.cache/torch/hub`` (PyTorch's
    cache, so checkpoints downloaded by either are shared)."""
    if _hub_dir[0] is not None:
        return _hub_dir[0]
    home = os.environ.get("TORCH_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "torch")
    return os.path.join(home, "hub")


def set_dir(d):
    """Sets the hub directory."""
    _hub_dir[0] = os.path.expanduser(str(d))


def _github(what):
    raise NotImplementedError(f"cltorch.hub.{what} from GitHub is not provided (it fetches and runs a repository's "
                              "code); clone the repository and call it with source='local' and the clone's path")


def _hubconf(repo_dir):
    path = os.path.join(repo_dir, "hubconf.py")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} does not exist: a local hub directory needs a hubconf.py")
    spec = importlib.util.spec_from_file_location("hubconf", path)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, repo_dir)
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(repo_dir)
    return mod


def _entry(mod, model):
    fn = getattr(mod, model, None)
    if fn is None or not callable(fn):
        raise RuntimeError(f"Cannot find callable {model} in hubconf")
    return fn


def list(github, force_reload=False, skip_validation=False, trust_repo=None, verbose=True, source="github"):  # noqa: A001
    """The public callable entry points of ``<github>/hubconf.py`` (``source="local"`` only)."""
    if source != "local":
        _github("list")
    mod = _hubconf(github)
    return [n for n in dir(mod) if callable(getattr(mod, n)) and not n.startswith("_")]


def help(github, model, force_reload=False, skip_validation=False, trust_repo=None, source="github"):  # noqa: A001
    """The docstring of entry point ``model`` (``source="local"`` only)."""
    if source != "local":
        _github("help")
    return _entry(_hubconf(github), model).__doc__


def load(repo_or_dir, model, *args, source="github", trust_repo=None, force_reload=False, verbose=True,
         skip_validation=False, **kwargs):
    """Calls entry point ``model`` of ``repo_or_dir/hubconf.py`` with ``*args, **kwargs`` (``source="local"``).
    Raises ValueError for an unknown ``source`` and NotImplementedError for ``"github"``."""
    if source not in ("github", "local"):
        raise ValueError(f'Unknown source: "{source}". Allowed values: "github" | "local".')
    if source == "github":
        _github("load")
    return _entry(_hubconf(repo_or_dir), model)(*args, **kwargs)


def download_url_to_file(url, dst, hash_prefix=None, progress=True):
    """Downloads ``url`` to ``dst`` (through a temporary file renamed at the end). With ``hash_prefix``, raises
    RuntimeError when the SHA-256 of the content does not start with it."""
    dst = os.path.expanduser(str(dst))
    d = os.path.dirname(os.path.abspath(dst))
    sha = hashlib.sha256()
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".download-")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url) as src:
            while True:
                chunk = src.read(1 << 20)
                if not chunk:
                    break
                out.write(chunk)
                sha.update(chunk)
        if hash_prefix is not None and not sha.hexdigest().startswith(hash_prefix):
            raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got "{sha.hexdigest()}")')
        shutil.move(tmp, dst)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def load_state_dict_from_url(url, model_dir=None, map_location=None, progress=True, check_hash=False,
                             file_name=None, weights_only=True):
    """Downloads ``url`` into ``model_dir`` (default ``<hub dir>/checkpoints``) unless the file is there, and loads
    it with ``cltorch.load``. ``check_hash``: the file name's ``-<hex>.`` part must prefix the content's SHA-256."""
    from .serialization import load as _load
    model_dir = model_dir or os.path.join(get_dir(), "checkpoints")
    os.makedirs(model_dir, exist_ok=True)
    name = file_name or os.path.basename(urllib.parse.urlparse(url).path)
    path = os.path.join(model_dir, name)
    if not os.path.exists(path):
        prefix = None
        if check_hash:
            m = _HASH.search(name)
            prefix = m.group(1) if m else None
        download_url_to_file(url, path, prefix, progress=progress)
    return _load(path, map_location=map_location, weights_only=weights_only)
