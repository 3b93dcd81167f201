"""Memory formats of conv / pooling / batch_norm outputs and gradients for channels_last inputs, against torch.

PyTorch returns a channels_last (channels_last_3d) output from a convolution whose input or weight is in that
format, and from pooling and batch_norm of a channels_last input; a leaf's .grad keeps the leaf's format. Each
case runs the same float64 values through torch and cltorch and compares output strides, values, and the
leaves' gradient values and strides."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import cltorch
import cltorch.nn.functional as CF

DEV = "cl"
CL, CL3 = torch.channels_last, torch.channels_last_3d


def _fmt(name, lib):
    return getattr(lib, name)


def _pair(shape, seed, fmt=None):
    """(torch leaf, cltorch leaf) with the same float64 values, in memory format ``fmt`` (a name) or contiguous."""
    v = np.random.default_rng(seed).standard_normal(shape)
    t = torch.from_numpy(v)
    c = cltorch.from_numpy(v).to(DEV)
    if fmt is not None:
        t = t.to(memory_format=_fmt(fmt, torch))
        c = c.to(memory_format=_fmt(fmt, cltorch))
    return t.requires_grad_(), c.requires_grad_()


def _same(tc, cc, what):
    """Equal values, and equal strides; for a gradient (``what`` ends in "grad") equal strides of the dims of size
    above 1 (the others address nothing: autograd's views of the lifted tensors may set them otherwise)."""
    ct, cs = tuple(tc.stride()), tuple(cc.stride())
    if what.endswith("grad"):
        ct, cs = [tuple(s for s, n in zip(st, tc.shape) if n > 1) for st in (ct, cs)]
    assert cs == ct, (what, cc.stride(), tc.stride())
    for fmt in ("contiguous_format", "channels_last", "channels_last_3d"):
        assert cc.is_contiguous(memory_format=_fmt(fmt, cltorch)) == tc.is_contiguous(memory_format=_fmt(fmt, torch))
    np.testing.assert_allclose(cc.detach().cpu().numpy(), tc.detach().numpy(), rtol=1e-10, atol=1e-10,
                               err_msg=what)


def _backward(yt, yc, seed):
    g = np.random.default_rng(seed).standard_normal(tuple(yt.shape))
    yt.backward(torch.from_numpy(g))
    yc.backward(cltorch.from_numpy(g).to(DEV))


CONV_CASES = [  # (x shape, w shape, kwargs)
    ((2, 4, 7, 6), (8, 4, 3, 3), dict(padding=1)),
    ((2, 4, 7, 6), (8, 4, 3, 3), dict(stride=2)),
    ((2, 4, 7, 6), (4, 1, 3, 3), dict(groups=4, padding=1)),       # depthwise
    ((2, 4, 7, 6), (8, 4, 1, 1), dict()),                          # pointwise
    ((2, 6, 5, 5), (6, 3, 3, 2), dict(groups=2, dilation=(1, 2))),
]


@pytest.mark.parametrize("case", range(len(CONV_CASES)))
@pytest.mark.parametrize("xf,wf", [("channels_last", None), (None, "channels_last"),
                                   ("channels_last", "channels_last"), (None, None)])
def test_conv2d_formats(case, xf, wf):
    xs, ws, kw = CONV_CASES[case]
    xt, xc = _pair(xs, 1, xf)
    wt, wc = _pair(ws, 2, wf)
    bt, bc = _pair((ws[0],), 3)
    yt, yc = TF.conv2d(xt, wt, bt, **kw), CF.conv2d(xc, wc, bc, **kw)
    _same(yt, yc, "out")
    assert yc.is_contiguous(memory_format=cltorch.channels_last) == yt.is_contiguous(memory_format=CL)
    _backward(yt, yc, 4)
    _same(xt.grad, xc.grad, "x.grad")
    _same(wt.grad, wc.grad, "w.grad")
    _same(bt.grad, bc.grad, "b.grad")


@pytest.mark.parametrize("xf,wf", [("channels_last", None), (None, "channels_last"), (None, None)])
def test_conv_transpose2d_formats(xf, wf):
    xt, xc = _pair((2, 4, 5, 6), 5, xf)
    wt, wc = _pair((4, 3, 3, 3), 6, wf)
    kw = dict(stride=2, padding=1, output_padding=1)
    yt, yc = TF.conv_transpose2d(xt, wt, **kw), CF.conv_transpose2d(xc, wc, **kw)
    _same(yt, yc, "out")
    _backward(yt, yc, 7)
    _same(xt.grad, xc.grad, "x.grad")
    _same(wt.grad, wc.grad, "w.grad")


def test_conv3d_channels_last_3d_and_conv1d_unbatched():
    xt, xc = _pair((2, 3, 4, 5, 4), 8, "channels_last_3d")
    wt, wc = _pair((4, 3, 2, 3, 2), 9)
    yt, yc = TF.conv3d(xt, wt, padding=1), CF.conv3d(xc, wc, padding=1)
    _same(yt, yc, "conv3d out")
    _backward(yt, yc, 10)
    _same(xt.grad, xc.grad, "conv3d x.grad")
    _same(wt.grad, wc.grad, "conv3d w.grad")
    # unbatched (C, H, W) and conv1d: no channels_last for 3-d tensors; outputs contiguous as torch's
    xt, xc = _pair((4, 6, 6), 11)
    wt, wc = _pair((8, 4, 3, 3), 12, "channels_last")
    _same(TF.conv2d(xt, wt), CF.conv2d(xc, wc), "unbatched")
    xt, xc = _pair((2, 4, 9), 13)
    wt, wc = _pair((5, 4, 3), 14)
    _same(TF.conv1d(xt, wt), CF.conv1d(xc, wc), "conv1d")


POOLS = [
    ("max_pool2d", dict(kernel_size=2)),
    ("max_pool2d", dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ("avg_pool2d", dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)),
    ("adaptive_avg_pool2d", dict(output_size=(3, 2))),
    ("adaptive_avg_pool2d", dict(output_size=1)),
    ("adaptive_max_pool2d", dict(output_size=3)),
]


@pytest.mark.parametrize("i", range(len(POOLS)))
@pytest.mark.parametrize("xf", ["channels_last", None])
def test_pool_formats(i, xf):
    name, kw = POOLS[i]
    xt, xc = _pair((2, 5, 7, 6), 20 + i, xf)
    yt, yc = getattr(TF, name)(xt, **kw), getattr(CF, name)(xc, **kw)
    _same(yt, yc, name)
    _backward(yt, yc, 30 + i)
    _same(xt.grad, xc.grad, name + " x.grad")
    if "max" in name:
        it = getattr(TF, name)(xt, return_indices=True, **kw)[1]
        ic = getattr(CF, name)(xc, return_indices=True, **kw)[1]
        assert tuple(ic.stride()) == tuple(it.stride())
        np.testing.assert_array_equal(ic.cpu().numpy(), it.numpy())


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("xf", ["channels_last", None])
def test_batch_norm_output_format(training, xf):
    xt, xc = _pair((3, 4, 5, 6), 40, xf)
    wt, wc = _pair((4,), 41)
    bt, bc = _pair((4,), 42)
    rm = np.random.default_rng(43).standard_normal(4)
    rv = np.random.default_rng(44).uniform(0.5, 2.0, 4)
    rmt, rvt = torch.from_numpy(rm.copy()), torch.from_numpy(rv.copy())
    rmc, rvc = cltorch.from_numpy(rm.copy()).to(DEV), cltorch.from_numpy(rv.copy()).to(DEV)
    yt = TF.batch_norm(xt, rmt, rvt, wt, bt, training=training)
    yc = CF.batch_norm(xc, rmc, rvc, wc, bc, training=training)
    _same(yt, yc, "batch_norm out")
    np.testing.assert_allclose(rmc.cpu().numpy(), rmt.numpy(), rtol=1e-10)
    _backward(yt, yc, 45)
    # The input gradient's values (its format is left contiguous here: see the README).
    np.testing.assert_allclose(xc.grad.cpu().numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(wc.grad.cpu().numpy(), wt.grad.numpy(), rtol=1e-9, atol=1e-10)


def test_channels_last_module_chain():
    """Conv2d -> BatchNorm2d -> MaxPool2d -> Conv2d of a channels_last model and input: every stage's output and
    each weight's .grad are channels_last as torch's, and the values agree."""
    tm = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.MaxPool2d(2),
                             torch.nn.Conv2d(8, 4, 3)).double()
    cm = cltorch.nn.Sequential(cltorch.nn.Conv2d(3, 8, 3, padding=1), cltorch.nn.BatchNorm2d(8),
                               cltorch.nn.MaxPool2d(2), cltorch.nn.Conv2d(8, 4, 3)).double().to(DEV)
    cm.load_state_dict({k: cltorch.from_numpy(v.numpy()) for k, v in tm.state_dict().items()})
    tm = tm.to(memory_format=CL)
    cm = cm.to(memory_format=cltorch.channels_last)
    assert cm[0].weight.is_contiguous(memory_format=cltorch.channels_last)
    xt, xc = _pair((2, 3, 10, 10), 50, "channels_last")
    at, ac = xt, xc
    for i in range(4):
        at, ac = tm[i](at), cm[i](ac)
        _same(at, ac, f"stage {i}")
    _backward(at, ac, 51)
    for (n, pt), (_, pc) in zip(tm.named_parameters(), cm.named_parameters()):
        assert tuple(pc.grad.stride()) == tuple(pt.grad.stride()), n
        np.testing.assert_allclose(pc.grad.cpu().numpy(), pt.grad.numpy(), rtol=1e-8, atol=1e-10, err_msg=n)
    _same(xt.grad, xc.grad, "x.grad")
