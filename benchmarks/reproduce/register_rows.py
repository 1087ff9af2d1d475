"""Rows of ``benchmarks/RESULTS.md`` for results measured before the cell store existed, or not
yet run: the paper's figure, the command, and the reason the row has no cell yet.

Run: ``.venv/bin/python benchmarks/reproduce/register_rows.py`` (idempotent: it rewrites the
``row.json`` files, never a cell).  No number measured here is copied into a cell: a row gets
numbers only by re-running its command through the store.  Paper figures are transcribed from
the seeds (../shared/seeds) where our copy states them; ``None`` where it gives no number.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _cells import RESULTS, load_records, write_row  # noqa: E402

def table3_rows() -> None:
    """Seed 000 Table 3: the rows are written by ``rflvm_table3.py``'s ``write_rows`` (paper
    figures, commands, notes), the cells by that script's command."""
    import rflvm_table3
    rflvm_table3.write_rows()


# Scripts whose row.json files other_rows() writes (each through its own write_rows), and the
# seeds (or cells) per row of the full protocol their commands run.
_SCRIPTS = ("rflvm_scurve", "dpgplvm_synthetic", "dpgplvm_mocap", "sgplvm_frey", "bgplvm_oil")
_FULL = {("000", "Fig2"): 1, ("001", "synthetic"): 5, ("001", "mocap"): 10,
         ("001", "mocap-factorisation"): 1, ("003", "Frey"): 3, ("003", "Frey-MNLP"): 3,
         ("004", "oil"): 5, ("004", "oil-impute"): 1, ("004", "oil-new-rows"): 1}
_BUDGET = ("not run into the store within issue 17's CPU budget (2 shared cores); the command "
           "runs it")


def other_rows(root=RESULTS) -> None:
    """The rows of seed 000 Fig. 2, seed 001, seed 003's Frey faces and seed 004's oil flow,
    written by their scripts' ``write_rows``; a row without cells gets the budget as its reason,
    a row with fewer cells than its protocol a note saying so."""
    import importlib
    for name in _SCRIPTS:
        importlib.import_module(name).write_rows(root)
    rows, cells = load_records(root)
    for row in rows:
        full = _FULL.get((row["paper"], row["table"]))
        if full is None:
            continue
        key = (row["paper"], row["table"], row["dataset"], row["method"])
        n = sum((c["paper"], c["table"], c["dataset"], c["method"]) == key for c in cells)
        if n == 0:
            row["reason"] = _BUDGET
        elif n < full:
            row["note"] = (f"{row['note']} Some rows hold fewer seeds than the protocol's "
                           f"{full} (CPU budget): the row's command in its script's write_rows "
                           "completes them (cells resume).").strip()
        write_row(**{k: row.pop(k) for k in ("paper", "table", "dataset", "method")},
                  **{k: row.pop(k) for k in ("label", "paper_figure", "command", "reason",
                                             "note", "metric")}, extra=row, root=root)


if __name__ == "__main__":
    table3_rows()
    other_rows()
    print("rows written")
