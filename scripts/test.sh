#!/usr/bin/env bash
# Set up (or reuse) .venv with the test extras, then run the whole test suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k kernels`.
GPLVM_EXTRAS=test
source "$(dirname "$0")/_venv.sh"
exec .venv/bin/python -m pytest "$@"
