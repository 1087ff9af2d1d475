"""``RFLVM(frequencies='fixed')``: W held at one draw from the fixed kernel's spectral density,
shared by every chain (random Fourier features; issue 30: the model NumPyro's fixed-W peer
samples).  That the sweeps leave p(X, β, σ² | W) invariant is the Geweke test's
``poisson-fixed-w-nuts`` and ``gaussian-fixed-w`` cases (``test_rflvm_geweke.py``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gplvm

KW = dict(n_components=1, n_features=10, n_iter=70, burn_in=50, n_chains=3, learn_kernel=False,
          progress=False, random_state=2)


def _data():
    rng = np.random.default_rng(0)
    t = np.linspace(-2, 2, 30)
    return rng.poisson(np.exp(np.stack([np.sin(t + j) for j in range(5)], axis=1))).astype(
        float)


@pytest.mark.parametrize("likelihood, sampler", [("poisson", "gibbs"), ("poisson", "nuts"),
                                                 ("gaussian", "gibbs"), ("gaussian", "nuts")])
def test_one_draw_of_w_for_every_chain_never_moved(likelihood, sampler):
    """Every chain's W is chain 0's start in every sweep (the stored draws and the chains'
    last states); no frequency proposal is made (accept_rate_ NaN); the latents move."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fixed = gplvm.RFLVM(likelihood=likelihood, sampler=sampler, frequencies="fixed",
                            **KW).fit(_data())
    W = np.asarray(fixed._result_.state[0].W)                  # (chains, M/2, Q), last states
    draws = np.asarray(fixed._result_.heavy["W"])               # raw (unaligned) stored draws
    np.testing.assert_array_equal(W, np.broadcast_to(W[0], W.shape))
    np.testing.assert_array_equal(draws, np.broadcast_to(W[0], draws.shape))
    # the fitted W_samples_ are in the latents' common frame: W0 turned by each draw's
    # alignment (Q = 1: a sign)
    np.testing.assert_allclose(np.abs(fixed.W_samples_), np.abs(np.broadcast_to(
        W[0], fixed.W_samples_.shape)), rtol=1e-12)
    assert np.isnan(fixed.accept_rate_)
    assert np.ptp(fixed.X_samples_, axis=1).min() > 0.0


def test_fixed_frequencies_refuse_a_learnt_kernel_naming_the_fix():
    with pytest.raises(ValueError, match=r"frequencies='fixed'.*learn_kernel=False"):
        gplvm.RFLVM(frequencies="fixed", learn_kernel=True, progress=False).fit(_data())
