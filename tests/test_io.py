"""``save(path)`` / ``gplvm.load(path)`` (API.md): a versioned file that loading never executes.

For each estimator a tiny fit is saved and loaded; the loaded model must give the same outputs
bit for bit and hold the same fitted state.  Then the file's guarantees: no pickled objects, a
class outside the whitelist or an unknown format version is refused with a ValueError, and an
unfitted estimator cannot be saved.
"""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.exceptions import NotFittedError

import gplvm
from gplvm.features import RandomFourierFeatures
from gplvm.io import FORMAT_VERSION
from gplvm.kernels import RBF
from gplvm.likelihoods import Binomial

# ----------------------------------------------------------------------------- fitted models


@pytest.fixture(scope="module")
def rflvm():
    rng = np.random.default_rng(0)
    Y = rng.poisson(2.0, size=(30, 6)).astype(float)
    Y[0, 1] = Y[3, 4] = np.nan
    model = gplvm.RFLVM(likelihood="poisson", n_features=10, n_iter=16, burn_in=8, n_chains=1,
                        block_size=8, transform_steps=3, progress=False, random_state=0)
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


def _reload(model, tmp_path):
    path = tmp_path / "model.gplvm"
    model.save(path)
    assert path.exists() and not (tmp_path / "model.gplvm.npz").exists()
    return gplvm.load(path)


# ----------------------------------------------------------------------------- comparison


def assert_same(a, b, where="model"):
    """Equal values of equal types, recursively (arrays: dtype, shape and every bit)."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, jax.Array) and jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
        assert_same(jax.random.key_data(a), jax.random.key_data(b), where)
        assert jax.random.key_impl(a) == jax.random.key_impl(b), where
    elif isinstance(a, (np.ndarray, np.generic, jax.Array)):
        assert a.dtype == b.dtype and np.shape(a) == np.shape(b), where
        assert_array_equal(np.asarray(a), np.asarray(b), err_msg=where)
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b), where
        for i, (u, v) in enumerate(zip(a, b)):
            assert_same(u, v, f"{where}[{i}]")
    elif dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            assert_same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b), where
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def assert_same_state(model, loaded):
    assert_same(model.get_params(deep=False), loaded.get_params(deep=False), "params")
    assert sorted(vars(model)) == sorted(vars(loaded))
    for name in vars(model):
        assert_same(getattr(model, name), getattr(loaded, name), name)


def assert_same_outputs(a, b):
    """Identical outputs (tuples of arrays or scalars)."""
    assert_same(a, b, "output")


# ----------------------------------------------------------------------------- round trips


def test_rflvm_round_trip(rflvm, tmp_path):
    model, Y = rflvm
    loaded = _reload(model, tmp_path)
    assert type(loaded) is gplvm.RFLVM
    assert_same_state(model, loaded)
    assert loaded.W_samples_ is loaded._draws_["W"]      # one array saved once, shared again
    Y_new = Y[:4].copy()
    Y_new[1, 2] = np.nan
    assert_latent_verbs_agree(model, loaded, Y, Y_new, model.X_mean_[:5])
    assert_same_outputs(model.impute(Y_new), loaded.impute(Y_new))


def assert_latent_verbs_agree(model, loaded, Y, Y_new, X):
    """transform / predict / impute / score / sample give the same outputs after loading."""
    assert_same_outputs(model.transform(Y_new, return_var=True),
                        loaded.transform(Y_new, return_var=True))
    assert_same_outputs(model.predict(X, return_var=True), loaded.predict(X, return_var=True))
    assert_same_outputs(model.impute(Y), loaded.impute(Y))
    assert_same_outputs(model.score(Y_new), loaded.score(Y_new))
    assert_same_outputs(model.sample(3, random_state=7), loaded.sample(3, random_state=7))


def test_bgplvm_round_trip(bgplvm, tmp_path):
    model, Y = bgplvm
    loaded = _reload(model, tmp_path)
    assert type(loaded) is gplvm.BayesianGPLVM
    assert_same_state(model, loaded)
    assert_same_outputs(model.relevance_, loaded.relevance_)
    Y_new = Y[:3].copy()
    Y_new[0, 1] = np.nan
    assert_latent_verbs_agree(model, loaded, Y, Y_new, model.X_mean_[:4])


def test_dynamical_bgplvm_round_trip(tmp_path):
    """The dynamical prior's state (sequence layout, time kernel) survives too."""
    rng = np.random.default_rng(4)
    t = np.tile(np.arange(8.0), 2)
    Y = np.column_stack([np.sin(t), np.cos(t), t / 8]) + 0.1 * rng.normal(size=(16, 3))
    model = gplvm.BayesianGPLVM(n_components=1, n_inducing=4, max_iter=5, random_state=0,
                                progress=False).fit(Y, times=t, groups=np.repeat([0, 1], 8))
    loaded = _reload(model, tmp_path)
    assert_same_state(model, loaded)
    t_new = np.array([2.5, 9.0])
    assert_same_outputs(model.predict_times(t_new, sequence=1, return_var=True),
                        loaded.predict_times(t_new, sequence=1, return_var=True))


def test_linear_regression_round_trip(blr, tmp_path):
    model, X, y = blr
    loaded = _reload(model, tmp_path)
    assert type(loaded) is gplvm.BayesianLinearRegression
    assert_same_state(model, loaded)
    assert_same_outputs(model.predict(X, return_std=True), loaded.predict(X, return_std=True))
    assert_same_outputs(model.score(X, y), loaded.score(X, y))
    assert_same_outputs(model.weights_posterior(), loaded.weights_posterior())


def test_glm_round_trip(glm, tmp_path):
    model, X, y = glm
    loaded = _reload(model, tmp_path)
    assert type(loaded) is gplvm.BayesianGLM
    assert_same_state(model, loaded)
    assert_same_outputs(model.predict(X, return_std=True), loaded.predict(X, return_std=True))
    assert_same_outputs(model.predict_proba(X), loaded.predict_proba(X))
    assert_same_outputs(model.score(X, y), loaded.score(X, y))


# ----------------------------------------------------------------------------- the file


def _rewrite(path, change):
    """Apply ``change`` to the file's JSON document and write the file back."""
    with np.load(path, allow_pickle=False) as archive:
        entries = {name: archive[name] for name in archive.files}
    document = json.loads(entries["__gplvm__"].tobytes().decode("utf-8"))
    change(document)
    entries["__gplvm__"] = np.frombuffer(json.dumps(document).encode(), dtype=np.uint8)
    with open(path, "wb") as file:
        np.savez(file, **entries)


@pytest.fixture
def saved(blr, tmp_path):
    path = tmp_path / "blr.npz"
    blr[0].save(path)
    return path


def test_file_is_versioned_and_holds_no_pickled_objects(saved):
    with np.load(saved, allow_pickle=False) as archive:
        entries = {name: archive[name] for name in archive.files}
    assert not any(a.dtype.hasobject for a in entries.values())
    document = json.loads(entries["__gplvm__"].tobytes().decode("utf-8"))
    assert document["format_version"] == FORMAT_VERSION
    assert document["gplvm_version"] == gplvm.__version__
    assert document["class"].endswith(".BayesianLinearRegression")
    assert set(document["params"]) == set(gplvm.BayesianLinearRegression().get_params())


@pytest.mark.parametrize("where", ["top", "nested"])
def test_class_outside_the_whitelist_is_refused(saved, where):
    def tamper(document):
        if where == "top":
            document["class"] = "os.system"
        else:
            document["fitted"]["features_"]["class"] = "subprocess.Popen"

    _rewrite(saved, tamper)
    with pytest.raises(ValueError, match="not one gplvm.load may rebuild"):
        gplvm.load(saved)


def test_whitelisted_non_estimator_at_top_level_is_refused(saved):
    _rewrite(saved, lambda d: d.update({"class": "gplvm.kernels.stationary.RBF"}))
    with pytest.raises(ValueError, match="not a gplvm estimator"):
        gplvm.load(saved)


@pytest.mark.parametrize("version", [FORMAT_VERSION + 1, 0, "1", None])
def test_unknown_format_version_is_refused(saved, version):
    _rewrite(saved, lambda d: d.update({"format_version": version}))
    with pytest.raises(ValueError, match="format version"):
        gplvm.load(saved)


@pytest.mark.parametrize("write", [lambda f: np.savez(f, x=np.zeros(3)),
                                   lambda f: np.save(f, np.zeros(3))], ids=["npz", "npy"])
def test_other_numpy_files_are_refused(tmp_path, write):
    path = tmp_path / "other"
    with open(path, "wb") as file:
        write(file)
    with pytest.raises(ValueError, match="not a gplvm file"):
        gplvm.load(path)


@pytest.mark.parametrize("damage", [
    lambda d: d["fitted"]["features_"].update({"fields": []}),
    lambda d: d["fitted"]["posterior_"]["fields"]["m"].update({"ref": "a999"}),
    lambda d: d["params"].update({"no_such_parameter": 1}),
    lambda d: d["fitted"].update({"__class__": 1}),
], ids=["fields", "array", "parameter", "attribute"])
def test_damaged_document_is_refused(saved, damage):
    _rewrite(saved, damage)
    with pytest.raises(ValueError, match="damaged file"):
        gplvm.load(saved)


@pytest.mark.parametrize("cls", [gplvm.RFLVM, gplvm.BayesianGPLVM,
                                 gplvm.BayesianLinearRegression, gplvm.BayesianGLM])
def test_unfitted_save_raises_not_fitted(cls, tmp_path):
    with pytest.raises(NotFittedError):
        cls().save(tmp_path / "unfitted.npz")
    assert not (tmp_path / "unfitted.npz").exists()
