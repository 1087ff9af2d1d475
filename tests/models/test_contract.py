"""One contract for every estimator (API.md; issue 11, item 2).

Every estimator joins these tests by being added to ``LATENT`` (unsupervised latent-variable
models: ``fit(Y)``, ``transform``, ``predict``/``inverse_transform``, ``impute``, ``sample``,
``score``) or ``SUPERVISED`` (``fit(X, y)``, ``predict``).  What each test asserts is a property
of the contract, not a number: the same return types and units for the same verb in every
model, keyword-only arguments after scikit-learn's ``y``, reproducibility from the default
``random_state``, rows independent of each other given the fitted model, exact answers to
"is this the training data?", unfitted use raising ``NotFittedError``, and NaN support declared in
scikit-learn's tags.  scikit-learn's own estimator checks run in ``test_sklearn_checks.py``.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from functools import partial
from typing import Callable

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils import get_tags

import gplvm


def gaussian_data(n=24, d=5, seed=0):
    rng = np.random.default_rng(seed)
    t = rng.uniform(-2, 2, size=(n, 1))
    return np.sin(t @ rng.normal(size=(1, d)) + rng.uniform(0, 3, d)) + 0.1 * rng.normal(
        size=(n, d))


def count_data(n=24, d=5, seed=0):
    rng = np.random.default_rng(seed)
    return rng.poisson(np.exp(gaussian_data(n, d, seed))).astype(float)


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[..., object]      # keyword arguments override the fast settings
    data: Callable[[], np.ndarray]

    def __repr__(self):
        return self.name


def _bgplvm(**kw):
    return gplvm.BayesianGPLVM(**{"n_components": 2, "n_inducing": 6, "max_iter": 15,
                                  "transform_max_iter": 10, "progress": False, **kw})


def _dpgplvm(**kw):
    return gplvm.DPGPLVM(**{"n_components": 2, "n_inducing": 6, "truncation": 3, "max_iter": 15,
                            "n_warmup": 5, "steps_per_update": 5, "merge_steps": 5,
                            "transform_max_iter": 10, "progress": False, **kw})


def _sgplvm(**kw):
    return gplvm.StructuredGPLVM(**{"n_components": 2, "n_inducing": 6,
                                    "grid": np.arange(5.0)[:, None], "max_iter": 15,
                                    "transform_max_iter": 10, "progress": False, **kw})


def _rflvm(likelihood):
    def make(**kw):
        # a fixed kernel: the contract does not depend on the DP mixture over W (its own
        # tests), which doubles the compile time of each fit
        return gplvm.RFLVM(**{"likelihood": likelihood, "sampler": "gibbs", "n_features": 10,
                              "n_iter": 12, "burn_in": 6, "n_chains": 1, "block_size": 6,
                              "transform_steps": 3, "learn_kernel": False, "progress": False,
                              **kw})
    return make


#: the latent-variable estimators; a new model joins every test below by one line here
LATENT = [
    Case("BayesianGPLVM", _bgplvm, gaussian_data),
    Case("DPGPLVM", _dpgplvm, gaussian_data),
    Case("StructuredGPLVM", _sgplvm, gaussian_data),
    Case("RFLVM-gaussian", _rflvm("gaussian"), gaussian_data),
    Case("RFLVM-poisson", _rflvm("poisson"), count_data),
]

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning",
                                        "ignore::RuntimeWarning")


@pytest.fixture(scope="module", params=LATENT, ids=repr)
def fitted(request):
    case = request.param
    Y = case.data()
    return case, case.make().fit(Y), Y


def test_init_only_stores_arguments_and_clones(fitted):
    case, model, _ = fitted
    fresh = case.make()
    params = fresh.get_params(deep=False)
    signature = inspect.signature(type(fresh).__init__).parameters
    assert set(params) == set(signature) - {"self"}
    assert signature["random_state"].default == 0
    assert clone(model).get_params(deep=False).keys() == params.keys()
    assert not any(k.endswith("_") for k in vars(fresh))


def test_unfitted_use_raises_not_fitted(fitted):
    case, _, Y = fitted
    fresh = case.make()
    for call in (lambda: fresh.transform(Y), lambda: fresh.predict(np.zeros((2, 2))),
                 lambda: fresh.impute(Y), lambda: fresh.sample(2), lambda: fresh.score(Y)):
        with pytest.raises(NotFittedError):
            call()


def test_fit_returns_self_and_sets_the_shared_attributes(fitted):
    _, model, Y = fitted
    assert model.n_features_in_ == Y.shape[1]
    N, Q = Y.shape[0], model.n_components
    assert model.X_mean_.shape == model.X_var_.shape == (N, Q)
    assert np.all(model.X_var_ > 0)
    # one ARD profile per latent dimension; the DP-GP-LVM gives one per used atom (issue 12)
    expected = (model.n_column_groups_, Q) if hasattr(model, "n_column_groups_") else (Q,)
    assert model.relevance_.shape == expected
    assert isinstance(model.n_iter_, int) and isinstance(model.converged_, bool)
    assert np.all(np.isfinite(model.history_))


def test_arguments_after_y_are_keyword_only(fitted):
    """scikit-learn passes labels as the second positional argument; they must be ignored and
    nothing else may be taken positionally (times=, offset=, ...)."""
    case, model, Y = fitted
    parameters = list(inspect.signature(model.fit).parameters.values())
    assert [p.name for p in parameters[:2]] == ["Y", "y"]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters[2:])
    labels = np.arange(Y.shape[0]) % 3
    with_labels = case.make().fit(Y, labels)
    np.testing.assert_array_equal(with_labels.X_mean_, model.X_mean_)


def test_default_random_state_reproduces_the_fit(fitted):
    case, model, Y = fitted
    again = case.make().fit(Y)
    np.testing.assert_array_equal(again.X_mean_, model.X_mean_)
    np.testing.assert_array_equal(again.sample(3)[0], model.sample(3)[0])


def test_sample_returns_data_and_latents_in_original_units(fitted):
    _, model, Y = fitted
    Ys, Xs = model.sample(4)
    assert Ys.shape == (4, Y.shape[1]) and Xs.shape == (4, model.n_components)
    assert np.all(np.isfinite(Ys))
    X = model.X_mean_[:3]
    Ys, Xs = model.sample(X=X, random_state=1)
    np.testing.assert_array_equal(Xs, X)
    assert Ys.shape == (3, Y.shape[1])


def test_predict_checks_latent_columns_and_matches_inverse_transform(fitted):
    """``return_var`` is predict's second argument in every estimator (issue 33: the
    structured model's ``predict(X, True)`` used to mean ``grid=True``)."""
    _, model, _ = fitted
    X = model.X_mean_[:4]
    mean, var = model.predict(X, True)
    np.testing.assert_array_equal(model.predict(X, return_var=True)[1], var)
    assert mean.shape == var.shape == (4, model.n_features_in_) and np.all(var > 0)
    np.testing.assert_array_equal(model.inverse_transform(X), mean)
    with pytest.raises(ValueError, match="columns"):
        model.predict(np.zeros((2, model.n_components + 1)))


def test_new_rows_and_points_follow_the_fits_magnitude_rule(fitted):
    """One magnitude rule for every entry point (issue 31): what fit refuses (an entry above
    1e150, whose square overflows; tests/models/test_bad_input_matrix.py) transform, impute, score
    and predict refuse too, with the same message, before any computation."""
    _, model, Y = fitted
    huge = Y[:2].copy()
    huge[1, 0] = 1e300
    calls = {"transform": lambda: model.transform(huge), "impute": lambda: model.impute(huge),
             "score": lambda: model.score(huge),
             "predict": lambda: model.predict(np.full((2, model.n_components), 1e300))}
    for verb, call in calls.items():
        with pytest.raises(ValueError, match=r"entries larger than 1e\+150 in magnitude"):
            call()
    if hasattr(model, "_layout"):                   # the structured model's pixel coordinates
        layout = model._layout
        grid = (tuple(np.linspace(0.0, 1e300, 3) for _ in layout.axes) if layout.axes
                is not None else np.linspace(0.0, 1e300, 3)[:, None])
        with pytest.raises(ValueError, match=r"grid has .*larger than 1e\+150"):
            model.predict(model.X_mean_[:1], grid=grid)


def test_rows_are_independent_given_the_fitted_model(fitted):
    """A row's latent, prediction and imputation do not depend on the other rows of the call:
    equal up to the rounding of programs compiled for another number of rows (one may fuse a
    multiply-add the other does not: 1 ulp seen with LLVM's optimisation off,
    tests/conftest.py); another row's influence would show far above 1e-13."""
    _, model, Y = fitted
    Y_new = Y[:4].copy()
    Y_new[1, 0] = np.nan
    X_batch = model.transform(Y_new)
    filled = model.impute(Y_new)
    same = partial(np.testing.assert_allclose, rtol=1e-13, atol=1e-15)
    for i in range(4):
        same(model.transform(Y_new[i:i + 1])[0], X_batch[i])
        same(model.impute(Y_new[i:i + 1])[0], filled[i])
    P = model.predict(X_batch)
    same(model.predict(X_batch[2:3])[0], P[2])


@pytest.mark.parametrize("case", [c for c in LATENT if c.data is gaussian_data], ids=repr)
def test_score_is_in_original_units(case):
    """Standardisation makes the fit of a·Y that of Y, so the log density of a·Y* must be that
    of Y* shifted by −n_obs·log a (the Jacobian); a score in standardised units would not move.
    a = 8, a power of two, scales means and standard deviations exactly, so the standardised
    data and hence the fits (MCMC chains included) are the same bit for bit.  (Count
    likelihoods are not standardised: their score is already in counts.)"""
    Y = case.data()
    a = 8.0
    model, scaled = case.make().fit(Y), case.make().fit(a * Y)
    n_obs = np.sum(~np.isnan(Y[:3]))
    np.testing.assert_allclose(scaled.score(a * Y[:3]), model.score(Y[:3]) - n_obs * np.log(a),
                               rtol=1e-6)


def test_impute_of_the_training_data_is_exact_about_what_it_is(fitted):
    """The training data is recognised exactly: a changed observed value is new data."""
    _, model, Y = fitted
    Y_missing = Y.copy()
    assert np.array_equal(model.impute(Y_missing), Y_missing)    # nothing missing, nothing filled
    Y_other = Y.copy()
    Y_other[0, 0] = np.nextafter(Y_other[0, 0], np.inf)
    assert model.impute(Y_other)[0, 0] == Y_other[0, 0]


def test_nan_support_is_declared(fitted):
    _, model, _ = fitted
    assert get_tags(model).input_tags.allow_nan


def test_save_load_keeps_every_verb(fitted, tmp_path):
    _, model, Y = fitted
    model.save(tmp_path / "m.gplvm")
    loaded = gplvm.load(tmp_path / "m.gplvm")
    np.testing.assert_array_equal(loaded.transform(Y[:2]), model.transform(Y[:2]))
    np.testing.assert_array_equal(loaded.predict(model.X_mean_[:2]),
                                  model.predict(model.X_mean_[:2]))
    assert loaded.score(Y[:2]) == model.score(Y[:2])


# ----------------------------------------------------------------------------- supervised


def regression_data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    return X, np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=n)


def classification_data(n=40, seed=0):
    X, f = regression_data(n, seed)
    return X, np.where(f > 0, "yes", "no")


#: the supervised estimators (revrand's models, seed 002)
SUPERVISED = [
    Case("BayesianLinearRegression",
         lambda **kw: gplvm.BayesianLinearRegression(**{"n_features": 20, "n_restarts": 0,
                                                        "max_iter": 30, **kw}),
         regression_data),
    Case("BayesianGLM-gaussian",
         lambda **kw: gplvm.BayesianGLM(**{"n_features": 20, "n_mixture": 2, "n_iter": 30,
                                           "n_predict_samples": 16, "progress": False, **kw}),
         regression_data),
    Case("BayesianGLM-bernoulli",
         lambda **kw: gplvm.BayesianGLM(**{"likelihood": "bernoulli", "n_features": 20,
                                           "n_mixture": 2, "n_iter": 30,
                                           "n_predict_samples": 16, "progress": False, **kw}),
         classification_data),
]


@pytest.fixture(scope="module", params=SUPERVISED, ids=repr)
def fitted_supervised(request):
    case = request.param
    X, y = case.data()
    return case, case.make().fit(X, y), X, y


def test_supervised_contract(fitted_supervised):
    """Arguments stored only, random_state 0 by default and reproducible, n_features_in_,
    unfitted use raises, predictions of a row independent of the other rows, bit for bit."""
    case, model, X, y = fitted_supervised
    fresh = case.make()
    assert inspect.signature(type(fresh).__init__).parameters["random_state"].default == 0
    assert not any(k.endswith("_") for k in vars(fresh))
    with pytest.raises(NotFittedError):
        fresh.predict(X)
    assert model.n_features_in_ == X.shape[1]
    again = case.make().fit(X, y)
    np.testing.assert_array_equal(again.predict(X), model.predict(X))
    P = model.predict(X[:5])
    for i in range(5):      # up to the rounding of a program compiled for 1 row, not 5
        one = model.predict(X[i:i + 1])[0]
        if np.issubdtype(P.dtype, np.number):
            np.testing.assert_allclose(one, P[i], rtol=1e-13, atol=1e-15)
        else:               # class labels
            assert one == P[i]
    if hasattr(model, "predict_proba"):
        assert set(model.classes_) == set(np.unique(y))
        proba = model.predict_proba(X[:5])
        np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-12)
        np.testing.assert_array_equal(model.predict(X[:5]),
                                      model.classes_[np.argmax(proba, axis=1)])
