"""Launch geometry (cltorch/backend/geometry.py): the limits a launch must fit (device, profile [limits], kernel),
the fitting of local sizes, launches in parts, template-sized kernels, and the errors: a launch outside the
limits raises LaunchError naming the kernel, its sizes and the limit; a launch the driver refuses is wrapped.

Pure-Python tests use a fake NVIDIA H200 (device_info_from_props) with the shipped profiles; the rest run real
kernels on the 'cpu' device, some with a vendor's limits emulated in this process (the runtime's limits swapped
for the vendor profile's), which is what the issue's MobileNetV2 user script met on an H200: global pooling of
N x C > 64 planes launched 128 work-items in dimension 2, where NVIDIA allows 64.
"""
import contextlib
import warnings

import numpy as np
import pytest
import torch

import cltorch as ct
from cltorch.backend import geometry as G
from cltorch.backend import runtime, cpu_index
from conftest import H200, fake_runtime, shipped_profile

VENDORS = {
    "nvidia": H200,
    "amd": dict(name="gfx1030", vendor="Advanced Micro Devices, Inc.", vendor_id=0x1002, is_cpu=False,
                platform="AMD Accelerated Parallel Processing", max_work_group_size=1024, local_mem_size=65536,
                max_work_item_sizes=(1024, 1024, 1024)),
    "intel-gpu": dict(name="Intel(R) Iris(R) Xe Graphics", vendor="Intel(R) Corporation", vendor_id=0x8086,
                      is_cpu=False, platform="Intel(R) OpenCL Graphics", max_work_group_size=512,
                      local_mem_size=65536, max_work_item_sizes=(512, 512, 512)),
    "apple": dict(name="Apple M2", vendor="Apple", vendor_id=0x1027F00, is_cpu=False, platform="Apple",
                  max_work_group_size=256, local_mem_size=32768, max_work_item_sizes=(256, 256, 256)),
}


class FakeKernel:
    """A kernel as geometry sees it: a name and (CL_KERNEL_WORK_GROUP_SIZE, static local memory)."""

    def __init__(self, wg=1 << 30, local=0, name="fake_kernel"):
        self._cltorch_wg = (wg, local)
        self.function_name = name


# ------------------------------------------------------------------------------------------------- limits
def test_vendor_limits_from_profiles():
    lim = G.limits(fake_runtime(H200))
    assert lim.max_work_group_size == 1024 and lim.max_work_item_sizes == (1024, 1024, 64)
    assert lim.local_mem_size == 49152 and lim.max_groups[1:] == (65535, 65535) and lim.max_groups[0] >= 2 ** 31 - 1
    assert "nvidia.toml" in lim.why("max_groups")
    assert G.limits(fake_runtime(VENDORS["intel-gpu"])).max_work_group_size == 512
    a = G.limits(fake_runtime(VENDORS["apple"]))
    assert (a.max_work_group_size, a.local_mem_size) == (256, 32768)
    assert G.limits(fake_runtime(VENDORS["amd"])).local_mem_size == 65536


def test_profile_limits_never_raise_the_device_s():
    small = dict(H200, max_work_group_size=256, max_work_item_sizes=(256, 256, 32), local_mem_size=16384)
    lim = G.limits(fake_runtime(small))
    assert lim.max_work_group_size == 256 and lim.max_work_item_sizes == (256, 256, 32)
    assert lim.local_mem_size == 16384 and lim.why("max_work_group_size") == "device"
    # a device reporting no per-dimension sizes gets its work-group limit in each
    bare = dict(H200, max_work_item_sizes=())
    assert G.limits(fake_runtime(bare)).max_work_item_sizes == (1024, 1024, 64)     # (profile's 64 still applies)


# ------------------------------------------------------------------------------------------------- fitting
def test_fit_local_spreads_an_int_over_the_extents_within_each_dimension():
    rt = fake_runtime(H200)
    assert G.fit_local(rt, 128, (1, 1, 768)) == (1, 1, 64)          # the (1, 1, 128), fitted
    assert G.fit_local(rt, 128, (7, 7, 768)) == (7, 7, 2)
    assert G.fit_local(rt, 128, (300, 5, 5)) == (128, 1, 1)
    assert G.fit_local(rt, 128, (2, 1000)) == (2, 64)
    assert G.fit_local(rt, 2048, (5000,)) == (1024,)                  # the device's 1,024 per group
    assert G.fit_local(rt, 256, (5,)) == (5,)                         # not wider than the range


def test_fit_local_honours_the_kernel_s_work_group_size():
    rt = fake_runtime(H200)
    k = FakeKernel(wg=96)
    assert G.local1(rt, 256, k) == 64                                  # halved from 256 until it fits
    assert G.fit_local(rt, (32, 32, 4), None, k) == (4, 4, 4)          # the largest dimension halved first
    assert G.fit_local(rt, 512, (64, 64, 64), k) == (64, 1, 1)
    assert G.nd(rt, 1000, 256, k) == ((1024,), (64,))


def test_nd_rounds_up_to_whole_work_groups():
    rt = fake_runtime(H200)
    assert G.nd(rt, 1000, 256) == ((1024,), (256,))
    assert G.nd(rt, 3, 256) == ((3,), (3,))
    gs, ls = G.nd(rt, (7, 7, 768), 128)
    assert ls == (7, 7, 2) and gs == (7, 7, 768)
    gs, ls = G.nd(rt, (10, 3, 100), 128)
    assert all(g % l == 0 and g >= e for g, l, e in zip(gs, ls, (10, 3, 100)))


def test_pieces_split_launches_over_the_work_groups_a_dimension_allows():
    rt = fake_runtime(H200)
    assert G.pieces(rt, (64, 5, 64), (64, 1, 64)) == (((0, 0, 0), (64, 5, 64)),)
    parts = G.pieces(rt, (64, 140000, 1), (64, 1, 1))
    assert [p[0] for p in parts] == [(0, 0, 0), (0, 65535, 0), (0, 131070, 0)]
    assert [p[1][1] for p in parts] == [65535, 65535, 140000 - 131070]
    parts = G.pieces(rt, (1, 70000, 70000 * 64), (1, 1, 64))      # both dimensions: the product of the splits
    assert len(parts) == 4 and sum(p[1][1] * p[1][2] for p in parts) == 70000 * 70000 * 64
    for origin, size in parts:
        G.check(rt, FakeKernel(), size, (1, 1, 64))                  # every part fits


def test_template_local_rebuilds_smaller_while_the_kernel_allows_fewer_work_items():
    rt = fake_runtime(H200)
    built = []

    def build(ls):                  # a kernel whose registers allow at most 100 work-items
        built.append(ls)
        return FakeKernel(wg=100, name=f"k{ls}")

    k, ls = G.template_local(rt, 128, build, multiple=32)
    assert (ls, built) == (96, [128, 96]) and k.function_name == "k96"
    k, ls = G.template_local(rt, 4096, lambda L: FakeKernel(wg=4096), multiple=1)
    assert ls == 1024                                                  # the device's limit, before any build
    with pytest.raises(G.LaunchError, match="fewer than the 64"):
        G.template_local(rt, 128, lambda L: FakeKernel(wg=48, name="greedy"), multiple=64)


# ------------------------------------------------------------------------------------------------- errors
def _err(rt, k, gs, ls, args=()):
    with pytest.raises(G.LaunchError) as e:
        G.check(rt, k, gs, ls, args)
    return str(e.value)


def test_impossible_launches_name_the_kernel_the_sizes_and_the_limit():
    rt = fake_runtime(H200)
    k = FakeKernel(name="avgpool_fwd_adaptive")
    msg = _err(rt, k, (1, 1, 768), (1, 1, 128))
    assert "avgpool_fwd_adaptive" in msg and "(1, 1, 128)" in msg and "(1, 1, 768)" in msg
    assert "dimension 2" in msg and "limit of 64" in msg and "from device" in msg
    # a device reporting 1,024 there (as a CPU does) under the NVIDIA profile: the limit comes from the profile
    msg = _err(fake_runtime(dict(H200, max_work_item_sizes=(1024, 1024, 1024))), k, (1, 1, 768), (1, 1, 128))
    assert "limit of 64" in msg and "nvidia.toml [limits] max_work_item_sizes" in msg
    msg = _err(rt, FakeKernel(wg=256, name="regs"), (512,), (512,))
    assert "regs" in msg and "CL_KERNEL_WORK_GROUP_SIZE" in msg and "256" in msg
    msg = _err(rt, k, (1, 70000, 1), (1, 1, 1))
    assert "70000 work-groups in dimension 1" in msg and "65535" in msg
    msg = _err(rt, k, (2048,), (2048,))
    assert "1024" in msg
    msg = _err(rt, FakeKernel(local=40000), (64,), (64,), [__import__("pyopencl").LocalMemory(16384)])
    assert "56384 bytes of local memory" in msg and "49152" in msg
    assert "not a multiple" in _err(rt, k, (100,), (64,))
    assert "at least 1" in _err(rt, k, (0,), (64,))


# ------------------------------------------------------------------------------------------------- real kernels
def _rt():
    return runtime(cpu_index())


def _dev():
    return f"cl:{cpu_index()}"


def _raw_kernel(rt, wg=None):
    """A kernel built outside the ops (``a[i] = i``), with a faked CL_KERNEL_WORK_GROUP_SIZE when ``wg``."""
    import pyopencl as cl
    with warnings.catch_warnings():          # (Intel's compiler reports its build log)
        warnings.simplefilter("ignore", cl.CompilerWarning)
        k = cl.Program(rt.ctx, "__kernel void fill_ids(__global float* a) { a[get_global_id(0)] = get_global_id(0); }"
                       ).build().fill_ids
    if wg is not None:
        k._cltorch_wg = (wg, 0)
    return k


@contextlib.contextmanager
def limits_of(rt, lim):
    """Run with ``lim`` as the runtime's launch limits (a vendor's, emulated on this device), every launch plan
    made under them."""
    from cltorch import _deterministic
    saved = rt.__dict__.get("_limits")

    def clear():
        rt._geometry_ok.clear()
        rt.__dict__.pop("_geometry_memo", None)
        _deterministic.clear_plans()
    clear()
    rt._limits = lim
    try:
        yield
    finally:
        rt.synchronize()
        rt._limits = saved if saved is not None else G.limits_for(rt.info, rt.native_profile)
        clear()


def _vendor_limits(rt, kind):
    """The limits a device like ``rt``'s would have under ``kind``'s profile (device limits ∩ [limits])."""
    return G.limits_for(rt.info, shipped_profile(VENDORS[kind]))


def test_a_launch_over_the_kernel_s_limit_raises_through_the_runtime():
    rt = _rt()
    buf = ct.zeros(128, device=_dev())._storage.cl_buffer()
    k = _raw_kernel(rt, wg=32)                                          # as if it needed many registers
    with pytest.raises(ct.cl.LaunchError, match=r"kernel 'fill_ids'.*local size \(64,\).*32.*CL_KERNEL_WORK_GROUP"):
        rt.launch(k, (128,), (64,), buf)
    rt.launch(k, (128,), (32,), buf)                                    # within it: runs
    rt.synchronize()


def test_a_launch_over_the_emulated_per_dimension_limit_raises():
    rt = _rt()
    from cltorch.ops import pool
    with limits_of(rt, _vendor_limits(rt, "nvidia")):
        k = pool.kernel(rt, "float", "avgpool_fwd_adaptive", "bIIIIIb" + "i" * 13)
        with pytest.raises(ct.cl.LaunchError) as e:
            rt.launch(k, (1, 1, 768), (1, 1, 128))
        msg = str(e.value)
        assert "avgpool_fwd_adaptive" in msg and "(1, 1, 128)" in msg and "dimension 2" in msg
        assert "limit of 64" in msg and "nvidia.toml" in msg


def test_a_launch_the_driver_refuses_is_wrapped():
    rt = _rt()
    n = 4 * rt.info.max_work_group_size                                 # more than the device runs per group
    buf = ct.zeros(n, device=_dev())._storage.cl_buffer()
    k = _raw_kernel(rt, wg=1 << 40)
    big = G.Limits(1 << 40, (1 << 40,) * 3, 1 << 40, (1 << 62,) * 3, {})   # our check passes; the driver's not
    with limits_of(rt, big):
        with pytest.raises(ct.cl.LaunchError, match=r"kernel 'fill_ids' failed to launch.*local size"):
            rt.launch(k, (n,), (n,), buf)


def _close(got, ref, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(got.detach().cpu().numpy(), ref.detach().numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("kind", list(VENDORS))
def test_global_pooling_runs_under_each_vendor_s_limits(kind):
    """The issue's failure: adaptive_avg_pool2d to 1 x 1 of 8 x 96 planes, forward and backward, and the small
    adaptive outputs whose (x, y, planes) launch put 128 work-items in dimension 2."""
    rt = _rt()
    a = np.random.default_rng(0).standard_normal((8, 96, 7, 7)).astype(np.float32)
    with limits_of(rt, _vendor_limits(rt, kind)):
        for out in (1, (1, 2), (2, 1)):
            x, t = ct.tensor(a, device=_dev(), requires_grad=True), torch.tensor(a, requires_grad=True)
            y, r = ct.nn.functional.adaptive_avg_pool2d(x, out), torch.nn.functional.adaptive_avg_pool2d(t, out)
            _close(y, r)
            g = np.random.default_rng(1).standard_normal(r.shape).astype(np.float32)
            y.backward(ct.tensor(g, device=_dev()))
            r.backward(torch.tensor(g))
            _close(x.grad, t.grad)
            y, i = ct.nn.functional.adaptive_max_pool2d(ct.tensor(a, device=_dev()), out, return_indices=True)
            r, ri = torch.nn.functional.adaptive_max_pool2d(torch.tensor(a), out, return_indices=True)
            _close(y, r, 0, 0)
            assert np.array_equal(i.cpu().numpy(), ri.numpy())


def test_mobilenet_style_tail_under_nvidia_limits():
    """A MobileNetV2-style tail (1x1 conv to 96 channels, BatchNorm, ReLU6, global average pooling, Linear),
    forward and backward against torch, with NVIDIA's launch limits: what tests/user_scripts/mobilenetv2_cifar.py
    runs on an H200."""
    rt = _rt()
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Conv2d(24, 96, 1, bias=False), torch.nn.BatchNorm2d(96), torch.nn.ReLU6(),
                              torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(96, 10))
    mod = ct.nn.Sequential(ct.nn.Conv2d(24, 96, 1, bias=False), ct.nn.BatchNorm2d(96), ct.nn.ReLU6(),
                           ct.nn.AdaptiveAvgPool2d(1), ct.nn.Flatten(), ct.nn.Linear(96, 10)).to(_dev())
    with ct.no_grad():
        for p, q in zip(mod.parameters(), ref.parameters()):
            p.copy_(ct.tensor(q.detach().numpy(), device=_dev()))
    a = np.random.default_rng(2).standard_normal((16, 24, 4, 4)).astype(np.float32)
    with limits_of(rt, _vendor_limits(rt, "nvidia")):
        x = ct.tensor(a, device=_dev()).contiguous(memory_format=ct.channels_last)
        y = mod(x)
        r = ref(torch.tensor(a).contiguous(memory_format=torch.channels_last))
        _close(y, r, 1e-4, 1e-5)
        y.sum().backward()
        r.sum().backward()
        for (n, p), q in zip(mod.named_parameters(), ref.parameters()):
            _close(p.grad, q.grad, 1e-3, 1e-4)


def test_launches_in_parts_give_the_same_values(monkeypatch):
    """With at most 2 work-groups allowed in dimensions 1 and 2 (NVIDIA allows 65,535), the pooling, padding,
    resampling and FFT launches run in parts (geometry.pieces), each from its origin."""
    rt = _rt()
    lim = G.limits(rt)
    tight = G.Limits(lim.max_work_group_size, lim.max_work_item_sizes, lim.local_mem_size,
                     (lim.max_groups[0], 2, 2), {"max_groups": "this test"})
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 50, 5, 5)).astype(np.float32)
    h = rng.standard_normal((1, 1, 40, 130)).astype(np.float32)
    z = (rng.standard_normal((50, 128)) + 1j * rng.standard_normal((50, 128))).astype(np.complex64)
    F, TF = ct.nn.functional, torch.nn.functional
    parts, pieces = [], G.pieces

    def spy(rt_, gs, ls):
        p = pieces(rt_, gs, ls)
        parts.append(len(p))
        return p
    monkeypatch.setattr(G, "pieces", spy)
    with limits_of(rt, tight):
        d = _dev()
        y, i = F.max_pool2d(ct.tensor(a, device=d), 2, return_indices=True)
        r, ri = TF.max_pool2d(torch.tensor(a), 2, return_indices=True)
        _close(y, r, 0, 0)
        assert np.array_equal(i.cpu().numpy(), ri.numpy())
        x, t = ct.tensor(a, device=d, requires_grad=True), torch.tensor(a, requires_grad=True)
        y, r = F.avg_pool2d(x, 3, 1, 1), TF.avg_pool2d(t, 3, 1, 1)
        _close(y, r)
        y.sum().backward()
        r.sum().backward()
        _close(x.grad, t.grad)
        _close(F.pad(ct.tensor(h, device=d), (0, 0, 2, 1), mode="reflect"), TF.pad(torch.tensor(h), (0, 0, 2, 1),
                                                                                    mode="reflect"), 0, 0)
        _close(F.interpolate(ct.tensor(h, device=d), scale_factor=(2, 1), mode="nearest"),
               TF.interpolate(torch.tensor(h), scale_factor=(2, 1), mode="nearest"), 0, 0)
        got = ct.fft.fft(ct.tensor(z, device=d)).cpu().numpy()
        np.testing.assert_allclose(got, np.fft.fft(z), rtol=1e-4, atol=1e-4)
    assert sum(n > 1 for n in parts) >= 5, parts                       # pooling, padding, resampling, FFT


def test_softmax_rebuilds_its_local_array_when_the_kernel_allows_fewer_work_items(monkeypatch):
    """softmax's lanes-per-row kernels size a local array by the work-group (template LS): when the built kernel
    allows fewer work-items than the profile's 128 (registers, as CL_KERNEL_WORK_GROUP_SIZE says), it is rebuilt
    at the size it allows and the rows per work-group follow; values as torch's."""
    from cltorch.ops.softmax import common as S          # the fused kernels' cache (ops/softmax/common.py)
    rt = _rt()
    saved = rt.profile.get("softmax")
    real = G.kernel_limits
    monkeypatch.setattr(G, "kernel_limits", lambda rt_, k: (64, 0) if k.function_name.startswith("softmax")
                        else real(rt_, k))
    a = np.random.default_rng(4).standard_normal((37, 300)).astype(np.float32)
    try:
        rt.profile["softmax"] = dict(saved or {}, local_size=128, lanes=[{"lanes": 32}])
        S._KERNELS.clear()
        rt.__dict__.pop("_geometry_memo", None)
        x, t = ct.tensor(a, device=_dev(), requires_grad=True), torch.tensor(a, requires_grad=True)
        y, r = ct.softmax(x, 1), torch.softmax(t, 1)
        _close(y, r, 1e-5, 1e-7)
        g = np.random.default_rng(5).standard_normal(a.shape).astype(np.float32)
        y.backward(ct.tensor(g, device=_dev()))
        r.backward(torch.tensor(g))
        _close(x.grad, t.grad, 1e-4, 1e-6)
        built = sorted(dict(key[3])["LS"] for key in S._KERNELS if dict(key[3]).get("TPR") == 32)
        assert built and set(built) == {64, 128}, built           # built at 128, rebuilt at 64 (forward, backward)
    finally:
        if saved is None:
            rt.profile.pop("softmax", None)
        else:
            rt.profile["softmax"] = saved
        S._KERNELS.clear()
        rt.__dict__.pop("_geometry_memo", None)
        rt._geometry_ok.clear()
