"""Fitted models shared by the tests of saved files (tests/io): one tiny fit of each kind,
fitted once per test module that asks for it (module scope), and never changed by a test (a
test that alters a model alters a copy)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gplvm
from gplvm.features import RandomFourierFeatures
from gplvm.kernels import RBF
from gplvm.likelihoods import Binomial



@pytest.fixture(scope="module")
def rflvm():
    rng = np.random.default_rng(0)
    Y = rng.poisson(2.0, size=(30, 6)).astype(float)
    Y[0, 1] = Y[3, 4] = np.nan
    model = gplvm.RFLVM(likelihood="poisson", n_features=10, n_iter=16, burn_in=8, n_chains=1,
                        sampler="gibbs", block_size=8, transform_steps=3, progress=False,
                        random_state=0)
    return model.fit(Y), Y


@pytest.fixture(scope="module")
def bgplvm():
    rng = np.random.default_rng(1)
    Y = np.sin(rng.normal(size=(20, 2)) @ rng.normal(size=(2, 5)))
    Y[2, 0] = np.nan
    model = gplvm.BayesianGPLVM(n_components=2, n_inducing=5, kernel=RBF(jnp.ones(2), 1.0),
                                max_iter=20, transform_max_iter=5, random_state=0,
                                progress=False)
    return model.fit(Y), Y


@pytest.fixture(scope="module")
def bgplvm_dynamic():
    rng = np.random.default_rng(4)
    t = np.tile(np.arange(8.0), 2)
    Y = np.column_stack([np.sin(t), np.cos(t), t / 8]) + 0.1 * rng.normal(size=(16, 3))
    model = gplvm.BayesianGPLVM(n_components=1, n_inducing=4, max_iter=5, random_state=0,
                                progress=False)
    return model.fit(Y, times=t, groups=np.repeat([0, 1], 8))


@pytest.fixture(scope="module")
def blr():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(30, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=30)
    features = RandomFourierFeatures.create(RBF(lengthscale=1.0), 10, 2, jax.random.PRNGKey(3))
    model = gplvm.BayesianLinearRegression(features=features, n_restarts=0, max_iter=10)
    return model.fit(X, y), X, y


@pytest.fixture(scope="module")
def glm():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 2))
    y = rng.binomial(5, 1 / (1 + np.exp(-X[:, 0]))).astype(float)
    model = gplvm.BayesianGLM(Binomial(n_trials=5), n_features=10, n_mixture=2, n_iter=10,
                              n_predict_samples=8, random_state=jax.random.key(4),
                              progress=False)
    return model.fit(X, y), X, y
