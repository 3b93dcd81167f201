"""cltorch.distributions against torch.distributions: densities, entropies, moments, cdf/icdf and KL values on
the same parameters and points; draws' shapes, dtypes, devices and sample moments (cltorch's generator, so
not torch's numbers); reparameterised gradients; validation errors with torch's messages."""
import math
import re

import numpy as np
import pytest

import cltorch
import cltorch.distributions as D

from conftest import to_np

torch = pytest.importorskip("torch")
TD = torch.distributions

R = np.random.RandomState(0)
LOC = R.randn(3, 4).astype(np.float32)
SCALE = (R.rand(3, 4) + 0.5).astype(np.float32)
PROB = (R.rand(3, 4) * 0.8 + 0.1).astype(np.float32)
LOGITS = R.randn(3, 5).astype(np.float32)
X = R.randn(3, 4).astype(np.float32)
XPOS = (R.rand(3, 4) * 2 + 0.05).astype(np.float32)
U = (R.rand(3, 4) * 0.9 + 0.05).astype(np.float32)
BITS = (R.rand(3, 4) > 0.5).astype(np.float32)
IDX = R.randint(0, 5, size=(3,)).astype(np.int64)
COUNTS = R.randint(0, 7, size=(3, 4)).astype(np.float32)


def both(a, device):
    return cltorch.tensor(a, device=device), torch.tensor(a)


# name -> (constructor taking a "lib" (D or TD) and a tensor maker, value array)
SPECS = {
    "Normal": (lambda L, t: L.Normal(t(LOC), t(SCALE)), X),
    "Bernoulli_probs": (lambda L, t: L.Bernoulli(probs=t(PROB)), BITS),
    "Bernoulli_logits": (lambda L, t: L.Bernoulli(logits=t(LOC)), BITS),
    "Categorical_probs": (lambda L, t: L.Categorical(probs=t(np.exp(LOGITS))), IDX),
    "Categorical_logits": (lambda L, t: L.Categorical(logits=t(LOGITS)), IDX),
    "OneHotCategorical": (lambda L, t: L.OneHotCategorical(logits=t(LOGITS)),
                          np.eye(5, dtype=np.float32)[IDX]),
    "Uniform": (lambda L, t: L.Uniform(t(X - U), t(X + SCALE)), X),
    "Exponential": (lambda L, t: L.Exponential(t(SCALE)), XPOS),
    "Laplace": (lambda L, t: L.Laplace(t(LOC), t(SCALE)), X),
    "LogNormal": (lambda L, t: L.LogNormal(t(LOC), t(SCALE)), XPOS),
    "Poisson": (lambda L, t: L.Poisson(t(XPOS * 3)), COUNTS),
    "Independent_Normal": (lambda L, t: L.Independent(L.Normal(t(LOC), t(SCALE)), 1), X),
}
PROPS = ["mean", "variance", "stddev", "mode"]
METHODS = {"log_prob": "value", "cdf": "value", "icdf": "u", "entropy": None}


def _pair(name, device):
    make, value = SPECS[name]
    return (make(D, lambda a: cltorch.tensor(a, device=device)), make(TD, torch.tensor), value)


def _cmp(got, ref, rtol=2e-5, atol=2e-5):
    ref = ref.detach().numpy()
    got = to_np(got)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol, equal_nan=True)


@pytest.mark.parametrize("name", list(SPECS))
def test_values_against_torch(name, device):
    ours, ref, value = _pair(name, device)
    assert tuple(ours.batch_shape) == tuple(ref.batch_shape)
    assert tuple(ours.event_shape) == tuple(ref.event_shape)
    assert ours.has_rsample == ref.has_rsample
    assert ours.has_enumerate_support == ref.has_enumerate_support
    for p in PROPS:
        try:
            r = getattr(ref, p)
        except NotImplementedError:
            continue
        _cmp(getattr(ours, p), r)
    checked = 0
    for m, arg in METHODS.items():
        args = () if arg is None else ((value,) if arg == "value" else (U,))
        try:
            r = getattr(ref, m)(*(torch.tensor(a) for a in args))
        except NotImplementedError:
            continue
        got = getattr(ours, m)(*(cltorch.tensor(a, device=device) for a in args))
        _cmp(got, r, rtol=1e-4, atol=1e-4)
        assert got.device == cltorch.device(device)
        checked += 1
    assert checked >= 1


@pytest.mark.parametrize("name", ["Bernoulli_probs", "Categorical_logits", "OneHotCategorical"])
def test_enumerate_support(name, device):
    ours, ref, _ = _pair(name, device)
    for expand in (True, False):
        _cmp(ours.enumerate_support(expand), ref.enumerate_support(expand))


KL_PAIRS = [
    ("Normal", lambda L, t: (L.Normal(t(LOC), t(SCALE)), L.Normal(t(X), t(XPOS + 0.2)))),
    ("Bernoulli", lambda L, t: (L.Bernoulli(probs=t(PROB)), L.Bernoulli(logits=t(LOC)))),
    ("Categorical", lambda L, t: (L.Categorical(logits=t(LOGITS)), L.Categorical(probs=t(np.exp(-LOGITS))))),
    ("OneHotCategorical", lambda L, t: (L.OneHotCategorical(logits=t(LOGITS)),
                                        L.OneHotCategorical(logits=t(-LOGITS)))),
    ("Uniform", lambda L, t: (L.Uniform(t(LOC), t(LOC + SCALE)), L.Uniform(t(LOC - U), t(LOC + SCALE + U)))),
    ("Uniform_inf", lambda L, t: (L.Uniform(t(LOC - 1), t(LOC + SCALE)), L.Uniform(t(LOC), t(LOC + SCALE)))),
    ("Uniform_Normal", lambda L, t: (L.Uniform(t(LOC), t(LOC + SCALE)), L.Normal(t(X), t(XPOS)))),
    ("Exponential", lambda L, t: (L.Exponential(t(SCALE)), L.Exponential(t(XPOS)))),
    ("Laplace", lambda L, t: (L.Laplace(t(LOC), t(SCALE)), L.Laplace(t(X), t(XPOS)))),
    ("Poisson", lambda L, t: (L.Poisson(t(SCALE)), L.Poisson(t(XPOS)))),
    ("Independent", lambda L, t: (L.Independent(L.Normal(t(LOC), t(SCALE)), 1),
                                  L.Independent(L.Normal(t(X), t(XPOS)), 1))),
    ("LogNormal", lambda L, t: (L.LogNormal(t(LOC), t(SCALE)), L.LogNormal(t(X), t(XPOS)))),
]


@pytest.mark.parametrize("name,make", KL_PAIRS, ids=[k for k, _ in KL_PAIRS])
def test_kl_against_torch(name, make, device):
    p, q = make(D, lambda a: cltorch.tensor(a, device=device))
    rp, rq = make(TD, torch.tensor)
    _cmp(D.kl_divergence(p, q), TD.kl_divergence(rp, rq), rtol=1e-4, atol=1e-5)


def test_kl_registry_dispatch_and_missing():
    class MyNormal(D.Normal):
        pass

    p, q = MyNormal(0.0, 1.0), D.Normal(1.0, 2.0)
    ref = TD.kl_divergence(TD.Normal(0.0, 1.0), TD.Normal(1.0, 2.0))
    assert abs(D.kl_divergence(p, q).item() - ref.item()) < 1e-6     # subclass falls back to the base pair

    @D.register_kl(MyNormal, D.Normal)
    def _mine(p, q):
        return cltorch.tensor(42.0)

    assert D.kl_divergence(p, q).item() == 42.0
    with pytest.raises(NotImplementedError, match="No KL"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Exponential(1.0))
    with pytest.raises(TypeError):
        D.register_kl(int, D.Normal)


def _spd(k, seed):
    r = np.random.RandomState(seed)
    a = r.randn(2, k, k).astype(np.float32)
    return (a @ a.transpose(0, 2, 1) + k * np.eye(k, dtype=np.float32)).astype(np.float32)


@pytest.mark.parametrize("param", ["scale_tril", "covariance_matrix", "precision_matrix"])
def test_multivariate_normal(param, device):
    k = 3
    cov = _spd(k, 1)
    loc = R.randn(2, k).astype(np.float32)
    x = R.randn(4, 2, k).astype(np.float32)
    mat = {"scale_tril": np.linalg.cholesky(cov).astype(np.float32), "covariance_matrix": cov,
           "precision_matrix": np.linalg.inv(cov).astype(np.float32)}[param]
    ours = D.MultivariateNormal(cltorch.tensor(loc, device=device), **{param: cltorch.tensor(mat, device=device)})
    ref = TD.MultivariateNormal(torch.tensor(loc), **{param: torch.tensor(mat)})
    assert tuple(ours.batch_shape) == (2,) and tuple(ours.event_shape) == (k,)
    _cmp(ours.log_prob(cltorch.tensor(x, device=device)), ref.log_prob(torch.tensor(x)), rtol=1e-4, atol=1e-4)
    _cmp(ours.entropy(), ref.entropy(), rtol=1e-4, atol=1e-4)
    for name in ("mean", "variance", "scale_tril", "covariance_matrix", "precision_matrix"):
        _cmp(getattr(ours, name), getattr(ref, name), rtol=1e-4, atol=1e-4)
    q = D.MultivariateNormal(cltorch.tensor(loc[::-1].copy(), device=device),
                             covariance_matrix=cltorch.tensor(_spd(k, 2), device=device))
    rq = TD.MultivariateNormal(torch.tensor(loc[::-1].copy()), covariance_matrix=torch.tensor(_spd(k, 2)))
    _cmp(D.kl_divergence(ours, q), TD.kl_divergence(ref, rq), rtol=1e-4, atol=1e-4)
    s = ours.rsample((5,))
    assert tuple(s.shape) == (5, 2, k) and s.device == cltorch.device(device)


@pytest.mark.parametrize("param", ["scale_tril", "covariance_matrix", "precision_matrix"])
def test_multivariate_normal_gradients_match_torch(param, device):
    """Gradients of log_prob + entropy and of a reparameterised sample (the same standard normal draws fed to
    both: rsample is loc + L eps) reach loc and the matrix parameter as torch's do, through
    cltorch.linalg.cholesky / solve_triangular's derivatives."""
    k = 4
    cov = _spd(k, 5)
    mat = {"scale_tril": np.linalg.cholesky(cov).astype(np.float32), "covariance_matrix": cov,
           "precision_matrix": np.linalg.inv(cov).astype(np.float32)}[param]
    loc = R.randn(2, k).astype(np.float32)
    x = R.randn(3, 2, k).astype(np.float32)
    w = R.randn(3, 2, k).astype(np.float32)
    cl_loc, cl_mat = (cltorch.tensor(a, device=device, requires_grad=True) for a in (loc, mat))
    t_loc, t_mat = (torch.tensor(a, requires_grad=True) for a in (loc, mat))
    ours = D.MultivariateNormal(cl_loc, **{param: cl_mat})
    ref = TD.MultivariateNormal(t_loc, **{param: t_mat})
    (ours.log_prob(cltorch.tensor(x, device=device)).sum() + ours.entropy().sum()).backward()
    (ref.log_prob(torch.tensor(x)).sum() + ref.entropy().sum()).backward()
    np.testing.assert_allclose(to_np(cl_loc.grad), t_loc.grad.numpy(), rtol=1e-4, atol=1e-4)
    # scale_tril's gradient lives on its lower triangle only in both (torch's also has zeros above it)
    np.testing.assert_allclose(to_np(cl_mat.grad), t_mat.grad.numpy(), rtol=1e-3, atol=1e-4)
    cl_loc.grad = cl_mat.grad = None
    t_loc.grad = t_mat.grad = None
    ours = D.MultivariateNormal(cl_loc, **{param: cl_mat})       # fresh graphs for the second backward
    ref = TD.MultivariateNormal(t_loc, **{param: t_mat})
    cltorch.manual_seed(11)
    s = ours.rsample((3,))
    cltorch.manual_seed(11)
    eps = to_np(cltorch.randn((3, 2, k), device=device))       # the draws rsample made
    ref_s = t_loc + (ref._unbroadcasted_scale_tril @ torch.tensor(eps).unsqueeze(-1)).squeeze(-1)
    np.testing.assert_allclose(to_np(s), ref_s.detach().numpy(), rtol=1e-4, atol=1e-4)
    (s * cltorch.tensor(w, device=device)).sum().backward()
    (ref_s * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(to_np(cl_loc.grad), t_loc.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(to_np(cl_mat.grad), t_mat.grad.numpy(), rtol=1e-3, atol=1e-4)


def test_multivariate_normal_constructions_agree(device):
    """The three parameterisations of one law give the same scale_tril, precision and covariance (and the
    same as torch's), also with a batch of matrices broadcast against a batch of locs."""
    k = 5
    cov = _spd(k, 7)
    loc = cltorch.tensor(R.randn(3, 1, k).astype(np.float32), device=device)
    made = [D.MultivariateNormal(loc, covariance_matrix=cltorch.tensor(cov, device=device)),
            D.MultivariateNormal(loc, precision_matrix=cltorch.tensor(np.linalg.inv(cov).astype(np.float32),
                                                                      device=device)),
            D.MultivariateNormal(loc, scale_tril=cltorch.tensor(np.linalg.cholesky(cov).astype(np.float32),
                                                                device=device))]
    ref = TD.MultivariateNormal(torch.tensor(to_np(loc)), covariance_matrix=torch.tensor(cov))
    for d in made:
        assert tuple(d.batch_shape) == (3, 2)
        for name in ("scale_tril", "precision_matrix", "covariance_matrix"):
            _cmp(getattr(d, name), getattr(ref, name), rtol=1e-3, atol=1e-4)
    with pytest.raises(cltorch.linalg.LinAlgError):     # not positive-definite, validation off
        D.MultivariateNormal(cltorch.zeros(2), covariance_matrix=cltorch.tensor([[1.0, 2.0], [2.0, 1.0]]),
                             validate_args=False)


def test_multivariate_normal_errors():
    loc = cltorch.zeros(2)
    with pytest.raises(ValueError, match="Exactly one of covariance_matrix"):
        D.MultivariateNormal(loc)
    with pytest.raises(ValueError, match="loc must be at least one-dimensional"):
        D.MultivariateNormal(cltorch.tensor(0.0), scale_tril=cltorch.eye(1))
    with pytest.raises(ValueError, match="to satisfy the constraint PositiveDefinite"):
        D.MultivariateNormal(loc, covariance_matrix=cltorch.tensor([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="to satisfy the constraint LowerCholesky"):
        D.MultivariateNormal(loc, scale_tril=cltorch.tensor([[1.0, 1.0], [0.0, 1.0]]))


MOMENTS = [
    ("Normal", lambda L, t: L.Normal(t([0.5, -1.0]), t([1.0, 0.3]))),
    ("Bernoulli", lambda L, t: L.Bernoulli(probs=t([0.2, 0.7]))),
    ("Categorical", lambda L, t: L.Categorical(probs=t([0.1, 0.2, 0.7]))),
    ("Uniform", lambda L, t: L.Uniform(t([0.0, -2.0]), t([1.0, 3.0]))),
    ("Exponential", lambda L, t: L.Exponential(t([0.5, 2.0]))),
    ("Laplace", lambda L, t: L.Laplace(t([0.5, -1.0]), t([1.0, 0.3]))),
    ("LogNormal", lambda L, t: L.LogNormal(t([0.0, 0.5]), t([0.25, 0.5]))),
    ("Poisson", lambda L, t: L.Poisson(t([0.5, 4.0]))),
    ("MultivariateNormal", lambda L, t: L.MultivariateNormal(t([1.0, -1.0]), scale_tril=t([[1.0, 0.0],
                                                                                           [0.5, 0.7]]))),
]


@pytest.mark.parametrize("name,make", MOMENTS, ids=[k for k, _ in MOMENTS])
def test_sample_moments(name, make, device):
    cltorch.manual_seed(1234)
    ours = make(D, lambda a: cltorch.tensor(a, device=device))
    ref = make(TD, lambda a: torch.tensor(a, dtype=torch.float32))
    n = 20000
    s = ours.sample((n,))
    assert tuple(s.shape) == (n,) + tuple(ref.batch_shape) + tuple(ref.event_shape)
    assert s.device == cltorch.device(device)
    assert str(s.dtype).split(".")[-1] == str(ref.sample().dtype).split(".")[-1]
    assert not s.requires_grad
    a = to_np(s).astype(np.float64)
    if name == "Categorical":
        freq = np.bincount(a.astype(np.int64), minlength=3) / n
        np.testing.assert_allclose(freq, ref.probs.numpy(), atol=0.015)
        return
    mean, var = ref.mean.numpy().astype(np.float64), ref.variance.numpy().astype(np.float64)
    # 5 standard errors of the mean; variance within 7% (these laws have finite fourth moments)
    assert np.all(np.abs(a.mean(0) - mean) < 5 * np.sqrt(var / n)), (a.mean(0), mean)
    np.testing.assert_allclose(a.var(0), var, rtol=0.07)
    assert np.all(to_np(ours.support.check(s)))


def test_seeded_samples_repeat(device):
    d = D.Normal(cltorch.zeros(3, device=device), 1.0)
    cltorch.manual_seed(7)
    a = to_np(d.sample((4,)))
    cltorch.manual_seed(7)
    b = to_np(d.sample((4,)))
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ["Normal", "Laplace", "Uniform", "Exponential", "LogNormal"])
def test_rsample_gradients(name, device):
    """d/dθ of sum(rsample) equals the sum of the reparameterisation's derivative at the same draws, which
    is torch's formula for each law (dx/dloc = 1, dx/dscale = (x - loc) / scale, dx/drate = -x / rate ...)."""
    cltorch.manual_seed(3)
    t = lambda a: cltorch.tensor(a, device=device, requires_grad=True)  # noqa: E731
    if name == "Exponential":
        rate = t([0.5, 2.0])
        x = D.Exponential(rate).rsample((1000,))
        x.sum().backward()
        expect = (-to_np(x) / to_np(rate)).sum(0)
        np.testing.assert_allclose(to_np(rate.grad), expect, rtol=1e-4)
        return
    if name == "Uniform":
        lo, hi = t([0.0, -1.0]), t([1.0, 2.0])
        x = D.Uniform(lo, hi).rsample((1000,))
        x.sum().backward()
        frac = (to_np(x) - to_np(lo)) / (to_np(hi) - to_np(lo))
        np.testing.assert_allclose(to_np(hi.grad), frac.sum(0), rtol=1e-4)
        np.testing.assert_allclose(to_np(lo.grad), (1 - frac).sum(0), rtol=1e-4)
        return
    loc, scale = t([0.5, -1.0]), t([1.0, 0.3])
    dist = getattr(D, name)(loc, scale)
    x = dist.rsample((1000,))
    assert x.requires_grad
    x.mean().backward()
    xs = to_np(x)
    if name == "LogNormal":
        z = np.log(xs)
        dloc = (xs / 2000).sum(0)
        dscale = (xs * (z - to_np(loc)) / to_np(scale) / 2000).sum(0)
    else:
        dloc = np.full(2, 1.0 / 2)
        dscale = ((xs - to_np(loc)) / to_np(scale) / 2000).sum(0)
    np.testing.assert_allclose(to_np(loc.grad), dloc, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(to_np(scale.grad), dscale, rtol=1e-3, atol=1e-5)


def test_log_prob_gradients_match_torch(device):
    for name in ("Normal", "Laplace", "Bernoulli_logits", "Categorical_logits", "Poisson", "Exponential"):
        make, value = SPECS[name]
        ours_p, ref_p = [], []

        def mk_ours(a):
            v = cltorch.tensor(a, device=device, requires_grad=True)
            ours_p.append(v)
            return v

        def mk_ref(a):
            v = torch.tensor(a, requires_grad=True)
            ref_p.append(v)
            return v

        ours, ref = make(D, mk_ours), make(TD, mk_ref)
        (ours.log_prob(cltorch.tensor(value, device=device)).sum() + ours.entropy().sum()).backward() \
            if name != "Poisson" else ours.log_prob(cltorch.tensor(value, device=device)).sum().backward()
        (ref.log_prob(torch.tensor(value)).sum() + ref.entropy().sum()).backward() \
            if name != "Poisson" else ref.log_prob(torch.tensor(value)).sum().backward()
        for a, b in zip(ours_p, ref_p):
            np.testing.assert_allclose(to_np(a.grad), b.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)


def test_validation_errors_match_torch():
    def msg(fn):
        with pytest.raises(ValueError) as e:
            fn()
        return str(e.value)

    cases = [
        (lambda L, T: L.Normal(0.0, -1.0)),
        (lambda L, T: L.Normal(T([0.0, 1.0]), T([1.0, -1.0]))),
        (lambda L, T: L.Bernoulli(probs=1.5)),
        (lambda L, T: L.Bernoulli(probs=0.5, logits=0.0)),
        (lambda L, T: L.Bernoulli()),
        (lambda L, T: L.Categorical(probs=T(0.3))),
        (lambda L, T: L.Categorical(probs=T([0.5, -0.5]))),
        (lambda L, T: L.Uniform(1.0, 0.0)),
        (lambda L, T: L.Exponential(T([-1.0]))),
        (lambda L, T: L.Independent(L.Normal(T([0.0]), 1.0), 2)),
        (lambda L, T: L.Normal(0.0, 1.0).log_prob(0.5)),
        (lambda L, T: L.Normal(T([0.0, 1.0]), 1.0).log_prob(T([0.0, 1.0, 2.0]))),
        (lambda L, T: L.Bernoulli(probs=0.3).log_prob(T(0.5))),
        (lambda L, T: L.Categorical(logits=T([0.0, 1.0])).log_prob(T(2))),
        (lambda L, T: L.Exponential(1.0).log_prob(T(-1.0))),
        (lambda L, T: L.Poisson(1.0).log_prob(T(1.5))),
        (lambda L, T: L.OneHotCategorical(logits=T([0.0, 1.0])).log_prob(T([1.0, 1.0]))),
    ]
    for make in cases:
        ours = msg(lambda: make(D, cltorch.tensor))
        ref = msg(lambda: make(TD, torch.tensor))
        ref = re.sub(r"(?<!cl)torch\.", "cltorch.", ref)
        # tensor printing may pad differently: the message's words must match exactly, the printed values
        # up to whitespace
        assert ours.split(":\n")[0] == ref.split(":\n")[0], (ours, ref)
        assert re.sub(r"\s+", "", ours) == re.sub(r"\s+", "", ref), (ours, ref)


def test_validate_args_off_and_default():
    d = D.Normal(0.0, -1.0, validate_args=False)
    assert math.isnan(d.log_prob(cltorch.tensor(0.0)).item())
    D.Distribution.set_default_validate_args(False)
    try:
        D.Bernoulli(probs=2.0)
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        D.Bernoulli(probs=2.0)


def test_expand_and_reprs(device):
    ours = D.Normal(cltorch.tensor([0.0, 1.0], device=device), 2.0).expand((3, 2))
    ref = TD.Normal(torch.tensor([0.0, 1.0]), 2.0).expand((3, 2))
    assert tuple(ours.batch_shape) == (3, 2)
    _cmp(ours.log_prob(cltorch.tensor(X[:, :2], device=device)), ref.log_prob(torch.tensor(X[:, :2])))
    c = D.Categorical(logits=cltorch.tensor(LOGITS[0], device=device)).expand((4,))
    assert tuple(c.sample().shape) == (4,)
    assert tuple(D.Bernoulli(probs=0.3).expand((2, 2)).sample().shape) == (2, 2)
    for make in (lambda L, T: L.Normal(0.0, 1.0), lambda L, T: L.Bernoulli(logits=T([0.0, 1.0])),
                 lambda L, T: L.Independent(L.Normal(T([0.0]), 1.0), 1), lambda L, T: L.Uniform(0.0, 2.0)):
        assert repr(make(D, cltorch.tensor)) == repr(make(TD, torch.tensor)).replace("torch.", "cltorch.")
    for c_ours, c_ref in ((D.constraints.positive, TD.constraints.positive),
                          (D.constraints.real_vector, TD.constraints.real_vector),
                          (D.constraints.integer_interval(0, 3), TD.constraints.integer_interval(0, 3)),
                          (D.constraints.unit_interval, TD.constraints.unit_interval)):
        assert repr(c_ours) == repr(c_ref)


TRANSFORMS = [
    ("Exp", lambda L: L.ExpTransform()),
    ("Affine", lambda L: L.AffineTransform(0.5, -2.0)),
    ("Sigmoid", lambda L: L.SigmoidTransform()),
    ("Tanh", lambda L: L.TanhTransform()),
    ("Compose", lambda L: L.ComposeTransform([L.AffineTransform(1.0, 0.5), L.TanhTransform()])),
    ("Inverse", lambda L: L.ExpTransform().inv),
]


@pytest.mark.parametrize("name,make", TRANSFORMS, ids=[k for k, _ in TRANSFORMS])
def test_transforms_against_torch(name, make, device):
    ours, ref = make(D.transforms), make(TD.transforms)
    x = XPOS if name == "Inverse" else X * 0.8
    xo, xr = cltorch.tensor(x, device=device), torch.tensor(x)
    yo, yr = ours(xo), ref(xr)
    _cmp(yo, yr, rtol=1e-5, atol=1e-6)
    _cmp(ours.inv(yo), ref.inv(yr), rtol=1e-4, atol=1e-4)
    _cmp(ours.log_abs_det_jacobian(xo, yo), ref.log_abs_det_jacobian(xr, yr), rtol=1e-4, atol=1e-5)
    assert ours.sign == ref.sign and ours.bijective == ref.bijective
    assert ours.domain.event_dim == ref.domain.event_dim


def test_transformed_distribution_against_torch(device):
    def build(L, t):
        base = L.Normal(t(LOC), t(SCALE))
        return L.TransformedDistribution(base, [L.transforms.AffineTransform(0.3, 2.0),
                                                L.transforms.TanhTransform()])

    ours = build(D, lambda a: cltorch.tensor(a, device=device))
    ref = build(TD, torch.tensor)
    y = np.tanh(X * 0.7).astype(np.float32)
    _cmp(ours.log_prob(cltorch.tensor(y, device=device)), ref.log_prob(torch.tensor(y)), rtol=1e-4, atol=1e-4)
    _cmp(ours.cdf(cltorch.tensor(y, device=device)), ref.cdf(torch.tensor(y)), rtol=1e-4, atol=1e-4)
    s = ours.rsample((2,))
    assert tuple(s.shape) == (2, 3, 4) and bool((s.abs() <= 1).all())
    # Independent over an event dim, affine with event_dim=1
    base_o = D.Independent(D.Normal(cltorch.tensor(LOC, device=device), cltorch.tensor(SCALE, device=device)), 1)
    base_r = TD.Independent(TD.Normal(torch.tensor(LOC), torch.tensor(SCALE)), 1)
    sc = (SCALE + 1).astype(np.float32)[0]
    o = D.TransformedDistribution(base_o, D.AffineTransform(0.0, cltorch.tensor(sc, device=device), event_dim=1))
    r = TD.TransformedDistribution(base_r, TD.AffineTransform(0.0, torch.tensor(sc), event_dim=1))
    assert tuple(o.event_shape) == tuple(r.event_shape)
    _cmp(o.log_prob(cltorch.tensor(X, device=device)), r.log_prob(torch.tensor(X)), rtol=1e-4, atol=1e-4)


def test_straight_through_and_module_paths():
    import importlib
    for m in ("normal", "bernoulli", "categorical", "kl", "constraints", "transforms", "distribution",
              "multivariate_normal", "independent", "transformed_distribution", "utils"):
        importlib.import_module("cltorch.distributions." + m)
    assert cltorch.distributions.Normal is D.Normal
    logits = cltorch.tensor([0.0, 1.0, 2.0], requires_grad=True)
    d = D.OneHotCategoricalStraightThrough(logits=logits)
    s = d.rsample((8,))
    assert tuple(s.shape) == (8, 3) and bool((s.sum(-1) == 1).all())
    (s * cltorch.tensor([1.0, 2.0, 3.0])).sum().backward()
    p = torch.softmax(torch.tensor([0.0, 1.0, 2.0]), -1)
    expect = 8 * (p * (torch.tensor([1.0, 2.0, 3.0]) - (p * torch.tensor([1.0, 2.0, 3.0])).sum()))
    np.testing.assert_allclose(to_np(logits.grad), expect.numpy(), rtol=1e-5, atol=1e-6)
