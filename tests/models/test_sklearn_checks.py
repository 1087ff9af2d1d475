"""scikit-learn's estimator checks on the latent-variable estimators (issue 11, item 2).

Every check that scikit-learn generates for an estimator runs here, except those in
``NOT_APPLICABLE``, each with the reason it does not apply.  They are left out because they
test a contract these models do not have, not because they fail:

* ``predict`` of a latent-variable model maps *latent points* X (N*, Q) to the data space
  (API.md: ``predict`` = ``inverse_transform``); scikit-learn's generic checks call
  ``predict(Y)`` with the training data's columns and expect one output per row, so every check
  that does that is about a different verb.
* ``fit_transform(Y)`` returns the fitted q(X) (which, under the dynamical prior, also uses the
  neighbouring frames), ``transform(Y)`` infers each row alone with the model fixed (seed 003
  eqs. 36–37); the two agree only to the optimiser's tolerance, not to 1e-7 as the generic
  transformer checks demand.  ``tests/models/gplvm_family/test_bgplvm.py`` checks that
  transform finds the fitted latents of training rows.
* The "dtype preserved" check expects float32 output for float32 input; the library computes in
  float64 (DESIGN.md) and returns float64.

A test asserts that every name in ``NOT_APPLICABLE`` is a check scikit-learn still generates,
so the list cannot silently outlive a scikit-learn upgrade.

The DP-GP-LVM shares every verb, its validation and its tags with the Bayesian GPLVM
(``AbstractGPLVM``); what is its own is the constructor and the fit schedule.  It runs every
check that does not fit, plus the one-column fit (its own code path: no column mixture), and
leaves to the Bayesian GPLVM the checks in ``SHARED_FIT_CHECKS``, each of which fits at new
shapes and costs 10–50 s of compilation for the DP model's fit
(``tests/models/test_contract.py`` fits it once for every verb).
"""

from __future__ import annotations

import warnings

import pytest
from sklearn.utils.estimator_checks import estimator_checks_generator

import gplvm

_PREDICT_TAKES_LATENTS = ("predict maps latent points (N*, Q) to Y, not data to outputs "
                          "(API.md: predict = inverse_transform)")
_TRANSFORM_IS_NEW_ROW_INFERENCE = ("transform infers each row with the model fixed; "
                                   "fit_transform is the fitted q(X): equal only to the "
                                   "optimiser's tolerance")

NOT_APPLICABLE = {
    "check_n_features_in_after_fitting": _PREDICT_TAKES_LATENTS,
    "check_estimators_dtypes": _PREDICT_TAKES_LATENTS,
    "check_dtype_object": _PREDICT_TAKES_LATENTS,
    "check_estimators_pickle": _PREDICT_TAKES_LATENTS,
    "check_f_contiguous_array_estimator": _PREDICT_TAKES_LATENTS,
    "check_methods_sample_order_invariance": _PREDICT_TAKES_LATENTS,
    "check_methods_subset_invariance": _PREDICT_TAKES_LATENTS,
    "check_dict_unchanged": _PREDICT_TAKES_LATENTS,
    "check_fit_idempotent": _PREDICT_TAKES_LATENTS,
    "check_pipeline_consistency": _PREDICT_TAKES_LATENTS,
    "check_readonly_memmap_input": _PREDICT_TAKES_LATENTS,
    "check_transformer_general": _TRANSFORM_IS_NEW_ROW_INFERENCE,
    "check_transformer_data_not_an_array": _TRANSFORM_IS_NEW_ROW_INFERENCE,
    "check_transformer_preserve_dtypes": "computations are float64 by design (DESIGN.md)",
    "check_array_api_input": "JAX arrays, not the array API of scikit-learn's test harness",
}

SHARED_FIT_CHECKS = {"check_positive_only_tag_during_fit", "check_fit_score_takes_y",
                     "check_dont_overwrite_parameters", "check_fit_check_is_fitted",
                     "check_estimators_overwrite_params", "check_transformer_n_iter",
                     "check_estimators_fit_returns_self", "check_fit2d_predict1d",
                     "check_n_features_in"}
ONLY_ON_BAYESIAN_GPLVM = {"DPGPLVM": SHARED_FIT_CHECKS}

ESTIMATORS = [
    gplvm.BayesianGPLVM(n_components=2, n_inducing=5, max_iter=5, transform_max_iter=3,
                        progress=False),
    gplvm.DPGPLVM(n_components=2, n_inducing=5, truncation=2, max_iter=5, n_warmup=2,
                  steps_per_update=2, merge_steps=2, n_init_steps=5, transform_max_iter=3,
                  progress=False),
    # a fixed kernel: the contract does not depend on the DP mixture over W (tested in
    # test_rflvm_geweke and test_dp_mixture), which doubles each fit's compile time
    gplvm.RFLVM(likelihood="gaussian", sampler="gibbs", n_features=6, n_iter=4, burn_in=2,
                n_chains=1, block_size=2, transform_steps=2, learn_kernel=False, progress=False),
]


def _name(check) -> str:
    return getattr(check, "func", check).__name__


def _applicable():
    for estimator in ESTIMATORS:
        for est, check in estimator_checks_generator(estimator, legacy=True, mark=None):
            shared = ONLY_ON_BAYESIAN_GPLVM.get(type(est).__name__, set())
            if _name(check) not in NOT_APPLICABLE and _name(check) not in shared:
                yield pytest.param(est, check, id=f"{type(est).__name__}-{_name(check)}")


@pytest.mark.parametrize("estimator,check", list(_applicable()))
def test_sklearn_check(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(estimator)


def test_not_applicable_names_are_real_checks():
    generated = {_name(check) for estimator in ESTIMATORS
                 for _, check in estimator_checks_generator(estimator, legacy=True, mark=None)}
    assert set(NOT_APPLICABLE) <= generated
    assert SHARED_FIT_CHECKS <= generated
