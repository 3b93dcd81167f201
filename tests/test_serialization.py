"""cltorch.save / cltorch.load: PyTorch's zip checkpoint format, allowlisted unpickling, atomic writes.

Golden files in tests/golden/ were written once by tests/golden/make_golden_pt.py with torch 2.13; these
tests read them without torch. The test that torch reads our files runs when torch is importable here, or
when CLTORCH_TORCH_PYTHON names a Python that has torch.
"""
import collections
import io
import json
import os
import pickle
import random
import signal
import struct
import subprocess
import sys
import time
import zipfile

import numpy as np
import pytest

import cltorch
from cltorch import serialization as S
from cltorch import _dtype as D
from cltorch._device import CPU, canonical
from cltorch._storage import Storage
from cltorch._tensor import Tensor

HERE = os.path.dirname(os.path.abspath(__file__))
GOLD = os.path.join(HERE, "golden")
REPO = os.path.dirname(HERE)


# ------------------------------------------------------------------------------------------- helpers
def T(a, device="cpu", requires_grad=False):
    """A tensor with the values of numpy array ``a`` (its own storage)."""
    t = cltorch.from_numpy(np.array(a, copy=True))
    if device != "cpu":
        t = t.to(device)
    return t.requires_grad_() if requires_grad else t


def N(t):
    """A tensor's values as a numpy array (any device)."""
    return t.detach().cpu().numpy()


def lie(storage_values, shape, stride=None, offset=0):
    """A tensor whose metadata claims more than its storage holds (what a corrupt file describes)."""
    st = Storage.from_host(np.asarray(storage_values), CPU)
    return Tensor._make(st, shape, stride, offset)


def _cl_available():
    try:
        return canonical("cl").type == "cl"
    except Exception:
        return False


def _parameter_cls():
    return S._parameter_class()


def assert_tensor(t, ref, dtype=None):
    assert isinstance(t, Tensor)
    ref = np.asarray(ref)
    assert tuple(t.shape) == ref.shape
    if dtype is not None:
        assert t.dtype is dtype
    got = N(t)
    assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
    np.testing.assert_array_equal(got, ref)


# ------------------------------------------------------------------------------- golden (torch-made)
def _check_skeleton(obj, sk, arrays, path, storages):
    if "tensor" in sk:
        ref = arrays[path.lstrip("/")]
        assert isinstance(obj, Tensor), path
        assert obj.dtype.name == sk["dtype"], path
        assert list(obj.shape) == sk["shape"], path
        assert list(obj.stride()) == sk["stride"], path
        assert obj.storage_offset() == sk["offset"], path
        assert obj.requires_grad == sk["requires_grad"], path
        if sk["cls"] == "Parameter" and _parameter_cls() is not None:
            assert isinstance(obj, _parameter_cls()), path
        got = N(obj)
        assert got.dtype == ref.dtype, path
        np.testing.assert_array_equal(got, ref, err_msg=path)
        # tensors that shared a storage in torch share one storage here, and only those
        prev = storages.setdefault(sk["storage"], obj._storage)
        assert prev is obj._storage, path
        return
    if "dict" in sk:
        want = collections.OrderedDict if sk["dict"] == "OrderedDict" else dict
        assert type(obj) is want, path
        assert [k for k, _ in sk["items"]] == list(obj), path
        for (k, s), (k2, v) in zip(sk["items"], obj.items()):
            _check_skeleton(v, s, arrays, f"{path}/{k}", storages)
        for k, v in sk["attrs"].items():
            assert getattr(obj, k) == v, path
        return
    if "size" in sk:
        assert isinstance(obj, tuple) and list(obj) == sk["size"] and type(obj).__name__ == "Size"
        return
    for kind in ("list", "tuple"):
        if kind in sk:
            assert type(obj).__name__ == kind, path
            assert len(obj) == len(sk[kind]), path
            for i, (v, s) in enumerate(zip(obj, sk[kind])):
                _check_skeleton(v, s, arrays, f"{path}/{i}", storages)
            return
    if "torch_dtype" in sk:
        assert obj is getattr(cltorch._dtype, sk["torch_dtype"])
    elif "torch_device" in sk:
        assert str(obj) == sk["torch_device"]
    elif "bytes" in sk:
        assert obj == bytes(sk["bytes"])
    elif "bigint" in sk:
        assert obj == int(sk["bigint"])
    else:
        assert obj == sk["value"] and type(obj) is type(sk["value"]), path


def _golden():
    with open(os.path.join(GOLD, "golden_v1.json")) as f:
        skel = json.load(f)["skeleton"]
    # JSON turns int dict keys (the optimizer's state) into strings: restore them from the file's own keys
    arrays = dict(np.load(os.path.join(GOLD, "golden_v1.npz")))
    return skel, arrays


def _fix_int_keys(sk, obj):
    """JSON made the optimizer state's int keys strings; align the skeleton's keys with ints where the
    loaded dict has int keys that print the same."""
    if isinstance(sk, dict) and "dict" in sk and isinstance(obj, dict):
        keys = list(obj)
        for pair, k in zip(sk["items"], keys):
            if isinstance(k, int) and pair[0] == str(k):
                pair[0] = k
            _fix_int_keys(pair[1], obj[k])
    elif isinstance(sk, dict):
        for kind in ("list", "tuple"):
            if kind in sk and isinstance(obj, (list, tuple)):
                for s, v in zip(sk[kind], obj):
                    _fix_int_keys(s, v)


def test_golden_torch_checkpoint_loads():
    skel, arrays = _golden()
    obj = S.load(os.path.join(GOLD, "golden_v1.pt"))
    _fix_int_keys(skel, obj)
    _check_skeleton(obj, skel, arrays, "", {})
    # spot checks that do not go through the skeleton walker
    assert obj["view_t"]._storage is obj["f32"]._storage
    np.testing.assert_array_equal(N(obj["view_t"]), arrays["f32"].T)
    np.testing.assert_array_equal(N(obj["view_step"]), arrays["f64"][1::2])
    assert obj["scalar0d"].dim() == 0 and N(obj["scalar0d"]) == np.float32(3.25)
    assert obj["module"]._metadata[""]["version"] == 1
    assert obj["optim"]["param_groups"][0]["betas"] == (0.9, 0.99)
    assert obj["module"]["1.num_batches_tracked"].dtype is D.int64
    assert obj["module"]["1.num_batches_tracked"].dim() == 0


def test_golden_loads_with_torch_import_blocked():
    code = (f"import sys; sys.modules['torch'] = None; sys.path.insert(0, {REPO!r}); "
            f"from cltorch import serialization as S; "
            f"o = S.load({os.path.join(GOLD, 'golden_v1.pt')!r}); "
            f"print(sorted(o)[:3], o['i64'].tolist())")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "[-3, -2, -1, 0, 1, 2, 3]" in r.stdout


def test_golden_pickle_protocol_4():
    o = S.load(os.path.join(GOLD, "golden_p4.pt"))
    assert_tensor(o["w"], np.arange(6, dtype=np.float32).reshape(2, 3), D.float32)
    assert o["n"] == [1, "x"]


def test_golden_cuda_location_maps_to_cpu_by_default():
    o = S.load(os.path.join(GOLD, "golden_cuda.pt"))
    assert o["w"].device == CPU
    assert_tensor(o["w"], np.arange(6, dtype=np.float32).reshape(2, 3))
    o = S.load(os.path.join(GOLD, "golden_cuda.pt"), map_location={"cuda:0": "cpu"})
    assert o["w"].device == CPU
    seen = []
    o = S.load(os.path.join(GOLD, "golden_cuda.pt"), map_location=lambda s, loc: seen.append(loc) or s)
    assert seen == ["cuda:0"] and o["w"].device == CPU
    assert_tensor(o["w"], np.arange(6, dtype=np.float32).reshape(2, 3))


@pytest.mark.skipif(not _cl_available(), reason="no OpenCL device")
def test_golden_map_location_to_cl():
    for ml in ("cl", cltorch.device("cl"), {"cuda:0": "cl"}, lambda s, loc: s.to("cl")):
        o = S.load(os.path.join(GOLD, "golden_cuda.pt"), map_location=ml)
        assert o["w"].device.type == "cl", ml
        assert_tensor(o["w"], np.arange(6, dtype=np.float32).reshape(2, 3))


def test_golden_legacy_format_is_refused():
    with pytest.raises(RuntimeError, match="legacy"):
        S.load(os.path.join(GOLD, "golden_legacy.pt"))


# -------------------------------------------------------------------------------------- round trips
def _sample():
    rng = np.random.default_rng(0)
    base = T(rng.standard_normal((4, 5)).astype(np.float32))
    sd = collections.OrderedDict()
    sd["w"] = base
    sd["w_t"] = base.t()                                 # transpose
    sd["w_col"] = base[:, 2]                             # column 2 (offset + stride)
    sd["f64"] = T(rng.standard_normal(3))
    sd["f16"] = T(rng.standard_normal(3).astype(np.float16))
    sd["i64"] = T(np.array([-2 ** 63, 0, 2 ** 63 - 1], dtype=np.int64))
    sd["i32"] = T(np.array([-5, 6], dtype=np.int32))
    sd["i16"] = T(np.array([-5, 6], dtype=np.int16))
    sd["i8"] = T(np.array([-128, 127], dtype=np.int8))
    sd["u8"] = T(np.array([0, 255], dtype=np.uint8))
    sd["b"] = T(np.array([True, False, True]))
    sd["s0"] = T(np.float32(2.5))
    sd["e"] = T(np.zeros((0, 3), np.float32))
    sd["rg"] = T(np.ones(2, np.float32), requires_grad=True)
    sd._metadata = collections.OrderedDict([("", {"version": 1})])
    shared = [1, 2]
    return {"sd": sd, "a": shared, "b": shared, "scalars": (None, True, False, 0, -1, 255, 256, 65536, -2 ** 31,
            2 ** 31, 2 ** 100, -2 ** 100, 1.5, float("inf"), -0.0, "", "ünï", b"\x00\xff", 1 + 2j, {3, 4}),
            "dtype": D.float16, "device": cltorch.device("cpu"), 7: "int key", "deep": [[[{"x": (T([1]),)}]]],
            "size": cltorch.Size([2, 3]), "counter": collections.Counter("aab")}


def _check_sample(o, ref):
    for k, t in ref["sd"].items():
        assert_tensor(o["sd"][k], N(t), t.dtype)
        assert o["sd"][k].stride() == t.stride() and o["sd"][k].storage_offset() == t.storage_offset()
        assert o["sd"][k].requires_grad == t.requires_grad
    assert type(o["sd"]) is collections.OrderedDict and o["sd"]._metadata == ref["sd"]._metadata
    assert list(o["sd"]) == list(ref["sd"])
    # the view relationship is kept: one storage for w, w_t, w_col
    assert o["sd"]["w_t"]._storage is o["sd"]["w"]._storage is o["sd"]["w_col"]._storage
    assert o["sd"]["f64"]._storage is not o["sd"]["w"]._storage
    assert o["a"] is o["b"] and o["a"] == [1, 2]
    assert o["scalars"] == ref["scalars"]
    assert [type(x) for x in o["scalars"]] == [type(x) for x in ref["scalars"]]
    assert str(o["scalars"][14]) == "-0.0"
    assert o["dtype"] is D.float16 and o["device"] == CPU and o[7] == "int key"
    assert_tensor(o["deep"][0][0][0]["x"][0], np.array([1]))
    assert type(o["size"]) is cltorch.Size and o["size"] == (2, 3)
    assert type(o["counter"]) is collections.Counter and o["counter"] == {"a": 2, "b": 1}


def test_roundtrip_path(tmp_path):
    ref = _sample()
    p = tmp_path / "x.pt"
    S.save(ref, p)
    _check_sample(S.load(p), ref)
    _check_sample(S.load(str(p), mmap=True), ref)
    _check_sample(S.load(p, weights_only=False), ref)


def test_roundtrip_file_objects():
    ref = _sample()
    buf = io.BytesIO()
    S.save(ref, buf)
    buf.seek(0)
    _check_sample(S.load(buf), ref)

    class ReadOnly:            # not seekable: read into memory first
        def __init__(self, b):
            self.b = io.BytesIO(b)

        def read(self, n=-1):
            return self.b.read(n)

    _check_sample(S.load(ReadOnly(buf.getvalue())), ref)


def test_view_shares_storage_after_load(tmp_path):
    base = T(np.arange(6, dtype=np.float32))
    v = base.as_strided((2,), (2,), 1)
    S.save([base, v], tmp_path / "v.pt")
    b2, v2 = S.load(tmp_path / "v.pt")
    assert v2.stride() == (2,) and v2.storage_offset() == 1
    b2.add_(10)                          # an in-place change through the base shows in the view
    np.testing.assert_array_equal(N(v2), [11.0, 13.0])


def test_records_are_aligned_and_archive_is_valid_zip(tmp_path):
    p = tmp_path / "a.pt"
    S.save({"x": T(np.arange(7, dtype=np.int8)), "y": T(np.ones(3))}, p)
    raw = p.read_bytes()
    with zipfile.ZipFile(p) as z:
        assert z.testzip() is None
        names = z.namelist()
        assert {"archive/data.pkl", "archive/byteorder", "archive/version", "archive/data/0",
                "archive/data/1"} <= set(names)
        assert z.read("archive/byteorder") == b"little" and z.read("archive/version") == b"3\n"
        for info in z.infolist():
            n, m = struct.unpack("<HH", raw[info.header_offset + 26:info.header_offset + 30])
            assert (info.header_offset + 30 + n + m) % 64 == 0, info.filename
            assert info.compress_type == zipfile.ZIP_STORED
        np.testing.assert_array_equal(np.frombuffer(z.read("archive/data/0"), np.int8), np.arange(7))


def test_zip64_structures(tmp_path, monkeypatch):
    monkeypatch.setattr(S._zip_writer, "_FORCE_ZIP64", True)
    ref = _sample()
    p = tmp_path / "z64.pt"
    S.save(ref, p)
    with zipfile.ZipFile(p) as z:
        assert z.testzip() is None
    monkeypatch.setattr(S._zip_writer, "_FORCE_ZIP64", False)
    _check_sample(S.load(p), ref)


def test_unpicklable_object_raises_before_touching_file(tmp_path):
    p = tmp_path / "keep.pt"
    S.save({"x": T([1.0, 2.0])}, p)
    before = p.read_bytes()
    f = lambda v: v  # noqa: E731
    with pytest.raises(Exception) as want:      # what Python's pickle raises (AttributeError on 3.11)
        pickle.dumps(f, 2)
    with pytest.raises(type(want.value), match="lambda"):
        S.save({"x": T([3.0]), "f": f}, p)
    with pytest.raises(TypeError, match="generator"):
        S.save({"x": (i for i in range(2))}, p)
    assert p.read_bytes() == before
    assert os.listdir(tmp_path) == ["keep.pt"]


def test_failure_while_writing_keeps_old_file(tmp_path, monkeypatch):
    p = tmp_path / "keep.pt"
    S.save({"x": T([1.0, 2.0])}, p)
    before = p.read_bytes()

    def boom(st):
        raise OSError("disk on fire")
    monkeypatch.setattr(S._saving, "_storage_bytes", boom)
    with pytest.raises(OSError, match="disk on fire"):
        S.save({"x": T([3.0])}, p)
    assert p.read_bytes() == before
    assert os.listdir(tmp_path) == ["keep.pt"]      # the temporary file was removed


def test_save_keeps_mode_and_follows_symlink(tmp_path):
    real = tmp_path / "real.pt"
    S.save({"x": T([1.0])}, real)
    os.chmod(real, 0o640)
    link = tmp_path / "link.pt"
    link.symlink_to(real)
    S.save({"x": T([2.0])}, link)
    assert link.is_symlink()
    assert (os.stat(real).st_mode & 0o777) == 0o640
    assert_tensor(S.load(real)["x"], np.array([2.0]))


_KILL_SCRIPT = r"""
import sys
sys.path.insert(0, {repo!r})
import numpy as np
from cltorch import serialization as S
from cltorch._storage import Storage
from cltorch._tensor import Tensor
from cltorch._device import CPU
big = Tensor._make(Storage.from_host(np.full(48 << 20, 7.0, np.float32), CPU), (48 << 20,))  # no OpenCL
print("ready", flush=True)
while True:
    S.save({{"v": big}}, {path!r})
"""


def test_sigkill_mid_save_leaves_old_checkpoint_loadable(tmp_path):
    p = tmp_path / "ckpt.pt"
    S.save({"v": T(np.arange(10, dtype=np.float32))}, p)
    killed_mid_save = False
    for attempt in range(3):
        proc = subprocess.Popen([sys.executable, "-c", _KILL_SCRIPT.format(repo=REPO, path=str(p))],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert proc.stdout.readline().strip() == b"ready", proc.stderr.read()
            deadline = time.time() + 60
            while time.time() < deadline:
                tmps = [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]
                if tmps:
                    try:
                        if os.path.getsize(tmp_path / tmps[0]) > (1 << 20):
                            break
                    except OSError:
                        pass
                time.sleep(0.0005)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait()
        assert proc.returncode == -signal.SIGKILL
        v = N(S.load(p)["v"])               # whatever happened, the checkpoint loads...
        if v.size == 10:                    # ...and holds one complete version or the other
            np.testing.assert_array_equal(v, np.arange(10, dtype=np.float32))
        else:
            assert v.size == 48 << 20 and (v == 7.0).all()
        leftovers = [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]
        for f in leftovers:
            os.unlink(tmp_path / f)
        if leftovers:
            killed_mid_save = True
            break
    assert killed_mid_save, "the kill never landed in the middle of a save"


# ---------------------------------------------------------------------------------------- devices
@pytest.mark.skipif(not _cl_available(), reason="no OpenCL device")
def test_cl_tensor_roundtrip_restores_device(tmp_path):
    x = T(np.arange(5, dtype=np.float32), device="cl")
    cpu = T(np.ones(2, np.int32))
    S.save({"x": x, "c": cpu}, tmp_path / "d.pt")
    with zipfile.ZipFile(tmp_path / "d.pt") as z:
        meta = json.loads(z.read("archive/.data/cltorch.json"))
    assert meta["devices"] == {"0": str(canonical("cl")), "1": "cpu"}
    o = S.load(tmp_path / "d.pt")
    assert o["x"].device == canonical("cl") and o["c"].device == CPU
    assert_tensor(o["x"], np.arange(5, dtype=np.float32))
    o = S.load(tmp_path / "d.pt", map_location="cpu")
    assert o["x"].device == CPU and o["c"].device == CPU
    assert_tensor(o["x"], np.arange(5, dtype=np.float32))
    o = S.load(tmp_path / "d.pt", map_location={"cpu": "cl"})
    assert o["c"].device == canonical("cl") and o["x"].device == canonical("cl")


def _rewrite(src, dst, replace):
    """Copies a zip archive record by record, replacing the records named in ``replace``."""
    with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zo:
        for n in zi.namelist():
            zo.writestr(n, replace.get(n, zi.read(n)))


def test_missing_cl_device_loads_to_cpu_with_warning(tmp_path):
    S.save({"x": T([1.0, 2.0])}, tmp_path / "a.pt")
    _rewrite(tmp_path / "a.pt", tmp_path / "b.pt",
             {"archive/.data/cltorch.json": json.dumps({"devices": {"0": "cl:97"}}).encode()})
    with pytest.warns(UserWarning, match="cl:97"):
        o = S.load(tmp_path / "b.pt")
    assert o["x"].device == CPU
    assert_tensor(o["x"], np.array([1.0, 2.0]))


def test_map_location_callable_and_errors(tmp_path):
    S.save({"x": T([1.0, 2.0])}, tmp_path / "a.pt")
    o = S.load(tmp_path / "a.pt", map_location=lambda s, loc: None)
    assert o["x"].device == CPU
    with pytest.raises(RuntimeError, match="float64 tensor of 1 elements"):
        S.load(tmp_path / "a.pt", map_location=lambda s, loc: T([1.0]))
    with pytest.raises(RuntimeError, match="cl"):
        S.load(tmp_path / "a.pt", map_location="cuda")


# ------------------------------------------------------------------------------- plain pickling
def test_python_pickle_of_tensor():
    base = T(np.arange(6, dtype=np.int16).reshape(2, 3))
    v = base[1]
    v2 = pickle.loads(pickle.dumps(v))
    assert v2.dtype is D.int16 and v2.storage_offset() == 0
    assert_tensor(v2, np.array([3, 4, 5], np.int16))


# ------------------------------------------------------------------------------------- security
def _zip_with_pickle(path, pkl):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/byteorder", b"little")
        z.writestr("archive/version", b"3\n")


class _Evil:
    def __init__(self, fn, args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def test_malicious_checkpoints_are_refused(tmp_path):
    marker = tmp_path / "pwned"
    cmd = f"touch {marker}"
    payloads = {
        "os.system": pickle.dumps({"w": _Evil(os.system, (cmd,))}, protocol=2),
        "os.system p4": pickle.dumps({"w": _Evil(os.system, (cmd,))}, protocol=4),   # STACK_GLOBAL
        "eval": pickle.dumps(_Evil(eval, (f"open({str(marker)!r}, 'w')",)), protocol=2),
        "subprocess": pickle.dumps(_Evil(subprocess.call, (["touch", str(marker)],)), protocol=2),
        "getattr": b"\x80\x02cbuiltins\ngetattr\nq\x00.",
        # INST opcode (protocol 0): builds an object by calling a class
        "inst": b"(S'" + cmd.encode() + b"'\nios\nsystem\n.",
        # REDUCE of an allowed but non-callable global
        "reduce torch.Tensor": b"\x80\x02ctorch\nTensor\n)R.",
        # BUILD on something that is not an OrderedDict
        "build list": b"\x80\x02]}X\x01\x00\x00\x00aK\x01sb.",
        # persistent id that is not a storage
        "persid": b"\x80\x02X\x03\x00\x00\x00abc\x85Q.",
    }
    for name, pkl in payloads.items():
        p = tmp_path / f"{name.replace(' ', '_')}.pt"
        _zip_with_pickle(p, pkl)
        with pytest.raises(pickle.UnpicklingError) as e:
            S.load(p)
        assert not marker.exists(), name
        if "system" in name:
            assert "posix.system" in str(e.value) or "os.system" in str(e.value)
            assert "weights_only" in str(e.value)


def test_malformed_pickles_raise_unpickling_error(tmp_path):
    bad = [b"", b"\x80\x02", b"\x80\x02(.", b"\x80\x02K", b"\x80\x02h\x05.", b"\x80\x02]\x8a\x01\x01u.",
           b"\x80\x02}K\x01].", b"\x80\x02X\xff\xff\xff\x7fab.", b"\x80\x02\xff."]
    for i, pkl in enumerate(bad):
        p = tmp_path / f"m{i}.pt"
        _zip_with_pickle(p, pkl)
        with pytest.raises(pickle.UnpicklingError):
            S.load(p)


# ---------------------------------------------------------------------------------- malformed files
def _good_file(tmp_path):
    p = tmp_path / "good.pt"
    S.save({"w": T(np.arange(64, dtype=np.float32)), "b": T([True, False]), "n": [1, "x"]}, p)
    return p


def test_empty_and_wrong_magic(tmp_path):
    (tmp_path / "e.pt").write_bytes(b"")
    with pytest.raises(RuntimeError, match="empty"):
        S.load(tmp_path / "e.pt")
    (tmp_path / "m.pt").write_bytes(b"GIF89a" + bytes(100))
    with pytest.raises(RuntimeError, match="magic number"):
        S.load(tmp_path / "m.pt")
    (tmp_path / "z.pt").write_bytes(b"PK\x03\x04" + bytes(10))
    with pytest.raises(RuntimeError, match="truncated or corrupted"):
        S.load(tmp_path / "z.pt")
    with zipfile.ZipFile(tmp_path / "nodata.zip", "w") as z:
        z.writestr("x/readme.txt", "hi")
    with pytest.raises(RuntimeError, match="data.pkl"):
        S.load(tmp_path / "nodata.zip")


def test_truncated_files_raise(tmp_path):
    raw = _good_file(tmp_path).read_bytes()
    cuts = sorted(set([1, 4, 30, 64, 100, len(raw) // 2, len(raw) - 22, len(raw) - 1] +
                      list(range(0, len(raw), max(1, len(raw) // 40)))))
    for n in cuts:
        p = tmp_path / "t.pt"
        p.write_bytes(raw[:n])
        with pytest.raises((RuntimeError, pickle.UnpicklingError)):
            S.load(p)


def test_corrupted_bytes_never_load_silently_wrong(tmp_path):
    good = _good_file(tmp_path)
    raw = good.read_bytes()
    ref = S.load(good)
    rng = random.Random(5)
    errors = loaded = 0
    for i in range(300):
        b = bytearray(raw)
        pos = rng.randrange(len(b))
        b[pos] ^= 1 << rng.randrange(8)
        p = tmp_path / "c.pt"
        p.write_bytes(bytes(b))
        try:
            o = S.load(p)
        except (RuntimeError, pickle.UnpicklingError):
            errors += 1
            continue
        loaded += 1     # a flip in padding, timestamps or an unused record: the values must still be right
        assert_tensor(o["w"], N(ref["w"]))
        assert_tensor(o["b"], N(ref["b"]))
        assert o["n"] == [1, "x"]
    assert errors > 100


def test_storage_too_small_raises(tmp_path):
    vals = np.arange(4, dtype=np.float32)
    S.save({"w": lie(vals, (10,))}, tmp_path / "s.pt")                 # 10 elements over 4
    with pytest.raises(RuntimeError, match=r"too small for a tensor of size \[10\]"):
        S.load(tmp_path / "s.pt")
    S.save({"w": lie(vals, (2, 2), (2, 1), 1)}, tmp_path / "o.pt")     # offset pushes past the end
    with pytest.raises(RuntimeError, match="needs 5 elements"):
        S.load(tmp_path / "o.pt")


def test_record_size_mismatch_raises(tmp_path):
    S.save({"w": T(np.arange(4, dtype=np.float32))}, tmp_path / "a.pt")
    _rewrite(tmp_path / "a.pt", tmp_path / "b.pt", {"archive/data/0": bytes(12)})
    with pytest.raises(RuntimeError, match="should hold 16 bytes but its record 'data/0' holds 12"):
        S.load(tmp_path / "b.pt")
    with zipfile.ZipFile(tmp_path / "a.pt") as zi, zipfile.ZipFile(tmp_path / "c.pt", "w") as zo:
        for n in zi.namelist():
            if n != "archive/data/0":
                zo.writestr(n, zi.read(n))
    with pytest.raises(RuntimeError, match="no record 'data/0'"):
        S.load(tmp_path / "c.pt")


def test_unsupported_dtype_message(tmp_path):
    pkl = (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storagectorch\nBFloat16Storage\n"
           b"X\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x02tQK\x00K\x02\x85K\x01\x85\x89ccollections\nOrderedDict\n"
           b")RtR.")
    with zipfile.ZipFile(tmp_path / "bf.pt", "w") as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/data/0", bytes(4))
    with pytest.raises(RuntimeError, match="bfloat16"):
        S.load(tmp_path / "bf.pt")


def test_big_endian_checkpoint(tmp_path):
    vals = {"f": np.array([1.5, -2.25], np.float32), "i": np.array([1, -2, 2 ** 40], np.int64),
            "h": np.array([0.5], np.float16), "b": np.array([True, False])}
    S.save({k: T(v) for k, v in vals.items()}, tmp_path / "le.pt")
    with zipfile.ZipFile(tmp_path / "le.pt") as z:
        pkl = z.read("archive/data.pkl")
    keys = {}   # storage key of each entry: the order in which the encoder met them
    for i, k in enumerate(vals):
        keys[f"archive/data/{i}"] = vals[k].astype(vals[k].dtype.newbyteorder(">")).tobytes()
    keys["archive/byteorder"] = b"big"
    _rewrite(tmp_path / "le.pt", tmp_path / "be.pt", keys)
    o = S.load(tmp_path / "be.pt")
    for k, v in vals.items():
        assert_tensor(o[k], v)
    assert pkl  # the pickle itself is byte-order free


def test_malformed_reduce_arguments(tmp_path):
    cases = [b"\x80\x02ccollections\nOrderedDict\nK\x01\x85\x85R.",          # OrderedDict((1,))
             b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\nK\x01\x85R.",         # wrong argument count
             b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n(K\x00K\x00)))\x89NtR.",  # not a storage
             b"\x80\x02ctorch\nSize\nX\x01\x00\x00\x00a\x85\x85R."]              # Size(("a",))
    for i, pkl in enumerate(cases):
        _zip_with_pickle(tmp_path / f"r{i}.pt", pkl)
        with pytest.raises(pickle.UnpicklingError):
            S.load(tmp_path / f"r{i}.pt")


def test_map_location_callable_errors_pass_through(tmp_path):
    S.save({"x": T([1.0])}, tmp_path / "a.pt")

    def bad(s, loc):
        raise TypeError("mine")
    with pytest.raises(TypeError, match="mine"):
        S.load(tmp_path / "a.pt", map_location=bad)
    with pytest.raises(TypeError, match="must return a Tensor or None"):
        S.load(tmp_path / "a.pt", map_location=lambda s, loc: 3)


def test_weights_only_rejects_pickle_module():
    with pytest.raises(RuntimeError, match="weights_only=False"):
        S.load(io.BytesIO(b""), pickle_module=pickle, weights_only=True)


# ------------------------------------------------------------------------------ torch reads our files
def _torch_python():
    try:
        import torch  # noqa: F401
        return sys.executable
    except ImportError:
        return os.environ.get("CLTORCH_TORCH_PYTHON")


_TORCH_CHECK = r"""
import sys, collections, numpy as np, torch
for path in sys.argv[1:]:
    o = torch.load(path, weights_only=True)
    sd = o["sd"]
    assert type(sd) is collections.OrderedDict and sd._metadata == {"": {"version": 1}}, sd._metadata
    w = sd["w"]
    assert w.dtype == torch.float32 and w.shape == (4, 5)
    assert sd["w_t"].untyped_storage().data_ptr() == w.untyped_storage().data_ptr()
    assert torch.equal(sd["w_t"], w.t()) and torch.equal(sd["w_col"], w[:, 2])
    ref = np.load(path + ".npz")
    for k in ref.files:
        t = sd[k]
        assert str(t.dtype) == "torch." + {"float32": "float32", "float64": "float64", "float16": "float16",
            "int64": "int64", "int32": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8",
            "bool": "bool"}[str(ref[k].dtype)], (k, t.dtype)
        assert np.array_equal(t.detach().numpy(), ref[k]), k
    assert sd["rg"].requires_grad and not sd["w"].requires_grad
    assert sd["s0"].dim() == 0 and sd["e"].shape == (0, 3)
    assert o["a"] is o["b"]
    assert o["dtype"] is torch.float16 and o["device"] == torch.device("cpu") and o[7] == "int key"
    assert o["scalars"][17] == b"\x00\xff" and o["scalars"][19] == {3, 4}
    assert torch.equal(o["deep"][0][0][0]["x"][0], torch.tensor([1]))
    assert type(o["size"]) is torch.Size and o["size"] == (2, 3)
    assert o["counter"] == {"a": 2, "b": 1}
    p = o.get("param")
    if p is not None:
        assert isinstance(p, torch.nn.Parameter) and p.requires_grad
print("torch-ok", torch.__version__)
"""


@pytest.mark.skipif(_torch_python() is None, reason="torch is not importable (set CLTORCH_TORCH_PYTHON)")
def test_torch_loads_our_checkpoints(tmp_path, monkeypatch):
    ref = _sample()
    Parameter = _parameter_cls()
    if Parameter is not None:
        ref["param"] = Parameter(T(np.ones(2, np.float32)), True)
    paths = []
    for name, z64 in (("plain.pt", False), ("zip64.pt", True)):
        monkeypatch.setattr(S._zip_writer, "_FORCE_ZIP64", z64)
        p = tmp_path / name
        S.save(ref, p)
        np.savez(str(p) + ".npz", **{k: N(t) for k, t in ref["sd"].items()})
        paths.append(str(p))
    r = subprocess.run([_torch_python(), "-c", _TORCH_CHECK] + paths, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "torch-ok" in r.stdout
