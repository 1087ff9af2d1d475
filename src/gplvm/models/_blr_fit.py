"""The functional core of ``BayesianLinearRegression``: −eq. 14 and its L-BFGS restarts, the
conditioning on the fitted hyper-parameters (eqs. 15–17), and the predictive.

The restarts run from a :class:`~gplvm.models.fit_state.BLRFitState` and return the next one,
so that a run stopped by Ctrl-C (or killed after a checkpoint) goes on from where it stopped:
the run in progress from its L-BFGS state (bit for bit, :func:`gplvm.inference.minimise`'s
``start``), the restarts after it from their starts (each a function of ``u0``, ``key`` and its
number), the best finished run as it was.  The estimator in :mod:`gplvm.models.linear_regression`
validates, chooses and stores; the numbers are made here.

Module-level and jitted with the data as arguments, so that restarts, refits and predictions
with the same shapes reuse one compilation instead of running op by op.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gplvm.inference import OptimOptions, minimise
from gplvm.inference.optimise import NonFiniteObjectiveError
from gplvm.models._common import block_expand, freeze_feature_variance
from gplvm.models.fit_state import BLRFitState, BLRRun
from gplvm.objectives import linear_model as lm
from gplvm.transforms import inverse_softplus, softplus


_NON_FINITE = ("every L-BFGS run ended at a non-finite marginal likelihood; check the scale "
               "of X and y or pass initial noise_var/prior_var")


class Outcome(NamedTuple):
    """What :func:`restarts` ends with: the fit state to keep (the run in progress and its
    L-BFGS state when ``interrupted``), the run whose parameters the model takes (the best
    finished one, or the stopped one's iterate when that is better), and the flag."""

    run: BLRFitState
    chosen: BLRRun
    interrupted: bool


def restarts(run: BLRFitState, n_restarts: int, max_iter: int, progress: bool,
             options_for: Callable[[BLRFitState], OptimOptions]) -> Outcome:
    """L-BFGS on −eq. 14 from ``u0`` and ``n_restarts`` perturbed starts, from ``run.restart``
    on (the first from ``run.state`` when set); the largest marginal likelihood wins.

    ``options_for(run)`` gives the :class:`~gplvm.inference.OptimOptions` of the run in
    progress (its ``start``, ``tol`` and checkpoint).  Ctrl-C keeps the best run so far and
    starts no more (the stopped run's iterate counts as a run).

    Raises:
        NonFiniteObjectiveError: eq. 14 or its gradient is non-finite at every start.
        RuntimeError: every run ended at a non-finite marginal likelihood.
    """
    failed = None
    while run.restart <= n_restarts:
        r = run.restart
        start = run.u0 if r == 0 else perturb(run.u0, jax.random.fold_in(run.key, r))
        try:
            res = minimise(neg_lml, start, args=(run.features, run.X, run.y), method="lbfgs",
                           n_iter=max_iter, progress=progress, desc=f"BLR fit {r + 1}",
                           options=options_for(run))
        except NonFiniteObjectiveError as err:  # no finite marginal likelihood there:
            failed = err                            # skip this start
            run = run._replace(restart=r + 1, state=None)
            continue
        value = float(neg_lml_jit(res.params, run.features, run.X, run.y))
        this = BLRRun(value, res.params, res.history, res.n_iter, res.converged)
        if res.interrupted:      # Ctrl-C: keep the best run so far, start no more
            chosen = better(run.best, this)
            if chosen is None:   # the one run so far stopped at a non-finite value
                raise RuntimeError(_NON_FINITE)
            return Outcome(run._replace(state=res.state), chosen, True)
        run = run._replace(restart=r + 1, state=None, best=better(run.best, this))
    if run.best is None and failed is not None:
        raise NonFiniteObjectiveError(
            f"BayesianLinearRegression: the log marginal likelihood (eq. 14) or its gradient "
            f"is non-finite at every one of the {n_restarts + 1} L-BFGS starts "
            f"({failed.what}); rescale X and y or pass noise_var/prior_var",
            failed.params, failed.what) from failed
    if run.best is None:
        raise RuntimeError(_NON_FINITE)
    return Outcome(run, run.best, False)


def better(best: BLRRun | None, this: BLRRun) -> BLRRun | None:
    """The run with the smaller finite −eq. 14 (``best`` on a tie or a non-finite ``this``)."""
    if np.isfinite(this.value) and (best is None or this.value < best.value):
        return this
    return best


def stopped_at(run: BLRFitState, state) -> BLRRun:
    """The best of the finished runs and the iterate of the run in progress at a checkpoint's
    OptimState (what a model written mid-fit holds)."""
    value = float(neg_lml_jit(state.params, run.features, run.X, run.y))
    here = BLRRun(value, state.params, state.history, len(state.history), False)
    chosen = better(run.best, here)
    return here if chosen is None else chosen


# ---------------------------------------------------------------------- compiled helpers

def _unpack(u, fmap):
    fmap = fmap.from_unconstrained(freeze_feature_variance(u["features"]))
    prior = block_expand(softplus(u["prior_var"]), fmap.blocks)
    return fmap, prior, softplus(u["noise_var"])


@jax.jit
def initial_params(fmap, prior_var, noise_var):
    return {"features": fmap.unconstrained(), "prior_var": inverse_softplus(prior_var),
            "noise_var": inverse_softplus(noise_var)}


@jax.jit
def perturb(u0, key):
    """Multiply σ², Λ and every length-scale by exp(ε), ε ~ N(0, 1) (a restart's start)."""
    leaves, tree = jax.tree_util.tree_flatten_with_path(u0)
    keys = jax.random.split(key, len(leaves))

    def perturb_leaf(path, leaf, k):
        names = [p.key for p in path if isinstance(p, jax.tree_util.DictKey)]
        if names and names[-1] in ("noise_var", "prior_var", "lengthscale"):
            theta = softplus(leaf) * jnp.exp(jax.random.normal(k, jnp.shape(leaf)))
            return inverse_softplus(theta)
        return leaf

    new = [perturb_leaf(path, leaf, k) for (path, leaf), k in zip(leaves, keys)]
    return jax.tree_util.tree_unflatten(tree, new)


def neg_lml(u, fmap, X, y):
    """−eq. 14 as a function of the unconstrained hyper-parameters (minimise compiles it)."""
    fm, prior, noise = _unpack(u, fmap)
    return -lm.log_marginal_likelihood(fm(X), y, prior, noise)


neg_lml_jit = jax.jit(neg_lml)


@jax.jit
def condition(u, fmap, X, y):
    """The fitted map, Λ, σ², the weight posterior (eq. 15) and eq. 14 at ``u``."""
    fm, prior, noise = _unpack(u, fmap)
    Phi = fm(X)
    return fm, prior, noise, lm.posterior(Phi, y, prior, noise), \
        lm.log_marginal_likelihood(Phi, y, prior, noise)


@jax.jit
def predict(X, post, fmap):
    return lm.predict(post, fmap(X))


@jax.jit
def weights(post):
    return post.m, post.covariance()
