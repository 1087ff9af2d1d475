"""Write tests/slow_tests.txt: the tests that take at least ``--over`` seconds (setup, call and
teardown together) in the JUnit XML reports or ``--durations=0`` logs of a suite run.

The ``slow`` marker (tests/conftest.py reads the file) keeps them out of the fast loop,
``bash scripts/test.sh -m "not slow"``.  Measure on a quiet machine, from a run with an empty
compilation cache, then run the fast loop and feed its report back in with ``--add``: a module
fixture's cost moves to the first test that still uses it once the one that paid it before is
marked::

    GPLVM_TEST_REPORTS=/tmp/full bash scripts/test.sh     # keeps each group's JUnit XML
    .venv/bin/python scripts/slow_tests.py /tmp/full/*.xml
    GPLVM_TEST_REPORTS=/tmp/fast bash scripts/test.sh -m "not slow"
    .venv/bin/python scripts/slow_tests.py --add /tmp/fast/*.xml
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LIST = REPO / "tests" / "slow_tests.txt"
DURATION = re.compile(r"^(\d+(?:\.\d+)?)s (?:call|setup|teardown)\s+(\S+)$")


def durations(paths) -> dict:
    """Seconds per test node id, summed over setup, call and teardown."""
    seconds = defaultdict(float)
    for path in paths:
        if str(path).endswith(".xml"):
            for case in ET.parse(path).getroot().iter("testcase"):
                module = case.get("classname", "").replace(".", "/")
                nodeid = f"{module}.py::{case.get('name')}"
                seconds[nodeid] += float(case.get("time", 0.0))
        else:
            for line in Path(path).read_text(errors="replace").splitlines():
                match = DURATION.match(line.strip())
                if match:
                    seconds[match.group(2)] += float(match.group(1))
    return seconds


def read_list() -> list:
    if not LIST.exists():
        return []
    return [ln.strip() for ln in LIST.read_text().splitlines()
            if ln.strip() and not ln.startswith("#")]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", help="JUnit XML files or --durations=0 logs")
    parser.add_argument("--over", type=float, default=3.0,
                        help="seconds from which a test is slow (default 3)")
    parser.add_argument("--add", action="store_true",
                        help="add to the present list instead of replacing it")
    args = parser.parse_args(argv)
    seconds = durations(args.reports)
    if not seconds:
        print("no test durations found in the reports", file=sys.stderr)
        return 2
    slow = {nodeid for nodeid, s in seconds.items() if s >= args.over}
    if args.add:
        slow |= set(read_list())
    header = (f"# Tests over ~{args.over:g} s on a quiet 2-core machine (setup + call + "
              f"teardown), written by scripts/slow_tests.py;\n# tests/conftest.py marks them "
              f"`slow`.  The fast loop: bash scripts/test.sh -m \"not slow\".\n")
    LIST.write_text(header + "".join(f"{nodeid}\n" for nodeid in sorted(slow)))
    print(f"{len(slow)} slow tests ({sum(seconds.get(n, 0.0) for n in slow):.0f} s of "
          f"{sum(seconds.values()):.0f} s in these reports) -> {LIST.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
