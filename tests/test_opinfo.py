"""PyTorch's OpInfo database against cltorch, as a ratchet.

Every entry of ``torch.testing._internal.common_methods_invocations.op_db`` runs through
``tests/opinfo_runner.py`` on every device (float32, up to 8 samples): values, shapes, dtypes and "both
raise" against torch, and gradients for entries with ``supports_autograd``. ``tests/opinfo_expected.json``
records, per entry, what the last sweep found: an entry with no cltorch counterpart, or a known mismatch.
A test fails when an entry does worse than recorded (a regression), and also when it does better (so the
record is brought up to date with ``python tools/opinfo_report.py --update``, which also writes
``docs/OPS.md``). Entries we decide not to support are in the runner's ``SKIP`` table with a reason.

Skipped where torch (the oracle, a test-only dependency) or expecttest (which op_db imports) is missing.
"""
import json
import pathlib

import pytest

torch = pytest.importorskip("torch", reason="torch (the OpInfo oracle) is a test-only dependency: "
                                            "pip install torch==2.13.0")
pytest.importorskip("expecttest", reason="torch's op_db needs expecttest: pip install expecttest")

import opinfo_runner as runner  # noqa: E402
from conftest import DEVICES  # noqa: E402
from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402

EXPECTED_PATH = pathlib.Path(__file__).with_name("opinfo_expected.json")
EXPECTED = json.loads(EXPECTED_PATH.read_text()) if EXPECTED_PATH.exists() else {}
ENTRIES = {runner.entry_id(op): op for op in op_db}


@pytest.mark.parametrize("eid", sorted(ENTRIES))
def test_opinfo(eid):
    """One entry on every device, through the same sweep that writes the record; see the module docstring."""
    got = runner.sweep(DEVICES, entries={eid})[eid]
    if got["status"] == "skipped":
        pytest.skip(got["reason"])
    known = EXPECTED.get(eid, {})
    if got["status"] == "missing":
        if known.get("missing"):
            pytest.skip("no cltorch counterpart yet (recorded in tests/opinfo_expected.json)")
        pytest.fail(f"{eid}: its cltorch counterpart disappeared ({got['reason']})")
    if known.get("missing"):
        pytest.fail(f"{eid} has a cltorch counterpart now; run `python tools/opinfo_report.py --update`")
    for kind in ("forward", "gradient"):
        now = got[kind] not in (None, "n/a")
        if now and kind not in known:
            pytest.fail(f"{eid} {kind} regressed: {got[kind]}")
        if not now and kind in known:
            pytest.fail(f"{eid} {kind} now passes on every device (recorded: {known[kind]}); "
                        "run `python tools/opinfo_report.py --update`")
    if known.get("forward") or known.get("gradient"):
        pytest.xfail(f"recorded mismatch, unchanged: {got['forward'] or got['gradient']}")
