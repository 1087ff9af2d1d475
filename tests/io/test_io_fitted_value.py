"""A saved file holds the constructor parameters, the fitted value and the run state, nothing
else (issue 33; docs/contract.md, "The fitted value").

Each estimator declares its fitted value (``_fitted_fields``, of which ``_optional_fields``
some fits leave unset).  A tiny fit of every estimator and variant is saved: the file's
``fitted`` keys are the declaration less the optional fields that fit left unset, and every
attribute the model has is a parameter, a declared field, the run state or a transient (so an
attribute a fit sets but no declaration names fails here).  An attribute set on a fitted model
by hand, and scikit-learn's per-instance settings, never reach the file; a format-7 file holding
an undeclared attribute is damaged; a file of format 6 and below, which held every instance
attribute (the RFLVM's cache ``_light_`` among them), loads with the declared ones.
"""

from __future__ import annotations

import copy
import json
import warnings

from _format5 import rewrite

import numpy as np
import pandas as pd
import pytest

import gplvm
from gplvm.io.model_file import FIT_STATE, TRANSIENT, UPGRADED_FROM, fitted_fields
from gplvm.registry import estimators, name_of

# ----------------------------------------------------------------------------- more fits
# (rflvm, bgplvm, bgplvm_dynamic, blr and glm are tests/io/conftest.py's)


def _quiet(fit):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # the short runs' ConvergenceWarning
        return fit()


@pytest.fixture(scope="module")
def bgplvm_svi():
    Y = np.sin(np.random.default_rng(1).normal(size=(20, 5)))
    return _quiet(lambda: gplvm.BayesianGPLVM(
        n_components=2, n_inducing=5, inference="svi", batch_size=10, max_iter=2,
        progress=False).fit(Y))


@pytest.fixture(scope="module")
def structured():
    images = np.random.default_rng(2).normal(size=(10, 4, 4))
    images[0, 1, 2] = np.nan
    return _quiet(lambda: gplvm.StructuredGPLVM(
        n_components=2, n_inducing=4, max_iter=3, transform_max_iter=3,
        progress=False).fit(images))


@pytest.fixture(scope="module")
def dpgplvm():
    Y = np.sin(np.random.default_rng(3).normal(size=(20, 5)))
    return _quiet(lambda: gplvm.DPGPLVM(
        n_components=2, n_inducing=4, truncation=2, max_iter=5, n_warmup=2, n_init_steps=3,
        transform_max_iter=3, progress=False).fit(Y))


@pytest.fixture(scope="module")
def rflvm_map():
    Y = np.random.default_rng(4).poisson(2.0, size=(20, 5)).astype(float)
    return _quiet(lambda: gplvm.RFLVM(likelihood="poisson", n_features=10, inference="map",
                                      n_chains=1, progress=False).fit(Y))


@pytest.fixture(scope="module")
def rflvm_nuts():
    """The default sampler: its chain states carry the NUTS block's adaptation state."""
    Y = np.random.default_rng(7).poisson(2.0, size=(20, 5)).astype(float)
    return _quiet(lambda: gplvm.RFLVM(likelihood="poisson", sampler="nuts", n_features=10,
                                      n_iter=8, burn_in=4, n_chains=1, learn_kernel=False,
                                      progress=False).fit(Y))


def _frame(seed):
    X = np.random.default_rng(seed).normal(size=(30, 2))
    return pd.DataFrame(X, columns=["a", "b"]), X


@pytest.fixture(scope="module")
def glm_classifier():
    """Labels (``classes_``) of a data frame's rows (``feature_names_in_``)."""
    frame, X = _frame(5)
    y = np.where(X[:, 0] > 0, "up", "down")
    return _quiet(lambda: gplvm.BayesianGLM("bernoulli", n_features=10, n_mixture=2, n_iter=5,
                                            n_predict_samples=4, progress=False).fit(frame, y))


@pytest.fixture(scope="module")
def blr_frame():
    frame, X = _frame(6)
    return _quiet(lambda: gplvm.BayesianLinearRegression(
        n_features=10, n_restarts=0, max_iter=5).fit(frame, np.sin(X[:, 0])))


FITS = ["rflvm", "rflvm_map", "rflvm_nuts", "bgplvm", "bgplvm_dynamic", "bgplvm_svi", "structured", "dpgplvm",
        "blr", "blr_frame", "glm", "glm_classifier"]


def _model(value):
    return value[0] if isinstance(value, tuple) else value


def _fitted_keys(path):
    with np.load(path, allow_pickle=False) as archive:
        return set(json.loads(archive["__gplvm__"].tobytes().decode("utf-8"))["fitted"])


# ----------------------------------------------------------------------------- declarations


@pytest.mark.parametrize("cls", sorted(estimators(), key=name_of), ids=name_of)
def test_every_estimator_declares_its_fitted_value(cls):
    """Distinct attribute names, none a constructor parameter nor an attribute that files
    keep apart (the run state, the upgrade record) or never hold (the transients); the
    optional ones among them."""
    declared = cls._fitted_fields
    assert isinstance(declared, tuple) and len(set(declared)) == len(declared) > 0
    assert all(isinstance(k, str) and k.isidentifier() for k in declared)
    assert not set(declared) & (set(cls().get_params()) | {FIT_STATE, UPGRADED_FROM}
                                | set(TRANSIENT))
    assert set(getattr(cls, "_optional_fields", ())) <= set(declared)
    assert fitted_fields(cls) == (*declared, UPGRADED_FROM)


def test_every_registered_estimator_is_fitted_here(request):
    assert {type(_model(request.getfixturevalue(f))) for f in FITS} == set(estimators())


# ----------------------------------------------------------------------------- saving


@pytest.mark.parametrize("fixture", FITS)
def test_a_file_holds_the_declared_fitted_value(fixture, request, tmp_path):
    model = _model(request.getfixturevalue(fixture))
    cls = type(model)
    params = model.get_params(deep=False)
    # every attribute of a fitted model is accounted for: a new one must be declared
    assert set(vars(model)) <= (params.keys() | set(cls._fitted_fields) | {FIT_STATE}
                                | set(TRANSIENT))
    unset = {k for k in getattr(cls, "_optional_fields", ()) if k not in vars(model)}
    model.save(tmp_path / "m.gplvm")
    assert _fitted_keys(tmp_path / "m.gplvm") == set(cls._fitted_fields) - unset


def test_every_optional_field_is_set_by_some_fit_here(request):
    """Each optional field is one that a fit sets (else it should not be declared), or the
    data's column names ``feature_names_in_``, which ``gplvm fit`` gives a latent-variable
    model (tests/cli/test_cli.py reads them back from its model file)."""
    set_somewhere = {(type(m), k) for m in (_model(request.getfixturevalue(f)) for f in FITS)
                     for k in vars(m)}
    for cls in estimators():
        for name in getattr(cls, "_optional_fields", ()):
            assert (cls, name) in set_somewhere or name == "feature_names_in_", \
                (cls.__name__, name)


@pytest.mark.parametrize("fixture", ["bgplvm", "rflvm", "blr"])
def test_an_undeclared_attribute_does_not_reach_the_file(fixture, request, tmp_path):
    """Attributes set on a fitted model by hand, public or private, and scikit-learn's
    per-instance settings stay out of the file; the loaded model has none of them and the
    same outputs."""
    model = copy.copy(_model(request.getfixturevalue(fixture)))
    model.extra_ = 1.0
    model._cache = np.zeros(3)
    if hasattr(model, "set_output"):
        model.set_output(transform="default")
        assert "_sklearn_output_config" in vars(model)
    model.save(tmp_path / "m.gplvm")
    keys = _fitted_keys(tmp_path / "m.gplvm")
    assert not keys & {"extra_", "_cache", *TRANSIENT}
    loaded = gplvm.load(tmp_path / "m.gplvm")
    assert not {"extra_", "_cache", *TRANSIENT} & set(vars(loaded))
    assert set(vars(loaded)) == set(vars(model)) - {"extra_", "_cache", *TRANSIENT}
    X = model.X_mean_[:3] if hasattr(model, "X_mean_") else request.getfixturevalue(fixture)[1]
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


# ----------------------------------------------------------------------------- loading


def test_a_format_7_file_holding_an_undeclared_attribute_is_damaged(blr, tmp_path):
    path = tmp_path / "m.gplvm"
    blr[0].save(path)
    rewrite(path, lambda d: d["fitted"].update({"extra_": 1.0, "_cache": None}))
    with pytest.raises(ValueError, match="damaged file: its fitted value holds '_cache', "
                                         "'extra_', which gplvm.BayesianLinearRegression "
                                         "does not declare"):
        gplvm.load(path)


def test_an_older_file_loads_with_its_declared_attributes(rflvm, tmp_path):
    """A format-6 RFLVM file held its light draws ``_light_`` (a cache of ``_result_``) and
    whatever else the model had: they are dropped, the model rebuilds the light draws when
    ``to_arviz`` asks, and its outputs are the saved model's."""
    model, Y = rflvm
    path = tmp_path / "m.gplvm"
    model.save(path)
    saved = _fitted_keys(path)

    def as_format6(document):
        document["format_version"] = 6
        fitted = document["fitted"]
        fitted["_light_"] = {"$": "dict", "keys": ["alpha"], "values": [fitted["X_var_"]]}
        fitted["extra_"] = 1.0

    rewrite(path, as_format6)
    loaded = gplvm.load(path)
    assert getattr(loaded, UPGRADED_FROM) == 6
    assert set(vars(loaded)) == set(vars(model)) | {UPGRADED_FROM}
    np.testing.assert_array_equal(loaded.impute(Y), model.impute(Y))
    alpha = loaded.to_arviz().posterior["alpha"].values
    np.testing.assert_array_equal(alpha, model.to_arviz().posterior["alpha"].values)
    np.testing.assert_array_equal(alpha, np.asarray(model._result_.draws["alpha"]))
    # saved again by today's code: format 7, the record of the upgrade kept
    loaded.save(path)
    assert _fitted_keys(path) == saved | {UPGRADED_FROM}
    assert getattr(gplvm.load(path), UPGRADED_FROM) == 6
