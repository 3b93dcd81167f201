"""cltorch.fft against torch.fft: the Stockham sizes (2/3/5/7-smooth) and Bluestein's (primes, other factors),
every function of the namespace, norms, n/s padding and trimming, other dims, complex inputs, gradients, errors."""
import numpy as np
import pytest
import torch

import cltorch

DEVICES = ["cpu", "cl:0"]


def _np(t):
    t = t.detach().cpu()
    return t.numpy()


def _tnp(t):
    return t.detach().resolve_conj().numpy()


def _close(got, ref, rtol=1e-4, atol=1e-5):
    assert tuple(got.shape) == tuple(ref.shape), (tuple(got.shape), tuple(ref.shape))
    assert str(got.dtype).split(".")[1] == str(ref.dtype).split(".")[1], (got.dtype, ref.dtype)
    g, r = _np(got), _tnp(ref)
    scale = max(1.0, float(np.abs(r).max())) if r.size else 1.0
    np.testing.assert_allclose(g, r, rtol=rtol, atol=atol * scale)


def _rand(shape, seed=0, cplx=False):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if cplx:
        a = a + 1j * rng.standard_normal(shape)
        return a.astype(np.complex64)
    return a.astype(np.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n", [1, 2, 7, 12, 97, 128, 1000, 143])
def test_fft_ifft_sizes(device, n):
    a = _rand((3, n), n, cplx=True)
    x, tx = cltorch.tensor(a, device=device), torch.from_numpy(a)
    _close(cltorch.fft.fft(x), torch.fft.fft(tx))
    _close(cltorch.fft.ifft(x), torch.fft.ifft(tx))
    _close(cltorch.fft.fft(x, dim=0), torch.fft.fft(tx, dim=0))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("norm", [None, "backward", "ortho", "forward"])
def test_one_dim_real_and_hermitian_with_norms(device, norm):
    a = _rand((2, 10), 1)
    x, tx = cltorch.tensor(a, device=device), torch.from_numpy(a)
    for name in ("fft", "ifft", "rfft", "ihfft"):
        f, tf = getattr(cltorch.fft, name), getattr(torch.fft, name)
        _close(f(x, norm=norm), tf(tx, norm=norm))
        _close(f(x, n=7, norm=norm), tf(tx, n=7, norm=norm))            # trimmed, odd, Bluestein
        _close(f(x, n=16, dim=1, norm=norm), tf(tx, n=16, dim=1, norm=norm))   # zero-padded
    s = torch.fft.rfft(tx)
    h = cltorch.tensor(s.numpy(), device=device)
    for name in ("irfft", "hfft"):
        f, tf = getattr(cltorch.fft, name), getattr(torch.fft, name)
        _close(f(h, norm=norm), tf(s, norm=norm))
        _close(f(h, n=9, norm=norm), tf(s, n=9, norm=norm))
        _close(f(h, n=30, norm=norm), tf(s, n=30, norm=norm))


@pytest.mark.parametrize("device", DEVICES)
def test_multi_dim(device):
    a = _rand((3, 6, 5), 2)
    c = _rand((3, 6, 5), 3, cplx=True)
    x, tx = cltorch.tensor(a, device=device), torch.from_numpy(a)
    z, tz = cltorch.tensor(c, device=device), torch.from_numpy(c)
    for name in ("fft2", "ifft2", "fftn", "ifftn"):
        f, tf = getattr(cltorch.fft, name), getattr(torch.fft, name)
        _close(f(z), tf(tz))
        _close(f(x, norm="ortho"), tf(tx, norm="ortho"))
        _close(f(z, s=(4, 7)), tf(tz, s=(4, 7)))
        _close(f(z, dim=(0, 2)), tf(tz, dim=(0, 2)))
    for name in ("rfft2", "rfftn", "ihfft2", "ihfftn"):
        f, tf = getattr(cltorch.fft, name), getattr(torch.fft, name)
        _close(f(x), tf(tx))
        _close(f(x, s=(5, 8), norm="forward"), tf(tx, s=(5, 8), norm="forward"))
    for name in ("irfft2", "irfftn", "hfft2", "hfftn"):
        f, tf = getattr(cltorch.fft, name), getattr(torch.fft, name)
        _close(f(z), tf(tz))
        _close(f(z, s=(6, 7), dim=(0, 1)), tf(tz, s=(6, 7), dim=(0, 1)))
    _close(cltorch.fft.fftn(z, dim=1), torch.fft.fftn(tz, dim=1))
    _close(cltorch.fft.fft(x), torch.fft.fft(tx))     # real input -> complex64
    xi = cltorch.tensor([[1, 2, 3]], device=device)
    _close(cltorch.fft.fft(xi), torch.fft.fft(torch.tensor([[1, 2, 3]])))   # integers -> complex64


@pytest.mark.parametrize("device", DEVICES)
def test_shift_and_freq(device):
    a = _rand((4, 7), 4)
    x, tx = cltorch.tensor(a, device=device), torch.from_numpy(a)
    _close(cltorch.fft.fftshift(x), torch.fft.fftshift(tx))
    _close(cltorch.fft.ifftshift(x, dim=1), torch.fft.ifftshift(tx, dim=1))
    _close(cltorch.fft.ifftshift(cltorch.fft.fftshift(x)), tx)
    for n in (1, 6, 7):
        _close(cltorch.fft.fftfreq(n, 0.5, device=device), torch.fft.fftfreq(n, 0.5))
        _close(cltorch.fft.rfftfreq(n, device=device), torch.fft.rfftfreq(n))
    assert cltorch.fft.fftfreq(4, dtype=cltorch.float64).dtype is cltorch.float64


def _grad_pair(name, a, kw, device, seed=0):
    """Gradients of sum(w * view_as_real(out)) (or w * out for real outputs) w.r.t. the input, cltorch and torch."""
    x = cltorch.tensor(a, device=device, requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    out, tout = getattr(cltorch.fft, name)(x, **kw), getattr(torch.fft, name)(tx, **kw)
    if tout.is_complex():
        out, tout = cltorch.view_as_real(out), torch.view_as_real(tout.resolve_conj())
    w = np.random.default_rng(seed).standard_normal(tuple(tout.shape)).astype(np.float32)
    (out * cltorch.tensor(w, device=device)).sum().backward()
    (tout * torch.from_numpy(w)).sum().backward()
    return x.grad, tx.grad


@pytest.mark.parametrize("device", DEVICES)
def test_gradients_match_torch(device):
    r = _rand((3, 8), 5)
    c = _rand((3, 5), 6, cplx=True)
    cases = [("fft", r, {}), ("fft", c, {"n": 7, "norm": "ortho"}), ("ifft", c, {"dim": 0}),
             ("rfft", r, {}), ("rfft", r, {"n": 11, "norm": "forward"}), ("irfft", c, {}), ("irfft", c, {"n": 9}),
             ("hfft", c, {}), ("hfft", c, {"n": 7, "norm": "ortho"}), ("ihfft", r, {}), ("fft2", c, {}),
             ("rfft2", r, {"s": (4, 6)}), ("irfft2", c, {}), ("hfftn", c, {}), ("ihfftn", r, {}),
             ("ifftn", c, {"norm": "forward"}), ("fftshift", r, {})]
    for k, (name, a, kw) in enumerate(cases):
        g, tg = _grad_pair(name, a, kw, device, k)
        _close(g, tg.resolve_conj())


def test_gradcheck_double():
    x = cltorch.tensor(_rand((2, 5), 7).astype(np.float64), requires_grad=True)
    assert cltorch.autograd.gradcheck(lambda t: cltorch.view_as_real(cltorch.fft.rfft(t, n=7)), (x,))
    assert cltorch.autograd.gradcheck(lambda t: cltorch.fft.irfft(cltorch.fft.rfft(t) * 2, n=5), (x,))


def test_errors_match_torch():
    x = cltorch.randn(4)
    with pytest.raises(RuntimeError, match="Invalid normalization mode"):
        cltorch.fft.fft(x, norm="bad")
    with pytest.raises(RuntimeError, match=r"Invalid number of data points \(0\)"):
        cltorch.fft.fft(x, n=0)
    with pytest.raises(RuntimeError, match="rfft expects a real input tensor, but got ComplexFloat"):
        cltorch.fft.rfft(x.to(cltorch.complex64))
    with pytest.raises(RuntimeError, match="same length"):
        cltorch.fft.fftn(x, s=(2, 2), dim=(0,))
    with pytest.raises(RuntimeError, match="unique"):
        cltorch.fft.fftn(cltorch.randn(2, 2), dim=(0, 0))
    with pytest.raises(IndexError, match="Dimension out of range"):
        cltorch.fft.fft(x, dim=3)
    with pytest.raises(RuntimeError, match=r"Invalid number of data points \(0\)"):
        cltorch.fft.irfft(cltorch.randn(1).to(cltorch.complex64))
    with pytest.raises(NotImplementedError, match="complex32"):
        cltorch.fft.fft(x.bfloat16())
    with pytest.raises(RuntimeError, match=r"Invalid number of data points \(0\)"):
        cltorch.fft.rfft(cltorch.zeros(0))


@pytest.mark.parametrize("device", DEVICES)
def test_stft_istft_match_torch(device):
    a = _rand((2, 40), 11)
    x, tx = cltorch.tensor(a, device=device), torch.from_numpy(a)
    hann = torch.hann_window(6)
    cases = [dict(n_fft=8), dict(n_fft=8, hop_length=3, win_length=6, normalized=True, window=hann),
             dict(n_fft=7, center=False), dict(n_fft=8, onesided=False), dict(n_fft=8, hop_length=2, length=37)]
    for kw in cases:
        ckw = {k: (cltorch.tensor(v.numpy(), device=device) if isinstance(v, torch.Tensor) else v)
               for k, v in kw.items()}
        skw = {k: v for k, v in kw.items() if k != "length"}
        ref = torch.stft(tx, return_complex=True, **skw)
        got = cltorch.stft(x, return_complex=True, **{k: v for k, v in ckw.items() if k != "length"})
        _close(got, ref)
        _close(cltorch.istft(got, **ckw), torch.istft(ref, **kw))
    _close(cltorch.stft(x[0], 8, return_complex=False), torch.stft(tx[0], 8, return_complex=False))
    # gradients through both
    xg = cltorch.tensor(a, device=device, requires_grad=True)
    txg = torch.tensor(a, requires_grad=True)
    w = np.random.default_rng(1).standard_normal((2, 40)).astype(np.float32)
    (cltorch.istft(cltorch.stft(xg * xg, 8, return_complex=True) * 1.5, 8, length=40)
     * cltorch.tensor(w, device=device)).sum().backward()
    (torch.istft(torch.stft(txg * txg, 8, return_complex=True) * 1.5, 8, length=40) * torch.from_numpy(w)).sum() \
        .backward()
    _close(xg.grad, txg.grad)
    with pytest.raises(RuntimeError, match="return_complex parameter be given"):
        cltorch.stft(x, 8)
    with pytest.raises(RuntimeError, match="complex-valued input"):
        cltorch.istft(x, 8)
    with pytest.raises(RuntimeError, match="overlap add min"):       # hann edges are 0 without centering
        cltorch.istft(cltorch.stft(x, 8, return_complex=True), 8,
                      window=cltorch.tensor(torch.hann_window(8).numpy(), device=device), center=False)
