#!/usr/bin/env bash
# Set up (or reuse) .venv with the test extras, then run the whole test suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k kernels`.
#
# The suite runs as several pytest processes over consecutive groups of test files, not one: a
# single process compiles thousands of XLA executables, and a whole-suite run in one process
# crashed inside an XLA compile (segmentation fault) once it held tens of thousands of memory
# mappings (the kernel's limit, vm.max_map_count, is 65,530 here; two test files alone left
# 6,815).  Dropping JAX's caches between modules instead gave wrong numbers in later tests.
# Most of the suite's time is XLA compilation, which is single-threaded, so the groups run in
# GPLVM_TEST_LANES parallel lanes (default: the number of CPUs, at most 2) that take groups from
# one queue, longest group first (the order below); each group's output is printed whole when it
# ends, and the run ends with its ten slowest tests and its wall time.
# Arguments naming test files or folders run exactly those, in one process.
#
# The fast loop: `bash scripts/test.sh -m "not slow"` (tests/slow_tests.txt lists the slow
# ones, scripts/slow_tests.py measures them).  GPLVM_TEST_REPORTS=folder keeps each group's
# JUnit XML report there.
GPLVM_EXTRAS=test
source "$(dirname "$0")/_venv.sh"
set +e  # every group runs; the exit status says whether any failed
for arg in "$@"; do
  if [[ "$arg" == tests* ]]; then
    exec .venv/bin/python -m pytest --durations=10 "$@"
  fi
done
started=$(date +%s)
# every test file under tests/ (its folders mirror the package), in one fixed order
mapfile -t files < <(find tests -name 'test_*.py' | LC_ALL=C sort)
n=${#files[@]}
groups=14
cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
lanes=${GPLVM_TEST_LANES:-$((cpus < 2 ? cpus : 2))}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

run_group() {  # run_group g: one pytest process over group g; its log, then its status
  local g=$1
  local chunk=("${files[@]:$((g * n / groups)):$(((g + 1) * n / groups - g * n / groups))}")
  {
    echo "[gplvm] test group $((g + 1))/$groups: ${chunk[*]}"
    .venv/bin/python -m pytest --junitxml="$logs/$g.xml" "${pytest_args[@]}" "${chunk[@]}"
    echo $? > "$logs/$g.rc"
  } > "$logs/$g.log" 2>&1
  (flock 9 2>/dev/null; cat "$logs/$g.log") 9> "$logs/print.lock"  # one log at a time
}

# The order in which the lanes take the groups: longest first, estimated per group from the
# test times of whole-suite runs on 2 lanes (2026-11-29) and the number of slow tests
# (tests/slow_tests.txt) per group, with the files sorted by path as above -- tests/cli,
# tests/datasets, ..., tests/models/rflvm, ..., tests/samplers, then the top-level
# tests/test_*.py: the RFLVM's Geweke group (7th), the GPLVM family (5th), the estimators'
# contract (9th) and scikit-learn's checks (10th) first.  Re-estimate it when files move
# (GPLVM_TEST_REPORTS keeps the per-test times).  Fourteen groups, not fewer: each pytest process
# must stay well below the kernel's limit on memory mappings (each group prints its count at the
# end).  With twelve, the group holding both tests/models/test_contract.py and
# tests/models/test_sklearn_checks.py (each fits every estimator) ended at 97% of the limit, and
# one more test file before it moved tests/models/test_checkpoint.py in: XLA then crashed
# (segmentation fault) loading an executable.  Any order runs every group.
order=(6 4 8 9 7 5 2 11 1 12 0 3 10 13)

next_group() {  # the next group nobody has taken, in the order above; -1 when none is left
  (
    flock 8
    local taken
    taken=$(cat "$logs/taken" 2>/dev/null || echo 0)
    echo $((taken + 1)) > "$logs/taken"
    echo $((taken < groups ? order[taken] : -1))
  ) 8> "$logs/queue.lock"
}

pytest_args=("$@")
for ((lane = 0; lane < lanes; lane++)); do
  (while g=$(next_group) && [ "$g" -ge 0 ]; do run_group "$g"; done) &
done
wait
status=0
for ((g = 0; g < groups; g++)); do
  rc=$(cat "$logs/$g.rc" 2>/dev/null || echo 1)
  # 5: no test selected in this group (e.g. with -k); not a failure
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then
    echo "[gplvm] test group $((g + 1)) failed (pytest exit status $rc)"
    status=$rc
  fi
done
.venv/bin/python - "$logs"/*.xml <<'PY' || true
import sys, xml.etree.ElementTree as ET
cases = []
for path in sys.argv[1:]:
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError):
        continue
    cases += [(float(c.get("time", 0)), c.get("classname", "").replace(".", "/") + ".py::"
               + c.get("name", "")) for c in root.iter("testcase")]
cases.sort(reverse=True)
print("[gplvm] the ten slowest tests (setup + call + teardown):")
for seconds, nodeid in cases[:10]:
    print(f"[gplvm] {seconds:8.1f} s  {nodeid}")
PY
if [ -n "${GPLVM_TEST_REPORTS:-}" ]; then
  mkdir -p "$GPLVM_TEST_REPORTS" && cp "$logs"/*.xml "$GPLVM_TEST_REPORTS"/ 2>/dev/null || true
fi
echo "[gplvm] tests took $(( $(date +%s) - started )) s wall on $lanes lanes"
[ "$status" -eq 0 ] && echo "[gplvm] all $groups test groups passed"
exit $status
