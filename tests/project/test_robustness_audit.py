"""Issue 31's audit as a parametrised matrix: every case the outside audit found lost, silent
or unclear (scripts/robustness_audit.py holds them and prints them as a table) must now be
refused with a message naming the problem and the fix, or work as the user meant.  A case
that regresses fails here with the audit's word for it (LOST, SILENT, UNCLEAR)."""

from __future__ import annotations

import importlib.util
import sys

from _paths import REPO

import pytest

SCRIPT = REPO / "scripts" / "robustness_audit.py"
_spec = importlib.util.spec_from_file_location("robustness_audit", SCRIPT)
audit = sys.modules.setdefault("robustness_audit", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(audit)


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    return audit.Context(tmp_path_factory.mktemp("audit"))


def test_the_matrix_holds_every_kind_of_finding():
    """The four lost cases, the silent and the unclear ones: ids unique, each kind present."""
    ids = [c.id for c in audit.CASES]
    assert len(ids) == len(set(ids)) >= 40
    assert {c.found for c in audit.CASES} == {"lost", "silent", "unclear"}
    assert sum(c.found == "lost" for c in audit.CASES) >= 4


@pytest.mark.parametrize("case", audit.CASES, ids=[c.id for c in audit.CASES])
def test_audit_case(case, context, tmp_path):
    try:
        line = case.replay(context, tmp_path)
    except AssertionError as err:
        pytest.fail(f"{case.found.upper()} again ({case.what}): {err}")
    assert line and ("\n" not in line)
