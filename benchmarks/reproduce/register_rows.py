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
from _cells import write_row  # noqa: E402

PY = ".venv/bin/python benchmarks"
README = "measured in benchmarks/README.md § {}; not yet in the store"
NOT_RUN = "not yet run into the store"


def _fig(mean, spread=None, kind="sd"):
    return {"mean": mean, "sd": spread, "spread": kind}


def table3_rows() -> None:
    """Seed 000 Table 3: the rows are written by ``rflvm_table3.py``'s ``write_rows`` (paper
    figures, commands, notes), the cells by that script's command."""
    import rflvm_table3
    rflvm_table3.write_rows()


def other_rows() -> None:
    write_row("003", "Frey", "frey_faces (n=50)", "SGPLVM", paper_figure=_fig(14.50),
              command=f"{PY}/reproduce/sgplvm_frey.py --n-train 50 --seeds 0 1 2",
              reason=README.format("Structured GPLVM (issue 13)"), metric="imputation RMSE")
    write_row("003", "Frey", "frey_faces (n=50)", "Bayesian GPLVM (Coincidence)",
              paper_figure=_fig(15.63),
              command=f"{PY}/reproduce/sgplvm_frey.py --n-train 50 --seeds 0 1 2",
              reason=README.format("Structured GPLVM (issue 13)"), metric="imputation RMSE")
    write_row("003", "Frey", "frey_faces (n=1000)", "SGPLVM", paper_figure=_fig(8.91),
              command=f"{PY}/reproduce/sgplvm_frey.py --n-train 1000 --models sgplvm "
                      "--seeds 0", reason=README.format("Structured GPLVM (issue 13)"),
              metric="imputation RMSE")
    write_row("003", "Frey", "frey_faces (n=1000)", "Bayesian GPLVM", paper_figure=_fig(9.09),
              command=f"{PY}/reproduce/sgplvm_frey.py --n-train 1000 --models bgplvm "
                      "--seeds 0", reason=README.format("Structured GPLVM (issue 13)"),
              metric="imputation RMSE")
    write_row("004", "oil", "oil_flow", "Bayesian GPLVM (RBF, analytic)",
              command=f"{PY}/bgplvm_vs_peers.py --max-iter 2000 --seeds 0 1 2 3 4",
              reason=README.format("Bayesian GPLVM on oil flow against GPy and GPflow"),
              metric="leave-one-out 1-NN errors of 1000")
    write_row("004", "oil", "oil_flow", "Bayesian GPLVM (Matérn 3/2, unscented)",
              command=f"{PY}/bgplvm_vs_peers.py --kernel matern32 --seeds 0 1 2 3 4",
              reason=README.format("Bayesian GPLVM on oil flow against GPy and GPflow"),
              metric="leave-one-out 1-NN errors of 1000")
    write_row("001", "mocap", "cmu_mocap", "DP-GP-LVM vs Bayesian GPLVM",
              command=f"{PY}/reproduce/dpgplvm_mocap.py --seeds 0 1 2 3 4 5 6 7 8 9",
              reason=NOT_RUN, metric="missing-block log-likelihood")
    write_row("001", "synthetic", "synthetic", "DP-GP-LVM",
              command=f"{PY}/reproduce/dpgplvm_synthetic.py", reason=NOT_RUN)
    write_row("000", "Fig2", "S-curve", "RFLVM, every likelihood",
              command=f"{PY}/reproduce/rflvm_scurve.py", reason=NOT_RUN,
              metric="Procrustes R²")


if __name__ == "__main__":
    table3_rows()
    other_rows()
    print("rows written")
