"""Random ops: the same seed gives bit-identical draws on every device and in the numpy reference;
Generator state; distributions' moments; randperm/multinomial/bernoulli semantics."""
import numpy as np
import pytest

import cltorch as torch
from cltorch.ops import _philox_ref as REF
from conftest import DEVICES, to_np


@pytest.mark.parametrize("kind", ["rand", "randn", "randint", "exponential", "bernoulli"])
def test_bitwise_identical_across_devices(kind):
    outs = []
    for dev in DEVICES + DEVICES[:1]:
        torch.manual_seed(2024)
        if kind == "rand":
            t = torch.rand(1001, device=dev)
        elif kind == "randn":
            t = torch.randn(3, 333, device=dev, dtype=torch.float64)
        elif kind == "randint":
            t = torch.randint(-7, 1000, (999,), device=dev)
        elif kind == "exponential":
            t = torch.empty(500, device=dev).exponential_(2.0)
        else:
            t = torch.empty(777, device=dev).bernoulli_(0.3)
        outs.append(to_np(t))
    for o in outs[1:]:
        assert o.tobytes() == outs[0].tobytes()


def test_uniform_matches_numpy_reference():
    # float32 uniform: 24 random bits of word i (element i uses word i % 4 of block i // 4)
    g = torch.Generator().manual_seed(99)
    t = torch.rand(16, generator=g)
    words = REF.random_words(99, 0, 4).reshape(-1)
    ref = (words >> np.uint32(8)).astype(np.float32) * np.float32(2.0 ** -24)
    assert to_np(t).tobytes() == ref.tobytes()


def test_generator_state_and_reseed(device):
    g = torch.Generator().manual_seed(5)
    a = torch.rand(10, generator=g, device=device)
    state = g.get_state()
    b = torch.rand(10, generator=g, device=device)
    g.set_state(state)
    c = torch.rand(10, generator=g, device=device)
    assert to_np(b).tolist() == to_np(c).tolist() and to_np(a).tolist() != to_np(b).tolist()
    assert g.initial_seed() == 5
    s = torch.get_rng_state()
    x = torch.randn(4, device=device)
    torch.set_rng_state(s)
    assert to_np(torch.randn(4, device=device)).tolist() == to_np(x).tolist()


def test_moments(device):
    torch.manual_seed(0)
    n = torch.randn(200000, device=device)
    v = to_np(n).astype(np.float64)
    assert abs(v.mean()) < 0.01 and abs(v.var() - 1) < 0.01
    u = to_np(torch.rand(200000, device=device))
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.005
    e = to_np(torch.empty(200000, device=device).exponential_(4.0))
    assert abs(e.mean() - 0.25) < 0.005
    b = to_np(torch.empty(200000, device=device).bernoulli_(0.2))
    assert set(np.unique(b).tolist()) <= {0.0, 1.0} and abs(b.mean() - 0.2) < 0.005
    m = to_np(torch.normal(3.0, 2.0, (100000,), device=device))
    assert abs(m.mean() - 3) < 0.03 and abs(m.std() - 2) < 0.03


def test_randperm_multinomial(device):
    p = to_np(torch.randperm(50, device=device, generator=torch.Generator().manual_seed(1)))
    assert sorted(p.tolist()) == list(range(50)) and p.tolist() != list(range(50))
    w = torch.tensor([0.0, 10.0, 30.0, 60.0], device=device)
    torch.manual_seed(3)
    s = to_np(torch.multinomial(w, 20000, replacement=True))
    freq = np.bincount(s, minlength=4) / 20000
    assert freq[0] == 0 and abs(freq[3] - 0.6) < 0.02
    s2 = to_np(torch.multinomial(w, 3))
    assert sorted(s2.tolist()) == [1, 2, 3]
    with pytest.raises(RuntimeError, match="without replacement"):
        torch.multinomial(w, 5)
    with pytest.raises(RuntimeError):
        torch.multinomial(torch.tensor([-1.0, 1.0], device=device), 1)


def test_random_on_views_and_errors(device):
    t = torch.zeros(4, 6, device=device)
    torch.manual_seed(9)
    t[:, ::2].uniform_(5, 6)
    a = to_np(t)
    assert (a[:, 1::2] == 0).all() and (a[:, ::2] >= 5).all() and (a[:, ::2] < 6).all()
    with pytest.raises(RuntimeError, match="in \\[0, 1\\]"):
        torch.empty(3, device=device).bernoulli_(1.5)
    with pytest.raises(RuntimeError, match="std >= 0"):
        torch.empty(3, device=device).normal_(0, -1)
