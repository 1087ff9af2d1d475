"""Writes the format-1 files of tests/io/test_io_legacy.py with the code of commit 311bb9a.

Run once, from the repository root, on that commit (``.venv/bin/python
tests/data/legacy_v1/make_files.py``); the files are committed as test data so that every later
version of gplvm is checked to load what users saved before the estimator core was reshaped
(issue 11).  Beside each model file, ``<name>_expected.npz`` holds outputs the model gave when
it was saved (latent means and predictions at fixed latent points), which a loaded model must
still give.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np

import gplvm
from gplvm.features import RandomFourierFeatures
from gplvm.kernels import RBF
from gplvm.likelihoods import Binomial

HERE = os.path.dirname(os.path.abspath(__file__))


def rflvm():
    rng = np.random.default_rng(0)
    Y = rng.poisson(2.0, size=(30, 6)).astype(float)
    Y[0, 1] = Y[3, 4] = np.nan
    model = gplvm.RFLVM(likelihood="poisson", n_features=10, n_iter=16, burn_in=8, n_chains=1,
                        block_size=8, transform_steps=3, progress=False, random_state=0).fit(Y)
    X = model.X_mean_[:5]
    return model, {"X_mean": model.X_mean_, "X": X, "predict": model.predict(X)}


def bgplvm(dynamic=False):
    rng = np.random.default_rng(1)
    Y = np.sin(rng.normal(size=(20, 2)) @ rng.normal(size=(2, 5)))
    Y[2, 0] = np.nan
    model = gplvm.BayesianGPLVM(n_components=2, n_inducing=5, kernel=RBF(jnp.ones(2), 1.0),
                                max_iter=20, transform_max_iter=5, random_state=0,
                                progress=False)
    if dynamic:
        t = np.tile(np.arange(10.0), 2)
        model.fit(Y, times=t, groups=np.repeat([0, 1], 10))
    else:
        model.fit(Y)
    X = model.X_mean_[:4]
    mean, var = model.predict(X, return_var=True)
    out = {"X_mean": model.X_mean_, "X_var": model.X_var_, "X": X, "predict": mean,
           "predict_var": var, "Y": Y}
    if dynamic:
        out["t_new"] = np.array([2.5, 9.0])
        out["predict_times_X"] = model.predict_times(out["t_new"], sequence=1)[0]
    return model, out


def blr():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(30, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=30)
    features = RandomFourierFeatures.create(RBF(lengthscale=1.0), 10, 2, jax.random.PRNGKey(3))
    model = gplvm.BayesianLinearRegression(features=features, n_restarts=0, max_iter=10)
    model.fit(X, y)
    mean, std = model.predict(X, return_std=True)
    return model, {"X": X, "predict": mean, "predict_std": std}


def glm():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 2))
    y = rng.binomial(5, 1 / (1 + np.exp(-X[:, 0]))).astype(float)
    model = gplvm.BayesianGLM(Binomial(n_trials=5), n_features=10, n_mixture=2, n_iter=10,
                              n_predict_samples=8, random_state=jax.random.key(4),
                              progress=False).fit(X, y)
    return model, {"X": X}


def main():
    for name, make in [("rflvm", rflvm), ("bgplvm", bgplvm),
                       ("bgplvm_dynamic", lambda: bgplvm(dynamic=True)), ("blr", blr),
                       ("glm", glm)]:
        model, expected = make()
        model.save(os.path.join(HERE, f"{name}.gplvm"))
        np.savez(os.path.join(HERE, f"{name}_expected.npz"), **expected)
        print(name, os.path.getsize(os.path.join(HERE, f"{name}.gplvm")), "bytes")


if __name__ == "__main__":
    main()
