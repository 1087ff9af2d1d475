"""Faults during a fit: a non-finite objective or gradient mid-run loses no fit (issue 16 item 2).

NaN (or +inf) is injected into Rosenbrock's function at a chosen iteration k: the objective
takes a ``flag`` array through ``args``, 0 until the optimiser's callback for iteration k − 1
sets it to the fault (the compiled step reads the array afresh at every call).  Three faults —
the value NaN, the value +inf, the gradient NaN with the value intact (a custom JVP) — at
k = 0, 1, 2, 5, 10, for each method :func:`minimise` supports.  Every run must end either

* at k = 0, with :class:`NonFiniteObjectiveError` (there is no finite point to keep), or
* with finite parameters, a ``RuntimeWarning`` naming iteration k, a finite history, and the
  parameters equal to the last iterate at which the method evaluated the objective finite.

Which iterate that is follows from when each method evaluates (``it[j]``: the start for j = 0,
else the parameters the callback saw after iteration j − 1; the fault is on from ``it[k]`` on):

* ``lbfgsb``: SciPy evaluates ``it[k]`` inside iteration k − 1's line search, before the fault,
  and accepts it; iteration k's line search meets the fault: ``it[k]`` is kept.
* ``lbfgs``: optax's line search also evaluated ``it[k]`` before the fault (its value and
  gradient come from its state); in iteration k no trial step has a finite value and slope,
  the line search falls back on a zero step, and the run stops at ``it[k]``.
* ``adam``: evaluates at ``it[k]`` only in iteration k, under the fault: a value fault rolls
  back to ``it[k-1]``; a gradient fault (finite value at ``it[k]``) keeps ``it[k]``.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gplvm
from gplvm.inference.optimise import NonFiniteObjectiveError, OptimOptions, minimise
from gplvm.models import glm as glm_module

START = {"x": jnp.asarray(-1.2), "y": jnp.asarray(1.0)}
FAULTS = {"nan": np.nan, "inf": np.inf, "gradient": np.nan}
AT = (0, 1, 2, 5, 10)
METHODS = ("lbfgs", "lbfgsb", "adam")


def _rosenbrock(p):
    """Rosenbrock's function, minimum 0 at (1, 1): ~35 L-BFGS iterations from START."""
    return (1.0 - p["x"]) ** 2 + 100.0 * (p["y"] - p["x"] ** 2) ** 2


@jax.custom_jvp
def _poison_gradient(x, flag):
    """The identity, whose derivative is multiplied by 1 + flag (NaN when flag is NaN)."""
    return x


@_poison_gradient.defjvp
def _poison_gradient_jvp(primals, tangents):
    x, flag = primals
    return x, tangents[0] * (1.0 + flag)


def value_fault(p, flag):
    return _rosenbrock(p) + flag


def gradient_fault(p, flag):
    return _rosenbrock({k: _poison_gradient(v, flag) for k, v in p.items()})


def value_fault_keyed(p, key, flag):
    return value_fault(p, flag)


def gradient_fault_keyed(p, key, flag):
    return gradient_fault(p, flag)


def _objective(method, fault):
    if method == "adam":
        return gradient_fault_keyed if fault == "gradient" else value_fault_keyed
    return gradient_fault if fault == "gradient" else value_fault


def _expected_iterate(method, fault, k):
    if method == "adam":
        return k if fault == "gradient" else k - 1
    return k


def _run(method, fault, k):
    """The faulty run: (result or the error, the iterates, the warnings)."""
    flag = np.zeros(())
    iterates = [{k_: np.asarray(v) for k_, v in START.items()}]

    def callback(i, params, value):
        iterates.append({k_: np.asarray(v).copy() for k_, v in params.items()})
        if i == k - 1:
            flag[...] = FAULTS[fault]

    if k == 0:
        flag[...] = FAULTS[fault]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = minimise(_objective(method, fault), START, args=(flag,), method=method,
                              n_iter=60, progress=False,
                              options=OptimOptions(learning_rate=0.01, callback=callback))
        except NonFiniteObjectiveError as err:
            result = err
    return result, iterates, [w for w in caught if issubclass(w.category, RuntimeWarning)]


@pytest.mark.parametrize("method", METHODS)
def test_injected_faults_lose_no_fit(method):
    outcomes = {"named error at the start": 0, "finite parameters and a warning": 0}
    for fault in FAULTS:
        for k in AT:
            result, iterates, caught = _run(method, fault, k)
            where = f"{method}, {fault} fault at iteration {k}"
            assert all(np.all(np.isfinite(list(it.values()))) for it in iterates), where
            if k == 0:
                assert isinstance(result, NonFiniteObjectiveError), where
                assert isinstance(result, ValueError) and "starting parameters" in str(result)
                assert result.what == ("gradient" if fault == "gradient" else "objective")
                start = {k_: float(v) for k_, v in result.result.params.items()}
                assert result.result.n_iter == 0 and start == {k_: float(v) for k_, v in
                                                               START.items()}
                outcomes["named error at the start"] += 1
                continue
            assert not isinstance(result, Exception), f"{where}: {result}"
            params = {k_: float(v) for k_, v in result.params.items()}
            assert np.all(np.isfinite(list(params.values()))), where
            assert np.all(np.isfinite(result.history)) and not result.converged, where
            assert len(caught) == 1 and f"at iteration {k} " in str(caught[0].message), where
            expected = iterates[_expected_iterate(method, fault, k)]
            assert params == {k_: float(v) for k_, v in expected.items()}, where
            outcomes["finite parameters and a warning"] += 1
    print(f"\n{method}: {len(FAULTS) * len(AT)} injected faults, {outcomes}, 0 lost fits")


@pytest.mark.parametrize("method", METHODS)
def test_runs_without_faults_are_unchanged(method):
    """The checks add nothing to a finite run: a zero flag gives Rosenbrock's own run.

    The objective with its flag is another compiled program than Rosenbrock's alone, which
    may fuse (and so round) differently: the runs agree to round-off carried through 40
    iterations (1e-9 relative), where a check that changed the run would move it by far more.
    """
    fun = _objective(method, "nan")
    plain = (lambda p, key: _rosenbrock(p)) if method == "adam" else _rosenbrock
    step = OptimOptions(learning_rate=0.01)
    clean = minimise(fun, START, args=(np.zeros(()),), method=method, n_iter=40,
                     progress=False, options=step)
    reference = minimise(plain, START, method=method, n_iter=40, progress=False, options=step)
    assert len(clean.history) == len(reference.history)
    np.testing.assert_allclose(clean.history, reference.history, rtol=1e-9, atol=1e-12)
    for name in START:
        np.testing.assert_allclose(float(clean.params[name]), float(reference.params[name]),
                                   rtol=1e-9)


def test_optax_line_search_still_rejects_non_finite_trial_steps():
    """A NaN region is not a fault to stop at while a finite step remains: from x = 0, optax's
    line search shortens the step out of {x > 0.5} (where (x − 10)² is undefined) and reaches
    its edge; only there, with no finite step left, does the run stop (with a warning)."""
    def nan_beyond_half(p):
        return jnp.where(p["x"] > 0.5, jnp.nan, (p["x"] - 10.0) ** 2)

    with pytest.warns(RuntimeWarning, match="no trial step of the line search"):
        res = minimise(nan_beyond_half, {"x": jnp.asarray(0.0)}, method="lbfgs", n_iter=20,
                       progress=False)
    assert 0.4 < float(res.params["x"]) <= 0.5 and res.n_iter >= 2


def test_glm_fit_with_a_fault_keeps_the_last_finite_state(monkeypatch):
    """A BayesianGLM fit whose objective turns NaN at Adam step 6 ends fitted, with finite
    predictions and a warning naming iteration 6: its state is exactly that of the same fit
    interrupted (Ctrl-C) after step 5, the last one whose objective was finite, and its
    history the first 6 values of the uninterrupted fit's."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=40)
    kw = dict(n_features=10, n_mixture=2, n_iter=20, random_state=0, progress=False)
    real, k = glm_module.minimise, 6

    def with_fault(fun, params, *, args, options, **rest):
        flag = np.zeros(())

        def faulty(p, key, flag, *rest):
            return fun(p, key, *rest) + flag

        def callback(i, p, value):
            if i == k - 1:
                flag[...] = np.nan

        return real(faulty, params, args=(flag, *args),
                    options=options._replace(callback=callback), **rest)

    def interrupted_at(fun, params, *, options, **rest):
        def callback(i, p, value):
            if i == k - 1:
                raise KeyboardInterrupt

        return real(fun, params, options=options._replace(callback=callback), **rest)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = gplvm.BayesianGLM(**kw).fit(X, y)
        monkeypatch.setattr(glm_module, "minimise", interrupted_at)
        stopped = gplvm.BayesianGLM(**kw).fit(X, y)
    monkeypatch.setattr(glm_module, "minimise", with_fault)
    with pytest.warns(RuntimeWarning, match=f"at iteration {k} "):
        faulty = gplvm.BayesianGLM(**kw).fit(X, y)
    assert faulty.n_iter_ == k and np.all(np.isfinite(faulty.history_))
    np.testing.assert_array_equal(faulty.history_, full.history_[:k])
    np.testing.assert_array_equal(faulty.weights_mean_, stopped.weights_mean_)
    prediction = faulty.predict(X[:5])
    assert np.all(np.isfinite(prediction))
    np.testing.assert_array_equal(prediction, stopped.predict(X[:5]))


def _bound_with_flag(u, flag, problem):
    """The Bayesian GPLVM's negative bound plus ``flag`` (module level: compiled once)."""
    from gplvm.models.gplvm_family.bound import negative_bound
    return negative_bound(u, problem) + flag


def test_bgplvm_fit_with_a_persistent_fault_keeps_the_last_finite_state(monkeypatch):
    """A BayesianGPLVM fit whose bound turns NaN at L-BFGS iteration 5 and stays NaN (every
    restart at a larger jitter meets it at its start) ends with finite parameters, the first 6
    values of the clean fit's history (iterate 5 included) and warnings: the restarts catch the optimiser's
    NonFiniteObjectiveError and climb the jitter rungs until the policy gives up."""
    from gplvm.models.gplvm_family import collapsed_run as bgplvm_module
    Y = np.random.default_rng(1).normal(size=(20, 4))
    kw = dict(n_components=2, n_inducing=5, max_iter=8, random_state=0, progress=False)
    real, k, flag = bgplvm_module.minimise, 5, np.zeros(())

    def with_fault(fun, params, *, args, options, **rest):
        def callback(i, p, value):
            if i == k - 1:
                flag[...] = np.nan

        return real(_bound_with_flag, params, args=(flag, *args),
                    options=options._replace(callback=callback), **rest)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clean = gplvm.BayesianGPLVM(**kw).fit(Y)
    monkeypatch.setattr(bgplvm_module, "minimise", with_fault)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        faulty = gplvm.BayesianGPLVM(**kw).fit(Y)
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert any(f"at iteration {k} " in m for m in messages), messages
    assert any("stayed non-finite" in m for m in messages), messages
    # optax's line search evaluated iterate k before the fault (module docstring): kept
    assert faulty.n_iter_ == k + 1 and faulty.jitter_ > clean.jitter_
    np.testing.assert_array_equal(faulty.history_, clean.history_[:k + 1])
    for leaf in jax.tree_util.tree_leaves(faulty.params_):
        assert np.all(np.isfinite(np.asarray(leaf)))
    assert np.all(np.isfinite(faulty.X_mean_)) and np.isfinite(faulty.elbo_)
    assert np.all(np.isfinite(faulty.predict(faulty.X_mean_[:3])))


def test_bgplvm_non_finite_at_the_start_climbs_the_jitter_ladder_then_names_the_start(
        monkeypatch):
    """A bound that is NaN at the start at every jitter: the fit climbs the Kuu jitter rungs
    from the start (a warning per rung) and, when the policy gives up, raises the start's own
    NonFiniteObjectiveError (it names the starting parameters), not a fitted model."""
    from gplvm.models.gplvm_family import collapsed_run as bgplvm_module
    Y = np.random.default_rng(1).normal(size=(20, 4))
    real, flag = bgplvm_module.minimise, np.full((), np.nan)
    monkeypatch.setattr(bgplvm_module, "minimise", lambda fun, params, *, args, **rest:
                        real(_bound_with_flag, params, args=(flag, *args), **rest))
    with warnings.catch_warnings(record=True) as caught, \
            pytest.raises(NonFiniteObjectiveError, match="starting parameters"):
        warnings.simplefilter("always")
        gplvm.BayesianGPLVM(n_components=2, n_inducing=5, max_iter=8, random_state=0,
                            progress=False).fit(Y)
    rungs = [w for w in caught if "raising the Kuu jitter" in str(w.message)]
    assert len(rungs) >= 2


def test_bgplvm_many_inducing_points_in_two_dimensions_start_at_a_larger_jitter():
    """M = 100 inducing points in Q = 2 (200 S-curve rows, 5 columns): at the default jitter K_uu is
    singular to round-off and the bound is NaN at the start; the fit raises the jitter from
    the start (warned) and runs, instead of blaming the data."""
    from gplvm.data import make_s_curve
    Y = make_s_curve("gaussian", n_samples=200, n_outputs=5, random_state=0).Y
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = gplvm.BayesianGPLVM(n_components=2, n_inducing=100, max_iter=2, random_state=0,
                                    progress=False).fit(Y)
    assert any("raising the Kuu jitter" in str(w.message) for w in caught)
    assert np.isfinite(model.elbo_) and np.all(np.isfinite(model.history_))
    assert model.jitter_ > 0 and model.n_iter_ == 2
