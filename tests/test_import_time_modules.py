"""The modules scripts import at their first lines: backends flags, onnx stub, distributed names, DataParallel, jit, hub,
testing, autograd.functional, profiler. Values are checked against torch where torch defines them."""
import os
import pathlib
import re

import numpy as np
import pytest

import cltorch
import cltorch.nn as nn


def test_backends_flags_keep_what_is_set():
    import cltorch.backends.cudnn as cudnn
    import cltorch.backends.cuda
    import cltorch.backends.mps
    assert cudnn is cltorch.backends.cudnn
    assert cudnn.is_available() is False and cudnn.version() is None
    old = cudnn.benchmark
    cudnn.benchmark = True
    assert cltorch.backends.cudnn.benchmark is True
    cudnn.benchmark = old
    with cudnn.flags(enabled=False, deterministic=True):
        assert cudnn.deterministic is True and cudnn.enabled is False
    assert cudnn.deterministic is False and cudnn.enabled is True
    cltorch.backends.cuda.matmul.allow_tf32 = True
    assert cltorch.backends.cuda.matmul.allow_tf32 is True
    cltorch.backends.cuda.matmul.allow_tf32 = False
    assert cltorch.backends.mps.is_available() is False and cltorch.backends.cuda.is_built() is False
    assert cltorch.backends.opencl.is_available() == cltorch.cl.is_available()


def test_backends_defaults_match_torch():
    torch = pytest.importorskip("torch")
    for mod in ("cudnn", "mkldnn"):
        for flag in ("enabled", "deterministic", "benchmark", "allow_tf32"):
            t = getattr(getattr(torch.backends, mod), flag, None)
            if t is not None and hasattr(getattr(cltorch.backends, mod), flag):
                if mod == "mkldnn" and flag == "allow_tf32":
                    continue
                assert getattr(getattr(cltorch.backends, mod), flag) == t, (mod, flag)
    assert cltorch.backends.cuda.matmul.allow_tf32 == torch.backends.cuda.matmul.allow_tf32


def test_onnx_export_raises():
    import cltorch.onnx
    with pytest.raises(NotImplementedError, match="ONNX export"):
        cltorch.onnx.export(nn.Linear(2, 2), (cltorch.ones(1, 2),), "m.onnx")
    with pytest.raises(NotImplementedError, match="ONNX export"):
        cltorch.onnx.dynamo_export(nn.Linear(2, 2), cltorch.ones(1, 2))
    assert cltorch.onnx.is_in_onnx_export() is False


def test_distributed_names():
    # the MPI backend itself is tested in tests/test_distributed.py; here: the import-time names
    import cltorch.distributed as dist
    assert dist.is_initialized() is False
    assert dist.ReduceOp.SUM != dist.ReduceOp.MAX and dist.Backend("GLOO") == dist.Backend.GLOO
    for name in ("init_device_mesh", "TCPStore", "all_reduce_coalesced"):
        with pytest.raises(NotImplementedError, match=f"does not provide {name}"):
            getattr(dist, name)()
    with pytest.raises(AttributeError, match="no_such_thing"):
        dist.no_such_thing
    torch = pytest.importorskip("torch")
    import torch.distributed as tdist
    assert {m.name for m in dist.ReduceOp} - {"UNUSED"} <= set(dir(tdist.ReduceOp)) | {"UNUSED"}
    for name in dist._CALLABLES:
        assert hasattr(tdist, name), name


def test_data_parallel_single_device(device):
    import cltorch.nn.parallel
    cltorch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).to(device)
    x = cltorch.randn(5, 3)
    ref = net(x.to(device))
    for ids in (None, [cltorch.device(device)], [device]):
        dp = nn.DataParallel(net, device_ids=ids)
        out = dp(x.to(device) if ids is None else x)     # one device given: inputs are moved there
        np.testing.assert_allclose(out.detach().cpu().numpy(), ref.detach().cpu().numpy(), rtol=1e-6)
        assert str(out.device) == str(ref.device)
    assert list(dp.state_dict()) == ["module." + k for k in net.state_dict()]
    assert cltorch.nn.parallel.DataParallel is nn.DataParallel
    out = cltorch.nn.parallel.data_parallel(net, x.to(device), output_device="cpu")
    assert str(out.device) == "cpu"


def test_data_parallel_errors():
    from cltorch.nn.parallel import DistributedDataParallel
    net = nn.Linear(2, 2)
    if cltorch.cl.device_count() >= 1:
        with pytest.raises(RuntimeError, match="parameters and buffers on device cl:0"):
            nn.DataParallel(net, device_ids=[0])(cltorch.ones(1, 2))
        with pytest.raises(NotImplementedError, match="multi-device DataParallel"):
            nn.DataParallel(net, device_ids=["cpu", 0])
    with pytest.raises(RuntimeError, match="DistributedDataParallel needs a process group"):
        DistributedDataParallel(net)


def test_jit_runs_eagerly(capsys):
    import cltorch.jit as jit
    import cltorch.jit

    class M(nn.Module):
        @jit.ignore
        def helper(self, x):
            return x * 2

        @jit.export
        def other(self, x):
            return x + 1

        @jit.unused
        def unused(self, x):
            return x

        def forward(self, x):
            return self.helper(x)

    m = M()
    assert jit.script(m) is m and jit.trace(m, cltorch.ones(1)) is m
    assert "running eagerly" in capsys.readouterr().err
    f = jit.ignore(drop=True)(lambda x: x)
    assert f(3) == 3 and jit.is_scripting() is False and jit.wait(jit.fork(lambda a: a + 1, 1)) == 2
    with pytest.raises(NotImplementedError, match="TorchScript"):
        jit.save(m, "m.pt")
    with pytest.raises(NotImplementedError, match="TorchScript"):
        cltorch.jit.load("m.pt")


def test_hub_local_and_url(tmp_path):
    import cltorch.hub as hub
    from cltorch.utils import model_zoo
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "hubconf.py").write_text("import cltorch\n\ndef tiny(n=3):\n    '''a tiny model'''\n"
                                     "    return cltorch.nn.Linear(n, 1)\n")
    m = hub.load(str(repo), "tiny", n=4, source="local")
    assert m.weight.shape == (1, 4) and "tiny" in hub.list(str(repo), source="local")
    assert hub.help(str(repo), "tiny", source="local") == "a tiny model"
    with pytest.raises(NotImplementedError, match="GitHub"):
        hub.load("owner/repo", "tiny")
    with pytest.raises(ValueError, match="Unknown source"):
        hub.load(str(repo), "tiny", source="ftp")
    src = tmp_path / "w.pt"
    cltorch.save({"w": cltorch.arange(3.0)}, src)
    import hashlib
    h = hashlib.sha256(src.read_bytes()).hexdigest()
    named = tmp_path / f"w-{h[:8]}.pt"
    named.write_bytes(src.read_bytes())
    sd = model_zoo.load_url(named.as_uri(), model_dir=str(tmp_path / "cache"), check_hash=True)
    assert sd["w"].tolist() == [0.0, 1.0, 2.0] and (tmp_path / "cache" / named.name).exists()
    bad = tmp_path / "w-deadbeef.pt"
    bad.write_bytes(src.read_bytes())
    with pytest.raises(RuntimeError, match="invalid hash value"):
        hub.load_state_dict_from_url(bad.as_uri(), model_dir=str(tmp_path / "cache2"), check_hash=True)
    assert not os.listdir(tmp_path / "cache2")


def _messages(fn, cases):
    out = []
    for a, e, kw in cases:
        try:
            fn(a, e, **kw)
            out.append(None)
        except (AssertionError, ValueError, TypeError) as err:
            text = re.sub(r"\bcltorch\.(_tensor\.)?|\btorch\.", "T.", str(err))
            out.append((type(err).__name__, text))
    return out


def test_assert_close_matches_torch():
    torch = pytest.importorskip("torch")
    from cltorch.testing import assert_close

    def cases(lib, arr):
        return [(lib.tensor([1., 2., 3.]), lib.tensor([1., 2.5, 3.]), {}),
                (lib.tensor([1, 2, 3]), lib.tensor([1, 4, 3]), {}),
                (lib.tensor([1., 2.]), lib.tensor([1., 2., 3.]), {}),
                (lib.tensor([1., 2.]), lib.tensor([1., 2.], dtype=lib.float64), {}),
                (lib.tensor([1., 2.]), lib.tensor([1., 2.], dtype=lib.float64), {"check_dtype": False}),
                (1.0, 1.5, {}), (1, 2, {}), (lib.tensor(1.), lib.tensor(1.5), {}),
                (lib.tensor([1.]), lib.tensor([1.]), {"rtol": 1e-3}),
                ([lib.tensor([1.]), lib.tensor([2.])], [lib.tensor([1.]), lib.tensor([3.])], {}),
                ({"a": lib.tensor([1.])}, {"a": lib.tensor([2.])}, {}),
                (lib.tensor([float("nan")]), lib.tensor([float("nan")]), {}),
                (lib.tensor([float("nan")]), lib.tensor([float("nan")]), {"equal_nan": True}),
                (lib.tensor([1.]), arr, {}),
                (lib.tensor([[1., 2.], [3., 4.]]), lib.tensor([[1., 2.], [3., 5.]]), {}),
                (lib.tensor([1., 2.]), lib.tensor([1., 1.0001]), {"rtol": 1e-3, "atol": 0.0}),
                (lib.tensor([1., 2.]), lib.tensor([1., 3.]), {"msg": "custom"}),
                (lib.tensor([True]), lib.tensor([False]), {})]
    arr = np.array([1.0])
    assert _messages(assert_close, cases(cltorch, arr)) == _messages(torch.testing.assert_close, cases(torch, arr))


def test_make_tensor():
    from cltorch.testing import make_tensor
    x = make_tensor(4, 6, dtype=cltorch.float32, device="cpu", noncontiguous=True, low=-2, high=3)
    assert x.shape == (4, 6) and not x.is_contiguous()
    v = x.numpy()
    assert v.min() >= -2 and v.max() < 3
    i = make_tensor((50,), dtype=cltorch.int64, device="cpu", low=0, high=3, exclude_zero=True)
    assert set(i.tolist()) <= {1, 2}
    assert make_tensor(3, dtype=cltorch.float32, device="cpu", requires_grad=True).requires_grad
    with pytest.raises(ValueError, match="low"):
        make_tensor(3, dtype=cltorch.float32, device="cpu", low=2, high=1)


def test_autograd_functional_matches_torch(device):
    torch = pytest.importorskip("torch")
    import cltorch.autograd.functional as F
    import torch.autograd.functional as TF
    rng = np.random.default_rng(0)
    x, y, v = rng.normal(size=3), rng.normal(size=2), rng.normal(size=3)

    def f(a, b):
        return (a[:2] * b).sin(), (a ** 2).sum() * b

    def c(a):
        return cltorch.tensor(a, dtype=cltorch.float64, device=device) if device == "cpu" else \
            cltorch.tensor(a.astype(np.float32), device=device)

    tol = dict(rtol=1e-9, atol=1e-12) if device == "cpu" else dict(rtol=1e-4, atol=1e-5)
    tt = torch.tensor if device == "cpu" else (lambda a: torch.tensor(a.astype(np.float32)))

    got, ref = F.jacobian(f, (c(x), c(y))), TF.jacobian(f, (tt(x), tt(y)))
    for gi, ri in zip(got, ref):
        for a, b in zip(gi, ri):
            np.testing.assert_allclose(a.cpu().numpy(), b.numpy(), **tol)

    def g(a):
        return (a.exp() * a).sum()

    np.testing.assert_allclose(F.hessian(g, c(x)).cpu().numpy(), TF.hessian(g, tt(x)).numpy(), **tol)

    def h(a):
        return a.sin() * a.sum()

    for ours, theirs in ((F.jvp, TF.jvp), (F.vjp, TF.vjp), (F.hvp, TF.hvp), (F.vhp, TF.vhp)):
        fn = g if ours in (F.hvp, F.vhp) else h
        (o1, r1), (o2, r2) = ours(fn, c(x), c(v)), theirs(fn, tt(x), tt(v))
        np.testing.assert_allclose(o1.cpu().numpy(), o2.numpy(), **tol)
        np.testing.assert_allclose(r1.cpu().numpy(), r2.numpy(), **tol)
    with pytest.raises(RuntimeError, match="independent of input 1"):
        F.vjp(lambda a, b: a * 2, (c(x), c(x)), c(v), strict=True)


def test_profiler_runs_code_and_refuses_results():
    import cltorch.autograd.profiler
    from cltorch.profiler import profile, record_function, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with record_function("step"):
            y = cltorch.ones(3) * 2
        prof.step()
    assert y.tolist() == [2.0, 2.0, 2.0] and prof.step_num == 1
    with pytest.raises(NotImplementedError, match="op-level"):
        prof.key_averages()
    with cltorch.autograd.profiler.profile() as p2:
        pass
    with pytest.raises(NotImplementedError):
        p2.export_chrome_trace("t.json")


def test_small_paths():
    from cltorch.autograd.variable import Variable
    from cltorch.autograd.function import Function
    import cltorch.version
    import cltorch.compiler
    t = cltorch.ones(2)
    assert Variable(t) is t and isinstance(t, Variable) and Variable(t, requires_grad=True).requires_grad
    assert Function is cltorch.autograd.Function
    assert cltorch.version.cuda is None and cltorch.version.__version__ == cltorch.__version__
    assert cltorch.compiler.is_compiling() is False
    from cltorch.nn.modules.batchnorm import BatchNorm2d
    from cltorch.nn.modules.utils import _pair
    assert BatchNorm2d is nn.BatchNorm2d and _pair(3) == (3, 3)


def test_tool_regenerates_the_list(tmp_path):
    """The checked-in list is what the tool writes from the installed torch (when it is the same version)."""
    torch = pytest.importorskip("torch")
    listed = pathlib.Path(__file__).with_name("torch_public_modules.txt").read_text()
    if torch.__version__.split("+")[0] not in listed.splitlines()[0]:
        pytest.skip("installed torch differs from the version the list was written from")
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "tpm", pathlib.Path(__file__).resolve().parents[1] / "tools" / "torch_public_modules.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import os as _os
    out = ["torch"]
    mod.walk(_os.path.dirname(torch.__file__), "torch", out)
    assert sorted(out) == [ln for ln in listed.splitlines() if not ln.startswith("#")]
