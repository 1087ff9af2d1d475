#!/usr/bin/env bash
# Set up (or reuse) .venv, then run the demo job on data bundled with scikit-learn.
# Extra arguments go to `gplvm demo`, e.g. `bash scripts/demo.sh --out /tmp/demo`.
GPLVM_EXTRAS=mcmc
source "$(dirname "$0")/_venv.sh"
exec .venv/bin/python -m gplvm demo "$@"
