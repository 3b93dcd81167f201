"""complex64/complex128 tensors: storage, views, constructors, arithmetic with promotion, reductions and gradients,
checked against torch (the oracle)."""
import numpy as np
import pytest
import torch

import cltorch

DEVICES = ["cpu", "cl:0"]


def _c(a, device):
    return cltorch.tensor(np.asarray(a), device=device)


def _np(t):
    return t.detach().cpu().numpy()


def _rand(shape, seed=0, dtype=np.complex64):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_factories_numpy_roundtrip_and_dtype(device):
    z = cltorch.tensor([1 + 2j, 3.5 - 1j], device=device)
    assert z.dtype is cltorch.complex64 and z.is_complex() and not z.is_floating_point()
    np.testing.assert_array_equal(_np(z), np.array([1 + 2j, 3.5 - 1j], np.complex64))
    a = _rand((3, 4))
    np.testing.assert_array_equal(_np(cltorch.tensor(a, device=device)), a)
    assert cltorch.tensor(_rand(2, dtype=np.complex128)).dtype is cltorch.complex128
    np.testing.assert_array_equal(_np(cltorch.ones(3, dtype=cltorch.cfloat, device=device)), np.ones(3, np.complex64))
    np.testing.assert_array_equal(_np(cltorch.zeros(2, dtype=cltorch.complex64, device=device)), np.zeros(2))
    np.testing.assert_array_equal(_np(cltorch.full((2,), 1 - 2j, device=device)), np.full(2, 1 - 2j, np.complex64))
    assert cltorch.tensor([1, 2]).cfloat().dtype is cltorch.complex64
    assert cltorch.tensor([1.0]).cdouble().dtype is cltorch.complex128
    assert z.cpu().tolist() == [1 + 2j, 3.5 - 1j]
    assert complex(z[0]) == 1 + 2j


def test_repr_matches_torch():
    for vals in ([1 + 2j, 3 - 1j], [1.5 + 2j, -0.25j]):
        assert repr(cltorch.tensor(vals)) == repr(torch.tensor(vals))
    assert repr(cltorch.tensor([1 + 2j], dtype=cltorch.complex128)) == "tensor([1.+2.j], dtype=cltorch.complex128)"


@pytest.mark.parametrize("device", DEVICES)
def test_views_real_imag_and_data_movement(device):
    a = _rand((3, 4), 1)
    z, tz = _c(a, device), torch.from_numpy(a)
    v = cltorch.view_as_real(z)
    assert v.shape == (3, 4, 2) and v.stride() == (8, 2, 1) and v.dtype is cltorch.float32
    np.testing.assert_array_equal(_np(v), torch.view_as_real(tz).numpy())
    zt = z.t()
    vt = cltorch.view_as_real(zt)
    assert vt.stride() == (2, 8, 1)
    np.testing.assert_array_equal(_np(vt), torch.view_as_real(tz.t()).numpy())
    np.testing.assert_array_equal(_np(cltorch.view_as_complex(v)), a)
    np.testing.assert_array_equal(_np(z.real), a.real)
    np.testing.assert_array_equal(_np(z.imag), a.imag)
    z2 = z.clone()
    z2.real.copy_(cltorch.zeros(3, 4, device=device))        # writing through the real view
    np.testing.assert_array_equal(_np(z2), 1j * a.imag)
    z2.imag = cltorch.ones(3, 4, device=device)
    np.testing.assert_array_equal(_np(z2).imag, np.ones((3, 4)))
    # data movement for an 8-byte element type
    np.testing.assert_array_equal(_np(z.t().contiguous()), a.T)
    np.testing.assert_array_equal(_np(z.permute(1, 0).reshape(-1)), a.T.reshape(-1))
    np.testing.assert_array_equal(_np(cltorch.cat([z, z[:1]])), np.concatenate([a, a[:1]]))
    np.testing.assert_array_equal(_np(cltorch.stack([z, z], 1)), np.stack([a, a], 1))
    idx = cltorch.tensor([2, 0], device=device)
    np.testing.assert_array_equal(_np(z[idx]), a[[2, 0]])
    np.testing.assert_array_equal(_np(z[:, 1::2]), a[:, 1::2])
    np.testing.assert_array_equal(_np(z.flip(0)), a[::-1])
    np.testing.assert_array_equal(_np(z.to("cpu" if device != "cpu" else "cl:0").cpu()), a)


def test_view_as_complex_errors():
    with pytest.raises(RuntimeError, match="last dimension of size 2"):
        cltorch.view_as_complex(cltorch.zeros(3, 3))
    with pytest.raises(RuntimeError, match="stride 1"):
        cltorch.view_as_complex(cltorch.zeros(2, 3).t())
    with pytest.raises(RuntimeError, match="storage_offset divisible by 2"):
        cltorch.view_as_complex(cltorch.zeros(5)[1:].view(2, 2))
    with pytest.raises(RuntimeError, match="float and double"):
        cltorch.view_as_complex(cltorch.zeros(3, 2, dtype=cltorch.int32))
    with pytest.raises(RuntimeError, match="only supported for complex"):
        cltorch.view_as_real(cltorch.zeros(3))
    with pytest.raises(RuntimeError, match="scalar type Float"):
        cltorch.complex(cltorch.zeros(2), cltorch.zeros(2, dtype=cltorch.float64))
    with pytest.raises(NotImplementedError, match="complex32"):
        cltorch.zeros(2, dtype=cltorch.complex32)
    with pytest.raises(NotImplementedError, match="tanh is not implemented for complex"):
        cltorch.tensor([1j]).tanh()
    with pytest.raises(RuntimeError, match="torch.sgn"):
        cltorch.tensor([1j]).sign()
    with pytest.raises(RuntimeError, match="can't be cast"):
        cltorch.zeros(2).add_(cltorch.tensor([1j, 2j]))


@pytest.mark.parametrize("device", DEVICES)
def test_arithmetic_and_promotion(device):
    a, b = _rand((2, 3), 2), _rand((3,), 3)
    r = np.random.default_rng(4).standard_normal((2, 3)).astype(np.float32)
    za, zb, zr = _c(a, device), _c(b, device), _c(r, device)
    ta, tb, tr = map(torch.from_numpy, (a, b, r))
    pairs = [(za + zb, ta + tb), (za - zb, ta - tb), (za * zb, ta * tb), (za / zb, ta / tb),
             (za * zr, ta * tr), (zr - za, tr - ta), (zr / za, tr / ta), (za * (2 - 1j), ta * (2 - 1j)),
             ((1 + 1j) / za, (1 + 1j) / ta), (za + 3, ta + 3), (-za, -ta), (zr + 1j, tr + 1j),
             (za ** 2 if False else za * za, ta * ta), (cltorch.polar(zr.abs(), zr), torch.polar(tr.abs(), tr))]
    for got, ref in pairs:
        assert str(got.dtype) == str(ref.dtype).replace("torch", "cltorch"), (got.dtype, ref.dtype)
        np.testing.assert_allclose(_np(got), ref.numpy(), rtol=1e-5, atol=1e-6)
    assert (za == za).all().item() and not (za != za).any().item()
    np.testing.assert_array_equal(_np(za == zb), (ta == tb).numpy())
    d = cltorch.tensor(r.astype(np.float64), device=device)
    assert (za * d).dtype is cltorch.complex128         # float64 with complex64 -> complex128
    assert (zr + 1j).dtype is cltorch.complex64
    assert cltorch.promote_types(cltorch.float64, cltorch.complex64) is cltorch.complex128
    assert cltorch.promote_types(cltorch.int64, cltorch.complex64) is cltorch.complex64
    z = za.clone()
    z += zb
    z *= 2
    np.testing.assert_allclose(_np(z), ((ta + tb) * 2).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_unary_and_reductions(device):
    a = _rand((3, 5), 5)
    a[0, 0] = 0
    z, tz = _c(a, device), torch.from_numpy(a)
    for got, ref in [(z.abs(), tz.abs()), (z.angle(), tz.angle()), (z.conj(), tz.conj().resolve_conj()),
                     (z.sgn(), tz.sgn()), (z.sum(), tz.sum()), (z.sum(1), tz.sum(1)), (z.mean(0), tz.mean(0)),
                     (z.sum(-1, keepdim=True), tz.sum(-1, keepdim=True)), (cltorch.isreal(z), torch.isreal(tz))]:
        np.testing.assert_allclose(_np(got), ref.numpy(), rtol=1e-5, atol=1e-6)
        assert got.shape == tuple(ref.shape)
    assert not z.conj().is_conj() and z.resolve_conj() is z
    x = cltorch.tensor([-1.0, 0.0, 2.0, float("nan")], device=device)
    np.testing.assert_array_equal(_np(x.angle()), torch.tensor([-1.0, 0.0, 2.0, float("nan")]).angle().numpy())
    np.testing.assert_array_equal(_np(z.to(cltorch.complex128)), a.astype(np.complex128))
    with pytest.warns(UserWarning, match="discards the imaginary part"):
        np.testing.assert_array_equal(_np(z.to(cltorch.float32)), a.real)
    np.testing.assert_array_equal(_np(cltorch.tensor(a.real, device=device).to(cltorch.complex64)), a.real + 0j)


def _grads(fn_cl, fn_t, arrays, device):
    """Gradients of sum(view_as_real(fn(*inputs)) * w) in cltorch and torch."""
    cl_in = [cltorch.tensor(x, device=device, requires_grad=True) for x in arrays]
    t_in = [torch.tensor(x, requires_grad=True) for x in arrays]
    out_c, out_t = fn_cl(*cl_in), fn_t(*t_in)
    if out_t.is_complex():
        out_c, out_t = cltorch.view_as_real(out_c), torch.view_as_real(out_t)
    w = np.random.default_rng(9).standard_normal(tuple(out_t.shape)).astype(np.float32)
    (out_c * cltorch.tensor(w, device=device)).sum().backward()
    (out_t * torch.from_numpy(w)).sum().backward()
    return [(_np(c.grad), t.grad.resolve_conj().numpy()) for c, t in zip(cl_in, t_in)]


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_follow_torch_convention(device):
    a, b = _rand((2, 3), 6), _rand((2, 3), 7)
    r = np.random.default_rng(8).standard_normal((2, 3)).astype(np.float32)
    cases = [
        (lambda x, y: x * y, lambda x, y: x * y, (a, b)),
        (lambda x, y: x / y, lambda x, y: x / y, (a, b)),
        (lambda x, y: x - y.conj(), lambda x, y: x - y.conj(), (a, b)),
        (lambda x: x.abs(), lambda x: x.abs(), (a,)),
        (lambda x: x.angle(), lambda x: x.angle(), (a,)),
        (lambda x: x.sgn(), lambda x: x.sgn(), (a,)),
        (lambda x: cltorch.view_as_real(x) * 1, lambda x: torch.view_as_real(x) * 1, (a,)),
        (lambda x: x.real * x.imag, lambda x: x.real * x.imag, (a,)),
        (lambda x: (x * x).sum(0), lambda x: (x * x).sum(0), (a,)),
        (lambda x, y: cltorch.complex(x, y), lambda x, y: torch.complex(x, y), (r, r * 2)),
        (lambda x, y: cltorch.polar(x, y), lambda x, y: torch.polar(x, y), (np.abs(r), r)),
        (lambda x, y: x * y, lambda x, y: x * y, (a, r)),
        (lambda x: cltorch.view_as_complex(x), lambda x: torch.view_as_complex(x), (np.stack([r, r], -1),)),
    ]
    for fc, ft, arrs in cases:
        for got, ref in _grads(fc, ft, arrs, device):
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


def test_complex128_on_cpu_and_fp64_check():
    a = _rand(4, 10, np.complex128)
    z = cltorch.tensor(a)
    assert z.dtype is cltorch.complex128 and z.element_size() == 16
    np.testing.assert_allclose(_np(z * z), a * a, rtol=1e-12)
    dev = cltorch.device("cl:0")
    from cltorch import backend
    if not backend.runtime(dev.index).info.fp64:
        with pytest.raises(TypeError, match="complex128 is not supported"):
            cltorch.tensor(a, device="cl:0")
    else:
        np.testing.assert_allclose(_np(cltorch.tensor(a, device="cl:0") * 2), a * 2, rtol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_masked_fill_where_indexing_and_unsupported(device):
    a = _rand((2, 3), 11)
    z, tz = _c(a, device), torch.from_numpy(a)
    m = np.array([[True, False, True], [False, False, True]])
    cm, tm = cltorch.tensor(m, device=device), torch.from_numpy(m)
    np.testing.assert_array_equal(_np(z.masked_fill(cm, 1 - 1j)), tz.masked_fill(tm, 1 - 1j).numpy())
    w = z.clone()
    w.masked_fill_(cm, 2j)
    np.testing.assert_array_equal(_np(w), tz.masked_fill(tm, 2j).numpy())
    np.testing.assert_array_equal(_np(cltorch.where(cm, z, cltorch.zeros_like(z))),
                                  torch.where(tm, tz, torch.zeros_like(tz)).numpy())
    np.testing.assert_array_equal(_np(z.roll(1, 1)), tz.roll(1, 1).numpy())
    np.testing.assert_array_equal(_np(z.gather(1, cltorch.tensor([[2, 0], [1, 1]], device=device))),
                                  tz.gather(1, torch.tensor([[2, 0], [1, 1]])).numpy())
    with pytest.raises(NotImplementedError, match="prod is not implemented for complex"):
        z.prod()


def test_save_load_roundtrip_with_torch(tmp_path):
    a = _rand((2, 3), 12)
    p = tmp_path / "z.pt"
    cltorch.save({"z": cltorch.tensor(a), "d": cltorch.complex64}, p)
    back = torch.load(p)
    np.testing.assert_array_equal(back["z"].numpy(), a)
    assert back["d"] is torch.complex64
    torch.save(torch.from_numpy(a.astype(np.complex128)), p)
    got = cltorch.load(p)
    assert got.dtype is cltorch.complex128
    np.testing.assert_array_equal(got.numpy(), a.astype(np.complex128))


@pytest.mark.parametrize("device", DEVICES)
def test_exp_log_sqrt_pow(device):
    a = _rand((2, 4), 13)
    z, tz = _c(a, device), torch.from_numpy(a)
    r = np.abs(np.random.default_rng(14).standard_normal(4)).astype(np.float32) + 0.5
    cr, tr = cltorch.tensor(r, device=device), torch.from_numpy(r)
    for got, ref in [(z.exp(), tz.exp()), (z.log(), tz.log()), (z.sqrt(), tz.sqrt()), (z ** 2, tz ** 2),
                     (z ** 0.5, tz ** 0.5), (z ** (1 + 1j), tz ** (1 + 1j)), (z ** cr, tz ** tr),
                     (cr ** z, tr ** tz), (z ** z, tz ** tz)]:
        np.testing.assert_allclose(_np(got), ref.numpy(), rtol=1e-4, atol=1e-5)
    assert z.type() == "torch.ComplexFloatTensor"
    for got, ref in _grads(lambda x: (x.exp() * x.log()).sqrt(), lambda x: (x.exp() * x.log()).sqrt(), (a,), device):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_inplace_through_real_and_imag_views_under_autograd(device):
    a = _rand(3, 15)
    wgt = np.random.default_rng(16).standard_normal((3, 2)).astype(np.float32)
    grads = []
    for lib, dev in ((torch, None), (cltorch, device)):
        kw = {} if dev is None else {"device": dev}
        z = lib.tensor(a, requires_grad=True, **kw)
        w = z * 1
        w.real.mul_(3)
        w.imag.add_(lib.view_as_real(w)[:, 0])
        (lib.view_as_real(w) * lib.tensor(wgt, **kw)).sum().backward()
        grads.append((_np(w) if lib is cltorch else w.detach().numpy(), _np(z.grad) if lib is cltorch
                      else z.grad.numpy()))
        with pytest.raises(RuntimeError, match="view of a leaf Variable"):
            z.real.mul_(2)
    np.testing.assert_allclose(grads[1][0], grads[0][0], rtol=1e-6)
    np.testing.assert_allclose(grads[1][1], grads[0][1], rtol=1e-6)
    # the alias shares the version counter: a write through .real invalidates what saved z
    z = cltorch.tensor(a, requires_grad=True)
    w = z * 1
    y = w * w
    w.real.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        cltorch.view_as_real(y).sum().backward()


@pytest.mark.parametrize("device", DEVICES)
def test_random_complex_moments(device):
    cltorch.manual_seed(0)
    z = cltorch.randn(100000, dtype=cltorch.complex64, device=device)
    v = _np(cltorch.view_as_real(z)).astype(np.float64)
    np.testing.assert_allclose(v.mean(0), [0, 0], atol=0.01)
    np.testing.assert_allclose(v.std(0), [0.5 ** 0.5] * 2, rtol=0.02)     # torch: each part N(0, 1/2)
    assert abs(np.corrcoef(v[:, 0], v[:, 1])[0, 1]) < 0.02
    u = _np(cltorch.view_as_real(cltorch.rand(100000, dtype=cltorch.complex64, device=device)))
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.01
    w = cltorch.zeros(40, 50, dtype=cltorch.complex64, device=device).t().normal_(2.0, 1.0)
    assert abs(float(w.real.mean()) - 2.0) < 0.05 and abs(float(w.imag.mean())) < 0.05
