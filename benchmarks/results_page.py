"""Build ``benchmarks/RESULTS.md`` from the stored JSON alone (issue 17, item 7).

Run: ``.venv/bin/python benchmarks/results_page.py [--root benchmarks/results]
[--out benchmarks/RESULTS.md]``.

One line per (paper, table, data set, method, config): the paper's figure, ours (mean ± sd
over the seeds stored, with their number n), the difference (ours − paper) in units of the
paper's spread (its sd, or its s.e. where the paper gives one), the command and the mean wall
time per cell.  A row without cells carries its stated reason.  Table 2 of seed 000 (minutes
per 100 sweeps) is derived from the Table 1 cells' wall times (``row.json`` says
``derive``).  Nothing is computed here but means and standard deviations.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent / "reproduce"))
from _cells import RESULTS, ROOT, load_records  # noqa: E402

TITLES = {("000", "1"): "Seed 000 (RFLVM), Table 1: 1-NN accuracy of the 2-D latent, 5-fold CV",
          ("000", "2"): "Seed 000 (RFLVM), Table 2: wall time in minutes (RFLVM: per 100 "
                        "sweeps; baselines: per fit), single-threaded; from the Table 1 cells' "
                        "fit times (CPU time where stored, else wall), only fits that reused a "
                        "compiled sampler where there are any",
          ("000", "3"): "Seed 000 (RFLVM), Table 3: imputation MSE, 20% held out",
          ("000", "Fig1"): "Seed 000 (RFLVM), Figure 1 (lower middle): S-curve, MSE of the "
                           "held-out 20% of Y against M",
          ("000", "Fig1F"): "Seed 000 (RFLVM), Figure 1: S-curve, MSE of F (the noiseless "
                            "signal) against M, from the same fits",
          ("004", "1NN"): "Seed 004 (unscented Bayesian GPLVM): leave-one-out 1-NN accuracy "
                          "of the latent space, non-RBF kernels with the unscented rule",
          ("004", "C1a"): "Seed 004, Appendix C Figure 1(a): L1 error of Ψ1 (Matérn 3/2, "
                          "N = 40, M = 20) against MC(10000), per input dimension D"}


PREAMBLES = {("000", "1"): "The paper's Table 1 has no Gaussian RFLVM column (its §4.1 text "
                          "discusses one): those rows have no paper figure. RFLVM rows: one "
                          "chain, M = 100, the sweeps in *config* with half burn-in (the paper: "
                          "2000 / 1000)."}


def _fmt(mean, spread, digits=4):
    if spread is None or not np.isfinite(spread):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {spread:.{digits}f}"


def natural_key(text: str):
    """Sort key that orders the numbers inside a string by value (``M=5`` before ``M=10``)."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part)
            for part in re.split(r"(\d+)", str(text))]


def _natural_tuple(key):
    return [natural_key(part) for part in key]


def _values(cells, derive):
    """The numbers of a row's cells: the stored value, a stored detail (``derive`` names it
    with ``detail``), or the derived wall-time quantity."""
    if not derive:
        return [c["value"] for c in cells]
    if derive.get("detail"):
        return [c["details"][derive["detail"]] for c in cells]
    out = []
    cpu = all("cpu_s" in c.get("details", {}) for c in cells)
    for c in cells:
        details = c.get("details", {})
        seconds = details["cpu_s"] if cpu else details.get("fit_s", c["wall_s"])
        minutes = seconds / 60.0                                      # the fit alone
        sweeps = c["config"].get("sweeps")
        out.append(minutes * 100.0 / sweeps if sweeps else minutes)
    return out


def _line(row, cells, derive):
    paper = row.get("paper_figure") if row else None
    label = (row or {}).get("label") or cells[0]["method"]
    paper_txt = "—" if not paper else _fmt(paper["mean"], paper.get("sd")) + \
        (" (s.e.)" if paper.get("spread") == "se" else "")
    # a row with cells shows the command that made them (with their --n-iter etc.)
    command = cells[0]["command"] if cells else row.get("command", "")
    if not cells:
        return [row["dataset"], label, paper_txt, row.get("reason") or "not yet run", "", "",
                "", f"`{command}`" if command else ""]
    vals = np.asarray(_values(cells, derive), float)
    sd = float(vals.std(ddof=1)) if len(vals) > 1 else float("nan")
    # a paper figure given as mean ± s.e. (Table 3) is met by our s.e., and the difference is
    # measured in the s.e. of the difference; derived wall times keep the sd (Table 2)
    by_se = bool(paper) and paper.get("spread") == "se" and not derive
    spread = sd / np.sqrt(len(vals)) if by_se else sd
    ours = f"{_fmt(vals.mean(), spread)} (n={len(vals)}{', s.e.' if by_se else ''})"
    if derive and not derive.get("detail"):
        cpu = all("cpu_s" in c.get("details", {}) for c in cells)
        ours += " CPU" if cpu else " wall"
    diff = ""
    if paper and paper.get("sd"):
        scale = np.hypot(paper["sd"], spread) if by_se and np.isfinite(spread) else paper["sd"]
        diff = f"{(vals.mean() - paper['mean']) / scale:+.1f}"
    config = cells[0]["config_tag"]
    # a cell written by a fit that also wrote another cell stores wall 0 and the fit's time
    # as its detail fit_s
    wall = f"{np.mean([c['wall_s'] or c.get('details', {}).get('fit_s', 0.0) for c in cells]):.1f}"
    return [cells[0]["dataset"], label, paper_txt, ours, diff, config, wall,
            f"`{command}`" if command else ""]


def build(root: Path = RESULTS) -> str:
    rows, cells = load_records(root)
    by_row = {(r["paper"], r["table"], r["dataset"], r["method"]): r for r in rows}
    by_cells = defaultdict(list)
    for c in cells:
        by_cells[(c["paper"], c["table"], c["dataset"], c["method"])].append(c)
    keys = sorted(set(by_row) | set(by_cells), key=_natural_tuple)
    out = ["# Reproductions of the papers' tables", "",
           "Generated by `.venv/bin/python benchmarks/results_page.py` from the JSON under "
           "`benchmarks/results/` (one file per cell; `benchmarks/reproduce/_cells.py`). "
           "Do not edit by hand. *ours*: mean ± sd over the n seeds stored (± s.e. where the "
           "paper gives mean ± s.e., marked); *Δ/sd*: (ours − paper) in units of the paper's "
           "sd (where both are mean ± s.e.: of the difference's s.e., the two s.e. in "
           "quadrature); *wall s*: mean wall time of one cell (data, compilation, fit, score).",
           ""]
    for paper, table in sorted({k[:2] for k in keys}, key=_natural_tuple):
        out += [f"## {TITLES.get((paper, table), f'Seed {paper}, table {table}')}", ""]
        if (paper, table) in PREAMBLES:
            out += [PREAMBLES[(paper, table)], ""]
        out += [
                "| data set | method | paper | ours | Δ/sd | config | wall s | command |",
                "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        notes = {}
        for key in [k for k in keys if k[:2] == (paper, table)]:
            row = by_row.get(key)
            derive = (row or {}).get("derive")
            source = by_cells.get(key, [])
            if derive:
                source = by_cells.get((paper, derive["from_table"], key[2], key[3]), [])
                warm = [c for c in source if c.get("details", {}).get("warm")]
                source = warm or source        # compilation excluded where a warm fit exists
            groups = defaultdict(list)
            for c in source:
                groups[c["config_tag"]].append(c)
            if not groups:
                out.append("| " + " | ".join(_line(row, [], derive)) + " |")
            for tag in sorted(groups, key=natural_key):
                out.append("| " + " | ".join(_line(row, sorted(groups[tag], key=lambda c:
                                                                  c["seed"]), derive)) + " |")
            if row and row.get("note"):
                notes.setdefault(row["note"], []).append(key[2])
        pivot = next((by_row[k].get("pivot") for k in keys if k[:2] == (paper, table)
                      and k in by_row and by_row[k].get("pivot")), None)
        if pivot:
            out += [""] + _pivot([k for k in keys if k[:2] == (paper, table)], by_row,
                                 by_cells, pivot)
        out += [""] + [f"* **{', '.join(dict.fromkeys(names))}**: {text}"
                       for text, names in notes.items()] if notes else []
        out.append("")
    return "\n".join(out)


def _pivot(keys, by_row, by_cells, column: str) -> list[str]:
    """The table as its figure draws it: a line per method, a column per value of ``column``
    (``"dataset"`` or a config key such as ``"M"``), entries mean ± sd (n)."""
    table = defaultdict(dict)
    for key in keys:
        row = by_row.get(key) or {}
        derive = row.get("derive") or {}
        source = by_cells.get(key[:1] + (derive.get("from_table", key[1]),) + key[2:], [])
        for c in source:
            col = c["dataset"] if column == "dataset" else c["config"].get(column)
            table[row.get("label") or key[3]].setdefault(str(col), []).append(
                _values([c], derive if derive.get("detail") else None)[0])
    columns = sorted({col for entries in table.values() for col in entries}, key=natural_key)
    lines = ["| method | " + " | ".join(f"{column}={c}" if column != "dataset" else c
                                        for c in columns) + " |",
             "| --- |" + " --- |" * len(columns)]
    for label, entries in table.items():
        cells = []
        for col in columns:
            vals = np.asarray(entries.get(col, []), float)
            sd = float(vals.std(ddof=1)) if len(vals) > 1 else float("nan")
            cells.append(f"{_fmt(vals.mean(), sd)} ({len(vals)})" if len(vals) else "")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


#: the line after which RESULTS.md holds sections written by hand (from benchmark scripts
#: that store no cells, e.g. benchmarks/imputation.py): kept as they are when the page is rebuilt
HAND_WRITTEN = "<!-- sections below are written by hand; results_page.py keeps them -->"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", default=str(RESULTS))
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    args = p.parse_args()
    text = build(Path(args.root))
    out = Path(args.out)
    old = out.read_text() if out.exists() else ""
    if HAND_WRITTEN in old:          # sections written by hand from other scripts stay
        text = text.rstrip("\n") + "\n\n" + old[old.index(HAND_WRITTEN):]
    out.write_text(text)
    print(f"wrote {args.out} ({text.count(chr(10))} lines)")


if __name__ == "__main__":
    main()
