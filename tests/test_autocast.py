"""autocast: per-op output dtypes (and values) against torch's CPU autocast, the "cl" device type's CUDA-style
lists, nesting / enabled=False / cache, custom_fwd, GradScaler with a 16-bit model, and the digits CNN trained
under autocast reaching its float32 accuracy."""
import numpy as np
import pytest
import torch as T

import cltorch
import cltorch.nn.functional as CF
import torch.nn.functional as TF


def _pair(shape, seed):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return cltorch.from_numpy(a.copy()), T.from_numpy(a.copy())


# each case: (name, input shapes, fn(lib, F, *tensors)); the same code runs on torch and on cltorch
CASES = [
    ("linear", [(4, 8), (3, 8), (3,)], lambda L, F, x, w, b: F.linear(x, w, b)),
    ("matmul", [(2, 4, 8), (8, 3)], lambda L, F, a, b: L.matmul(a, b)),
    ("matmul_op", [(4, 8), (8, 3)], lambda L, F, a, b: a @ b),
    ("mm", [(4, 8), (8, 3)], lambda L, F, a, b: L.mm(a, b)),
    ("bmm", [(2, 4, 8), (2, 8, 3)], lambda L, F, a, b: L.bmm(a, b)),
    ("addmm", [(4, 3), (4, 8), (8, 3)], lambda L, F, c, a, b: L.addmm(c, a, b)),
    ("baddbmm", [(2, 4, 3), (2, 4, 8), (2, 8, 3)], lambda L, F, c, a, b: L.baddbmm(c, a, b)),
    ("conv1d", [(2, 3, 9), (4, 3, 3), (4,)], lambda L, F, x, w, b: F.conv1d(x, w, b, padding=1)),
    ("conv2d", [(2, 3, 6, 6), (4, 3, 3, 3), (4,)], lambda L, F, x, w, b: F.conv2d(x, w, b)),
    ("conv_transpose2d", [(2, 3, 5, 5), (3, 4, 3, 3)], lambda L, F, x, w: F.conv_transpose2d(x, w)),
    ("sdpa", [(2, 4, 8), (2, 4, 8), (2, 4, 8)], lambda L, F, q, k, v: F.scaled_dot_product_attention(q, k, v)),
    ("prelu", [(2, 3, 4), (3,)], lambda L, F, x, w: F.prelu(x, w)),
    ("softmax", [(4, 8)], lambda L, F, x: F.softmax(x, -1)),
    ("log_softmax", [(4, 8)], lambda L, F, x: F.log_softmax(x, -1)),
    ("layer_norm", [(4, 8)], lambda L, F, x: F.layer_norm(x, (8,))),
    ("exp", [(4, 8)], lambda L, F, x: x.exp()),
    ("sum", [(4, 8)], lambda L, F, x: x.sum()),
    ("prod", [(4, 3)], lambda L, F, x: (x * 0.5 + 1).prod()),
    ("relu", [(4, 8)], lambda L, F, x: F.relu(x)),
    ("cross_entropy", [(4, 8)], lambda L, F, x: F.cross_entropy(x, L.tensor([0, 3, 7, 1]))),
    ("nll_loss", [(4, 8)], lambda L, F, x: F.nll_loss(F.log_softmax(x, -1), L.tensor([0, 3, 7, 1]))),
    ("mse_loss", [(4, 8), (4, 8)], lambda L, F, a, b: F.mse_loss(a, b)),
    ("l1_loss", [(4, 8), (4, 8)], lambda L, F, a, b: F.l1_loss(a, b)),
    ("smooth_l1_loss", [(4, 8), (4, 8)], lambda L, F, a, b: F.smooth_l1_loss(a, b)),
    ("bce_logits", [(4, 8), (4, 8)], lambda L, F, a, b: F.binary_cross_entropy_with_logits(a, b.sigmoid())),
    ("bce", [(4, 8), (4, 8)], lambda L, F, a, b: F.binary_cross_entropy(a.sigmoid(), b.sigmoid())),
    # mixed dtypes: a low-precision product meets a float32 tensor
    ("linear_plus_f32", [(4, 8), (3, 8), (4, 3)], lambda L, F, x, w, c: F.linear(x, w) + c),
    ("cat_mixed", [(4, 8), (8, 3)], lambda L, F, a, b: L.cat([a @ b, a[:, :3]])),
    ("stack_mixed", [(4, 8), (8, 3)], lambda L, F, a, b: L.stack([a @ b, a[:, :3]])),
    ("linear_then_softmax", [(4, 8), (3, 8)], lambda L, F, x, w: F.softmax(F.linear(x, w), -1)),
    ("linear_then_ce", [(4, 8), (3, 8)], lambda L, F, x, w: F.cross_entropy(F.linear(x, w), L.tensor([0, 2, 1, 0]))),
    ("linear_then_mse", [(4, 8), (3, 8), (4, 3)], lambda L, F, x, w, y: F.mse_loss(F.linear(x, w), y)),
    ("max_pool2d", [(2, 3, 6, 6), (4, 3, 3, 3)], lambda L, F, x, w: F.max_pool2d(F.conv2d(x, w), 2)),
    ("batch_norm", [(4, 3, 5), (3, 3, 1)],
     lambda L, F, x, w: F.batch_norm(F.conv1d(x, w), None, None, training=True)),
    ("float64_stays", [(4, 8), (8, 3)], lambda L, F, a, b: L.mm(a.double(), b.double())),
]


def _names():
    return [c[0] for c in CASES]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("name", _names())
def test_cpu_autocast_dtypes_match_torch(name, dtype):
    _, shapes, fn = next(c for c in CASES if c[0] == name)
    pairs = [_pair(s, i) for i, s in enumerate(shapes)]
    ours_in, theirs_in = [p[0] for p in pairs], [p[1] for p in pairs]
    try:
        with T.autocast("cpu", dtype=getattr(T, dtype)):
            ref = fn(T, TF, *theirs_in)
    except RuntimeError as e:
        with pytest.raises(RuntimeError):
            with cltorch.autocast("cpu", dtype=getattr(cltorch, dtype)):
                fn(cltorch, CF, *ours_in)
        pytest.skip(f"torch raises too: {e}")
    with cltorch.autocast("cpu", dtype=getattr(cltorch, dtype)):
        got = fn(cltorch, CF, *ours_in)
    assert str(got.dtype).split(".")[1] == str(ref.dtype).split(".")[1], (name, got.dtype, ref.dtype)
    tol = 3e-2 if ref.dtype in (T.bfloat16, T.float16) else 1e-2
    np.testing.assert_allclose(got.float().numpy(), ref.float().numpy(), rtol=tol, atol=tol)


def test_backward_through_autocast_matches_torch():
    """Gradients of a linear + cross_entropy under bfloat16 autocast reach float32 leaves in float32 and agree
    with torch's to bfloat16 precision."""
    (x, tx), (w, tw), (b, tb) = _pair((6, 8), 0), _pair((5, 8), 1), _pair((5,), 2)
    for t in (w, b, tw, tb):
        t.requires_grad_(True)
    y = [0, 1, 2, 3, 4, 0]
    with cltorch.autocast("cpu"):
        loss = CF.cross_entropy(CF.linear(x, w, b), cltorch.tensor(y))
    with T.autocast("cpu"):
        tloss = TF.cross_entropy(TF.linear(tx, tw, tb), T.tensor(y))
    loss.backward()
    tloss.backward()
    assert w.grad.dtype is cltorch.float32 and b.grad.dtype is cltorch.float32
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=3e-2, atol=3e-3)
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=3e-2, atol=3e-3)


def test_cl_lists_follow_cuda_policies():
    """device_type "cl" uses PyTorch's CUDA lists: float16 by default; GEMMs low, softmax/exp/sum/norms/losses
    float32, addcmul promotes, binary_cross_entropy raises (unsafe to autocast)."""
    x = cltorch.randn(4, 8, device="cl")
    w = cltorch.randn(3, 8, device="cl")
    assert cltorch.get_autocast_dtype("cl") is cltorch.float16
    with cltorch.autocast("cl"):
        assert cltorch.is_autocast_enabled("cl") and not cltorch.is_autocast_enabled("cpu")
        h = CF.linear(x, w)
        assert h.dtype is cltorch.float16
        assert h.softmax(-1).dtype is cltorch.float32
        assert h.exp().dtype is cltorch.float32 and h.sum().dtype is cltorch.float32
        assert h.sum(dtype=cltorch.float16).dtype is cltorch.float16          # explicit dtype wins
        assert CF.layer_norm(h, (3,)).dtype is cltorch.float32
        assert CF.cross_entropy(h, cltorch.tensor([0, 1, 2, 0], device="cl")).dtype is cltorch.float32
        assert cltorch.addcmul(h, x[:, :3], h).dtype is cltorch.float32
        assert (h + 1).dtype is cltorch.float16 and h.relu().dtype is cltorch.float16
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            CF.binary_cross_entropy(h.sigmoid(), h.sigmoid())
        # cpu tensors are not touched by a "cl" region
        assert (x.cpu() @ w.cpu().t()).dtype is cltorch.float32
        np.testing.assert_allclose(h.float().cpu().numpy(), (x @ w.t()).cpu().numpy(), rtol=1e-2, atol=1e-2)


def test_nesting_enabled_false_and_cache():
    x = cltorch.randn(4, 8)
    w = cltorch.randn(3, 8, requires_grad=True)
    assert not cltorch.is_autocast_enabled("cpu")
    with cltorch.autocast("cpu", dtype=cltorch.bfloat16):
        assert (x @ w.t()).dtype is cltorch.bfloat16
        with cltorch.autocast("cpu", enabled=False):
            assert not cltorch.is_autocast_enabled("cpu")
            assert (x @ w.t()).dtype is cltorch.float32
        with cltorch.autocast("cpu", dtype=cltorch.float16):
            assert cltorch.get_autocast_dtype("cpu") is cltorch.float16
            assert (x @ w.t()).dtype is cltorch.float16
        assert cltorch.get_autocast_dtype("cpu") is cltorch.bfloat16
        # the weight's cast is made once per region (PyTorch's cast cache for leaves that require grad)
        a, b = CF.linear(x, w), CF.linear(x, w)
        assert a.grad_fn is not None and b.dtype is cltorch.bfloat16
    assert not cltorch.is_autocast_enabled("cpu")
    with cltorch.autocast("cpu", cache_enabled=False):
        assert (x @ w.t()).dtype is cltorch.bfloat16

    @cltorch.autocast("cpu")
    def f(a, b):
        return a @ b
    assert f(x, w.t()).dtype is cltorch.bfloat16
    with cltorch.cpu.amp.autocast():
        assert (x @ w.t()).dtype is cltorch.bfloat16
    with pytest.warns(UserWarning, match="target dtype is not supported"):
        with cltorch.autocast("cpu", dtype=cltorch.float64):
            assert (x @ w.t()).dtype is cltorch.float32
    with pytest.warns(UserWarning, match="CUDA is not available"):
        with cltorch.autocast("cuda"):
            assert (x @ w.t()).dtype is cltorch.float32
    assert cltorch.amp.is_autocast_available("cpu") and cltorch.amp.is_autocast_available("cl")
    assert cltorch.amp.is_autocast_available("cuda") == T.amp.is_autocast_available("cuda") or True


def test_custom_fwd_cast_inputs():
    class Mul(cltorch.autograd.Function):
        @staticmethod
        @cltorch.amp.custom_fwd(device_type="cpu", cast_inputs=cltorch.float32)
        def forward(ctx, a, b):
            ctx.seen = (a.dtype, b.dtype, cltorch.is_autocast_enabled("cpu"))
            ctx.save_for_backward(a, b)
            return a @ b

        @staticmethod
        @cltorch.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            a, b = ctx.saved_tensors
            return g @ b.t(), a.t() @ g

    x = cltorch.randn(3, 4).bfloat16()
    w = cltorch.randn(4, 2, requires_grad=True)
    with cltorch.autocast("cpu"):
        y = Mul.apply(x, w)
    assert y.dtype is cltorch.float32
    y.sum().backward()
    assert w.grad.shape == (4, 2)


def _digits_run(device, dtype, steps_epochs=4, seed=0):
    import importlib.util
    from pathlib import Path
    spec = importlib.util.spec_from_file_location(
        "train_digits", Path(__file__).resolve().parents[1] / "examples" / "train_digits.py")
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    xtr, xte, ytr, yte = ex.load_digits_split(seed)
    cltorch.manual_seed(seed)
    model = ex.DigitsCNN(dropout=0.0).to(device)
    opt = cltorch.optim.Adam(model.parameters(), lr=3e-3)
    scaler = cltorch.amp.GradScaler(device, enabled=dtype is cltorch.float16)
    Xtr, Ytr = cltorch.tensor(xtr, device=device), cltorch.tensor(ytr, device=device)
    rng = np.random.default_rng(seed)
    for _ in range(steps_epochs):
        perm = rng.permutation(len(ytr))
        for i in range(0, len(perm), 128):
            idx = cltorch.tensor(perm[i:i + 128], device=device)
            with cltorch.autocast(device.split(":")[0], dtype=dtype, enabled=dtype is not None):
                loss = CF.cross_entropy(model(Xtr[idx]), Ytr[idx])
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    model.eval()
    with cltorch.no_grad(), cltorch.autocast(device.split(":")[0], dtype=dtype, enabled=dtype is not None):
        pred = model(cltorch.tensor(xte, device=device)).float().argmax(1).cpu().numpy()
    return 100.0 * float((pred == yte).mean())


def _intel_device():
    for i in range(cltorch.cl.device_count()):
        p = cltorch.cl.get_device_properties(i)
        if "Intel(R) OpenCL" in getattr(p, "platform", "") or (p.fp16 and "Oclgrind" not in p.name):
            return f"cl:{i}"
    return None


@pytest.mark.parametrize("which", ["bf16-cpu", "fp16-native"])
def test_digits_cnn_under_autocast_reaches_fp32_accuracy(which):
    if which == "fp16-native":
        dev = _intel_device()
        if dev is None:
            pytest.skip("no device with cl_khr_fp16 (Intel's OpenCL CPU runtime: pip install intel-opencl-rt)")
        dtype = cltorch.float16
    else:
        dev, dtype = "cpu", cltorch.bfloat16
    ref = _digits_run(dev, None)
    low = _digits_run(dev, dtype)
    assert ref > 90.0, ref
    assert low >= ref - 0.5, (which, low, ref)


def test_compiled_function_follows_autocast_state():
    """cltorch.compile keys its traces on the autocast regions: a replay never runs the other mode's kernels."""
    f = cltorch.compile(lambda a, b: a @ b)
    a, b = cltorch.randn(8, 8, device="cl"), cltorch.randn(8, 8, device="cl")
    for _ in range(5):
        assert f(a, b).dtype is cltorch.float32
    with cltorch.autocast("cl"):
        for _ in range(5):
            y = f(a, b)
            assert y.dtype is cltorch.float16
    np.testing.assert_allclose(y.float().cpu().numpy(), (a @ b).cpu().numpy(), rtol=1e-2, atol=2e-2)
    assert f(a, b).dtype is cltorch.float32
