"""Reliability (issue 10): bad input gives the exact error type and a message naming the offending values, on
every device; never a wrong answer, a crash or a hang.

Covered: shape mismatches (elementwise, matmul, cat/stack, view, load_state_dict), dtype problems (integer
tensors into float-only ops, bool arithmetic PyTorch refuses, in-place casts that lose the kind, missing
fp16/fp64 extensions), devices (mixed, unknown strings, an index past the device count), index errors on host
and device, non-finite values (clip_grad_norm_, anomaly mode) and malformed checkpoints of a real model.

Elsewhere, not repeated here: truncated/corrupted kernel cache files (test_backend.py), SIGKILL mid-save and
byte-level checkpoint corruption (test_serialization.py), DataLoader worker deaths (test_data_workers.py).
"""
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cltorch as torch
import cltorch.nn as nn
import cltorch.nn.functional as F
from conftest import to_np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _raises(exc, fn, *fragments):
    """fn() raises exactly ``exc`` (not a subclass of a different kind) and the message holds every fragment."""
    with pytest.raises(Exception) as e:
        fn()
        torch.cl.synchronize()   # device-side checks (bounds flags) report at the next synchronization
    assert type(e.value) is exc or (isinstance(e.value, exc) and exc is not Exception), \
        f"expected {exc.__name__}, got {type(e.value).__name__}: {e.value}"
    msg = str(e.value)
    for f in fragments:
        assert f in msg, f"{f!r} not in message: {msg}"
    return msg


# ------------------------------------------------------------------------------------------ shapes
def test_elementwise_shape_mismatch_names_both_shapes(device):
    a, b = torch.ones(2, 3, device=device), torch.ones(4, 5, device=device)
    _raises(RuntimeError, lambda: a + b, "[2, 3]", "[4, 5]",
            "The size of tensor a (2) must match the size of tensor b (4)")
    _raises(RuntimeError, lambda: torch.maximum(a, torch.ones(3, 2, device=device)), "[2, 3]", "[3, 2]")
    _raises(RuntimeError, lambda: torch.where(torch.ones(2, 3, device=device) > 0, a, b), "[4, 5]")
    # in place: the result may not grow self
    _raises(RuntimeError, lambda: torch.ones(3, device=device).add_(a), "output with shape [3]", "[2, 3]")
    _raises(RuntimeError, lambda: torch.zeros(3, device=device).copy_(torch.ones(4, device=device)), "[3]", "[4]")


def test_matmul_shape_errors_name_shapes_and_dims(device):
    a, b = torch.ones(2, 3, device=device), torch.ones(4, 5, device=device)
    _raises(RuntimeError, lambda: a @ b, "2x3", "4x5", "(3 vs 4)")
    _raises(RuntimeError, lambda: torch.mm(a, b), "2x3", "4x5")
    _raises(RuntimeError, lambda: torch.bmm(torch.ones(2, 3, 4, device=device), torch.ones(2, 5, 6, device=device)),
            "3x4", "5x6", "(4 vs 5)")
    _raises(RuntimeError, lambda: torch.mm(torch.ones(2, 3, 4, device=device), a), "2D", "3D")
    _raises(RuntimeError, lambda: torch.matmul(torch.ones(2, 3, 4, device=device), torch.ones(3, 4, 5, device=device)),
            "(2)", "(3)")
    _raises(RuntimeError, lambda: torch.mv(a, torch.ones(4, device=device)), "2x3", "(3 vs 4)")
    _raises(RuntimeError, lambda: F.linear(a, torch.ones(4, 5, device=device)), "2x3", "5x4")
    _raises(RuntimeError, lambda: torch.dot(torch.ones(3, device=device), torch.ones(4, device=device)), "[3]", "[4]")
    _raises(RuntimeError, lambda: torch.matmul(torch.tensor(1.0, device=device), a), "0D")


def test_cat_stack_errors(device):
    a, b = torch.ones(2, 3, device=device), torch.ones(4, 5, device=device)
    _raises(RuntimeError, lambda: torch.cat([a, b]), "Expected size 3 but got size 5 for tensor number 1")
    _raises(RuntimeError, lambda: torch.cat([a, torch.ones(2, 3, 1, device=device)]), "2", "3")
    _raises(IndexError, lambda: torch.cat([a, a], 2), "[-2, 1]", "got 2")
    _raises(RuntimeError, lambda: torch.cat([]), "non-empty")
    _raises(RuntimeError, lambda: torch.stack([a, b]), "[2, 3] at entry 0", "[4, 5] at entry 1")


def test_view_errors_name_size_and_stride(device):
    a = torch.ones(2, 3, device=device)
    _raises(RuntimeError, lambda: a.view(4, 2), "'[4, 2]'", "size 6")
    _raises(RuntimeError, lambda: a.t().view(6), "[3, 2]", "[1, 3]", "reshape")
    _raises(RuntimeError, lambda: a.reshape(5, -1), "'[5, -1]'", "size 6")
    _raises(RuntimeError, lambda: a.expand(4, 3), "(4)", "(2)", "[4, 3]", "[2, 3]")


def test_load_state_dict_names_key_and_shapes(device):
    m = nn.Sequential(nn.Linear(3, 2), nn.ReLU(), nn.Linear(2, 1)).to(device)
    before = {k: to_np(v).copy() for k, v in m.state_dict().items()}
    sd = {k: v.clone() for k, v in m.state_dict().items()}
    sd["0.weight"] = torch.ones(4, 3, device=device)
    msg = _raises(RuntimeError, lambda: m.load_state_dict(sd), "size mismatch for 0.weight", "[4, 3]", "[2, 3]")
    assert "Sequential" in msg
    # strict=False still refuses a size mismatch (PyTorch)
    _raises(RuntimeError, lambda: m.load_state_dict(sd, strict=False), "0.weight", "[4, 3]", "[2, 3]")
    sd = {k: v.clone() for k, v in m.state_dict().items()}
    del sd["2.bias"]
    sd["2.extra"] = torch.ones(1)
    _raises(RuntimeError, lambda: m.load_state_dict(sd), 'Missing key(s) in state_dict: "2.bias"',
            'Unexpected key(s) in state_dict: "2.extra"')
    r = m.load_state_dict(sd, strict=False)
    assert list(r.missing_keys) == ["2.bias"] and list(r.unexpected_keys) == ["2.extra"]
    after = m.state_dict()
    for k in ("0.weight", "0.bias", "2.bias"):      # the refused loads wrote nothing
        np.testing.assert_array_equal(to_np(after[k]), before[k])


# ------------------------------------------------------------------------------------------ dtypes
def test_integer_tensors_into_float_only_ops(device):
    i = torch.tensor([[1, 4], [2, 3]], device=device)
    for fn, name in ((F.silu, "silu"), (torch.frac, "frac"), (F.gelu, "gelu"), (F.mish, "mish")):
        _raises(RuntimeError, lambda fn=fn: fn(i), name, "int64")
    _raises(RuntimeError, lambda: F.softmax(i, 1), "Int64", "softmax")
    _raises(RuntimeError, lambda: F.log_softmax(i, 1), "Int64")
    _raises(RuntimeError, lambda: i.mean(), "mean", "Long")    # torch names the dtype Long here
    _raises(RuntimeError, lambda: F.layer_norm(i, (2,)), "layer_norm", "int64")
    _raises(RuntimeError, lambda: torch.tensor([1, 2], device=device).requires_grad_(), "floating point")
    # integer ops that PyTorch promotes instead of refusing must give the float answer
    np.testing.assert_allclose(to_np(torch.sqrt(i)), np.sqrt([[1, 4], [2, 3]]).astype(np.float32))
    assert torch.sqrt(i).dtype is torch.float32


def test_bool_arithmetic_pytorch_refuses(device):
    tb = torch.tensor([True, False], device=device)
    _raises(RuntimeError, lambda: tb - tb, "Subtraction", "bool", "logical_xor")
    _raises(RuntimeError, lambda: -tb, "Negation", "bool", "logical_not")
    _raises(RuntimeError, lambda: torch.neg(tb), "Negation")
    _raises(RuntimeError, lambda: tb.clone().neg_(), "Negation")
    f = torch.tensor([1.5, 2.0], device=device)
    _raises(RuntimeError, lambda: f & f, "bitwise_and", "Float32")
    _raises(RuntimeError, lambda: f ^ f, "bitwise_xor", "Float32")
    _raises(RuntimeError, lambda: ~f, "bitwise_not", "Float32")
    # what PyTorch allows must give its answer
    assert to_np(~tb).tolist() == [False, True]
    assert to_np(tb + tb).tolist() == [True, False] and (tb + tb).dtype is torch.bool
    assert to_np(tb - 1).tolist() == [0, -1] and (tb - 1).dtype is torch.int64
    u = torch.tensor([0, 1, 254], dtype=torch.uint8, device=device)
    assert to_np(~u).tolist() == [255, 254, 1]
    assert to_np(~torch.tensor([0, 5, -3], device=device)).tolist() == [-1, -6, 2]


def test_inplace_casts_that_lose_the_kind(device):
    ti = torch.tensor([1, 2], device=device)
    tb = torch.tensor([True, False], device=device)
    msg = "result type Float32 can't be cast to the desired output type Int64"
    _raises(RuntimeError, lambda: ti.add_(0.5), msg)
    _raises(RuntimeError, lambda: ti.mul_(torch.tensor([1.5, 2.0], device=device)), msg)
    _raises(RuntimeError, lambda: ti.sqrt_(), msg)
    _raises(RuntimeError, lambda: ti.div_(2), msg)
    _raises(RuntimeError, lambda: ti.__iadd__(torch.ones(2, device=device)), msg)
    _raises(RuntimeError, lambda: tb.add_(1), "Int64 can't be cast to the desired output type Bool")
    assert to_np(ti).tolist() == [1, 2] and to_np(tb).tolist() == [True, False]     # nothing written
    # kind-keeping in-place ops and explicit copies still work
    ti.add_(3)
    assert to_np(ti).tolist() == [4, 5]
    ti.copy_(torch.tensor([2.7, -1.2], device=device))        # copy_ truncates, as PyTorch
    assert to_np(ti).tolist() == [2, -1]


def _run(code, env=None, timeout=120):
    e = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    e.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=e,
                          timeout=timeout, cwd=ROOT)


def test_fp64_on_a_device_without_the_extension_subprocess():
    """CLTORCH_MASK_CAPS=fp64 hides cl_khr_fp64: float64 anywhere it would reach the device raises TypeError naming
    the device and the extension; float32 work in the same process is unaffected."""
    r = _run("""
        import cltorch as torch
        name = torch.cl.get_device_name(0)
        x = torch.arange(4, dtype=torch.float32, device="cl:0")
        for label, fn in [("create", lambda: torch.zeros(2, dtype=torch.float64, device="cl:0")),
                          ("to", lambda: x.to(torch.float64)),
                          ("double", lambda: x.double()),
                          ("tensor", lambda: torch.tensor([1.5], dtype=torch.float64, device="cl:0"))]:
            try:
                fn()
                print(label, "NO ERROR")
            except TypeError as e:
                assert name in str(e) and "cl_khr_fp64" in str(e) and "float64" in str(e), str(e)
                print(label, "TypeError")
        print("sum", (x * 2).sum().item())
    """, env={"CLTORCH_MASK_CAPS": "fp64"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["create", "TypeError", "to", "TypeError", "double", "TypeError", "tensor",
                                "TypeError", "sum", "12.0"], r.stdout


def test_fp16_without_the_extension(device, monkeypatch):
    info = torch.cl.get_device_properties(0)
    monkeypatch.setattr(info, "fp16", False)     # PoCL lacks it anyway; forces the storage path on any device
    # float16 without the extension is 16-bit storage with float32 arithmetic, rounded as numpy's float16
    x = torch.tensor([1 / 3, 2.0, 20000.0], device=device)
    h = x.half()
    assert h.dtype is torch.float16
    ref = np.array([1 / 3, 2.0, 20000.0], np.float32).astype(np.float16)
    assert h.tolist() == ref.astype(np.float64).tolist()
    assert (h * 3).tolist() == (ref.astype(np.float32) * 3).astype(np.float16).astype(np.float64).tolist()


# ------------------------------------------------------------------------------------------ devices
def test_mixed_devices_name_both():
    a, b = torch.ones(3), torch.ones(3, device="cl:0")
    for fn in (lambda: a + b, lambda: b * a, lambda: torch.cat([a, b]),
               lambda: torch.ones(3, 3) @ torch.ones(3, 3, device="cl:0"),
               lambda: torch.where(b > 0, a, b), lambda: torch.gather(b, 0, torch.tensor([0]))):
        msg = _raises(RuntimeError, fn)
        assert "cpu" in msg and "cl:0" in msg, msg
    assert to_np(b + torch.tensor(2.0)).tolist() == [3.0, 3.0, 3.0]       # a 0-d cpu tensor mixes (PyTorch)


def test_unknown_device_strings_say_what_is_available():
    n = torch.cl.device_count()
    avail = [f"'cl:{i}'" for i in range(n)] + ["'cpu'"]
    for spec in ("gpu", "cl:7", "cl:nvidia:3", "cuda", "cuda:0", "cpu:1", "cl:x"):
        if spec == "cl:nvidia:3" and any(torch.cl.get_device_properties(i).cls == "nvidia" for i in range(n)):
            continue
        msg = _raises(RuntimeError, lambda s=spec: torch.ones(2, device=s))
        for a in avail:
            assert a in msg, (spec, msg)
    msg = _raises(RuntimeError, lambda: torch.device("cl:7"), "cl:7")
    assert re.search(rf"{n} OpenCL device", msg), msg
    _raises(RuntimeError, lambda: torch.zeros(2).to("cl:7"), "cl:7")


# ------------------------------------------------------------------------------------------ indices
def _index_cases(device):
    x = torch.arange(5, device=device).float()
    i = lambda v: torch.tensor(v, device=device)  # noqa: E731
    z = lambda: torch.zeros(5, device=device)     # noqa: E731
    return [
        ("getitem int", lambda: x[7], 7, 5),
        ("getitem tensor", lambda: x[i([1, 9])], 9, 5),
        ("getitem negative", lambda: x[i([-6])], -6, 5),
        ("setitem", lambda: z().__setitem__(i([11]), 1.0), 11, 5),
        ("index_put", lambda: z().index_put_((i([0, 6]),), torch.ones(2, device=device), accumulate=True), 6, 5),
        ("gather", lambda: torch.gather(x, 0, i([0, 5])), 5, 5),
        ("scatter", lambda: z().scatter(0, i([0, 8]), torch.ones(2, device=device)), 8, 5),
        ("scatter_add", lambda: z().scatter_add(0, i([0, -7]), torch.ones(2, device=device)), -7, 5),
        ("scatter_reduce", lambda: z().scatter_reduce(0, i([9]), torch.ones(1, device=device), "amax"), 9, 5),
        ("index_select", lambda: torch.index_select(x, 0, i([6])), 6, 5),
        ("index_add", lambda: z().index_add(0, i([5]), torch.ones(1, device=device)), 5, 5),
        ("index_copy", lambda: z().index_copy(0, i([3, 12]), torch.ones(2, device=device)), 12, 5),
        ("index_fill", lambda: z().index_fill(0, i([-9]), 1.0), -9, 5),
        ("take", lambda: torch.take(x, i([20])), 20, 5),
        ("embedding", lambda: F.embedding(i([1, 10]), torch.ones(4, 2, device=device)), 10, 4),
    ]


@pytest.mark.parametrize("case", range(15))
def test_index_errors_name_index_and_size(device, case):
    label, fn, bad, size = _index_cases(device)[case]
    msg = _raises(IndexError, fn)
    assert re.search(rf"(?<![\d-]){bad}(?!\d)", msg) and str(size) in msg, (label, msg)


def test_device_bounds_flag_in_large_launches(device):
    """Kernels check every index: one bad index among many is reported (with the size), the good work after the
    error is right, and a launch with several bad indices names one of them."""
    n = 10000
    x = torch.arange(n, device=device).float()
    idx = np.arange(n)[::-1].copy()
    idx[n - 3] = n + 17
    with pytest.raises(IndexError, match=rf"index {n + 17} is out of bounds for dimension 0 with size {n}"):
        torch.gather(x, 0, torch.tensor(idx, device=device))
        torch.cl.synchronize()
    with pytest.raises(IndexError, match=rf"{n + 17}.*{n}"):
        torch.zeros(n, device=device).scatter_add_(0, torch.tensor(idx, device=device), x)
        torch.cl.synchronize()
    bad = {n + 1, n + 5, -n - 2}
    idx2 = np.zeros(n, np.int64)
    idx2[[10, 5000, 9999]] = list(bad)
    with pytest.raises(IndexError) as e:
        torch.index_select(x, 0, torch.tensor(idx2, device=device))
        torch.cl.synchronize()
    assert any(str(b) in str(e.value) for b in bad), str(e.value)
    # the device is fine afterwards: the same kernels give right answers
    ok = torch.tensor(np.arange(n)[::-1].copy(), device=device)
    np.testing.assert_array_equal(to_np(torch.gather(x, 0, ok)), np.arange(n)[::-1].astype(np.float32))
    np.testing.assert_array_equal(to_np(torch.index_select(x, 0, ok[:3])), [n - 1, n - 2, n - 3])


def test_loss_target_out_of_range(device):
    x = torch.zeros(2, 3, device=device)
    _raises(IndexError, lambda: F.cross_entropy(x, torch.tensor([0, 3], device=device)), "Target 3")
    _raises(IndexError, lambda: F.nll_loss(x, torch.tensor([-2, 0], device=device)), "Target -2")
    assert abs(F.cross_entropy(x, torch.tensor([0, 2], device=device)).item() - np.log(3)) < 1e-6


def test_loss_weight_requiring_grad_is_refused_not_ignored(device):
    """nll_loss/cross_entropy have no weight derivative (PyTorch raises); a silent None gradient would be wrong."""
    x = torch.zeros(2, 3, device=device, requires_grad=True)
    w = torch.ones(3, device=device, requires_grad=True)
    loss = F.cross_entropy(x, torch.tensor([0, 2], device=device), w)
    _raises(RuntimeError, loss.backward, "derivative for 'weight' is not implemented")
    loss = F.cross_entropy(x, torch.full((2, 3), 1 / 3, device=device), w)
    _raises(RuntimeError, loss.backward, "derivative for 'weight' is not implemented")


# ------------------------------------------------------------------------------------------ non-finite values
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_clip_grad_norm_error_if_nonfinite(device, bad):
    p1, p2 = nn.Parameter(torch.ones(3, device=device)), nn.Parameter(torch.ones(2, device=device))
    p1.grad = torch.tensor([3.0, bad, 0.0], device=device)
    p2.grad = torch.tensor([4.0, 0.0], device=device)
    _raises(RuntimeError, lambda: nn.utils.clip_grad_norm_([p1, p2], 1.0, error_if_nonfinite=True),
            "non-finite", "error_if_nonfinite=False")
    assert to_np(p2.grad).tolist() == [4.0, 0.0]          # nothing scaled before the error
    total = nn.utils.clip_grad_norm_([p1, p2], 1.0)        # default: no error, norm reported
    assert not np.isfinite(total.item())
    p1.grad = torch.tensor([3.0, 0.0, 0.0], device=device)
    p2.grad = torch.tensor([4.0, 0.0], device=device)
    total = nn.utils.clip_grad_norm_([p1, p2], 1.0, error_if_nonfinite=True)
    assert abs(total.item() - 5.0) < 1e-6
    np.testing.assert_allclose(to_np(p2.grad), [0.8, 0.0], rtol=1e-5)


def test_anomaly_mode_names_the_forward_op(device):
    def run():
        x = torch.tensor([0.0, 1.0], device=device, requires_grad=True)
        y = x.sqrt() * torch.tensor([0.0, 1.0], device=device)      # d sqrt at 0 is inf; inf * 0 = nan
        y.sum().backward()
        return x.grad

    g = run()                                                          # without anomaly mode: a NaN gradient
    assert np.isnan(to_np(g)[0])
    with torch.autograd.detect_anomaly():
        msg = _raises(RuntimeError, run, "SqrtBackward0", "nan")
    assert "Traceback of forward call" in msg and "x.sqrt()" in msg
    assert not torch.is_anomaly_enabled() if hasattr(torch, "is_anomaly_enabled") else True


# ------------------------------------------------------------------------------------------ checkpoints
def _model(device, seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).to(device)


def test_malformed_checkpoints_of_a_model(device, tmp_path):
    """Truncated file, wrong magic, a tensor of the wrong size: each a clear error, and the model keeps its weights
    (no partial load)."""
    src, dst = _model(device, 0), _model(device, 1)
    good = tmp_path / "m.pt"
    torch.save(src.state_dict(), good)
    raw = good.read_bytes()
    keep = {k: to_np(v).copy() for k, v in dst.state_dict().items()}

    def untouched():
        for k, v in dst.state_dict().items():
            np.testing.assert_array_equal(to_np(v), keep[k])

    for n in (len(raw) // 3, len(raw) - 30, len(raw) - 1):
        (tmp_path / "t.pt").write_bytes(raw[:n])
        with pytest.raises(RuntimeError, match="truncated|corrupt|central directory|zip"):
            dst.load_state_dict(torch.load(tmp_path / "t.pt"))
        untouched()
    (tmp_path / "w.pt").write_bytes(b"\x00\x11" + raw[2:])
    with pytest.raises(RuntimeError, match="magic|zip|corrupt"):
        torch.load(tmp_path / "w.pt")
    untouched()
    sd = src.state_dict()
    sd["2.weight"] = torch.ones(3, 8, device=device)
    torch.save(sd, tmp_path / "s.pt")
    loaded = torch.load(tmp_path / "s.pt")
    _raises(RuntimeError, lambda: dst.load_state_dict(loaded), "size mismatch for 2.weight", "[3, 8]", "[2, 8]")
    # the good checkpoint still loads, exactly
    dst.load_state_dict(torch.load(good))
    for k, v in src.state_dict().items():
        np.testing.assert_array_equal(to_np(dst.state_dict()[k]), to_np(v))


def test_device_side_errors_are_deferred_to_the_next_synchronization(monkeypatch):
    """On an OpenCL device a bounds error is a flag the kernel sets: the op returns without waiting, and the
    error is raised at the next synchronization (as CUDA reports device-side asserts). cpu tensors, whose ops
    finish before returning, raise at the op; so does every device with CLTORCH_LAUNCH_BLOCKING=1."""
    import importlib
    R = importlib.import_module("cltorch.backend.runtime")   # the module (the package exports a function of that name)
    x = torch.zeros(2, 3, device="cl:0")
    bad = torch.tensor([0, 3], device="cl:0")
    loss = F.cross_entropy(x, bad)           # queued; no host read here
    _raises(IndexError, loss.item, "Target 3 is out of bounds")
    assert abs(F.cross_entropy(x, torch.tensor([0, 2], device="cl:0")).item() - np.log(3)) < 1e-6  # flag cleared
    _raises(IndexError, lambda: F.cross_entropy(torch.zeros(2, 3), torch.tensor([0, 3])), "Target 3")
    monkeypatch.setattr(R, "_LAUNCH_BLOCKING", True)
    with pytest.raises(IndexError, match="index 5 is out of bounds"):
        torch.zeros(3, device="cl:0")[torch.tensor([5], device="cl:0")]      # raised at the op itself
