"""Accuracy of the fused norm kernels' long row sums (batch_norm over N * HW terms, layer_norm over wide rows):
the outputs and input gradients must be as close to a float64 reference as PyTorch's float32 ones are (within 4x
their distance). One sequential float32 sum over 16,384 terms was ~20x further off than torch's."""
import numpy as np
import pytest

import cltorch
import cltorch.nn.functional as F

torch = pytest.importorskip("torch")

DEVICES = ["cpu", "cl:0"]


def _dist(a, ref):
    return float(np.abs(np.asarray(a, np.float64) - ref).max() / np.abs(ref).max())


def _against_torch(fn_ours, fn_torch, xn, gn, device):
    """(ours, torch f32) distances of the output and the input gradient from torch float64."""
    out = {}
    for name, lib, dt in (("ours", cltorch, None), ("t32", torch, torch.float32), ("t64", torch, torch.float64)):
        if lib is cltorch:
            x = cltorch.from_numpy(xn).to(device).requires_grad_()
            y = fn_ours(x)
            y.backward(cltorch.from_numpy(gn).to(device))
            out[name] = (y.detach().cpu().numpy().astype(np.float64), x.grad.cpu().numpy().astype(np.float64))
        else:
            x = torch.from_numpy(xn).to(dt).requires_grad_()
            y = fn_torch(x)
            y.backward(torch.from_numpy(gn).to(dt))
            out[name] = (y.detach().double().numpy(), x.grad.double().numpy())
    return [(_dist(out["ours"][i], out["t64"][i]), _dist(out["t32"][i], out["t64"][i])) for i in range(2)]


@pytest.mark.parametrize("device", DEVICES)
def test_batch_norm_train_long_rows(device):
    rng = np.random.default_rng(0)
    xn = (3.0 + 2.0 * rng.standard_normal((16, 4, 32, 32))).astype(np.float32)   # an offset mean, as after ReLU6
    gn = rng.standard_normal(xn.shape).astype(np.float32)
    w = rng.standard_normal(4).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)

    def ours(x):
        return F.batch_norm(x, None, None, cltorch.from_numpy(w).to(device), cltorch.from_numpy(b).to(device),
                            training=True)

    def theirs(x):
        return torch.nn.functional.batch_norm(x, None, None, torch.from_numpy(w).to(x.dtype),
                                              torch.from_numpy(b).to(x.dtype), training=True)
    for what, (d_ours, d_t32) in zip(("output", "input gradient"), _against_torch(ours, theirs, xn, gn, device)):
        assert d_ours <= 4 * d_t32 + 2e-7, f"batch_norm {what}: ours {d_ours:.3g} from float64, torch {d_t32:.3g}"


@pytest.mark.parametrize("device", DEVICES)
def test_layer_norm_wide_rows(device):
    rng = np.random.default_rng(1)
    xn = (5.0 + rng.standard_normal((3, 8192))).astype(np.float32)
    gn = rng.standard_normal(xn.shape).astype(np.float32)
    for what, (d_ours, d_t32) in zip(("output", "input gradient"), _against_torch(
            lambda x: F.layer_norm(x, (8192,)), lambda x: torch.nn.functional.layer_norm(x, (8192,)), xn, gn,
            device)):
        assert d_ours <= 4 * d_t32 + 2e-7, f"layer_norm {what}: ours {d_ours:.3g} from float64, torch {d_t32:.3g}"
