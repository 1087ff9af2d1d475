"""A likelihood the library does not ship, fitted by the RFLVM through its generic paths (issue
33's acceptance: "adding a likelihood to the RFLVM touches one likelihood module plus one test
parametrisation"; issue 30: the likelihood owns its log-density, gradient and curvature in ψ,
and the sampler has no branch per likelihood).

The likelihood is :class:`_toy_likelihood.Geometric`, written in tests/_toy_likelihood.py alone;
nothing in ``src/`` names it.  Checked here: its density against SciPy, its gradient and
curvature (the base class's autodiff) against their closed forms, and RFLVM fits with every
sampler (``'gibbs'`` with the generic elliptical slice on β, ``'nuts'``, ``inference='map'``)
that are finite, have the right shapes, and find the planted latent structure.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import gplvm
from _toy_likelihood import Geometric
from gplvm.likelihoods import get_likelihood, likelihood_class
from gplvm.pytree import pytree_dataclass


def _planted(seed: int = 0, n: int = 60, d: int = 12):
    """Geometric counts from a 1-D latent t (rates a smooth function of t), and t."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(-2.0, 2.0, n))
    centres = np.linspace(-2.0, 2.0, d)
    F = 1.5 - (t[:, None] - centres[None, :]) ** 2          # log-mean, bumps along t
    p = 1.0 / (1.0 + np.exp(F))                             # success probability 1/(1 + μ)
    Y = rng.geometric(p) - 1.0                              # failures before the first success
    return Y.astype(float), t


def test_the_toy_is_registered_by_its_name():
    assert likelihood_class("geometric") is Geometric
    assert isinstance(get_likelihood("geometric"), Geometric)


def test_density_gradient_and_curvature_against_closed_forms():
    rng = np.random.default_rng(1)
    F = rng.normal(size=(7, 3))
    Y = rng.geometric(1.0 / (1.0 + np.exp(F))) - 1.0
    Y[2, 1] = np.nan
    lik = Geometric()
    mu = np.exp(F)
    expected = stats.nbinom(1, 1.0 / (1.0 + mu)).logpmf(np.nan_to_num(Y))
    expected[np.isnan(Y)] = 0.0
    np.testing.assert_allclose(lik.log_prob(Y, F), expected, rtol=1e-12, atol=1e-12)
    sig = 1.0 / (1.0 + np.exp(-F))
    Y0 = np.nan_to_num(Y)
    grad = np.where(np.isnan(Y), 0.0, Y0 - (Y0 + 1.0) * sig)
    curv = np.where(np.isnan(Y), 0.0, (Y0 + 1.0) * sig * (1.0 - sig))
    np.testing.assert_allclose(lik.grad_log_prob(Y, F), grad, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lik.curvature(Y, F), curv, rtol=1e-12, atol=1e-12)
    draws = np.asarray(lik.sample(jax.random.PRNGKey(0), jnp.full((20000, 1), 0.5)))
    assert abs(draws.mean() - np.exp(0.5)) < 0.05 * np.exp(0.5)
    assert abs(draws.var() - np.exp(0.5) * (1 + np.exp(0.5))) < 0.1 * np.exp(0.5) * (
        1 + np.exp(0.5))


SAMPLERS = {
    "gibbs": dict(sampler="gibbs", n_iter=30, burn_in=20, block_size=10),
    "nuts": dict(sampler="nuts", n_iter=20, burn_in=10, block_size=10),
    "map": dict(inference="map"),
}


@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
def test_rflvm_fits_the_toy_with_every_sampler(sampler):
    Y, t = _planted()
    Y[4, 3] = np.nan
    model = gplvm.RFLVM(likelihood=Geometric(), n_components=1, n_features=20, n_chains=1,
                        random_state=0, progress=False, learn_kernel=False,
                        **SAMPLERS[sampler])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # a short run's convergence warning
        model.fit(Y)
    assert model._spec_.likelihood == "geometric"
    assert np.all(np.isfinite(model.history_))
    N, D = Y.shape
    assert model.X_mean_.shape == (N, 1) and np.all(np.isfinite(model.X_mean_))
    mean = model.predict(model.X_mean_)
    assert mean.shape == (N, D) and np.all(np.isfinite(mean)) and np.all(mean > 0)
    assert np.isfinite(model.score(Y[:5]))
    Ys, Xs = model.sample(5, random_state=1)
    assert Ys.shape == (5, D) and np.all(Ys >= 0) and np.all(Ys == np.round(Ys))
    # the planted 1-D structure, loosely: the latent orders the rows as t does
    rho = abs(stats.spearmanr(model.X_mean_[:, 0], t).statistic)
    assert rho > 0.7, rho


def test_a_parameter_the_sampler_would_ignore_is_refused():
    """The sampler builds the likelihood from its state (``from_state``), so a value set on the
    object for a parameter it neither draws nor reads from the data is refused, not dropped."""

    @pytree_dataclass
    class Tilted(Geometric):
        tilt: float = 0.0

    with pytest.raises(ValueError, match=r"tilt=\.\.\. would be ignored"):
        gplvm.RFLVM(likelihood=Tilted(tilt=1.0), progress=False).fit(_planted()[0])


def test_the_generic_weight_step_leaves_the_right_conditional_invariant():
    """The geometric likelihood is the negative binomial with r = 1, so the generic slice on β
    (:func:`sample_beta_slice`, the toy's Gibbs step) and the negative binomial's own
    working-Gaussian slice (:func:`sample_beta_ess` at r = 1) target the same p(β | y, Φ):
    long chains of the two agree in the mean and spread of every weight."""
    from types import SimpleNamespace

    from gplvm.models.rflvm.weights_ess import BetaPrior, sample_beta_ess, sample_beta_slice

    rng = np.random.default_rng(3)
    N, P, D = 25, 3, 2
    Phi = jnp.asarray(np.c_[rng.normal(size=(N, P - 1)), np.ones(N)])
    Y = rng.geometric(0.3, size=(N, D)) - 1.0
    data = SimpleNamespace(Y=jnp.asarray(Y), observed=jnp.ones((N, D)), offset=jnp.zeros((N, 1)))
    mean = np.zeros((P, D))
    mean[-1] = np.log(Y.mean(0) + 0.5)
    prior = BetaPrior(jnp.asarray(mean), jnp.asarray([1.0, 1.0, 0.25]))
    ones = jnp.ones(D)

    def chain(step, n=4000):
        def body(beta, key):
            beta = step(key, beta)[0]
            return beta, beta
        keys = jax.random.split(jax.random.PRNGKey(7), n)
        return np.asarray(jax.jit(lambda: jax.lax.scan(body, prior.mean, keys)[1])())[500:]

    generic = chain(lambda k, b: sample_beta_slice(k, Phi, b, data, prior, Geometric()))
    nb = chain(lambda k, b: sample_beta_ess(k, Phi, b, data, prior, ones))
    sd = nb.std(0)
    assert np.all(np.abs(generic.mean(0) - nb.mean(0)) < 0.15 * sd)
    assert np.all(np.abs(generic.std(0) / sd - 1.0) < 0.15)
