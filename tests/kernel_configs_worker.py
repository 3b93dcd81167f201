"""One process of tests/test_kernel_configs.py: every kernel template on one device under one profile.

Run as ``python tests/kernel_configs_worker.py DEVICE SIZE [FAMILIES]`` with the profile chosen by the environment
(``CLTORCH_PROFILE`` and ``CLTORCH_PROFILE_ONLY=1``; profiles load once per process, which is why each
configuration is a process of its own). ``SIZE`` is ``edge`` (shapes that leave partial tiles and partial
work-groups in every kernel's GPU and CPU configurations), ``tiny`` (the smallest shapes that still cover each
code path, for Oclgrind, which simulates every work-item), ``stress`` (shapes that stress launch geometry under
the vendor's emulated limits: see "stress cases"), or modes joined by "+" (``edge+stress``: one process, one
import). The cases are one table, ``CASES``, a row per op family (FAMILIES: a comma-separated subset). Each case
computes on ``DEVICE`` and compares with torch (the oracle, on the host, in float64 where it matters), numpy or
the numpy Philox reference. The last line of stdout is JSON: ``{"profile": ..., "families": {mode: [names]},
"cases": {mode: {name: null | "error text"}}}``. Oclgrind's diagnostics go to stderr; the test reads them there.
"""
import json
import sys
import time
import traceback

import numpy as np
import torch

import cltorch as ct

DEV = sys.argv[1] if len(sys.argv) > 1 else "cl:0"
SIZE = sys.argv[2] if len(sys.argv) > 2 else "edge"          # a mode, or modes joined by "+"
TINY = SIZE == "tiny"
rng = np.random.default_rng(1234)


def arr(*shape, dtype=np.float32, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, shape).astype(dtype)


def C(a, grad=False):
    """A cltorch tensor on DEV holding a (a leaf that requires grad when asked)."""
    t = ct.from_numpy(np.array(a, order="C")).to(DEV)
    return t.requires_grad_() if grad else t


def T(a, grad=False):
    t = torch.from_numpy(np.array(a, order="C"))
    return t.requires_grad_() if grad else t


def host(t):
    return t.detach().cpu().numpy()


def close(name, got, ref, rtol=1e-4, atol=1e-5):
    got = np.asarray(host(got) if hasattr(got, "detach") else got)
    ref = np.asarray(ref.detach().numpy() if hasattr(ref, "detach") else ref)
    if got.shape != ref.shape:
        raise AssertionError(f"{name}: shape {got.shape} != torch's {ref.shape}")
    if not np.allclose(got.astype(np.float64), ref.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True):
        err = np.abs(got.astype(np.float64) - ref.astype(np.float64)).max()
        raise AssertionError(f"{name}: max abs error {err:.3g} (rtol {rtol}, atol {atol}), shape {got.shape}")


def equal(name, got, ref):
    got, ref = np.asarray(host(got) if hasattr(got, "detach") else got), np.asarray(
        ref.numpy() if hasattr(ref, "numpy") else ref)
    if got.shape != ref.shape or not np.array_equal(got, ref):
        bad = "shape" if got.shape != ref.shape else f"{int((got != ref).sum())} elements"
        raise AssertionError(f"{name}: differs from the reference ({bad})")


def fwd_bwd(name, f_ct, f_t, inputs, rtol=1e-4, atol=1e-5, seed_grad=True):
    """f on cltorch and torch; compare the output and, through a random output gradient, every input's grad."""
    xs = [C(a, grad=g) for a, g in inputs]
    ys = [T(a, grad=g) for a, g in inputs]
    out, ref = f_ct(*xs), f_t(*ys)
    close(name, out, ref, rtol, atol)
    if not any(g for _, g in inputs):
        return
    go = (arr(*ref.shape) if seed_grad and ref.dim() else np.ones(ref.shape)).astype(ref.detach().numpy().dtype)
    out.backward(C(go))
    ref.backward(T(go))
    for i, ((_, g), x, y) in enumerate(zip(inputs, xs, ys)):
        if g:
            close(f"{name} grad of input {i}", x.grad, y.grad, rtol * 10, atol * 10)


# ----------------------------------------------------------------------------------------------- cases
def elementwise():
    n = 67 if TINY else 1031                       # not a multiple of any work-group or vector width
    a, b = arr(n), arr(n)
    close("add", C(a) + C(b), T(a) + T(b))
    close("exp*tanh", ct.exp(C(a)) * ct.tanh(C(b)), torch.exp(T(a)) * torch.tanh(T(b)), 1e-5, 1e-6)
    m = arr(5, 7 if TINY else 37)
    close("broadcast strided", C(m).t() * C(m[:, :1]).t(), T(m).t() * T(m[:, :1]).t())
    close("float64 sqrt", ct.sqrt(C(a.astype(np.float64) + 1)), torch.sqrt(T(a.astype(np.float64) + 1)), 1e-12, 0)
    bf = ct.from_numpy(a).to(DEV).to(ct.bfloat16).float()
    close("bfloat16 round trip", bf, torch.from_numpy(a).to(torch.bfloat16).float(), 0, 0)
    # the GPU design's whole chunks (local size x 8 elements: 2,048 with 256 work-items) and its tail: float4, half8
    # and bool vectors, and an unaligned view (element by element)
    v, w = arr(2 * 2048 + 37), arr(2 * 2048 + 37)
    close("add, whole chunks", C(v) + C(w), T(v) + T(w), 0, 0)
    close("half * scalar, whole chunks", C(v).half() * 0.5, T(v).half() * 0.5, 0, 0)
    equal("compare, whole chunks", C(v) < C(w), T(v) < T(w))
    close("unaligned views, whole chunks", C(v)[1:] - C(w)[1:], T(v)[1:] - T(w)[1:], 0, 0)


def reduction():
    m = arr(6, 45) if TINY else arr(37, 300)
    for dim in (0, 1):
        close(f"sum dim {dim}", C(m).sum(dim), T(m).sum(dim), 1e-5, 1e-5)
        close(f"amax dim {dim}", C(m).amax(dim), T(m).amax(dim), 0, 0)
    equal("argmax", C(m).argmax(1), T(m).argmax(1))
    big = arr(5000 if TINY else 70001)             # two-stage: R > chunk with few outputs
    close("sum all (two passes)", C(big).sum(), T(big.astype(np.float64)).sum(), 1e-5, 1e-4)
    close("mean/var", C(m).var(1), T(m).var(1), 1e-4, 1e-5)
    # the GPU design's other paths (ops/reduction/gpu_plan.py): column slabs and their second pass, arg over
    # columns, a strided full sum (addresses element by element), an unaligned view (chunks read element by element)
    tall = arr(200, 8) if TINY else arr(3000, 40)
    close("sum dim 0, tall", C(tall).sum(0), T(tall.astype(np.float64)).sum(0), 1e-5, 1e-5)
    equal("argmax dim 0, tall", C(tall).argmax(0), T(tall).argmax(0))
    close("sum of a transposed view", C(m).t()[1:].sum(), T(m.astype(np.float64)).t()[1:].sum(), 1e-5, 1e-4)
    close("sum dim 1, unaligned view", C(m)[:, 1:].sum(1), T(m)[:, 1:].sum(1), 1e-5, 1e-5)
    ints = rng.integers(-50, 50, m.shape)
    equal("int64 sum dim 1", C(ints).sum(1), T(ints).sum(1))
    # the pointwise prologue (cltorch.compile fuses `a * b + 0.5` into the reduction that reads it)
    m2 = arr(*m.shape)
    for dim in (0, 1, None):
        cf = ct.compile(lambda a, b: (a * b + 0.5).sum(dim))
        with ct.no_grad():
            for _ in range(3):
                got = cf(C(m), C(m2))
        if any(not lab.startswith("reduction") for lab in cf.graphs()[0].labels()):
            raise AssertionError(f"prologue dim {dim}: {cf.graphs()[0].labels()}")
        close(f"prologue a * b + 0.5 sum dim {dim}", got, (T(m) * T(m2) + 0.5).sum(dim), 1e-5, 1e-5)
    cf = ct.compile(lambda a, b: ct.sqrt((a * b).sum().abs()))      # and the finish: sqrt(|sum|) in the reduction
    with ct.no_grad():
        for _ in range(3):
            got = cf(C(m), C(m2))
    if any(not lab.startswith("reduction") for lab in cf.graphs()[0].labels()):
        raise AssertionError(f"finish: {cf.graphs()[0].labels()}")
    close("finish sqrt(|sum|)", got, torch.sqrt((T(m) * T(m2)).sum().abs()), 1e-5, 1e-5)


def gemm():
    from cltorch.backend import runtime
    from cltorch.ops import gemm as _gemm
    idx = ct.device(DEV).index
    prof = runtime(idx if idx is not None else 0).profile
    g = dict(prof.get("gemm", {}))
    shapes = [(9, 7, 5), (70, 33, 21)] if TINY else [(37, 29, 41), (130, 67, 45), (150, 140, 131)]
    # every row of the profile's table at every shape (a row is chosen by size, so small shapes alone would
    # leave the large-tile rows unrun; under Oclgrind only small shapes are affordable)
    rows = [({k: v for k, v in r.items() if k not in ("upto", "m_upto")}) for r in (g.get("sizes") or [{}])]
    try:
        for ri, row in enumerate(rows):
            prof["gemm"] = dict(g, sizes=[row])
            _gemm.clear_cache()
            for M, N, K in shapes:
                a, b = arr(M, K), arr(K, N)
                ref = T(a.astype(np.float64)) @ T(b.astype(np.float64))
                close(f"mm {M}x{N}x{K} row {ri} {row}", C(a) @ C(b), ref, 1e-4, 1e-4)
                close(f"mm A^T B^T {M}x{N}x{K} row {ri}", C(a.T.copy()).t() @ C(b.T.copy()).t(), ref, 1e-4, 1e-4)
                # the c_epi epilogue (cltorch._capture fuses a bias or residual add into the GEMM): a bias row
                # (vector stores) and a per-row column (scalar stores), A read transposed
                rt = runtime(idx if idx is not None else 0)
                for e, eshape, est in ((arr(N), (1, N), (0, 1)), (arr(M), (M, 1), (1, 0))):
                    out, ce, cat, cb = ct.empty((M, N), device=DEV), C(e), C(a.T.copy()), C(b)
                    _gemm.gemm(rt, M, N, K, (cat._storage.cl_buffer(), 0, 1, M, 0),
                               (cb._storage.cl_buffer(), 0, N, 1, 0), (out._storage.cl_buffer(), 0, N, 1, 0),
                               E=(ce._storage.cl_buffer(), 0, est[0], est[1], 0))
                    close(f"mm + epilogue {eshape} {M}x{N}x{K} row {ri}", out, ref + T(e.reshape(eshape)), 1e-4, 1e-4)
    finally:
        prof["gemm"] = g
        _gemm.clear_cache()
    if _gemm.design(prof) == "gpu":       # split-K: K slices summed in slice order by a second kernel
        try:
            prof["gemm"] = dict(g, groups_per_cu=64, split_k=4, split_k_min=8)
            _gemm.clear_cache()
            M, N, K = (9, 7, 40) if TINY else (37, 29, 300)
            a, b = arr(M, K), arr(K, N)
            ref = T(a.astype(np.float64)) @ T(b.astype(np.float64))
            close(f"mm split-K {M}x{N}x{K}", C(a) @ C(b), ref, 1e-4, 1e-4)
            close(f"mm split-K A^T {M}x{N}x{K}", C(a.T.copy()).t() @ C(b), ref, 1e-4, 1e-4)
        finally:
            prof["gemm"] = g
            _gemm.clear_cache()
    for cd, td in ((ct.float16, torch.float16), (ct.bfloat16, torch.bfloat16)):    # 16-bit storage, float sums
        a, b = arr(7, 13), arr(13, 9)
        close(f"mm {td}", (C(a).to(cd) @ C(b).to(cd)).float(), (T(a).to(td) @ T(b).to(td)).float(), 1e-2, 1e-2)
    a, b = arr(3, 11, 6), arr(3, 6, 13)
    close("bmm", ct.bmm(C(a), C(b)), torch.bmm(T(a), T(b)), 1e-4, 1e-5)
    a64, b64 = arr(19, 23, dtype=np.float64), arr(23, 17, dtype=np.float64)
    close("mm float64", C(a64) @ C(b64), T(a64) @ T(b64), 1e-12, 1e-12)
    fwd_bwd("linear", lambda x, w: ct.nn.functional.linear(x, w), lambda x, w: torch.nn.functional.linear(x, w),
            [(arr(5, 12), True), (arr(9, 12), True)], 1e-4, 1e-5)


def conv():
    n, c, h, o = (1, 2, 6, 3) if TINY else (2, 3, 11, 5)
    fwd_bwd("conv2d", lambda x, w: ct.nn.functional.conv2d(x, w, padding=1, stride=2),
            lambda x, w: torch.nn.functional.conv2d(x, w, padding=1, stride=2),
            [(arr(n, c, h, h + 1), True), (arr(o, c, 3, 3), True)], 1e-4, 1e-5)
    fwd_bwd("conv1d dilated", lambda x, w: ct.nn.functional.conv1d(x, w, dilation=2),
            lambda x, w: torch.nn.functional.conv1d(x, w, dilation=2),
            [(arr(n, c, h + 4), True), (arr(o, c, 3), True)], 1e-4, 1e-5)
    # depthwise kernels (ops/conv/depthwise.py): multiplier 2, stride 2, rows that end in a partial vector
    fwd_bwd("conv2d depthwise", lambda x, w, b: ct.nn.functional.conv2d(x, w, b, 2, 1, 1, c),
            lambda x, w, b: torch.nn.functional.conv2d(x, w, b, 2, 1, 1, c),
            [(arr(n, c, h, h + 3), True), (arr(2 * c, 1, 3, 3), True), (arr(2 * c), True)], 1e-4, 1e-5)
    fwd_bwd("conv1d depthwise dilated", lambda x, w: ct.nn.functional.conv1d(x, w, None, 1, 2, 2, c),
            lambda x, w: torch.nn.functional.conv1d(x, w, None, 1, 2, 2, c),
            [(arr(n, c, h + 5), True), (arr(c, 1, 3), True)], 1e-4, 1e-5)
    # the GPU design (ops/conv/igemm.py): channels past a slice of 16, the phase-decomposed input gradient of a
    # strided conv_transpose2d with groups, conv3d
    ci = 5 if TINY else 19
    fwd_bwd("conv2d, channels past a slice", lambda x, w, b: ct.nn.functional.conv2d(x, w, b, padding=1),
            lambda x, w, b: torch.nn.functional.conv2d(x, w, b, padding=1),
            [(arr(n, ci, h - 1, h), True), (arr(o + 2, ci, 3, 3), True), (arr(o + 2), True)], 1e-4, 1e-5)
    fwd_bwd("conv_transpose2d stride 2, groups 2",
            lambda u, w: ct.nn.functional.conv_transpose2d(u, w, None, 2, 1, 1, 2),
            lambda u, w: torch.nn.functional.conv_transpose2d(u, w, None, 2, 1, 1, 2),
            [(arr(n, 4, h // 2, h // 2 + 1), True), (arr(4, 3, 3, 3), True)], 1e-4, 1e-5)
    fwd_bwd("conv3d", lambda x, w: ct.nn.functional.conv3d(x, w, padding=1, stride=(1, 2, 1)),
            lambda x, w: torch.nn.functional.conv3d(x, w, padding=1, stride=(1, 2, 1)),
            [(arr(n, 2, 3, 4, 5), True), (arr(o, 2, 3, 3, 3), True)], 1e-4, 1e-5)


def pool():
    s = 7 if TINY else 13
    fwd_bwd("max_pool2d", lambda x: ct.nn.functional.max_pool2d(x, 3, 2, 1),
            lambda x: torch.nn.functional.max_pool2d(x, 3, 2, 1), [(arr(2, 3, s, s + 2), True)])
    fwd_bwd("avg_pool2d", lambda x: ct.nn.functional.avg_pool2d(x, 2, ceil_mode=True),
            lambda x: torch.nn.functional.avg_pool2d(x, 2, ceil_mode=True), [(arr(2, 3, s, s + 2), True)])
    fwd_bwd("adaptive_avg_pool2d", lambda x: ct.nn.functional.adaptive_avg_pool2d(x, (3, 2)),
            lambda x: torch.nn.functional.adaptive_avg_pool2d(x, (3, 2)), [(arr(1, 2, s, s), True)])
    # global pooling (ops/global_pool.py): lanes per plane meeting in local memory (GPU profiles), partial groups
    g = arr(2, 5, s, s)
    g[1, 3, 2, 2] = np.nan
    fwd_bwd("global avg", lambda x: ct.nn.functional.adaptive_avg_pool2d(x, 1),
            lambda x: torch.nn.functional.adaptive_avg_pool2d(x, 1), [(g, True)])
    y, i = ct.nn.functional.adaptive_max_pool2d(C(g), 1, return_indices=True)
    ry, ri = torch.nn.functional.adaptive_max_pool2d(T(g), 1, return_indices=True)
    close("global max", y, ry, 0, 0)
    equal("global max indices", i, ri)
    gl = C(g).contiguous(memory_format=ct.channels_last)
    close("global avg channels_last", ct.nn.functional.adaptive_avg_pool2d(gl, 1),
          torch.nn.functional.adaptive_avg_pool2d(T(g), 1), 1e-5, 1e-6)


def norm():
    r, d = (5, 19) if TINY else (37, 300)
    fwd_bwd("layer_norm", lambda x, w, b: ct.nn.functional.layer_norm(x, (d,), w, b),
            lambda x, w, b: torch.nn.functional.layer_norm(x, (d,), w, b),
            [(arr(r, d), True), (arr(d), True), (arr(d), True)], 1e-4, 1e-5)
    fwd_bwd("batch_norm", lambda x, w, b: ct.nn.functional.batch_norm(x, None, None, w, b, training=True),
            lambda x, w, b: torch.nn.functional.batch_norm(x, None, None, w, b, training=True),
            [(arr(4, 3, 5), True), (arr(3), True), (arr(3), True)], 1e-4, 1e-5)
    fwd_bwd("group_norm", lambda x: ct.nn.functional.group_norm(x, 2), lambda x: torch.nn.functional.group_norm(x, 2),
            [(arr(2, 4, 9), True)], 1e-4, 1e-5)
    # rows longer than the profiles' [norm] chunk (CPU 1024, GPU 256): several chunks per row, a shorter last
    # chunk, chunks that start inside a batch_norm sample's plane, the partial sums' second pass
    n, hw, lw, gw = (2, 700, 1100, 600) if TINY else (4, 1500, 3001, 700)
    fwd_bwd("batch_norm, chunked rows", lambda x, w, b: ct.nn.functional.batch_norm(x, None, None, w, b, training=True),
            lambda x, w, b: torch.nn.functional.batch_norm(x, None, None, w, b, training=True),
            [(arr(n, 3, hw, lo=1.0, hi=3.0), True), (arr(3), True), (arr(3), True)], 1e-4, 1e-5)
    fwd_bwd("layer_norm, chunked rows", lambda x, w, b: ct.nn.functional.layer_norm(x, (lw,), w, b),
            lambda x, w, b: torch.nn.functional.layer_norm(x, (lw,), w, b),
            [(arr(3, lw), True), (arr(lw), True), (arr(lw), True)], 1e-4, 1e-5)
    fwd_bwd("rms_norm, chunked rows", lambda x, w: ct.nn.functional.rms_norm(x, (lw,), w, 1e-6),
            lambda x, w: torch.nn.functional.rms_norm(x, (lw,), w, 1e-6),
            [(arr(3, lw), True), (arr(lw), True)], 1e-4, 1e-5)
    fwd_bwd("group_norm, chunked rows", lambda x, w, b: ct.nn.functional.group_norm(x, 2, w, b),
            lambda x, w, b: torch.nn.functional.group_norm(x, 2, w, b),
            [(arr(2, 4, gw), True), (arr(4), True), (arr(4), True)], 1e-4, 1e-5)


def softmax():
    # row lengths below one chunk of 32, across a partial chunk, and long; each dim 1 (contiguous rows: the
    # profile's lanes per row, vector loads) and dim 0 (strided rows, one lane; 16 and 40 of them side by side
    # run as vector lanes under the CPU tables' row_vector)
    # GPU design (row teams, softmax_team.cl.mako): (2, 2100) holds the row in registers forward and streams it
    # backward (two arrays), (2, 10000) streams both ways; the transposed rows load element by element
    shapes = [(5, 21), (6, 70), (3, 16), (2, 2100)] if TINY else [(37, 513), (300, 65), (3, 7), (2, 3001), (70, 40),
                                                                  (2, 10000)]
    for shape in shapes:
        m = arr(*shape)
        for dim in (1, 0):
            fwd_bwd(f"softmax {shape} dim {dim}", lambda x: ct.softmax(x, dim), lambda x: torch.softmax(x, dim),
                    [(m * 4, True)])
            fwd_bwd(f"log_softmax {shape} dim {dim}", lambda x: ct.log_softmax(x, dim),
                    lambda x: torch.log_softmax(x, dim), [(m * 4, True)])
    m = arr(*((33, 9) if TINY else (70, 40))) * 4
    fwd_bwd("log_softmax, transposed rows", lambda x: ct.log_softmax(x.t(), 1), lambda x: torch.log_softmax(x.t(), 1),
            [(m, True)])


def loss():
    n, k = (6, 5) if TINY else (37, 103)
    tgt = rng.integers(0, k, n)
    fwd_bwd("cross_entropy", lambda x: ct.nn.functional.cross_entropy(x, ct.from_numpy(tgt).to(DEV)),
            lambda x: torch.nn.functional.cross_entropy(x, torch.from_numpy(tgt)), [(arr(n, k) * 3, True)],
            1e-5, 1e-6, seed_grad=False)
    # the GPU design's smoothing sum and class weights, an ignored row
    cw = rng.uniform(0.5, 2.0, k).astype(np.float32)
    t2 = tgt.copy()
    t2[1] = -100
    fwd_bwd("cross_entropy, weights, smoothing, ignored row",
            lambda x: ct.nn.functional.cross_entropy(x, ct.from_numpy(t2).to(DEV), ct.from_numpy(cw).to(DEV),
                                                     label_smoothing=0.1),
            lambda x: torch.nn.functional.cross_entropy(x, torch.from_numpy(t2), torch.from_numpy(cw),
                                                        label_smoothing=0.1), [(arr(n, k) * 3, True)],
            1e-5, 1e-6, seed_grad=False)
    fwd_bwd("nll_loss sum", lambda x: ct.nn.functional.nll_loss(x, ct.from_numpy(tgt).to(DEV), reduction="sum"),
            lambda x: torch.nn.functional.nll_loss(x, torch.from_numpy(tgt), reduction="sum"), [(arr(n, k), True)],
            1e-5, 1e-6, seed_grad=False)
    fwd_bwd("mse_loss", lambda x, y: ct.nn.functional.mse_loss(x, y), lambda x, y: torch.nn.functional.mse_loss(x, y),
            [(arr(n, k), True), (arr(n, k), False)], 1e-5, 1e-6, seed_grad=False)


def sdpa():
    b, h, L, S, E = (1, 2, 5, 7, 8) if TINY else (2, 3, 37, 45, 24)
    f_ct = ct.nn.functional.scaled_dot_product_attention
    f_t = torch.nn.functional.scaled_dot_product_attention
    args = [(arr(b, h, L, E), True), (arr(b, h, S, E), True), (arr(b, h, S, E), True)]
    fwd_bwd("sdpa", f_ct, f_t, args, 1e-4, 1e-5)
    fwd_bwd("sdpa causal", lambda q, k, v: f_ct(q, k, v, is_causal=True), lambda q, k, v: f_t(q, k, v, is_causal=True),
            args, 1e-4, 1e-5)
    mask = rng.random((L, S)) < 0.7
    mask[:, 0] = True
    fwd_bwd("sdpa bool mask", lambda q, k, v: f_ct(q, k, v, attn_mask=ct.from_numpy(mask).to(DEV)),
            lambda q, k, v: f_t(q, k, v, attn_mask=torch.from_numpy(mask)), args, 1e-4, 1e-5)
    # the GPU profiles run the flash design (ops/attention/flash.py): q, k, v as transposed views of a fused
    # (b, S, 3, h, E) projection with a float mask; GQA; head dim not a multiple of 4; float16 storage; in-kernel
    # dropout (its Philox pass over the staged P tile) against the numpy Philox reference
    from cltorch.ops.attention import plan as _sp
    from cltorch.ops import _philox_ref as REF, random as R
    rt = ct.ones(1, device=DEV)._runtime()
    want = "flash" if any(f.endswith("gpu.toml") for f in rt.profile.sources) else "cpu"
    if _sp.design(rt) != want:             # GPU profiles run the GPU design
        raise AssertionError(f"sdpa design {_sp.design(rt)} under {rt.profile.name}, expected {want}")
    views = lambda t: [t[:, :, i].transpose(1, 2) for i in range(3)]       # noqa: E731
    fm = arr(S, S)                      # self-attention over the S positions of the projection
    fwd_bwd("sdpa qkv views float mask", lambda x: f_ct(*views(x), attn_mask=C(fm)),
            lambda x: f_t(*views(x), attn_mask=T(fm)), [(arr(b, S, 3, h, E), True)], 1e-4, 1e-5)
    fwd_bwd("sdpa gqa causal E=5", lambda q, k, v: f_ct(q, k, v, is_causal=True, enable_gqa=True),
            lambda q, k, v: f_t(q, k, v, is_causal=True, enable_gqa=True),
            [(arr(b, h, L, 5), True), (arr(b, 1, S, 5), True), (arr(b, 1, S, 3), True)], 1e-4, 1e-5)
    if want == "flash":                 # float16 storage read by the kernels (the CPU design has none)
        hq, hk, hv = (torch.from_numpy(arr(b, h, n, E)).half() for n in (L, S, S))
        close("sdpa float16", f_ct(*(C(x.numpy()) for x in (hq, hk, hv))).float(),
              f_t(hq.double(), hk.double(), hv.double()), 2e-3, 2e-3)
    # dropout with a bool mask and causal; under Oclgrind with 17 x 19 so that several row and key groups share
    # the local tiles (the race checks of the exchange and dropout passes)
    p, L2, S2 = 0.25, (17 if TINY else L), (19 if TINY else S)
    m2 = rng.random((L2, S2)) < 0.7
    m2[:, 0] = True

    def drop_ct(q, k, v):
        R.manual_seed(7)
        drop_ct.off = R.default_generator._offset
        return f_ct(q, k, v, attn_mask=C(m2), dropout_p=p, is_causal=True)

    def drop_t(q, k, v):
        sp4 = (S2 + 3) // 4 * 4
        words = REF.random_words(R.default_generator.initial_seed(), drop_ct.off, b * h * L2 * sp4 // 4)
        keep = np.where(words.reshape(b, h, L2, sp4)[..., :S2] >= np.uint32(np.ceil(p * 2 ** 32)), 1 / (1 - p), 0.0)
        s = q.double() @ k.double().transpose(-1, -2) / np.sqrt(E)
        s = s.masked_fill(~(torch.from_numpy(m2) & torch.ones(L2, S2, dtype=torch.bool).tril()), -np.inf)
        return ((torch.softmax(s, -1) * torch.from_numpy(keep)) @ v.double()).float()
    fwd_bwd("sdpa dropout, bool mask, causal", drop_ct, drop_t,
            [(arr(b, h, L2, E), True), (arr(b, h, S2, E), True), (arr(b, h, S2, E), True)], 1e-4, 1e-5)


def scan_sort():
    n = 45 if TINY else 5003
    a = arr(3, n)
    close("cumsum", ct.cumsum(C(a), 1), torch.cumsum(T(a.astype(np.float64)), 1), 1e-5, 1e-4)
    v, i = ct.cummax(C(a), 1)
    rv, ri = torch.cummax(T(a), 1)
    close("cummax values", v, rv, 0, 0)
    equal("cummax indices", i, ri)
    s, si = ct.sort(C(a), 1)
    rs, rsi = torch.sort(T(a), dim=1, stable=True)
    close("sort values", s, rs, 0, 0)
    equal("sort indices", si, rsi)
    ai = rng.integers(0, 50, (2, n)).astype(np.int64)
    s, si = ct.sort(C(ai), dim=1, descending=True, stable=True)
    rs, rsi = torch.sort(T(ai), dim=1, descending=True, stable=True)
    equal("stable sort int64 descending", s, rs)
    equal("stable sort int64 indices", si, rsi)
    tv, ti = ct.topk(C(a), 5, 1)
    rv, _ = torch.topk(T(a), 5, 1)
    close("topk", tv, rv, 0, 0)


def index():
    a = arr(9, 13) if TINY else arr(57, 129)
    idx = rng.integers(0, a.shape[0], 23).astype(np.int64)
    close("index_select", ct.index_select(C(a), 0, C(idx)), torch.index_select(T(a), 0, T(idx)), 0, 0)
    g = rng.integers(0, a.shape[1], a.shape).astype(np.int64)
    close("gather", ct.gather(C(a), 1, C(g)), torch.gather(T(a), 1, T(g)), 0, 0)
    close("scatter_add", ct.zeros(a.shape, device=DEV).scatter_add(1, C(g), C(a)),
          torch.zeros(a.shape).scatter_add(1, T(g), T(a)), 1e-5, 1e-6)
    m = a > 0.2
    close("masked_select", C(a)[C(m)], T(a)[T(m)], 0, 0)
    equal("nonzero", ct.nonzero(C(m)), torch.nonzero(T(m)))
    fwd_bwd("advanced indexing", lambda x: x[C(idx)][:, 2:7], lambda x: x[T(idx)][:, 2:7], [(a, True)], 1e-5, 1e-6)
    x, y = ct.zeros(a.shape[0], device=DEV), torch.zeros(a.shape[0])
    vals = arr(len(idx))
    x.index_put_((C(idx),), C(vals), accumulate=True)
    y.index_put_((T(idx),), T(vals), accumulate=True)
    close("index_put accumulate", x, y, 1e-5, 1e-6)
    ct.use_deterministic_algorithms(True)      # accumulating puts in source order: torch's sequential CPU bits
    try:
        close("scatter_add, deterministic mode", ct.zeros(a.shape, device=DEV).scatter_add(1, C(g), C(a)),
              torch.zeros(a.shape).scatter_add(1, T(g), T(a)), 0, 0)
        x = ct.zeros(a.shape[0], device=DEV).index_put_((C(idx),), C(vals), accumulate=True)
        close("index_put accumulate, deterministic mode", x, y, 0, 0)
    finally:
        ct.use_deterministic_algorithms(False)


def optim():
    n = 37 if TINY else 1031
    for name, kw in (("Adam", dict(lr=1e-2, weight_decay=0.1)), ("AdamW", dict(lr=1e-2)),
                     ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)), ("RMSprop", dict(lr=1e-2))):
        w0, w1 = arr(n), arr(3, 5)
        ps = [ct.nn.Parameter(C(w0)), ct.nn.Parameter(C(w1))]
        qs = [torch.nn.Parameter(T(w0)), torch.nn.Parameter(T(w1))]
        o1, o2 = getattr(ct.optim, name)(ps, **kw), getattr(torch.optim, name)(qs, **kw)
        for step in range(3):
            gs = [arr(n), arr(3, 5)]
            for p, q, gr in zip(ps, qs, gs):
                p.grad, q.grad = C(gr), T(gr)
            o1.step()
            o2.step()
        for i, (p, q) in enumerate(zip(ps, qs)):
            close(f"{name} parameter {i} after 3 steps", p, q, 1e-5, 1e-6)


def _rnn_against_torch(label, mod, ref, x):
    """mod (ours, on DEV) given ref's parameters; output and input gradient of x against torch's."""
    with ct.no_grad():
        for (n1, p1), (n2, p2) in zip(mod.named_parameters(), ref.named_parameters()):
            assert n1 == n2, (n1, n2)
            p1.copy_(C(p2.detach().numpy()))
    xc, xt = C(x, grad=True), T(x, grad=True)
    yc, yt = mod(xc)[0], ref(xt)[0]
    close(f"{label} output", yc, yt, 1e-4, 1e-5)
    go = arr(*yt.shape)
    yc.backward(C(go))
    yt.backward(T(go))
    close(f"{label} input grad", xc.grad, xt.grad, 1e-3, 1e-5)


def rnn():
    T_, B, I, H = (3, 2, 3, 4) if TINY else (7, 3, 5, 17)
    for kind in ("LSTM", "GRU", "RNN"):
        torch.manual_seed(0)
        ref = getattr(torch.nn, kind)(I, H, num_layers=2 if not TINY else 1, batch_first=False)
        mod = getattr(ct.nn, kind)(I, H, num_layers=2 if not TINY else 1, batch_first=False).to(DEV)
        _rnn_against_torch(kind, mod, ref, arr(T_, B, I))
        for (n1, p1), (_, p2) in zip(mod.named_parameters(), ref.named_parameters()):
            close(f"{kind} grad {n1}", p1.grad, p2.grad, 1e-3, 1e-5)


def philox():
    from cltorch.backend import runtime
    from cltorch.ops import _philox_launch as L, _philox_ref as R
    import pyopencl as cl
    rt = runtime(ct.device(DEV).index if ct.device(DEV).index is not None else 0)
    n = 77 if TINY else 10007
    for fn, ref, dt in ((L.fill_uniform, R.uniform, np.float32), (L.fill_normal, R.normal, np.float32),
                        (L.fill_normal, R.normal, np.float64)):
        host_ = np.full(n + 8, 77, dt)
        buf = cl.Buffer(rt.ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=host_)
        fn(rt, buf, 3, n, dt, 2024, 5)                 # the profile's local size and vector width
        cl.enqueue_copy(rt.queue, host_, buf)
        rt.queue.finish()
        if not (host_[:3] == 77).all() or not (host_[3 + n:] == 77).all():
            raise AssertionError(f"philox {fn.__name__}: wrote outside its range")
        equal(f"philox {fn.__name__} {np.dtype(dt).name} bits", host_[3:3 + n].view(np.uint8),
              ref(2024, 5, n, dt).view(np.uint8))
    ct.manual_seed(7)
    d = ct.nn.functional.dropout(ct.ones(n, device=DEV), 0.25)
    frac = float((d == 0).float().mean())
    if not 0.1 < frac < 0.4:
        raise AssertionError(f"dropout zeroed {frac:.2f} of the elements, not about 0.25")


def fft():
    n1, n2 = (8, 6) if TINY else (48, 37)          # Stockham radices 2 and 3; Bluestein for 37
    for n in (n1, n2):
        z = (arr(3, n) + 1j * arr(3, n)).astype(np.complex64)
        close(f"fft {n}", ct.fft.fft(C(z)), torch.fft.fft(T(z)), 1e-4, 1e-5)
        close(f"ifft {n}", ct.fft.ifft(C(z)), torch.fft.ifft(T(z)), 1e-4, 1e-5)
    r = arr(2, 2 * n1)
    close("rfft", ct.fft.rfft(C(r)), torch.fft.rfft(T(r)), 1e-4, 1e-5)


# ----------------------------------------------------------------------------------------------- stress cases
# SIZE "stress": the shapes that stress launch geometry (backend/geometry.py) under each vendor's emulated limits
# (the profile's [limits]: NVIDIA 1,024 work-items per group, (1024, 1024, 64) per dimension, 65,535 work-groups in
# dimensions 1 and 2, 48 KiB local memory; AMD; Intel GPU 512; Apple 256 and 32 KiB): 1 x 1 outputs, N x C far above
# 64 (8 x 96 planes, the global pooling that every ResNet- or MobileNet-style model ends with), more than 65,535
# rows (ROWS, with 1 or 2 columns: cheap), very short and very long rows, empty tensors. Small tensors wherever the
# geometry, not the size, is the point.
ROWS = 70001


def elementwise_stress():
    close("empty + 1", C(arr(0, 5)) + 1, T(arr(0, 5)) + 1)
    one = arr(1, 1)
    close("1 x 1 exp", ct.exp(C(one)), torch.exp(T(one)), 1e-6, 0)
    m = arr(ROWS, 2)
    close("rows x 2, broadcast column", C(m) * C(m[:, :1]), T(m) * T(m[:, :1]))
    close("2 x rows, transposed", C(m).t() + C(m[:, 1:]).t(), T(m).t() + T(m[:, 1:]).t())
    long = arr(1, ROWS)
    close("one long row, tanh", ct.tanh(C(long)), torch.tanh(T(long)), 1e-5, 1e-6)


def reduction_stress():
    m = arr(ROWS, 2)
    for dim in (0, 1):
        close(f"rows x 2 sum dim {dim}", C(m).sum(dim), T(m.astype(np.float64)).sum(dim), 1e-5, 2e-3)
        close(f"rows x 2 amax dim {dim}", C(m).amax(dim), T(m).amax(dim), 0, 0)
        equal(f"rows x 2 argmax dim {dim}", C(m).argmax(dim), T(m).argmax(dim))
    t = m.T.copy()
    close("2 x rows sum dim 1 (long rows)", C(t).sum(1), T(t.astype(np.float64)).sum(1), 1e-5, 2e-3)
    planes = arr(8 * 96, 49)
    close("768 planes of 49, mean", C(planes).mean(1), T(planes).mean(1), 1e-5, 1e-6)
    one = arr(1, 1)
    close("1 x 1 sum dim 1", C(one).sum(1), T(one).sum(1), 0, 0)
    close("empty sum dim 0", C(arr(0, 3)).sum(0), T(arr(0, 3)).sum(0))
    close("empty rows sum dim 1", C(arr(3, 0)).sum(1), T(arr(3, 0)).sum(1))
    close("rows x 2 var dim 1", C(m).var(1), T(m).var(1), 1e-4, 1e-5)


def gemm_stress():
    a, b = arr(1, 300), arr(300, 1)
    close("1 x 1 output (K 300)", C(a) @ C(b), T(a.astype(np.float64)) @ T(b.astype(np.float64)), 1e-5, 1e-5)
    a, b = arr(ROWS, 2), arr(2, 3)
    close("rows x 2 @ 2 x 3", C(a) @ C(b), T(a) @ T(b), 1e-5, 1e-6)
    a, b = arr(3, ROWS), arr(ROWS, 2)
    close("long K", C(a) @ C(b), T(a.astype(np.float64)) @ T(b.astype(np.float64)), 1e-4, 5e-3)
    a, b = arr(ROWS, 1, 2), arr(ROWS, 2, 1)
    close("bmm, rows batches of 1 x 1", ct.bmm(C(a), C(b)), torch.bmm(T(a), T(b)), 1e-5, 1e-6)
    close("empty M", C(arr(0, 3)) @ C(arr(3, 4)), T(arr(0, 3)) @ T(arr(3, 4)))
    close("empty K", C(arr(3, 0)) @ C(arr(0, 4)), T(arr(3, 0)) @ T(arr(0, 4)))
    fwd_bwd("linear, rows", lambda x, w: ct.nn.functional.linear(x, w), lambda x, w: torch.nn.functional.linear(x, w),
            [(arr(ROWS, 2), True), (arr(3, 2), True)], 1e-4, 1e-5)


def conv_stress():
    F_, TF = ct.nn.functional, torch.nn.functional
    fwd_bwd("conv2d to 1 x 1", lambda x, w: F_.conv2d(x, w), lambda x, w: TF.conv2d(x, w),
            [(arr(2, 3, 3, 3), True), (arr(4, 3, 3, 3), True)], 1e-4, 1e-5)
    fwd_bwd("depthwise 3 x 3, 8 x 96 planes", lambda x, w: F_.conv2d(x, w, None, 1, 1, 1, 96),
            lambda x, w: TF.conv2d(x, w, None, 1, 1, 1, 96), [(arr(8, 96, 7, 7), True), (arr(96, 1, 3, 3), True)],
            1e-4, 1e-5)
    fwd_bwd("pointwise 1 x 1, 8 x 96 planes", lambda x, w: F_.conv2d(x, w), lambda x, w: TF.conv2d(x, w),
            [(arr(8, 96, 7, 7), True), (arr(24, 96, 1, 1), True)], 1e-4, 1e-5)
    fwd_bwd("conv1d, one long row", lambda x, w: F_.conv1d(x, w, padding=1), lambda x, w: TF.conv1d(x, w, padding=1),
            [(arr(1, 1, ROWS), True), (arr(2, 1, 3), True)], 1e-4, 1e-5)
    fwd_bwd("conv1d, rows samples", lambda x, w: F_.conv1d(x, w), lambda x, w: TF.conv1d(x, w),
            [(arr(ROWS, 1, 3), True), (arr(2, 1, 2), True)], 1e-4, 1e-4)
    close("conv2d, empty batch", F_.conv2d(C(arr(0, 3, 5, 5)), C(arr(2, 3, 3, 3))),
          TF.conv2d(T(arr(0, 3, 5, 5)), T(arr(2, 3, 3, 3))))


def pool_stress():
    F_, TF = ct.nn.functional, torch.nn.functional
    g = arr(8, 96, 7, 7)
    g[0, 0, 3, 3] = np.nan
    g[1, 2, :, :] = -np.inf
    g[2, 3, 1, 1] = g[2, 3, 5, 5] = 9.0                       # a tie: the first wins
    for cl in (False, True):
        fmt = " channels_last" if cl else ""
        to = (lambda t: t.contiguous(memory_format=ct.channels_last)) if cl else (lambda t: t)
        tt = (lambda t: t.contiguous(memory_format=torch.channels_last)) if cl else (lambda t: t)
        fwd_bwd("global avg 8 x 96" + fmt, lambda x: F_.adaptive_avg_pool2d(to(x), 1),
                lambda x: TF.adaptive_avg_pool2d(tt(x), 1), [(arr(8, 96, 7, 7), True)], 1e-5, 1e-6)
        y, i = F_.adaptive_max_pool2d(to(C(g)), 1, return_indices=True)
        ry, ri = TF.adaptive_max_pool2d(tt(T(g)), 1, return_indices=True)
        close("global max 8 x 96" + fmt, y, ry, 0, 0)
        equal("global max indices (NaN, -inf, ties)" + fmt, i, ri)
        if tuple(y.stride()) != tuple(ry.stride()):
            raise AssertionError(f"global max{fmt}: strides {tuple(y.stride())} != torch's {tuple(ry.stride())}")
    fwd_bwd("global max 8 x 96 backward", lambda x: F_.adaptive_max_pool2d(x, 1), lambda x: TF.adaptive_max_pool2d(x, 1),
            [(arr(8, 96, 7, 7), True)], 1e-5, 1e-6)
    g64 = arr(8, 96, 4, 4, dtype=np.float64)
    close("global avg float64", F_.adaptive_avg_pool2d(C(g64), 1), TF.adaptive_avg_pool2d(T(g64), 1), 1e-12, 0)
    fwd_bwd("avg_pool2d, one window of the plane", lambda x: F_.avg_pool2d(x, 7), lambda x: TF.avg_pool2d(x, 7),
            [(arr(8, 96, 7, 7), True)], 1e-5, 1e-6)
    fwd_bwd("global avg 1-d", lambda x: F_.adaptive_avg_pool1d(x, 1), lambda x: TF.adaptive_avg_pool1d(x, 1),
            [(arr(8, 96, 49), True)], 1e-5, 1e-6)
    v = arr(2, 40, 3, 4, 5)
    y, i = F_.adaptive_max_pool3d(C(v), 1, return_indices=True)
    ry, ri = TF.adaptive_max_pool3d(T(v), 1, return_indices=True)
    close("global max 3-d", y, ry, 0, 0)
    equal("global max 3-d indices", i, ri)
    fwd_bwd("global avg 3-d", lambda x: F_.adaptive_avg_pool3d(x, 1), lambda x: TF.adaptive_avg_pool3d(x, 1),
            [(v, True)], 1e-5, 1e-6)
    fwd_bwd("max_pool2d, rows planes (tiling)", lambda x: F_.max_pool2d(x, 2), lambda x: TF.max_pool2d(x, 2),
            [(arr(1, ROWS, 2, 2), True)])
    fwd_bwd("avg_pool2d, rows planes", lambda x: F_.avg_pool2d(x, 3, 1, 1), lambda x: TF.avg_pool2d(x, 3, 1, 1),
            [(arr(ROWS, 1, 2, 2), True)])
    fwd_bwd("max_pool1d, one long row", lambda x: F_.max_pool1d(x, 3, 2), lambda x: TF.max_pool1d(x, 3, 2),
            [(arr(1, 1, ROWS), True)])
    fwd_bwd("max_pool2d of 1 x 1 planes", lambda x: F_.max_pool2d(x, 1), lambda x: TF.max_pool2d(x, 1),
            [(arr(2, 3, 1, 1), True)])
    close("max_pool2d, empty batch", F_.max_pool2d(C(arr(0, 3, 4, 4)), 2), TF.max_pool2d(T(arr(0, 3, 4, 4)), 2))
    close("adaptive avg, empty batch", F_.adaptive_avg_pool2d(C(arr(0, 3, 4, 4)), 1),
          TF.adaptive_avg_pool2d(T(arr(0, 3, 4, 4)), 1))
    # (a launch over more work-groups than a dimension allows runs in parts: test_kernel_configs.py's
    # test_launch_in_parts fakes a small limit for that, as rows x 65 here would cost 18 MB)
    fwd_bwd("reflect pad, rows of 3", lambda x: F_.pad(x, (0, 0, 2, 1), mode="reflect"),
            lambda x: TF.pad(x, (0, 0, 2, 1), mode="reflect"), [(arr(1, 1, ROWS, 3), True)])
    fwd_bwd("bilinear upsampling, 8 x 96 planes", lambda x: F_.interpolate(x, scale_factor=2, mode="bilinear"),
            lambda x: TF.interpolate(x, scale_factor=2, mode="bilinear"), [(arr(8, 96, 2, 3), True)])


def norm_stress():
    F_, TF = ct.nn.functional, torch.nn.functional
    # (float64: the gradient of a 2-element layer_norm is ill-conditioned where the two are close)
    fwd_bwd("layer_norm, rows x 2", lambda x: F_.layer_norm(x, (2,)), lambda x: TF.layer_norm(x, (2,)),
            [(arr(ROWS, 2, dtype=np.float64), True)], 1e-9, 1e-9)
    L = ROWS
    fwd_bwd("layer_norm, one long row", lambda x, w: F_.layer_norm(x, (L,), w), lambda x, w: TF.layer_norm(x, (L,), w),
            [(arr(1, L), True), (arr(L), True)], 1e-4, 1e-5)
    fwd_bwd("batch_norm, 8 x 96 of 1 x 1", lambda x, w, b: F_.batch_norm(x, None, None, w, b, training=True),
            lambda x, w, b: TF.batch_norm(x, None, None, w, b, training=True),
            [(arr(8, 96, 1, 1), True), (arr(96), True), (arr(96), True)], 1e-4, 1e-5)
    fwd_bwd("batch_norm, rows samples", lambda x: F_.batch_norm(x, None, None, training=True),
            lambda x: TF.batch_norm(x, None, None, training=True), [(arr(ROWS, 2), True)], 1e-4, 1e-5)
    fwd_bwd("group_norm, 8 x 96", lambda x: F_.group_norm(x, 32), lambda x: TF.group_norm(x, 32),
            [(arr(8, 96, 3, 3), True)], 1e-4, 1e-5)
    fwd_bwd("rms_norm, rows x 2", lambda x: F_.rms_norm(x, (2,)), lambda x: TF.rms_norm(x, (2,)),
            [(arr(ROWS, 2), True)], 1e-4, 1e-5)
    close("layer_norm, empty batch", F_.layer_norm(C(arr(0, 5)), (5,)), TF.layer_norm(T(arr(0, 5)), (5,)))


def softmax_stress():
    m = arr(ROWS, 2) * 4
    for dim in (1, 0):
        fwd_bwd(f"softmax rows x 2 dim {dim}", lambda x: ct.softmax(x, dim), lambda x: torch.softmax(x, dim),
                [(m, True)], 1e-4, 1e-6)
    fwd_bwd("log_softmax, one long row", lambda x: ct.log_softmax(x, 1), lambda x: torch.log_softmax(x, 1),
            [(arr(1, ROWS) * 4, True)], 1e-4, 1e-5)
    fwd_bwd("softmax 3 x 1", lambda x: ct.softmax(x, 1), lambda x: torch.softmax(x, 1), [(arr(3, 1), True)])
    close("softmax, empty", ct.softmax(C(arr(0, 5)), 1), torch.softmax(T(arr(0, 5)), 1))


def loss_stress():
    F_, TF = ct.nn.functional, torch.nn.functional
    tgt = rng.integers(0, 2, ROWS)
    fwd_bwd("cross_entropy, rows x 2", lambda x: F_.cross_entropy(x, ct.from_numpy(tgt).to(DEV)),
            lambda x: TF.cross_entropy(x, torch.from_numpy(tgt)), [(arr(ROWS, 2) * 3, True)], 1e-4, 1e-6,
            seed_grad=False)
    t1 = rng.integers(0, ROWS, 1)
    fwd_bwd("cross_entropy, one long row", lambda x: F_.cross_entropy(x, ct.from_numpy(t1).to(DEV)),
            lambda x: TF.cross_entropy(x, torch.from_numpy(t1)), [(arr(1, ROWS), True)], 1e-4, 1e-6,
            seed_grad=False)
    fwd_bwd("nll_loss sum, rows x 2", lambda x: F_.nll_loss(x, ct.from_numpy(tgt).to(DEV), reduction="sum"),
            lambda x: TF.nll_loss(x, torch.from_numpy(tgt), reduction="sum"), [(arr(ROWS, 2), True)], 1e-4, 1e-4,
            seed_grad=False)
    fwd_bwd("mse_loss, rows x 1", lambda x, y: F_.mse_loss(x, y), lambda x, y: TF.mse_loss(x, y),
            [(arr(ROWS, 1), True), (arr(ROWS, 1), False)], 1e-5, 1e-6, seed_grad=False)
    e = np.zeros(0, np.int64)
    close("cross_entropy sum, empty batch", F_.cross_entropy(C(arr(0, 3)), ct.from_numpy(e).to(DEV), reduction="sum"),
          TF.cross_entropy(T(arr(0, 3)), torch.from_numpy(e), reduction="sum"))


def sdpa_stress():
    f_ct = ct.nn.functional.scaled_dot_product_attention
    f_t = torch.nn.functional.scaled_dot_product_attention
    fwd_bwd("sdpa L = S = 1", f_ct, f_t, [(arr(2, 3, 1, 8), True), (arr(2, 3, 1, 8), True), (arr(2, 3, 1, 8), True)],
            1e-4, 1e-5)
    fwd_bwd("sdpa, rows batches", f_ct, f_t, [(arr(ROWS, 1, 2, 4), True), (arr(ROWS, 1, 3, 4), True),
                                             (arr(ROWS, 1, 3, 4), True)], 1e-4, 1e-5)
    S = 2049
    fwd_bwd("sdpa, long S", f_ct, f_t, [(arr(1, 1, 2, 16), True), (arr(1, 1, S, 16), True),
                                       (arr(1, 1, S, 16), True)], 1e-4, 1e-5)
    close("sdpa, empty batch", f_ct(C(arr(0, 2, 3, 8)), C(arr(0, 2, 3, 8)), C(arr(0, 2, 3, 8))),
          f_t(T(arr(0, 2, 3, 8)), T(arr(0, 2, 3, 8)), T(arr(0, 2, 3, 8))))


def scan_sort_stress():
    m = arr(ROWS, 2)
    for dim in (1, 0):
        close(f"cumsum rows x 2 dim {dim}", ct.cumsum(C(m), dim), torch.cumsum(T(m.astype(np.float64)), dim),
              1e-5, 1e-3)
        v, i = ct.cummax(C(m), dim)
        rv, ri = torch.cummax(T(m), dim)
        close(f"cummax dim {dim}", v, rv, 0, 0)
        equal(f"cummax indices dim {dim}", i, ri)
        s, si = ct.sort(C(m), dim, stable=True)
        rs, rsi = torch.sort(T(m), dim=dim, stable=True)
        close(f"sort rows x 2 dim {dim}", s, rs, 0, 0)
        equal(f"sort indices dim {dim}", si, rsi)
    long = arr(1, ROWS)
    close("cumsum, one long row", ct.cumsum(C(long), 1), torch.cumsum(T(long.astype(np.float64)), 1), 1e-5, 1e-3)
    tv, ti = ct.topk(C(long), 5, 1)
    rv, ri = torch.topk(T(long), 5, 1)
    close("topk, one long row", tv, rv, 0, 0)
    equal("topk indices", ti, ri)
    s, si = ct.sort(C(arr(0, 3)), 1)
    close("sort, empty", s, torch.sort(T(arr(0, 3)), 1)[0])
    one = arr(1, 1)
    close("cumsum 1 x 1", ct.cumsum(C(one), 1), torch.cumsum(T(one), 1), 0, 0)


def index_stress():
    a = arr(ROWS, 2)
    idx = rng.integers(0, ROWS, ROWS).astype(np.int64)
    close("index_select, rows indices", ct.index_select(C(a), 0, C(idx)), torch.index_select(T(a), 0, T(idx)), 0, 0)
    g = rng.integers(0, 2, a.shape).astype(np.int64)
    close("gather rows x 2", ct.gather(C(a), 1, C(g)), torch.gather(T(a), 1, T(g)), 0, 0)
    close("scatter_add rows x 2", ct.zeros(a.shape, device=DEV).scatter_add(1, C(g), C(a)),
          torch.zeros(a.shape).scatter_add(1, T(g), T(a)), 1e-5, 1e-6)
    m = a > 0.2
    close("masked_select rows x 2", C(a)[C(m)], T(a)[T(m)], 0, 0)
    equal("nonzero rows x 2", ct.nonzero(C(m)), torch.nonzero(T(m)))
    x, y = ct.zeros(ROWS, device=DEV), torch.zeros(ROWS)
    vals = arr(ROWS)
    x.index_put_((C(idx),), C(vals), accumulate=True)
    y.index_put_((T(idx),), T(vals), accumulate=True)
    close("index_put accumulate, rows", x, y, 1e-5, 1e-6)
    e = np.zeros(0, np.int64)
    close("index_select, no indices", ct.index_select(C(a), 0, C(e)), torch.index_select(T(a), 0, T(e)))
    one = arr(1, 1)
    close("gather 1 x 1", ct.gather(C(one), 1, C(np.zeros((1, 1), np.int64))),
          torch.gather(T(one), 1, torch.zeros((1, 1), dtype=torch.int64)), 0, 0)


def optim_stress():
    # against PyTorch's formulas in float64 numpy (torch.optim's first step costs 1.7 s of imports; the edge cases
    # compare with torch.optim itself)
    lr, mom, b1, b2, eps = 0.01, 0.9, 0.9, 0.999, 1e-8
    for name in ("Adam", "SGD"):
        ws = [arr(1), arr(ROWS), arr(0)]
        ps = [ct.nn.Parameter(C(w)) for w in ws]
        ref = [w.astype(np.float64) for w in ws]
        st = [[np.zeros_like(w), np.zeros_like(w)] for w in ref]
        o = ct.optim.Adam(ps, lr=lr) if name == "Adam" else ct.optim.SGD(ps, lr=lr, momentum=mom)
        for step in range(1, 3):
            for p, w, (m, v) in zip(ps, ref, st):
                gr = arr(*w.shape)
                p.grad = C(gr)
                g = gr.astype(np.float64)
                if name == "Adam":
                    m[:] = b1 * m + (1 - b1) * g
                    v[:] = b2 * v + (1 - b2) * g * g
                    w -= lr / (1 - b1 ** step) * m / (np.sqrt(v) / np.sqrt(1 - b2 ** step) + eps)
                else:
                    m[:] = g if step == 1 else mom * m + g
                    w -= lr * m
            o.step()
        for i, (p, w) in enumerate(zip(ps, ref)):
            close(f"{name} parameter of {w.size} after 2 steps", p, w, 1e-5, 1e-6)


def rnn_stress():
    torch.manual_seed(0)
    for kind, (T_, B, I, H) in (("GRU", (2, ROWS, 2, 2)), ("LSTM", (3, 1, 1, 1))):
        ref = getattr(torch.nn, kind)(I, H)
        mod = getattr(ct.nn, kind)(I, H).to(DEV)
        _rnn_against_torch(f"{kind} {T_}x{B}x{I}, hidden {H}:", mod, ref, arr(T_, B, I))


def philox_stress():
    from cltorch.backend import runtime
    from cltorch.ops import _philox_launch as L, _philox_ref as R
    import pyopencl as cl
    rt = runtime(ct.device(DEV).index if ct.device(DEV).index is not None else 0)
    for n in (1, ROWS):
        host_ = np.full(n + 2, 77, np.float32)
        buf = cl.Buffer(rt.ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=host_)
        L.fill_uniform(rt, buf, 1, n, np.float32, 99, 3)
        cl.enqueue_copy(rt.queue, host_, buf)
        rt.queue.finish()
        if host_[0] != 77 or host_[n + 1] != 77:
            raise AssertionError(f"philox uniform of {n}: wrote outside its range")
        equal(f"philox uniform of {n}", host_[1:1 + n].view(np.uint8), R.uniform(99, 3, n, np.float32).view(np.uint8))
    if L.fill_uniform(rt, buf, 0, 0, np.float32, 99, 3) != 0:
        raise AssertionError("philox: an empty fill launched")
    if tuple(ct.rand(0, 3, device=DEV).shape) != (0, 3):
        raise AssertionError("rand of an empty shape")


def fft_stress():
    z = (arr(ROWS, 2) + 1j * arr(ROWS, 2)).astype(np.complex64)
    close("fft of rows x 2", ct.fft.fft(C(z)), torch.fft.fft(T(z)), 1e-5, 1e-5)
    r = arr(ROWS, 4)
    close("rfft of rows x 4", ct.fft.rfft(C(r)), torch.fft.rfft(T(r)), 1e-5, 1e-5)
    b = arr(1, ROWS)                                  # Bluestein: 70001 is not smooth
    close("rfft, one long row", ct.fft.rfft(C(b)), torch.fft.rfft(T(b.astype(np.float64))), 1e-4, 1e-2)
    close("fft of length 1", ct.fft.fft(C(z[:3, :1])), np.fft.fft(z[:3, :1]), 0, 0)     # (torch's MKL refuses n = 1)
    close("fft, empty batch", ct.fft.fft(C(z[:0])), np.fft.fft(z[:0]))


# ----------------------------------------------------------------------------------------------- the table
# One row per op family: (name, edge/tiny case, stress case). The first runs for SIZE "edge" and "tiny" (it reads
# TINY), the second for SIZE "stress". A new family adds one row; tests/test_kernel_configs.py checks that every
# row ran.
CASES = [
    ("elementwise", elementwise, elementwise_stress),
    ("reduction", reduction, reduction_stress),
    ("gemm", gemm, gemm_stress),
    ("conv", conv, conv_stress),
    ("pool", pool, pool_stress),
    ("norm", norm, norm_stress),
    ("softmax", softmax, softmax_stress),
    ("loss", loss, loss_stress),
    ("sdpa", sdpa, sdpa_stress),
    ("scan_sort", scan_sort, scan_sort_stress),
    ("index", index, index_stress),
    ("optim", optim, optim_stress),
    ("rnn", rnn, rnn_stress),
    ("philox", philox, philox_stress),
    ("fft", fft, fft_stress),
]


def main():
    only = set(sys.argv[3].split(",")) if len(sys.argv) > 3 else None
    from cltorch.backend import runtime
    idx = ct.device(DEV).index
    prof = runtime(idx if idx is not None else 0).profile
    families, results = {}, {}
    for mode in SIZE.split("+"):          # e.g. "edge+stress": both in one process (one import, shared kernels)
        col = 2 if mode == "stress" else 1
        families[mode] = [row[0] for row in CASES if row[col] is not None]
        results[mode] = res = {}
        for row in CASES:
            name, fn = row[0], row[col]
            if fn is None or (only and name not in only):
                continue
            print(f"case {name}", file=sys.stderr, flush=True)   # Oclgrind's reports follow their case
            t0 = time.process_time()
            try:
                fn()
                ct.cl.synchronize()
                res[name] = None
            except Exception as e:  # noqa: BLE001 - every failure is reported, with its traceback
                res[name] = f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=4)}"
            print(f"time {mode} {name} {time.process_time() - t0:.2f} s of CPU", file=sys.stderr, flush=True)
    print(json.dumps({"profile": prof.name, "sources": prof.sources, "platform": runtime(idx or 0).info.platform,
                      "families": families, "cases": results}))


if __name__ == "__main__":
    main()
