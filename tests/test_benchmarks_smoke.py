"""``benchmarks/run.py --quick`` runs every benchmark and prints one table: a smoke test (it asserts no speed)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"


@pytest.mark.timeout(600)          # the child's own limit (every benchmark, kernels built on a cold cache)
def test_run_quick_prints_every_benchmark(tmp_path):
    pytest.importorskip("sklearn")                  # bench_train and bench_startup use the digits example's data
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    out_md = tmp_path / "bench.md"
    r = subprocess.run([sys.executable, str(BENCH / "run.py"), "--quick", "--out", str(out_md),
                        "--logs", str(tmp_path / "logs")], cwd=str(ROOT), env=env, capture_output=True, text=True,
                       timeout=600)
    out = r.stdout
    assert r.returncode == 0, f"exit {r.returncode}\n{out[-4000:]}\n{r.stderr[-3000:]}"
    names = sorted(p.stem for p in BENCH.glob("bench_*.py"))
    for n in names:                                   # each benchmark reported, none failed
        assert re.search(rf"^- {n}: \d+ cases in", out, re.M), f"{n} missing or failed:\n{out[-4000:]}"
    lines = [ln for ln in out.splitlines() if ln.startswith("| ")]
    assert lines and lines[0].startswith("| benchmark | case | unit | ours |"), out
    rows = lines[1:]
    for n in names:
        assert any(ln.startswith(f"| {n[len('bench_'):]} |") for ln in rows), n
    # every row has a number for ours, and the bars' verdicts are one of yes / NO / —
    for ln in rows:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        assert re.match(r"^-?[\d,.]+(e[-+]?\d+)?$", cells[3]), ln
        assert cells[-2] in ("yes", "**NO**", "—"), ln
    assert re.search(r"^Bars: \d+ met, \d+ missed", out, re.M)
    assert out_md.read_text().count("| benchmark | case |") == 1
