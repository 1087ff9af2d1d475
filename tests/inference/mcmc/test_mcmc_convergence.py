"""Rank-normalised split R-hat and bulk ESS (:mod:`gplvm.inference.mcmc.convergence`) against
ArviZ, which implements the same paper independently, and against chains of known ESS."""

from __future__ import annotations

import arviz as az   # a test dependency (pyproject's `test` extra)
import numpy as np
import pytest

from gplvm.inference.mcmc.convergence import bulk_ess, rank_rhat


def _ar1(rng, phi: float, n_chains: int, n_draws: int, shift=None) -> np.ndarray:
    x = np.zeros((n_chains, n_draws))
    x[:, 0] = rng.standard_normal(n_chains)
    noise = np.sqrt(1 - phi**2) * rng.standard_normal((n_chains, n_draws))
    for t in range(1, n_draws):
        x[:, t] = phi * x[:, t - 1] + noise[:, t]
    return x if shift is None else x + np.asarray(shift)[:, None]


@pytest.mark.parametrize("phi,shift,n_draws", [(0.0, None, 500), (0.9, None, 1001),
                                              (0.5, [0, 0, 0, 2.0], 300),
                                              (-0.3, None, 64)])
def test_equal_to_arviz(phi, shift, n_draws):
    """The same figures as ``arviz.rhat(method='rank')`` and ``arviz.ess(method='bulk')`` (the
    same algorithm; only the order of floating-point sums may differ: 1e-10 relative)."""
    x = _ar1(np.random.default_rng(5), phi, 4, n_draws, shift)
    ds = az.convert_to_dataset(x[:, :, None])
    np.testing.assert_allclose(rank_rhat(x), float(az.rhat(ds, method="rank").to_array()
                                                   .values.ravel()[0]), rtol=1e-10)
    np.testing.assert_allclose(bulk_ess(x), float(az.ess(ds, method="bulk").to_array()
                                                  .values.ravel()[0]), rtol=1e-10)


def test_ess_of_ar1_chains_matches_its_integrated_autocorrelation_time():
    """AR(1) with φ = 0.8 has τ = (1 + φ)/(1 − φ) = 9, so 4 × 20,000 draws have ESS ≈ 8,889;
    the estimator's relative error at this length is a few per cent (15% allowed)."""
    x = _ar1(np.random.default_rng(0), 0.8, 4, 20_000)
    assert abs(bulk_ess(x) / (x.size / 9.0) - 1) < 0.15
    assert rank_rhat(x) < 1.01


def test_rhat_flags_a_chain_elsewhere_and_undefined_cases_are_nan():
    """One chain shifted by 3 sd: R-hat far above 1.01.  Constant, too short or non-finite
    chains: NaN, not a number that looks converged."""
    rng = np.random.default_rng(1)
    assert rank_rhat(_ar1(rng, 0.0, 4, 400, [0, 0, 0, 3.0])) > 1.2
    assert np.isnan(rank_rhat(np.ones((4, 100))))
    assert np.isnan(bulk_ess(np.zeros((4, 3))))
    x = rng.standard_normal((4, 100))
    x[1, 5] = np.inf
    assert np.isnan(bulk_ess(x))
    with pytest.raises(ValueError, match="expected"):
        rank_rhat(np.zeros(10))
