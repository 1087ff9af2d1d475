"""Start-up of the package and of every command line verb (issue 32, item 6).

Run: ``.venv/bin/python benchmarks/startup.py [--repeat 7]``.

Each command runs ``--repeat`` times in a fresh process, one after the other:
``python -c "import gplvm"``, the same with the first use of a public name (which imports JAX,
scikit-learn and the models: the time ``import gplvm`` no longer spends, paid by the first
fit), ``gplvm --version``, ``gplvm --help`` and ``gplvm VERB --help`` for every verb the
command line has (read from its parser).  Printed per command: the median
and the least wall time, and the median and least CPU time (user + system, from the process's
resource usage: on a busy machine wall time grows with the load, CPU time much less).  The
target is ``gplvm --version`` and ``gplvm --help`` under 1 s of wall time.  The thread settings
(OpenBLAS, OpenMP, MKL, XLA) and the machine are printed with the table, since BLAS libraries
start their threads when they are loaded.

To compare with an earlier commit, run the same script with that commit's sources first on the
path: ``git archive COMMIT src | tar -x -C /tmp/old && PYTHONPATH=/tmp/old/src .venv/bin/python
benchmarks/startup.py`` (the ``gplvm`` script imports whatever ``gplvm`` the path finds first).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

THREAD_SETTINGS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                   "XLA_FLAGS", "GPLVM_CPU_DEVICES", "PYTHONPATH")


def verbs() -> list[str]:
    """The sub-commands of ``gplvm``, as its parser lists them."""
    from gplvm.cli import _parser

    parser = _parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(sub.choices)


def commands() -> dict[str, list[str]]:
    """Name -> argv of each command timed."""
    script = str(Path(sys.executable).with_name("gplvm"))
    out = {"python -c 'import gplvm'": [sys.executable, "-c", "import gplvm"],
           # the first use of a public name imports JAX, scikit-learn and the models
           "python -c 'import gplvm; gplvm.BayesianGPLVM'": [
               sys.executable, "-c", "import gplvm; gplvm.BayesianGPLVM"],
           "gplvm --version": [script, "--version"],
           "gplvm --help": [script, "--help"]}
    out.update({f"gplvm {verb} --help": [script, verb, "--help"] for verb in verbs()})
    return out


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one run of ``argv``, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def machine() -> list[str]:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count()
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return [f"machine: {platform.platform()}, {platform.machine()}, {cores} usable cores "
            f"(of {os.cpu_count()}), load average {load}",
            f"python {platform.python_version()} at {sys.executable}",
            "threads: " + ", ".join(f"{k}={os.environ.get(k, '(unset)')}"
                                    for k in THREAD_SETTINGS)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="fresh processes per command")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    print("\n".join(machine()))
    print(f"{args.repeat} fresh processes per command, run one after the other\n")
    rows = [("command", "wall median", "wall min", "CPU median", "CPU min")]
    for name, command in commands().items():
        walls, cpus = zip(*(timed(command) for _ in range(args.repeat)))
        rows.append((name, *(f"{f(v):.3f} s" for v in (walls, cpus)
                             for f in (statistics.median, min))))
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    for i, row in enumerate(rows):
        print("  ".join(cell.ljust(w) if k == 0 else cell.rjust(w)
                        for k, (cell, w) in enumerate(zip(row, widths))))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
