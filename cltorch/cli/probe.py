"""``cltorch probe``: a conformance self-test and microbenchmarks on each OpenCL device; ``--tune`` searches
GEMM tile parameters (the CPU design's register blocks, or the GPU design's tiles and split-K threshold within
``--tune-budget`` seconds) and writes a tuned profile to the user's config dir (preferred over ``devices/``).

Checks (each against a numpy reference): elementwise on strided views, reductions, GEMM, softmax, SDPA
(fused against the composed math), and Philox (bit-identical to the numpy reference). Benchmarks: device
copy bandwidth (GB/s), fp32 GEMM (GFLOP/s), and queued launch latency (microseconds per op).
Exit status 1 when any check fails.
"""
import json
import statistics
import time

import numpy as np

from .. import backend


def _checks(dev, quick):
    import cltorch as torch
    import cltorch.nn.functional as F
    rng = np.random.default_rng(0)
    out = []

    def check(name, fn):
        try:
            err = fn()
            ok = err is True or (err is not False and err < 1e-4)
            out.append({"check": name, "ok": bool(ok), "max_rel_err": None if isinstance(err, bool) else float(err)})
        except Exception as e:  # a failed check is reported, not raised
            out.append({"check": name, "ok": False, "error": f"{type(e).__name__}: {e}"})

    def rel(a, b):
        a = np.asarray(a, np.float64)
        b = np.asarray(b, np.float64)
        return float(np.max(np.abs(a - b)) / (np.max(np.abs(b)) + 1e-12))

    a = rng.standard_normal((67, 45)).astype(np.float32)
    b = rng.standard_normal((45, 67)).astype(np.float32)
    ta, tb = torch.tensor(a, device=dev), torch.tensor(b, device=dev)
    check("elementwise (strided views, broadcast, exp/tanh)",
          lambda: rel((ta.t()[::2] * 2 + tb[::2].tanh()).exp().cpu().numpy(),
                      np.exp(a.T[::2] * 2 + np.tanh(b[::2]))))
    check("reductions (sum, amax, argmax, var)", lambda: max(
        rel(ta.sum(0).cpu().numpy(), a.sum(0)), rel(ta.amax(1).cpu().numpy(), a.max(1)),
        0.0 if ta.argmax().item() == int(a.argmax()) else 1.0, rel(ta.var(1).cpu().numpy(), a.var(1, ddof=1))))
    check("GEMM (transposed operand)", lambda: rel((ta @ ta.t()).cpu().numpy(), a @ a.T))
    check("softmax and log_softmax", lambda: max(
        rel(F.softmax(ta * 30, 1).cpu().numpy(), _softmax(a * 30)),
        rel(F.log_softmax(ta, 0).cpu().numpy(), np.log(_softmax(a.T)).T)))
    q = torch.tensor(rng.standard_normal((2, 2, 33, 16)).astype(np.float32), device=dev)
    k = torch.tensor(rng.standard_normal((2, 2, 40, 16)).astype(np.float32), device=dev)
    v = torch.tensor(rng.standard_normal((2, 2, 40, 16)).astype(np.float32), device=dev)

    def sdpa():
        ref = _sdpa_np(q.cpu().numpy(), k.cpu().numpy(), v.cpu().numpy(), causal=True)
        return rel(F.scaled_dot_product_attention(q, k, v, is_causal=True).cpu().numpy(), ref)
    check("scaled_dot_product_attention (causal, L != S)", sdpa)

    def philox():
        from ..ops import _philox_ref as REF
        g = torch.Generator().manual_seed(1234)
        t = torch.rand(64, generator=g, device=dev).cpu().numpy()
        w = REF.random_words(1234, 0, 16).reshape(-1)
        ref = (w >> np.uint32(8)).astype(np.float32) * np.float32(2.0 ** -24)
        return t.tobytes() == ref.tobytes()
    check("Philox4x32-10 draws bit-identical to the numpy reference", philox)
    return out


def _softmax(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _sdpa_np(q, k, v, causal):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        L, S = s.shape[-2:]
        s = np.where(np.tril(np.ones((L, S), bool)), s, -np.inf)
    s = s - s.max(-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(-1, keepdims=True)
    return p @ v


def _bench(dev, quick):
    import cltorch as torch
    res = {}
    n = (1 << 22) if quick else (1 << 24)
    x = torch.empty(n, device=dev)
    x.fill_(1.0)
    reps = 3 if quick else 7

    def timed(fn, inner=1):
        fn()
        torch.cl.synchronize()
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            torch.cl.synchronize()
            ts.append((time.perf_counter() - t0) / inner)
        return statistics.median(ts)
    t = timed(lambda: x.clone())
    res["copy_GBps"] = 2 * n * 4 / t / 1e9
    m = 512 if quick else 1024
    a = torch.randn(m, m, device=dev)
    b = torch.randn(m, m, device=dev)
    t = timed(lambda: a @ b)
    res["gemm_fp32_GFLOPs"] = 2 * m ** 3 / t / 1e9
    res["gemm_size"] = m
    s = torch.ones(1000, device=dev)
    for _ in range(100):
        s + s
    torch.cl.synchronize()
    t0 = time.perf_counter()
    for _ in range(2000):
        s + s
    t1 = time.perf_counter()
    torch.cl.synchronize()
    res["launch_latency_us"] = (t1 - t0) / 2000 * 1e6
    return res


def _timer(torch, reps):
    def best_of(fn):
        fn()
        torch.cl.synchronize()
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            torch.cl.synchronize()
            ts.append(time.perf_counter() - t0)
        return min(ts)
    return best_of


def _tune(dev, quick, budget_s=None, space=None, sizes=None, split_shapes=None):
    """Search GEMM tiles for the device's design and write the best into the tuned profile (the user's config
    dir, ``CLTORCH_CONFIG_DIR``); returns ``{"profile": path, "gemm": [per-size report]}``.

    CPU design: register-blocking rows for two size classes. GPU design (:func:`_tune_gpu`): tile rows (bm, bn, bk,
    tm, tn, vw) per size class within ``budget_s`` seconds, then the split-K threshold. ``space``, ``sizes``,
    ``split_shapes`` narrow the GPU search (tests run it on a CPU device under a GPU profile)."""
    import cltorch as torch
    from ..ops import gemm as _gemm
    from ..backend.profile import tuned_profile_path
    d = torch.device(dev)
    rt = backend.runtime(d.index)
    g = dict(rt.profile.get("gemm", {}))
    try:
        if _gemm.design(rt.profile) == "gpu":
            table, report = _tune_gpu(torch, rt, g, quick, budget_s, space, sizes, split_shapes)
        else:
            table, report = _tune_cpu(torch, rt, g, quick)
    finally:
        rt.profile["gemm"] = g
        _gemm.clear_cache()
    path = tuned_profile_path(rt.info)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# Written by `cltorch probe --tune`; preferred over the shipped devices/ profiles.",
             f"# device: {rt.info.name} ({rt.info.driver_version})", "[gemm]"]
    for k, v in table.items():
        if k != "sizes":
            lines.append(f"{k} = {json.dumps(v)}")
    lines.append("sizes = [")
    for row in table["sizes"]:
        lines.append("  { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in row.items()) + " },")
    lines.append("]")
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)
    return {"profile": str(path), "gemm": report}


def _tune_cpu(torch, rt, g, quick):
    """The CPU design: register-blocking rows for two size classes (the row for up to 384^3 and the rest)."""
    from ..ops import gemm as _gemm
    cands = [dict(mr=mr, nv=nv, vw=8, lx=lx, ly=ly) for mr in (4, 6, 8) for nv in (1, 2)
             for lx, ly in ((8, 8), (4, 8), (16, 4))]
    sizes = [(384, 256), (None, 512 if quick else 1024)]
    shipped_rows = list(g.get("sizes", []) or [{}])
    best_rows = []
    report = []
    best_of = _timer(torch, 3)
    for upto, m in sizes:
        a = torch.randn(m, m, device=f"cl:{rt.index}")
        b = torch.randn(m, m, device=f"cl:{rt.index}")

        def time_row(row):
            rt.profile["gemm"] = dict(g, sizes=[row])
            _gemm.clear_cache()
            return best_of(lambda: a @ b)
        shipped = _gemm.plan.row_for(shipped_rows, m)
        base_t = time_row({k: v for k, v in shipped.items() if k != "upto"})
        best, best_t = None, base_t
        for c in cands:
            row = dict({k: v for k, v in shipped.items() if k not in ("upto",)}, **c)
            try:
                t = time_row(row)
            except Exception:
                continue
            if t < best_t:
                best, best_t = row, t
        chosen = best or {k: v for k, v in shipped.items() if k != "upto"}
        if upto is not None:
            chosen = dict(chosen, upto=upto)
        best_rows.append(chosen)
        report.append({"size": m, "shipped_GFLOPs": 2 * m ** 3 / base_t / 1e9,
                       "tuned_GFLOPs": 2 * m ** 3 / best_t / 1e9, "speedup": base_t / best_t})
    return {"design": "cpu", "sizes": best_rows}, report


# The GPU design's search space: every combination that makes a kernel within the device's limits, with at most
# 64 accumulators per work-item and 32 to 256 work-items per group; each with and without a cap of 128 registers
# where the compiler takes one (NVIDIA: `regs`).
GPU_SPACE = {"bm": (128, 64, 32), "bn": (128, 64, 32), "bk": (8, 16, 32), "tm": (8, 4, 2), "tn": (8, 4, 2),
             "vw": (4, 2)}


def _gpu_candidates(rt, shipped, space):
    """Rows to time, the shipped ones first, then the rest by distance from the largest shipped tile."""
    from ..ops.gemm import plan as P
    from ..backend import geometry
    lim = geometry.limits(rt)
    space = dict(GPU_SPACE, **(space or {}))
    caps = space.get("regs", (0, 128) if "cl_nv_compiler_options" in rt.info.extensions else (0,))
    rows = []
    for bm in space["bm"]:
        for bn in space["bn"]:
            for bk in space["bk"]:
                for tm in space["tm"]:
                    for tn in space["tn"]:
                        for vw in space["vw"]:
                            r = dict(bm=bm, bn=bn, bk=bk, tm=tm, tn=tn, vw=vw)
                            try:
                                P.check_row(r, 4, lim.max_work_group_size, lim.local_mem_size)
                            except P.ProfileRowError:
                                continue
                            threads = (bm // tm) * (bn // tn)
                            if tm * tn <= 64 and 32 <= threads <= 256:
                                rows += [dict(r, regs=c) if c else r for c in caps]
    first = [r for r in shipped if r in rows]
    ref = shipped[0] if shipped else rows[0]
    rest = sorted((r for r in rows if r not in first),
                  key=lambda r: sum(abs(r.get(k, 0) - ref.get(k, 0)) / max(ref.get(k, 0), 1)
                                    for k in set(ref) | set(r)))
    return first + rest


def _tune_gpu(torch, rt, g, quick, budget_s, space, sizes, split_shapes):
    """The GPU design: for each size class (large, medium, small products) the fastest tile row without split-K,
    timed in the order of :func:`_gpu_candidates` until the class's share of ``budget_s`` is spent; the rows
    found, largest tile first, become the table; then ``split_k_min`` is chosen among a few values by timing
    products with few tiles and a long K."""
    from ..ops import gemm as _gemm
    from ..ops.gemm import plan as P
    dev = f"cl:{rt.index}"
    shipped = P.gpu_rows(rt.profile, np.float32)
    cands = _gpu_candidates(rt, shipped, space)
    if sizes is None:
        sizes = [(2048,) * 3, (512,) * 3, (128,) * 3] if quick else [(4096,) * 3, (1024,) * 3, (256,) * 3]
    if split_shapes is None:
        split_shapes = [(512, 512, 2048), (128, 128, 8192)] if quick else [(1024, 1024, 1024), (256, 256, 16384)]
    budget_s = float(budget_s if budget_s is not None else (60 if quick else 150))   # fits a 240 s step
    best_of = _timer(torch, 2 if quick else 3)
    report, found = [], []
    for (M, N, K) in sizes:
        a = torch.randn(M, K, device=dev)
        b = torch.randn(K, N, device=dev)

        def time_rows(rows, **extra):
            rt.profile["gemm"] = dict(g, sizes=rows, **extra)
            _gemm.clear_cache()
            return best_of(lambda: a @ b)
        base_t = time_rows(shipped)
        d = _gemm.describe(rt, M, N, K, 1, np.float32)          # the row the shipped table chose: the one to beat
        best = {k: d[k] for k in ("bm", "bn", "bk", "tm", "tn", "vw")}
        if d.get("regs"):
            best["regs"] = d["regs"]
        best_t = base_t
        t_end = time.perf_counter() + budget_s * 0.8 / len(sizes)
        for r in cands:
            if time.perf_counter() > t_end:
                break
            try:
                t = time_rows([r], split_k=1)
            except Exception:  # noqa: BLE001 - a row the device cannot build or run is skipped
                continue
            if t < best_t:
                best, best_t = r, t
        found.append(best)
        report.append({"size": f"{M}x{N}x{K}", "shipped_GFLOPs": 2 * M * N * K / base_t / 1e9,
                       "tuned_GFLOPs": 2 * M * N * K / best_t / 1e9, "speedup": base_t / best_t, "row": best})
    table_rows = []
    for r in sorted(found, key=lambda r: -r["bm"] * r["bn"]):
        if r not in table_rows:
            table_rows.append(r)
    # split-K threshold: the value with the least total time over the split shapes
    ops = []
    for (M, N, K) in split_shapes:
        ops.append((torch.randn(M, K, device=dev), torch.randn(K, N, device=dev)))

    def total(split_min):
        rt.profile["gemm"] = dict(g, sizes=table_rows, split_k_min=split_min)
        _gemm.clear_cache()
        return sum(best_of(lambda x=x, y=y: x @ y) for x, y in ops)
    shipped_min = int(g.get("split_k_min", 256))
    choices = sorted({shipped_min, 128, 256, 512, 1024, 2 ** 30})
    times = {}
    for v in choices:
        try:
            times[v] = total(v)
        except Exception:  # noqa: BLE001
            continue
    split_min = min(times, key=times.get) if times else shipped_min
    if times:
        report.append({"size": "split-K " + ", ".join("x".join(map(str, s)) for s in split_shapes),
                       "shipped_GFLOPs": sum(2 * m * n * k for m, n, k in split_shapes) / times.get(
                           shipped_min, times[split_min]) / 1e9,
                       "tuned_GFLOPs": sum(2 * m * n * k for m, n, k in split_shapes) / times[split_min] / 1e9,
                       "speedup": times.get(shipped_min, times[split_min]) / times[split_min],
                       "split_k_min": split_min})
    table = {"design": "gpu", "split_k_min": split_min, "sizes": table_rows}
    return table, report


def run(args):
    infos = backend.list_devices()
    if not infos:
        from .devices import HINT
        print(HINT)
        return 1
    # a simulator (Oclgrind) runs every work-item in an interpreter: its probe takes many minutes, so it is probed
    # only when named with --device
    sims = [i for i in infos if "oclgrind" in i.platform.lower()]
    devs = args.device or [f"cl:{i.index}" for i in infos if i not in sims]
    if not args.device and sims:
        import sys
        print("not probed (a simulator; name it with --device to probe it): "
              + ", ".join(f"cl:{i.index} ({i.name})" for i in sims), file=sys.stderr)
    results, failed = [], False
    for dev in devs:
        entry = {"device": dev, "name": None}
        try:
            import cltorch as torch
            entry["name"] = torch.cl.get_device_name(dev) if dev != "cpu" else "cpu (host memory)"
            entry["checks"] = _checks(dev, args.quick)
            entry["bench"] = _bench(dev, args.quick)
            if dev != "cpu":          # which GEMM design each dtype's products take here, and why (matrix units)
                from .devices import gemm_designs
                idx = torch.device(dev).index
                rt = backend.runtime(backend.default_index() if idx is None else idx)
                entry["gemm_designs"] = gemm_designs(rt.info, rt.profile)
            if args.tune and dev != "cpu":
                entry["tune"] = _tune(dev, args.quick, getattr(args, "tune_budget", None))
        except Exception as e:
            entry["error"] = f"{type(e).__name__}: {e}"
        if entry.get("error") or not all(c["ok"] for c in entry.get("checks", [])):
            failed = True
        results.append(entry)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for e in results:
            print(f"== {e['device']}: {e['name']}")
            if e.get("error"):
                print(f"   ERROR {e['error']}")
                continue
            for c in e["checks"]:
                detail = c.get("error") or (f"max rel err {c['max_rel_err']:.2e}" if c.get("max_rel_err") is not None
                                            else "")
                print(f"   {'PASS' if c['ok'] else 'FAIL'}  {c['check']}  {detail}")
            b = e["bench"]
            print(f"   copy bandwidth {b['copy_GBps']:.1f} GB/s; fp32 GEMM {b['gemm_size']}^3 "
                  f"{b['gemm_fp32_GFLOPs']:.1f} GFLOP/s; queued launch {b['launch_latency_us']:.1f} us/op")
            for g in e.get("gemm_designs", []):
                print(f"   GEMM {g['dtype']}: {g['design']} ({g['why']})")
            if "tune" in e:
                for r in e["tune"]["gemm"]:
                    size = f"{r['size']}^3" if isinstance(r["size"], int) else r["size"]
                    print(f"   tune GEMM {size}: shipped {r['shipped_GFLOPs']:.1f} -> tuned "
                          f"{r['tuned_GFLOPs']:.1f} GFLOP/s ({r['speedup']:.2f}x)")
                print(f"   wrote {e['tune']['profile']}")
        checks = [c for e in results for c in e.get("checks", [])]
        passed = sum(1 for c in checks if c["ok"])
        errors = sum(1 for e in results if e.get("error"))
        print(f"{passed} of {len(checks)} checks passed on {len(results)} device(s)"
              + (f"; {len(checks) - passed} FAILED" if passed < len(checks) else "")
              + (f"; {errors} device(s) could not be probed" if errors else ""))
    return 1 if failed else 0
