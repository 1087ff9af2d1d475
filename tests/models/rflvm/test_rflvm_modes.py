"""Chains stuck in separate modes are told apart from chains still in transit (issue 30, item
1: "where chains still land in separate modes, say so ... rather than reporting a mixture of
stuck chains as a posterior").  Planted chains of known structure: stationary AR(1) chains
around given means, and chains with a planted drift."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

import gplvm
from gplvm.models.rflvm.convergence import (MODE_GAP_SDS, convergence_figures, describe,
                                            describe_modes, describe_transit, separate_modes)


def _ar1(means, n=600, rho=0.5, sd=1.0, seed=0):
    """Stationary AR(1) chains with marginal sd ``sd`` around ``means`` (one per chain)."""
    rng = np.random.default_rng(seed)
    eps = rng.normal(size=(len(means), n)) * sd * np.sqrt(1 - rho**2)
    x = np.empty_like(eps)
    x[:, 0] = rng.normal(size=len(means)) * sd
    for t in range(1, n):
        x[:, t] = rho * x[:, t - 1] + eps[:, t]
    return x + np.asarray(means, float)[:, None]


def test_chains_that_agree_are_one_mode():
    assert separate_modes(_ar1([0.0, 0.0, 0.0, 0.0])) is None
    figures = convergence_figures(_ar1([-500.0] * 4), np.zeros((4, 600, 3, 1)))
    assert figures["n_modes"] == 1.0 and "modes" not in describe(figures)


def test_stationary_chains_far_apart_are_grouped_by_mode_from_the_best():
    """Means 0, 0.1, -20 and -40 sds: three modes, the first holding chains 0 and 1."""
    chains = _ar1([0.0, -40.0, 0.1, -20.0], sd=1.0)
    assert separate_modes(chains) == [[2, 0], [3], [1]] or \
        separate_modes(chains) == [[0, 2], [3], [1]]
    text = describe_modes(chains)
    assert "3 separate modes" in text and "n_chains" in text and "chain 3" in text
    figures = convergence_figures(chains, np.zeros((4, 600, 3, 1)))
    assert figures["n_modes"] == 3.0 and describe(figures).endswith(", 3 modes")


def test_the_gap_threshold_is_the_stated_number_of_within_chain_sds():
    """Two chains whose means are 0.8 and 1.25 times the threshold apart (in their sd): one
    mode, then two.  Long, nearly independent chains, so the sample means and sds are within
    a few percent of the planted ones."""
    close = _ar1([0.0, -0.8 * MODE_GAP_SDS], n=20000, rho=0.1, seed=3)
    far = _ar1([0.0, -1.25 * MODE_GAP_SDS], n=20000, rho=0.1, seed=3)
    assert separate_modes(close) is None
    assert separate_modes(far) == [[0], [1]]


def test_chains_still_drifting_are_not_called_modes():
    """Offset chains that each drift by 30 sds over the run: their halves disagree, so the
    remedy is more sweeps, and no mode is claimed."""
    trend = np.linspace(0.0, 30.0, 600)
    chains = _ar1([0.0, -20.0, -40.0, -60.0]) + trend
    assert separate_modes(chains) is None
    assert describe_modes(chains) == ""
    text = describe_transit(chains)
    assert "still in transit" in text and "4 of 4 chains" in text
    assert describe_transit(_ar1([0.0, 0.0, 0.0, 0.0])) == ""     # stationary and agreeing
    assert describe_transit(_ar1([0.0, -40.0])) == ""               # stationary, apart


def test_the_warning_projects_sweeps_for_chains_in_transit_not_for_separate_modes():
    """More sweeps are the remedy for chains in transit, so the warning says how many ESS would
    need at its rate; not for chains stuck in separate modes, where they do not help."""
    from gplvm.models.rflvm.convergence import describe_shortfall

    figures = {"ess_log_lik": 40.0, "ess_distances": 80.0, "n_draws": 600, "n_modes": 1.0}
    climbing = _ar1([0.0, -20.0, -40.0, -60.0]) + np.linspace(0.0, 30.0, 600)
    text = describe_shortfall(figures, climbing, 400, 0.5)
    assert "still in transit" in text and "ESS 400 in ~5,400 more sweeps, ~45 min" in text
    stuck = _ar1([-100.0, -300.0, -100.0, -300.0], n=600)
    text = describe_shortfall({**figures, "n_modes": 2.0}, stuck, 400, 0.5)
    assert "2 separate modes" in text and "current rate" not in text


@pytest.mark.parametrize("bad", [np.zeros((4, 600)), np.full((4, 600), np.nan),
                                 _ar1([0.0, -40.0])[:, :5], _ar1([0.0])])
def test_undefined_cases_claim_no_modes(bad):
    """Constant or non-finite chains, too few draws, one chain: nothing to tell."""
    assert separate_modes(bad) is None


def test_the_fit_s_warning_says_the_chains_sit_in_separate_modes():
    """A fitted model whose kept log-likelihood is replaced by planted stuck chains: the
    not-converged warning of an ``n_iter='auto'`` run names the modes and the remedy."""
    kw = dict(sampler="gibbs", n_components=1, n_features=10, n_iter=40, burn_in=20,
              n_chains=4, learn_kernel=False, progress=False, random_state=1)
    rng = np.random.default_rng(0)
    Y = rng.poisson(3.0, size=(30, 4)).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = gplvm.RFLVM(**kw).fit(Y)
    model.history_ = np.concatenate([np.zeros((4, 20)), _ar1([-100.0, -300.0, -100.0,
                                                               -300.0], n=600)], axis=1)
    model.n_iter, model.max_iter, model.n_iter_ = "auto", 620, 620
    message = model._not_converged(1.0, 0.5)
    assert "2 separate modes" in message and "not the posterior" in message
    model.history_[:, 20:] += np.linspace(0.0, 400.0, 600)       # now each chain climbs
    assert "still in transit" in model._not_converged(1.0, 0.5)
