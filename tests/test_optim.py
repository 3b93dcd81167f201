"""cltorch.optim: every algorithm for a few steps against a float64 numpy transcription of the pseudo-code in
PyTorch's torch.optim documentation, on every device; and the Optimizer base's PyTorch semantics."""
import copy
import math
import warnings
import zlib

import numpy as np
import pytest

import cltorch
from cltorch import optim

DEVICES = ["cpu"] + [f"cl:{i}" for i in range(cltorch.cl.device_count())]
RTOL, ATOL = 1e-5, 1e-7
SHAPES = [(3, 4), (7,), (2, 3, 5)]


# ====================================================================== numpy references (float64)
# Each is a transcription of the algorithm box of PyTorch's documentation page of the optimizer. ``s`` is a
# per-parameter dict of state arrays (created on the first call), t the 1-based step number.
def ref_sgd(p, g, s, t, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False):
    if maximize:
        g = -g
    if weight_decay:
        g = g + weight_decay * p
    if momentum:
        s["b"] = g.copy() if t == 1 else momentum * s["b"] + (1 - dampening) * g
        g = g + momentum * s["b"] if nesterov else s["b"]
    return p - lr * g


def ref_adam(p, g, s, t, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, maximize=False,
             decoupled=False):
    b1, b2 = betas
    if maximize:
        g = -g
    if weight_decay:
        if decoupled:
            p = p - lr * weight_decay * p
        else:
            g = g + weight_decay * p
    if t == 1:
        s["m"], s["v"], s["vmax"] = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)
    s["m"] = b1 * s["m"] + (1 - b1) * g
    s["v"] = b2 * s["v"] + (1 - b2) * g * g
    mhat = s["m"] / (1 - b1 ** t)
    if amsgrad:
        s["vmax"] = np.maximum(s["vmax"], s["v"])
        vhat = s["vmax"] / (1 - b2 ** t)
    else:
        vhat = s["v"] / (1 - b2 ** t)
    return p - lr * mhat / (np.sqrt(vhat) + eps)


def ref_adamw(p, g, s, t, lr, weight_decay=1e-2, **kw):
    return ref_adam(p, g, s, t, lr, weight_decay=weight_decay, decoupled=True, **kw)


def ref_rmsprop(p, g, s, t, lr, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False,
                maximize=False):
    if maximize:
        g = -g
    if weight_decay:
        g = g + weight_decay * p
    if t == 1:
        s["v"], s["b"], s["ga"] = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)
    s["v"] = alpha * s["v"] + (1 - alpha) * g * g
    vt = s["v"]
    if centered:
        s["ga"] = alpha * s["ga"] + (1 - alpha) * g
        vt = vt - s["ga"] ** 2
    if momentum > 0:
        s["b"] = momentum * s["b"] + g / (np.sqrt(vt) + eps)
        return p - lr * s["b"]
    return p - lr * g / (np.sqrt(vt) + eps)


def ref_adagrad(p, g, s, t, lr, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10,
                maximize=False):
    if t == 1:
        s["sum"] = np.full_like(p, initial_accumulator_value)
    clr = lr / (1 + (t - 1) * lr_decay)
    if maximize:
        g = -g
    if weight_decay:
        g = g + weight_decay * p
    s["sum"] = s["sum"] + g * g
    return p - clr * g / (np.sqrt(s["sum"]) + eps)


def ref_adamax(p, g, s, t, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, maximize=False):
    b1, b2 = betas
    if maximize:
        g = -g
    if weight_decay:
        g = g + weight_decay * p
    if t == 1:
        s["m"], s["u"] = np.zeros_like(p), np.zeros_like(p)
    s["m"] = b1 * s["m"] + (1 - b1) * g
    s["u"] = np.maximum(b2 * s["u"], np.abs(g) + eps)
    return p - lr * s["m"] / ((1 - b1 ** t) * s["u"])


def ref_nadam(p, g, s, t, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, momentum_decay=4e-3,
              decoupled_weight_decay=False, maximize=False):
    b1, b2 = betas
    if maximize:
        g = -g
    if weight_decay:
        if decoupled_weight_decay:
            p = p - lr * weight_decay * p
        else:
            g = g + weight_decay * p
    if t == 1:
        s["m"], s["v"], s["prod"] = np.zeros_like(p), np.zeros_like(p), 1.0
    mu = b1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
    mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
    s["prod"] *= mu
    s["m"] = b1 * s["m"] + (1 - b1) * g
    s["v"] = b2 * s["v"] + (1 - b2) * g * g
    mhat = mu_next * s["m"] / (1 - s["prod"] * mu_next) + (1 - mu) * g / (1 - s["prod"])
    vhat = s["v"] / (1 - b2 ** t)
    return p - lr * mhat / (np.sqrt(vhat) + eps)


def ref_radam(p, g, s, t, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, decoupled_weight_decay=False,
              maximize=False):
    b1, b2 = betas
    if maximize:
        g = -g
    if weight_decay:
        if decoupled_weight_decay:
            p = p - lr * weight_decay * p
        else:
            g = g + weight_decay * p
    if t == 1:
        s["m"], s["v"] = np.zeros_like(p), np.zeros_like(p)
    s["m"] = b1 * s["m"] + (1 - b1) * g
    s["v"] = b2 * s["v"] + (1 - b2) * g * g
    mhat = s["m"] / (1 - b1 ** t)
    rho_inf = 2 / (1 - b2) - 1
    rho = rho_inf - 2 * t * b2 ** t / (1 - b2 ** t)
    if rho > 5:
        l_t = math.sqrt(1 - b2 ** t) / (np.sqrt(s["v"]) + eps)
        r_t = math.sqrt((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho))
        return p - lr * mhat * r_t * l_t
    return p - lr * mhat


# (optimizer class, reference, kwargs, steps). Each runs with and without weight decay (see below).
CASES = {
    "sgd": (optim.SGD, ref_sgd, dict(lr=0.1), 5),
    "sgd_momentum": (optim.SGD, ref_sgd, dict(lr=0.1, momentum=0.9, dampening=0.1), 5),
    "sgd_nesterov_max": (optim.SGD, ref_sgd, dict(lr=0.1, momentum=0.9, nesterov=True, maximize=True), 5),
    "adam": (optim.Adam, ref_adam, dict(lr=0.01), 5),
    "adam_amsgrad_max": (optim.Adam, ref_adam, dict(lr=0.01, betas=(0.8, 0.9), amsgrad=True, maximize=True), 5),
    "adamw": (optim.AdamW, ref_adamw, dict(lr=0.01), 5),
    "adamw_amsgrad": (optim.AdamW, ref_adamw, dict(lr=0.01, amsgrad=True), 5),
    "rmsprop": (optim.RMSprop, ref_rmsprop, dict(lr=0.01), 5),
    "rmsprop_centered_momentum": (optim.RMSprop, ref_rmsprop, dict(lr=0.01, centered=True, momentum=0.9,
                                                                   alpha=0.9), 5),
    "rmsprop_momentum_max": (optim.RMSprop, ref_rmsprop, dict(lr=0.01, momentum=0.5, maximize=True), 5),
    "adagrad": (optim.Adagrad, ref_adagrad, dict(lr=0.1), 5),
    "adagrad_decay_init": (optim.Adagrad, ref_adagrad, dict(lr=0.1, lr_decay=0.1, initial_accumulator_value=0.5,
                                                            maximize=True), 5),
    "adamax": (optim.Adamax, ref_adamax, dict(lr=0.01), 5),
    "adamax_max": (optim.Adamax, ref_adamax, dict(lr=0.01, betas=(0.5, 0.9), maximize=True), 5),
    "nadam": (optim.NAdam, ref_nadam, dict(lr=0.01), 5),
    "nadam_decoupled": (optim.NAdam, ref_nadam, dict(lr=0.01, decoupled_weight_decay=True, momentum_decay=0.1), 5),
    # beta2 = 0.99 makes rho_t cross 5 at step 6: 8 steps cover both branches of RAdam
    "radam": (optim.RAdam, ref_radam, dict(lr=0.01, betas=(0.9, 0.99)), 8),
    "radam_decoupled_max": (optim.RAdam, ref_radam, dict(lr=0.01, betas=(0.9, 0.99), decoupled_weight_decay=True,
                                                         maximize=True), 8),
}

def _data(seed, steps):
    rng = np.random.default_rng(seed)
    p0 = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    grads = [[rng.standard_normal(s).astype(np.float32) for s in SHAPES] for _ in range(steps)]
    return p0, grads


def _run_case(name, device, wd, dtype=np.float32):
    cls, ref, kw, steps = CASES[name]
    kw = dict(kw)
    if wd is not None:
        kw["weight_decay"] = wd
    p0, grads = _data(zlib.crc32(name.encode()), steps)
    params = [cltorch.tensor(a.astype(dtype), device=device, requires_grad=True) for a in p0]
    opt = cls(params, **kw)
    ref_p = [a.astype(np.float64) for a in p0]
    ref_s = [{} for _ in p0]
    for t in range(1, steps + 1):
        for p, g in zip(params, grads[t - 1]):
            p.grad = cltorch.tensor(g.astype(dtype), device=device)
        opt.step()
        ref_p = [ref(rp, g.astype(np.float64), s, t, **kw) for rp, g, s in zip(ref_p, grads[t - 1], ref_s)]
    for p, want in zip(params, ref_p):
        got = p.detach().cpu().numpy()
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=f"{name} on {device}")
    return opt, params, ref_s


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("wd", [None, 0.1], ids=["default_wd", "wd0.1"])
def test_algorithm_matches_reference(name, device, wd):
    _run_case(name, device, wd)


@pytest.mark.parametrize("name", ["sgd_nesterov_max", "adam_amsgrad_max", "rmsprop_centered_momentum",
                                  "adagrad_decay_init", "adamax_max", "nadam_decoupled", "radam_decoupled_max"])
@pytest.mark.parametrize("slots,split", [(1, False), (8, False)])
def test_algorithm_other_kernel_variants(name, slots, split, monkeypatch):
    """The kernel variants the devices here do not use by default (one tensor per launch; the multi-slot kernel
    without the PoCL split barrier, as GPUs run it) against the reference, for one case of each algorithm."""
    from cltorch.optim import _fused
    real = _fused.fused_step
    monkeypatch.setattr(_fused, "fused_step",
                        lambda *a, **k: real(*a, **{**k, "slots": slots, "split_barrier": split}))
    _run_case(name, DEVICES[-1], 0.1)


@pytest.mark.parametrize("device", DEVICES)
def test_adam_state_matches_reference(device):
    opt, params, ref_s = _run_case("adam_amsgrad_max", device, 0.1)
    for p, s in zip(params, ref_s):
        st = opt.state[p]
        assert float(st["step"].item()) == 5.0
        np.testing.assert_allclose(st["exp_avg"].cpu().numpy(), s["m"], rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(st["exp_avg_sq"].cpu().numpy(), s["v"], rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(st["max_exp_avg_sq"].cpu().numpy(), s["vmax"], rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("device", DEVICES)
def test_float64_params(device):
    try:
        cltorch.zeros(1, dtype=cltorch.float64, device=device)
    except TypeError:
        pytest.skip(f"{device} has no fp64")
    opt, params, _ = _run_case("adam", device, 0.1, dtype=np.float64)
    assert params[0].dtype is cltorch.float64 and opt.state[params[0]]["exp_avg"].dtype is cltorch.float64


# ====================================================================== multi-tensor, fallbacks, skipping
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("slots", [1, 3, 8])
def test_many_tensors_one_launch_per_chunk(device, slots):
    """19 parameters of odd sizes (several launches of `slots` tensors; sizes not multiples of the local
    size), including an empty one, match per-parameter references; launches = ceil(18 / slots)."""
    from cltorch.optim import _fused
    rng = np.random.default_rng(0)
    sizes = [1, 5, 63, 64, 65, 130, 1000, 7, 0, 3, 257, 2, 9, 513, 33, 1, 4, 77, 129]
    p0 = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    g0 = [rng.standard_normal(n).astype(np.float32) for n in sizes]
    params = [cltorch.tensor(a, device=device, requires_grad=True) for a in p0]
    for p, g in zip(params, g0):
        p.grad = cltorch.tensor(g, device=device)
    opt = optim.AdamW(params, lr=0.01, amsgrad=True)
    calls = []
    real = _fused.fused_step

    def spy(*a, **k):
        k["slots"] = slots
        k["split_barrier"] = False   # one launch per chunk (the split kernel adds launches for tails)
        n = real(*a, **k)
        calls.append(n)
        return n

    _fused.fused_step = spy
    try:
        opt.step()
    finally:
        _fused.fused_step = real
    assert calls == [math.ceil(18 / slots)]
    for p, a, g in zip(params, p0, g0):
        want = ref_adamw(a.astype(np.float64), g.astype(np.float64), {}, 1, 0.01, amsgrad=True)
        np.testing.assert_allclose(p.detach().cpu().numpy(), want, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("slots,split", [(1, False), (1, True), (2, True), (3, True), (8, True), (8, False)])
def test_kernel_writes_only_its_elements(device, slots, split):
    """Parameters and states that are slices of one storage, separated by gaps: every kernel variant
    updates exactly the slices (tails shorter than a work-group included) and leaves the gaps alone."""
    from cltorch.optim import _fused
    sizes = [12, 100, 64, 1000, 65, 1, 129]
    gap = 37
    total = sum(sizes) + gap * (len(sizes) + 1)
    rng = np.random.default_rng(7)
    P = cltorch.tensor(rng.standard_normal(total).astype(np.float32), device=device)
    G = cltorch.tensor(rng.standard_normal(total).astype(np.float32), device=device)
    M = cltorch.zeros(total, device=device)
    V = cltorch.zeros(total, device=device)
    p_before, g_np = P.cpu().numpy().copy(), G.cpu().numpy()
    spans, pos = [], gap
    for n in sizes:
        spans.append((pos, pos + n))
        pos += n + gap
    ps, gs, sts = [], [], []
    for a, b in spans:
        ps.append(P[a:b])
        gs.append(G[a:b])
        sts.append([M[a:b], V[a:b]])
    lr = 0.01
    sc = (0.1, 1 - lr * 0.1, 0.1, 0.999, 0.001, -lr / 0.1, 0.001 ** 0.5, 1e-8)
    _fused.fused_step("adam", dict(wd=True, decoupled=True), ps, gs, sts, sc, slots=slots, split_barrier=split)
    got = P.cpu().numpy()
    inside = np.zeros(total, bool)
    for a, b in spans:
        inside[a:b] = True
        want = ref_adamw(p_before[a:b].astype(np.float64), g_np[a:b].astype(np.float64), {}, 1, lr, weight_decay=0.1)
        np.testing.assert_allclose(got[a:b], want, rtol=RTOL, atol=ATOL)
    np.testing.assert_array_equal(got[~inside], p_before[~inside])
    assert not M.cpu().numpy()[~inside].any() and not V.cpu().numpy()[~inside].any()


@pytest.mark.parametrize("device", DEVICES)
def test_non_contiguous_param_and_grad(device):
    rng = np.random.default_rng(1)
    base = rng.standard_normal((4, 6)).astype(np.float32)
    g = rng.standard_normal((6, 4)).astype(np.float32)
    leaf = cltorch.tensor(base, device=device)
    p = leaf.t()                     # a non-contiguous view; optimize the view's storage in place
    p.requires_grad_(True)
    assert not p.is_contiguous()
    p.grad = cltorch.tensor(np.ascontiguousarray(g.T), device=device).t()  # non-contiguous grad too
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    s = {}
    want = base.T.astype(np.float64)
    for t in (1, 2):
        opt.step()
        want = ref_sgd(want, g.astype(np.float64), s, t, 0.1, momentum=0.9)
    np.testing.assert_allclose(p.detach().cpu().numpy(), want, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(leaf.cpu().numpy(), want.T, rtol=RTOL, atol=ATOL)


def test_params_without_grad_are_skipped():
    a = cltorch.ones(3, requires_grad=True)
    b = cltorch.ones(3, requires_grad=True)
    a.grad = cltorch.ones(3)
    opt = optim.Adam([a, b], lr=0.1)
    opt.step()
    np.testing.assert_allclose(a.detach().numpy(), 0.9, rtol=1e-6)
    np.testing.assert_array_equal(b.detach().numpy(), 1.0)
    assert b not in opt.state or len(opt.state[b]) == 0


def test_step_runs_in_place_without_new_device_memory():
    dev = DEVICES[-1]
    if dev == "cpu":
        pytest.skip("no cl device")
    p = cltorch.zeros(1000, device=dev, requires_grad=True)
    p.grad = cltorch.ones(1000, device=dev)
    opt = optim.Adam([p])
    opt.step()                               # creates the state
    buf = p._storage.cl_buffer()
    ea = opt.state[p]["exp_avg"]
    rt = p._runtime()
    rt.synchronize()
    before = rt.allocated
    for _ in range(3):
        opt.step()
    assert rt.allocated == before
    assert p._storage.cl_buffer() is buf and opt.state[p]["exp_avg"] is ea


def test_lr_change_needs_no_rebuild():
    from cltorch import backend
    p = cltorch.zeros(10, requires_grad=True)
    p.grad = cltorch.ones(10)
    opt = optim.Adam([p], lr=0.1)
    opt.step()
    builds = backend.stats()["builds"] + backend.stats().get("disk_hits", 0)
    for lr in (0.05, 0.01, 0.002):
        opt.param_groups[0]["lr"] = lr
        opt.step()
    assert backend.stats()["builds"] + backend.stats().get("disk_hits", 0) == builds


def test_training_reduces_loss():
    rng = np.random.default_rng(3)
    X = cltorch.tensor(rng.standard_normal((64, 5)).astype(np.float32))
    w_true = cltorch.tensor(rng.standard_normal((5, 1)).astype(np.float32))
    y = X @ w_true
    w = cltorch.zeros(5, 1, requires_grad=True)
    opt = optim.Adam([w], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = ((X @ w - y) ** 2).mean()
        loss.backward()
        return loss

    first = float(opt.step(closure).item())
    for _ in range(100):
        last = float(opt.step(closure).item())
    assert last < first * 1e-2


# ====================================================================== Optimizer base semantics
def _p(n=3):
    return cltorch.zeros(n, requires_grad=True)


def test_param_group_forms_and_errors():
    a, b = _p(), _p()
    opt = optim.SGD([{"params": [a]}, {"params": b, "lr": 0.5}], lr=0.1, momentum=0.9)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert opt.param_groups[1]["momentum"] == 0.9 and opt.defaults["lr"] == 0.1
    named = optim.Adam([("w", a), ("b", b)])
    assert named.param_groups[0]["param_names"] == ["w", "b"]
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        optim.SGD([{"params": [a]}, {"params": [a, b]}], lr=0.1)
    with pytest.raises(TypeError):
        optim.SGD(a, lr=0.1)
    with pytest.raises(TypeError):
        optim.SGD([{"params": {a}}], lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([a * 2], lr=0.1)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        optim.Adam([a], lr=-1)
    with pytest.raises(ValueError, match="beta"):
        optim.Adam([a], betas=(1.0, 0.9))
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD([a], lr=0.1, nesterov=True)
    opt = optim.SGD([a], lr=0.1)
    opt.add_param_group({"params": [b], "lr": 0.01})
    assert len(opt.param_groups) == 2 and opt.param_groups[1]["momentum"] == 0
    with pytest.raises(ValueError, match="more than one"):
        opt.add_param_group({"params": [b]})
    with pytest.warns(UserWarning, match="duplicate"):
        optim.SGD([_p(), *([c := _p()] * 2)], lr=0.1)
    del c


def test_zero_grad():
    a = _p()
    a.grad = cltorch.ones(3)
    opt = optim.SGD([a], lr=0.1)
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(a.grad.numpy(), 0.0)
    opt.zero_grad()
    assert a.grad is None


def test_closure_returns_loss():
    a = _p()
    opt = optim.SGD([a], lr=0.1)
    calls = []

    def closure():
        calls.append(1)
        a.grad = cltorch.ones(3)
        return 42.0

    assert opt.step(closure) == 42.0 and calls == [1]
    np.testing.assert_allclose(a.detach().numpy(), -0.1, rtol=1e-6)
    assert opt.step() is None


def test_step_hooks():
    a = _p()
    opt = optim.SGD([a], lr=0.1)
    seen = []
    h1 = opt.register_step_pre_hook(lambda o, args, kw: seen.append("pre"))
    opt.register_step_post_hook(lambda o, args, kw: seen.append("post"))
    opt.step()
    h1.remove()
    opt.step()
    assert seen == ["pre", "post", "post"]


@pytest.mark.parametrize("src,dst", [(s, d) for s in DEVICES for d in DEVICES])
def test_state_dict_round_trip_across_devices(src, dst):
    rng = np.random.default_rng(5)
    p0 = [rng.standard_normal(s).astype(np.float32) for s in [(4,), (2, 3)]]
    grads = [[rng.standard_normal(a.shape).astype(np.float32) for a in p0] for _ in range(4)]

    def make(device):
        ps = [cltorch.tensor(a, device=device, requires_grad=True) for a in p0]
        return ps, optim.Adam([{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.02}], lr=0.01, amsgrad=True)

    def steps(ps, opt, gs):
        for g in gs:
            for p, a in zip(ps, g):
                p.grad = cltorch.tensor(a, device=p.device)
            opt.step()

    pa, oa = make(src)
    steps(pa, oa, grads[:2])
    sd = oa.state_dict()
    assert sorted(sd["state"]) == [0, 1]
    assert [g["params"] for g in sd["param_groups"]] == [[0], [1]]
    assert sd["param_groups"][1]["lr"] == 0.02
    pb, ob = make(dst)
    for p, q in zip(pb, pa):
        p.data = q.detach().to(dst).clone()
    ob.load_state_dict(copy.deepcopy(sd) if src == dst else sd)
    st = ob.state[pb[0]]
    assert st["exp_avg"].device == pb[0].device
    assert float(st["step"].item()) == 2.0 and st["step"].device.type == "cpu"
    assert ob.param_groups[1]["lr"] == 0.02
    steps(pa, oa, grads[2:])
    steps(pb, ob, grads[2:])
    for p, q in zip(pa, pb):
        np.testing.assert_allclose(q.detach().cpu().numpy(), p.detach().cpu().numpy(), rtol=1e-6, atol=1e-7)


def test_load_state_dict_mismatch_raises():
    a, b = _p(), _p()
    opt = optim.Adam([{"params": [a]}, {"params": [b]}])
    one_group = optim.Adam([a, b]).state_dict()
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict(one_group)
    other = optim.Adam([{"params": [a, b]}, {"params": [_p()]}]).state_dict()
    with pytest.raises(ValueError, match="doesn't match the size"):
        opt.load_state_dict(other)


def test_sgd_state_dict_momentum_buffer():
    a = _p()
    a.grad = cltorch.ones(3)
    opt = optim.SGD([a], lr=0.1, momentum=0.9)
    opt.step()
    sd = opt.state_dict()
    np.testing.assert_allclose(sd["state"][0]["momentum_buffer"].numpy(), 1.0)


def test_repr_lists_groups():
    r = repr(optim.SGD([_p()], lr=0.1))
    assert r.startswith("SGD (") and "Parameter Group 0" in r and "lr: 0.1" in r


def test_no_warnings_on_plain_use():
    a = _p()
    opt = optim.AdamW([a])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a.grad = cltorch.ones(3)
        opt.step()
