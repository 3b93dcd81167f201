"""nn.utils.prune and nn.utils.parametrizations.orthogonal against torch: the same weights copied across, then
masks, values, gradients and state-dict keys compared (weights with distinct |values|, so the L1 / Ln choices
are unique), and orthogonality checked for every map, shape and trivialization setting."""
import numpy as np
import pytest
import torch

import cltorch
import cltorch.nn as cnn
from cltorch.nn.utils import prune as cprune
from cltorch.nn.utils import parametrizations as cparam

import torch.nn.utils.prune as tprune  # noqa: E402  (torch does not import it with nn.utils)
import torch.nn.utils.parametrizations  # noqa: E402,F401
DEV = "cl"


def _distinct(shape, seed):
    """float32 values with distinct absolute values, random signs and order."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    v = (np.arange(1, n + 1, dtype=np.float64) / n) * rng.choice([-1.0, 1.0], n)
    return rng.permutation(v).reshape(shape).astype(np.float32)


def _pair(make_t, make_c, seed=0):
    """A torch module and a cltorch module with the same distinct-valued parameters."""
    tm, cm = make_t(), make_c().to(DEV)
    with torch.no_grad(), cltorch.no_grad():
        for i, ((n, tp), (n2, cp)) in enumerate(zip(tm.named_parameters(), cm.named_parameters())):
            assert n == n2
            v = _distinct(tuple(tp.shape), seed + i)
            tp.copy_(torch.from_numpy(v))
            cp.copy_(cltorch.from_numpy(v).to(DEV))
    return tm, cm


def _np(t):
    return t.detach().cpu().numpy()


def _linear_pair(seed=0):
    return _pair(lambda: torch.nn.Linear(8, 6), lambda: cnn.Linear(8, 6), seed)


def _conv_pair(seed=0):
    return _pair(lambda: torch.nn.Conv2d(4, 6, 3), lambda: cnn.Conv2d(4, 6, 3), seed)


def test_l1_unstructured_mask_keys_forward_and_grad():
    tm, cm = _linear_pair()
    assert tprune.l1_unstructured(tm, "weight", amount=0.3) is tm
    assert cprune.l1_unstructured(cm, "weight", amount=0.3) is cm
    np.testing.assert_array_equal(_np(cm.weight_mask), _np(tm.weight_mask))
    assert int((_np(cm.weight_mask) == 0).sum()) == round(0.3 * 48)
    assert list(cm.state_dict()) == list(tm.state_dict()) == ["bias", "weight_orig", "weight_mask"]
    assert [n for n, _ in cm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert [n for n, _ in cm.named_buffers()] == ["weight_mask"]
    assert not isinstance(cm.weight, cnn.Parameter) and isinstance(cm.weight_orig, cnn.Parameter)
    x = _distinct((5, 8), 9)
    yt, yc = tm(torch.from_numpy(x)), cm(cltorch.from_numpy(x).to(DEV))
    np.testing.assert_allclose(_np(yc), _np(yt), rtol=1e-5, atol=1e-6)
    yt.square().sum().backward()
    yc.square().sum().backward()
    g = _np(cm.weight_orig.grad)
    np.testing.assert_allclose(g, _np(tm.weight_orig.grad), rtol=1e-4, atol=1e-6)
    assert (g[_np(cm.weight_mask) == 0] == 0).all()
    # The hook recomputes weight from weight_orig before each forward.
    with cltorch.no_grad():
        cm.weight_orig.add_(1.0)
    cm(cltorch.zeros(1, 8, device=DEV))
    np.testing.assert_allclose(_np(cm.weight), (_np(cm.weight_orig)) * _np(cm.weight_mask))
    assert cprune.is_pruned(cm) and not cprune.is_pruned(cnn.Linear(2, 2))


def test_iterative_pruning_container_matches_torch():
    tm, cm = _conv_pair(3)
    for p in (tprune, cprune):
        m = tm if p is tprune else cm
        p.l1_unstructured(m, "weight", amount=20)
        p.ln_structured(m, "weight", amount=2, n=2, dim=0)
        p.l1_unstructured(m, "weight", amount=0.25)
        p.ln_structured(m, "weight", amount=0.5, n=1, dim=1)
        p.ln_structured(m, "weight", amount=1, n=float("inf"), dim=-1)
    np.testing.assert_array_equal(_np(cm.weight_mask), _np(tm.weight_mask))
    hooks = [h for h in cm._forward_pre_hooks.values() if isinstance(h, cprune.BasePruningMethod)]
    assert len(hooks) == 1 and isinstance(hooks[0], cprune.PruningContainer) and len(hooks[0]) == 5
    assert [type(h).__name__ for h in hooks[0]] == ["L1Unstructured", "LnStructured", "L1Unstructured",
                                                    "LnStructured", "LnStructured"]
    assert list(cm.state_dict()) == list(tm.state_dict())
    np.testing.assert_allclose(_np(cm.weight), _np(tm.weight), rtol=0, atol=0)


def test_importance_scores_bias_and_prune_method():
    tm, cm = _linear_pair(5)
    s = _distinct((6, 8), 11)
    tprune.l1_unstructured(tm, "weight", amount=10, importance_scores=torch.from_numpy(s))
    cprune.l1_unstructured(cm, "weight", amount=10, importance_scores=cltorch.from_numpy(s).to(DEV))
    np.testing.assert_array_equal(_np(cm.weight_mask), _np(tm.weight_mask))
    tprune.ln_structured(tm, "weight", amount=2, n=2, dim=1, importance_scores=torch.from_numpy(s))
    cprune.ln_structured(cm, "weight", amount=2, n=2, dim=1, importance_scores=cltorch.from_numpy(s).to(DEV))
    np.testing.assert_array_equal(_np(cm.weight_mask), _np(tm.weight_mask))
    tprune.l1_unstructured(tm, "bias", amount=0.5)
    cprune.l1_unstructured(cm, "bias", amount=0.5)
    np.testing.assert_array_equal(_np(cm.bias_mask), _np(tm.bias_mask))
    assert list(cm.state_dict()) == list(tm.state_dict())
    # prune() on a bare tensor
    t = _distinct((4, 5), 2)
    ref = tprune.L1Unstructured(amount=7).prune(torch.from_numpy(t))
    got = cprune.L1Unstructured(amount=7).prune(cltorch.from_numpy(t).to(DEV))
    np.testing.assert_array_equal(_np(got), _np(ref))


def test_global_unstructured_matches_torch():
    tm, cm = _pair(lambda: torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.Linear(6, 4)),
                   lambda: cnn.Sequential(cnn.Linear(8, 6), cnn.Linear(6, 4)), 7)
    # Scale the second layer so the global choice is not a per-layer one.
    with torch.no_grad():
        tm[1].weight.mul_(0.3)
    with cltorch.no_grad():
        cm[1].weight.mul_(0.3)
    cprune.l1_unstructured(cm[0], "weight", amount=5)        # an earlier mask is respected
    tprune.l1_unstructured(tm[0], "weight", amount=5)
    tprune.global_unstructured([(tm[0], "weight"), (tm[1], "weight")], pruning_method=tprune.L1Unstructured,
                               amount=0.4)
    cprune.global_unstructured([(cm[0], "weight"), (cm[1], "weight")], pruning_method=cprune.L1Unstructured,
                               amount=0.4)
    for i in (0, 1):
        np.testing.assert_array_equal(_np(cm[i].weight_mask), _np(tm[i].weight_mask))
    assert list(cm.state_dict()) == list(tm.state_dict())
    total = sum(int((_np(cm[i].weight_mask) == 0).sum()) for i in (0, 1))
    assert total == 5 + round(0.4 * (72 - 5))          # the fraction is of the entries still unpruned
    with pytest.raises(TypeError, match="unstructured"):
        cprune.global_unstructured([(cm[1], "bias")], pruning_method=cprune.RandomStructured, amount=1)
    with pytest.raises(TypeError, match="Iterable"):
        cprune.global_unstructured(3, pruning_method=cprune.L1Unstructured, amount=1)
    with pytest.raises(TypeError, match="dict"):
        cprune.global_unstructured([(cm[1], "bias")], cprune.L1Unstructured, importance_scores=[1], amount=1)


def test_remove_custom_from_mask_identity():
    tm, cm = _linear_pair(2)
    mask = (_distinct((6, 8), 4) > 0).astype(np.float32)
    tprune.custom_from_mask(tm, "weight", mask=torch.from_numpy(mask))
    cprune.custom_from_mask(cm, "weight", mask=cltorch.from_numpy(mask).to(DEV))
    tprune.identity(tm, "bias")
    cprune.identity(cm, "bias")
    np.testing.assert_array_equal(_np(cm.weight_mask), mask)
    np.testing.assert_array_equal(_np(cm.bias_mask), np.ones(6, np.float32))
    tprune.remove(tm, "weight")
    assert cprune.remove(cm, "weight") is cm
    assert list(cm.state_dict()) == list(tm.state_dict()) == ["bias_orig", "weight", "bias_mask"]
    assert isinstance(cm.weight, cnn.Parameter)
    assert [n for n, _ in cm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    np.testing.assert_array_equal(_np(cm.weight), _np(tm.weight))
    assert cprune.is_pruned(cm)
    cprune.remove(cm, "bias")
    assert not cprune.is_pruned(cm) and list(cm.state_dict()) == ["weight", "bias"]
    with pytest.raises(ValueError, match="has to be pruned"):
        cprune.remove(cm, "weight")


def test_random_methods_counts_and_keep_earlier_zeros():
    cltorch.manual_seed(0)
    m = cnn.Conv2d(3, 8, 3).to(DEV)
    cprune.random_unstructured(m, "weight", amount=0.3)
    first = _np(m.weight_mask).copy()
    assert int((first == 0).sum()) == round(0.3 * first.size)
    cprune.random_structured(m, "weight", amount=3, dim=0)
    mk = _np(m.weight_mask)
    dead = [(mk[c] == 0).all() for c in range(8)]
    assert sum(dead) >= 3
    assert (mk[first == 0] == 0).all()                      # earlier zeros stay
    live = [c for c in range(8) if not dead[c]]
    np.testing.assert_array_equal(mk[live], first[live])
    cprune.random_unstructured(m, "weight", amount=10)      # counts among what is still unpruned
    assert int((_np(m.weight_mask) == 0).sum()) == int((mk == 0).sum()) + 10
    np.testing.assert_allclose(_np(m.weight), _np(m.weight_orig) * _np(m.weight_mask))


def test_prune_errors():
    m = cnn.Linear(4, 3).to(DEV)
    with pytest.raises(TypeError, match="Invalid type for amount"):
        cprune.l1_unstructured(m, "weight", amount="half")
    with pytest.raises(ValueError, match="non-negative integer"):
        cprune.l1_unstructured(m, "weight", amount=-1)
    with pytest.raises(ValueError, match="range"):
        cprune.l1_unstructured(m, "weight", amount=1.5)
    with pytest.raises(ValueError, match="smaller than the number of parameters"):
        cprune.l1_unstructured(m, "weight", amount=13)
    # a failed prune puts the parameter back (last, as torch does)
    t = torch.nn.Linear(4, 3)
    with pytest.raises(ValueError):
        tprune.l1_unstructured(t, "weight", amount=13)
    assert list(m.state_dict()) == list(t.state_dict()) == ["bias", "weight"]
    assert isinstance(m.weight, cnn.Parameter)
    assert not cprune.is_pruned(m)
    with pytest.raises(ValueError, match="multidimensional"):
        cprune.ln_structured(m, "bias", amount=1, n=2, dim=0)
    with pytest.raises(IndexError, match="Invalid index 2"):
        cprune.random_structured(m, "weight", amount=1, dim=2)
    assert list(m.state_dict()) == ["bias", "weight"]


# ---------------------------------------------------------------------------------------------- orthogonal
class _Holder(torch.nn.Module):
    def __init__(self, v):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.from_numpy(v))


class _CHolder(cnn.Module):
    def __init__(self, v):
        super().__init__()
        self.weight = cnn.Parameter(cltorch.from_numpy(v).to(DEV))


def _check_orth(w, atol):
    w = w.astype(np.float64)
    if w.shape[-2] >= w.shape[-1]:
        g = np.swapaxes(w, -1, -2) @ w
    else:
        g = w @ np.swapaxes(w, -1, -2)
    np.testing.assert_allclose(g, np.broadcast_to(np.eye(g.shape[-1]), g.shape), atol=atol)


@pytest.mark.parametrize("shape", [(5, 5), (6, 3), (3, 6), (2, 4, 3)])
@pytest.mark.parametrize("omap", ["matrix_exp", "cayley", "householder"])
def test_orthogonal_values_grads_keys_no_trivialization(shape, omap):
    v = (_distinct(shape, 1) * 0.8).astype(np.float64)
    tm, cm = _Holder(v), _CHolder(v)
    torch.nn.utils.parametrizations.orthogonal(tm, orthogonal_map=omap, use_trivialization=False)
    assert cparam.orthogonal(cm, orthogonal_map=omap, use_trivialization=False) is cm
    assert list(cm.state_dict()) == list(tm.state_dict()) == ["parametrizations.weight.original"]
    np.testing.assert_allclose(_np(cm.parametrizations.weight.original), _np(tm.parametrizations.weight.original),
                               atol=1e-12)
    wt, wc = tm.weight, cm.weight
    np.testing.assert_allclose(_np(wc), _np(wt.detach()), atol=1e-10)
    _check_orth(_np(wc), 1e-10)
    r = _distinct(shape, 2).astype(np.float64)
    (wt * torch.from_numpy(r)).sum().backward()
    (wc * cltorch.from_numpy(r).to(DEV)).sum().backward()
    np.testing.assert_allclose(_np(cm.parametrizations.weight.original.grad),
                               _np(tm.parametrizations.weight.original.grad), atol=1e-9)


@pytest.mark.parametrize("shape", [(4, 4), (6, 3), (3, 5)])
@pytest.mark.parametrize("omap", ["matrix_exp", "cayley", "householder"])
def test_orthogonal_trivialization(shape, omap):
    v = _distinct(shape, 3)
    tm, cm = _Holder(v), _CHolder(v)
    torch.nn.utils.parametrizations.orthogonal(tm, orthogonal_map=omap)
    cparam.orthogonal(cm, orthogonal_map=omap)
    assert list(cm.state_dict()) == list(tm.state_dict()) == ["parametrizations.weight.original",
                                                               "parametrizations.weight.0.base"]
    neg_eye = -np.eye(*shape, dtype=np.float32)
    np.testing.assert_array_equal(_np(cm.parametrizations.weight.original), neg_eye)
    w = _np(cm.weight)
    _check_orth(w, 1e-5)
    if shape[0] == shape[1]:          # base = the QR Q of the weight (non-square: completed with random columns)
        np.testing.assert_allclose(w, _np(tm.weight.detach()), atol=1e-5)
        np.testing.assert_allclose(_np(cm.parametrizations.weight[0].base),
                                   _np(tm.parametrizations.weight[0].base), atol=1e-5)
    else:                             # the span of the original columns (rows) is kept
        a = v if shape[0] >= shape[1] else v.T
        q = w if shape[0] >= shape[1] else w.T
        qr_q = np.linalg.qr(a.astype(np.float64))[0]
        np.testing.assert_allclose(np.abs(q.T @ qr_q), np.eye(a.shape[1]), atol=1e-5)
    # A few optimizer steps keep it orthogonal.
    opt = cltorch.optim.SGD(cm.parameters(), lr=0.1)
    r = cltorch.from_numpy(_distinct(shape, 4)).to(DEV)
    for _ in range(3):
        opt.zero_grad()
        (cm.weight * r).sum().backward()
        opt.step()
    _check_orth(_np(cm.weight), 1e-5)
    # Assigning an orthogonal matrix makes it the weight.
    q = np.linalg.qr(_distinct((max(shape), max(shape)), 5).astype(np.float64))[0][:shape[0], :shape[1]]
    q = q.astype(np.float32) if shape[0] >= shape[1] else np.linalg.qr(_distinct(shape[::-1], 6))[0].T
    q = np.ascontiguousarray(q, dtype=np.float32)
    with cltorch.no_grad():
        cm.weight = cltorch.from_numpy(q).to(DEV)
    np.testing.assert_allclose(_np(cm.weight), q, atol=1e-5)


def test_orthogonal_defaults_and_errors():
    m = cparam.orthogonal(cnn.Linear(3, 3).to(DEV))
    assert m.parametrizations.weight[0].orthogonal_map == "matrix_exp"
    m = cparam.orthogonal(cnn.Linear(3, 5).to(DEV))
    assert m.parametrizations.weight[0].orthogonal_map == "householder"
    _check_orth(_np(m.weight), 1e-5)
    with pytest.raises(ValueError, match="matrix or batch of matrices"):
        cparam.orthogonal(cnn.Linear(3, 5).to(DEV), "bias")
    with pytest.raises(ValueError, match="no parameter or buffer"):
        cparam.orthogonal(cnn.Linear(3, 5), "nope")
    with pytest.raises(ValueError, match="orthogonal_map has to be one of"):
        cparam.orthogonal(cnn.Linear(3, 5), orthogonal_map="qr")
    m = cparam.orthogonal(cnn.Linear(3, 3).to(DEV), orthogonal_map="cayley", use_trivialization=False)
    with pytest.raises(NotImplementedError, match="use_trivialization=False"):
        m.weight = cltorch.eye(3, device=DEV)
    with pytest.raises(ValueError, match="shape"):
        m.parametrizations.weight[0].right_inverse(cltorch.eye(4, device=DEV))
    # householder without trivialization: assignment goes through geqrf and gives back the matrix
    m = cparam.orthogonal(cnn.Linear(3, 4).to(DEV), orthogonal_map="householder", use_trivialization=False)
    q = np.linalg.qr(_distinct((4, 3), 8).astype(np.float64))[0].astype(np.float32)
    with cltorch.no_grad():
        m.weight = cltorch.from_numpy(q).to(DEV)
    np.testing.assert_allclose(_np(m.weight), q, atol=1e-5)
