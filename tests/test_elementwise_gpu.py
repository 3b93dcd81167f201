"""The contiguous elementwise path's GPU design (``ops/elementwise.py`` ``gpu_layout``,
``cl_kernels/elementwise.cl.mako``).

Plan tests (pure Python, a fake NVIDIA H200: 132 compute units, the shipped nvidia profile): ``a + b`` of 2^26
float32 reads and writes one 16-byte vector per operand and lane, with at least 4 work-groups per compute unit;
16-bit, 64-bit and mixed storage get 16-byte accesses of their widest type; the rendered kernel's inner loop reads
vectors. Value tests run the design on the 'cpu' device (PoCL, or Intel's runtime) under the NVIDIA configuration
(the shipped profile swapped in-process): sizes with whole chunks and a tail, unaligned views (the same layout
element by element), half / bfloat16 storage, bool outputs, Python scalars, builtins, a permuted dense layout, and a
compiled chain that fuses into one kernel of the design; exact operations bitwise against numpy.
tests/test_kernel_configs.py runs the design under every GPU configuration and under Oclgrind.
"""
import contextlib

import ml_dtypes
import numpy as np
import pytest

import cltorch as ct
from cltorch.backend import geometry, program
from cltorch.ops import elementwise as E
from conftest import H200, fake_runtime, gpu_configuration

POCL = dict(name="pthread-x86-64", vendor="GenuineIntel", vendor_id=0x8086, is_cpu=True,
            platform="Portable Computing Language", max_compute_units=2)


# ------------------------------------------------------------------------------------------------ plans
def test_h200_add_reads_16_byte_vectors_and_fills_the_device():
    rt = fake_runtime(H200)
    gvec, epi = E.gpu_layout(rt, ["float", "float", "float"])
    assert gvec * 4 == 16 and epi % gvec == 0 and epi >= 2 * gvec      # float4 accesses, several per lane
    n = 2 ** 26
    gs, ls = geometry.nd(rt, (n + epi - 1) // epi, rt.profile.get_value("elementwise", "local_size"))
    groups = gs[0] // ls[0]
    assert ls[0] % 32 == 0 and ls[0] >= 128, ls                # whole warps
    assert groups >= 4 * 132 and groups * ls[0] * epi >= n, (groups, ls)
    # every storage type gets 16-byte accesses of its widest operand; complex storage goes element by element
    for tys, g in ((["half", "half"], 8), (["bfloat16", "float"], 4), (["double", "float"], 2), (["uchar", "float"], 4),
                   (["uchar", "uchar"], 8), (["long", "long"], 2), (["float2", "float2"], 1)):
        assert E.gpu_layout(rt, tys)[0] == g, tys
    assert E.gpu_layout(fake_runtime(POCL), ["float", "float"]) is None      # CPU profiles keep the CPU design


def test_rendered_inner_loop_reads_and_writes_vectors():
    ops = (("t", "float", "float"), ("t", "float", "float"))
    src = program.render("elementwise.cl.mako", operands=ops, out_type="float", expr="x0 + x1", rank=0, to_bool=False,
                         types=("float",), epi=8, vw=0, run=1, gvec=4)
    body = src[src.index("__kernel"):]
    assert "long e1 = base + (1 * L + l) * 4;" in body                         # lane l's vectors l, l + L
    assert "float4 r0_0 = *(__global const float4*)(in0 + off0 + e0);" in body
    assert "*(__global float4*)(out + out_off + e1) = o;" in body
    assert body.index("r1_1 = ") < body.index("= ew_one(")                      # every load before the arithmetic
    half = program.render("elementwise.cl.mako", operands=(("t", "half", "float"), ("s", "float", "float")),
                          out_type="half", expr="x0 * x1", rank=0, to_bool=False, types=("float", "half"), epi=8, vw=0,
                          run=1, gvec=8)
    assert "vloada_half8(0, in0 + off0 + e0)" in half and "vstorea_half8_rte(o, 0, out + out_off + e0)" in half
    cpu = program.render("elementwise.cl.mako", operands=ops, out_type="float", expr="x0 + x1", rank=0, to_bool=False,
                         types=("float",), epi=16, vw=8, run=1)
    assert "ew_one" not in cpu and "get_local_size" not in cpu                   # the CPU design as it was


# ------------------------------------------------------------------------------------------------ values
def _gvecs():
    """The GPU design's vector widths of the elementwise kernels built so far."""
    return {k[-1] for k in E._kernels if k[4] == 0}


def _dev():
    """The 'cpu' device's OpenCL device as cl:N: its tensors are device storages, so even small exact ops run kernels
    (on 'cpu' they would run in numpy)."""
    from cltorch import backend
    return f"cl:{backend.cpu_index()}"


def _np(t):
    return t.cpu().numpy()


def test_values_under_the_nvidia_configuration():
    rng = np.random.default_rng(0)
    dev = _dev()
    with gpu_configuration(H200):
        # 4101 = two whole chunks of 256 x 8 and a tail; 2047: the tail alone; 1 element
        for n in (4101, 2047, 1):
            a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
            x, y = ct.from_numpy(a).to(dev), ct.from_numpy(b).to(dev)
            np.testing.assert_array_equal(_np(x + y), a + b)
            np.testing.assert_array_equal(_np(x * 2.5 - y / 3.0), a * np.float32(2.5) - b / np.float32(3.0))
            np.testing.assert_array_equal(_np(x < y), a < b)
            np.testing.assert_array_equal(_np(x[1:] * y[1:]), a[1:] * b[1:])        # unaligned: element by element
            h = (a * 4).astype(np.float16)
            np.testing.assert_array_equal(_np(ct.from_numpy(h).to(dev) * 0.5),
                                          (h.astype(np.float32) * 0.5).astype(np.float16))
            np.testing.assert_array_equal(_np(x.to(ct.float16)), a.astype(np.float16))
            bf = x.to(ct.bfloat16)
            ref = a.astype(ml_dtypes.bfloat16).astype(np.float32)
            np.testing.assert_array_equal(_np((bf + bf).float()),
                                          (ref * 2).astype(ml_dtypes.bfloat16).astype(np.float32))
            i = rng.integers(-1000, 1000, n)
            np.testing.assert_array_equal(_np(ct.from_numpy(i).to(dev) * 3 + 1), i * 3 + 1)
            np.testing.assert_allclose(_np(ct.tanh(x)), np.tanh(a), rtol=2e-6, atol=1e-7)
            d = a.astype(np.float64)
            np.testing.assert_array_equal(_np(ct.from_numpy(d).to(dev) + x), d + a)
        assert {1, 2, 4, 8} <= _gvecs(), _gvecs()       # element by element, double2, float4 and half8/bfloat16 x 8


def test_dense_permuted_operands_take_the_contiguous_path():
    """Operands that are all dense in the output's (permuted) order run as one contiguous range, on either design."""
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((33, 70)).astype(np.float32), rng.standard_normal((33, 70)).astype(np.float32)
    dev = _dev()
    for ctx in (contextlib.nullcontext(), gpu_configuration(H200)):
        with ctx:
            x, y = ct.from_numpy(a.T.copy()).to(dev).t(), ct.from_numpy(b.T.copy()).to(dev).t()   # transposed, dense
            E._kernels.clear()
            x.add_(y)
            assert E._kernels and all(k[4] == 0 for k in E._kernels), list(E._kernels)   # rank 0: contiguous
            np.testing.assert_array_equal(_np(x), a + b)


def test_compiled_chain_fuses_into_the_gpu_design():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal(3000).astype(np.float32), rng.standard_normal(3000).astype(np.float32)
    with gpu_configuration(H200):
        dev = _dev()
        x, y = ct.from_numpy(a).to(dev), ct.from_numpy(b).to(dev)
        f = lambda p, q: (p * q + 1.0) * p - q                          # noqa: E731
        with ct.no_grad():
            eager = f(x, y).cpu().numpy()
            cf = ct.compile(f)
            for _ in range(3):
                got = cf(x, y).cpu().numpy()
        g = cf.graphs()[0]
        ks = [e[2]._cltorch_src[2] for e in g.trace.entries if e[0] == "k"]
        assert len(ks) == 1 and ks[0].get("gvec") == 4, ks                    # one kernel, float4 accesses
        np.testing.assert_array_equal(got, eager)
        np.testing.assert_array_equal(eager, (a * b + np.float32(1.0)) * a - b)


@pytest.mark.parametrize("n", [5, 2048 * 2 + 3])
def test_gpu_design_matches_the_cpu_design_bitwise(n):
    """Exact ops and casts: the GPU design's bits are the CPU design's on the same device."""
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)

    def run():
        x, y = ct.from_numpy(a).to(dev), ct.from_numpy(b).to(dev)
        return [_np(x * y + x / y), _np((x - 0.1).to(ct.float16)), _np(x >= y),
                _np((x.to(ct.bfloat16) * y.to(ct.bfloat16)).float())]
    dev = _dev()
    ref = run()
    with gpu_configuration(H200):
        got = run()
        assert 4 in _gvecs() and 8 in _gvecs()
    for r, g in zip(ref, got):
        assert r.dtype == g.dtype and np.array_equal(r.view(np.uint8), g.view(np.uint8))
