"""GEMM profile rows: selection by ``upto`` and ``m_upto`` (cltorch/ops/gemm/), and products that run each
row of the shipped AVX-512 profile (devices/pocl-cpu-avx512.toml) against numpy."""
import numpy as np
import pytest

import cltorch as torch
from cltorch.backend.profile import _read
from cltorch.backend.paths import profiles_dir
from cltorch.ops import gemm as _gemm

ROWS = [
    {"upto": 384, "m_upto": 64, "mr": 8, "lx": 2},
    {"upto": 384, "mr": 8, "lx": 4},
    {"mr": 6, "lx": 1},
]


def test_m_upto_selects_by_rows():
    prof = {"gemm": {"design": "cpu", "sizes": ROWS}}
    assert _gemm.choose_config(prof, np.float32, 32, 1024, 256)["lx"] == 2      # cbrt 203, M 32
    assert _gemm.choose_config(prof, np.float32, 64, 64, 64)["lx"] == 2
    assert _gemm.choose_config(prof, np.float32, 65, 64, 64)["lx"] == 4         # M past m_upto
    assert _gemm.choose_config(prof, np.float32, 256, 256, 256)["lx"] == 4
    assert _gemm.choose_config(prof, np.float32, 32, 4096, 4096)["lx"] == 1     # cbrt past upto
    cfg = _gemm.choose_config(prof, np.float32, 32, 32, 32)
    assert "m_upto" not in cfg and "upto" not in cfg
    assert _gemm.plan.row_for(ROWS, 256)["lx"] == 4                                # no M: m_upto rows skipped


@pytest.mark.parametrize("mnk", [(32, 1024, 256), (5, 77, 300), (48, 40, 1000), (200, 330, 130), (520, 260, 300)])
def test_avx512_rows_match_numpy(mnk, monkeypatch):
    """Each shape lands on a row of the AVX-512 profile (m_upto row, the in-place row, the packed row);
    the profile is put in place on the device's runtime whatever device this is."""
    x = torch.ones(1, device="cl:0")
    rt = x._runtime()
    g = _read(profiles_dir() / "pocl-cpu-avx512.toml")["gemm"]
    if _gemm.design(rt.profile) != "cpu":
        pytest.skip("the device runs the GPU GEMM design")
    monkeypatch.setitem(rt.profile, "gemm", dict(rt.profile.get("gemm", {}), **g))
    _gemm.clear_cache()
    try:
        M, N, K = mnk
        rng = np.random.default_rng(M + N + K)
        a = rng.standard_normal((M, K)).astype(np.float32)
        w = rng.standard_normal((N, K)).astype(np.float32)
        b = rng.standard_normal((K, N)).astype(np.float32)
        A, W, B = (torch.from_numpy(v).to("cl:0") for v in (a, w, b))
        ref1 = a.astype(np.float64) @ b.astype(np.float64)
        ref2 = a.astype(np.float64) @ w.T.astype(np.float64)
        np.testing.assert_allclose((A @ B).cpu().numpy(), ref1, rtol=1e-4, atol=1e-4 * np.sqrt(K))
        np.testing.assert_allclose((A @ W.t()).cpu().numpy(), ref2, rtol=1e-4, atol=1e-4 * np.sqrt(K))
    finally:
        _gemm.clear_cache()
