"""The results store of the paper reproductions (issue 17, item 7): one JSON file per cell.

A *cell* is one number of one paper's table: (paper, table, dataset, method, seed) under a
configuration (sweeps, burn-in, ...), stored as

    benchmarks/results/<paper>/<table>/<dataset>/<method>/<config tag>/seed<k>.json

with the figure, the wall time, the command that made it, the git commit, the thread settings
and the date.  Writes are atomic (a temporary file renamed over the target), so a killed run
leaves no half-written cell, and a finished cell is never recomputed: :func:`run_cells` skips
cells whose file exists, so re-running a script resumes it.  Cells run in this process
(``jobs=1``) or in ``jobs`` parallel single-threaded processes (``OPENBLAS_NUM_THREADS=1``,
``XLA_FLAGS=--xla_cpu_multi_thread_eigen=false``, set before the child imports JAX).

Each (paper, table, dataset, method) row also has one ``row.json`` beside its config folders:
the paper's figure, the command that makes the row, and the reason when no cell can exist
(``no data here``, ``not applicable``, ``measured in benchmarks/README.md ..., not yet in the
store``).  ``benchmarks/results_page.py`` builds ``benchmarks/RESULTS.md`` from these files
alone.
"""

from __future__ import annotations

import concurrent.futures as cf
import datetime
import json
import multiprocessing
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
SINGLE_THREAD_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
                     "MKL_NUM_THREADS": "1", "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false"}


@dataclass(frozen=True)
class Cell:
    """One number of a paper's table.

    Attributes:
        paper: the seed's number, e.g. ``"000"``.
        table: e.g. ``"1"``.
        dataset, method: the row.
        seed: the run (random_state of the fit and of the folds).
        config: the settings that change the number (sweeps, burn-in, data subset, ...); cells
            of different configs are different files and different rows of the page.
    """

    paper: str
    table: str
    dataset: str
    method: str
    seed: int
    config: dict = field(default_factory=dict)

    def tag(self) -> str:
        """The config as a folder name: ``key=value`` pairs sorted by key, or ``default``."""
        if not self.config:
            return "default"
        return ",".join(f"{k}={self.config[k]}" for k in sorted(self.config))

    def path(self, root: Path = RESULTS) -> Path:
        return row_dir(self.paper, self.table, self.dataset, self.method, root) / \
            _safe(self.tag()) / f"seed{self.seed}.json"


def add_store_args(parser) -> None:
    """The options every experiment script shares: ``--jobs`` (parallel single-threaded
    processes), ``--smoke`` (the code path on a tiny subset, into a temporary folder) and
    ``--root`` (the results folder)."""
    parser.add_argument("--jobs", type=int, default=1,
                        help="cells computed by this many single-threaded processes")
    parser.add_argument("--smoke", action="store_true",
                        help="every code path on a tiny subset, into --root or a temporary "
                             "folder")
    parser.add_argument("--root", default=None, help="results folder (default "
                        "benchmarks/results; with --smoke a temporary folder)")


def store_root(args, smoke_prefix: str = "smoke-") -> Path:
    """The results folder of :func:`add_store_args`' options: ``--root`` when given, else a new
    temporary folder (named ``smoke_prefix``...) with ``--smoke``, else :data:`RESULTS`."""
    if args.root:
        return Path(args.root)
    return Path(tempfile.mkdtemp(prefix=smoke_prefix)) if args.smoke else RESULTS


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.,=+-]", "_", name)


def row_dir(paper: str, table: str, dataset: str, method: str, root: Path = RESULTS) -> Path:
    return root / f"seed{paper}" / f"table{table}" / _safe(dataset) / _safe(method)


def atomic_write_json(path: Path, payload: dict) -> None:
    """Write ``payload`` to ``path`` through a temporary file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(payload, fh, indent=1, sort_keys=True, default=_jsonable)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _jsonable(value):
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def git_commit() -> str:
    """HEAD's hash, with ``+dirty`` when tracked files differ from it."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=ROOT, capture_output=True, text=True).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def thread_settings() -> dict:
    names = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "XLA_FLAGS")
    return {**{n: os.environ.get(n) for n in names},
            "cpus_allowed": len(os.sched_getaffinity(0)), "load_avg": os.getloadavg()}


def command_line() -> str:
    """The command that ran this process, relative to the repository root."""
    argv = [os.path.relpath(sys.argv[0], ROOT) if sys.argv[0] else "python", *sys.argv[1:]]
    return ".venv/bin/python " + " ".join(shlex.quote(a) for a in argv)


def write_row(paper: str, table: str, dataset: str, method: str, *, label: str = "",
              paper_figure=None, command: str = "", reason: str | None = None, note: str = "",
              metric: str = "", extra: dict | None = None, root: Path = RESULTS) -> Path:
    """Describe a row of the page: the paper's figure and how the row is (or is not) made.

    Args:
        method: the key its cells are stored under (``Cell.method``).
        label: the method's name on the page (default ``method``).
        paper_figure: ``{"mean": m, "sd": s, "spread": "sd" | "se"}`` or None (the paper has
            no such number).
        command: the command that makes the row's cells.
        reason: why the row has no cell (``"no data here"``, ``"not applicable"``, ...); None
            for a row whose cells are run.
        note: preprocessing, stand-ins and known differences, shown under the table.
        metric: what the number is (``"1-NN accuracy"``).
        extra: anything else the page uses (e.g. ``{"derive": "minutes_per_100"}``).
    """
    payload = {"paper": paper, "table": table, "dataset": dataset, "method": method,
               "label": label or method, "paper_figure": paper_figure, "command": command,
               "reason": reason,
               "note": note, "metric": metric, **(extra or {})}
    path = row_dir(paper, table, dataset, method, root) / "row.json"
    atomic_write_json(path, payload)
    return path


def _record(cell: Cell, value: float, wall_s: float, details: dict) -> dict:
    return {**asdict(cell), "config_tag": cell.tag(), "value": value, "wall_s": wall_s,
            "command": command_line(), "git_commit": git_commit(),
            "threads": thread_settings(), "python": platform.python_version(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "details": details}


def run_one(fn: Callable[[Cell], tuple[float, dict]], cell: Cell, root: Path = RESULTS) -> dict:
    """Compute one cell with ``fn(cell) -> (value, details)`` and store it; return the record.

    ``wall_s`` is the wall time of ``fn`` (data loading, compilation and fitting); ``fn`` may
    put finer timings in ``details``.
    """
    start = time.perf_counter()
    value, details = fn(cell)
    record = _record(cell, float(value), time.perf_counter() - start, details)
    atomic_write_json(cell.path(root), record)
    return record


def _child_init(env: dict) -> None:
    os.environ.update(env)


def pending(cells, root: Path = RESULTS) -> list[Cell]:
    """The cells without a stored file, in the order given."""
    return [c for c in cells if not c.path(root).exists()]


def run_cells(fn: Callable[[Cell], tuple[float, dict]], cells, jobs: int = 1,
              root: Path = RESULTS, log: Callable[[str], Any] = print) -> list[dict]:
    """Compute the cells not yet stored, in order; return the new records.

    Args:
        fn: a module-level function ``fn(cell) -> (value, details)`` (picklable for ``jobs >
            1``).
        cells: the cells to have; stored ones are skipped (resumable).
        jobs: 1 runs here; K > 1 runs K spawned processes, each single-threaded
            (:data:`SINGLE_THREAD_ENV` set in the environment before the child starts).
        root: the results folder.
        log: called with one line per finished cell.
    """
    todo = pending(cells, root)
    log(f"{len(cells) - len(todo)} of {len(cells)} cells already stored; {len(todo)} to run "
        f"with {jobs} job(s)")
    records = []
    if jobs <= 1:
        for cell in todo:
            records.append(run_one(fn, cell, root))
            log(_line(records[-1]))
        return records
    saved = {k: os.environ.get(k) for k in SINGLE_THREAD_ENV}
    os.environ.update(SINGLE_THREAD_ENV)             # inherited by the spawned children
    try:
        ctx = multiprocessing.get_context("spawn")
        with cf.ProcessPoolExecutor(jobs, mp_context=ctx, initializer=_child_init,
                                    initargs=(SINGLE_THREAD_ENV,)) as pool:
            futures = [pool.submit(run_one, fn, cell, root) for cell in todo]
            for fut in cf.as_completed(futures):
                records.append(fut.result())
                log(_line(records[-1]))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return records


def _line(r: dict) -> str:
    return (f"{r['dataset']:>12} {r['method']:>20} seed {r['seed']} [{r['config_tag']}] "
            f"{r['value']:.4f}  {r['wall_s']:.1f} s")


def load_records(root: Path = RESULTS) -> tuple[list[dict], list[dict]]:
    """All stored rows (``row.json``) and cells (``seed*.json``) under ``root``."""
    rows, cells = [], []
    for path in sorted(root.rglob("*.json")):
        if path.name.startswith(".tmp-"):
            continue
        with open(path) as fh:
            payload = json.load(fh)
        (rows if path.name == "row.json" else cells).append(payload)
    return rows, cells
