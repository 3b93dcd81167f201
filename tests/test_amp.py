"""cltorch.amp and cltorch.cuda.amp: GradScaler against torch's GradScaler on cpu with the same gradients,
autocast's pass-through, warnings and errors."""
import warnings

import numpy as np
import pytest

import cltorch

torch = pytest.importorskip("torch")

INF, NAN = float("inf"), float("nan")
# per step, the (unscaled) gradient of a 3-element parameter; inf/nan steps must be skipped
GRADS = [[1.0, -2.0, 0.5], [0.25, 0.25, 1.0], [INF, 0.0, 1.0], [1.0, 1.0, 1.0], [0.5, NAN, 0.0],
         [2.0, -1.0, 3.0], [1.0, 2.0, 3.0], [-1.0, 0.5, 0.5], [0.1, 0.2, 0.3]]


def _run(lib, device, unscale_first, **kw):
    p = lib.nn.Parameter(lib.tensor([1.0, 2.0, 3.0], device=device))
    opt = lib.optim.SGD([p], lr=0.1, momentum=0.9)
    scaler = lib.amp.GradScaler(device, **kw)
    out = []
    for g in GRADS:
        opt.zero_grad()
        loss = (p * lib.tensor(g, device=device)).sum()
        scaler.scale(loss).backward()
        if unscale_first:
            scaler.unscale_(opt)
            grad = p.grad.detach().cpu().tolist()
        else:
            grad = None
        ret = scaler.step(opt)
        scaler.update()
        out.append((p.detach().cpu().tolist(), scaler.get_scale(), ret, grad, scaler.state_dict()))
    return out


@pytest.mark.parametrize("unscale_first", [False, True])
def test_grad_scaler_matches_torch(device, unscale_first):
    kw = dict(init_scale=8.0, growth_factor=4.0, backoff_factor=0.25, growth_interval=2)
    ours = _run(cltorch, device, unscale_first, **kw)
    ref = _run(torch, "cpu", unscale_first, **kw)
    for step, ((p, s, r, g, sd), (rp, rs, rr, rg, rsd)) in enumerate(zip(ours, ref)):
        np.testing.assert_allclose(p, rp, rtol=1e-6, err_msg=f"step {step}")
        assert s == rs, step
        assert (r is None) == (rr is None), step
        if g is not None:
            np.testing.assert_allclose(g, rg, rtol=1e-6, err_msg=f"step {step}")
        assert sd == rsd, step
    assert [s for _, s, *_ in ours] == [s for _, s, *_ in ref]


def test_grad_scaler_growth_stops_at_inf():
    # a scale whose growth would overflow float32 stays put, as torch's
    for lib in (cltorch, torch):
        p = lib.nn.Parameter(lib.ones(1))
        opt = lib.optim.SGD([p], lr=0.0)
        s = lib.amp.GradScaler("cpu", init_scale=2.0 ** 127, growth_factor=4.0, growth_interval=1)
        s.scale(p.sum()).backward()
        s.step(opt)
        s.update()
        if lib is cltorch:
            ours = (s.get_scale(), s.state_dict())
        else:
            assert ours == (s.get_scale(), s.state_dict())


def test_grad_scaler_state_dict_round_trip_and_errors(device):
    s = cltorch.amp.GradScaler(device, init_scale=16.0, growth_interval=3)
    r = torch.amp.GradScaler("cpu", init_scale=16.0, growth_interval=3)
    assert s.state_dict() == r.state_dict()
    assert s.get_scale() == r.get_scale() == 16.0
    t = cltorch.amp.GradScaler(device)
    t.load_state_dict(s.state_dict())
    assert t.state_dict() == s.state_dict()
    with pytest.raises(RuntimeError, match="empty"):
        t.load_state_dict({})
    p = cltorch.nn.Parameter(cltorch.ones(2, device=device))
    opt = cltorch.optim.SGD([p], lr=0.1)
    with pytest.raises(AssertionError, match="_scale is None"):
        s.step(opt)
    s.scale(p.sum()).backward()
    s.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called"):
        s.unscale_(opt)
    with pytest.raises(RuntimeError, match="Closure"):
        s.step(opt, closure=lambda: 0)
    s.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        s.step(opt)
    with pytest.raises(RuntimeError, match="after step"):
        s.unscale_(opt)
    s.update(new_scale=2.0)
    assert s.get_scale() == 2.0
    with pytest.raises(ValueError):
        s.scale(3)
    assert [v.item() for v in s.scale([cltorch.ones(1, device=device), (cltorch.ones(1, device=device),)])[1]] \
        == [2.0]
    with pytest.raises(AssertionError, match="growth factor"):
        cltorch.amp.GradScaler(device, growth_factor=1.0)


def test_disabled_scaler_is_a_pass_through():
    p = cltorch.nn.Parameter(cltorch.ones(2))
    opt = cltorch.optim.SGD([p], lr=0.5)
    s = cltorch.amp.GradScaler("cl", enabled=False)
    r = torch.amp.GradScaler("cpu", enabled=False)
    loss = (p * 3).sum()
    assert s.scale(loss) is loss
    s.scale(loss).backward()
    s.unscale_(opt)
    s.step(opt)
    s.update()
    assert p.tolist() == [-0.5, -0.5]
    assert (s.get_scale(), s.state_dict(), s.is_enabled()) == (r.get_scale(), r.state_dict(), r.is_enabled())


def test_cuda_scaler_warns_and_disables():
    with pytest.warns(UserWarning, match="CUDA is not available"):
        s = cltorch.amp.GradScaler("cuda")
    assert not s.is_enabled() and s.get_scale() == 1.0
    with pytest.warns(FutureWarning, match="torch.cuda.amp.GradScaler"):
        s = cltorch.cuda.amp.GradScaler(enabled=False)
    assert not s.is_enabled() and s.state_dict() == {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        with pytest.warns(UserWarning, match="CUDA is not available"):
            cltorch.cuda.amp.GradScaler()


def test_autocast_modes():
    x = cltorch.ones(2, 2)
    with cltorch.amp.autocast("cl", enabled=False):
        y = x @ x
    assert y.dtype is cltorch.float32
    with cltorch.autocast(device_type="cpu", enabled=False) as ctx:
        assert ctx is not None
    with pytest.warns(UserWarning, match="CUDA is not available"):
        with cltorch.autocast("cuda"):
            assert (x @ x).dtype is cltorch.float32
    with pytest.warns(FutureWarning, match="torch.cuda.amp.autocast"):
        with cltorch.cuda.amp.autocast(enabled=False):
            pass
    for dev in ("cl", "cpu"):   # each region casts only its own device type's tensors
        xd = x.to(dev)
        with cltorch.autocast(dev, dtype=cltorch.bfloat16):
            assert (xd @ xd).dtype is cltorch.bfloat16
            assert (xd.to("cl" if dev == "cpu" else "cpu") @ x.to("cl" if dev == "cpu" else "cpu")).dtype \
                is cltorch.float32
    with pytest.raises(ValueError, match="device_type"):
        cltorch.autocast(3)
    with pytest.raises(RuntimeError, match="unsupported autocast device_type"):
        cltorch.autocast("tpu")
    assert cltorch.amp.is_autocast_available("cl") is True

    @cltorch.amp.autocast("cl", enabled=False)
    def f(a):
        return a + 1
    assert f(x).tolist() == [[2.0, 2.0], [2.0, 2.0]]


def test_custom_fwd_bwd_in_function():
    class Square(cltorch.autograd.Function):
        @staticmethod
        @cltorch.amp.custom_fwd(device_type="cl", cast_inputs=cltorch.float32)
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        @cltorch.amp.custom_bwd(device_type="cl")
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return 2 * a * g

    a = cltorch.tensor([1.0, -3.0], requires_grad=True)
    Square.apply(a).sum().backward()
    assert a.grad.tolist() == [2.0, -6.0]
    with pytest.warns(FutureWarning):
        dec = cltorch.cuda.amp.custom_fwd
        dec(lambda ctx, v: v)
    with pytest.raises(ValueError):
        cltorch.amp.custom_fwd(lambda ctx: 0, device_type=None)
