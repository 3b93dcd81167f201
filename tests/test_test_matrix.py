"""tools/test_matrix.py (README's test command): one pass per working OpenCL CPU runtime, none twice, and every
device without a pass named with its reason; the summary shows pytest's own line."""
import importlib.util
import re
from pathlib import Path

from cltorch import backend
from cltorch.backend import devices

_spec = importlib.util.spec_from_file_location("test_matrix", Path(__file__).parent.parent / "tools" / "test_matrix.py")
TM = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(TM)


def test_one_pass_per_working_cpu_platform():
    passes, notes = TM._plan()
    cpu_platforms = list(dict.fromkeys(d.platform for d in backend.list_devices() if d.cls == "cpu"))
    assert len(passes) == len(cpu_platforms) >= 1
    assert passes[0][1] is None and "Oclgrind checks" in passes[0][0]       # pass 1: default order
    for (title, pattern), platform in zip(passes, cpu_platforms):
        assert title.startswith(platform + ":")
        if pattern is not None:      # the later passes name exactly their platform, and no other listed one
            assert [p for p in cpu_platforms if re.search(pattern, p, re.I)] == [platform]
    for name, platform, reason in devices.unusable_devices():
        assert any(name in n and "left out" in n and reason in n for n in notes)
    for name, platform in devices.simulators():
        assert any(name in n and "simulator" in n for n in notes)


def test_summary_is_pytests_line():
    tail = ["....", "5564 passed, 71 skipped, 7 xfailed, 874 warnings in 3002.31s (0:50:02)",
            "cltorch: saving 1424 newly compiled kernel programs to /x (once per machine)"]
    assert [ln for ln in tail if TM._SUMMARY.search(ln)] == [tail[1]]
    assert TM._SUMMARY.search("1 failed, 80 passed, 3 skipped in 58.71s")
    assert TM._fmt(3051.4) == "50 min 51 s"
