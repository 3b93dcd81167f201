"""cltorch.linalg's norms and products (cltorch/linalg/_products.py, the vector norm in ops/reductions.py) against
torch: values, gradients (backward of sum(out * w) with the same w on both sides) and errors."""
import math

import numpy as np
import pytest
import torch

import cltorch as c

INF = math.inf


def _run(fn, arrs, grad=True, seed=0, rtol=1e-4, atol=1e-5):
    """fn(T, *tensors) on cltorch and torch copies of arrs; compares outputs, then the gradients of every input."""
    outs, grads = [], []
    for T in (c, torch):
        xs = [T.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrs]
        out = fn(T, *xs)
        outs.append(out)
        if grad and out.requires_grad:
            w = np.random.default_rng(seed).standard_normal(tuple(out.shape)).astype(arrs[0].dtype)
            (out * T.tensor(w)).sum().backward()
            grads.append([x.grad for x in xs])
    got, ref = outs
    assert tuple(got.shape) == tuple(ref.shape)
    assert str(got.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]
    np.testing.assert_allclose(got.detach().numpy(), ref.detach().numpy(), rtol=rtol, atol=atol, equal_nan=True)
    if grads:
        assert len(grads) == 2, "cltorch's output does not require grad"
        for g, r in zip(*grads):
            if r is None or g is None:      # an unused input: None on one side, zeros or None on the other
                other = g if r is None else r
                assert other is None or not np.any(other.numpy())
                continue
            np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=rtol, atol=atol, equal_nan=True)
    return got


def _raises(fn, *arrs):
    """Both raise the same error type with the same message."""
    errs = []
    for T in (c, torch):
        with pytest.raises(Exception) as e:
            fn(T, *[T.tensor(a) for a in arrs])
        errs.append(e.value)
    assert isinstance(errs[0], type(errs[1])) or type(errs[1]).__name__ == "_LinAlgError", (errs[0], errs[1])
    assert str(errs[0]) == str(errs[1]), (str(errs[0]), str(errs[1]))


def _rand(*shape, seed=1, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# ------------------------------------------------------------------------------------------------ vector_norm
@pytest.mark.parametrize("ord", [2, 1, 0, INF, -INF, 3, 0.5, -1, 1.5])
@pytest.mark.parametrize("dim,keepdim", [(None, False), (1, False), ((0, 2), True), ((), False), (-1, True)])
def test_vector_norm_values_and_gradients(ord, dim, keepdim):
    a = _rand(3, 4, 2)
    out = _run(lambda T, x: T.linalg.vector_norm(x, ord, dim, keepdim), [a])
    assert out.grad_fn is not None              # p = 0 too: a differentiable (zero-gradient) result


@pytest.mark.parametrize("ord", [2, 1, INF, 3, 1.5, 0.5, 0])
def test_vector_norm_subgradients_at_zero(ord):
    a = np.zeros((2, 3), np.float32)
    a[1, 1] = 2.0            # one row non-zero with zeros in it, one row all zero
    _run(lambda T, x: T.linalg.vector_norm(x, ord, 1), [a])


def test_vector_norm_dtype_and_method_forms():
    a = _rand(4, 3)
    _run(lambda T, x: T.linalg.vector_norm(x, 2, 0, dtype=T.float64), [a])
    _run(lambda T, x: T.linalg.vector_norm(x, 0.5, dim=(0, 1)), [a.astype(np.float64)])
    _run(lambda T, x: T.linalg.vector_norm(x), [np.zeros((0, 3), np.float32)])
    _run(lambda T, x: T.linalg.vector_norm(x, INF, 1), [np.zeros((0, 3), np.float32)], grad=False)


def test_vector_norm_errors():
    a, i = _rand(3, 4), np.arange(3)
    _raises(lambda T, x: T.linalg.vector_norm(x), i)
    _raises(lambda T, x: T.linalg.vector_norm(x, dtype=T.int64), a)
    _raises(lambda T, x: T.linalg.vector_norm(x, dtype=T.float16), a)
    _raises(lambda T, x: T.linalg.vector_norm(x, INF), np.zeros((0, 3), np.float32))
    _raises(lambda T, x: T.linalg.vector_norm(x, -1), np.zeros((0, 3), np.float32))
    _raises(lambda T, x: T.linalg.vector_norm(x, -0.5), np.zeros(0, np.float32))
    _raises(lambda T, x: T.linalg.vector_norm(x, dim=(0, 0)), a)
    _raises(lambda T, x: T.linalg.vector_norm(x, dim=5), a)
    with pytest.raises(TypeError):
        c.linalg.vector_norm(c.tensor(a), "fro")


# ------------------------------------------------------------------------------------------------ matrix_norm
@pytest.mark.parametrize("ord", ["fro", "nuc", INF, -INF, 1, -1, 2, -2])
@pytest.mark.parametrize("dim,keepdim", [((-2, -1), False), ((0, 2), True), ((2, 0), False)])
def test_matrix_norm_values_and_gradients(ord, dim, keepdim):
    a = _rand(3, 2, 4, dtype=np.float64)
    _run(lambda T, x: T.linalg.matrix_norm(x, ord, dim, keepdim), [a], rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("ord", ["fro", "nuc", INF, 1, 2])
@pytest.mark.parametrize("shape", [(3, 0), (0, 3, 3), (2, 0, 0)])
def test_matrix_norm_empty(ord, shape):
    _run(lambda T, x: T.linalg.matrix_norm(x, ord), [np.zeros(shape, np.float32)], grad=False)


def test_matrix_norm_empty_min_raises():
    with pytest.raises(IndexError):
        c.linalg.matrix_norm(c.zeros(3, 0), -1)
    with pytest.raises(IndexError):
        c.linalg.matrix_norm(c.zeros(3, 0), -2)


def test_matrix_norm_errors():
    a = _rand(3, 3)
    _raises(lambda T, x: T.linalg.matrix_norm(x, 3), a)
    _raises(lambda T, x: T.linalg.matrix_norm(x, "bad"), a)
    _raises(lambda T, x: T.linalg.matrix_norm(x), _rand(3))
    _raises(lambda T, x: T.linalg.matrix_norm(x, dim=(0, 0)), a)
    _raises(lambda T, x: T.linalg.matrix_norm(x, dim=(0,)), a)
    _raises(lambda T, x: T.linalg.matrix_norm(x, dim=(0, 1, 2)), a)
    _raises(lambda T, x: T.linalg.matrix_norm(x), np.arange(9).reshape(3, 3))
    _raises(lambda T, x: T.linalg.matrix_norm(x, "nuc", dtype=T.int64), a)


# ------------------------------------------------------------------------------------------------ linalg.norm, norm
@pytest.mark.parametrize("args,kw", [((), {}), ((2,), {}), (("fro",), {}), (("nuc",), {}), ((INF,), {}),
                                     ((None, 1), {}), ((3, (0,)), {}), ((-1, (1, 0)), {"keepdim": True}),
                                     ((None, (0, 1)), {})])
def test_linalg_norm_routes(args, kw):
    a = _rand(3, 4, dtype=np.float64)
    _run(lambda T, x: T.linalg.norm(x, *args, **kw), [a], rtol=1e-7, atol=1e-9)


def test_linalg_norm_vector_and_batches():
    _run(lambda T, x: T.linalg.norm(x, 3.5), [_rand(5)])
    _run(lambda T, x: T.linalg.norm(x), [_rand(2, 3, 4)])
    _run(lambda T, x: T.linalg.norm(x, "nuc", (0, 2)), [_rand(2, 3, 4, dtype=np.float64)], rtol=1e-7)


def test_linalg_norm_errors():
    _raises(lambda T, x: T.linalg.norm(x, 2), _rand(2, 3, 4))
    _raises(lambda T, x: T.linalg.norm(x, dim=(0, 1, 2)), _rand(2, 3, 4))
    _raises(lambda T, x: T.linalg.norm(x, "fro"), _rand(3))
    _raises(lambda T, x: T.linalg.norm(x, "fro", 0), _rand(3, 3))
    _raises(lambda T, x: T.linalg.norm(x), np.arange(3))


@pytest.mark.parametrize("p,dim", [("fro", None), ("fro", 1), ("fro", (0, 1)), ("nuc", None), ("nuc", (1, 0)),
                                   (0, None), (0, 1), (2, None), (INF, 0), (1.5, (0,)), (None, None)])
def test_torch_norm(p, dim):
    a = _rand(3, 4, dtype=np.float64)
    a[0, 1] = 0.0
    out = _run(lambda T, x: T.norm(x, p, dim), [a], rtol=1e-7, atol=1e-9)
    assert out.grad_fn is not None
    _run(lambda T, x: x.norm(p, dim, True), [a], rtol=1e-7, atol=1e-9)


def test_torch_norm_errors():
    _raises(lambda T, x: T.norm(x, "nuc"), _rand(3, 3, 3))
    _raises(lambda T, x: T.norm(x, "fro", (0, 1, 2)), _rand(3, 3, 3))
    _raises(lambda T, x: T.norm(x, "nuc", 0), _rand(3, 3))


# ------------------------------------------------------------------------------------------------ cond
@pytest.mark.parametrize("p", [None, 2, -2, "fro", "nuc", INF, -INF, 1, -1])
def test_cond(p):
    a = _rand(2, 3, 3, dtype=np.float64) + 2 * np.eye(3)
    svd = p in (None, 2, -2)
    _run(lambda T, x: T.linalg.cond(x, p), [a], rtol=1e-6, atol=1e-8, grad=svd)
    if not svd:     # torch's own cond cannot backward here (it fills its inverse in place): its formula can
        _run(lambda T, x: T.linalg.cond(x, p) if T is c else
             T.linalg.matrix_norm(x, p) * T.linalg.matrix_norm(T.linalg.inv(x), p), [a], rtol=1e-6, atol=1e-8)


def test_cond_rectangular_singular_and_empty():
    _run(lambda T, x: T.linalg.cond(x), [_rand(2, 4, dtype=np.float64)], rtol=1e-7)
    for p in ("fro", 1, INF):
        _run(lambda T, x: T.linalg.cond(x, p), [np.zeros((3, 3), np.float64)], grad=False)
    _run(lambda T, x: T.linalg.cond(x, p), [np.stack([np.eye(3), np.zeros((3, 3))])], grad=False)
    _run(lambda T, x: T.linalg.cond(x, 1), [np.zeros((2, 0, 0), np.float32)], grad=False)


def test_cond_errors():
    _raises(lambda T, x: T.linalg.cond(x), _rand(3))
    _raises(lambda T, x: T.linalg.cond(x, 3), np.eye(3, dtype=np.float32))
    for p in (1, "fro", INF, -1.0):
        _raises(lambda T, x: T.linalg.cond(x, p), _rand(2, 3))


# ------------------------------------------------------------------------------------------------ cross, diagonal
def test_cross():
    a, b = _rand(4, 3), _rand(1, 3, seed=2)
    _run(lambda T, x, y: T.linalg.cross(x, y), [a, b])
    _run(lambda T, x, y: T.linalg.cross(x, y, dim=0), [_rand(3, 2), _rand(3, 2, seed=3)])
    _run(lambda T, x, y: T.cross(x, y, dim=1), [a, np.repeat(b, 4, 0)])
    _run(lambda T, x, y: x.cross(y, 1), [a, np.repeat(b, 4, 0)])


def test_cross_errors():
    _raises(lambda T, x, y: T.linalg.cross(x, y), _rand(2, 1), _rand(2, 3))
    _raises(lambda T, x, y: T.linalg.cross(x, y), _rand(3), _rand(2, 3))
    _raises(lambda T, x, y: T.linalg.cross(x, y), _rand(3, 2), _rand(3, 2))
    _raises(lambda T, x, y: T.linalg.cross(x, y, dim=5), _rand(3, 2), _rand(3, 2))
    _raises(lambda T, x, y: T.linalg.cross(x, y), _rand(3), _rand(3, dtype=np.float64))


def test_diagonal():
    a = _rand(2, 3, 4)
    for kw in ({}, {"offset": 1}, {"offset": -2, "dim1": 0, "dim2": 2}):
        _run(lambda T, x: T.linalg.diagonal(x, **kw), [a])


# ------------------------------------------------------------------------------------------------ matrix_power
@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 6, -1, -3])
def test_matrix_power(n):
    a = _rand(2, 3, 3, dtype=np.float64) + 2 * np.eye(3)
    out = _run(lambda T, x: T.linalg.matrix_power(x, n), [a], rtol=1e-7, atol=1e-8)
    assert out.grad_fn is not None


def test_matrix_power_integers_and_errors():
    i = np.arange(4).reshape(2, 2)
    for n in (0, 1, 3):
        _run(lambda T, x: T.linalg.matrix_power(x, n), [i], grad=False)
    _raises(lambda T, x: T.linalg.matrix_power(x, -1), i)
    _raises(lambda T, x: T.linalg.matrix_power(x, 2), _rand(2, 3))
    _raises(lambda T, x: T.linalg.matrix_power(x, 2), _rand(3))
    with pytest.raises(TypeError):
        c.linalg.matrix_power(c.eye(2), 1.5)


# ------------------------------------------------------------------------------------------------ multi_dot
@pytest.mark.parametrize("shapes", [[(3,), (3,)], [(2, 3), (3, 4)], [(3,), (3, 5), (5, 2), (2,)],
                                    [(4, 10), (10, 2), (2, 30), (30, 3)], [(2, 3), (3, 1), (1, 5), (5,)],
                                    [(5,), (5, 2), (2, 6)]])
def test_multi_dot(shapes):
    arrs = [_rand(*s, seed=k, dtype=np.float64) for k, s in enumerate(shapes)]
    _run(lambda T, *xs: T.linalg.multi_dot(xs), arrs, rtol=1e-7, atol=1e-9)


def test_multi_dot_chain_order():
    from cltorch.linalg._products import _chain_order
    # (10x100)(100x5)(5x50): ((AB)C) costs 7500, (A(BC)) 75000 (CLRS 15.2)
    assert _chain_order([10, 100, 5, 50])[0][2] == 1
    assert _chain_order([50, 5, 100, 10])[0][2] == 0


def test_multi_dot_errors():
    _raises(lambda T, x: T.linalg.multi_dot([x]), _rand(2))
    _raises(lambda T, x, y: T.linalg.multi_dot([x, y]), _rand(2, 3), _rand(2, 2))
    _raises(lambda T, x, y: T.linalg.multi_dot([x, y]), _rand(2, 3, 3), _rand(3, 2))
    _raises(lambda T, x, y: T.linalg.multi_dot([x, y]), _rand(3, 2), _rand(2, 3, 3))
    _raises(lambda T, x, y, z: T.linalg.multi_dot([x, y, z]), _rand(3, 2), _rand(2), _rand(2, 3))
    _raises(lambda T, x, y: T.linalg.multi_dot([x, y]), _rand(2, 3), _rand(3, 2, dtype=np.float64))
    _raises(lambda T, x, y: T.linalg.multi_dot([x, y]), _rand(2, 3), np.zeros((3, 2), np.int64))


# ------------------------------------------------------------------------------------------------ vecdot, vander
def test_vecdot():
    _run(lambda T, x, y: T.linalg.vecdot(x, y), [_rand(2, 3), _rand(4, 1, 3, seed=2)])
    _run(lambda T, x, y: T.linalg.vecdot(x, y, dim=0), [_rand(3, 2), _rand(3, 1, seed=2)])
    _raises(lambda T, x, y: T.linalg.vecdot(x, y), _rand(3), _rand(3, dtype=np.float64))
    _raises(lambda T, x, y: T.linalg.vecdot(x, y), np.arange(3), np.arange(3))


def test_vander():
    a = np.array([0.0, 1.5, -2.0, 0.5], np.float32)
    _run(lambda T, x: T.linalg.vander(x), [a])
    _run(lambda T, x: T.linalg.vander(x, N=6), [np.stack([a, a[::-1]])])
    _run(lambda T, x: T.linalg.vander(x, N=3), [np.array(2.0, np.float32)])
    for dt in (np.int64, np.int32, np.uint8):
        _run(lambda T, x: T.linalg.vander(x, N=4), [np.arange(3).astype(dt)], grad=False)
    _raises(lambda T, x: T.linalg.vander(x), np.array([True, False]))
    _raises(lambda T, x: T.linalg.vander(x, N=1), a)
    _raises(lambda T, x: T.linalg.vander(x), np.array(2.0, np.float32))


# ------------------------------------------------------------------------------------------ tensorinv, tensorsolve
def test_tensorinv():
    m = _rand(6, 6, seed=4, dtype=np.float64) + 3 * np.eye(6)
    _run(lambda T, x: T.linalg.tensorinv(x, ind=2), [m.reshape(2, 3, 6)], rtol=1e-7, atol=1e-9)
    _run(lambda T, x: T.linalg.tensorinv(x, ind=1), [m.reshape(6, 2, 3)], rtol=1e-7, atol=1e-9)
    _raises(lambda T, x: T.linalg.tensorinv(x, ind=1), _rand(2, 3, 6))
    _raises(lambda T, x: T.linalg.tensorinv(x, ind=0), _rand(2, 3, 6))


def test_tensorsolve():
    m = (_rand(6, 6, seed=5, dtype=np.float64) + 3 * np.eye(6)).reshape(6, 2, 3)
    b = _rand(6, seed=6, dtype=np.float64)
    _run(lambda T, x, y: T.linalg.tensorsolve(x, y), [m, b], rtol=1e-7, atol=1e-9)
    _run(lambda T, x, y: T.linalg.tensorsolve(x, y, dims=(0,)), [m.transpose(1, 0, 2).copy(), b], rtol=1e-7,
         atol=1e-9)
    _run(lambda T, x, y: T.linalg.tensorsolve(x, y), [m.reshape(2, 3, 2, 3), b.reshape(2, 3)], rtol=1e-7,
         atol=1e-9)
    _raises(lambda T, x, y: T.linalg.tensorsolve(x, y), _rand(2, 3, 6), _rand(2, 4))


# ------------------------------------------------------------------------------------------------ addr
@pytest.mark.parametrize("beta,alpha", [(1, 1), (2, 0.5), (0, 1), (0.5, 0), (-1, 3)])
def test_addr_float(beta, alpha):
    _run(lambda T, m, x, y: T.addr(m, x, y, beta=beta, alpha=alpha), [_rand(2, 3), _rand(2, seed=2), _rand(3, seed=3)])
    _run(lambda T, m, x, y: m.addr(x, y, beta=beta, alpha=alpha), [_rand(3), _rand(2, seed=2), _rand(3, seed=3)])


def test_addr_dtypes_and_beta_zero():
    nan = np.full((2, 3), np.nan, np.float32)
    _run(lambda T, m, x, y: T.addr(m, x, y, beta=0), [nan, _rand(2), _rand(3)])
    _run(lambda T, m, x, y: T.addr(m, x, y), [_rand(3), _rand(2), _rand(3, dtype=np.float64)], grad=False)
    _run(lambda T, m, x, y: T.addr(m, x, y, beta=2, alpha=3), [np.arange(3), np.arange(2), np.arange(3)])
    t, f = np.array([True]), np.array([False, True])
    for beta, alpha in ((1, 1), (0, 1), (2, 0), (0, 0)):
        _run(lambda T, m, x, y: T.addr(m, x, y, beta=beta, alpha=alpha), [t, t, f], grad=False)
        _run(lambda T, m, x, y: T.addr(m, x, y, beta=beta, alpha=alpha), [np.array([False]), t, f], grad=False)


def test_addr_errors():
    _raises(lambda T, m, x, y: T.addr(m, x, y), _rand(2, 3), _rand(2, 2), _rand(3))
    _raises(lambda T, m, x, y: T.addr(m, x, y), _rand(2, 3), _rand(2), _rand(3, 1))
    _raises(lambda T, m, x, y: T.addr(m, x, y, beta=0.5), np.arange(3), np.arange(2), np.arange(3))
    _raises(lambda T, m, x, y: T.addr(m, x, y, alpha=0.5), np.arange(3), np.arange(2), np.arange(3))
    with pytest.raises(RuntimeError):
        c.addr(c.zeros(2, 3), c.zeros(2), c.zeros(4))


# ------------------------------------------------------------------------------------------------ every device
def _on(device, fn, arrs, rtol=1e-4, atol=1e-5):
    """fn on ``device`` against torch on cpu: values and the gradient of every input."""
    w = None
    outs, grads = [], []
    for T, dev in ((c, device), (torch, "cpu")):
        xs = [T.tensor(a, device=dev, requires_grad=True) for a in arrs]
        out = fn(T, *xs)
        if w is None:
            w = np.random.default_rng(0).standard_normal(tuple(out.shape)).astype(np.float32)
        (out * T.tensor(w, device=dev)).sum().backward()
        outs.append(out.detach().cpu().numpy())
        grads.append([np.zeros(a.shape) if x.grad is None else x.grad.cpu().numpy() for x, a in zip(xs, arrs)])
    np.testing.assert_allclose(outs[0], outs[1], rtol=rtol, atol=atol)
    for g, r in zip(*grads):
        np.testing.assert_allclose(g, r, rtol=rtol, atol=atol)


def test_on_every_device(device):
    a = _rand(3, 4)
    a[0, :2] = 0.0
    for ord in (2, 1, 0, INF, 3.0, 0.5):
        _on(device, lambda T, x: T.linalg.vector_norm(x, ord, 1), [a])
    _on(device, lambda T, x: T.linalg.vector_norm(x * 0, 2, 1), [a])           # the subgradient at zero
    for ord in ("fro", 1, -INF, "nuc"):
        _on(device, lambda T, x: T.linalg.matrix_norm(x, ord), [a])
    _on(device, lambda T, x: T.norm(x, "nuc"), [a])
    _on(device, lambda T, m, x, y: T.addr(m, x, y, beta=2.0), [_rand(2, 3), _rand(2), _rand(3)])
    _on(device, lambda T, x: T.linalg.vander(x, N=4), [_rand(3)])
    _on(device, lambda T, x, y, z: T.linalg.multi_dot([x, y, z]), [_rand(3), _rand(3, 4), _rand(4, 2)])
    _on(device, lambda T, x, y: T.linalg.cross(x, y), [_rand(2, 3), _rand(2, 3, seed=2)])
    _on(device, lambda T, x, y: T.linalg.vecdot(x, y), [_rand(2, 3), _rand(2, 3, seed=2)])
    _on(device, lambda T, x: T.linalg.matrix_power(x, -2), [_rand(3, 3) + 3 * np.eye(3, dtype=np.float32)],
        rtol=1e-3)


# ------------------------------------------------------------------------------------------------ legacy torch.*
def test_torch_vander():
    a = np.array([1.0, -2.0, 0.0, 3.0], np.float32)
    # torch.vander's own backward fails (an in-place cumprod_), so torch's side is linalg.vander, flipped
    _run(lambda T, x: T.vander(x) if T is c else T.linalg.vander(x).flip(-1), [a])
    _run(lambda T, x: T.vander(x, 3, True) if T is c else T.linalg.vander(x, N=3), [a])
    _run(lambda T, x: T.vander(x, 3), [a], grad=False)
    _run(lambda T, x: T.vander(x, N=1), [a], grad=False)
    _run(lambda T, x: T.vander(x, N=0), [a], grad=False)
    for arr in (np.arange(3, dtype=np.int32), np.array([True, False])):
        _run(lambda T, x: T.vander(x), [arr], grad=False)
    _raises(lambda T, x: T.vander(x), _rand(2, 2))
    _raises(lambda T, x: T.vander(x, N=-1), a)


def test_chain_matmul_frobenius_nuclear():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # torch.chain_matmul is deprecated in torch
        _run(lambda T, x, y, z: T.chain_matmul(x, y, z), [_rand(2, 3), _rand(3, 4), _rand(4, 2)])
        _run(lambda T, x: T.chain_matmul(x), [_rand(2, 3)])
        _raises(lambda T, x, y: T.chain_matmul(x, y), _rand(3), _rand(3, 2))
        with pytest.raises(RuntimeError, match="Expected one or more matrices"):
            c.chain_matmul()
    _run(lambda T, x: T.frobenius_norm(x, (0, 2)), [_rand(2, 3, 4)])
    _run(lambda T, x: T.frobenius_norm(x, 1, True), [_rand(2, 3, 4)])
    _raises(lambda T, x: T.frobenius_norm(x, (0, 1, 2)), _rand(2, 3, 4))
    _run(lambda T, x: T.nuclear_norm(x), [_rand(3, 4, dtype=np.float64)], rtol=1e-7)
    _run(lambda T, x: T.nuclear_norm(x, True), [_rand(3, 4, dtype=np.float64)], rtol=1e-7)
    _run(lambda T, x: T.nuclear_norm(x, (0, 2)), [_rand(3, 2, 4, dtype=np.float64)], rtol=1e-7)


def test_legacy_methods():
    _run(lambda T, x, y: x.vdot(y), [_rand(4), _rand(4, seed=2)])
    _run(lambda T, x: x.matrix_power(3), [_rand(3, 3)])
    _run(lambda T, x: T.matrix_power(x, -1), [_rand(3, 3, dtype=np.float64) + 3 * np.eye(3)], rtol=1e-7)
    _run(lambda T, m, x, y: (m * 1).addr_(x, y, beta=0.5, alpha=2.0), [_rand(2, 3), _rand(2), _rand(3)])
    _raises(lambda T, m, x, y: m.addr_(x, y), _rand(3), _rand(2), _rand(3))


def test_vector_norm_bfloat16_accumulates_in_float():
    a = _rand(3, 40) * 30
    x, t = c.tensor(a).to(c.bfloat16), torch.tensor(a).bfloat16()
    for ord, dim in ((2, None), (1, 1), (INF, 0), (3.0, 1)):
        got, ref = c.linalg.vector_norm(x, ord, dim), torch.linalg.vector_norm(t, ord, dim)
        assert got.dtype is c.bfloat16
        np.testing.assert_allclose(got.float().numpy(), ref.float().numpy(), rtol=1e-2)
