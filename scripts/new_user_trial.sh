#!/usr/bin/env bash
# A new user's first session, reproducibly (issue 15, acceptance 1; issue 32, acceptance 1, 3).
#
#   bash scripts/new_user_trial.sh [--issue32] [WORK]   # WORK: an empty folder (default: temp)
#
# Clones this repository (its committed HEAD) into WORK/gplvm, sets it up with the README's own
# commands (scripts/demo.sh, then the anndata extra for .h5ad files), and runs `gplvm fit` as a
# user would on
#   (a) a CSV with a header, an index column, a label column and 10% empty cells (oil flow),
#   (b) an .npy of counts (RFLVM, Poisson, library-size offsets, 5% missing),
#   (c) an .h5ad built from mesc_guo2010_qpcr with the cell stages in obs,
# then `gplvm transform` and `gplvm impute` on each saved model with new rows (10% empty).
# scripts/new_user_trial.py checks every output of `gplvm fit` and that the verbs' numbers are
# the Python API's exactly (it prints each largest absolute difference).
# Then it replays issue 32's steps on scikit-learn's digits and wine (new_user_trial.py
# check-issue32): digits with constant pixel columns through `gplvm fit` and BayesianGPLVM,
# `--components 20` on 13 columns, a `--labels Cultivar` typo, `gplvm --version` under 1 s
# wall, embedding.csv read back bit for bit.  --issue32 runs only the clone, the setup and
# these steps (2.5 minutes; the whole trial 6, on 2 busy cores).  The exit status is
# 0 only when every check holds.  Iteration counts are small (flags) to keep it to minutes.
#
# Needs git, python3 >= 3.11, pip with an index (or a cache) for the dependencies, and the
# datasets in $GPLVM_DATA_DIR (default: ../shared/data beside this checkout).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
export GPLVM_DATA_DIR=${GPLVM_DATA_DIR:-$(cd "$REPO/.." && pwd)/shared/data}
ONLY_ISSUE32=0
if [ "${1:-}" = "--issue32" ]; then ONLY_ISSUE32=1; shift; fi
WORK=${1:-$(mktemp -d "${TMPDIR:-/tmp}/gplvm-trial.XXXXXX")}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
step() { printf '\n=== %s\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

step "fresh clone of $REPO ($(git -C "$REPO" rev-parse --short HEAD)) into $WORK/gplvm"
run git clone --quiet "$REPO" "$WORK/gplvm"
cd "$WORK/gplvm"

status=0
if [ "$ONLY_ISSUE32" = 0 ]; then
step "README, quick start: bash scripts/demo.sh (sets up .venv; 5 iterations here)"
run bash scripts/demo.sh --n-iter 5 --quiet --out "$WORK/demo"
else
step "setting up .venv as scripts/demo.sh does (--issue32: no demo run)"
run env GPLVM_EXTRAS=mcmc bash -c 'source scripts/_venv.sh'
fi
step "README: .h5ad files need the anndata extra (pip install \"gplvm[anndata]\"; from a clone:)"
run .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[anndata]"
export PATH="$PWD/.venv/bin:$PATH"      # the README's `gplvm` command is the venv's
run gplvm --version

if [ "$ONLY_ISSUE32" = 0 ]; then
step "data (scripts/new_user_trial.py make-data)"
run python scripts/new_user_trial.py make-data "$WORK/data"
cd "$WORK"

step "gplvm fit on (a) a CSV, (b) an .npy, (c) an .h5ad"
run gplvm fit data/oil.csv --labels regime --inducing 15 --iterations 100 --out oil-bgplvm \
    --quiet
run gplvm fit data/counts.npy --model rflvm --likelihood poisson --offset libsize \
    --features 20 --sweeps 60 --chains 2 --out counts-rflvm --quiet
run gplvm fit data/mesc.h5ad --labels stage --inducing 20 --iterations 100 --out mesc-bgplvm \
    --quiet

step "gplvm transform / gplvm impute on each saved model"
for case in oil-bgplvm:data/oil_new.csv counts-rflvm:data/counts_new.npy \
            mesc-bgplvm:data/mesc_new.h5ad; do
  folder=${case%%:*} new=${case#*:}
  run gplvm transform "$folder/model.npz" "$new" --out "$folder/new_embedding.csv"
  run gplvm impute "$folder/model.npz" "$new" --out "$folder/new_imputed.csv"
done

step "checks against the Python API (scripts/new_user_trial.py check)"
run python gplvm/scripts/new_user_trial.py check "$WORK" || status=1
fi

step "issue 32 as a new user met it (scripts/new_user_trial.py check-issue32)"
cd "$WORK"
run python gplvm/scripts/new_user_trial.py make-issue32-data "$WORK/data"
run python gplvm/scripts/new_user_trial.py check-issue32 "$WORK" || status=1
exit $status
