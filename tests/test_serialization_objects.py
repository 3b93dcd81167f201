"""cltorch.save / cltorch.load of whole objects: numpy arrays, Modules, optimizers, user classes; the
weights_only allowlist API (add_safe_globals, safe_globals, get_unsafe_globals_in_checkpoint); whole models
moving between cltorch and torch in both directions (when torch is importable).
"""
import collections
import io
import pickle

import numpy as np
import pytest

import cltorch
import cltorch.nn as cnn
from cltorch import serialization as S

from conftest import to_np

Pair = collections.namedtuple("Pair", "a b")


class Point:
    """A user class at module level: picklable."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def __eq__(self, other):
        return type(other) is Point and (self.x, self.y) == (other.x, other.y)


class Slotted:
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v


@pytest.fixture(autouse=True)
def _no_leftover_safe_globals():
    S.clear_safe_globals()
    yield
    S.clear_safe_globals()


def _roundtrip(obj, **load_kw):
    b = io.BytesIO()
    cltorch.save(obj, b)
    b.seek(0)
    return cltorch.load(b, **load_kw), b.getvalue()


def _np_globals(*dtypes):
    """What the pickle of a numpy array of these dtypes names (numpy 1 and 2 spell the module differently)."""
    a = np.arange(3)
    return [a.__reduce_ex__(2)[0], np.ndarray, np.dtype] + [type(np.dtype(d)) for d in dtypes]


def _model(device="cpu"):
    cltorch.manual_seed(0)
    m = cnn.Sequential(cnn.Linear(4, 6), cnn.BatchNorm1d(6), cnn.ReLU(),
                       cnn.Sequential(cnn.Linear(6, 3), cnn.Tanh()))
    return m.to(device)


def _train_a_step(m, device="cpu"):
    x = cltorch.from_numpy(np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)).to(device)
    opt = cltorch.optim.Adam(m.parameters(), lr=0.01)
    m.train()
    m(x).pow(2).sum().backward()
    opt.step()
    opt.zero_grad()
    m.eval()
    return x, opt


# ------------------------------------------------------------------------------------------ objects
def test_numpy_array_roundtrip_and_weights_only():
    a = np.arange(12, dtype=np.float64).reshape(3, 4)[:, 1::2]
    o, raw = _roundtrip({"a": a, "t": cltorch.ones(2)}, weights_only=False)
    assert o["a"].dtype == a.dtype and np.array_equal(o["a"], a)
    with pytest.raises(pickle.UnpicklingError, match=r"GLOBAL numpy\.(_core|core)\.multiarray\._reconstruct"):
        cltorch.load(io.BytesIO(raw))
    with S.safe_globals(_np_globals(np.float64)):
        o = cltorch.load(io.BytesIO(raw))
    assert np.array_equal(o["a"], a) and to_np(o["t"]).tolist() == [1.0, 1.0]
    assert S.get_safe_globals() == []
    with pytest.raises(pickle.UnpicklingError):
        cltorch.load(io.BytesIO(raw))


def test_numpy_allowlist_matches_torch():
    torch = pytest.importorskip("torch")
    b = io.BytesIO()
    cltorch.save({"a": np.arange(3, dtype=np.int32)}, b)
    ours = S.get_unsafe_globals_in_checkpoint(io.BytesIO(b.getvalue()))
    assert set(ours) == set(torch.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(b.getvalue())))
    with torch.serialization.safe_globals(_np_globals(np.int32)):       # the same list lets torch load it
        assert torch.load(io.BytesIO(b.getvalue()))["a"].tolist() == [0, 1, 2]


def test_mixed_objects_roundtrip():
    shared = [1, 2]
    obj = {"pt": Point(1, [2.5]), "pair": Pair(cltorch.arange(3), "s"), "dd": collections.defaultdict(list, k=[1]),
           "fs": frozenset({1, 2}), "sl": slice(1, 5, 2), "slot": Slotted(3), "np32": np.float32(1.5),
           "a": shared, "b": shared, "rng": range(3), "cls": Point, "fn": np.add}
    o, _ = _roundtrip(obj, weights_only=False)
    assert o["pt"] == Point(1, [2.5])
    assert type(o["pair"]) is Pair and o["pair"].a.tolist() == [0, 1, 2] and o["pair"].b == "s"
    assert type(o["dd"]) is collections.defaultdict and o["dd"]["k"] == [1] and o["dd"]["new"] == []
    assert o["fs"] == frozenset({1, 2}) and o["sl"] == slice(1, 5, 2) and o["slot"].v == 3
    assert type(o["np32"]) is np.float32 and o["np32"] == 1.5
    assert o["a"] is o["b"] and o["rng"] == range(3) and o["cls"] is Point and o["fn"] is np.add


def test_user_class_weights_only_refusal_and_allowlist():
    o, raw = _roundtrip({"p": Point(3, 4)}, weights_only=False)
    assert o["p"] == Point(3, 4)
    name = f"{Point.__module__}.{Point.__qualname__}"
    with pytest.raises(pickle.UnpicklingError) as e:
        cltorch.load(io.BytesIO(raw))
    msg = str(e.value)
    assert f"GLOBAL {name} was not an allowed global" in msg
    assert "weights_only=False" in msg and "cltorch.serialization.add_safe_globals" in msg
    assert S.get_unsafe_globals_in_checkpoint(io.BytesIO(raw)) == [name]
    S.add_safe_globals([Point])
    assert S.get_safe_globals() == [Point]
    assert cltorch.load(io.BytesIO(raw))["p"] == Point(3, 4)
    assert S.get_unsafe_globals_in_checkpoint(io.BytesIO(raw)) == []
    S.clear_safe_globals()
    with pytest.raises(pickle.UnpicklingError, match="Point"):
        cltorch.load(io.BytesIO(raw))
    with S.safe_globals([(Point, name)]):                # the (obj, "module.name") form
        assert cltorch.load(io.BytesIO(raw))["p"] == Point(3, 4)
    with pytest.raises(ValueError, match="length"):
        S.add_safe_globals([(Point, name, 1)])
    with pytest.raises(TypeError, match="str"):
        S.safe_globals([(Point, 3)])


def test_blocked_modules_stay_blocked_even_if_listed(tmp_path):
    import os
    import zipfile
    payload = b"\x80\x02cposix\nsystem\nX\x04\x00\x00\x00trueq\x00\x85R."
    with zipfile.ZipFile(tmp_path / "evil.pt", "w") as z:
        z.writestr("archive/data.pkl", payload)
    S.add_safe_globals([os.system])
    with pytest.raises(pickle.UnpicklingError, match="posix is blocked"):
        cltorch.load(tmp_path / "evil.pt")


def test_lambda_fails_like_torch():
    f = lambda x: x  # noqa: E731
    with pytest.raises(Exception) as want:
        pickle.dumps(f, 2)
    with pytest.raises(type(want.value)):
        cltorch.save({"f": f}, io.BytesIO())
    torch = pytest.importorskip("torch")
    with pytest.raises(type(want.value)):
        torch.save({"f": f}, io.BytesIO())


def test_pickle_protocols_and_weights_only_rule(monkeypatch):
    for proto in (2, 4, 5):
        b = io.BytesIO()
        cltorch.save({"w": cltorch.arange(4.0), "n": [1, "x"]}, b, pickle_protocol=proto)
        o = cltorch.load(io.BytesIO(b.getvalue()))
        assert o["w"].tolist() == [0.0, 1.0, 2.0, 3.0] and o["n"] == [1, "x"]
    with pytest.raises(ValueError, match="protocols 2"):
        cltorch.save(1, io.BytesIO(), pickle_protocol=1)
    b = io.BytesIO()
    cltorch.save(Point(1, 2), b)
    # torch's rule: weights_only=None means True, unless a pickle_module is given
    assert cltorch.load(io.BytesIO(b.getvalue()), pickle_module=pickle) == Point(1, 2)
    monkeypatch.setenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "1")
    with pytest.raises(pickle.UnpicklingError):
        cltorch.load(io.BytesIO(b.getvalue()), weights_only=False)


# ------------------------------------------------------------------------------------- whole modules
def test_whole_module_roundtrip(device):
    m = _model(device)
    x, opt = _train_a_step(m, device)
    m[1].train()                                   # a submodule's training flag differs from its parent's
    o, raw = _roundtrip({"model": m, "opt": opt}, weights_only=False)
    m2, opt2 = o["model"], o["opt"]
    assert type(m2) is cnn.Sequential and type(m2[1]) is cnn.BatchNorm1d and type(m2[3][1]) is cnn.Tanh
    assert not m2.training and m2[1].training and not m2[3].training
    assert isinstance(m2[0].weight, cnn.Parameter) and m2[0].weight.requires_grad
    assert m2[0].weight.device == m[0].weight.device
    sd, sd2 = m.state_dict(), m2.state_dict()
    assert list(sd) == list(sd2)
    for k in sd:
        assert np.array_equal(to_np(sd[k]), to_np(sd2[k])), k
    assert int(m2[1].num_batches_tracked) == 1
    m.eval()
    m2.eval()
    np.testing.assert_array_equal(to_np(m2(x)), to_np(m(x)))
    # the optimizer's params are the loaded model's params, and its state came along
    assert opt2.param_groups[0]["params"][0] is m2[0].weight
    assert type(opt2) is cltorch.optim.Adam and opt2.param_groups[0]["lr"] == 0.01
    st, st2 = opt.state[m[0].weight], opt2.state[m2[0].weight]
    np.testing.assert_array_equal(to_np(st["exp_avg"]), to_np(st2["exp_avg"]))
    # the loaded model trains
    m2.train()
    m2(x).sum().backward()
    opt2.step()
    assert m2[0].weight.grad is not None


def test_whole_module_weights_only_needs_its_classes():
    m = _model()
    _, raw = _roundtrip(m, weights_only=False)
    with pytest.raises(pickle.UnpicklingError, match=r"GLOBAL torch\.nn\.Sequential was not an allowed"):
        cltorch.load(io.BytesIO(raw))
    assert set(S.get_unsafe_globals_in_checkpoint(io.BytesIO(raw))) == \
        {"torch.nn.Sequential", "torch.nn.Linear", "torch.nn.BatchNorm1d", "torch.nn.ReLU", "torch.nn.Tanh"}
    with S.safe_globals([cnn.Sequential, cnn.Linear, cnn.BatchNorm1d, cnn.ReLU, cnn.Tanh]):
        m2 = cltorch.load(io.BytesIO(raw))
    x = cltorch.ones(2, 4)
    m.eval()
    m2.eval()
    np.testing.assert_array_equal(to_np(m2(x)), to_np(m(x)))


# ----------------------------------------------------------------------------------- torch interop
def test_cltorch_model_loads_in_torch():
    torch = pytest.importorskip("torch")
    m = _model()
    x, _ = _train_a_step(m)
    b = io.BytesIO()
    cltorch.save(m, b)
    tm = torch.load(io.BytesIO(b.getvalue()), weights_only=False)
    assert type(tm) is torch.nn.Sequential and type(tm[1]) is torch.nn.BatchNorm1d
    assert isinstance(tm[0].weight, torch.nn.Parameter) and not tm.training
    assert int(tm[1].num_batches_tracked) == 1
    got = tm(torch.from_numpy(to_np(x))).detach().numpy()
    np.testing.assert_allclose(got, to_np(m(x)), rtol=1e-5, atol=1e-6)
    # torch's own allowlist, given the names our file uses, loads it with weights_only=True too
    names = [(getattr(torch.nn, n), f"torch.nn.{n}") for n in ("Sequential", "Linear", "BatchNorm1d", "ReLU", "Tanh")]
    with torch.serialization.safe_globals(names):
        tm2 = torch.load(io.BytesIO(b.getvalue()))
    np.testing.assert_allclose(tm2(torch.from_numpy(to_np(x))).detach().numpy(), got, rtol=0, atol=0)


def test_torch_model_loads_in_cltorch():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3, padding=1), torch.nn.BatchNorm2d(3), torch.nn.ReLU(),
                             torch.nn.Flatten(), torch.nn.Sequential(torch.nn.Linear(48, 4), torch.nn.LayerNorm(4)))
    xt = torch.randn(2, 2, 4, 4)
    tm(xt)                                         # BatchNorm statistics move
    tm.eval()
    b = io.BytesIO()
    torch.save(tm, b)
    m = cltorch.load(io.BytesIO(b.getvalue()), weights_only=False)
    assert type(m) is cnn.Sequential and type(m[1]) is cnn.BatchNorm2d and type(m[4][1]) is cnn.LayerNorm
    assert not m.training and isinstance(m[0].weight, cnn.Parameter)
    np.testing.assert_array_equal(to_np(m[1].running_var), tm[1].running_var.numpy())
    got = to_np(m(cltorch.from_numpy(xt.numpy())))
    np.testing.assert_allclose(got, tm(xt).detach().numpy(), rtol=1e-5, atol=1e-5)
    # torch's file names torch's private paths; the cltorch classes allowlisted cover them
    names = set(S.get_unsafe_globals_in_checkpoint(io.BytesIO(b.getvalue())))
    assert names == set(torch.serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(b.getvalue())))
    assert "torch.nn.modules.batchnorm.BatchNorm2d" in names
    with S.safe_globals([cnn.Sequential, cnn.Conv2d, cnn.BatchNorm2d, cnn.ReLU, cnn.Flatten, cnn.Linear,
                         cnn.LayerNorm]):
        assert S.get_unsafe_globals_in_checkpoint(io.BytesIO(b.getvalue())) == []
        m2 = cltorch.load(io.BytesIO(b.getvalue()))
    np.testing.assert_array_equal(to_np(m2(cltorch.from_numpy(xt.numpy()))), got)


def test_torch_global_without_counterpart_is_named():
    torch = pytest.importorskip("torch")
    b = io.BytesIO()
    torch.save({"g": torch.fx.Graph}, b)
    with pytest.raises(pickle.UnpicklingError, match=r"torch\.fx\.graph\.Graph, which has no cltorch counterpart"):
        cltorch.load(io.BytesIO(b.getvalue()), weights_only=False)


def test_tensor_attributes_survive_both_ways():
    t = cltorch.arange(3.0)
    t.note = "mine"
    p = cnn.Parameter(cltorch.ones(2))
    p.tag = 7
    o, raw = _roundtrip({"t": t, "p": p})                  # weights_only=True allows these rebuilds
    assert o["t"].note == "mine" and o["t"].tolist() == [0.0, 1.0, 2.0]
    assert isinstance(o["p"], cnn.Parameter) and o["p"].tag == 7 and o["p"].requires_grad
    torch = pytest.importorskip("torch")
    ot = torch.load(io.BytesIO(raw))
    assert ot["t"].note == "mine" and ot["p"].tag == 7 and isinstance(ot["p"], torch.nn.Parameter)
    b = io.BytesIO()
    torch.save(ot, b)
    back = cltorch.load(io.BytesIO(b.getvalue()))
    assert back["t"].note == "mine" and back["p"].tag == 7 and back["t"].tolist() == [0.0, 1.0, 2.0]


def test_transformer_layer_with_function_attributes_loads_in_torch():
    """A whole TransformerEncoderLayer (it holds ``F.relu`` as its ``activation`` and a MultiheadAttention whose
    out_proj is NonDynamicallyQuantizableLinear) saved by cltorch loads in torch and computes the same."""
    torch = pytest.importorskip("torch")
    cltorch.manual_seed(0)
    m = cnn.TransformerEncoderLayer(8, 2, 16, dropout=0.0).eval()
    buf = io.BytesIO()
    cltorch.save(m, buf)
    buf.seek(0)
    t = torch.load(buf, weights_only=False).eval()
    assert type(t) is torch.nn.TransformerEncoderLayer and t.activation is torch.nn.functional.relu
    x = np.random.default_rng(0).standard_normal((3, 2, 8)).astype(np.float32)
    np.testing.assert_allclose(to_np(m(cltorch.from_numpy(x))), t(torch.from_numpy(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
