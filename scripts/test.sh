#!/usr/bin/env bash
# Set up (or reuse) .venv with the test extras, then run the whole test suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k kernels`.
#
# The suite runs as four pytest processes over consecutive groups of test files, not one: a
# single process compiles thousands of XLA executables, and a whole-suite run in one process
# crashed inside an XLA compile (segmentation fault) once it held tens of thousands of memory
# mappings (the kernel's limit, vm.max_map_count, is 65,530 here; two test files alone left
# 6,815).  Dropping JAX's caches between modules instead gave wrong numbers in later tests.
# Arguments naming test files or folders run exactly those, in one process.
GPLVM_EXTRAS=test
source "$(dirname "$0")/_venv.sh"
set +e  # every group runs; the exit status says whether any failed
for arg in "$@"; do
  if [[ "$arg" == tests* ]]; then
    exec .venv/bin/python -m pytest "$@"
  fi
done
files=(tests/test_*.py)
n=${#files[@]}
groups=4
status=0
for ((g = 0; g < groups; g++)); do
  chunk=("${files[@]:$((g * n / groups)):$(((g + 1) * n / groups - g * n / groups))}")
  echo "[gplvm] test group $((g + 1))/$groups: ${#chunk[@]} files"
  .venv/bin/python -m pytest "$@" "${chunk[@]}"
  rc=$?
  # 5: no test selected in this group (e.g. with -k); not a failure
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then status=$rc; fi
done
exit $status
