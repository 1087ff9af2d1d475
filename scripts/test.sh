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
# every test file under tests/ (its folders mirror the package), in one fixed order; the heavy
# ones (below) each make a group of their own, the others are split into $light_groups groups of
# consecutive files
heavy=(tests/models/gplvm_family/test_bgplvm.py tests/models/gplvm_family/test_dpgplvm.py
       tests/models/test_contract.py tests/models/test_sklearn_checks.py
       tests/models/rflvm/test_rflvm_geweke.py tests/models/rflvm/test_rflvm_geweke_q2.py)
mapfile -t files < <(find tests -name 'test_*.py' | LC_ALL=C sort \
                     | grep -vxF -f <(printf '%s\n' "${heavy[@]}"))
n=${#files[@]}
light_groups=12
groups=$((${#heavy[@]} + light_groups))
cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
lanes=${GPLVM_TEST_LANES:-$((cpus < 2 ? cpus : 2))}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

run_group() {  # run_group g: one pytest process over group g; its log, then its status
  local g=$1 chunk
  if ((g < ${#heavy[@]})); then
    chunk=("${heavy[g]}")
  else
    local l=$((g - ${#heavy[@]})) k=$light_groups
    chunk=("${files[@]:$((l * n / k)):$(((l + 1) * n / k - l * n / k))}")
  fi
  {
    echo "[gplvm] test group $((g + 1))/$groups: ${chunk[*]}"
    .venv/bin/python -m pytest --junitxml="$logs/$g.xml" "${pytest_args[@]}" "${chunk[@]}"
    echo $? > "$logs/$g.rc"
  } > "$logs/$g.log" 2>&1
  (flock 9 2>/dev/null; cat "$logs/$g.log") 9> "$logs/print.lock"  # one log at a time
}

# The order in which the lanes take the groups: the heavy files first (the longest; the Geweke
# tests and scikit-learn's checks take minutes each), then the other groups in path order.  Why
# heavy files run alone: each pytest process must stay well below the kernel's limit on memory
# mappings (each group prints its count at the end; every compiled XLA executable keeps ~3).
# test_contract.py, test_sklearn_checks.py, test_bgplvm.py and test_dpgplvm.py each fit many
# estimators: with twelve groups of consecutive files the group holding the first two ended at
# 97% of the limit, one more test file before it moved test_checkpoint.py in, and XLA crashed
# (segmentation fault, exit 139) loading an executable; fourteen groups put test_bgplvm.py,
# test_dpgplvm.py, test_structured.py and test_svi.py together at 90%.  Splitting by file count
# moves files between groups whenever one is added; the heavy ones alone cannot add up.  Any
# order runs every group.
order=($(seq 0 $((groups - 1))))

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
