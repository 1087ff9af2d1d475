#!/usr/bin/env bash
# Set up (or reuse) .venv with the test extras, then run the whole test suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k kernels`.
GPLVM_EXTRAS=test
source "$(dirname "$0")/_venv.sh"
# Two workers, one test file each at a time (module-scoped fits are made once): most of the
# suite's time is XLA compilation, which is single-threaded, so two processes use both cores.
exec .venv/bin/python -m pytest -n "${GPLVM_TEST_WORKERS:-2}" --dist loadfile "$@"
