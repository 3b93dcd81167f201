"""cltorch.optim.lr_scheduler: each schedule's lr over 20 steps against its closed form (PyTorch's documented
formulas), plus the scheduler protocol (warnings, state_dict, last_epoch, get_last_lr)."""
import math
import warnings

import pytest

import cltorch
from cltorch.optim import SGD, Adam
from cltorch.optim import lr_scheduler as S

LR = 0.05
N = 20


def make_opt(lr=LR, groups=1, momentum=0.0, cls=SGD, **kw):
    ps = [cltorch.zeros(3, requires_grad=True) for _ in range(groups)]
    if cls is SGD:
        kw.setdefault("momentum", momentum)
    return cls([{"params": [p]} for p in ps], lr=lr, **kw)


def run(opt, sched, n=N):
    """lr seen by the optimizer at each of n epochs (optimizer.step() then scheduler.step(), PyTorch's order)."""
    out = []
    for _ in range(n):
        lr = opt.param_groups[0]["lr"]
        assert sched.get_last_lr()[0] == pytest.approx(lr, rel=1e-12, abs=1e-15)
        out.append(lr)
        opt.step()
        sched.step()
    return out


def check(got, want):
    assert len(got) == len(want)
    for t, (g, w) in enumerate(zip(got, want)):
        assert g == pytest.approx(w, rel=1e-9, abs=1e-15), f"epoch {t}: {g} != {w}"


def test_lambda_lr():
    opt = make_opt(groups=2)
    sched = S.LambdaLR(opt, [lambda t: 1.0 / (t + 1), lambda t: 0.9 ** t])
    got = run(opt, sched)
    check(got, [LR / (t + 1) for t in range(N)])
    check([opt.param_groups[1]["lr"]], [LR * 0.9 ** N])
    with pytest.raises(ValueError):
        S.LambdaLR(make_opt(groups=2), [lambda t: 1.0])


def test_multiplicative_lr():
    opt = make_opt()
    check(run(opt, S.MultiplicativeLR(opt, lambda t: 0.95)), [LR * 0.95 ** t for t in range(N)])
    with pytest.raises(TypeError):
        S.MultiplicativeLR(make_opt(), 0.5)


def test_step_lr():
    opt = make_opt()
    check(run(opt, S.StepLR(opt, step_size=3, gamma=0.5)), [LR * 0.5 ** (t // 3) for t in range(N)])


def test_multistep_lr():
    opt = make_opt()
    ms = [2, 5, 5, 11]
    check(run(opt, S.MultiStepLR(opt, milestones=ms, gamma=0.1)),
          [LR * 0.1 ** sum(m <= t for m in ms) for t in range(N)])


def test_constant_lr():
    opt = make_opt()
    check(run(opt, S.ConstantLR(opt, factor=0.5, total_iters=4)), [LR * (0.5 if t < 4 else 1.0) for t in range(N)])
    with pytest.raises(ValueError):
        S.ConstantLR(make_opt(), factor=1.5)


def test_linear_lr():
    opt = make_opt()
    check(run(opt, S.LinearLR(opt, start_factor=0.25, end_factor=1.0, total_iters=8)),
          [LR * (0.25 + 0.75 * min(t, 8) / 8) for t in range(N)])
    opt = make_opt()
    check(run(opt, S.LinearLR(opt, start_factor=1.0, end_factor=0.1, total_iters=10)),
          [LR * (1.0 - 0.9 * min(t, 10) / 10) for t in range(N)])
    with pytest.raises(ValueError):
        S.LinearLR(make_opt(), start_factor=0)


def test_exponential_lr():
    opt = make_opt()
    check(run(opt, S.ExponentialLR(opt, gamma=0.9)), [LR * 0.9 ** t for t in range(N)])


def test_polynomial_lr():
    opt = make_opt()
    check(run(opt, S.PolynomialLR(opt, total_iters=10, power=2.0)),
          [LR * (1 - min(t, 10) / 10) ** 2 for t in range(N)])


def test_cosine_annealing_lr_past_t_max():
    opt = make_opt()
    eta, T = 0.001, 7
    check(run(opt, S.CosineAnnealingLR(opt, T_max=T, eta_min=eta)),
          [eta + (LR - eta) * (1 + math.cos(math.pi * t / T)) / 2 for t in range(N)])


def test_cosine_annealing_warm_restarts():
    opt = make_opt()
    eta = 0.001
    want = []
    for t in range(N):
        # periods 3, 6, 12 starting at epochs 0, 3, 9
        start, Ti = (0, 3) if t < 3 else (3, 6) if t < 9 else (9, 12)
        want.append(eta + (LR - eta) * (1 + math.cos(math.pi * (t - start) / Ti)) / 2)
    check(run(opt, S.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2, eta_min=eta)), want)
    # fractional epochs (the documented per-batch use): T_mult=1, T_0=4
    opt = make_opt()
    sched = S.CosineAnnealingWarmRestarts(opt, T_0=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for e in [0.5, 1.25, 3.5, 4.5, 9.0]:
            sched.step(e)
            tc = e % 4
            assert opt.param_groups[0]["lr"] == pytest.approx(LR * (1 + math.cos(math.pi * tc / 4)) / 2)
    with pytest.raises(ValueError):
        S.CosineAnnealingWarmRestarts(make_opt(), T_0=0)


def _cos(start, end, pct):
    return end + (start - end) / 2 * (1 + math.cos(math.pi * pct))


def test_one_cycle_lr_cos_with_momentum():
    opt = make_opt(momentum=0.9)
    sched = S.OneCycleLR(opt, max_lr=0.1, total_steps=N)
    init, lo = 0.1 / 25, 0.1 / 25 / 1e4
    want_lr, want_m, got_m = [], [], []
    for t in range(N):
        if t <= 5:   # phase 1 ends at pct_start * total - 1 = 5
            want_lr.append(_cos(init, 0.1, t / 5))
            want_m.append(_cos(0.95, 0.85, t / 5))
        else:
            want_lr.append(_cos(0.1, lo, (t - 5) / 14))
            want_m.append(_cos(0.85, 0.95, (t - 5) / 14))
    got = []
    for _ in range(N):
        got.append(opt.param_groups[0]["lr"])
        got_m.append(opt.param_groups[0]["momentum"])
        opt.step()
        sched.step()
    check(got, want_lr)
    check(got_m, want_m)
    with pytest.raises(ValueError, match="Tried to step"):
        sched.step()
        sched.step()


def test_one_cycle_lr_linear_three_phase_adam_betas():
    opt = make_opt(cls=Adam, lr=0.01)
    sched = S.OneCycleLR(opt, max_lr=0.2, total_steps=N, pct_start=0.25, anneal_strategy="linear",
                         three_phase=True, div_factor=10.0, final_div_factor=100.0)
    init, lo = 0.02, 0.02 / 100
    lin = lambda a, b, pct: a + (b - a) * pct  # noqa: E731
    want, want_b1 = [], []
    for t in range(N):   # phase ends: 4, 8, 19
        if t <= 4:
            want.append(lin(init, 0.2, t / 4))
            want_b1.append(lin(0.95, 0.85, t / 4))
        elif t <= 8:
            want.append(lin(0.2, init, (t - 4) / 4))
            want_b1.append(lin(0.85, 0.95, (t - 4) / 4))
        else:
            want.append(lin(init, lo, (t - 8) / 11))
            want_b1.append(0.95)
    got, got_b1 = [], []
    for _ in range(N):
        got.append(opt.param_groups[0]["lr"])
        got_b1.append(opt.param_groups[0]["betas"][0])
        opt.step()
        sched.step()
    check(got, want)
    check(got_b1, want_b1)
    assert opt.param_groups[0]["betas"][1] == 0.999


@pytest.mark.parametrize("mode", ["triangular", "triangular2", "exp_range"])
def test_cyclic_lr(mode):
    opt = make_opt(momentum=0.9)
    sched = S.CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=4, step_size_down=6, mode=mode, gamma=0.9)
    want, want_m = [], []
    for t in range(N):
        cycle = math.floor(1 + t / 10)
        x = 1 + t / 10 - cycle
        scale = x / 0.4 if x <= 0.4 else (x - 1) / (0.4 - 1)
        amp = {"triangular": 1.0, "triangular2": 0.5 ** (cycle - 1), "exp_range": 0.9 ** t}[mode]
        want.append(0.01 + 0.09 * scale * amp)
        want_m.append(0.9 - 0.1 * scale * amp)
    got, got_m = [], []
    for _ in range(N):
        got.append(opt.param_groups[0]["lr"])
        got_m.append(opt.param_groups[0]["momentum"])
        opt.step()
        sched.step()
    check(got, want)
    check(got_m, want_m)


def test_cyclic_lr_needs_momentum():
    opt = cltorch.optim.Adagrad([cltorch.zeros(2, requires_grad=True)])
    with pytest.raises(ValueError, match="momentum"):
        S.CyclicLR(opt, 0.01, 0.1)
    S.CyclicLR(opt, 0.01, 0.1, cycle_momentum=False)


def test_sequential_lr():
    opt = make_opt()
    a = S.ConstantLR(opt, factor=0.1, total_iters=2)
    b = S.ExponentialLR(opt, gamma=0.9)
    sched = S.SequentialLR(opt, [a, b], milestones=[5])
    want = [LR * (0.1 if t < 2 else 1.0) if t < 5 else LR * 0.9 ** (t - 5) for t in range(N)]
    check(run(opt, sched), want)
    with pytest.raises(ValueError):
        S.SequentialLR(opt, [a, b], milestones=[])


def test_chained_scheduler():
    opt = make_opt()
    a = S.ConstantLR(opt, factor=0.1, total_iters=2)
    b = S.ExponentialLR(opt, gamma=0.9)
    sched = S.ChainedScheduler([a, b])
    check(run(opt, sched), [LR * 0.9 ** t * (0.1 if t < 2 else 1.0) for t in range(N)])
    with pytest.raises(ValueError):
        S.ChainedScheduler([S.ExponentialLR(make_opt(), 0.9), S.ExponentialLR(make_opt(), 0.9)])


def test_reduce_lr_on_plateau():
    # Constant metric: 3 bad epochs (> patience 2) reduce by 0.5; one cooldown epoch; so reductions happen
    # at steps 4, 8, 12, ...; the third reduction hits min_lr 0.01, after which nothing changes.
    opt = make_opt()
    sched = S.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=2, threshold=0.0, cooldown=1, min_lr=0.01)
    got = []
    for _ in range(N):
        opt.step()
        sched.step(1.0)
        got.append(opt.param_groups[0]["lr"])
        assert sched.get_last_lr()[0] == got[-1]
    want = [0.05] * 3 + [0.025] * 4 + [0.0125] * 4 + [0.01] * 9
    check(got, want)
    # improving metric in max mode: never reduces
    opt = make_opt()
    sched = S.ReduceLROnPlateau(opt, mode="max", patience=0)
    for t in range(N):
        sched.step(float(t))
    assert opt.param_groups[0]["lr"] == LR
    with pytest.raises(ValueError):
        S.ReduceLROnPlateau(make_opt(), factor=1.0)
    with pytest.raises(ValueError):
        S.ReduceLROnPlateau(make_opt(), mode="avg")


def test_reduce_lr_on_plateau_state_dict():
    opt = make_opt()
    a = S.ReduceLROnPlateau(opt, patience=1, factor=0.5)
    for m in [3.0, 2.0, 2.0]:
        a.step(m)
    b = S.ReduceLROnPlateau(make_opt(), patience=5)
    b.load_state_dict(a.state_dict())
    assert (b.best, b.num_bad_epochs, b.patience, b.last_epoch) == (2.0, 1, 1, 3)


# ---------------------------------------------------------------------- protocol
def test_warns_when_scheduler_steps_before_optimizer():
    opt = make_opt()
    sched = S.StepLR(opt, 2)
    with pytest.warns(UserWarning, match=r"lr_scheduler.step\(\)` before `optimizer.step\(\)"):
        sched.step()


def test_no_warning_in_the_right_order():
    opt = make_opt()
    sched = S.StepLR(opt, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            opt.step()
            sched.step()


def test_get_lr_outside_step_warns():
    sched = S.StepLR(make_opt(), 2)
    with pytest.warns(UserWarning, match="get_last_lr"):
        sched.get_lr()


def test_epoch_argument_uses_closed_form_and_warns():
    opt = make_opt()
    sched = S.StepLR(opt, step_size=3, gamma=0.5)
    opt.step()
    with pytest.warns(UserWarning, match="epoch parameter"):
        sched.step(7)
    assert sched.last_epoch == 7
    assert opt.param_groups[0]["lr"] == pytest.approx(LR * 0.25)


def test_initial_lr_and_last_epoch():
    opt = make_opt()
    sched = S.ExponentialLR(opt, 0.5)
    assert opt.param_groups[0]["initial_lr"] == LR
    assert sched.last_epoch == 0 and sched.base_lrs == [LR]
    with pytest.raises(KeyError, match="initial_lr"):
        S.ExponentialLR(make_opt(), 0.5, last_epoch=3)
    # resuming: initial_lr present, last_epoch given; the chainable form continues from the current lr
    opt = make_opt()
    opt.param_groups[0]["initial_lr"] = LR
    opt.param_groups[0]["lr"] = LR * 0.5 ** 3
    sched = S.ExponentialLR(opt, 0.5, last_epoch=3)
    assert sched.last_epoch == 4
    assert opt.param_groups[0]["lr"] == pytest.approx(LR * 0.5 ** 3)
    with pytest.raises(TypeError):
        S.StepLR(object(), 2)


def test_state_dict_round_trip():
    opt = make_opt()
    sched = S.MultiStepLR(opt, [3, 6], 0.5)
    for _ in range(4):
        opt.step()
        sched.step()
    sd = sched.state_dict()
    osd = opt.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 4
    opt2 = make_opt()
    sched2 = S.MultiStepLR(opt2, [100], 0.9)
    opt2.load_state_dict(osd)
    sched2.load_state_dict(sd)
    assert sched2.last_epoch == 4 and sched2.get_last_lr() == sched.get_last_lr()
    for _ in range(5):
        opt.step()
        sched.step()
        opt2.step()
        sched2.step()
        assert opt2.param_groups[0]["lr"] == opt.param_groups[0]["lr"]
    assert opt.param_groups[0]["lr"] == pytest.approx(LR * 0.25)


def test_lambda_state_dict_saves_callable_objects_only():
    class Decay:
        def __init__(self, k):
            self.k = k

        def __call__(self, t):
            return self.k ** t

    opt = make_opt(groups=2)
    sched = S.LambdaLR(opt, [Decay(0.5), lambda t: 1.0])
    sd = sched.state_dict()
    assert sd["lr_lambdas"] == [{"k": 0.5}, None]
    other = S.LambdaLR(make_opt(groups=2), [Decay(0.9), lambda t: 1.0])
    other.load_state_dict(sd)
    assert other.lr_lambdas[0].k == 0.5


def test_sequential_state_dict_nests_children():
    opt = make_opt()
    sched = S.SequentialLR(opt, [S.ConstantLR(opt, 0.5, 2), S.ExponentialLR(opt, 0.9)], [3])
    sd = sched.state_dict()
    assert len(sd["_schedulers"]) == 2 and "optimizer" not in sd["_schedulers"][0]


def test_tensor_lr_is_filled_in_place():
    p = cltorch.zeros(3, requires_grad=True)
    lr = cltorch.tensor(0.1)
    opt = SGD([p], lr=lr)
    sched = S.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(3):
        p.grad = cltorch.ones(3)
        opt.step()
        sched.step()
    assert opt.param_groups[0]["lr"] is lr                      # filled, never replaced
    assert float(lr.item()) == pytest.approx(0.1 * 0.5 ** 3)
    assert float(sched.get_last_lr()[0].item()) == pytest.approx(0.0125)
    assert sched.get_last_lr()[0] is not lr                     # a copy
    assert p.detach().numpy() == pytest.approx([-(0.1 + 0.05 + 0.025)] * 3)
