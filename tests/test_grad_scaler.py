"""GradScaler against torch's (torch.amp.GradScaler("cpu")): the same gradients, some with inf or NaN, give the
same scales, skipped steps, growth tracker, parameters and state_dict; unscale_ rules and errors as torch's."""
import math

import numpy as np
import pytest
import torch as T

import cltorch


def _run(lib, dev, grads, **kw):
    p = lib.nn.Parameter(lib.tensor([1.0, -2.0, 3.0], device=dev) if lib is cltorch else lib.tensor([1.0, -2.0, 3.0]))
    opt = lib.optim.SGD([p], lr=0.1)
    sc = lib.amp.GradScaler(dev, **kw)
    scales, params, trackers = [], [], []
    for i, g in enumerate(grads):
        opt.zero_grad()
        loss = (p * lib.tensor(g, device=dev) if lib is cltorch else p * lib.tensor(g)).sum()
        sc.scale(loss).backward()
        if i % 2:
            sc.unscale_(opt)          # explicit unscale (gradient clipping would go here)
            params.append(p.grad.detach().clone().tolist())
        sc.step(opt)
        sc.update()
        scales.append(sc.get_scale())
        trackers.append(sc._get_growth_tracker())
        params.append(p.detach().clone().tolist())
    return scales, params, trackers, sc.state_dict()


GRADS = [[1.0, 2.0, 3.0], [0.5, math.inf, 1.0], [1.0, 1.0, 1.0], [math.nan, 0.0, 0.0], [2.0, -1.0, 0.5],
         [1.0, 0.0, -1.0], [0.25, 0.5, 0.75], [1.0, 2.0, -3.0], [3.0, 1e38, 1.0]]


@pytest.mark.parametrize("kw", [{}, dict(init_scale=8.0, growth_factor=4.0, backoff_factor=0.25, growth_interval=2),
                                dict(init_scale=2.0 ** 100, growth_interval=3)])
def test_matches_torch(kw):
    ours = _run(cltorch, "cpu", GRADS, **kw)
    theirs = _run(T, "cpu", GRADS, **kw)
    assert ours[0] == theirs[0]                  # scales after each update
    assert ours[2] == theirs[2]                  # growth tracker
    np.testing.assert_allclose(np.array(ours[1]), np.array(theirs[1]), rtol=1e-6)
    assert ours[3] == theirs[3]


def test_state_dict_round_trip_and_errors():
    sc = cltorch.amp.GradScaler("cpu", init_scale=4.0, growth_interval=5)
    ts = T.amp.GradScaler("cpu", init_scale=4.0, growth_interval=5)
    assert sc.state_dict() == ts.state_dict()
    other = cltorch.amp.GradScaler("cpu")
    other.load_state_dict(sc.state_dict())
    assert other.get_scale() == 4.0 and other.get_growth_interval() == 5
    with pytest.raises(RuntimeError, match="empty"):
        other.load_state_dict({})
    assert cltorch.amp.GradScaler("cpu", enabled=False).state_dict() == {}
    p = cltorch.nn.Parameter(cltorch.ones(2))
    opt = cltorch.optim.SGD([p], lr=1.0)
    with pytest.raises(AssertionError, match="_scale is None"):
        sc.unscale_(opt)
    sc.scale(p.sum()).backward()
    sc.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called"):
        sc.unscale_(opt)
    sc.step(opt)
    with pytest.raises(RuntimeError, match="after step"):
        sc.unscale_(opt)
    sc.update()
    # float16 gradients cannot be unscaled (torch: "Attempting to unscale FP16 gradients.")
    h = cltorch.nn.Parameter(cltorch.ones(2, dtype=cltorch.float16))
    opt16 = cltorch.optim.SGD([h], lr=1.0)
    sc.scale(h.float().sum()).backward()
    with pytest.raises(ValueError, match="FP16"):
        sc.unscale_(opt16)


def test_scale_nested_outputs_and_cpu_amp_alias():
    sc = cltorch.cpu.amp.GradScaler(init_scale=2.0)
    a, b = cltorch.ones(2), cltorch.full((3,), 2.0)
    out = sc.scale([a, (b, a)])
    assert out[0].tolist() == [2.0, 2.0] and out[1][0].tolist() == [4.0, 4.0, 4.0]
