# Sourced by the scripts: create or reuse .venv and install the project with the given extras.
set -euo pipefail
# jaxlib's CPU linear algebra runs through SciPy's OpenBLAS from inside XLA's own threads;
# letting OpenBLAS start threads of its own on top oversubscribes the cores (a 200 x 200
# Cholesky measured 2-360 ms instead of 0.5 ms on a shared 2-core machine).
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "[gplvm] creating virtual environment .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
echo "[gplvm] installing the project into .venv (extras: ${GPLVM_EXTRAS})"
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[${GPLVM_EXTRAS}]"
