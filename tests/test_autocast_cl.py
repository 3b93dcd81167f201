"""autocast on cl devices against torch's own CUDA autocast test lists, and a float16 GradScaler training loop on cl.

No CUDA here, so torch's CUDA autocast cannot run; its test lists can (torch.testing._internal.autocast_test_lists:
the ops CUDA autocast lowers to float16/bfloat16, runs in float32, or promotes, with their arguments). Each op
cltorch has runs under ``cltorch.autocast("cl", dtype)`` with those arguments and must give the list's dtype.
"""
import numpy as np
import pytest

import cltorch

torch = pytest.importorskip("torch")
lists = pytest.importorskip("torch.testing._internal.autocast_test_lists")

DEV = "cl:0"


def _to_cl(a):
    if isinstance(a, torch.Tensor):
        t = cltorch.from_numpy(a.detach().float().numpy().copy()).to(DEV)
        return t.to(getattr(cltorch, str(a.dtype).split(".")[1]))
    if isinstance(a, (tuple, list)):
        return type(a)(_to_cl(x) for x in a)
    return a


def _function(kind, name, args):
    if kind == "torch":
        return getattr(cltorch, name, None)
    if kind == "nn":
        return getattr(cltorch.nn.functional, name, None)
    if kind == "linalg":
        return getattr(cltorch.linalg, name[len("linalg_"):], None)
    f = getattr(args[0], name, None)          # methods: bound to the first argument
    return None if f is None else (lambda *rest: f(*rest[1:]))


# torch's list entries cltorch cannot take as they are: functions cltorch lacks (torch-internal or cuDNN names, and
# loss functions torch also exposes at top level), a Python 2 method name, and einsum (its entry's arguments are
# the characters of its equation; einsum is checked below with real ones)
_SKIP = {"_convolution", "conv_tbc", "convolution", "cudnn_convolution", "cudnn_convolution_transpose", "nll_loss2d",
         "binary_cross_entropy_with_logits", "cosine_embedding_loss", "hinge_embedding_loss", "kl_div",
         "margin_ranking_loss", "poisson_nll_loss", "triplet_margin_loss", "__div__", "einsum"}


def _cases():
    L = lists.AutocastTestLists(torch.device("cpu"))
    for lst, want in (("torch_fp16", "low"), ("nn_fp16", "low"), ("linalg_fp16", "low"), ("methods_fp16", "low"),
                      ("torch_fp32", "float32"), ("nn_fp32", "float32"), ("methods_fp32", "float32"),
                      ("torch_expect_builtin_promote", "given"), ("methods_expect_builtin_promote", "given")):
        for i, it in enumerate(getattr(L, lst)):
            yield lst, want, i, it


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_cl_autocast_follows_torch_cuda_lists(dtype):
    """Every op of torch's CUDA autocast lists that cltorch has: lowered ops give the region's dtype (each output
    of lstm_cell too), float32 ops float32 (their inputs are float16; under bfloat16 only the lowered ops run, the
    others do not depend on the region's dtype), promoting ops their list's dtype; binary_cross_entropy raises."""
    low = getattr(cltorch, dtype)
    checked, skipped = [], set()
    for lst, want, i, (name, args, *rest) in _cases():
        if name in _SKIP:
            skipped.add(name)
            continue
        if want != "low" and dtype == "bfloat16":
            continue
        cargs = _to_cl(args)
        kind = lst.split("_")[0]
        f = _function(kind, name, cargs)
        assert f is not None, f"cltorch lacks {kind} {name} (torch's CUDA autocast list {lst})"
        with cltorch.autocast("cl", dtype=low):
            out = f(*cargs)
        expect = low if want == "low" else cltorch.float32 if want == "float32" else \
            getattr(cltorch, str(rest[0]).split(".")[1])
        outs = out if isinstance(out, tuple) else (out,)
        if name == "equal":
            assert isinstance(out, bool), (name, type(out))
        else:
            for o in outs:
                assert o.dtype is expect, (lst, i, name, dtype, o.dtype, expect)
        checked.append(name)
    assert len(checked) >= (85 if dtype == "float16" else 25), checked
    assert skipped == _SKIP, skipped ^ _SKIP
    x = cltorch.randn(8, 8, device=DEV)
    with cltorch.autocast("cl", dtype=low):
        assert cltorch.einsum("ij,jk->ik", x, x).dtype is low
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            cltorch.nn.functional.binary_cross_entropy(x.sigmoid(), x.sigmoid())


def _train(lib, device, autocast, steps=24, init_scale=2.0 ** 24):
    """A two-layer classifier trained with SGD, under float16 autocast with a GradScaler (or plain float32): the
    losses, the scales and which steps were skipped."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((64, 16)).astype(np.float32)
    Y = (X[:, :4].argmax(1)).astype(np.int64)
    W1 = (rng.standard_normal((32, 16)) * 0.3).astype(np.float32)
    W2 = (rng.standard_normal((4, 32)) * 0.3).astype(np.float32)
    t = (lambda a: lib.tensor(a, device=device))
    x, y = t(X), t(Y)
    w1, w2 = lib.nn.Parameter(t(W1)), lib.nn.Parameter(t(W2))
    opt = lib.optim.SGD([w1, w2], lr=0.5)
    scaler = lib.amp.GradScaler(device.split(":")[0], init_scale=init_scale, growth_interval=4, enabled=autocast)
    losses, scales, skipped = [], [], []
    for _ in range(steps):
        before = w1.detach().cpu().numpy().copy()
        opt.zero_grad()
        with lib.autocast(device.split(":")[0], dtype=lib.float16, enabled=autocast):
            h = lib.nn.functional.relu(lib.nn.functional.linear(x, w1))
            logits = lib.nn.functional.linear(h, w2)
            loss = lib.nn.functional.cross_entropy(logits, y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(float(loss.item()))
        scales.append(scaler.get_scale() if autocast else 1.0)
        skipped.append(bool(np.array_equal(before, w1.detach().cpu().numpy())))
    return losses, scales, skipped, (h.dtype, logits.dtype, loss.dtype)


def test_grad_scaler_float16_training_on_cl():
    """Training under float16 autocast on cl with a GradScaler: the first steps' scaled float16 gradients overflow
    (scale 2^24), those steps are skipped (the weights stay) and the scale backs off, as torch's GradScaler does
    with the same model under float16 autocast on cpu (same skipped steps, same scales); then the loss falls as
    torch's does, to within float16's rounding."""
    losses, scales, skipped, dts = _train(cltorch, DEV, True)
    assert dts == (cltorch.float16, cltorch.float16, cltorch.float32)
    t_losses, t_scales, t_skipped, _ = _train(torch, "cpu", True)
    assert skipped == t_skipped and scales == t_scales, (skipped, t_skipped, scales, t_scales)
    n = skipped.index(False)
    assert n >= 1 and losses[:n + 1] == [losses[0]] * (n + 1), losses        # skipped steps changed nothing
    assert losses[-1] < 0.6 * losses[0], losses
    np.testing.assert_allclose(losses, t_losses, rtol=2e-2, atol=2e-2)
