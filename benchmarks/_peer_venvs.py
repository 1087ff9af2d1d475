"""Virtual environments for peer libraries (GPy, GPflow), kept out of the library's dependencies.

Each peer lives in ``benchmarks/.venvs/<name>`` (git-ignored), created on first use with the
first pip specification that installs; benchmarks run code in it through a subprocess and read
back an ``.npz`` file.  The pins are the sets known to install on Python 3.11:

* GPy 1.15.0 (numpy 2); GPy 1.13.2 with numpy<2 as a fallback.
* NumPyro 0.22 on the JAX gplvm is measured with (0.10.2), NumPyro 0.19 with JAX 0.7 as a
  fallback (``rflvm_convergence.py``).
* GPflow 2.11 needs TensorFlow with a matching TensorFlow Probability and numpy<2:
  TF 2.15.1 + TFP 0.23.0 (Keras 2 built in); TF 2.16.2 + TFP 0.24.0 + tf-keras as a fallback.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

VENVS = Path(__file__).resolve().parent / ".venvs"

PEERS = {
    "gpy": {"probe": "import GPy",
            "candidates": (["GPy==1.15.0", "threadpoolctl"],
                           ["GPy==1.13.2", "numpy<2", "threadpoolctl"])},
    "numpyro": {"probe": "import numpyro",
                "candidates": (["numpyro==0.22.*", "jax[cpu]==0.10.2", "threadpoolctl"],
                               ["numpyro==0.19.*", "jax[cpu]==0.7.*", "threadpoolctl"])},
    "gpflow": {"probe": "import gpflow",
               "candidates": (["gpflow==2.11.*", "tensorflow==2.15.1",
                               "tensorflow-probability==0.23.0", "numpy<2", "threadpoolctl"],
                              ["gpflow==2.11.*", "tensorflow==2.16.2",
                               "tensorflow-probability[tf]==0.24.0", "tf-keras==2.16.0",
                               "numpy<2", "threadpoolctl"])},
}


def _imports(python: Path, probe: str) -> bool:
    return python.exists() and subprocess.run([python, "-c", probe],
                                              capture_output=True).returncode == 0


def ensure_venv(name: str, extras: Sequence[str] = ("threadpoolctl",)) -> Optional[Path]:
    """The interpreter of ``benchmarks/.venvs/<name>``, created on first use; ``None`` (with the
    reason on stderr) when no candidate specification installs."""
    peer, root = PEERS[name], VENVS / name
    python = root / "bin" / "python"
    if _imports(python, peer["probe"]):
        missing = [e for e in extras if not _imports(python, f"import {e}")]
        if missing:  # an older venv (e.g. made by psi_statistics_vs_gpy.py) lacks a helper
            subprocess.run([python, "-m", "pip", "install", "-q", *missing])
        return python
    for spec in peer["candidates"]:
        print(f"# creating {root} with pip install {' '.join(spec)} (once; minutes)",
              file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", root], check=True)
        done = subprocess.run([python, "-m", "pip", "install", "-q", *spec])
        if done.returncode == 0 and _imports(python, peer["probe"]):
            return python
        print(f"# pip install {' '.join(spec)} failed; trying the next candidate",
              file=sys.stderr, flush=True)
    print(f"# could not install {name} into {root}; install it there by hand "
          f"({root}/bin/pip install ...) and rerun", file=sys.stderr, flush=True)
    return None
