"""cltorch.linalg factorizations and solves and the legacy torch.* functions: values and gradients against torch
(the oracle), errors of PyTorch's types, results on the input's device."""
import numpy as np
import pytest
import torch

import cltorch

DEVICES = ["cpu", "cl:0"]
rng = np.random.default_rng(1234)


def _spd(*shape):
    a = rng.standard_normal(shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def _sym(*shape):
    a = rng.standard_normal(shape)
    return a + np.swapaxes(a, -1, -2)


def _tri(*shape, upper=False):
    a = rng.standard_normal(shape) + 3 * np.eye(shape[-1])
    return np.triu(a) if upper else np.tril(a)


def _np(x):
    return x.detach().cpu().numpy() if isinstance(x, (torch.Tensor, cltorch.Tensor)) else np.asarray(x)


def _flat(out):
    if isinstance(out, (tuple, list)):
        r = []
        for o in out:
            r.extend(_flat(o))
        return r
    return [out]


def _run(fn_t, fn_c, arrays, device, grad, dtype=np.float64, rtol=1e-6, atol=1e-8):
    """Compare fn on torch and cltorch tensors made from ``arrays``: every output, and (grad) the gradients of
    sum(out * w) over the floating outputs that require grad."""
    arrays = [a.astype(dtype) for a in arrays]
    tt = [torch.tensor(a, requires_grad=grad) for a in arrays]
    cc = [cltorch.tensor(a, device=device, requires_grad=grad) for a in arrays]
    ro, co = _flat(fn_t(*tt)), _flat(fn_c(*cc))
    assert len(ro) == len(co)
    lt, lc = 0, 0
    for r, c in zip(ro, co):
        assert tuple(r.shape) == tuple(c.shape), (r.shape, c.shape)
        if isinstance(c, cltorch.Tensor) and c.numel():
            assert str(c.device).startswith(device.split(":")[0])
        np.testing.assert_allclose(_np(c), _np(r), rtol=rtol, atol=atol)
        if grad and r.dtype.is_floating_point and r.requires_grad:
            w = rng.standard_normal(tuple(r.shape)).astype(dtype)
            lt = lt + (r * torch.tensor(w)).sum()
            lc = lc + (c * cltorch.tensor(w, device=device)).sum()
    if grad:
        gt = torch.autograd.grad(lt, tt, allow_unused=True)
        gc = cltorch.autograd.grad(lc, cc, allow_unused=True)
        for a, b in zip(gt, gc):
            if a is None:
                assert b is None or np.allclose(_np(b), 0)
                continue
            np.testing.assert_allclose(_np(b), _np(a), rtol=rtol * 10, atol=atol * 10)


A4 = rng.standard_normal((2, 4, 4))
B42 = rng.standard_normal((2, 4, 2))

# (name, torch fn, cltorch fn, input arrays, differentiable)
CASES = [
    ("solve", lambda a, b: torch.linalg.solve(a, b), lambda a, b: cltorch.linalg.solve(a, b), [A4, B42], True),
    ("solve_vec", lambda a, b: torch.linalg.solve(a, b), lambda a, b: cltorch.linalg.solve(a, b),
     [A4[0], B42[0, :, 0]], True),
    ("solve_left_false", lambda a, b: torch.linalg.solve(a, b, left=False),
     lambda a, b: cltorch.linalg.solve(a, b, left=False), [A4, rng.standard_normal((2, 3, 4))], True),
    ("solve_broadcast", lambda a, b: torch.linalg.solve(a, b), lambda a, b: cltorch.linalg.solve(a, b),
     [A4[0], B42], True),
    ("solve_ex", lambda a, b: torch.linalg.solve_ex(a, b), lambda a, b: cltorch.linalg.solve_ex(a, b), [A4, B42],
     True),
    ("inv", torch.linalg.inv, cltorch.linalg.inv, [A4], True),
    ("inv_ex", torch.linalg.inv_ex, cltorch.linalg.inv_ex, [A4], True),
    ("inverse", torch.inverse, cltorch.inverse, [A4[0]], True),
    ("det", torch.linalg.det, cltorch.linalg.det, [A4], True),
    ("slogdet", torch.linalg.slogdet, cltorch.linalg.slogdet, [A4], True),
    ("logdet", torch.logdet, cltorch.logdet, [_spd(2, 3, 3)], True),
    ("solve_triangular_lower", lambda a, b: torch.linalg.solve_triangular(a, b, upper=False),
     lambda a, b: cltorch.linalg.solve_triangular(a, b, upper=False), [_tri(2, 4, 4), B42], True),
    ("solve_triangular_upper_right_unit",
     lambda a, b: torch.linalg.solve_triangular(a, b, upper=True, left=False, unitriangular=True),
     lambda a, b: cltorch.linalg.solve_triangular(a, b, upper=True, left=False, unitriangular=True),
     [rng.standard_normal((4, 4)), rng.standard_normal((3, 4))], True),
    ("triangular_solve", lambda b, a: torch.triangular_solve(b, a, upper=False, transpose=True),
     lambda b, a: cltorch.triangular_solve(b, a, upper=False, transpose=True), [B42, _tri(2, 4, 4)], True),
    ("cholesky", torch.linalg.cholesky, cltorch.linalg.cholesky, [_spd(2, 4, 4)], True),
    ("cholesky_upper", lambda a: torch.linalg.cholesky(a, upper=True),
     lambda a: cltorch.linalg.cholesky(a, upper=True), [_spd(4, 4)], True),
    ("cholesky_ex", torch.linalg.cholesky_ex, cltorch.linalg.cholesky_ex, [_spd(2, 3, 3)], True),
    ("cholesky_legacy", torch.cholesky, cltorch.cholesky, [_spd(3, 3)], True),
    ("cholesky_solve", torch.cholesky_solve, cltorch.cholesky_solve, [B42, np.linalg.cholesky(_spd(2, 4, 4))], True),
    ("cholesky_inverse", lambda l: torch.cholesky_inverse(l, upper=True),
     lambda l: cltorch.cholesky_inverse(l, upper=True), [np.linalg.cholesky(_spd(4, 4)).T.copy()], True),
    ("lu_factor", torch.linalg.lu_factor, cltorch.linalg.lu_factor, [A4], True),
    ("lu_factor_ex_wide", torch.linalg.lu_factor_ex, cltorch.linalg.lu_factor_ex, [rng.standard_normal((3, 5))],
     True),
    ("lu_square", torch.linalg.lu, cltorch.linalg.lu, [A4], True),
    ("lu_wide", torch.linalg.lu, cltorch.linalg.lu, [rng.standard_normal((2, 3, 5))], True),
    ("lu_tall", torch.linalg.lu, cltorch.linalg.lu, [rng.standard_normal((5, 3))], True),
    ("lu_legacy", lambda a: torch.lu(a, get_infos=True), lambda a: cltorch.lu(a, get_infos=True), [A4], True),
    ("lu_blocked", torch.linalg.lu_factor, cltorch.linalg.lu_factor, [rng.standard_normal((70, 70))], False),
    ("solve_triangular_blocked", lambda a, b: torch.linalg.solve_triangular(a, b, upper=True),
     lambda a, b: cltorch.linalg.solve_triangular(a, b, upper=True),
     [_tri(130, 130, upper=True), rng.standard_normal((130, 3))], False),
    ("qr", torch.linalg.qr, cltorch.linalg.qr, [rng.standard_normal((2, 5, 3))], True),
    ("qr_wide", torch.linalg.qr, cltorch.linalg.qr, [rng.standard_normal((3, 5))], True),
    ("qr_complete", lambda a: torch.linalg.qr(a, mode="complete"), lambda a: cltorch.linalg.qr(a, mode="complete"),
     [rng.standard_normal((3, 5))], True),
    ("qr_r", lambda a: torch.linalg.qr(a, mode="r")[1], lambda a: cltorch.linalg.qr(a, mode="r")[1],
     [rng.standard_normal((5, 3))], False),
    ("qr_legacy", lambda a: torch.qr(a, some=False), lambda a: cltorch.qr(a, some=False),
     [rng.standard_normal((3, 3))], True),
    ("svd", lambda a: torch.linalg.svd(a, full_matrices=False), lambda a: cltorch.linalg.svd(a, full_matrices=False),
     [rng.standard_normal((2, 5, 3))], True),
    ("svd_full", lambda a: torch.linalg.svd(a)[1], lambda a: cltorch.linalg.svd(a)[1],
     [rng.standard_normal((5, 3))], True),
    ("svdvals", torch.linalg.svdvals, cltorch.linalg.svdvals, [rng.standard_normal((2, 3, 5))], True),
    ("svd_legacy_S", lambda a: torch.svd(a)[1], lambda a: cltorch.svd(a)[1], [rng.standard_normal((4, 3))], True),
    ("eigh", torch.linalg.eigh, cltorch.linalg.eigh, [_sym(4, 4)], True),
    ("eigh_upper_vals", lambda a: torch.linalg.eigh(a, UPLO="U")[0],
     lambda a: cltorch.linalg.eigh(a, UPLO="U")[0], [rng.standard_normal((2, 4, 4))], True),
    ("eigvalsh", torch.linalg.eigvalsh, cltorch.linalg.eigvalsh, [_sym(2, 4, 4)], True),
    ("pinv", torch.linalg.pinv, cltorch.linalg.pinv, [rng.standard_normal((2, 5, 3))], True),
    ("pinv_wide", torch.linalg.pinv, cltorch.linalg.pinv, [rng.standard_normal((3, 5))], True),
    ("pinv_hermitian", lambda a: torch.linalg.pinv(a, hermitian=True),
     lambda a: cltorch.linalg.pinv(a, hermitian=True), [_sym(4, 4)], True),
    ("pinverse", torch.pinverse, cltorch.pinverse, [rng.standard_normal((4, 3))], True),
    ("matrix_rank", torch.linalg.matrix_rank, cltorch.linalg.matrix_rank,
     [rng.standard_normal((2, 5, 2)) @ rng.standard_normal((2, 2, 4))], False),
    ("matrix_rank_hermitian", lambda a: torch.linalg.matrix_rank(a, hermitian=True),
     lambda a: cltorch.linalg.matrix_rank(a, hermitian=True), [_sym(4, 4)], False),
    ("lstsq", lambda a, b: torch.linalg.lstsq(a, b).solution, lambda a, b: cltorch.linalg.lstsq(a, b).solution,
     [rng.standard_normal((6, 3)), rng.standard_normal((6, 2))], True),
    ("lstsq_gelsd", lambda a, b: torch.linalg.lstsq(a, b, driver="gelsd"),
     lambda a, b: cltorch.linalg.lstsq(a, b, driver="gelsd"),
     [rng.standard_normal((2, 6, 3)), rng.standard_normal((2, 6, 2))], True),
    ("matrix_exp", torch.linalg.matrix_exp, cltorch.linalg.matrix_exp, [rng.standard_normal((2, 4, 4))], True),
    ("matrix_exp_large", torch.matrix_exp, cltorch.matrix_exp, [3 * rng.standard_normal((3, 3))], True),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_values_and_gradients(case, device):
    name, ft, fc, arrays, grad = case
    _run(ft, fc, arrays, device, grad, rtol=1e-5 if "blocked" in name else 1e-6)


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in ("solve", "inv", "cholesky", "qr", "lu_square",
                                                               "svd", "eigh", "pinv")], ids=lambda c: c[0])
def test_float32(case):
    name, ft, fc, arrays, grad = case
    _run(ft, fc, arrays, "cpu", grad, dtype=np.float32, rtol=2e-4, atol=2e-5)


def test_lu_solve_variants():
    a, b = rng.standard_normal((2, 4, 4)), rng.standard_normal((2, 4, 3))
    LUt, pt = torch.linalg.lu_factor(torch.tensor(a))
    for left in (True, False):
        for adjoint in (True, False):
            bb = b if left else np.swapaxes(b, -1, -2).copy()
            _run(lambda lu, x: torch.linalg.lu_solve(lu, pt, x, left=left, adjoint=adjoint),
                 lambda lu, x: cltorch.linalg.lu_solve(lu, cltorch.tensor(pt.numpy()), x, left=left, adjoint=adjoint),
                 [LUt.numpy(), bb], "cpu", True)
    _run(lambda lu, x: torch.lu_solve(x, lu, pt), lambda lu, x: cltorch.lu_solve(x, lu, cltorch.tensor(pt.numpy())),
         [LUt.numpy(), b], "cl:0", True)


@pytest.mark.parametrize("panels", [None, (8, 3)], ids=["one_panel", "panels_of_3"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lu_factor_batches_and_panels(panels, dtype, monkeypatch):
    """lu_factor_ex on batches (256 of 8x8, 16 of 20x20, tall and wide batches) gives torch's pivots, LU and
    info, also with zero pivots (exactly zero columns: info is the first, as getrf's); with ``panels`` the
    blocked path (panels of 3 columns, triangular solve + GEMM between them) is forced on every matrix wider
    than 8 columns. Gradients of the batched LU match torch's."""
    from cltorch.ops import lapack
    if panels is not None:
        monkeypatch.setattr(lapack, "_LU_ONE_PANEL", panels[0])
        monkeypatch.setattr(lapack, "_LU_PANEL", panels[1])
    sing = rng.standard_normal((4, 9, 9))
    sing[1, :, 0] = 0
    sing[2, :, 4] = 0
    sing[3, :, 2] = sing[3, :, 6] = 0
    for a in (rng.standard_normal((256, 8, 8)), rng.standard_normal((16, 20, 20)), rng.standard_normal((3, 2, 17, 11)),
              rng.standard_normal((5, 11, 17)), sing, rng.standard_normal((0, 4, 4))):
        a = a.astype(dtype)
        LUt, pt, it = torch.linalg.lu_factor_ex(torch.tensor(a))
        LUc, pc, ic = cltorch.linalg.lu_factor_ex(cltorch.tensor(a))
        assert pc.dtype == cltorch.int32 and ic.dtype == cltorch.int32
        np.testing.assert_array_equal(pc.numpy(), pt.numpy())
        np.testing.assert_array_equal(ic.numpy(), it.numpy())
        tol = 2e-5 if dtype == np.float32 else 1e-11
        np.testing.assert_allclose(LUc.numpy(), LUt.numpy(), rtol=tol, atol=tol)
    assert list(cltorch.linalg.lu_factor_ex(cltorch.tensor(sing)).info.numpy()) == [0, 1, 5, 3]
    _run(torch.linalg.lu_factor, cltorch.linalg.lu_factor, [rng.standard_normal((6, 10, 10))], "cpu", True,
         rtol=1e-9)


def test_lu_unpack():
    a = rng.standard_normal((2, 5, 3))
    LUt, pt = torch.linalg.lu_factor(torch.tensor(a))
    _run(lambda lu: torch.lu_unpack(lu, pt), lambda lu: cltorch.lu_unpack(lu, cltorch.tensor(pt.numpy())),
         [LUt.numpy()], "cpu", True)


def test_householder_geqrf_ormqr():
    a = rng.standard_normal((5, 3))
    h, tau = torch.geqrf(torch.tensor(a))
    ch, ctau = cltorch.geqrf(cltorch.tensor(a))
    np.testing.assert_allclose(ch.numpy(), h.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ctau.numpy(), tau.numpy(), rtol=1e-10, atol=1e-12)
    _run(torch.linalg.householder_product, cltorch.linalg.householder_product, [h.numpy(), tau.numpy()], "cl:0",
         True)
    _run(torch.orgqr, cltorch.orgqr, [h.numpy(), tau.numpy()], "cpu", True)
    c = rng.standard_normal((5, 2))
    for left, tr in ((True, False), (True, True)):
        _run(lambda x, t, y: torch.ormqr(x, t, y, left, tr), lambda x, t, y: cltorch.ormqr(x, t, y, left, tr),
             [h.numpy(), tau.numpy(), c], "cpu", True)
    for tr in (False, True):
        _run(lambda x, t, y: torch.ormqr(x, t, y, False, tr), lambda x, t, y: cltorch.ormqr(x, t, y, False, tr),
             [h.numpy(), tau.numpy(), c.T.copy()], "cpu", True)


def test_ldl():
    for n in (1, 4, 9):
        a = _sym(2, n, n)
        if n > 1:
            a[0, 0, 0] = 0.0          # forces a pivot choice beyond the diagonal
        LDt, pt, _ = torch.linalg.ldl_factor_ex(torch.tensor(a))
        LDc, pc = cltorch.linalg.ldl_factor(cltorch.tensor(a))
        np.testing.assert_array_equal(pc.numpy(), pt.numpy())
        np.testing.assert_allclose(LDc.numpy(), LDt.numpy(), rtol=1e-10, atol=1e-12)
        b = rng.standard_normal((2, n, 2))
        xt = torch.linalg.ldl_solve(LDt, pt, torch.tensor(b))
        xc = cltorch.linalg.ldl_solve(LDc, pc, cltorch.tensor(b, device="cl:0").cpu())
        np.testing.assert_allclose(xc.numpy(), xt.numpy(), rtol=1e-8, atol=1e-10)


def test_lowrank_shapes_and_quality():
    cltorch.manual_seed(0)
    a = rng.standard_normal((20, 3)) @ rng.standard_normal((3, 12))
    U, S, V = cltorch.svd_lowrank(cltorch.tensor(a), q=4)
    assert tuple(U.shape) == (20, 4) and tuple(S.shape) == (4,) and tuple(V.shape) == (12, 4)
    np.testing.assert_allclose((U.numpy() * S.numpy()) @ V.numpy().T, a, atol=1e-8)
    U, S, V = cltorch.pca_lowrank(cltorch.tensor(a), q=3)
    c = a - a.mean(0, keepdims=True)
    np.testing.assert_allclose(S.numpy(), np.linalg.svd(c, compute_uv=False)[:3], rtol=1e-8)


def test_gradcheck_host_ops():
    a = cltorch.tensor(_spd(3, 3), requires_grad=True)
    b = cltorch.tensor(rng.standard_normal((3, 2)), requires_grad=True)
    assert cltorch.autograd.gradcheck(lambda x, y: cltorch.linalg.solve(x, y), (a, b))
    assert cltorch.autograd.gradcheck(lambda x: cltorch.linalg.cholesky(x @ x.mT + cltorch.eye(3, dtype=x.dtype)), (a,))
    assert cltorch.autograd.gradcheck(lambda x: cltorch.linalg.svd(x)[1], (a,))


# ---------------------------------------------------------------------------------------------------- errors
def test_linalg_error_type():
    assert issubclass(cltorch.linalg.LinAlgError, RuntimeError)


@pytest.mark.parametrize("fn", [cltorch.linalg.inv, cltorch.linalg.det, cltorch.linalg.cholesky,
                                cltorch.linalg.eigh, lambda a: cltorch.linalg.solve(a, a)])
def test_non_square_raises(fn):
    with pytest.raises(RuntimeError, match="square"):
        fn(cltorch.tensor(rng.standard_normal((3, 4))))


@pytest.mark.parametrize("fn", [cltorch.linalg.inv, cltorch.linalg.svd, cltorch.linalg.qr])
def test_wrong_dtype_raises(fn):
    with pytest.raises(RuntimeError, match="floating point"):
        fn(cltorch.ones(3, 3, dtype=cltorch.int64))
    with pytest.raises(RuntimeError, match="Low precision"):
        fn(cltorch.ones(3, 3, dtype=cltorch.bfloat16))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        fn(cltorch.ones(3))


def test_singular_raises_like_torch():
    s = np.array([[1.0, 2.0], [2.0, 4.0]])
    sb = np.stack([np.eye(2), s])
    for fn_t, fn_c in ((torch.linalg.inv, cltorch.linalg.inv),
                       (lambda a: torch.linalg.solve(a, a), lambda a: cltorch.linalg.solve(a, a)),
                       (torch.linalg.lu_factor, cltorch.linalg.lu_factor),
                       (torch.linalg.cholesky, cltorch.linalg.cholesky),
                       (lambda a: torch.linalg.inv_ex(a, check_errors=True),
                        lambda a: cltorch.linalg.inv_ex(a, check_errors=True))):
        for arr in (s, sb):
            with pytest.raises(RuntimeError) as et:
                fn_t(torch.tensor(arr))
            with pytest.raises(RuntimeError) as ec:
                fn_c(cltorch.tensor(arr))
            # the same type (LinAlgError or plain RuntimeError) and message as PyTorch's
            assert isinstance(et.value, torch.linalg.LinAlgError) == isinstance(ec.value, cltorch.linalg.LinAlgError)
            assert str(ec.value) == str(et.value)
    info_t = torch.linalg.inv_ex(torch.tensor(sb)).info
    info_c = cltorch.linalg.inv_ex(cltorch.tensor(sb)).info
    np.testing.assert_array_equal(info_c.numpy(), info_t.numpy())
    np.testing.assert_array_equal(cltorch.linalg.cholesky_ex(cltorch.tensor(-sb)).info.numpy(),
                                  torch.linalg.cholesky_ex(torch.tensor(-sb)).info.numpy())


def test_mismatched_and_bad_args():
    a = cltorch.tensor(rng.standard_normal((3, 3)))
    with pytest.raises(RuntimeError, match="Incompatible"):
        cltorch.linalg.solve_triangular(a, cltorch.ones(4, 2, dtype=cltorch.float64), upper=True)
    with pytest.raises(RuntimeError, match="same dtype"):
        cltorch.linalg.solve(a, cltorch.ones(3, 2))
    with pytest.raises(RuntimeError, match="mode"):
        cltorch.linalg.qr(a, mode="bad")
    with pytest.raises(RuntimeError, match="not differentiable"):
        x = cltorch.tensor(rng.standard_normal((4, 2)), requires_grad=True)
        cltorch.linalg.qr(x, mode="complete").Q.sum().backward()
    with pytest.raises(RuntimeError, match="without pivoting"):
        cltorch.linalg.lu_factor(a, pivot=False)


@pytest.mark.parametrize("device", DEVICES)
def test_eig_complex(device):
    a = rng.standard_normal((2, 4, 4))
    ref = torch.linalg.eigvals(torch.tensor(a))
    w = cltorch.linalg.eigvals(cltorch.tensor(a, device=device))
    assert w.dtype is cltorch.complex128
    np.testing.assert_allclose(np.sort_complex(w.cpu().numpy()), np.sort_complex(ref.numpy()), rtol=1e-8)
    assert cltorch.linalg.eigvals(cltorch.tensor(a.astype(np.float32))).dtype is cltorch.complex64
    # A V = V diag(L), and the gradient of a phase-invariant loss matches torch's
    x = cltorch.tensor(a, device=device, requires_grad=True)
    L, V = cltorch.linalg.eig(x)
    Ln, Vn = L.detach().cpu().numpy(), V.detach().cpu().numpy()
    np.testing.assert_allclose(a @ Vn, Vn * Ln[..., None, :], atol=1e-10)
    (V.abs().sum() + L.abs().sum()).backward()
    xt = torch.tensor(a, requires_grad=True)
    Lt, Vt = torch.linalg.eig(xt)
    (Vt.abs().sum() + Lt.abs().sum()).backward()
    np.testing.assert_allclose(x.grad.cpu().numpy(), xt.grad.numpy(), rtol=1e-6, atol=1e-9)


def test_singular_det_gradient_and_out():
    # rank 2: d det / dA is the cofactor matrix, nonzero. The reference is the cofactors themselves, not torch:
    # torch 2.13's gradient here depends on its LAPACK's rounding (all zeros where its LU finds an exact zero
    # pivot, as on AMD Zen 5; the cofactors elsewhere).
    s = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    cof = np.array([[(-1) ** (i + j) * np.linalg.det(np.delete(np.delete(s, i, 0), j, 1)) for j in range(3)]
                    for i in range(3)])
    assert np.abs(cof).max() > 1
    for dev in ("cpu", "cl:0"):
        x = cltorch.tensor(s, device=dev, requires_grad=True)
        d = cltorch.linalg.det(x)
        assert abs(d.item()) < 1e-12
        d.backward()
        np.testing.assert_allclose(x.grad.cpu().numpy(), cof, atol=1e-12)
    a = rng.standard_normal((3, 3))
    q, r = cltorch.empty(3, 3, dtype=cltorch.float64), cltorch.empty(3, 3, dtype=cltorch.float64)
    res = cltorch.linalg.qr(cltorch.tensor(a), out=(q, r))
    assert res[0] is q and res[1] is r
    np.testing.assert_allclose(r.numpy(), torch.linalg.qr(torch.tensor(a)).R.numpy(), atol=1e-12)
    o = cltorch.empty(3, 3, dtype=cltorch.float64)
    cltorch.linalg.inv(cltorch.tensor(a), out=o)
    np.testing.assert_allclose(o.numpy(), np.linalg.inv(a), rtol=1e-10)


def test_double_backward():
    from cltorch.autograd import gradgradcheck
    eye = cltorch.eye(3, dtype=cltorch.float64)
    a = cltorch.tensor(rng.uniform(-1, 1, (3, 3)), requires_grad=True)
    b = cltorch.tensor(rng.uniform(-1, 1, (3, 2)), requires_grad=True)
    for f, ins in ((lambda x, y: cltorch.linalg.solve(x + 3 * eye, y), (a, b)),
                   (lambda x: cltorch.linalg.cholesky(x @ x.mT + 3 * eye), (a,)),
                   (lambda x: cltorch.linalg.qr(x).R, (a,)),
                   (lambda x: cltorch.linalg.eigvalsh(x + x.mT), (a,)),
                   (lambda x: cltorch.linalg.lu_factor(x + 3 * eye).LU, (a,)),
                   (lambda x: cltorch.matrix_exp(x), (a,))):
        assert gradgradcheck(f, ins, eps=1e-6, atol=1e-5, rtol=1e-3)
    x = cltorch.tensor(rng.standard_normal((3, 3)), requires_grad=True)
    g, = cltorch.autograd.grad(cltorch.linalg.eig(x).eigenvalues.abs().sum(), x, create_graph=False)
    assert g.shape == (3, 3)
    with pytest.raises(NotImplementedError, match="double backward"):
        cltorch.autograd.grad(cltorch.linalg.eig(x).eigenvalues.abs().sum(), x, create_graph=True)
