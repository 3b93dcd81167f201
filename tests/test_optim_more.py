"""cltorch.optim's Adadelta, ASGD, Rprop, Adafactor, LBFGS, SparseAdam and swa_utils against torch itself (the
test-only oracle): the same parameters and gradients for several steps, state dicts exchanged both ways
through cltorch.save/torch.load, LBFGS iterates on Rosenbrock and least squares, SWALR rates, AveragedModel
averages and update_bn statistics."""
import copy
import io
import math

import numpy as np
import pytest

import cltorch
from cltorch import optim
from cltorch.optim import swa_utils

torch = pytest.importorskip("torch")

SHAPES = [(3, 4), (7,), (2, 3, 5)]
STEPS = 10


def cl_of(a, device="cpu", requires_grad=False):
    return cltorch.tensor(np.array(a), device=device, requires_grad=requires_grad)


def np_of(t):
    if isinstance(t, cltorch.Tensor):
        return t.detach().cpu().numpy()
    return t.detach().numpy()


def make_params(dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in SHAPES]


def grad_at(step, i, shape, dtype):
    """The gradient fed at ``step`` to parameter ``i``: random, with sign changes from step to step."""
    rng = np.random.default_rng(1000 + 17 * step + i)
    return rng.standard_normal(shape).astype(dtype)


def run_both(cl_cls, t_cls, kwargs, device, dtype=np.float32, steps=STEPS, start=None):
    p0 = make_params(dtype) if start is None else start
    cps = [cl_of(a, device, True) for a in p0]
    tps = [torch.tensor(a, requires_grad=True) for a in p0]
    copt, topt = cl_cls(cps, **kwargs), t_cls(tps, **kwargs)
    for k in range(steps):
        for i, (c, t) in enumerate(zip(cps, tps)):
            g = grad_at(k, i, c.shape, dtype)
            c.grad = cl_of(g, device)
            t.grad = torch.tensor(g)
        copt.step()
        topt.step()
        yield k, cps, tps, copt, topt


def assert_params_close(cps, tps, rtol=1e-5, atol=1e-6, what=""):
    for c, t in zip(cps, tps):
        np.testing.assert_allclose(np_of(c), np_of(t), rtol=rtol, atol=atol, err_msg=what)


CASES = {
    "Adadelta": [dict(), dict(lr=0.5, rho=0.8, weight_decay=0.1), dict(maximize=True, eps=1e-4, foreach=True)],
    "ASGD": [dict(lr=0.05), dict(lr=0.05, lambd=1e-2, alpha=0.5, t0=3, weight_decay=0.1),
             dict(lr=0.02, maximize=True, t0=0, foreach=True)],
    "Rprop": [dict(), dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.08)), dict(maximize=True, foreach=True)],
    "Adafactor": [dict(), dict(lr=0.05, weight_decay=0.1, d=1.5),
                  dict(maximize=True, eps=(1e-6, 1e-2), beta2_decay=-0.5, foreach=True)],
}
STATE_KEYS = {"Adadelta": ["square_avg", "acc_delta"], "ASGD": ["ax", "eta", "mu"], "Rprop": ["prev", "step_size"],
              "Adafactor": ["row_var", "col_var", "variance"]}


@pytest.mark.parametrize("name,case", [(n, i) for n in CASES for i in range(len(CASES[n]))])
def test_matches_torch(name, case, device):
    kwargs = CASES[name][case]
    for k, cps, tps, copt, topt in run_both(getattr(optim, name), getattr(torch.optim, name), kwargs, device):
        assert_params_close(cps, tps, what=f"{name} {kwargs} step {k + 1}")
    for c, t in zip(cps, tps):
        cs, ts = copt.state[c], topt.state[t]
        assert set(cs) == set(ts)
        assert float(cs["step"].item()) == float(ts["step"].item()) == STEPS
        for key in STATE_KEYS[name]:
            if key in ts:
                np.testing.assert_allclose(np_of(cs[key]), np_of(ts[key]), rtol=1e-5, atol=1e-6, err_msg=key)


@pytest.mark.parametrize("name", list(CASES))
def test_float64_matches_torch_tightly(name):
    kwargs = CASES[name][1]
    for _, cps, tps, _, _ in run_both(getattr(optim, name), getattr(torch.optim, name), kwargs, "cpu",
                                      dtype=np.float64):
        pass
    assert cps[0].dtype is cltorch.float64
    assert_params_close(cps, tps, rtol=1e-6, atol=1e-7)   # ASGD rounds eta to float32 in both


def _torch_to_cl(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return cltorch.load(buf)


def _cl_to_torch(obj):
    buf = io.BytesIO()
    cltorch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("direction", ["torch_to_cl", "cl_to_torch", "cl_to_cl"])
def test_state_dict_interoperates(name, direction):
    kwargs = CASES[name][1]
    cl_cls, t_cls = getattr(optim, name), getattr(torch.optim, name)
    gen = run_both(cl_cls, t_cls, kwargs, "cpu")
    for k, cps, tps, copt, topt in gen:
        if k == 3:
            break
    # a fresh optimizer on copies of the current parameters, loaded from the other side's state dict
    if direction == "torch_to_cl":
        new_ps = [cl_of(np_of(t), "cpu", True) for t in tps]
        new = cl_cls(new_ps, **kwargs)
        new.load_state_dict(_torch_to_cl(topt.state_dict()))
        ref_ps, ref = tps, topt
    elif direction == "cl_to_torch":
        new_ps = [torch.tensor(np_of(c), requires_grad=True) for c in cps]
        new = t_cls(new_ps, **kwargs)
        new.load_state_dict(_cl_to_torch(copt.state_dict()))
        ref_ps, ref = cps, copt
    else:
        new_ps = [cl_of(np_of(c), "cpu", True) for c in cps]
        new = cl_cls(new_ps, **kwargs)
        new.load_state_dict(copy.deepcopy(copt.state_dict()))
        ref_ps, ref = cps, copt
    for k in range(4, 8):
        for i, (a, b) in enumerate(zip(new_ps, ref_ps)):
            g = grad_at(k, i, a.shape, np.float32)
            a.grad = cl_of(g) if isinstance(a, cltorch.Tensor) else torch.tensor(g)
            b.grad = cl_of(g) if isinstance(b, cltorch.Tensor) else torch.tensor(g)
        new.step()
        ref.step()
        assert_params_close(new_ps, ref_ps, what=f"{direction} step {k + 1}")


@pytest.mark.parametrize("name,bad", [
    ("Adadelta", dict(lr=-1.0)), ("Adadelta", dict(rho=1.5)), ("Adadelta", dict(eps=-1.0)),
    ("Adadelta", dict(weight_decay=-1.0)), ("ASGD", dict(lr=-1.0)), ("ASGD", dict(weight_decay=-0.1)),
    ("Rprop", dict(lr=-1.0)), ("Rprop", dict(etas=(1.2, 0.5))), ("Adafactor", dict(beta2_decay=0.5)),
    ("Adafactor", dict(d=0.5)), ("Adafactor", dict(eps=(-1.0, 1e-3))), ("SparseAdam", dict(lr=0.0)),
    ("SparseAdam", dict(eps=0.0)), ("SparseAdam", dict(betas=(1.0, 0.9))), ("LBFGS", dict(lr=-1.0)),
])
def test_invalid_hyperparameters_raise_like_torch(name, bad):
    with pytest.raises(ValueError) as t_err:
        getattr(torch.optim, name)([torch.zeros(2, requires_grad=True)], **bad)
    with pytest.raises(ValueError) as c_err:
        getattr(optim, name)([cltorch.zeros(2, requires_grad=True)], **bad)
    assert str(c_err.value) == str(t_err.value)


def test_differentiable_not_supported():
    with pytest.raises(NotImplementedError, match="differentiable"):
        optim.Adadelta([cltorch.zeros(2, requires_grad=True)], differentiable=True)


# ====================================================================== SparseAdam / sparse embeddings
def test_sparse_adam_rejects_dense_gradients_like_torch():
    p = cltorch.zeros(3, requires_grad=True)
    tp = torch.zeros(3, requires_grad=True)
    opt, topt = optim.SparseAdam([p]), torch.optim.SparseAdam([tp])
    assert opt.step() is None and topt.step() is None      # no gradients yet: nothing to reject
    p.grad, tp.grad = cltorch.ones(3), torch.ones(3)
    with pytest.raises(RuntimeError) as t_err:
        topt.step()
    with pytest.raises(RuntimeError) as c_err:
        opt.step()
    assert str(c_err.value) == str(t_err.value)
    assert np_of(p).tolist() == [0.0, 0.0, 0.0]


def test_sparse_embedding_raises_not_implemented():
    emb = cltorch.nn.Embedding(5, 3, sparse=True)
    with pytest.raises(NotImplementedError, match="sparse"):
        emb(cltorch.tensor([1, 2]))


# ====================================================================== LBFGS
def rosenbrock(x):
    return (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2


def closure_for(opt, x, counts=None, key=None):
    """The usual LBFGS closure for ``rosenbrock(x)``; counts its calls in ``counts[key]`` when given."""
    def closure():
        if counts is not None:
            counts[key] += 1
        opt.zero_grad()
        loss = rosenbrock(x)
        loss.backward()
        return loss
    return closure


def lbfgs_pair(kwargs, x0, dtype):
    cx = cl_of(np.array(x0, dtype=dtype), requires_grad=True)
    tx = torch.tensor(np.array(x0, dtype=dtype), requires_grad=True)
    copt, topt = optim.LBFGS([cx], **kwargs), torch.optim.LBFGS([tx], **kwargs)
    counts = {"cl": 0, "torch": 0}
    return cx, tx, copt, topt, closure_for(copt, cx, counts, "cl"), closure_for(topt, tx, counts, "torch"), counts


@pytest.mark.parametrize("kwargs", [dict(line_search_fn="strong_wolfe"),
                                    dict(line_search_fn="strong_wolfe", history_size=3, max_iter=7),
                                    dict(lr=0.05, max_iter=10), dict(lr=0.1, history_size=2, max_iter=5),
                                    # a short first step: the line search extrapolates (cubic with bounds)
                                    dict(lr=1e-3, line_search_fn="strong_wolfe", max_iter=6),
                                    # a long first step: Armijo fails and zoom shrinks the bracket
                                    dict(lr=30.0, line_search_fn="strong_wolfe", max_iter=6),
                                    # too few evaluations: the line search stops at max_ls
                                    dict(lr=1e-3, line_search_fn="strong_wolfe", max_iter=4, max_eval=6)])
def test_lbfgs_rosenbrock_iterates_match_torch(kwargs):
    cx, tx, copt, topt, cc, tc, counts = lbfgs_pair(kwargs, [-1.5, 2.0], np.float64)
    for k in range(4):
        cl_loss = copt.step(cc)
        t_loss = topt.step(tc)
        assert float(cl_loss.item()) == pytest.approx(float(t_loss.item()), rel=1e-9)
        np.testing.assert_allclose(np_of(cx), np_of(tx), rtol=1e-7, atol=1e-10, err_msg=f"step {k + 1}")
        assert counts["cl"] == counts["torch"]
        cs, ts = copt.state[cx], topt.state[tx]
        assert (cs["func_evals"], cs["n_iter"]) == (ts["func_evals"], ts["n_iter"])
        assert len(cs["old_dirs"]) == len(ts["old_dirs"])


def test_lbfgs_strong_wolfe_converges_to_rosenbrock_minimum(device):
    x = cl_of(np.array([-1.2, 1.0], dtype=np.float64), device, True)
    opt = optim.LBFGS([x], max_iter=200, line_search_fn="strong_wolfe", tolerance_grad=1e-12,
                      tolerance_change=1e-14)
    closure = closure_for(opt, x)
    for _ in range(3):
        opt.step(closure)
    np.testing.assert_allclose(np_of(x), [1.0, 1.0], atol=1e-6)
    assert rosenbrock(x).item() < 1e-12


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_least_squares_matches_torch_and_lstsq(line_search_fn, device):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((40, 5)).astype(np.float32)
    y = (X @ rng.standard_normal((5, 2)) + 0.1 * rng.standard_normal((40, 2))).astype(np.float32)
    w0 = (0.1 * rng.standard_normal((2, 5))).astype(np.float32)
    cmodel, tmodel = cltorch.nn.Linear(5, 2).to(device), torch.nn.Linear(5, 2)
    with cltorch.no_grad():
        cmodel.weight.copy_(cl_of(w0, device))
        cmodel.bias.zero_()
    with torch.no_grad():
        tmodel.weight.copy_(torch.tensor(w0))
        tmodel.bias.zero_()
    kw = dict(lr=1 if line_search_fn else 0.5, max_iter=15, history_size=10, line_search_fn=line_search_fn)
    copt, topt = optim.LBFGS(cmodel.parameters(), **kw), torch.optim.LBFGS(tmodel.parameters(), **kw)
    cX, cy, tX, ty = cl_of(X, device), cl_of(y, device), torch.tensor(X), torch.tensor(y)

    def cclosure():
        copt.zero_grad()
        loss = cltorch.nn.functional.mse_loss(cmodel(cX), cy)
        loss.backward()
        return loss

    def tclosure():
        topt.zero_grad()
        loss = torch.nn.functional.mse_loss(tmodel(tX), ty)
        loss.backward()
        return loss

    copt.step(cclosure)
    topt.step(tclosure)
    # float32: the first few iterates agree closely; later ones drift by rounding only
    np.testing.assert_allclose(np_of(cmodel.weight), np_of(tmodel.weight), rtol=1e-3, atol=1e-4)
    for _ in range(3):
        copt.step(cclosure)
    A = np.hstack([X, np.ones((40, 1))]).astype(np.float64)
    sol, *_ = np.linalg.lstsq(A, y.astype(np.float64), rcond=None)
    best = np.mean((A @ sol - y) ** 2)
    assert cclosure().item() < best * (1 + 1e-4)
    np.testing.assert_allclose(np_of(cmodel.weight), sol[:5].T, atol=2e-3)


def test_lbfgs_errors_like_torch():
    a, b = cltorch.zeros(2, requires_grad=True), cltorch.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="parameter groups"):
        optim.LBFGS([{"params": [a]}, {"params": [b]}])
    opt = optim.LBFGS([a], line_search_fn="backtracking")

    def closure():
        opt.zero_grad()
        loss = ((a - 1) ** 2).sum()
        loss.backward()
        return loss

    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        opt.step(closure)


def test_lbfgs_state_dict_round_trip_and_from_torch():
    kw = dict(line_search_fn="strong_wolfe", max_iter=3, history_size=4)
    cx, tx, copt, topt, cc, tc, _ = lbfgs_pair(kw, [-1.5, 2.0], np.float64)
    for _ in range(2):
        copt.step(cc)
        topt.step(tc)
    # torch's state dict (0-d tensors for t, ro, H_diag) into a fresh cltorch optimizer on the same point
    nx = cl_of(np_of(tx), requires_grad=True)
    new = optim.LBFGS([nx], **kw)
    new.load_state_dict(_torch_to_cl(topt.state_dict()))
    nclosure = closure_for(new, nx)

    # and cltorch's state dict into a fresh torch optimizer
    ty2 = torch.tensor(np_of(cx), requires_grad=True)
    tnew = torch.optim.LBFGS([ty2], **kw)
    tnew.load_state_dict(_cl_to_torch(copt.state_dict()))
    t2closure = closure_for(tnew, ty2)

    for _ in range(2):
        new.step(nclosure)
        topt.step(tc)
        tnew.step(t2closure)
        copt.step(cc)
        np.testing.assert_allclose(np_of(nx), np_of(tx), rtol=1e-7, atol=1e-10)
        np.testing.assert_allclose(np_of(ty2), np_of(cx), rtol=1e-7, atol=1e-10)


# ====================================================================== SWALR
@pytest.mark.parametrize("strategy", ["cos", "linear"])
@pytest.mark.parametrize("anneal_epochs", [0, 1, 4])
def test_swalr_rates_match_torch(strategy, anneal_epochs):
    import warnings
    cp = [cltorch.zeros(2, requires_grad=True), cltorch.zeros(2, requires_grad=True)]
    tp = [torch.zeros(2, requires_grad=True), torch.zeros(2, requires_grad=True)]
    copt = optim.SGD([{"params": [cp[0]]}, {"params": [cp[1]], "lr": 0.3}], lr=0.1)
    topt = torch.optim.SGD([{"params": [tp[0]]}, {"params": [tp[1]], "lr": 0.3}], lr=0.1)
    cs = swa_utils.SWALR(copt, swa_lr=[0.05, 0.01], anneal_epochs=anneal_epochs, anneal_strategy=strategy)
    ts = torch.optim.swa_utils.SWALR(topt, swa_lr=[0.05, 0.01], anneal_epochs=anneal_epochs,
                                     anneal_strategy=strategy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(8):
            np.testing.assert_allclose(cs.get_last_lr(), ts.get_last_lr(), rtol=1e-12)
            copt.step()
            topt.step()
            cs.step()
            ts.step()
    sd = cs.state_dict()
    assert "anneal_func" not in sd and "optimizer" not in sd
    cs2 = swa_utils.SWALR(copt, swa_lr=0.5, anneal_strategy="linear")
    cs2.load_state_dict(sd)
    assert cs2.anneal_func is (cs2._cosine_anneal if strategy == "cos" else cs2._linear_anneal)


def test_swalr_errors():
    opt = optim.SGD([cltorch.zeros(2, requires_grad=True)], lr=0.1)
    with pytest.raises(ValueError, match="anneal_strategy"):
        swa_utils.SWALR(opt, swa_lr=0.1, anneal_strategy="exp")
    with pytest.raises(ValueError, match="anneal_epochs"):
        swa_utils.SWALR(opt, swa_lr=0.1, anneal_epochs=-1)
    with pytest.raises(ValueError):
        swa_utils.SWALR(opt, swa_lr=[0.1, 0.2])


# ====================================================================== AveragedModel / update_bn
def model_pair(seed=0):
    """The same Linear -> BatchNorm1d -> Linear model in cltorch and torch."""
    tm = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.BatchNorm1d(6), torch.nn.ReLU(), torch.nn.Linear(6, 2))
    cm = cltorch.nn.Sequential(cltorch.nn.Linear(4, 6), cltorch.nn.BatchNorm1d(6), cltorch.nn.ReLU(),
                               cltorch.nn.Linear(6, 2))
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for p in tm.parameters():
            p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32)))
    cm.load_state_dict({k: cl_of(v.numpy()) for k, v in tm.state_dict().items()})
    return cm, tm


def perturb(cm, tm, k):
    """Move both models' weights the same way, and run one training batch (changes BN buffers)."""
    rng = np.random.default_rng(50 + k)
    with torch.no_grad(), cltorch.no_grad():
        for cp, tp in zip(cm.parameters(), tm.parameters()):
            d = (0.3 * rng.standard_normal(tuple(tp.shape))).astype(np.float32)
            tp.add_(torch.tensor(d))
            cp.add_(cl_of(d))
    x = rng.standard_normal((8, 4)).astype(np.float32)
    cm.train(), tm.train()
    cm(cl_of(x)), tm(torch.tensor(x))


@pytest.mark.parametrize("kind", ["swa", "ema_multi", "ema_avg", "swa_avg", "ema_buffers"])
def test_averaged_model_matches_torch(kind):
    cm, tm = model_pair()
    if kind == "swa":
        ckw, tkw = {}, {}
    elif kind == "ema_multi":
        ckw = dict(multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.9))
        tkw = dict(multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.9))
    elif kind == "ema_avg":
        ckw = dict(avg_fn=swa_utils.get_ema_avg_fn(0.8))
        tkw = dict(avg_fn=torch.optim.swa_utils.get_ema_avg_fn(0.8))
    elif kind == "swa_avg":
        ckw = dict(avg_fn=swa_utils.get_swa_avg_fn())
        tkw = dict(avg_fn=torch.optim.swa_utils.get_swa_avg_fn())
    else:
        ckw = dict(multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.7), use_buffers=True)
        tkw = dict(multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.7), use_buffers=True)
    ca, ta = swa_utils.AveragedModel(cm, **ckw), torch.optim.swa_utils.AveragedModel(tm, **tkw)
    for k in range(5):
        perturb(cm, tm, k)
        ca.update_parameters(cm)
        ta.update_parameters(tm)
    assert int(ca.n_averaged.item()) == int(ta.n_averaged.item()) == 5
    csd, tsd = ca.state_dict(), ta.state_dict()
    assert list(csd) == list(tsd)
    for key in tsd:
        np.testing.assert_allclose(np_of(csd[key]), tsd[key].numpy(), rtol=1e-5, atol=1e-6, err_msg=key)
    x = np.random.default_rng(9).standard_normal((3, 4)).astype(np.float32)
    ca.eval(), ta.eval()
    np.testing.assert_allclose(np_of(ca(cl_of(x))), ta(torch.tensor(x)).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_averaged_model_errors_and_decay_checks():
    cm, _ = model_pair()
    with pytest.raises(AssertionError):
        swa_utils.AveragedModel(cm, avg_fn=swa_utils.get_swa_avg_fn(), multi_avg_fn=swa_utils.get_swa_multi_avg_fn())
    with pytest.raises(ValueError, match="decay"):
        swa_utils.get_ema_avg_fn(1.5)
    with pytest.raises(ValueError, match="decay"):
        swa_utils.get_ema_multi_avg_fn(-0.1)


def test_update_bn_matches_torch():
    cm, tm = model_pair(1)
    rng = np.random.default_rng(4)
    batches = [rng.standard_normal((n, 4)).astype(np.float32) for n in (5, 8, 3)]
    closs = [(cl_of(b), cl_of(np.zeros(len(b)))) for b in batches]          # (input, target) pairs
    tloss = [torch.tensor(b) for b in batches]                              # bare tensors
    cm.eval(), tm.eval()
    cm[1].momentum = tm[1].momentum = 0.3
    swa_utils.update_bn(closs, cm)
    torch.optim.swa_utils.update_bn(tloss, tm)
    assert not cm.training and cm[1].momentum == 0.3
    for key in ("1.running_mean", "1.running_var", "1.num_batches_tracked"):
        np.testing.assert_allclose(np_of(cm.state_dict()[key]), tm.state_dict()[key].numpy(), rtol=1e-5,
                                   atol=1e-6, err_msg=key)
    # the cumulative average over the three batches equals numpy's of the per-batch statistics
    h = [np.asarray(b, np.float64) @ np_of(cm[0].weight).T.astype(np.float64) + np_of(cm[0].bias) for b in batches]
    np.testing.assert_allclose(np_of(cm[1].running_mean), np.mean([a.mean(0) for a in h], 0), rtol=1e-4,
                               atol=1e-5)


def wiggly(x):
    """A 1-D-along-d test function with several local minima: sum(sin(3x) + 0.05 x^2 + 0.01 x^4), and its
    gradient (float64 numpy)."""
    return float(np.sum(np.sin(3 * x) + 0.05 * x ** 2 + 0.01 * x ** 4)), 3 * np.cos(3 * x) + 0.1 * x + 0.04 * x ** 3


@pytest.mark.parametrize("t0", [1e-3, 0.05, 0.3, 1.0, 4.0, 25.0])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("max_ls", [25, 3])
def test_strong_wolfe_line_search_matches_torch(t0, seed, max_ls):
    from cltorch.optim.lbfgs import _strong_wolfe
    from torch.optim.lbfgs import _strong_wolfe as torch_strong_wolfe
    rng = np.random.default_rng(seed)
    x0 = rng.standard_normal(3) * 2
    f0, g0 = wiggly(x0)
    d = -g0 * rng.uniform(0.2, 2.0, 3)          # a descent direction, not the gradient's
    evals = {"cl": [], "torch": []}

    def phi(t):
        evals["cl"].append(t)
        f, g = wiggly(x0 + t * d)
        gc = cl_of(g)
        return f, gc, float(np.dot(g, d))

    def obj(x, t, dt):
        evals["torch"].append(float(t))
        f, g = wiggly(x0 + float(t) * d)
        return f, torch.tensor(g)

    f, g, t, n = _strong_wolfe(phi, t0, f0, cl_of(g0), float(np.dot(g0, d)), float(np.abs(d).max()), max_ls=max_ls)
    tf, tg, tt, tn = torch_strong_wolfe(obj, torch.tensor(x0), t0, torch.tensor(d), f0, torch.tensor(g0),
                                        torch.tensor(g0).dot(torch.tensor(d)), max_ls=max_ls)
    np.testing.assert_allclose(evals["cl"], evals["torch"], rtol=1e-10)
    assert n == tn
    assert float(t) == pytest.approx(float(tt), rel=1e-10)
    assert f == pytest.approx(float(tf), rel=1e-12)
    np.testing.assert_allclose(np_of(g), tg.numpy(), rtol=1e-12)


def test_adagrad_share_memory_shares_its_sums():
    """Adagrad.share_memory moves every ``sum`` state to shared memory (torch's behaviour), and a step keeps
    updating that same shared storage."""
    import cltorch
    p = cltorch.nn.Parameter(cltorch.ones(4))
    opt = cltorch.optim.Adagrad([p], lr=0.1, initial_accumulator_value=0.5)
    assert not opt.state[p]["sum"].is_shared()
    opt.share_memory()
    s = opt.state[p]["sum"]
    assert s.is_shared()
    p.grad = cltorch.full((4,), 2.0)
    opt.step()
    assert opt.state[p]["sum"] is s and s.is_shared()
    np.testing.assert_allclose(s.numpy(), np.full(4, 4.5, np.float32))


def test_adamw_module_path():
    from cltorch.optim.adamw import AdamW
    assert AdamW is cltorch.optim.AdamW
