"""Fingerprints of fitted models through the public API, to show that a reshaping of the code
changes no result (issue 11: "at fixed parameters the bound is bit-identical before and after").

Run it on two commits and compare the printed tables line by line::

    git worktree add /tmp/before <commit>   # then, in each checkout:
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/refactor_identity.py

Each row is a SHA-256 prefix of the exact bytes of an output (float64), so equal rows mean
bit-identical results: the Bayesian GPLVM's bound and latents after a short L-BFGS run (iid and
dynamical prior, with missing entries), the DP-GP-LVM's bound, latents, assignments,
predictions and new-row latents, and the RFLVM's latent draws and log-likelihood trace
for every likelihood after a short run.
"""

from __future__ import annotations

import argparse
import hashlib
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import gplvm  # noqa: E402


def digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(np.asarray(a, dtype=np.float64)).tobytes())
    return h.hexdigest()[:16]


def bgplvm_rows():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    Y = np.tanh(X @ rng.normal(size=(2, 8))) + 0.05 * rng.normal(size=(60, 8))
    Y[rng.random(Y.shape) < 0.05] = np.nan
    for name, kwargs in [("iid", {}), ("dynamical", {"times": np.arange(60.0)})]:
        m = gplvm.BayesianGPLVM(n_components=2, n_inducing=10, max_iter=40, random_state=0,
                                progress=False).fit(Y, **kwargs)
        yield (f"BayesianGPLVM {name}", f"{m.elbo_:.17g}", digest(m.X_mean_, m.X_var_),
               digest(m.predict(m.X_mean_[:5], return_var=True)))


def dpgplvm_rows():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 3))
    W = rng.normal(size=(3, 8)) * np.repeat([[1, 1, 0], [1, 0, 1]], 4, axis=0).T
    Y = np.tanh(X @ W) + 0.05 * rng.normal(size=(40, 8))
    m = gplvm.DPGPLVM(n_components=3, n_inducing=8, truncation=3, max_iter=40, n_warmup=10,
                      n_init_steps=30, transform_max_iter=20, random_state=0,
                      progress=False).fit(Y)
    Y_new = Y[:3].copy()
    Y_new[0, :2] = np.nan
    yield ("DPGPLVM iid", f"{m.elbo_:.17g}", digest(m.X_mean_, m.X_var_, m.assignments_),
           digest(m.predict(m.X_mean_[:5], return_var=True), m.transform(Y_new, True)))


def rflvm_rows():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 2))
    F = np.tanh(X @ rng.normal(size=(2, 6)))
    data = {
        "gaussian": F + 0.1 * rng.normal(size=F.shape),
        "poisson": rng.poisson(np.exp(F)).astype(float),
        "negative_binomial": rng.poisson(np.exp(F + 1)).astype(float),
        "bernoulli": (rng.random(F.shape) < 1 / (1 + np.exp(-2 * F))).astype(float),
        "binomial": (rng.random(F.shape) < 1 / (1 + np.exp(-2 * F))).astype(float),
        "multinomial": rng.poisson(np.exp(F)).astype(float) + 1,
    }
    for lik, Y in data.items():
        m = gplvm.RFLVM(likelihood=lik, n_features=20, n_iter=30, burn_in=10, n_chains=2,
                        block_size=10, random_state=0, progress=False).fit(Y)
        yield (f"RFLVM {lik}", f"{float(np.sum(m.history_)):.17g}", digest(m.X_samples_),
               digest(m.history_))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", choices=["bgplvm", "dpgplvm", "rflvm"],
                        default=["bgplvm", "dpgplvm", "rflvm"])
    args = parser.parse_args()
    rows = {"bgplvm": bgplvm_rows, "dpgplvm": dpgplvm_rows, "rflvm": rflvm_rows}
    print(f"{'model':<28}{'bound / sum log-lik':<26}{'latents':<18}{'predict / trace'}")
    for row in (r for name in args.models for r in rows[name]()):
        print(f"{row[0]:<28}{row[1]:<26}{row[2]:<18}{row[3]}")


if __name__ == "__main__":
    main()
