"""Which tensors an op's backward keeps, seen through PyTorch's saved-tensor version check: an in-place write to
a unary op's output or input after the op may raise only where PyTorch 2.13 raises too (cltorch never refuses a
backward that PyTorch runs), and where cltorch runs it, its gradient is the true one (torch's, computed with the
write done out of place). cltorch may accept a few writes torch refuses (``relu`` reads its input here, torch's
its output): those gradients are checked the same way. (Found by the session-7 fresh-user review: every unary op saved
both its input and its output, so ``y = x.neg(); y.add_(1); y.sum().backward()`` raised.)"""
import numpy as np
import pytest

import cltorch
import cltorch.nn.functional as F
from conftest import assert_close, to_np

torch = pytest.importorskip("torch")

UNARY = ["neg", "abs", "sign", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh",
         "atanh", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "sigmoid",
         "relu", "erf", "erfc", "deg2rad", "rad2deg", "lgamma", "digamma"]
ACTIVATIONS = ["gelu", "silu", "mish", "logsigmoid", "softplus", "elu", "hardswish", "hardsigmoid", "relu6"]

X = np.array([0.3, 0.5, 0.7, 0.2], np.float32)


def _run(lib, fn, write):
    """Gradient of sum(fn(h)) for h = x * 1 (a non-leaf), with ``write`` (x1.5) applied in place after fn, or
    out of place for the reference ("output_ref": the output scaled; "input_ref": nothing that y reads); or
    "raises" when backward refuses."""
    x = lib.tensor(X.copy(), requires_grad=True)
    h = x * 1
    y = fn(lib, h)
    if write == "output":
        y.mul_(1.5)
    elif write == "input":
        h.mul_(1.5)
    elif write == "output_ref":
        y = y * 1.5
    try:
        y.sum().backward()
    except RuntimeError as e:
        assert "modified by an inplace operation" in str(e), str(e)
        return "raises"
    return to_np(x.grad) if lib is cltorch else x.grad.numpy()


def _fn(name):
    if name in UNARY:
        return lambda lib, h: getattr(h, name)()
    return lambda lib, h: getattr(F if lib is cltorch else torch.nn.functional, name)(h)


@pytest.mark.parametrize("write", ["output", "input"])
@pytest.mark.parametrize("name", UNARY + ACTIVATIONS)
def test_inplace_after_op_matches_torch(name, write):
    theirs = _run(torch, _fn(name), write)
    ours = _run(cltorch, _fn(name), write)
    if isinstance(ours, str):
        assert isinstance(theirs, str), f"{name}: cltorch refuses a backward after its {write} was written in " \
                                        "place, torch runs it"
        return
    ref = _run(torch, _fn(name), write + "_ref")
    assert_close(ours, ref, rtol=1e-5, atol=1e-6)


def test_reviewers_case():
    x = cltorch.tensor([.3, .5], requires_grad=True)
    y = x.neg()
    y.add_(1)
    y.sum().backward()
    assert to_np(x.grad).tolist() == [-1.0, -1.0]


def test_derivative_reads_sees_every_name_form():
    """Which saved tensors a derivative reads, across bytecode forms (3.13 loads two locals in one instruction;
    a nested function reads through a cell): a missed read would save None and break the backward."""
    from cltorch.ops.pointwise import _derivative_reads
    assert _derivative_reads(lambda a, o, g: g * o, None) == (False, True)
    assert _derivative_reads(lambda a, o, g: o * a * g, None) == (True, True)
    assert _derivative_reads(lambda a, o, g: -g, None) == (False, False)
    assert _derivative_reads(lambda a, o, g: g, "x0 * x2") == (False, True)
    assert _derivative_reads(lambda a, o, g: g, "x0 * cos(x1)") == (True, False)

    def nested(a, o, g):
        return (lambda: g * a)()
    assert _derivative_reads(nested, None) == (True, False)
