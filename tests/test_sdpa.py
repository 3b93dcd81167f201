"""scaled_dot_product_attention: the fused flash-style kernel and the math path against a numpy reference, and
against each other (forward and gradients within 1e-4), on every device; masks, causal with L != S, fully
masked rows, GQA, strided inputs; gradcheck in float64; backend selection with sdpa_kernel."""
import numpy as np
import pytest

import cltorch as torch
from cltorch.autograd import gradcheck, gradgradcheck
from cltorch.ops.attention import scaled_dot_product_attention as sdpa, sdpa_kernel, SDPBackend

DEVICES = ["cpu"] + [f"cl:{i}" for i in range(torch.cl.device_count())]
on_devices = pytest.mark.parametrize("device", DEVICES)


def T(a, device, dtype=None, rg=False):
    return torch.tensor(np.asarray(a), device=device, dtype=dtype, requires_grad=rg)


def A(t):
    return np.array(t.detach().cpu().tolist(), dtype=np.float64)


def ref(q, k, v, g, mask=None, causal=False, scale=None, gqa=1):
    """numpy float64 attention and its gradients (torch 2.13 semantics: fully masked rows give zeros)."""
    q, k, v, g = [np.asarray(a, np.float64) for a in (q, k, v, g)]
    if gqa > 1:
        k = np.repeat(k, gqa, axis=-3)
        v = np.repeat(v, gqa, axis=-3)
    L, S = q.shape[-2], k.shape[-2]
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        s = np.where(np.tril(np.ones((L, S), bool)), s, -np.inf)
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    m = s.max(-1, keepdims=True)
    e = np.exp(s - np.where(np.isinf(m), 0, m))
    den = e.sum(-1, keepdims=True)
    p = np.where(den > 0, e / np.where(den > 0, den, 1), 0)
    o = p @ v
    dv = np.swapaxes(p, -1, -2) @ g
    dp = g @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    dq = ds @ k * scale
    dk = np.swapaxes(ds, -1, -2) @ q * scale
    if gqa > 1:
        dk = dk.reshape(dk.shape[:-3] + (-1, gqa) + dk.shape[-2:]).sum(-3)
        dv = dv.reshape(dv.shape[:-3] + (-1, gqa) + dv.shape[-2:]).sum(-3)
    return o, dq, dk, dv


CASES = [
    # batch shape, L, S, E, EV, causal, mask kind (few distinct (E, EV, mask, causal) signatures: each one builds
    # a kernel program)
    ((2, 3), 5, 7, 8, 8, False, None),
    ((2, 3), 17, 45, 8, 8, True, None),          # L != S, causal top-left
    ((1, 2), 40, 13, 5, 7, True, "bool"),        # odd head dims (padding), mask and causal combined, L > S
    ((2, 2), 9, 21, 64, 64, False, "float"),     # per-batch float mask (B, 1, L, S), a realistic head dim
    ((3,), 33, 33, 8, 8, False, "bool"),         # 3-D inputs
    ((), 6, 10, 8, 8, True, None),               # 2-D inputs
    ((2, 1, 2), 12, 12, 5, 7, True, "bool"),     # 5-D inputs
    ((1, 2), 40, 300, 8, 8, False, None),         # several key chunks (the profile's key_chunk)
    ((1, 1), 300, 290, 8, 8, True, None),         # several query row groups and key chunks, causal
]


def _inputs(rng, bshape, L, S, E, EV, mk):
    q = rng.standard_normal(bshape + (L, E)).astype(np.float32)
    k = rng.standard_normal(bshape + (S, E)).astype(np.float32)
    v = rng.standard_normal(bshape + (S, EV)).astype(np.float32)
    mask = None
    if mk == "bool":
        mask = rng.random((L, S)) > 0.3
        mask[min(3, L - 1)] = False                      # a fully masked row
    elif mk == "float":
        mshape = (bshape[0], 1) + tuple(bshape[2:]) if len(bshape) >= 2 else bshape[:1]
        mask = rng.standard_normal(mshape + (L, S)).astype(np.float32)
        mask[..., 1, 2:] = -np.inf
    return q, k, v, mask


@on_devices
@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_fused_and_math_match_numpy_and_each_other(device, case):
    bshape, L, S, E, EV, causal, mk = case
    rng = np.random.default_rng(CASES.index(case))
    q, k, v, mask = _inputs(rng, bshape, L, S, E, EV, mk)
    g = rng.standard_normal(bshape + (L, EV)).astype(np.float32)
    r = ref(q, k, v, g, mask, causal)
    res = {}
    for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.MATH):
        qt, kt, vt = T(q, device, rg=True), T(k, device, rg=True), T(v, device, rg=True)
        with sdpa_kernel(backend):
            o = sdpa(qt, kt, vt, attn_mask=T(mask, device) if mask is not None else None, is_causal=causal)
        fused = "Flash" in o.grad_fn.name()
        assert fused == (backend == SDPBackend.FLASH_ATTENTION)
        o.backward(T(g, device))
        res[backend] = [A(o), A(qt.grad), A(kt.grad), A(vt.grad)]
        for got, want in zip(res[backend], r):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    for a, b in zip(res[SDPBackend.FLASH_ATTENTION], res[SDPBackend.MATH]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@on_devices
def test_fully_masked_rows_give_zeros_and_zero_grads(device):
    rng = np.random.default_rng(1)
    q, k, v, _ = _inputs(rng, (1, 2), 4, 6, 8, 8, None)
    mask = np.ones((4, 6), bool)
    mask[1] = False
    for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.MATH):
        qt = T(q, device, rg=True)
        with sdpa_kernel([backend]):
            o = sdpa(qt, T(k, device), T(v, device), attn_mask=T(mask, device))
        o.sum().backward()
        out, gq = A(o), A(qt.grad)
        assert np.all(out[:, :, 1] == 0) and np.all(np.isfinite(out))
        assert np.all(gq[:, :, 1] == 0) and np.all(np.isfinite(gq))
    # causal with L > S and a mask that removes the only visible key of row 0 (head dims 5, 7 as in CASES[2])
    m2 = np.ones((5, 3), bool)
    m2[0, 0] = False
    q5, k5, v5 = (rng.standard_normal((1, 1, n, e)).astype(np.float32) for n, e in ((5, 5), (3, 5), (3, 7)))
    o = sdpa(T(q5, device, rg=True), T(k5, device), T(v5, device), attn_mask=T(m2, device), is_causal=True)
    assert "Flash" in o.grad_fn.name()
    assert np.all(A(o)[..., 0, :] == 0) and np.all(A(o)[..., 1:, :] != 0)


@on_devices
def test_gqa_and_strided_inputs(device):
    rng = np.random.default_rng(2)
    B, H, Hk, L, S, E = 2, 4, 2, 11, 19, 8
    q = rng.standard_normal((B, L, H, E)).astype(np.float32)          # (B, L, H, E), used transposed
    k = rng.standard_normal((B, Hk, S, E)).astype(np.float32)
    v = rng.standard_normal((B, Hk, S, E)).astype(np.float32)
    g = rng.standard_normal((B, H, L, E)).astype(np.float32)
    qt = T(q, device, rg=True)
    kt, vt = T(k, device, rg=True), T(v, device, rg=True)
    o = sdpa(qt.transpose(1, 2), kt, vt, is_causal=True, enable_gqa=True, scale=0.3)
    assert "Flash" in o.grad_fn.name()
    o.backward(T(g, device))
    r = ref(q.transpose(0, 2, 1, 3), k, v, g, causal=True, scale=0.3, gqa=H // Hk)
    np.testing.assert_allclose(A(o), r[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(A(qt.grad), r[1].transpose(0, 2, 1, 3), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(A(kt.grad), r[2], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(A(vt.grad), r[3], rtol=1e-4, atol=1e-5)
    with sdpa_kernel(SDPBackend.MATH):
        om = sdpa(qt.transpose(1, 2), kt, vt, is_causal=True, enable_gqa=True, scale=0.3)
    np.testing.assert_allclose(A(om), r[0], rtol=1e-4, atol=1e-5)
    with pytest.raises(RuntimeError):
        sdpa(T(q[:, :, :3], device).transpose(1, 2), kt, vt, enable_gqa=True)


@on_devices
def test_gradcheck_fused_and_math(device):
    rng = np.random.default_rng(3)
    q = T(rng.standard_normal((1, 2, 3, 4)), device, torch.float64, rg=True)
    k = T(rng.standard_normal((1, 2, 5, 4)), device, torch.float64, rg=True)
    v = T(rng.standard_normal((1, 2, 5, 3)), device, torch.float64, rg=True)
    mask = T(rng.standard_normal((3, 5)), device, torch.float64)
    for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.MATH):
        def f(q, k, v):
            with sdpa_kernel(backend):
                return sdpa(q, k, v, attn_mask=mask, is_causal=True)
        assert gradcheck(f, (q, k, v))


@on_devices
def test_double_backward_through_fused_path(device):
    rng = np.random.default_rng(4)
    q = T(rng.standard_normal((1, 2, 3, 4)), device, torch.float64, rg=True)
    k = T(rng.standard_normal((1, 2, 5, 4)), device, torch.float64, rg=True)
    v = T(rng.standard_normal((1, 2, 5, 3)), device, torch.float64, rg=True)
    mask = T(rng.standard_normal((3, 5)), device, torch.float64)

    def f(q, k, v):
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return sdpa(q, k, v, attn_mask=mask, is_causal=True)
    assert gradgradcheck(f, (q, k, v))


@on_devices
def test_backend_selection_and_errors(device):
    rng = np.random.default_rng(5)
    q, k, v, _ = _inputs(rng, (1, 1), 3, 4, 8, 8, None)
    qt, kt, vt = T(q, device), T(k, device), T(v, device)
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        with pytest.raises(RuntimeError, match="No available kernel"):
            sdpa(qt, kt, vt, dropout_p=1.0)
        with pytest.raises(RuntimeError, match="No available kernel"):
            sdpa(qt.to(torch.float16) if False else qt, kt, vt, attn_mask=T(np.ones((2, 4), bool), device))
    with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
        with pytest.raises(RuntimeError, match="No available kernel"):
            sdpa(qt, kt, vt)
    # head dims above the profile's max_head_dim run the math path
    big = T(rng.standard_normal((1, 2, 300)).astype(np.float32), device, rg=True)
    o = sdpa(big, big, big)
    assert "Flash" not in o.grad_fn.name()
    with pytest.raises(RuntimeError, match="last dims"):
        sdpa(qt, T(k[..., :5], device), vt)
    with pytest.raises(RuntimeError, match="same sequence length"):
        sdpa(qt, kt, T(v[..., :3, :], device))
    with pytest.raises(RuntimeError, match="dtype"):
        sdpa(qt, kt, T(v, device, torch.float64))


@on_devices
def test_fused_dropout_matches_philox_reference(device):
    """In-kernel dropout: the keep mask is the Philox stream of the default generator (one word per attention
    weight, row-padded to a multiple of 4), so a numpy reference can rebuild it and check values and grads."""
    from cltorch.ops import _philox_ref as REF
    from cltorch.ops import random as R
    rng = np.random.default_rng(7)
    bshape, L, S, E, p = (2, 3), 13, 22, 8, 0.3
    q, k, v, _ = _inputs(rng, bshape, L, S, E, E, None)
    g = rng.standard_normal(bshape + (L, E)).astype(np.float32)
    R.manual_seed(1234)
    seed, off = R.default_generator.initial_seed(), R.default_generator._offset
    qt, kt, vt = T(q, device, rg=True), T(k, device, rg=True), T(v, device, rg=True)
    o = sdpa(qt, kt, vt, dropout_p=p, is_causal=True)
    assert "Flash" in o.grad_fn.name()
    sp4 = (S + 3) // 4 * 4
    nblocks = 6 * L * sp4 // 4
    assert R.default_generator._offset - off == nblocks
    words = REF.random_words(seed, off, nblocks).reshape(bshape + (L, sp4))[..., :S]
    keep = np.where(words >= np.uint32(np.ceil(p * 2 ** 32)), 1 / (1 - p), 0.0)
    assert 0.6 < (keep > 0).mean() < 0.8
    o.backward(T(g, device))
    qd, kd, vd, gd = [a.astype(np.float64) for a in (q, k, v, g)]
    s = qd @ np.swapaxes(kd, -1, -2) / np.sqrt(E)
    s = np.where(np.tril(np.ones((L, S), bool)), s, -np.inf)
    pr = np.exp(s - s.max(-1, keepdims=True))
    pr /= pr.sum(-1, keepdims=True)
    np.testing.assert_allclose(A(o), (pr * keep) @ vd, rtol=1e-4, atol=1e-5)
    dp = (gd @ np.swapaxes(vd, -1, -2)) * keep
    ds = pr * (dp - (dp * pr).sum(-1, keepdims=True))
    np.testing.assert_allclose(A(vt.grad), np.swapaxes(pr * keep, -1, -2) @ gd, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(A(qt.grad), ds @ kd / np.sqrt(E), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(A(kt.grad), np.swapaxes(ds, -1, -2) @ qd / np.sqrt(E), rtol=1e-4, atol=1e-5)
    # the same seed gives the same output; the next call draws new counters
    R.manual_seed(1234)
    np.testing.assert_array_equal(A(sdpa(qt, kt, vt, dropout_p=p, is_causal=True)), A(o))
    assert not np.allclose(A(sdpa(qt, kt, vt, dropout_p=p, is_causal=True)), A(o))


@on_devices
def test_fused_dropout_gradcheck_and_double_backward(device):
    from cltorch.ops import random as R
    rng = np.random.default_rng(8)
    q = T(rng.standard_normal((1, 3, 4)), device, torch.float64, rg=True)
    k = T(rng.standard_normal((1, 5, 4)), device, torch.float64, rg=True)
    v = T(rng.standard_normal((1, 5, 2)), device, torch.float64, rg=True)

    def f(q, k, v):
        R.manual_seed(99)                       # the same dropout mask on every evaluation
        return sdpa(q, k, v, dropout_p=0.4)
    assert "Flash" in f(q, k, v).grad_fn.name()
    assert gradcheck(f, (q, k, v))
    assert gradgradcheck(f, (q, k, v))


@on_devices
def test_math_path_dropout(device):
    """The math path draws its mask with Tensor.bernoulli_ from the default generator: rebuild it with the numpy
    Philox reference and compare."""
    from cltorch.ops import _philox_ref as REF
    from cltorch.ops import random as R
    rng = np.random.default_rng(6)
    q, k, v, _ = _inputs(rng, (2, 2), 8, 8, 8, 8, None)
    R.manual_seed(5)
    off = R.default_generator._offset
    with sdpa_kernel(SDPBackend.MATH):
        o1 = A(sdpa(T(q, device), T(k, device), T(v, device), dropout_p=0.5))
        o2 = A(sdpa(T(q, device), T(k, device), T(v, device), dropout_p=1.0))
    keep = REF.bernoulli(5, off, 4 * 64, p=0.5, dtype=np.float32).reshape(2, 2, 8, 8).astype(np.float64)
    s_ = q.astype(np.float64) @ np.swapaxes(k.astype(np.float64), -1, -2) / np.sqrt(8)
    pr = np.exp(s_ - s_.max(-1, keepdims=True))
    pr /= pr.sum(-1, keepdims=True)
    np.testing.assert_allclose(o1, (pr * keep * 2.0) @ v, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(o2, 0.0)
