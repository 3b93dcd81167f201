"""The host half of the fused optimizers' step (``FusedOptimizer._group_plan``: state made on first need, host
counters advanced, scalars computed once per key) and ASGD's averaging kernel, against torch (the test-only
oracle) and against eager runs of the same steps (a compiled replay with ASGD averaging starting mid-run)."""
import numpy as np
import pytest

import cltorch
from cltorch import optim
from cltorch.optim.asgd import _average

torch = pytest.importorskip("torch")

FUSED = ["SGD", "Adam", "AdamW", "NAdam", "RAdam", "RMSprop", "Adagrad", "Adamax"]


def _np(t):
    return t.detach().cpu().numpy()


def _params(device, seed=0, shapes=((4, 3), (5,))):
    rng = np.random.default_rng(seed)
    return [cltorch.tensor(rng.standard_normal(s).astype(np.float32), device=device, requires_grad=True)
            for s in shapes]


@pytest.mark.parametrize("name", FUSED)
def test_plan_then_apply_is_step(name, device):
    """``_apply(*_group_plan(group))`` per group is ``step()`` bit for bit (what a compiled replay relies on),
    and the plan launches nothing: parameters are unchanged until ``_apply``."""
    kw = dict(lr=0.05, momentum=0.9) if name == "SGD" else dict(lr=0.05)
    pa, pb = _params(device), _params(device)
    oa, ob = getattr(optim, name)(pa, **kw), getattr(optim, name)(pb, **kw)
    rng = np.random.default_rng(3)
    for _ in range(4):
        gs = [rng.standard_normal(tuple(p.shape)).astype(np.float32) for p in pa]
        for p, q, g in zip(pa, pb, gs):
            p.grad = cltorch.tensor(g, device=device)
            q.grad = cltorch.tensor(g, device=device)
        oa.step()
        before = [_np(q).copy() for q in pb]
        plans = [ob._group_plan(group) for group in ob.param_groups]
        for q, b in zip(pb, before):
            np.testing.assert_array_equal(_np(q), b)
        algo, flags, items = plans[0]
        assert algo == ob._algo and [it[0] for it in items] == pb
        for plan in plans:
            ob._apply(*plan)
        for p, q in zip(pa, pb):
            np.testing.assert_array_equal(_np(q), _np(p))
    for p, q in zip(pa, pb):
        assert oa.state[p].keys() == ob.state[q].keys()


def test_state_made_on_first_need(device):
    """Turning on an option that needs another state tensor (amsgrad, RMSprop's momentum and centered) makes it
    at the next step, as zeros, with the step counter continuing: the updates match torch given those zeros by
    hand (torch itself raises KeyError there)."""
    rng = np.random.default_rng(1)
    p0 = rng.standard_normal((6,)).astype(np.float32)
    for name, first, then, new in [("Adam", dict(lr=0.01), dict(amsgrad=True), ["max_exp_avg_sq"]),
                                   ("RMSprop", dict(lr=0.01), dict(momentum=0.5, centered=True),
                                    ["momentum_buffer", "grad_avg"])]:
        c = cltorch.tensor(p0, device=device, requires_grad=True)
        t = torch.tensor(p0, requires_grad=True)
        co, to = getattr(optim, name)([c], **first), getattr(torch.optim, name)([t], **first)
        for k in range(6):
            if k == 3:
                co.param_groups[0].update(then)
                to.param_groups[0].update(then)
                for key in new:
                    assert key not in co.state[c]
                    to.state[t][key] = torch.zeros_like(t)
            g = rng.standard_normal((6,)).astype(np.float32)
            c.grad, t.grad = cltorch.tensor(g, device=device), torch.tensor(g)
            co.step()
            to.step()
            np.testing.assert_allclose(_np(c), t.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=f"{name} {k}")
        assert set(co.state[c]) == set(to.state[t])
        assert float(co.state[c]["step"]) == 6.0


def test_sgd_without_momentum_keeps_no_state_and_none_buffer_loads():
    """Plain SGD touches no per-parameter state (PyTorch's state_dict has none); a torch SGD state dict whose
    momentum_buffer is None starts the buffer as the gradient, as torch does."""
    p = cltorch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    p.grad = cltorch.tensor([0.5, 0.5, -1.0])
    opt.step()
    assert opt.state_dict()["state"] == {}
    t = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    to = torch.optim.SGD([t], lr=0.1, momentum=0.9)
    sd = to.state_dict()
    sd["state"] = {0: {"momentum_buffer": None}}
    c = cltorch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    co = optim.SGD([c], lr=0.1, momentum=0.9)
    co.load_state_dict({"state": sd["state"], "param_groups": sd["param_groups"]})
    to.load_state_dict(sd)
    for g in ([0.5, 0.5, -1.0], [0.25, -1.0, 2.0]):
        c.grad, t.grad = cltorch.tensor(g), torch.tensor(g)
        co.step()
        to.step()
        np.testing.assert_allclose(_np(c), t.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(_np(co.state[c]["momentum_buffer"]), to.state[t]["momentum_buffer"].numpy(), rtol=1e-6)


def test_adagrad_added_group_uses_its_initial_accumulator():
    """A parameter group added after construction starts its ``sum`` at that group's
    ``initial_accumulator_value`` (construction uses each group's value too)."""
    a = cltorch.tensor([1.0, 2.0], requires_grad=True)
    b = cltorch.tensor([3.0, -1.0], requires_grad=True)
    opt = optim.Adagrad([a], lr=0.1, initial_accumulator_value=0.0)
    opt.add_param_group({"params": [b], "initial_accumulator_value": 0.5})
    for p in (a, b):
        p.grad = cltorch.tensor([1.0, -2.0])
    opt.step()
    np.testing.assert_allclose(_np(opt.state[a]["sum"]), [1.0, 4.0], rtol=1e-6)
    np.testing.assert_allclose(_np(opt.state[b]["sum"]), [1.5, 4.5], rtol=1e-6)
    np.testing.assert_allclose(_np(b), [3.0 - 0.1 / (1.5 ** 0.5 + 1e-10), -1.0 + 0.2 / (4.5 ** 0.5 + 1e-10)],
                               rtol=1e-6)


def test_nadam_mu_product_is_a_float32_running_product():
    """NAdam's second host counter: the product of mu_1..mu_t rounded to float32 after each step, as torch."""
    p = cltorch.tensor([1.0, 2.0], requires_grad=True)
    t = torch.tensor([1.0, 2.0], requires_grad=True)
    co, to = optim.NAdam([p], lr=0.01), torch.optim.NAdam([t], lr=0.01)
    for _ in range(5):
        p.grad, t.grad = cltorch.tensor([0.3, -0.7]), torch.tensor([0.3, -0.7])
        co.step()
        to.step()
    assert float(co.state[p]["mu_product"]) == float(to.state[t]["mu_product"])
    assert co.state[p]["mu_product"].dtype is cltorch.float32


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_asgd_average_is_torchs_two_branches_bit_for_bit(dtype, device):
    """``_average``: exactly ``p`` when mu == 1, else ``ax + (p - ax) * mu`` rounded as torch's separate ops."""
    rng = np.random.default_rng(2)
    ax0 = rng.standard_normal(1000).astype(dtype)
    p0 = (rng.standard_normal(1000) * 1e3).astype(dtype)
    for mu in (1.0, 0.5, 1 / 3, 1 / 7):
        ax = cltorch.tensor(ax0, device=device)
        v = ax._storage.version
        _average(ax, cltorch.tensor(p0, device=device), mu)
        tax = torch.tensor(ax0)
        tp = torch.tensor(p0)
        if mu != 1:
            tax.add_(tp.sub(tax).mul(mu))
        else:
            tax.copy_(tp)
        np.testing.assert_array_equal(_np(ax), tax.numpy(), err_msg=f"mu={mu}")
        assert ax._storage.version > v


def test_asgd_compiled_replay_when_averaging_starts():
    """ASGD with a small t0 switches from copying to averaging mid-run (mu = 1 / (t - t0)): one kernel does both,
    so the compiled step keeps replaying and equals eager bit for bit (parameters and every state value)."""
    import cltorch.nn as nn
    import cltorch.nn.functional as F
    dev = "cl:0"

    def run(compiled):
        cltorch.manual_seed(0)
        g = cltorch.Generator().manual_seed(5)
        data = [(cltorch.randn(16, 12, generator=g).to(dev), cltorch.randint(0, 5, (16,), generator=g).to(dev))
                for _ in range(3)]
        m = nn.Sequential(nn.Linear(12, 9), nn.Tanh(), nn.Linear(9, 5)).to(dev)
        opt = optim.ASGD(m.parameters(), lr=0.05, t0=3, lambd=1e-2)

        def step(x, y):
            opt.zero_grad()
            F.cross_entropy(m(x), y).backward()
            opt.step()

        fn = cltorch.compile(step) if compiled else step
        for i in range(10):
            fn(*data[i % 3])
        return m, opt, fn

    me, oe, _ = run(False)
    mc, oc, fn = run(True)
    assert fn.fallbacks() == [] and len(fn.graphs()) == 1
    for a, b in zip(mc.parameters(), me.parameters()):
        np.testing.assert_array_equal(_np(a), _np(b))
    for sc, se in zip(oc.state.values(), oe.state.values()):
        for k in se:
            np.testing.assert_array_equal(_np(sc[k]), _np(se[k]), err_msg=k)
    assert [float(st["mu"]) for st in oc.state.values()] == [float(np.float32(1 / 7))] * 4    # averaging started


def test_asgd_eta_mu_stay_host_float32_after_load_state_dict():
    """load_state_dict moves state to the parameter's device and dtype; ASGD's eta and mu come back as 0-d
    float32 cpu tensors (read without a device wait), and the steps continue as torch's."""
    dev = "cl:0"
    rng = np.random.default_rng(4)
    p0 = rng.standard_normal(5)
    c = cltorch.tensor(p0, device=dev, requires_grad=True)          # float64 parameter
    t = torch.tensor(p0, requires_grad=True)
    kw = dict(lr=0.05, t0=2, lambd=1e-2)
    co, to = optim.ASGD([c], **kw), torch.optim.ASGD([t], **kw)
    gs = [rng.standard_normal(5) for _ in range(6)]
    for k, g in enumerate(gs):
        if k == 3:
            co2 = optim.ASGD([c], **kw)
            co2.load_state_dict(co.state_dict())
            co = co2
            for key in ("eta", "mu"):
                assert co.state[c][key].device.type == "cpu" and co.state[c][key].dtype is cltorch.float32
        c.grad, t.grad = cltorch.tensor(g, device=dev), torch.tensor(g)
        co.step()
        to.step()
        np.testing.assert_allclose(_np(c), t.detach().numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(_np(co.state[c]["ax"]), to.state[t]["ax"].numpy(), rtol=1e-6, atol=1e-7)
