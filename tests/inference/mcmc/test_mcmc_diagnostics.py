"""Procrustes alignment (exact identities) and ArviZ diagnostics (known R-hat behaviour)."""

from __future__ import annotations

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import ortho_group

from gplvm.inference.mcmc import (align_samples, generalised_procrustes,
                                  pairwise_distance_summary, posterior_mean_aligned,
                                  procrustes_rotation, random_row_pairs, summary_rhat_ess,
                                  to_inference_data)

Q = 3


def _orthogonal(n, seed):
    """Random orthogonal matrices, half of them reflections (det = -1)."""
    R = ortho_group.rvs(Q, size=n, random_state=seed).reshape(n, Q, Q)
    R[::2, :, 0] *= np.sign(np.linalg.det(R[::2]))[:, None]       # even: rotations
    R[1::2, :, 0] *= -np.sign(np.linalg.det(R[1::2]))[:, None]    # odd: reflections
    return R


def test_procrustes_recovers_planted_rotation_and_reflection():
    """reference = X R for a planted orthogonal R (rotation or reflection): the solution is R
    to 1e-10, and the aligned X equals the reference."""
    X = np.random.default_rng(0).normal(size=(40, Q))
    for R in _orthogonal(4, seed=1):
        R_hat = np.asarray(procrustes_rotation(jnp.asarray(X), jnp.asarray(X @ R)))
        np.testing.assert_allclose(R_hat, R, atol=1e-10)
        np.testing.assert_allclose(R_hat @ R_hat.T, np.eye(Q), atol=1e-12)


def test_procrustes_is_the_least_squares_orthogonal_fit():
    """With noise, ||X R̂ - ref|| is no larger than for 200 random orthogonal matrices nor for
    small perturbations of R̂ along the orthogonal group (R̂ expm(εA), A skew)."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, Q))
    ref = X @ _orthogonal(1, seed=2)[0] + 0.3 * rng.normal(size=(30, Q))
    R_hat = np.asarray(procrustes_rotation(jnp.asarray(X), jnp.asarray(ref)))
    best = np.linalg.norm(X @ R_hat - ref)
    others = [np.linalg.norm(X @ R - ref) for R in _orthogonal(200, seed=3)]
    assert best <= min(others)
    from scipy.linalg import expm
    for _ in range(20):
        A = rng.normal(size=(Q, Q))
        assert best <= np.linalg.norm(X @ R_hat @ expm(1e-3 * (A - A.T)) - ref)


def test_align_samples_and_generalised_procrustes_undo_planted_transforms():
    """Draws X0 R_cs (2 chains × 5 draws, rotations and reflections): align_samples onto X0
    returns X0 for every draw and R_csᵀ as the rotations; the generalised-Procrustes mean equals
    X0 G for one orthogonal G (residual < 1e-10), and so do all aligned draws."""
    X0 = np.random.default_rng(4).normal(size=(25, Q))
    R = _orthogonal(10, seed=5).reshape(2, 5, Q, Q)
    samples = jnp.asarray(np.einsum("nq,csqr->csnr", X0, R))
    aligned, rots = align_samples(samples, jnp.asarray(X0))
    np.testing.assert_allclose(aligned, np.broadcast_to(X0, aligned.shape), atol=1e-10)
    np.testing.assert_allclose(rots, np.swapaxes(R, -1, -2), atol=1e-10)

    aligned, mean = generalised_procrustes(samples)
    G = np.asarray(procrustes_rotation(jnp.asarray(X0), mean))
    np.testing.assert_allclose(G @ G.T, np.eye(Q), atol=1e-12)
    np.testing.assert_allclose(mean, X0 @ G, atol=1e-10)
    np.testing.assert_allclose(aligned, np.broadcast_to(X0 @ G, aligned.shape), atol=1e-10)
    np.testing.assert_allclose(posterior_mean_aligned(samples), mean, atol=1e-12)


def test_generalised_procrustes_mean_of_noisy_draws():
    """Noisy rotated copies X0 R + ε (ε ~ N(0, 0.05²), 400 draws): the aligned mean matches X0
    up to one orthogonal G within 0.02 RMS (the noise of the mean is 0.05/20 = 0.0025), whereas
    the unaligned average collapses towards 0 (norm below 30% of X0's)."""
    rng = np.random.default_rng(6)
    X0 = rng.normal(size=(30, Q))
    R = _orthogonal(400, seed=7).reshape(4, 100, Q, Q)
    samples = np.einsum("nq,csqr->csnr", X0, R) + 0.05 * rng.normal(size=(4, 100, 30, Q))
    mean = np.asarray(posterior_mean_aligned(jnp.asarray(samples)))
    G = np.asarray(procrustes_rotation(jnp.asarray(X0), jnp.asarray(mean)))
    assert np.sqrt(np.mean((mean - X0 @ G) ** 2)) < 0.02
    assert np.linalg.norm(samples.mean(axis=(0, 1))) < 0.3 * np.linalg.norm(X0)


def test_pairwise_distances_are_invariant_to_orthogonal_transforms_and_shifts():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(2, 4, 12, Q))
    R = _orthogonal(8, seed=9).reshape(2, 4, Q, Q)
    moved = np.einsum("csnq,csqr->csnr", X, R) + rng.normal(size=(2, 4, 1, Q))
    key = jax.random.PRNGKey(3)
    d0 = pairwise_distance_summary(jnp.asarray(X), n_pairs=10, key=key)
    d1 = pairwise_distance_summary(jnp.asarray(moved), n_pairs=10, key=key)
    assert d0.shape == (2, 4, 10)
    np.testing.assert_allclose(d1, d0, rtol=1e-12)
    pairs = np.asarray(random_row_pairs(key, 12, 10))
    assert np.all(pairs[:, 0] != pairs[:, 1]) and len(set(pairs[:, 0])) == 10
    np.testing.assert_allclose(d0[1, 2, 4], np.linalg.norm(X[1, 2, pairs[4, 0]]
                                                           - X[1, 2, pairs[4, 1]]), rtol=1e-12)


def test_rhat_near_one_for_iid_chains_and_large_for_shifted_chains():
    """4 chains × 1000 iid N(0, 1) draws: rank-normalised R-hat < 1.01 (its sampling spread at
    this size is about 0.002) and bulk ESS > 2000 of 4000.  Shifting one chain's mean by 2 sd
    pushes R-hat above 1.1 (population value ≈ 1.3)."""
    rng = np.random.default_rng(10)
    iid = rng.normal(size=(4, 1000, 2))
    idata = to_inference_data({"theta": iid}, sample_stats={"lp": -0.5 * (iid**2).sum(-1)},
                              dims={"theta": ["dim"]}, coords={"dim": ["a", "b"]})
    assert isinstance(idata, az.InferenceData)
    assert {"posterior", "sample_stats"} <= set(idata.groups())
    rhat = az.rhat(idata)["theta"].values
    ess = az.ess(idata)["theta"].values
    assert np.all(rhat < 1.01) and np.all(ess > 2000), (rhat, ess)

    shifted = iid.copy()
    shifted[3] += 2.0
    table = summary_rhat_ess(to_inference_data({"theta": shifted}), var_names=["theta"])
    assert {"r_hat", "ess_bulk", "ess_tail"} <= set(table.columns)
    assert np.all(table["r_hat"].to_numpy() > 1.1), table


def test_to_inference_data_validates_shapes():
    with pytest.raises(ValueError, match="leading \\(chains, draws\\)"):
        to_inference_data({"x": np.zeros(5)})
    with pytest.raises(ValueError, match="same sweeps"):
        to_inference_data({"x": np.zeros((2, 5))}, sample_stats={"lp": np.zeros((2, 4))})


def test_split_rhat_equals_arviz_split_rhat():
    # The estimator's ArviZ-free convergence flag: classic split R-hat, compared with ArviZ's
    # method="split" on mixed and on well-mixed chains.
    import arviz as az
    from gplvm.inference.mcmc import split_rhat
    rng = np.random.default_rng(0)
    for shift in (0.0, 1.5):
        chains = rng.normal(size=(4, 400)) + shift * np.arange(4)[:, None]
        want = float(az.rhat(az.convert_to_dataset(chains[:, :, None]), method="split")
                     ["x"].values[0])
        assert abs(split_rhat(chains) - want) < 1e-10
