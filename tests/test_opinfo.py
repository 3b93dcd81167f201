"""PyTorch's OpInfo database against cltorch, as a ratchet.

Every entry of ``torch.testing._internal.common_methods_invocations.op_db`` runs through
``tests/opinfo_runner.py`` on every device (float32, up to 8 samples): values, shapes, dtypes and "both
raise" against torch, and gradients for entries with ``supports_autograd``. ``tests/opinfo_expected.json``
records, per entry, what the last sweep found: an entry with no cltorch counterpart, or a known mismatch.
A test fails when an entry does worse than recorded (a regression), and also when it does better (so the
record is brought up to date with ``python tools/opinfo_report.py --update``, which also writes
``docs/OPS.md``). Entries we decide not to support are in the runner's ``SKIP`` table with a reason.

Skipped where torch (the oracle, a test-only dependency) or expecttest (which op_db imports) is missing.

The record is the pinned torch's (pyproject.toml's test extra): another torch has other entries and other sample
inputs. There the sweep still runs against that torch, and an entry passes when it matches on every device and
xfails on a recorded mismatch; a new mismatch fails when only an OpenCL device shows it (a device fault, what
running on a GPU machine is for) and skips, naming it, when the ``cpu`` device shows it too (cltorch against
another torch's samples: the pinned torch's run is the judge of that); a record that now passes is not news there.
"""
import json
import pathlib

import pytest

torch = pytest.importorskip("torch", reason="torch (the OpInfo oracle) is a test-only dependency: "
                                            "pip install torch==2.13.0")
pytest.importorskip("expecttest", reason="torch's op_db needs expecttest: pip install expecttest")

import opinfo_runner as runner  # noqa: E402
from conftest import DEVICES, IS_PINNED_TORCH, pinned_torch_reason  # noqa: E402
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
        if not IS_PINNED_TORCH:
            pytest.skip(pinned_torch_reason(f"the record is that torch's; {eid} has no cltorch counterpart "
                                            f"({got['reason']})"))
        pytest.fail(f"{eid}: its cltorch counterpart disappeared ({got['reason']})")
    if known.get("missing"):
        pytest.fail(f"{eid} has a cltorch counterpart now; run `python tools/opinfo_report.py --update`")
    for kind in ("forward", "gradient"):
        now = got[kind] not in (None, "n/a")
        if now and kind not in known:
            where = got[kind].split(": ", 1)[0]
            if not IS_PINNED_TORCH and (where == "cpu" or where not in DEVICES):
                pytest.skip(pinned_torch_reason(f"the record is that torch's; against this torch's samples {eid} "
                                                f"{kind} differs on the cpu device too, or before any device ran: "
                                                f"{got[kind]}"))
            pytest.fail(f"{eid} {kind} regressed: {got[kind]}")
        if not now and kind in known and IS_PINNED_TORCH:
            pytest.fail(f"{eid} {kind} now passes on every device (recorded: {known[kind]}); "
                        "run `python tools/opinfo_report.py --update`")
    if (known.get("forward") and got["forward"] not in (None, "n/a")) or \
            (known.get("gradient") and got["gradient"] not in (None, "n/a")):
        pytest.xfail(f"recorded mismatch, unchanged: {got['forward'] or got['gradient']}")
