# Sourced by the scripts: create or reuse .venv and install the project with the given extras.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "[gplvm] creating virtual environment .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
echo "[gplvm] installing the project into .venv (extras: ${GPLVM_EXTRAS})"
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[${GPLVM_EXTRAS}]"
