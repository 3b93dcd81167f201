"""Module semantics (registration, walking, state dicts, conversion, hooks, repr), Parameter and the containers.

Each expectation is PyTorch's documented behaviour; values are checked against numpy.
"""
import copy
import io
import re
from collections import OrderedDict

import numpy as np
import pytest

import cltorch as torch
import cltorch.nn as nn
import cltorch.nn.functional as F

from conftest import DEVICES, to_np


class Scale(nn.Module):
    """y = x * w + b with a buffer counting calls (no GEMM needed)."""

    def __init__(self, n=3):
        super().__init__()
        self.w = nn.Parameter(torch.arange(1.0, n + 1.0))
        self.b = nn.Parameter(torch.zeros(n))
        self.register_buffer("calls", torch.zeros((), dtype=torch.int64))
        self.register_buffer("tmp", torch.ones(n), persistent=False)

    def forward(self, x):
        return x * self.w + self.b


class Tree(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = Scale(3)
        self.p = nn.Parameter(torch.ones(2))
        self.seq = nn.Sequential(Scale(3), nn.ReLU(), Scale(3))
        self.register_buffer("stat", torch.full((2,), 2.0))


# ------------------------------------------------------------------------------------------------ Parameter
def test_parameter_is_tensor_subclass_sharing_storage():
    t = torch.arange(4.0)
    p = nn.Parameter(t)
    assert isinstance(p, nn.Parameter) and isinstance(p, torch.Tensor)
    assert p.requires_grad and p.is_leaf
    t.add_(1.0)  # shares storage
    np.testing.assert_array_equal(to_np(p), [1, 2, 3, 4])
    assert not nn.Parameter(torch.zeros(2), requires_grad=False).requires_grad
    assert repr(p).startswith("Parameter containing:\n")
    e = nn.Parameter()
    assert e.shape == (0,) and e.requires_grad
    with pytest.raises(RuntimeError):
        nn.Parameter(torch.zeros(2, dtype=torch.int64))
    # ops on a Parameter give plain tensors; deepcopy keeps the class and copies the data
    assert type(p * 2) is torch.Tensor
    q = copy.deepcopy(p)
    assert isinstance(q, nn.Parameter) and q.requires_grad
    q.data.add_(10.0)
    assert to_np(p)[0] == 1.0


def test_buffer_marker_registers_buffer():
    m = nn.Module()
    m.a = nn.Buffer(torch.ones(2))
    m.b = nn.Buffer(torch.zeros(1), persistent=False)
    assert [k for k, _ in m.named_buffers()] == ["a", "b"]
    assert list(m.state_dict()) == ["a"]


# ------------------------------------------------------------------------------------------------ registration
def test_setattr_registers_and_getattr_delattr():
    m = Tree()
    assert set(m._parameters) == {"p"} and set(m._modules) == {"first", "seq"} and set(m._buffers) == {"stat"}
    assert m.p is m._parameters["p"]
    with pytest.raises(AttributeError, match="'Tree' object has no attribute 'nope'"):
        m.nope
    # assigning a tensor to a parameter name is an error; None is allowed
    with pytest.raises(TypeError, match="cannot assign"):
        m.p = torch.ones(2)
    m.p = None
    assert m.p is None and "p" in m._parameters
    assert [n for n, _ in m.named_parameters()][0] == "first.w"  # None parameters are skipped
    # a buffer name takes tensors
    m.stat = torch.zeros(3)
    assert m._buffers["stat"].shape == (3,)
    # replacing a module by a parameter moves it between the dicts
    m.first = nn.Parameter(torch.zeros(1))
    assert "first" not in m._modules and "first" in m._parameters
    del m.first
    assert "first" not in m._parameters
    del m.stat
    assert "stat" not in m._buffers
    with pytest.raises(AttributeError):
        del m.missing


def test_register_errors():
    m = nn.Module()
    with pytest.raises(KeyError, match="contain"):
        m.register_parameter("a.b", nn.Parameter(torch.zeros(1)))
    with pytest.raises(KeyError, match="empty"):
        m.register_buffer("", torch.zeros(1))
    with pytest.raises(TypeError):
        m.register_buffer("x", 3)
    with pytest.raises(TypeError):
        m.add_module("x", 3)
    m.foo = 1
    with pytest.raises(KeyError, match="already exists"):
        m.register_buffer("foo", torch.zeros(1))
    x = torch.ones(1, requires_grad=True) * 2
    with pytest.raises(TypeError):
        m.register_parameter("y", x)

    class Early(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(torch.zeros(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        Early()


# ------------------------------------------------------------------------------------------------ walking
def test_named_parameters_order_recurse_prefix_and_sharing():
    m = Tree()
    assert [n for n, _ in m.named_parameters()] == ["p", "first.w", "first.b", "seq.0.w", "seq.0.b", "seq.2.w",
                                                    "seq.2.b"]
    assert [n for n, _ in m.named_parameters(recurse=False)] == ["p"]
    assert [n for n, _ in m.named_parameters(prefix="net")][0] == "net.p"
    assert [n for n, _ in m.named_buffers()] == ["stat", "first.calls", "first.tmp", "seq.0.calls", "seq.0.tmp",
                                                 "seq.2.calls", "seq.2.tmp"]
    assert [n for n, _ in m.named_children()] == ["first", "seq"]
    assert [n for n, _ in m.named_modules()] == ["", "first", "seq", "seq.0", "seq.1", "seq.2"]
    assert len(list(m.modules())) == 6 and len(list(m.children())) == 2
    # a shared module and a shared parameter appear once unless remove_duplicate=False
    shared = Scale(2)
    outer = nn.Sequential(shared, shared)
    outer.extra = shared.w
    assert [n for n, _ in outer.named_parameters()] == ["extra", "0.b"]
    assert len(list(outer.named_parameters(remove_duplicate=False))) == 5
    assert [n for n, _ in outer.named_modules()] == ["", "0"]
    assert [n for n, _ in outer.named_modules(remove_duplicate=False)] == ["", "0", "1"]


def test_get_submodule_get_parameter_get_buffer():
    m = Tree()
    assert m.get_submodule("seq.2") is m.seq[2]
    assert m.get_submodule("") is m
    assert m.get_parameter("seq.0.w") is m.seq[0].w
    assert m.get_buffer("first.calls") is m.first.calls
    with pytest.raises(AttributeError, match="has no attribute `zz`"):
        m.get_submodule("seq.zz")
    with pytest.raises(AttributeError, match="is not an nn.Module"):
        m.get_submodule("p.x")
    with pytest.raises(AttributeError, match="is not an nn.Parameter"):
        m.get_parameter("stat")
    m.set_submodule("seq.1", nn.Tanh())
    assert isinstance(m.seq[1], nn.Tanh)


# ------------------------------------------------------------------------------------------------ state dicts
def test_state_dict_keys_aliases_and_non_persistent():
    m = Tree()
    sd = m.state_dict()
    assert list(sd) == ["p", "stat", "first.w", "first.b", "first.calls", "seq.0.w", "seq.0.b", "seq.0.calls",
                        "seq.2.w", "seq.2.b", "seq.2.calls"]
    assert not any(v.requires_grad for v in sd.values())
    assert not isinstance(sd["p"], nn.Parameter)
    sd["first.w"].mul_(2.0)
    np.testing.assert_array_equal(to_np(m.first.w), [2, 4, 6])
    kv = m.state_dict(keep_vars=True)
    assert kv["p"] is m.p
    assert list(m.state_dict(prefix="x."))[0] == "x.p"


@pytest.mark.parametrize("device", DEVICES)
def test_load_state_dict_across_devices_and_dtypes(device):
    src = Tree()
    with torch.no_grad():
        for i, p in enumerate(src.parameters()):
            p.copy_(torch.full(p.shape, float(i + 1)))
    sd = src.state_dict()  # on cpu
    dst = Tree().to(device)
    w_obj = dst.first.w
    res = dst.load_state_dict(sd)
    assert res.missing_keys == [] and res.unexpected_keys == []
    assert repr(res) == "<All keys matched successfully>"
    assert dst.first.w is w_obj and dst.first.w.device == torch.device(device)
    np.testing.assert_array_equal(to_np(dst.first.w), [2, 2, 2])
    # the other way, and into float64
    back = Tree().double()
    back.load_state_dict(dst.state_dict())
    assert back.first.w.dtype is torch.float64
    np.testing.assert_array_equal(to_np(back.seq[2].b), [7, 7, 7])


def test_load_state_dict_missing_unexpected_and_shape_errors():
    m = Tree()
    sd = m.state_dict()
    del sd["seq.0.w"]
    sd["seq.0.extra"] = torch.zeros(1)
    sd["bogus"] = torch.zeros(1)
    with pytest.raises(RuntimeError) as ei:
        m.load_state_dict(sd)
    msg = str(ei.value)
    assert 'Missing key(s) in state_dict: "seq.0.w"' in msg
    assert '"seq.0.extra"' in msg and '"bogus"' in msg and "Error(s) in loading state_dict for Tree" in msg
    res = m.load_state_dict(sd, strict=False)
    assert res.missing_keys == ["seq.0.w"] and sorted(res.unexpected_keys) == ["bogus", "seq.0.extra"]
    bad = m.state_dict()
    bad["first.w"] = torch.zeros(4)
    with pytest.raises(RuntimeError) as ei:
        m.load_state_dict(bad, strict=False)  # a shape mismatch raises even when not strict
    msg = str(ei.value)
    assert "size mismatch for first.w" in msg and "[4]" in msg and "[3]" in msg
    # nothing was half-loaded into the mismatching tensor
    np.testing.assert_array_equal(to_np(m.first.w), [1, 2, 3])


def test_load_state_dict_assign_keeps_requires_grad():
    m = Scale(2)
    new = {"w": torch.full((2,), 5.0), "b": torch.zeros(2), "calls": torch.tensor(3)}
    m.load_state_dict(new, assign=True)
    assert isinstance(m.w, nn.Parameter) and m.w.requires_grad
    assert m.calls.item() == 3


def test_state_dict_round_trip_through_save_load():
    m = Tree()
    with torch.no_grad():
        m.first.w.copy_(torch.tensor([9.0, 8.0, 7.0]))
    buf = io.BytesIO()
    torch.save(m.state_dict(), buf)
    buf.seek(0)
    m2 = Tree()
    m2.load_state_dict(torch.load(buf))
    np.testing.assert_array_equal(to_np(m2.first.w), [9, 8, 7])
    # a Parameter survives save/load as a Parameter
    buf = io.BytesIO()
    torch.save({"p": m.p}, buf)
    buf.seek(0)
    assert isinstance(torch.load(buf)["p"], nn.Parameter)


# ------------------------------------------------------------------------------------------------ modes, conversion
def test_train_eval_requires_grad_zero_grad():
    m = Tree()
    assert m.training and m.seq[1].training
    assert m.eval() is m
    assert not m.training and not m.seq[2].training
    m.train()
    assert all(x.training for x in m.modules())
    with pytest.raises(ValueError):
        m.train("yes")
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())
    m.requires_grad_()
    out = m.seq(m.first(torch.ones(3))).sum() + m.p.sum()
    out.backward()
    assert m.first.w.grad is not None
    m.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(to_np(m.first.w.grad), [0, 0, 0])
    m.zero_grad()
    assert m.first.w.grad is None


@pytest.mark.parametrize("device", DEVICES)
def test_to_keeps_parameters_moves_buffers_casts_floats_only(device):
    m = Tree()
    params = list(m.parameters())
    m.first.w.grad = torch.ones(3)
    assert m.to(device) is m
    assert [id(p) for p in m.parameters()] == [id(p) for p in params]
    dev = torch.device(device)
    assert all(p.device == dev for p in m.parameters()) and all(b.device == dev for b in m.buffers())
    assert m.first.w.grad.device == dev
    m.to(torch.float64)
    assert m.first.w.dtype is torch.float64 and m.first.w.grad.dtype is torch.float64
    assert m.first.calls.dtype is torch.int64  # integer buffer not cast
    assert m.first.w.requires_grad and m.first.w.is_leaf
    with pytest.raises(TypeError, match="floating point"):
        m.to(torch.int32)
    m.float()
    assert m.stat.dtype is torch.float32
    assert m.cpu() is m and m.p.device == torch.device("cpu")
    m.type(torch.float64)
    assert m.first.calls.dtype is torch.float64  # type() casts everything
    t = torch.zeros(1, dtype=torch.float32, device=device)
    m.to(t)
    assert m.p.device == dev and m.p.dtype is torch.float32


def test_apply_visits_children_first():
    m = Tree()
    seen = []
    assert m.apply(lambda mod: seen.append(type(mod).__name__)) is m
    assert seen == ["Scale", "Scale", "ReLU", "Scale", "Sequential", "Tree"]


# ------------------------------------------------------------------------------------------------ hooks
def test_forward_pre_hooks_and_hooks_with_handles():
    m = Scale(2)
    calls = []

    def pre(mod, args):
        calls.append("pre")
        return (args[0] * 2,)

    def post(mod, args, out):
        calls.append("post")
        return out + 100

    h1 = m.register_forward_pre_hook(pre)
    h2 = m.register_forward_hook(post)
    np.testing.assert_array_equal(to_np(m(torch.ones(2))), [102, 104])
    assert calls == ["pre", "post"]
    h1.remove()
    h2.remove()
    np.testing.assert_array_equal(to_np(m(torch.ones(2))), [1, 2])

    def pre_kw(mod, args, kwargs):
        return (args[0] + 1,), kwargs

    def post_kw(mod, args, kwargs, out):
        calls.append(("kw", sorted(kwargs)))

    with m.register_forward_pre_hook(pre_kw, with_kwargs=True), m.register_forward_hook(post_kw, with_kwargs=True):
        np.testing.assert_array_equal(to_np(m(torch.ones(2))), [2, 4])
    assert calls[-1] == ("kw", [])
    order = []
    m.register_forward_hook(lambda *a: order.append(1))
    m.register_forward_hook(lambda *a: order.append(0), prepend=True)
    m(torch.ones(2))
    assert order == [0, 1]


def test_full_backward_hook_sees_and_replaces_grad_input():
    m = Scale(3)
    seen = {}

    def hook(mod, grad_input, grad_output):
        seen["gi"] = [to_np(g) for g in grad_input]
        seen["go"] = [to_np(g) for g in grad_output]
        return (grad_input[0] * 10,)

    h = m.register_full_backward_hook(hook)
    x = torch.ones(3, requires_grad=True)
    y = m(x)
    (y * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_array_equal(seen["go"][0], [1, 2, 3])
    np.testing.assert_array_equal(seen["gi"][0], [1, 4, 9])  # d/dx of sum(g * (x * w)) = g * w
    np.testing.assert_array_equal(to_np(x.grad), [10, 40, 90])
    np.testing.assert_array_equal(to_np(m.w.grad), [1, 2, 3])
    h.remove()
    # an input that needs no grad: the hook still runs, with grad_input None
    got = []
    m.register_full_backward_hook(lambda mod, gi, go: got.append(gi))
    m.register_full_backward_pre_hook(lambda mod, go: (go[0] * 2,))
    m.w.grad = None
    m(torch.ones(3)).sum().backward()
    assert got == [(None,)]
    np.testing.assert_array_equal(to_np(m.w.grad), [2, 2, 2])


# ------------------------------------------------------------------------------------------------ repr
def test_repr_tree_and_extra_repr():
    m = nn.Sequential(OrderedDict(fc=nn.Linear(2, 3), act=nn.GELU(approximate="tanh"),
                                  block=nn.Sequential(nn.Dropout(0.1), nn.LayerNorm(3))))
    assert repr(m) == (
        "Sequential(\n"
        "  (fc): Linear(in_features=2, out_features=3, bias=True)\n"
        "  (act): GELU(approximate='tanh')\n"
        "  (block): Sequential(\n"
        "    (0): Dropout(p=0.1, inplace=False)\n"
        "    (1): LayerNorm((3,), eps=1e-05, elementwise_affine=True)\n"
        "  )\n"
        ")")
    assert repr(nn.Conv2d(1, 2, 3, stride=2, padding=1, bias=False)) == \
        "Conv2d(1, 2, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), bias=False)"
    assert repr(nn.ReLU()) == "ReLU()"
    assert repr(nn.Embedding(5, 2, padding_idx=0)) == "Embedding(5, 2, padding_idx=0)"
    assert repr(nn.BatchNorm2d(4)) == \
        "BatchNorm2d(4, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)"    # torch 2.13
    assert repr(nn.MaxPool2d(2)) == "MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)"


# ------------------------------------------------------------------------------------------------ containers
def test_sequential_indexing_slicing_and_editing():
    a, b, c = nn.ReLU(), nn.Tanh(), nn.Sigmoid()
    s = nn.Sequential(a, b, c)
    assert s[0] is a and s[-1] is c and len(s) == 3 and list(s) == [a, b, c]
    sub = s[1:]
    assert isinstance(sub, nn.Sequential) and list(sub) == [b, c] and list(sub._modules) == ["1", "2"]
    with pytest.raises(IndexError):
        s[3]
    d = nn.Identity()
    s.append(d)
    assert s[3] is d
    s.insert(1, nn.SiLU())
    assert [type(x).__name__ for x in s] == ["ReLU", "SiLU", "Tanh", "Sigmoid", "Identity"]
    assert list(s._modules) == ["0", "1", "2", "3", "4"]
    s.extend([nn.ReLU6()])
    del s[0]
    assert list(s._modules) == ["0", "1", "2", "3", "4"] and isinstance(s[0], nn.SiLU)
    s[0] = nn.ELU()
    assert isinstance(s[0], nn.ELU)
    assert isinstance(s.pop(0), nn.ELU) and len(s) == 4
    both = s + nn.Sequential(nn.ReLU())
    assert len(both) == 5
    named = nn.Sequential(OrderedDict(x=nn.ReLU(), y=nn.Tanh()))
    assert list(named._modules) == ["x", "y"] and isinstance(named.y, nn.Tanh)
    x = torch.tensor([-1.0, 0.5])
    np.testing.assert_allclose(to_np(named(x)), np.tanh(np.maximum([-1.0, 0.5], 0)), rtol=1e-6)


def test_modulelist_and_moduledict():
    ml = nn.ModuleList([nn.ReLU(), nn.Tanh()])
    ml.append(nn.Sigmoid())
    ml.extend([nn.SiLU()])
    ml.insert(0, nn.Identity())
    assert [type(x).__name__ for x in ml] == ["Identity", "ReLU", "Tanh", "Sigmoid", "SiLU"]
    assert isinstance(ml[1:3], nn.ModuleList) and len(ml[1:3]) == 2
    del ml[1]
    assert list(ml._modules) == ["0", "1", "2", "3"] and isinstance(ml[1], nn.Tanh)
    ml += [nn.ReLU()]
    assert len(ml) == 5
    with pytest.raises(NotImplementedError):
        ml(torch.ones(1))
    md = nn.ModuleDict({"b": nn.ReLU(), "a": nn.Tanh()})
    assert list(md.keys()) == ["b", "a"]
    md["c"] = nn.Sigmoid()
    assert "c" in md and len(md) == 3 and isinstance(md.pop("b"), nn.ReLU)
    md.update([("d", nn.SiLU())])
    assert list(md) == ["a", "c", "d"]
    assert [n for n, _ in nn.Sequential(md).named_modules()] == ["", "0", "0.a", "0.c", "0.d"]


def test_parameterlist_and_parameterdict():
    pl = nn.ParameterList([nn.Parameter(torch.ones(2)), torch.zeros(3)])
    assert isinstance(pl[1], nn.Parameter) and pl[1].requires_grad
    pl.append(torch.ones(1))
    assert len(pl) == 3 and [n for n, _ in pl.named_parameters()] == ["0", "1", "2"]
    holder = nn.Module()
    holder.pl = pl
    assert list(holder.state_dict()) == ["pl.0", "pl.1", "pl.2"]
    pd = nn.ParameterDict({"w": torch.ones(2)})
    pd["v"] = nn.Parameter(torch.zeros(1))
    assert list(pd.keys()) == ["w", "v"] and isinstance(pd["w"], nn.Parameter)
    assert "v" in pd and len(pd) == 2
    del pd["w"]
    assert list(pd) == ["v"]
    assert [n for n, _ in pd.named_parameters()] == ["v"]


def test_module_deepcopy_is_independent():
    m = Tree()
    c = copy.deepcopy(m)
    assert c.first.w is not m.first.w and isinstance(c.first.w, nn.Parameter)
    with torch.no_grad():
        c.first.w.add_(1.0)
    np.testing.assert_array_equal(to_np(m.first.w), [1, 2, 3])
    np.testing.assert_array_equal(to_np(c.first.w), [2, 3, 4])


def test_unexpected_init_arguments_and_missing_forward():
    with pytest.raises(TypeError):
        nn.Module(3)
    with pytest.raises(NotImplementedError, match="forward"):
        nn.Module()(torch.ones(1))


def test_functional_is_importable_the_user_way():
    import importlib
    for name in ("cltorch.nn.functional", "cltorch.nn.init", "cltorch.nn.utils", "cltorch.nn.parameter",
                 "cltorch.nn.modules", "cltorch.nn.utils.clip_grad", "cltorch.nn.attention"):
        importlib.import_module(name)
    assert F.relu is nn.functional.relu
    assert re.match(r"^<class 'cltorch\.nn\.modules\.linear\.Linear'>$", repr(nn.Linear))


@pytest.mark.parametrize("device", DEVICES)
def test_pytorch_checkpoint_loads_into_modules(device):
    """A state dict that PyTorch 2.13 saved (tests/golden/golden_v1.pt, Sequential(Linear(3, 2), BatchNorm1d(2)))
    loads with strict key checking, keeps its version metadata, and the model computes with it."""
    import os
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "golden_v1.pt")
    sd = torch.load(path)["module"]  # host tensors, loaded into a module on the device
    net = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2)).to(device)
    assert net.load_state_dict(sd).missing_keys == []
    assert sd._metadata["1"]["version"] == 2
    net.eval()
    x = np.arange(6, dtype=np.float32).reshape(2, 3) / 5
    w, b = to_np(sd["0.weight"]), to_np(sd["0.bias"])
    rm, rv = to_np(sd["1.running_mean"]), to_np(sd["1.running_var"])
    g, beta = to_np(sd["1.weight"]), to_np(sd["1.bias"])
    want = ((x @ w.T + b) - rm) / np.sqrt(rv + 1e-5) * g + beta
    got = net(torch.from_numpy(x).to(device))
    np.testing.assert_allclose(to_np(got), want, rtol=1e-5, atol=1e-6)
    assert net[1].num_batches_tracked.item() == 1
