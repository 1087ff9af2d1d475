"""Files users saved before issue 11 (format 1) still load and still give the same answers.

tests/data/legacy_v1 holds one model file per estimator, written by the code of commit 311bb9a
(see make_files.py there), and beside each ``<name>_expected.npz`` with outputs that model gave
when it was saved.  :func:`gplvm.load` translates the format-1 class names and hands the old
attributes to the estimator's ``_upgrade_fitted``; the loaded model must then

* be an estimator of the class that was saved, with ``n_features_in_`` the number of columns
  it was fitted on;
* give the stored outputs again — latent means (and variances), predictions at the stored
  latent or input points, ``predict_times`` for the dynamical model — to 1e-10 of the largest
  stored magnitude: the file holds the same numbers, so only the rounding of recomputed
  intermediates may differ.  That is not a few units of 1e-16 everywhere: a predictive
  variance k** − kᵀK⁻¹k is a difference of nearly equal terms whose round-off grows with
  cond(K_uu) and depends on the BLAS kernel and the vector width of the CPU that computes it
  (measured 1.7e-13 and 2.7e-13 of the largest entry for the two Bayesian GPLVM files); 1e-10
  leaves room for that on any CPU and still fails on any change of a stored parameter;
* run every verb of its contract (../shared/API.md) with finite outputs of the right shapes:
  ``transform``/``impute``/``score``/``sample`` for the latent models, ``predict``/``score``
  (and ``predict_proba`` for the GLM) for the supervised ones.

Inputs the files do not store are regenerated exactly as make_files.py drew them; where the
file stores the same draw (X of the supervised models), the regeneration is checked against it.
"""

from __future__ import annotations

import json

from _paths import LEGACY

import numpy as np
import pytest
from sklearn.utils.validation import check_is_fitted

import gplvm

RTOL = 1e-10   # see the module docstring


def _format_version(name: str) -> int:
    with np.load(LEGACY / f"{name}.gplvm", allow_pickle=False) as archive:
        return json.loads(archive["__gplvm__"].tobytes().decode("utf-8"))["format_version"]


_CACHE: dict[str, object] = {}


def _load(name: str):
    """The loaded model (once per file) and the outputs stored with it."""
    if name not in _CACHE:
        assert _format_version(name) == 1          # the test data really is format 1
        _CACHE[name] = gplvm.load(LEGACY / f"{name}.gplvm")
    with np.load(LEGACY / f"{name}_expected.npz", allow_pickle=False) as archive:
        expected = {k: archive[k] for k in archive.files}
    return _CACHE[name], expected


def assert_reproduces(actual, expected, where: str) -> None:
    actual = np.asarray(actual)
    assert actual.shape == expected.shape, f"{where}: shape {actual.shape} != {expected.shape}"
    np.testing.assert_allclose(actual, expected, rtol=RTOL,
                               atol=RTOL * np.max(np.abs(expected)), err_msg=where)


def assert_finite(value, shape, where: str) -> None:
    value = np.asarray(value)
    assert value.shape == shape, f"{where}: shape {value.shape} != {shape}"
    assert np.all(np.isfinite(value)), f"{where}: not finite"


# ----------------------------------------------------------------------------- inputs


def rflvm_Y() -> np.ndarray:
    """make_files.rflvm's data: Poisson(2) counts, two entries missing."""
    Y = np.random.default_rng(0).poisson(2.0, size=(30, 6)).astype(float)
    Y[0, 1] = Y[3, 4] = np.nan
    return Y


def blr_data(X_stored: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(2)
    X = rng.normal(size=(30, 2))
    np.testing.assert_array_equal(X, X_stored)       # the regeneration is make_files' draw
    return X, np.sin(X[:, 0]) + 0.1 * rng.normal(size=30)


def glm_data(X_stored: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 2))
    np.testing.assert_array_equal(X, X_stored)
    return X, rng.binomial(5, 1 / (1 + np.exp(-X[:, 0]))).astype(float)


# ----------------------------------------------------------------------------- loading


@pytest.mark.parametrize("name, cls, n_features", [
    ("rflvm", gplvm.RFLVM, 6), ("bgplvm", gplvm.BayesianGPLVM, 5),
    ("bgplvm_dynamic", gplvm.BayesianGPLVM, 5), ("blr", gplvm.BayesianLinearRegression, 2),
    ("glm", gplvm.BayesianGLM, 2)])
def test_loads_the_estimator_that_was_saved(name, cls, n_features):
    model, _ = _load(name)
    assert type(model) is cls
    check_is_fitted(model)
    assert model.n_features_in_ == n_features


@pytest.mark.parametrize("name", ["blr", "glm"])
def test_a_file_from_before_checkpoints_is_a_finished_fit(name):
    """A format-1 file has no run state: resume() returns the model unchanged."""
    model, _ = _load(name)
    assert getattr(model, "_fit_state_", None) is None
    assert model.resume() is model and not model.interrupted_


# ----------------------------------------------------------------------------- stored outputs


def test_rflvm_reproduces_its_outputs():
    model, expected = _load("rflvm")
    assert_reproduces(model.X_mean_, expected["X_mean"], "X_mean_")
    assert_reproduces(model.predict(expected["X"]), expected["predict"], "predict")


def test_rflvm_file_gets_the_count_layouts_it_predates():
    # The file predates RFLVMData's count layouts (issue 14); loading lays them out from its
    # own data, in _data_ and in every chain's copy, as prepare_data does for a fresh fit:
    # here checked against the file's counts directly.
    from scipy.special import gammaln
    model, _ = _load("rflvm")
    Y = rflvm_Y()
    positive = Y[~np.isnan(Y) & (np.nan_to_num(Y) > 0)]
    chains = model._result_.state[1]
    for data, lead in ((model._data_, ()), (chains, (model.n_chains,))):
        y, col = (np.asarray(a) for a in data.nonzero)
        assert y.shape == col.shape == lead + positive.shape
        np.testing.assert_array_equal(np.sort(y.reshape(-1, positive.size)[0]),
                                      np.sort(positive))
        np.testing.assert_allclose(np.asarray(data.log_factorial),
                                   np.full(lead, gammaln(positive + 1).sum()), rtol=1e-12)


@pytest.mark.parametrize("name", ["bgplvm", "bgplvm_dynamic"])
def test_bgplvm_reproduces_its_outputs(name):
    model, expected = _load(name)
    assert_reproduces(model.X_mean_, expected["X_mean"], "X_mean_")
    assert_reproduces(model.X_var_, expected["X_var"], "X_var_")
    mean, var = model.predict(expected["X"], return_var=True)
    assert_reproduces(mean, expected["predict"], "predict mean")
    assert_reproduces(var, expected["predict_var"], "predict variance")


def test_dynamical_bgplvm_reproduces_predict_times():
    model, expected = _load("bgplvm_dynamic")
    X_mean = model.predict_times(expected["t_new"], sequence=1)[0]
    assert_reproduces(X_mean, expected["predict_times_X"], "predict_times")


def test_linear_regression_reproduces_its_predictions():
    model, expected = _load("blr")
    mean, std = model.predict(expected["X"], return_std=True)
    assert_reproduces(mean, expected["predict"], "predict mean")
    assert_reproduces(std, expected["predict_std"], "predict std")


# ----------------------------------------------------------------------------- verbs


def _latent_case(name: str):
    model, expected = _load(name)
    Y = rflvm_Y() if name == "rflvm" else expected["Y"]
    return model, Y, expected["X_mean"].shape[1]


@pytest.mark.parametrize("name", ["rflvm", "bgplvm", "bgplvm_dynamic"])
def test_latent_verbs_run(name):
    model, Y, Q = _latent_case(name)
    N, D = Y.shape
    Y_new = Y[:3].copy()
    Y_new[0, 1] = np.nan
    mean, var = model.transform(Y_new, return_var=True)
    assert_finite(mean, (3, Q), "transform mean")
    assert_finite(var, (3, Q), "transform variance")
    assert np.all(np.asarray(var) > 0), "transform variance"
    imputed = np.asarray(model.impute(Y))
    assert_finite(imputed, (N, D), "impute")
    observed = ~np.isnan(Y)
    np.testing.assert_array_equal(imputed[observed], Y[observed])   # only NaN entries change
    assert_finite(model.score(Y), (), "score")


@pytest.mark.parametrize("name", ["rflvm", "bgplvm", "bgplvm_dynamic"])
def test_latent_sample_runs(name):
    """``sample`` returns ``(Y, X)``: data in original units and the latent points behind it;
    the same random_state gives the same draw."""
    model, Y, Q = _latent_case(name)
    drawn = model.sample(3, random_state=0)
    assert isinstance(drawn, tuple) and len(drawn) == 2, "sample must return (Y, X)"
    assert_finite(drawn[0], (3, Y.shape[1]), "sampled Y")
    assert_finite(drawn[1], (3, Q), "sampled X")
    again = model.sample(3, random_state=0)
    for a, b in zip(drawn, again):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_linear_regression_verbs_run():
    model, expected = _load("blr")
    X, y = blr_data(expected["X"])
    assert_finite(model.score(X, y), (), "score")


def test_glm_verbs_run():
    model, expected = _load("glm")
    X, y = glm_data(expected["X"])
    assert_finite(model.predict(X), (30,), "predict")
    proba = np.asarray(model.predict_proba(X))
    assert proba.shape[0] == 30 and np.all(np.isfinite(proba)), "predict_proba"
    assert np.all((proba >= 0) & (proba <= 1)), "predict_proba outside [0, 1]"
    assert_finite(model.score(X, y), (), "score")
