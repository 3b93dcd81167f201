"""bfloat16 as a storage dtype, complex dtype names, memory formats and Tensor attributes, against torch."""
import pickle

import numpy as np
import pytest

import cltorch

torch = pytest.importorskip("torch")


def _bits_torch(vals):
    """torch's bfloat16 bit patterns of float32 values (scalar conversion, round to nearest even)."""
    return torch.tensor(vals, dtype=torch.float32).bfloat16().view(torch.int16).numpy().view(np.uint16)


def _bits(t):
    return t.cpu()._host_view().view(np.uint16).reshape(-1)


# halfway cases both ways, subnormals, overflow to inf, signed zero, large values
F32 = np.array([1.0, 1.00390625, 1.01171875, 1.0039063, -2.5, 0.0, -0.0, 3.0e38, 3.4e38, 1e-40, -1e-39, 65504.0,
                float("inf"), -float("inf"), 1.0 / 3.0, -7.123456, 2.0 ** -130], dtype=np.float32)


def test_bfloat16_round_trip_bits(device):
    x = cltorch.tensor(F32, device=device)
    b = x.to(cltorch.bfloat16)
    assert b.dtype is cltorch.bfloat16 and b.element_size() == 2
    np.testing.assert_array_equal(_bits(b), _bits_torch(F32))
    # exact on the way out
    ref = torch.tensor(F32).bfloat16().float().numpy()
    np.testing.assert_array_equal(b.float().cpu().numpy(), ref)
    np.testing.assert_array_equal(x.bfloat16().double().cpu().numpy(), ref.astype(np.float64))
    nan = cltorch.tensor([float("nan")], device=device).bfloat16()
    assert np.isnan(nan.float().item())


def test_bfloat16_factories(device):
    bf = cltorch.bfloat16
    vals = [1.00390625, -3.3, 100.7]
    t = cltorch.tensor(vals, dtype=bf, device=device)
    np.testing.assert_array_equal(_bits(t), torch.tensor(vals, dtype=torch.bfloat16).view(torch.int16).numpy()
                                  .view(np.uint16))
    assert cltorch.zeros(2, 3, dtype=bf, device=device).float().tolist() == [[0.0] * 3] * 2
    assert cltorch.ones(4, dtype=bf, device=device).tolist() == [1.0] * 4
    f = cltorch.full((2,), 1.01171875, dtype=bf, device=device)
    assert f.tolist() == torch.full((2,), 1.01171875, dtype=torch.bfloat16).tolist()
    assert cltorch.empty(3, dtype=bf, device=device).shape == (3,)
    assert cltorch.tensor(2.5, dtype=bf).item() == 2.5
    # a double headed for bfloat16 rounds through float32, as torch
    v = 1 + 2 ** -8 + 2 ** -30
    assert cltorch.tensor([v], dtype=bf, device=device).item() == torch.tensor([v], dtype=torch.bfloat16).item()
    assert cltorch.tensor([v], dtype=cltorch.float64, device=device).bfloat16().item() == \
        torch.tensor([v], dtype=torch.float64).bfloat16().item()


def test_bfloat16_data_movement(device):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 7
    t = cltorch.tensor(a, device=device).bfloat16()
    r = torch.tensor(a).bfloat16()
    assert t.transpose(0, 2).contiguous().float().tolist() == r.transpose(0, 2).contiguous().float().tolist()
    assert t[1, :, 1:3].float().tolist() == r[1, :, 1:3].float().tolist()
    assert cltorch.cat([t, t[:1]], 0).float().tolist() == torch.cat([r, r[:1]], 0).float().tolist()
    d = cltorch.zeros(2, 3, 4, dtype=cltorch.bfloat16, device=device)
    d.copy_(cltorch.tensor(a, device=device))           # float32 -> bfloat16 in copy_
    assert d.float().tolist() == r.float().tolist()
    d2 = cltorch.zeros(2, 3, 4, device=device)
    d2.copy_(t)                                          # bfloat16 -> float32
    assert d2.tolist() == r.float().tolist()
    assert t.cpu().to(device).float().tolist() == r.float().tolist()


def test_bfloat16_pointwise_computes_in_float(device):
    a = np.array([1.5, -2.25, 3.1, 100.3, 1e-3], np.float32)
    b = np.array([0.7, 2.0, -1.3, 0.01, 3.0], np.float32)
    ta, tb = cltorch.tensor(a, device=device).bfloat16(), cltorch.tensor(b, device=device).bfloat16()
    ra, rb = torch.tensor(a).bfloat16(), torch.tensor(b).bfloat16()
    for got, ref in ((ta + tb, ra + rb), (ta * tb, ra * rb), (ta / tb, ra / rb), (ta - 1, ra - 1),
                     (ta.exp(), ra.exp()), (ta.relu(), ra.relu())):
        assert got.dtype is cltorch.bfloat16
        np.testing.assert_allclose(got.float().cpu().numpy(), ref.float().numpy(), rtol=2 ** -7)
    # single ops round once: exact against torch
    assert (ta + tb).float().tolist() == (ra + rb).float().tolist()
    assert (ta * tb).float().tolist() == (ra * rb).float().tolist()
    # promotion (float16 needs cl_khr_fp16, which PoCL lacks: promote_types covers it below)
    assert (ta + cltorch.tensor(b, device=device)).dtype is cltorch.float32
    assert (ta + cltorch.ones(5, dtype=cltorch.int64, device=device)).dtype is cltorch.bfloat16
    assert (ta > 1).tolist() == (ra > 1).tolist()


def test_bfloat16_reductions_and_numpy(device):
    t = cltorch.tensor([1.0, 2.0, 3.0, 0.0078125], dtype=cltorch.bfloat16, device=device)
    s = t.sum()            # computed in float32 on a widened copy, rounded to bfloat16 as torch does
    assert s.dtype is cltorch.bfloat16 and s.item() == 6.0
    with pytest.raises(TypeError, match="Got unsupported ScalarType BFloat16"):
        t.cpu().numpy()
    with pytest.raises(TypeError, match="BFloat16"):
        np.asarray(t.cpu())


def test_bfloat16_printing_and_meta():
    t = cltorch.tensor([1.5, 2.0], dtype=cltorch.bfloat16)
    assert repr(t) == "tensor([1.5000, 2.0000], dtype=cltorch.bfloat16)"
    assert repr(torch.tensor([1.5, 2.0], dtype=torch.bfloat16)) == "tensor([1.5000, 2.0000], dtype=torch.bfloat16)"
    assert t.type() == "torch.BFloat16Tensor" == torch.tensor([1.5], dtype=torch.bfloat16).type()
    assert t.is_floating_point() and cltorch.bfloat16.is_floating_point and cltorch.bfloat16.itemsize == 2
    assert pickle.loads(pickle.dumps(cltorch.bfloat16)) is cltorch.bfloat16


def test_finfo_and_promotion_match_torch():
    for ours, theirs in ((cltorch.bfloat16, torch.bfloat16), (cltorch.float16, torch.float16),
                         (cltorch.float32, torch.float32), (cltorch.float64, torch.float64)):
        a, b = cltorch.finfo(ours), torch.finfo(theirs)
        for k in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
            assert getattr(a, k) == getattr(b, k), (ours, k)
    assert cltorch.finfo(cltorch.complex64).eps == torch.finfo(torch.complex64).eps
    pairs = [("bfloat16", "float16"), ("bfloat16", "float32"), ("bfloat16", "float64"), ("bfloat16", "int64"),
             ("bfloat16", "uint8"), ("bfloat16", "bool"), ("bfloat16", "bfloat16"), ("float16", "int8")]
    for x, y in pairs:
        assert cltorch.promote_types(getattr(cltorch, x), getattr(cltorch, y)).name == \
            str(torch.promote_types(getattr(torch, x), getattr(torch, y))).split(".")[1]


def test_complex_names_and_predicates(device):
    t = cltorch.ones(2, device=device)
    for name in ("complex64", "complex128", "complex32", "cfloat", "cdouble", "chalf"):
        ours, theirs = getattr(cltorch, name), getattr(torch, name)
        assert ours.is_complex and not ours.is_floating_point
        assert ours.itemsize == theirs.itemsize
        assert ours.to_real().name == str(theirs.to_real()).split(".")[1]
    assert cltorch.float32.to_complex() is cltorch.complex64
    for d in ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"):
        dt = getattr(cltorch, d)
        assert dt.is_complex is False is getattr(torch, d).is_complex
        if dt is cltorch.float16:
            continue                  # float16 storage needs cl_khr_fp16 (PoCL lacks it)
        x = cltorch.zeros(2, dtype=dt, device=device)
        assert cltorch.is_complex(x) is False and x.is_complex() is False
    with pytest.raises(TypeError):
        cltorch.is_complex(3)
    # complex64/complex128 are storage dtypes (tests/test_complex.py); complex32 is a name only
    assert cltorch.zeros(2, dtype=cltorch.complex64, device=device).is_complex()
    assert t.to(cltorch.cfloat).dtype is cltorch.complex64
    assert cltorch.from_numpy(np.zeros(2, np.complex64)).dtype is cltorch.complex64
    for make in (lambda: cltorch.zeros(2, dtype=cltorch.complex32, device=device), lambda: t.to(cltorch.chalf)):
        with pytest.raises(NotImplementedError, match="complex32"):
            make()


SHAPES4 = [(2, 3, 4, 5), (2, 1, 1, 5), (1, 3, 1, 1), (2, 0, 3, 5), (3, 2, 2, 1)]


@pytest.mark.parametrize("shape", SHAPES4)
def test_channels_last_strides_match_torch(device, shape):
    n = int(np.prod(shape))
    a = np.arange(n, dtype=np.float32).reshape(shape)
    ours = cltorch.tensor(a, device=device)
    ref = torch.tensor(a)
    cl, rcl = ours.to(memory_format=cltorch.channels_last), ref.to(memory_format=torch.channels_last)
    assert cl.stride() == rcl.stride()
    assert cl.is_contiguous(memory_format=cltorch.channels_last) == rcl.is_contiguous(
        memory_format=torch.channels_last)
    assert cl.is_contiguous() == rcl.is_contiguous()
    assert ours.contiguous(memory_format=cltorch.channels_last).stride() == \
        ref.contiguous(memory_format=torch.channels_last).stride()
    assert cltorch.empty(*shape, memory_format=cltorch.channels_last, device=device).stride() == \
        torch.empty(*shape, memory_format=torch.channels_last).stride()
    # preserve_format (the default) keeps channels_last through *_like, clone and .to(dtype)
    for f, g in ((lambda t, m: t.clone(), None), (lambda t, m: m.zeros_like(t), None),
                 (lambda t, m: m.empty_like(t), None), (lambda t, m: m.ones_like(t), None),
                 (lambda t, m: m.full_like(t, 2.0), None)):
        assert f(cl, cltorch).stride() == f(rcl, torch).stride()
    assert cl.double().stride() == rcl.double().stride()
    assert cltorch.zeros_like(cl, memory_format=cltorch.contiguous_format).stride() == \
        torch.zeros_like(rcl, memory_format=torch.contiguous_format).stride()
    assert cl.contiguous().stride() == rcl.contiguous().stride()
    # values unchanged; ops compute right on the NHWC strides
    assert cl.tolist() == ref.tolist()
    np.testing.assert_allclose((cl * 2 + ours).cpu().numpy(), (rcl * 2 + ref).numpy())
    np.testing.assert_allclose(cl.sum(dim=1).cpu().numpy(), rcl.sum(dim=1).numpy())


def test_channels_last_3d_and_errors(device):
    x = cltorch.zeros(2, 3, 4, 5, 6, device=device)
    r = torch.zeros(2, 3, 4, 5, 6)
    assert x.contiguous(memory_format=cltorch.channels_last_3d).stride() == \
        r.contiguous(memory_format=torch.channels_last_3d).stride()
    with pytest.raises(RuntimeError, match="rank 4"):
        x.contiguous(memory_format=cltorch.channels_last)
    with pytest.raises(RuntimeError, match="preserve"):
        x.contiguous(memory_format=cltorch.preserve_format)
    assert not cltorch.zeros(2, 3, device=device).is_contiguous(memory_format=cltorch.channels_last)
    assert isinstance(cltorch.channels_last, cltorch.memory_format)
    assert repr(cltorch.channels_last) == "cltorch.channels_last"
    assert pickle.loads(pickle.dumps(cltorch.channels_last)) is cltorch.channels_last


def test_conv_on_channels_last_input(device):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    ours = cltorch.nn.functional.conv2d(cltorch.tensor(x, device=device).to(memory_format=cltorch.channels_last),
                                        cltorch.tensor(w, device=device).to(memory_format=cltorch.channels_last))
    ref = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w))
    np.testing.assert_allclose(ours.cpu().numpy(), ref.numpy(), rtol=1e-4, atol=1e-4)


def test_tensor_attributes(device):
    x = cltorch.zeros(2, device=device)
    r = torch.zeros(2)
    for name in ("is_xpu", "is_mps", "is_meta", "is_quantized", "is_sparse", "is_mkldnn", "is_cuda", "is_nested",
                 "is_sparse_csr", "is_vulkan", "is_ipu", "is_mtia", "is_maia"):
        assert getattr(x, name) is False is getattr(r, name), name
    assert x.is_cpu is (device == "cpu")
    assert x.is_complex() is False


# ------------------------------------------------------------------------------------------------ numpy scalars
NP_DATA = [np.float64(2.5), np.float32(2.5), np.float16(2.5), np.int64(3), np.int32(-3), np.int16(3), np.int8(-3),
           np.uint8(200), np.bool_(True), np.complex64(1 - 2j), np.complex128(1 + 2j), np.array(2.5), np.array(3, np.int8),
           np.array(True), [np.float64(1), np.float64(2)], [np.float32(1), 2.0], [np.int32(1), np.int32(2)],
           [np.int32(1), 2], [np.float16(1), np.float64(2)], [np.int8(1), np.uint8(2)], [np.int64(1), 2.5],
           [[np.float64(1)], [np.float64(2)]], [np.complex64(1), np.float64(1)], [np.bool_(True), np.bool_(False)],
           [[], []]]


@pytest.mark.parametrize("fn", ["tensor", "as_tensor", "asarray"])
def test_numpy_scalars_keep_their_dtype(device, fn):
    """tensor/as_tensor/asarray infer torch's dtype: a numpy scalar (or 0-d array) keeps its own, a sequence
    promotes its items' dtypes (Python numbers count as int64 / the default float dtype)."""
    for v in NP_DATA:
        ref = getattr(torch, fn)(v)
        got = getattr(cltorch, fn)(v, device=device)
        assert str(got.dtype) == str(ref.dtype).replace("torch.", "cltorch."), (v, got.dtype, ref.dtype)
        assert got.device.type == ("cpu" if device == "cpu" else "cl")
        np.testing.assert_array_equal(got.cpu().numpy(), ref.numpy())
    assert cltorch.tensor(np.float64(0.1)).item() == 0.1           # not rounded through float32
    with pytest.raises(TypeError):
        cltorch.tensor(np.str_("a"))


NP_OPERANDS = [np.float64(2.5), np.float32(-1.5), np.float16(0.5), np.int64(3), np.int32(-2), np.int8(5),
               np.uint8(7), np.bool_(True), np.complex128(1 + 2j)]


@pytest.mark.parametrize("dt", ["float32", "float64", "float16", "int32", "int64", "uint8", "bool"])
def test_numpy_scalar_operands_promote_like_torch(device, dt):
    """A numpy scalar operand counts as a Python number of its kind (a "weak" scalar: float32 + np.float64 is
    float32), as torch's argument parser reads it; torch reads np.bool_ as a float (int32 + np.True_ is float32);
    a numpy complex128 is a complex scalar (its imaginary part kept, comparisons by value)."""
    base = np.array([1, 0, 3, 2], dtype=np.float32)
    t = torch.tensor(base).to(getattr(torch, dt))
    c = cltorch.tensor(base, device=device).to(getattr(cltorch, dt))
    for s in NP_OPERANDS:
        if dt == "float16" and isinstance(s, np.complexfloating):
            continue                     # torch gives complex32, which cltorch does not store (README)
        for f in (lambda x: x + s, lambda x: s * x, lambda x: x / s, lambda x: x == s, lambda x: x != s,
                  lambda x: x - s if dt != "bool" else x * s):
            ref, got = f(t), f(c)
            assert str(got.dtype) == str(ref.dtype).replace("torch.", "cltorch."), (dt, s, got.dtype, ref.dtype)
            np.testing.assert_allclose(got.cpu().numpy(), ref.numpy(), rtol=1e-3 if dt == "float16" else 1e-6)
    assert str(cltorch.result_type(c, np.True_)) == str(torch.result_type(t, np.True_)).replace("torch.", "cltorch.")
